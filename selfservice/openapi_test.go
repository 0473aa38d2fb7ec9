package selfservice_test

import (
	"slices"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/openapitest"
	"github.com/tollgate-dev/tollgate/rest"
	"github.com/tollgate-dev/tollgate/selfservice"
)

// openAPI returns the REST document with the self-service paths, as package doors
// serves it.
func openAPI(t *testing.T) *openapitest.Doc {
	t.Helper()
	return openapitest.Load(t, rest.OpenAPI(rest.OpenAPIInfo{Paths: selfservice.OpenAPIPaths()}, nil))
}

// TestOpenAPIRoutes checks that the self-service paths describe every route the handler
// registers, with its method, and none it does not.
func TestOpenAPIRoutes(t *testing.T) {
	h, err := selfservice.NewHandler(newManager(t, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	registered := selfservice.Routes(h)
	documented := openapitest.Load(t, map[string]any{"openapi": "3.1.0", "paths": selfservice.OpenAPIPaths()}).Routes()
	for _, r := range registered {
		if !slices.Contains(documented, r) {
			t.Errorf("the handler serves %s, which OpenAPIPaths does not describe", r)
		}
	}
	for _, r := range documented {
		if !slices.Contains(registered, r) {
			t.Errorf("OpenAPIPaths describes %s, which the handler does not serve", r)
		}
	}
}
