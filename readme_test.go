package tollgate_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestREADMEExample keeps the README's "Using the library" section equal to Example
// (example_test.go), so that the code a new user copies compiles, runs and prints what
// the README says: its Go block is the Example's body up to the Output comment, and the
// text block after it is that output. Lines are compared without their indentation.
func TestREADMEExample(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	code, output, err := readmeBlocks(string(readme), "## Using the library")
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	body, want, err := exampleBody("example_test.go", "Example")
	if err != nil {
		t.Fatalf("example_test.go: %v", err)
	}
	if d := diffLines("README.md", code, "Example", body); d != "" {
		t.Errorf("the Go block of README.md's \"Using the library\" differs from the body of Example in example_test.go; make them equal again:\n%s", d)
	}
	if d := diffLines("README.md", output, "Example", want); d != "" {
		t.Errorf("the output block of README.md's \"Using the library\" differs from Example's Output comment:\n%s", d)
	}
}

// TestDocTourBatchExample keeps the Go block of docs/tour.md's section on batches from
// the command line and Go equal to the body of client's ExampleClient_ExecuteBatch,
// which compiles.
func TestDocTourBatchExample(t *testing.T) {
	tour, err := os.ReadFile("docs/tour.md")
	if err != nil {
		t.Fatal(err)
	}
	const heading = "## Batches from the command line and Go"
	_, section, found := strings.Cut(string(tour), "\n"+heading+"\n")
	section, _, _ = strings.Cut(section, "\n## ")
	_, block, _ := strings.Cut(section, "\n```go\n")
	block, _, closed := strings.Cut(block, "\n```\n")
	if !found || !closed {
		t.Fatalf("docs/tour.md has no ```go block in the section %q", heading)
	}
	body, _, err := exampleBody("client/example_test.go", "ExampleClient_ExecuteBatch")
	if body == nil {
		t.Fatal(err)
	}
	if d := diffLines("docs/tour.md", strings.Split(block, "\n"), "ExampleClient_ExecuteBatch", body); d != "" {
		t.Errorf("the Go block of docs/tour.md's batch section differs from client's ExampleClient_ExecuteBatch; make them equal again:\n%s", d)
	}
}

// readmeBlocks returns the lines of the first ```go block of the README section that
// starts with heading, and those of the first ```text block after it in that section.
func readmeBlocks(readme, heading string) (code, output []string, err error) {
	lines := strings.Split(readme, "\n")
	start := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == heading {
			start = i + 1
			break
		}
	}
	if start < 0 {
		return nil, nil, fmt.Errorf("no section %q", heading)
	}
	var open *[]string // the block being read, if any
	for _, l := range lines[start:] {
		switch {
		case open != nil && strings.TrimSpace(l) == "```":
			open = nil
			if output != nil {
				return code, output, nil
			}
		case open != nil:
			*open = append(*open, l)
		case strings.HasPrefix(l, "## "):
			return nil, nil, fmt.Errorf("section %q ends before it has a ```go block and a ```text block after it", heading)
		case l == "```go" && code == nil:
			code, open = []string{}, &code
		case l == "```text" && code != nil:
			output, open = []string{}, &output
		}
	}
	return nil, nil, fmt.Errorf("section %q has no ```go block followed by a ```text block", heading)
}

// exampleBody returns the lines of the body of the function name in the Go file path, up
// to its "// Output:" comment, and the output lines that comment lists; the whole body
// and an error when it has none.
func exampleBody(path, name string) (code, output []string, err error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	if err != nil {
		return nil, nil, err
	}
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Name.Name != name || fn.Recv != nil {
			continue
		}
		body := string(src[fset.Position(fn.Body.Lbrace).Offset+1 : fset.Position(fn.Body.Rbrace).Offset])
		lines := strings.Split(body, "\n")
		for i, l := range lines {
			if strings.TrimSpace(l) == "// Output:" {
				for _, o := range lines[i+1:] {
					output = append(output, strings.TrimPrefix(strings.TrimSpace(o), "//"))
				}
				return lines[:i], output, nil
			}
		}
		return lines, nil, fmt.Errorf("func %s has no // Output: comment", name)
	}
	return nil, nil, fmt.Errorf("no func %s", name)
}

// diffLines compares the lines a of nameA and b of nameB, ignoring each line's leading
// and trailing white space and blank lines at either end, and describes the first
// difference, or returns "" when there is none.
func diffLines(nameA string, a []string, nameB string, b []string) string {
	a, b = trimLines(a), trimLines(b)
	for i := 0; i < len(a) || i < len(b); i++ {
		switch {
		case i >= len(a):
			return fmt.Sprintf("%s ends at line %d of the block, where %s has\n\t%s", nameA, i+1, nameB, b[i])
		case i >= len(b):
			return fmt.Sprintf("%s ends at line %d of the block, where %s has\n\t%s", nameB, i+1, nameA, a[i])
		case a[i] != b[i]:
			return fmt.Sprintf("line %d of the block: %s has\n\t%s\n%s has\n\t%s", i+1, nameA, a[i], nameB, b[i])
		}
	}
	return ""
}

// trimLines returns lines with the white space around each line removed and without
// blank lines at either end.
func trimLines(lines []string) []string {
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		out = append(out, strings.TrimSpace(l))
	}
	for len(out) > 0 && out[0] == "" {
		out = out[1:]
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

// TestREADMEExampleCatchesDrift checks that the comparison behind TestREADMEExample
// notices the ways a README snippet drifts from its Example, and forgives indentation.
func TestREADMEExampleCatchesDrift(t *testing.T) {
	example := []string{"\tx := 1", "", "\tfmt.Println(x)"}
	tests := []struct {
		name   string
		readme []string
		drift  bool
	}{
		{"equal but for indentation", []string{"x := 1", "", "fmt.Println(x)", ""}, false},
		{"a changed line", []string{"x := 2", "", "fmt.Println(x)"}, true},
		{"a line missing", []string{"x := 1"}, true},
		{"a line added", []string{"x := 1", "", "fmt.Println(x)", "return"}, true},
		{"a blank line removed", []string{"x := 1", "fmt.Println(x)"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if d := diffLines("README", tt.readme, "Example", example); (d != "") != tt.drift {
				t.Errorf("diffLines = %q; want a difference: %v", d, tt.drift)
			}
		})
	}

	readme := "# T\n\n## Using the library\n\nText.\n\n```go\nx := 1\n```\n\nIt prints:\n\n```text\n1\n```\n\n## Next\n"
	code, output, err := readmeBlocks(readme, "## Using the library")
	if err != nil || !slices.Equal(code, []string{"x := 1"}) || !slices.Equal(output, []string{"1"}) {
		t.Errorf("readmeBlocks = %q, %q, %v", code, output, err)
	}
	if _, _, err := readmeBlocks("## Using the library\n\n```go\nx\n```\n\n## Next\n\n```text\n1\n```\n", "## Using the library"); err == nil {
		t.Error("readmeBlocks took a text block from the next section")
	}
}
