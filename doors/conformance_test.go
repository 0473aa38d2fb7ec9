package doors_test

import (
	"log/slog"
	"net/http"
	"testing"

	"github.com/tollgate-dev/tollgate/doors"
	"github.com/tollgate-dev/tollgate/internal/doortest"
)

// TestConformance runs the doors' conformance suite on doors as Mount wires them: the
// account holders' API and GraphQL behind the session cookie, REST beside them, all on
// one edge made of the row's options.
func TestConformance(t *testing.T) {
	mount := func(t *testing.T, env *doortest.Env) http.Handler {
		mux := http.NewServeMux()
		m, err := doors.Mount(mux, env.Service, &doors.Options{Accounts: env.Accounts, Edge: env.EdgeOptions,
			AdminToken: doortest.AdminToken, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Close)
		return mux
	}
	for _, d := range []doortest.Door{
		{
			Name: "rest", New: mount, Sessions: true,
			Call:          doortest.Request{Method: http.MethodGet, Path: "/v1/hash?text=a"},
			Refused:       doortest.Request{Method: http.MethodGet, Path: "/v1/hash?text=a&nope=1"},
			RefusedCode:   "invalid_input",
			ForbiddenCode: "forbidden",
			Code:          doortest.EnvelopeCode,
			Receipts:      true,
			CORS:          true,
			SuspendedCode: "account_suspended", SuspendedStatus: http.StatusForbidden,
		},
		{
			Name: "account", New: mount, Sessions: true,
			Call:          doortest.Request{Method: http.MethodGet, Path: "/v1/account"},
			Refused:       doortest.Request{Method: http.MethodGet, Path: "/v1/account/keys?limit=0"},
			RefusedCode:   "invalid_input",
			ForbiddenCode: "forbidden",
			Code:          doortest.EnvelopeCode,
		},
		{
			Name: "graphql", New: mount, Sessions: true,
			Call:          doortest.GraphQLQuery(`{ hash(text: "a") { hash } }`),
			Refused:       doortest.GraphQLQuery(`{ hash(text: "a") { nope } }`),
			RefusedCode:   "GRAPHQL_VALIDATION_FAILED",
			ForbiddenCode: "FORBIDDEN",
			Code:          doortest.GraphQLCode,
			Receipts:      true,
			CORS:          true,
			SuspendedCode: "ACCOUNT_SUSPENDED", SuspendedStatus: http.StatusForbidden,
		},
		{
			Name: "admin", New: mount, Sessions: true, Auth: doortest.AuthAdminToken,
			Call: doortest.Request{Method: http.MethodPost, Path: "/admin/v1/accounts/acme/keys",
				Body: `{"name":"conformance"}`, ContentType: "application/json"},
			Refused:      doortest.Request{Method: http.MethodGet, Path: "/admin/v1/accounts/nobody"},
			RefusedCode:  "not_found",
			Code:         doortest.EnvelopeCode,
			NoCredential: http.StatusUnauthorized,
		},
	} {
		t.Run(d.Name, func(t *testing.T) { doortest.Run(t, d) })
	}
}
