package doors_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// TestNoDoorImportsAnother: a door translates its protocol on the shared edge, and
// borrows nothing of another door (its status table, its writers, its types), so that
// each can change alone. The dashboard is the one composition, by design: the account
// holders' pages are the web face of the session door (their cookie visits) and of
// the GraphQL gateway (its estimates in the explorer). Package doors, which wires
// them all, is not a door.
func TestNoDoorImportsAnother(t *testing.T) {
	goBin := testenv.Program(t, "go")
	const module = "github.com/tollgate-dev/tollgate/"
	doorPkgs := []string{"rest", "gql", "mcp", "selfservice", "session", "admin", "oauth", "dashboard"}
	allowed := map[string][]string{"dashboard": {"session", "gql"}}
	for _, door := range doorPkgs {
		out, err := exec.Command(goBin, "list", "-deps", "-f", "{{.ImportPath}}", "../"+door).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", door, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			other, ok := strings.CutPrefix(dep, module)
			if !ok || other == door || !slices.Contains(doorPkgs, other) || slices.Contains(allowed[door], other) {
				continue
			}
			t.Errorf("the %s door imports the %s door", door, other)
		}
	}
}
