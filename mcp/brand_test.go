package mcp_test

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/brand"
	"github.com/tollgate-dev/tollgate/mcp"
)

// TestNewHandlerRefusesBrand checks that an invalid brand is refused, saying why.
// (doors' TestMountBrand checks the serverInfo of a valid one.)
func TestNewHandlerRefusesBrand(t *testing.T) {
	svc := newHarness(t, config{}).svc
	_, err := mcp.NewHandler(svc, &mcp.Options{Brand: brand.Brand{Name: "Acme", Command: "acme/../x", EnvPrefix: "ACME"}})
	if err == nil || !strings.Contains(err.Error(), `mcp: Options.Brand: the Command "acme/../x" is not allowed`) {
		t.Fatalf("NewHandler: %v, want the brand refused", err)
	}
}
