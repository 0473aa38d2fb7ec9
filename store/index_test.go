package store_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIndexOfInterfaces checks that the package documentation lists every store
// interface: each exported interface of the packages that hold store contracts.
func TestIndexOfInterfaces(t *testing.T) {
	doc, err := os.ReadFile("store.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"../auth", "../billing/driver", "../audit", "../usage", "../idempotency", "../oauth/oauthstore", "../journal", "../health"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range f.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok || g.Tok != token.TYPE {
					continue
				}
				for _, spec := range g.Specs {
					ts := spec.(*ast.TypeSpec)
					if _, ok := ts.Type.(*ast.InterfaceType); !ok || !ts.Name.IsExported() {
						continue
					}
					if name := f.Name.Name + "." + ts.Name.Name; !strings.Contains(string(doc), name) {
						t.Errorf("the package documentation does not list %s", name)
					}
				}
			}
		}
	}
}
