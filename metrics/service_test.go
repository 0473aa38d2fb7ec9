package metrics_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/doors"
	"github.com/tollgate-dev/tollgate/examples/apis"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/metrics"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// The keys of the test server's accounts.
const (
	acmeKey    = "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b" // plan pro, 1000 credits
	hashOnly   = "6fa459ea-ee8a-4ca4-894e-db77e160355e" // a sub-key of acme that may call hash only
	trickleKey = "9b2f4c1e-3d5a-4e6b-8c7d-0e1f2a3b4c5d" // one call a minute
	brokeKey   = "c0ffee00-1234-4abc-9def-0123456789ab" // no credits
)

// server is the sample catalog behind the REST, GraphQL and MCP doors, on memory
// stores that the metrics decorate, with the metrics attached.
type server struct {
	url string
	svc *tollgate.Service
	mgr *accounts.Manager
	reg *prometheus.Registry
	m   *metrics.Metrics
}

func startServer(t *testing.T) *server {
	t.Helper()
	m, promReg := newMetrics(t, nil)
	reg := &catalog.Registry{}
	if err := apis.Register(reg); err != nil {
		t.Fatal(err)
	}
	plans, err := billing.NewPlans(
		billing.Plan{Name: "pro", Credits: 1000, RatePerMinute: 600, Concurrency: 10, GraphQLMaxAPIs: 10, BatchMaxItems: 100},
		billing.Plan{Name: "trickle", Credits: 1000, RatePerMinute: 1, Concurrency: 1, GraphQLMaxAPIs: 1, BatchMaxItems: 10},
	)
	if err != nil {
		t.Fatal(err)
	}
	stores := m.Stores(tollgate.Stores{
		Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
		Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter(),
	})
	quiet := slog.New(slog.DiscardHandler)
	svc, err := tollgate.New(reg, stores, plans, &tollgate.Options{
		Now: testenv.NewClock(time.Date(2026, 1, 15, 12, 0, 0, 0, time.UTC)).Now, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	t.Cleanup(m.Attach(svc))
	mux := http.NewServeMux()
	mounted, err := doors.Mount(mux, svc, &doors.Options{Doors: doors.REST | doors.GraphQL | doors.MCP, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mounted.Close)
	m.Watch(metrics.Sources{MCP: mounted.MCP})
	mux.Handle("GET /metrics", metrics.Handler(promReg))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	ctx := t.Context()
	thousand, zero := int64(1000), int64(0)
	for _, a := range []accounts.Spec{
		{ID: "acme", Plan: "pro", Credits: &thousand, KeyValue: acmeKey},
		{ID: "trickle", Plan: "trickle", KeyValue: trickleKey},
		{ID: "broke", Plan: "pro", Credits: &zero, KeyValue: brokeKey},
	} {
		if _, _, _, err := mounted.Accounts.CreateAccount(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	rs, err := auth.NewRestrictions(auth.RestrictionSpec{APIs: []string{"hash"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := mounted.Accounts.CreateKey(ctx, "acme", accounts.NewKey{Name: "hash only", Restrictions: rs, Value: hashOnly}); err != nil {
		t.Fatal(err)
	}
	return &server{url: srv.URL, svc: svc, mgr: mounted.Accounts, reg: promReg, m: m}
}

// do sends a request with key and checks its status.
func (s *server) do(t *testing.T, method, path, key, body string, status int) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, s.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Api-Key", key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, b, status)
	}
}

// keyTransport sends an API key with every request.
type keyTransport struct{ key string }

func (k keyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Api-Key", k.key)
	return http.DefaultTransport.RoundTrip(r)
}

// TestThroughService makes known calls through the REST, batch, GraphQL and MCP doors
// of a real service (paid calls, refusals for four causes, a batch with an invalid
// item, a GraphQL query of two APIs, an MCP tool call), and checks that the counters
// are what was sent, that the credits charged are what the balances lost, and that the
// stores' operations and the live MCP session are counted.
func TestThroughService(t *testing.T) {
	s := startServer(t)
	for range 3 {
		s.do(t, http.MethodGet, "/v1/hash?text=a", acmeKey, "", http.StatusOK)
	}
	s.do(t, http.MethodGet, "/v1/hash?text=a", trickleKey, "", http.StatusOK)
	s.do(t, http.MethodGet, "/v1/hash?text=a", trickleKey, "", http.StatusTooManyRequests) // rate_limited
	s.do(t, http.MethodGet, "/v1/hash?text=a", brokeKey, "", http.StatusTooManyRequests)   // credits_exhausted
	s.do(t, http.MethodGet, "/v1/date-info?date=2024-02-29", hashOnly, "", http.StatusForbidden)
	s.do(t, http.MethodGet, "/v1/hash", acmeKey, "", http.StatusBadRequest) // invalid_input: no text
	s.do(t, http.MethodPost, "/v1/hash/batch", acmeKey, `{"items":[{"text":"a"},{"text":"b"},{}]}`, http.StatusOK)
	s.do(t, http.MethodPost, "/v1/graphql", acmeKey,
		`{"query":"{ hash(text: \"x\") { hash } dateinfo(date: \"2024-02-29\") { day_of_week } }"}`, http.StatusOK)

	client := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: s.url + "/v1/mcp",
		HTTPClient: &http.Client{Transport: keyTransport{acmeKey}}, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "hash", Arguments: map[string]any{"text": "a"}})
	if err != nil || res.IsError {
		t.Fatalf("the MCP tool call: %v %+v", err, res)
	}

	compare(t, s.reg, "tollgate_calls_total",
		`tollgate_calls_total{api="date-info",channel="graphql",outcome="ok"} 1`,
		`tollgate_calls_total{api="hash",channel="batch",outcome="ok"} 2`,
		`tollgate_calls_total{api="hash",channel="graphql",outcome="ok"} 1`,
		`tollgate_calls_total{api="hash",channel="mcp",outcome="ok"} 1`,
		`tollgate_calls_total{api="hash",channel="rest",outcome="ok"} 4`,
	)
	compare(t, s.reg, "tollgate_refusals_total",
		`tollgate_refusals_total{api="date-info",channel="rest",code="forbidden"} 1`,
		`tollgate_refusals_total{api="hash",channel="batch",code="invalid_input"} 1`,
		`tollgate_refusals_total{api="hash",channel="rest",code="credits_exhausted"} 1`,
		`tollgate_refusals_total{api="hash",channel="rest",code="invalid_input"} 1`,
		`tollgate_refusals_total{api="hash",channel="rest",code="rate_limited"} 1`,
	)
	compare(t, s.reg, "tollgate_credits_charged_total",
		`tollgate_credits_charged_total{api="date-info"} 1`,
		`tollgate_credits_charged_total{api="hash"} 8`,
	)
	compare(t, s.reg, "tollgate_settlements_total",
		`tollgate_settlements_total{settlement="deferred"} 0`,
		`tollgate_settlements_total{settlement="settled"} 7`,
		`tollgate_settlements_total{settlement="unsettled"} 0`,
		`tollgate_settlements_total{settlement="voided"} 0`,
	)
	// What the counters say was charged is what the balances lost.
	var spent int64
	for _, a := range []string{"acme", "trickle", "broke"} {
		info, err := s.mgr.Account(t.Context(), a)
		if err != nil {
			t.Fatal(err)
		}
		spent += info.Balance.Used
	}
	if spent != 9 {
		t.Errorf("the accounts used %d credits, the counters say 9", spent)
	}
	// One observation of each phase per call that ran: 4 REST calls, a batch, a
	// GraphQL query and an MCP tool call.
	for channel, want := range map[string]int{"rest": 4, "batch": 1, "graphql": 1, "mcp": 1} {
		for _, phase := range []string{metrics.PhaseAdmission, metrics.PhaseHandler, metrics.PhaseSettlement} {
			if got := histogramCount(t, s.reg, "tollgate_call_phase_duration_seconds", "channel", channel, "phase", phase); got != want {
				t.Errorf("%s %s: %d observations, want %d", channel, phase, got, want)
			}
		}
	}
	// The memory stores: one reservation per call admitted, and the one refused for
	// its credits; one settlement per call that ran; no failure.
	for op, want := range map[string]int{"reserve": 8, "settle": 7} {
		if got := histogramCount(t, s.reg, "tollgate_store_operation_duration_seconds", "store", "memory", "operation", op); got != want {
			t.Errorf("%s: %d operations, want %d", op, got, want)
		}
	}
	if n, err := testutil.GatherAndCount(s.reg, "tollgate_store_errors_total"); err != nil || n != 0 {
		t.Errorf("store errors: %d series (%v), want none", n, err)
	}
	compare(t, s.reg, "tollgate_mcp_sessions", "tollgate_mcp_sessions 1")
	compare(t, s.reg, "tollgate_pending_settlements", "tollgate_pending_settlements 0")

	// The scrape, over HTTP.
	resp, err := http.Get(s.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `tollgate_calls_total{api="hash",channel="rest",outcome="ok"} 4`) {
		t.Errorf("GET /metrics: %d\n%s", resp.StatusCode, body)
	}
}

// histogramCount returns the number of observations of the series of a histogram
// with the label values given (name, value, ...).
func histogramCount(t *testing.T, reg *prometheus.Registry, name string, labels ...string) int {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue series
				}
			}
			return int(m.GetHistogram().GetSampleCount())
		}
	}
	return 0
}
