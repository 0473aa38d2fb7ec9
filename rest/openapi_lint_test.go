package rest_test

import (
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/examples/apis"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/rest"
	"github.com/tollgate-dev/tollgate/selfservice"
	"github.com/tollgate-dev/tollgate/session"
)

// TestOpenAPILint validates the OpenAPI document of the sample catalog, with the
// self-service routes of package selfservice and the session routes of package session,
// with Redocly's recommended rules (the
// structure of OpenAPI 3.1, the JSON Schemas inside it, and good-practice rules) and
// requires no error and no warning.
func TestOpenAPILint(t *testing.T) {
	redocly := testenv.NodeTool(t, "redocly")
	reg := &catalog.Registry{}
	if err := apis.Register(reg); err != nil {
		t.Fatal(err)
	}
	paths := selfservice.OpenAPIPaths()
	maps.Copy(paths, session.OpenAPIPaths())
	full := rest.OpenAPI(rest.OpenAPIInfo{Title: "Sample catalog", Paths: paths}, reg.List())
	for path, methods := range map[string][]string{
		"/v1/analytics": {"get"}, "/v1/account/usage": {"get"}, "/v1/account/session": {"post", "get", "delete"},
		"/v1/hash/batch": {"post"}, "/v1/image-info/batch": {"post"},
	} {
		item, _ := full["paths"].(map[string]any)[path].(map[string]any)
		for _, m := range methods {
			if _, ok := item[m]; !ok {
				t.Errorf("the document has no %s %s", m, path)
			}
		}
	}
	doc, err := json.MarshalIndent(full, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "openapi.json")
	if err := os.WriteFile(path, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), redocly, "lint", "--config", "testdata/redocly.yaml", "--format", "json", path)
	cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true")
	out, err := cmd.Output()
	var report struct {
		Totals struct{ Errors, Warnings int }
		// Problems are printed as they are when there are any.
		Problems []json.RawMessage
	}
	if jerr := json.Unmarshal(out, &report); jerr != nil {
		t.Fatalf("redocly lint: %v; output is not its JSON report (%v):\n%s", err, jerr, out)
	}
	if err != nil || report.Totals.Errors > 0 || report.Totals.Warnings > 0 {
		t.Fatalf("redocly lint: %d errors, %d warnings (%v):\n%s", report.Totals.Errors, report.Totals.Warnings, err, out)
	}
}
