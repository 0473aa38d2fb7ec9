package tollgate_test

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docPages returns the README and the pages of docs/, by their paths from the root of
// the repository.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"README.md"}, pages...)
}

// TestDocLinks checks that every relative link of the README and of docs/ leads to a
// file or folder of the repository and, when it names a fragment, to a heading of that
// page; and that every docs/*.md a Go comment names exists, so that a doc comment that
// sends its reader to a page sends them somewhere.
func TestDocLinks(t *testing.T) {
	for _, page := range docPages(t) {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, target := range markdownLinks(string(text)) {
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, fragment, _ := strings.Cut(target, "#")
			if file == "" {
				file = page
			} else {
				file = path.Join(path.Dir(page), file)
			}
			if _, err := os.Stat(file); err != nil {
				t.Errorf("%s links to %s, which does not exist", page, target)
				continue
			}
			if fragment == "" {
				continue
			}
			linked, err := os.ReadFile(file)
			if err != nil {
				t.Errorf("%s links to %s: %v", page, target, err)
				continue
			}
			if anchors := headingAnchors(string(linked)); !slices.Contains(anchors, fragment) {
				t.Errorf("%s links to %s, but %s has no heading #%s (it has %s)", page, target, file, fragment, strings.Join(anchors, " "))
			}
		}
	}

	named := regexp.MustCompile(`docs/[A-Za-z0-9_.-]+\.md`)
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skipDir(p) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, doc := range named.FindAllString(string(src), -1) {
			if _, err := os.Stat(doc); err != nil {
				t.Errorf("%s names %s, which does not exist", p, doc)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDocPagesLinked checks that the README links to every page of docs/, so that a
// new page is found from the front of the repository.
func TestDocPagesLinked(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string]bool{}
	for _, target := range markdownLinks(string(readme)) {
		file, _, _ := strings.Cut(target, "#")
		linked[path.Clean(file)] = true
	}
	for _, page := range docPages(t)[1:] {
		if !linked[filepath.ToSlash(page)] {
			t.Errorf("the README links to no %s: link it in its Documentation section", page)
		}
	}
}

// skipDir reports whether the walks of these tests skip the directory p: git's, the
// installed npm tools, test data, and the folders Go ignores.
func skipDir(p string) bool {
	base := filepath.Base(p)
	return p != "." && (strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_") ||
		base == "testdata" || base == "node_modules" || p == "tools")
}

// markdownLinks returns the targets of the inline links of a Markdown text, outside its
// code blocks and code spans.
func markdownLinks(text string) []string {
	var targets []string
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	span := regexp.MustCompile("`[^`]*`")
	fence := false
	for line := range strings.Lines(text) {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		if fence {
			continue
		}
		for _, m := range link.FindAllStringSubmatch(span.ReplaceAllString(line, ""), -1) {
			targets = append(targets, m[1])
		}
	}
	return targets
}

// headingAnchors returns the fragments that GitHub gives the headings of a Markdown
// text: lower case, without punctuation, spaces made hyphens, and "-1", "-2", ... after
// a heading met before.
func headingAnchors(text string) []string {
	var anchors []string
	seen := map[string]int{}
	drop := regexp.MustCompile(`[^\p{L}\p{N} _-]`)
	fence := false
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\n")
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		heading := strings.TrimLeft(line, "#")
		if fence || heading == line || !strings.HasPrefix(heading, " ") {
			continue
		}
		a := strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(strings.TrimSpace(heading)), ""), " ", "-")
		if n := seen[a]; n > 0 {
			seen[a]++
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		anchors = append(anchors, a)
	}
	return anchors
}

// TestDocLayout checks the tables of packages against the module: the README's layout
// table and the internal packages' table of docs/architecture.md together list every
// package, every package they list exists (but those marked "(being added)", which must
// not exist yet), and the README lists no internal package.
func TestDocLayout(t *testing.T) {
	public := layoutRows(t, "README.md", "## Layout")
	internal := layoutRows(t, "docs/architecture.md", "## Internal packages")

	listed := map[string]bool{}
	for _, rows := range []map[string]bool{public, internal} {
		for pkg, adding := range rows {
			listed[pkg] = true
			_, err := os.Stat(pkg)
			switch {
			case adding && err == nil:
				t.Errorf("%s exists: remove \"(being added)\" from its row", pkg)
			case !adding && err != nil:
				t.Errorf("a table of packages lists %s, which does not exist", pkg)
			}
		}
	}
	for pkg := range public {
		if strings.HasPrefix(pkg, "internal/") {
			t.Errorf("the README's layout lists %s: internal packages are docs/architecture.md's", pkg)
		}
	}
	for pkg := range internal {
		if !strings.HasPrefix(pkg, "internal/") {
			t.Errorf("docs/architecture.md's internal packages list %s, which is not internal", pkg)
		}
	}

	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && skipDir(p) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		// A package is listed by its path, or by a listed folder above it that holds
		// no Go files of its own (examples/clients).
		pkg := filepath.ToSlash(filepath.Dir(p))
		if listed[pkg] {
			return nil
		}
		for dir := path.Dir(pkg); dir != "."; dir = path.Dir(dir) {
			if goFiles, _ := filepath.Glob(filepath.Join(dir, "*.go")); listed[dir] && len(goFiles) == 0 {
				return nil
			}
		}
		t.Errorf("no table of packages lists %s (the README's layout, or docs/architecture.md's internal packages)", pkg)
		listed[pkg] = true // once per package
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// layoutRows returns the packages that the table under heading in the Markdown file
// page lists in its first column (the root package, `tollgate` (root), as "."), each
// with whether its row says it is being added.
func layoutRows(t *testing.T, page, heading string) map[string]bool {
	t.Helper()
	text, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	_, section, found := strings.Cut(string(text), "\n"+heading+"\n")
	if !found {
		t.Fatalf("%s has no section %q", page, heading)
	}
	rows := map[string]bool{}
	name := regexp.MustCompile("`([^`]+)`")
	for line := range strings.Lines(section) {
		if strings.HasPrefix(line, "## ") {
			break
		}
		cells := strings.Split(line, " | ")
		if !strings.HasPrefix(line, "| `") || len(cells) < 2 {
			continue
		}
		adding := strings.HasPrefix(cells[1], "(being added)")
		for _, m := range name.FindAllStringSubmatch(cells[0], -1) {
			pkg := m[1]
			if strings.HasPrefix(cells[0], "| `tollgate` (root)") && pkg == "tollgate" {
				pkg = "."
			}
			rows[pkg] = adding
		}
	}
	if len(rows) == 0 {
		t.Fatalf("%s has no table of packages under %q", page, heading)
	}
	return rows
}
