// Builds the dashboard's third-party UI pieces into its embedded assets.
//
//   node build.mjs [OUT]
//
// OUT defaults to dashboard/assets/vendor (the committed copy); the dashboard's test
// builds into a temporary folder and compares. The pieces are the npm packages pinned
// in package.json / package-lock.json (install them with `npm ci`): each bundle is our
// glue code in src/ with what it imports, bundled and minified by esbuild with fixed
// options, so the same lock file gives the same bytes on every machine and every run
// (no timestamps, no absolute paths, no source maps). It writes:
//
//   explorer.js     the GraphQL explorer: CodeMirror 6, cm6-graphql, graphql-js
//   reference.js    the API reference: Swagger UI (swagger-ui-dist's bundle)
//   swagger-ui.css  Swagger UI's style sheet, as the package ships it
//   LICENSES.txt    the licence of every package in the bundles
import { build } from "esbuild";
import { copyFileSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = resolve(process.argv[2] || join(here, "..", "..", "dashboard", "assets", "vendor"));

const bundles = [
  { entry: "src/explorer.js", file: "explorer.js" },
  { entry: "src/reference.js", file: "reference.js" },
];
const copies = [{ from: "node_modules/swagger-ui-dist/swagger-ui.css", file: "swagger-ui.css" }];

rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });

// packages maps each npm package in the output to the files that use it.
const packages = new Map();
function use(pkgDir, file) {
  if (!packages.has(pkgDir)) packages.set(pkgDir, new Set());
  packages.get(pkgDir).add(file);
}

for (const b of bundles) {
  const result = await build({
    absWorkingDir: here,
    entryPoints: [b.entry],
    outfile: join(out, b.file),
    bundle: true,
    minify: true,
    format: "iife",
    platform: "browser",
    target: ["es2020"],
    legalComments: "none", // the licences are in LICENSES.txt
    sourcemap: false,
    metafile: true,
    define: { "process.env.NODE_ENV": '"production"' },
    logLevel: "warning",
  });
  for (const input of Object.keys(result.metafile.inputs)) {
    const m = input.match(/^node_modules\/((?:@[^/]+\/)?[^/]+)\//);
    if (m) use(m[1], b.file);
  }
}
for (const c of copies) {
  copyFileSync(join(here, c.from), join(out, c.file));
  use(c.from.match(/^node_modules\/((?:@[^/]+\/)?[^/]+)\//)[1], c.file);
}

// LICENSES.txt: for each package, its version, licence and the licence's text, and
// the notices a package ships for what it bundles itself.
const licenceFile = (dir) => readdirSync(dir).filter((f) => /^(licen[cs]e|copying)(\.|$)/i.test(f)).sort()[0];
let text = "Third-party software in the dashboard's vendor assets, built by tools/dashboard-assets/build.mjs.\n";
for (const name of [...packages.keys()].sort()) {
  const dir = join(here, "node_modules", name);
  const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
  text += "\n" + "=".repeat(78) + "\n";
  text += `${name} ${pkg.version} (${pkg.license || "see below"}), in ${[...packages.get(name)].sort().join(", ")}\n`;
  text += "=".repeat(78) + "\n\n";
  const lf = licenceFile(dir);
  if (!lf) throw new Error(`${name} ships no licence file`);
  text += readFileSync(join(dir, lf), "utf8").trim() + "\n";
  for (const extra of ["NOTICE", "swagger-ui-bundle.js.LICENSE.txt"]) {
    if (existsSync(join(dir, extra))) {
      text += `\n--- ${name}/${extra} (the software it bundles) ---\n\n` + readFileSync(join(dir, extra), "utf8").trim() + "\n";
    }
  }
}
writeFileSync(join(out, "LICENSES.txt"), text);
