package session_test

import (
	"log/slog"
	"net/http"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/doortest"
	"github.com/tollgate-dev/tollgate/session"
)

// TestConformance runs the doors' conformance suite on the session door. Its documented
// exceptions: a request without a credential, or with a malformed one, is answered
// with a 401 envelope rather than the edge's bare 403 (a session may start with a key
// in the body, or the host's login, and a page must read why it was refused); and it
// answers no cross-origin call (its cookies are guarded by the origin check).
func TestConformance(t *testing.T) {
	doortest.Run(t, doortest.Door{
		Name: "session",
		New: func(t *testing.T, env *doortest.Env) http.Handler {
			h, err := session.NewHandler(env.Accounts, &session.Options{Edge: env.Edge, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			return h
		},
		Sessions: true,
		Call: doortest.Request{Method: http.MethodPost, Path: "/v1/account/session",
			Body: `{"kind":"token"}`, ContentType: "application/json"},
		Refused: doortest.Request{Method: http.MethodPost, Path: "/v1/account/session",
			Body: `{"kind":"forever"}`, ContentType: "application/json"},
		RefusedCode:   "invalid_input",
		ForbiddenCode: "forbidden",
		Code:          doortest.EnvelopeCode,
		NoCredential:  http.StatusUnauthorized,
		MalformedKey:  http.StatusUnauthorized,
	})
}
