// Command testreport summarizes the output of go test -json read from standard input:
// one line per package, the output of every failed test, the end of the output of a
// package that failed with no failed test (a timeout, a crash outside a test), every
// skipped test with its reason, and last a line "N passed, N failed, N skipped"
// counting tests and subtests, and each package that failed with no failed test as
// one failure.
// It exits with status 1 if a test failed or a package did not build, and, when
// CI=true, if any test skipped: in CI everything must run.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// maxPackageLines is the most lines of a failed package's own output reported.
const maxPackageLines = 80

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

func main() {
	bad, err := report(os.Stdin, os.Stdout, os.Getenv("CI") == "true")
	if err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(2)
	}
	if bad {
		os.Exit(1)
	}
}

// report reads the events and writes the summary. It reports whether the run is bad.
func report(r io.Reader, w io.Writer, ci bool) (bool, error) {
	output := map[string][]string{} // package/test -> output lines
	var failed, skipped []string
	failedTests := map[string]int{} // package -> its failed tests
	passed := 0
	pkgs := map[string]string{}
	buildFailed := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			fmt.Fprintln(w, sc.Text()) // build errors arrive as plain text
			continue
		}
		id := e.Package + " " + e.Test
		switch e.Action {
		case "output":
			output[id] = append(output[id], e.Output)
		case "build-output":
			fmt.Fprint(w, e.Output)
		case "build-fail":
			buildFailed = true
		case "fail":
			if e.Test != "" {
				failed = append(failed, id)
				failedTests[e.Package]++
			} else {
				pkgs[e.Package] = fmt.Sprintf("FAIL %s (%.1fs)", e.Package, e.Elapsed)
			}
		case "pass":
			if e.Test != "" {
				passed++
			}
			if e.Test == "" {
				pkgs[e.Package] = fmt.Sprintf("ok   %s (%.1fs)", e.Package, e.Elapsed)
			}
		case "skip":
			if e.Test != "" {
				skipped = append(skipped, id)
			} else if _, ok := pkgs[e.Package]; !ok {
				pkgs[e.Package] = "--   " + e.Package + " (no tests)"
			}
		}
	}
	if err := sc.Err(); err != nil {
		return true, err
	}
	names := make([]string, 0, len(pkgs))
	for p := range pkgs {
		names = append(names, p)
	}
	sort.Strings(names)
	bad := buildFailed
	for _, p := range names {
		fmt.Fprintln(w, pkgs[p])
		if strings.HasPrefix(pkgs[p], "FAIL") {
			bad = true
		}
	}
	for _, id := range failed {
		bad = true
		fmt.Fprintf(w, "\n--- FAIL: %s\n%s", id, strings.Join(output[id], ""))
	}
	// A package that failed with no failed test: a timeout (its panic names the tests
	// that were running), a crash, a TestMain that failed. Its own output says why.
	packageFailures := 0
	for _, p := range names {
		if !strings.HasPrefix(pkgs[p], "FAIL") || failedTests[p] > 0 {
			continue
		}
		packageFailures++
		lines := output[p+" "]
		if len(lines) > maxPackageLines {
			lines = lines[len(lines)-maxPackageLines:]
		}
		fmt.Fprintf(w, "\n--- FAIL: %s, with no failed test; the end of its output:\n%s", p, strings.Join(lines, ""))
	}
	if len(skipped) > 0 {
		fmt.Fprintf(w, "\n%d tests skipped:\n", len(skipped))
		for _, id := range skipped {
			reason := ""
			for _, line := range output[id] {
				if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "=== ") && !strings.HasPrefix(l, "--- SKIP") {
					reason = l
				}
			}
			fmt.Fprintf(w, "  %s: %s\n", id, reason)
		}
		if ci {
			fmt.Fprintln(w, "CI=true: every test must run; the skips above fail the run")
			bad = true
		}
	}
	fmt.Fprintf(w, "%d passed, %d failed, %d skipped\n", passed, len(failed)+packageFailures, len(skipped))
	return bad, nil
}
