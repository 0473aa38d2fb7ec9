package ops_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/health"
	"github.com/tollgate-dev/tollgate/internal/ops"
)

type up struct{}

func (up) Ping(context.Context) error { return nil }

// TestGate: /readyz answers 503 "starting" until the process serves, as the stores'
// check while it serves, and 503 "shutting down" once it stops; /healthz answers 200
// throughout, and /metrics once the process gives its scrape.
func TestGate(t *testing.T) {
	g := ops.NewGate()
	mux := g.Mux()
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	check := func(when, path string, status int, want string) {
		t.Helper()
		if got, body := get(path); got != status || !strings.Contains(body, want) {
			t.Errorf("%s: %s answered %d %s, want %d with %q", when, path, got, body, status, want)
		}
	}
	check("starting", "/readyz", 503, "not ready: starting")
	check("starting", "/healthz", 200, "ok")
	check("starting", "/metrics", 503, "starting")
	ready, err := health.New([]health.Store{{Role: "keys", Pinger: up{}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	g.Serving(ready, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("tollgate_calls_total 1")) }))
	check("serving", "/readyz", 200, "ready")
	check("serving", "/metrics", 200, "tollgate_calls_total")
	g.Stopping()
	check("stopping", "/readyz", 503, "not ready: shutting down")
	check("stopping", "/healthz", 200, "ok")
	check("stopping", "/metrics", 200, "tollgate_calls_total")
}
