package tollgate_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/doors"
	"github.com/tollgate-dev/tollgate/internal/phasetest"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// TestFailingTracer: a tracer that returns a nil end, or panics in Begin or in its end
// (in every phase: the call's, its authentication, its admission, each API's run, its
// settlement), fails no call. A REST call and a GraphQL query of two APIs (whose runs
// are parallel, one on a goroutine of its own) are answered as without the tracer,
// charged exactly once, and leave no reservation open nor settlement pending; the
// panics are logged.
func TestFailingTracer(t *testing.T) {
	for _, how := range phasetest.Failures {
		t.Run(how, func(t *testing.T) {
			var logs testenv.Logs
			ledger := memory.NewLedger(nil)
			reg := &catalog.Registry{}
			for _, id := range []string{"left", "right"} {
				if err := reg.Register(catalog.API{ID: id, Title: id, Method: http.MethodGet, Cost: 2,
					Params: []catalog.Param{{Name: "text", Type: catalog.String, Required: true}},
					Result: []catalog.Field{{Name: "text", Type: catalog.String}},
					Handler: catalog.HandlerFunc(func(_ context.Context, req *catalog.Request) (any, error) {
						return map[string]any{"text": id + ":" + req.Params.String("text")}, nil
					})}); err != nil {
					t.Fatal(err)
				}
			}
			plans, err := billing.NewPlans(billing.Plan{Name: "pro", Credits: 100, RatePerMinute: 600, Concurrency: 10, GraphQLMaxAPIs: 10})
			if err != nil {
				t.Fatal(err)
			}
			log := logs.Logger()
			svc, err := tollgate.New(reg, tollgate.Stores{Keys: memory.NewKeyStore(), Ledger: ledger,
				Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter()}, plans,
				&tollgate.Options{Logger: log, SweepInterval: -1})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(svc.Close)
			mux := http.NewServeMux()
			m, err := doors.Mount(mux, svc, &doors.Options{Doors: doors.REST | doors.GraphQL, Logger: log})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(m.Close)
			const key = "9d3c3b8e-5f0a-4c1e-9a57-2b6f0e4d7c11"
			if _, _, _, err := m.Accounts.CreateAccount(t.Context(), accounts.Spec{ID: "acct", Plan: "pro", KeyValue: key}); err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(mux)
			t.Cleanup(srv.Close)
			tracer := &phasetest.Failing{How: how}
			t.Cleanup(svc.Events().Trace(tracer))

			for _, c := range []struct {
				name, method, path, body string
				cost                     int64
				want                     []string
			}{
				{"a REST call", http.MethodGet, "/v1/left?text=a", "", 2, []string{`"left:a"`}},
				{"a GraphQL query of two APIs", http.MethodPost, "/v1/graphql",
					`{"query":"{ left(text: \"a\") { text } right(text: \"b\") { text } }"}`, 4,
					[]string{`"left:a"`, `"right:b"`}},
			} {
				before := remaining(t, m.Accounts)
				begun := tracer.Begun()
				status, body := send(t, srv, c.method, c.path, c.body, key)
				if status != http.StatusOK || strings.Contains(body, `"errors"`) {
					t.Fatalf("%s: %d %s", c.name, status, body)
				}
				for _, w := range c.want {
					if !strings.Contains(body, w) {
						t.Errorf("%s answered %s, want %s in it", c.name, body, w)
					}
				}
				if n := tracer.Begun() - begun; n < 5 {
					t.Errorf("%s told the tracer of %d phases, want 5 at least", c.name, n)
				}
				if spent := before - remaining(t, m.Accounts); spent != c.cost {
					t.Errorf("%s was charged %d credits, want %d", c.name, spent, c.cost)
				}
				if n := svc.Stats().PendingSettlements; n != 0 {
					t.Errorf("%s left %d settlements pending", c.name, n)
				}
				// A reservation left open would be voided by a sweep after its expiry.
				if n, err := ledger.Sweep(t.Context(), time.Now().Add(48*time.Hour), 1000); err != nil || n != 0 {
					t.Errorf("%s left %d reservations open (%v)", c.name, n, err)
				}
			}
			if how != phasetest.NilEnd && !strings.Contains(logs.String(), "a tracer panicked") {
				t.Errorf("the tracer's panics were not logged: %s", logs.String())
			}
		})
	}
}

// send sends a request with key, and returns the answer's status and body.
func send(t *testing.T, srv *httptest.Server, method, path, body, key string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Api-Key", key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// remaining returns the credits left to the account "acct".
func remaining(t *testing.T, m *accounts.Manager) int64 {
	t.Helper()
	info, err := m.Account(t.Context(), "acct")
	if err != nil {
		t.Fatal(err)
	}
	return info.Balance.Remaining
}
