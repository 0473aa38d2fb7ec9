package clientgen

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// dartSyntaxErrors parses Dart files with tree-sitter's Dart grammar (the npm packages
// tree-sitter-wasms and web-tree-sitter in $TOLLGATE_NODE_TOOLS, through
// tools/npm/dart-parse.mjs) and returns its syntax errors, one line each. No Dart SDK
// can be installed here, so this is the check the Dart packages get: syntax, not types,
// and nothing is run.
func dartSyntaxErrors(t *testing.T, files []string) []string {
	t.Helper()
	node := testenv.Program(t, "node")
	dir := testenv.Var(t, testenv.NodeTools)
	testenv.File(t, filepath.Join(dir, "node_modules", "tree-sitter-wasms", "out", "tree-sitter-dart.wasm"), "npm tree-sitter-wasms")
	testenv.File(t, filepath.Join(dir, "node_modules", "web-tree-sitter", "package.json"), "npm web-tree-sitter")
	out, err := exec.CommandContext(t.Context(), node, append([]string{filepath.Join(dir, "dart-parse.mjs")}, files...)...).Output()
	if err != nil {
		t.Fatalf("dart-parse.mjs: %v\n%s", err, out)
	}
	var report struct {
		Files  int `json:"files"`
		Errors []struct {
			File         string `json:"file"`
			Line, Column int
			Node, Text   string
		} `json:"errors"`
	}
	if err := json.Unmarshal(out, &report); err != nil || report.Files != len(files) {
		t.Fatalf("dart-parse.mjs: %v, %d files of %d:\n%s", err, report.Files, len(files), out)
	}
	var errs []string
	for _, e := range report.Errors {
		errs = append(errs, fmt.Sprintf("%s/%s:%d:%d: %s %s", filepath.Base(filepath.Dir(e.File)), filepath.Base(e.File), e.Line, e.Column, e.Node, e.Text))
	}
	return errs
}

// TestDartPackages parses every Dart file of the generated Dart packages of the sample
// catalog, and each README's example, with tree-sitter's Dart grammar, and fails on
// any syntax error. It first proves that the grammar reports one: a file with a Dart
// 3 error must not pass. Nothing is compiled or run: no Dart SDK can be installed
// here, as each package's README says.
func TestDartPackages(t *testing.T) {
	toolchain(t, "Dart")
	work := t.TempDir()
	bad := filepath.Join(work, "bad.dart")
	if err := os.WriteFile(bad, []byte("class A { final int? x = ; }\nvoid main() { print('unclosed); }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	files := []string{bad}
	for id, dir := range packageDirs(t, "dart") {
		files = append(files, sourceFiles(t, dir, ".dart")...)
		example := filepath.Join(work, id+".dart")
		if err := os.WriteFile(example, []byte(readmeBlock(t, filepath.Join(dir, "README.md"), "dart")), 0o600); err != nil {
			t.Fatal(err)
		}
		files = append(files, example)
	}
	errs := dartSyntaxErrors(t, files)
	var others []string
	caught := false
	for _, e := range errs {
		if strings.HasPrefix(e, filepath.Base(work)+"/bad.dart:") {
			caught = true
		} else {
			others = append(others, e)
		}
	}
	if !caught {
		t.Errorf("the Dart grammar found no error in a file with two")
	}
	if len(others) > 0 {
		t.Errorf("syntax errors in the Dart packages:\n\t%s", strings.Join(others, "\n\t"))
	}
}
