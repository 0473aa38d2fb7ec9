// Package doclines keeps a page's Go block true to the code it shows: its lines must be
// lines of a Go file, in the file's order, for the tests of the packages whose docs
// show their wiring (metrics, tracing).
package doclines

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// InOrder checks that the first Go block under the heading ("## Wiring it") of the page
// doc is lines of the file src, in its order, with white space trimmed; a line "..."
// stands for the lines left out, and empty lines are skipped.
func InOrder(t testing.TB, doc, heading, src string) {
	t.Helper()
	page, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(page), "\n"+heading+"\n")
	_, block, found := strings.Cut(section, "```go\n")
	block, _, _ = strings.Cut(block, "```")
	if !found || block == "" {
		t.Fatalf("%s has no Go block under %q", doc, heading)
	}
	code, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(code), "\n")
	at := 0
	for _, line := range strings.Split(block, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line == "..." {
			continue
		}
		i := slices.IndexFunc(lines[at:], func(l string) bool { return strings.TrimSpace(l) == line })
		if i < 0 {
			t.Errorf("%s shows %q, which is not a line of %s after line %d", doc, line, src, at)
			continue
		}
		at += i + 1
	}
}
