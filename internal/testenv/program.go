package testenv

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Program returns the path of the program name on PATH (node, python3), or calls
// [Unavailable]: a developer without it skips the test, CI fails it.
func Program(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Unavailable(t, "%s is not on PATH: %v", name, err)
	}
	return p
}

// File returns path if it exists, or calls [Unavailable]; from says what provides it
// (a Debian package), for the message.
func File(t testing.TB, path, from string) string {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		Unavailable(t, "%s (from %s) is missing: %v", path, from, err)
	}
	return path
}

// Deps returns the import paths of the packages the package in dir imports, directly
// or not, and its own (go list -deps), for the tests that bound what a package brings
// with it.
func Deps(t testing.TB, dir string) []string {
	t.Helper()
	out, err := exec.Command(Program(t, "go"), "list", "-deps", "-f", "{{.ImportPath}}", dir).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", dir, err)
	}
	return strings.Fields(string(out))
}
