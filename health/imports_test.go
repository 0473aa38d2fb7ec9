package health_test

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// TestImportsOnlyTheStandardLibrary: the store packages import health to declare that
// they implement Pinger, so it must bring nothing else with them.
func TestImportsOnlyTheStandardLibrary(t *testing.T) {
	for _, dep := range testenv.Deps(t, ".") {
		first, _, _ := strings.Cut(dep, "/")
		if strings.Contains(first, ".") && dep != "github.com/tollgate-dev/tollgate/health" {
			t.Errorf("health imports %s; it may import the standard library only", dep)
		}
	}
}
