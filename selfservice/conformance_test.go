package selfservice_test

import (
	"net/http"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/doortest"
	"github.com/tollgate-dev/tollgate/selfservice"
)

// TestConformance runs the doors' conformance suite on the account holders' API.
func TestConformance(t *testing.T) {
	doortest.Run(t, doortest.Door{
		Name: "account",
		New: func(t *testing.T, env *doortest.Env) http.Handler {
			h, err := selfservice.NewHandler(env.Accounts, &selfservice.Options{Edge: env.Edge})
			if err != nil {
				t.Fatal(err)
			}
			mux := http.NewServeMux()
			mux.Handle("/v1/account", h)
			mux.Handle("/v1/account/", h)
			return mux
		},
		Call:          doortest.Request{Method: http.MethodGet, Path: "/v1/account"},
		Refused:       doortest.Request{Method: http.MethodGet, Path: "/v1/account/keys?limit=0"},
		RefusedCode:   "invalid_input",
		ForbiddenCode: "forbidden",
		Code:          doortest.EnvelopeCode,
	})
}
