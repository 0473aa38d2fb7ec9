package dashboard_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store/postgres"
	"github.com/tollgate-dev/tollgate/usage"
)

// usageRecords is how many usage records BenchmarkPages seeds. The default keeps CI
// cheap; the figures of the performance notes are taken with -usage.records=1000000.
var usageRecords = flag.Int("usage.records", 20_000, "usage records BenchmarkPages and TestPagesOnPostgres seed")

// pgHost is the dashboard of a host whose every store is PostgreSQL, for an account
// ("acme") with usage records, keys and audit entries, and a person signed in to it.
type pgHost struct {
	mgr     *accounts.Manager
	handler http.Handler
	// cookie is the signed-in session's cookie; key the primary key's value.
	cookie *http.Cookie
	key    string
	// calls and credits are the seeded usage of the last 30 days, per API.
	calls, credits map[string]int64
}

// newPGHost assembles the host on a fresh PostgreSQL schema and seeds records usage
// records, spread at random over the 30 days before now, over the account's APIs and
// keys, through a usage.Recorder flushing every 50,000 records, as instances do.
func newPGHost(tb testing.TB, records int) *pgHost {
	tb.Helper()
	dsn := testenv.Var(tb, testenv.Postgres)
	pool := testenv.PostgresPool(tb, dsn, testenv.PostgresSchema(tb, dsn), 8)
	ctx := tb.Context()
	if err := postgres.Migrate(ctx, pool); err != nil {
		tb.Fatal(err)
	}
	pg, err := postgres.New(pool, nil)
	if err != nil {
		tb.Fatal(err)
	}
	usageStore, err := postgres.NewUsageStore(pool)
	if err != nil {
		tb.Fatal(err)
	}
	auditStore, err := postgres.NewAuditStore(pool)
	if err != nil {
		tb.Fatal(err)
	}
	sessionStore, err := postgres.NewSessionStore(pool)
	if err != nil {
		tb.Fatal(err)
	}
	reg := &catalog.Registry{}
	apis := []string{"alpha", "beta", "gamma", "delta", "epsilon"}
	for i, id := range apis {
		if err := reg.Register(catalog.API{ID: id, Method: http.MethodGet, Cost: int64(i + 1),
			Handler: catalog.HandlerFunc(func(context.Context, *catalog.Request) (any, error) {
				return map[string]any{"api": id}, nil
			})}); err != nil {
			tb.Fatal(err)
		}
	}
	plans, err := billing.NewPlans(billing.Plan{Name: "scale", Credits: 10_000_000, RatePerMinute: 6000, Concurrency: 20})
	if err != nil {
		tb.Fatal(err)
	}
	sessions, err := auth.NewSessions([]byte("dashboard-bench-secret-0123456789abcdef"))
	if err != nil {
		tb.Fatal(err)
	}
	now := time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC)
	clock := testenv.NewClock(now)
	logs := &testenv.Logs{}
	stores := tollgate.Stores{Keys: pg, Ledger: pg, Rates: pg, Slots: pg}
	svc, err := tollgate.New(reg, stores, plans,
		&tollgate.Options{Now: clock.Now, Logger: logs.Logger(), Sessions: sessions, SessionStore: sessionStore, SweepInterval: -1})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(svc.Close)
	mgr, _ := manage(tb, svc, stores, auditStore, usageStore, clock.Now, logs.Logger())
	mux := mount(tb, mgr, logs.Logger(), nil)
	h := &pgHost{mgr: mgr, handler: mux, calls: map[string]int64{}, credits: map[string]int64{}}

	_, primary, key, err := mgr.CreateAccount(ctx, accounts.Spec{ID: "acme", Plan: "scale"})
	if err != nil {
		tb.Fatal(err)
	}
	h.key = key
	caller := tollgate.Caller{Credential: auth.Credential{Kind: auth.APIKeyHeader, Value: key}}
	keyIDs := []string{primary.ID}
	// Twenty sub-keys, a few of them rotated or revoked: the keys table and the audit
	// log have content, and usage is spread over several keys.
	for i := range 20 {
		scope, err := auth.NewRestrictions(auth.RestrictionSpec{APIs: apis[:1+i%len(apis)]})
		if err != nil {
			tb.Fatal(err)
		}
		k, _, err := mgr.CreateOwnKey(ctx, caller, accounts.NewKey{Name: fmt.Sprintf("service %02d", i), Restrictions: scope})
		if err != nil {
			tb.Fatal(err)
		}
		keyIDs = append(keyIDs, k.ID)
		switch i % 7 {
		case 3:
			if _, _, err := mgr.RotateOwnKey(ctx, caller, k.ID); err != nil {
				tb.Fatal(err)
			}
		case 5:
			if _, err := mgr.RevokeOwnKey(ctx, caller, k.ID); err != nil {
				tb.Fatal(err)
			}
		}
	}

	// The seeding recorder writes records of the clock's last 30 days; it does not
	// prune (the host's recorder does, with the clock).
	rec, err := usage.NewRecorder(usageStore, &usage.RecorderOptions{FlushInterval: -1, PruneInterval: -1})
	if err != nil {
		tb.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(16, 16))
	from := usage.Day.Start(now).AddDate(0, 0, -29)
	span := now.Sub(from)
	channels := []string{"rest", "graphql", "mcp"}
	for i := range records {
		n := rng.IntN(len(apis))
		r := usage.Record{At: from.Add(time.Duration(rng.Int64N(int64(span)))), Account: "acme",
			Key: keyIDs[rng.IntN(len(keyIDs))], API: apis[n], Channel: channels[rng.IntN(len(channels))],
			Outcome: usage.OK, Credits: int64(n + 1), Duration: time.Duration(rng.Int64N(int64(200 * time.Millisecond)))}
		if rng.IntN(20) == 0 {
			r.Outcome, r.Credits = "rejected", 0
		}
		rec.Record(r)
		h.calls[r.API]++
		h.credits[r.API] += r.Credits
		if i%50_000 == 49_999 {
			if err := rec.Flush(ctx); err != nil {
				tb.Fatal(err)
			}
		}
	}
	if err := rec.Close(ctx); err != nil {
		tb.Fatal(err)
	}

	// Sign in as a browser would.
	res := h.serve(tb, httptest.NewRequest(http.MethodPost, "/dashboard/sign-in",
		strings.NewReader(url.Values{"api_key": {key}}.Encode())), "Content-Type", "application/x-www-form-urlencoded")
	if res.Code != http.StatusSeeOther {
		tb.Fatalf("sign in: %d\n%s", res.Code, res.Body)
	}
	for _, c := range res.Result().Cookies() {
		if c.Value != "" {
			h.cookie = c
		}
	}
	if h.cookie == nil {
		tb.Fatal("sign in set no cookie")
	}
	return h
}

// serve serves req, with the header name/value pairs hdr, on the host's mux.
func (h *pgHost) serve(tb testing.TB, req *http.Request, hdr ...string) *httptest.ResponseRecorder {
	tb.Helper()
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.handler.ServeHTTP(rec, req.WithContext(tb.Context()))
	return rec
}

// get serves a GET of the dashboard page path (relative to /dashboard/) for the
// signed-in person.
func (h *pgHost) get(tb testing.TB, path string) *httptest.ResponseRecorder {
	tb.Helper()
	req := httptest.NewRequest(http.MethodGet, "/dashboard/"+path, nil)
	req.AddCookie(h.cookie)
	return h.serve(tb, req)
}

// pagesToRender are the dashboard's pages as a signed-in person reads them, by name.
var pagesToRender = []struct{ name, path string }{
	{"overview", ""},
	{"keys", "keys"},
	{"usage-30d-by-api-daily", "usage"},
	{"usage-30d-by-key-hourly", "usage?interval=hour&by=key"},
	{"usage-csv-30d-hourly", "usage.csv?interval=hour"},
	{"audit", "audit"},
	{"mcp", "mcp"},
	{"apis", "apis"},
	{"api-alpha", "api?id=alpha"},
	{"graphql", "graphql"},
	{"reference", "reference"},
}

// TestPagesOnPostgres renders every page of BenchmarkPages once, with every store in
// PostgreSQL, so that CI checks what the benchmark measures: each page is a 200, and the
// usage page's totals count every seeded call and credit.
func TestPagesOnPostgres(t *testing.T) {
	h := newPGHost(t, min(*usageRecords, 20_000))
	for _, p := range pagesToRender {
		if res := h.get(t, p.path); res.Code != http.StatusOK {
			t.Errorf("%s: %d\n%s", p.name, res.Code, res.Body)
		}
	}
	var calls, credits int64
	for api := range h.calls {
		calls += h.calls[api]
		credits += h.credits[api]
	}
	body := h.get(t, "usage").Body.String()
	for _, want := range []string{formatCount(calls), formatCount(credits)} {
		if !strings.Contains(body, want) {
			t.Errorf("the usage page does not show the seeded total %s", want)
		}
	}
}

// BenchmarkPages measures the server's time to answer each dashboard page for an
// account whose usage is -usage.records records, every store in PostgreSQL (the figure
// of the performance notes is taken with a million):
//
//	go test -run='^$' -bench=Pages ./dashboard/ -args -usage.records=1000000
func BenchmarkPages(b *testing.B) {
	start := time.Now()
	h := newPGHost(b, *usageRecords)
	b.Logf("seeded %d usage records in %s", *usageRecords, time.Since(start).Round(time.Millisecond))
	for _, p := range pagesToRender {
		b.Run(p.name, func(b *testing.B) {
			var bytes int
			for b.Loop() {
				res := h.get(b, p.path)
				if res.Code != http.StatusOK {
					b.Fatalf("%d\n%s", res.Code, res.Body)
				}
				bytes = res.Body.Len()
			}
			b.ReportMetric(float64(bytes), "B/page")
		})
	}
}

// formatCount writes n as the dashboard does, with thousands separators.
func formatCount(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
