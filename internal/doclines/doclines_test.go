package doclines

import (
	"os"
	"path/filepath"
	"testing"
)

// recorder is a testing.TB that keeps whether the check failed.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Errorf(string, ...any) { r.failed = true }
func (r *recorder) Fatalf(string, ...any) { r.failed = true }
func (r *recorder) Helper()               {}

func TestInOrder(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "example_test.go")
	if err := os.WriteFile(src, []byte("func Example() {\n\ta := 1\n\tb := 2\n\tfmt.Println(a, b)\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, block string
		fails       bool
	}{
		{"in order", "a := 1\n...\nfmt.Println(a, b)\n", false},
		{"indented", "  a := 1\n\n  b := 2\n", false},
		{"out of order", "b := 2\na := 1\n", true},
		{"not a line", "c := 3\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := filepath.Join(dir, "page.md")
			if err := os.WriteFile(doc, []byte("# Page\n\n## Wiring it\n\n```go\n"+tc.block+"```\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			r := &recorder{TB: t}
			InOrder(r, doc, "## Wiring it", src)
			if r.failed != tc.fails {
				t.Errorf("failed %v, want %v", r.failed, tc.fails)
			}
		})
	}
}
