//go:build unix

package tollgate_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"testing"

	"github.com/tollgate-dev/tollgate/health"
)

// opsHandler is the operators' mux of README.md's "Operating it" section:
// TestREADMEOperating keeps the README's Go block equal to it, and calls it.
func opsHandler(pg, rd health.Pinger) (http.Handler, error) {
	ready, err := health.New([]health.Store{
		{Role: "keys", Pinger: pg}, {Role: "ledger", Pinger: pg},
		{Role: "rates", Pinger: rd}, {Role: "slots", Pinger: rd},
	}, nil)
	if err != nil {
		return nil, err
	}
	ops := http.NewServeMux() // for a listener of its own, not the API's
	ops.Handle("/healthz", ready.Live())
	ops.Handle("/readyz", ready.Ready())
	return ops, nil
}

// pinger is a store whose Ping answers err.
type pinger struct{ err error }

func (p pinger) Ping(context.Context) error { return p.err }

// TestREADMEOperating checks the Go block of README.md's "Operating it" section: it is
// the function opsHandler, which serves /healthz and /readyz, 200 when both stores
// answer, and 503 naming the roles of the one that does not, as the README says.
func TestREADMEOperating(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	block, err := sectionBlock(string(readme), "## Operating it", "go")
	if err != nil {
		t.Fatal(err)
	}
	fn, err := funcSource("readme_ops_test.go", "opsHandler")
	if err != nil {
		t.Fatal(err)
	}
	if d := diffLines("README.md", block, "opsHandler", fn); d != "" {
		t.Errorf("the Go block of README.md's \"Operating it\" differs from opsHandler in readme_ops_test.go; make them equal again:\n%s", d)
	}

	down := pinger{errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")}
	for _, tt := range []struct {
		name        string
		pg, rd      health.Pinger
		path        string
		status      int
		unreachable []string
	}{
		{"liveness", pinger{}, down, "/healthz", http.StatusOK, nil},
		{"both answer", pinger{}, pinger{}, "/readyz", http.StatusOK, nil},
		{"Redis down", pinger{}, down, "/readyz", http.StatusServiceUnavailable, []string{"rates", "slots"}},
	} {
		h, err := opsHandler(tt.pg, tt.rd)
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, tt.path, nil))
		var body struct{ Unreachable []string }
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != tt.status || !slices.Equal(body.Unreachable, tt.unreachable) {
			t.Errorf("%s: GET %s: %d %s, want %d naming %v", tt.name, tt.path, rec.Code, rec.Body, tt.status, tt.unreachable)
		}
	}
}
