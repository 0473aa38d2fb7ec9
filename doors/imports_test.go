package doors_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// TestNoDoorImportsAnother: a door translates its protocol on the shared edge, and
// borrows nothing of another door (its status table, its writers, its types), so that
// each can change alone. What the dashboard needs of the session door and of the
// GraphQL gateway it names in interfaces of its own (dashboard.Sessions,
// dashboard.Estimator); package doors, which wires the doors together, is not one.
func TestNoDoorImportsAnother(t *testing.T) {
	const module = "github.com/tollgate-dev/tollgate/"
	doorPkgs := []string{"rest", "gql", "mcp", "selfservice", "session", "admin", "oauth", "dashboard"}
	for _, door := range doorPkgs {
		for _, dep := range testenv.Deps(t, "../"+door) {
			other, ok := strings.CutPrefix(dep, module)
			if !ok || other == door || !slices.Contains(doorPkgs, other) {
				continue
			}
			t.Errorf("the %s door imports the %s door", door, other)
		}
	}
}
