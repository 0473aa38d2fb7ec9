package client_test

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// TestImportsNothingOfTheServer: the Go client takes in the wire contract, the
// catalog's rules and the webhook signature, and nothing else of the module, so that a
// program that calls a service or receives its webhooks builds none of the server.
func TestImportsNothingOfTheServer(t *testing.T) {
	allowed := map[string]bool{"client": true, "wire": true, "catalog": true, "webhook/signature": true}
	for _, dep := range testenv.Deps(t, ".") {
		if pkg, ok := strings.CutPrefix(dep, "github.com/tollgate-dev/tollgate/"); ok && !allowed[pkg] {
			t.Errorf("the client imports %s", pkg)
		}
	}
}
