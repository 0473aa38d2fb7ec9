package storetest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunKnowsEverySuite checks that Run runs every suite of the package: a suite (an
// exported TestX taking a *testing.T and a factory) that is not in Run's table would be
// forgotten by every store that relies on Run.
func TestRunKnowsEverySuite(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	run, err := os.ReadFile("run.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var found int
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") || len(fn.Type.Params.List) != 2 {
				continue
			}
			found++
			if !strings.Contains(string(run), fn.Name.Name+"(t, ") {
				t.Errorf("%s (%s) is not in Run's table of suites", fn.Name.Name, name)
			}
		}
	}
	if found != len(suites) {
		t.Errorf("%d suites in the package, %d in Run's table", found, len(suites))
	}
}
