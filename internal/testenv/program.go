package testenv

import (
	"os/exec"
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
