// Parses Dart files with tree-sitter's Dart grammar (tree-sitter-wasms, loaded by
// web-tree-sitter) and reports every syntax error: each ERROR node and each node the
// parser had to invent (MISSING). Used by cmd/tollgate-gen's tests, since no Dart SDK
// can be installed where they run:
//
//   node dart-parse.mjs FILE...
//
// It prints one JSON object, {"files": N, "errors": [{"file", "line", "column", "node",
// "text"}]}, and exits 0 whatever it found.
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { Language, Parser } from 'web-tree-sitter';

const require = createRequire(import.meta.url);
await Parser.init();
const dart = await Language.load(require.resolve('tree-sitter-wasms/out/tree-sitter-dart.wasm'));
const parser = new Parser();
parser.setLanguage(dart);

const errors = [];
const files = process.argv.slice(2);
for (const file of files) {
  const tree = parser.parse(await readFile(file, 'utf8'));
  const walk = (node) => {
    if (node.type === 'ERROR' || node.isMissing) {
      errors.push({
        file,
        line: node.startPosition.row + 1,
        column: node.startPosition.column + 1,
        node: node.isMissing ? `MISSING ${node.type}` : 'ERROR',
        text: node.text.slice(0, 80),
      });
    }
    for (const child of node.children) walk(child);
  };
  walk(tree.rootNode);
  tree.delete();
}
process.stdout.write(JSON.stringify({ files: files.length, errors }));
