// Measures the dashboard's pages in Debian's Chromium with playwright-core: for each
// page, the time from the navigation's start until it is usable (a server-rendered
// page: its load event, its scripts being deferred and small; the GraphQL explorer:
// editor ready and schema loaded; the API reference: the operations drawn), with
// DOMContentLoaded and load, and the bytes the page transferred (compressed where the
// server compressed them) and their decoded size. Each run starts with an empty cache;
// it prints the median of the runs, and each run, as JSON.
//
//   node dashboard-perf.mjs BASE_URL API_KEY [RUNS] [CHROMIUM]
//
// BASE_URL is a running server's root (go run ./examples/server), API_KEY a key to
// sign in with. Figures depend on the machine: compare them only with figures taken
// on the same machine in the same run.
import { chromium } from "playwright-core";

const [base, key, runsArg, browserPath] = process.argv.slice(2);
if (!base || !key) {
  process.stderr.write("usage: node dashboard-perf.mjs BASE_URL API_KEY [RUNS] [CHROMIUM]\n");
  process.exit(2);
}
const runs = Number(runsArg || 5);
// patience is how long, in milliseconds, a wait lasts before it fails (Playwright's
// default is 30 seconds): a busy machine may be slow, and then its figures say so.
const patience = 5 * 60_000;
const loaded = async (page) => page.waitForLoadState("load");
const pages = {
  "": loaded,
  keys: loaded,
  apis: loaded,
  "api?id=hash": loaded,
  usage: loaded,
  audit: loaded,
  mcp: loaded,
  graphql: async (page) => page.locator("#schema-status").filter({ hasText: "Schema loaded" }).waitFor(),
  reference: async (page) => page.locator(".swagger-ui .opblock").first().waitFor(),
};

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const browser = await chromium.launch({ executablePath: browserPath || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"], timeout: patience });
try {
  for (const [name, ready] of Object.entries(pages)) {
    const samples = [];
    for (let i = 0; i < runs; i++) {
      const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      context.setDefaultTimeout(patience);
      context.setDefaultNavigationTimeout(patience);
      const page = await context.newPage();
      await page.goto(base + "/dashboard/sign-in");
      await page.getByLabel("API key").fill(key);
      await page.keyboard.press("Enter");
      await page.waitForURL(base + "/dashboard/");
      await page.goto(base + "/dashboard/" + name, { waitUntil: "commit" });
      await ready(page);
      const m = await page.evaluate(() => {
        const nav = performance.getEntriesByType("navigation")[0];
        let bytes = nav.transferSize, decoded = nav.decodedBodySize;
        for (const r of performance.getEntriesByType("resource")) {
          bytes += r.transferSize;
          decoded += r.decodedBodySize;
        }
        return { interactive: performance.now(), domContentLoaded: nav.domContentLoadedEventEnd, load: nav.loadEventEnd, bytes, decoded };
      });
      samples.push(m);
      await context.close();
    }
    const med = {};
    for (const k of Object.keys(samples[0])) med[k] = Math.round(median(samples.map((s) => s[k])));
    process.stdout.write(JSON.stringify({ page: name || "overview", runs, median: med, samples: samples.map((s) => Object.fromEntries(Object.entries(s).map(([k, v]) => [k, Math.round(v)]))) }) + "\n");
  }
} finally {
  await browser.close();
}
