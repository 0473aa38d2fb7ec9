package gql_test

import (
	"net/http"
	"testing"

	"github.com/tollgate-dev/tollgate/gql"
	"github.com/tollgate-dev/tollgate/internal/doortest"
)

// TestConformance runs the doors' conformance suite on the gateway.
func TestConformance(t *testing.T) {
	doortest.Run(t, doortest.Door{
		Name: "graphql",
		New: func(t *testing.T, env *doortest.Env) http.Handler {
			h, err := gql.NewHandler(env.Service, &gql.Options{Edge: env.Edge})
			if err != nil {
				t.Fatal(err)
			}
			return h
		},
		Call:          doortest.GraphQLQuery(`{ hash(text: "a") { hash } }`),
		Refused:       doortest.GraphQLQuery(`{ hash(text: "a") { nope } }`),
		RefusedCode:   "GRAPHQL_VALIDATION_FAILED",
		ForbiddenCode: "FORBIDDEN",
		Code:          doortest.GraphQLCode,
		Receipts:      true,
		CORS:          true,
		SuspendedCode: "ACCOUNT_SUSPENDED", SuspendedStatus: http.StatusForbidden,
	})
}
