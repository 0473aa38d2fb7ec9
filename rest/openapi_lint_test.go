package rest_test

import (
	"maps"
	"testing"

	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/examples/apis"
	"github.com/tollgate-dev/tollgate/internal/openapitest"
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
	openapitest.Lint(t, full)
}
