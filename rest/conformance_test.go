package rest_test

import (
	"net/http"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/doortest"
	"github.com/tollgate-dev/tollgate/rest"
)

func newDoor(t *testing.T, env *doortest.Env) http.Handler {
	h, err := rest.NewHandler(env.Service, &rest.Options{Edge: env.Edge, Accounts: env.Accounts})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestConformance runs the doors' conformance suite on REST calls and on batches.
func TestConformance(t *testing.T) {
	t.Run("call", func(t *testing.T) {
		doortest.Run(t, doortest.Door{
			Name:          "rest",
			New:           newDoor,
			Call:          doortest.Request{Method: http.MethodGet, Path: "/v1/hash?text=a"},
			Refused:       doortest.Request{Method: http.MethodGet, Path: "/v1/hash?text=a&nope=1"},
			RefusedCode:   "invalid_input",
			ForbiddenCode: "forbidden",
			Code:          doortest.EnvelopeCode,
			Receipts:      true,
			CORS:          true,
			SuspendedCode: "account_suspended", SuspendedStatus: http.StatusForbidden,
		})
	})
	t.Run("batch", func(t *testing.T) {
		doortest.Run(t, doortest.Door{
			Name: "batch",
			New:  newDoor,
			Call: doortest.Request{Method: http.MethodPost, Path: "/v1/hash/batch",
				Body: `{"items":[{"text":"a"},{"text":"b"}]}`, ContentType: "application/json"},
			Refused: doortest.Request{Method: http.MethodPost, Path: "/v1/hash/batch",
				Body: `{"items":5}`, ContentType: "application/json"},
			RefusedCode:   "invalid_input",
			ForbiddenCode: "forbidden",
			Code:          doortest.EnvelopeCode,
			Receipts:      true,
			CORS:          true,
			SuspendedCode: "account_suspended", SuspendedStatus: http.StatusForbidden,
		})
	})
}
