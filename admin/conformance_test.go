package admin_test

import (
	"net/http"
	"testing"

	"github.com/tollgate-dev/tollgate/admin"
	"github.com/tollgate-dev/tollgate/internal/doortest"
)

// TestConformance runs the doors' conformance suite on the admin API.
func TestConformance(t *testing.T) {
	doortest.Run(t, doortest.Door{
		Name: "admin",
		New: func(t *testing.T, env *doortest.Env) http.Handler {
			h, err := admin.NewHandler(env.Accounts, doortest.AdminToken, &admin.Options{Edge: env.Edge})
			if err != nil {
				t.Fatal(err)
			}
			return h
		},
		Auth: doortest.AuthAdminToken,
		// A change, so that the audit's address of its actor can be checked.
		Call: doortest.Request{Method: http.MethodPost, Path: "/admin/v1/accounts/acme/keys",
			Body: `{"name":"conformance"}`, ContentType: "application/json"},
		Refused:      doortest.Request{Method: http.MethodGet, Path: "/admin/v1/accounts/nobody"},
		RefusedCode:  "not_found",
		Code:         doortest.EnvelopeCode,
		NoCredential: http.StatusUnauthorized,
	})
}
