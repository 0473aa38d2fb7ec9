package accounts_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/gql"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/mcp"
	"github.com/tollgate-dev/tollgate/rest"
	"github.com/tollgate-dev/tollgate/selfservice"
	"github.com/tollgate-dev/tollgate/session"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/store/postgres"
	"github.com/tollgate-dev/tollgate/usage"
)

// usageT0 is when the usage tests start.
var usageT0 = time.Date(2030, time.January, 15, 12, 0, 0, 0, time.UTC)

// usageRegistry returns the APIs of the usage tests: "sleep" moves clock forward by its
// ms parameter (its latency, as the service measures it), "reject" rejects its input
// (charged), "boom" fails on the service's side (refunded).
func usageRegistry(t testing.TB, clock *testenv.Clock) *catalog.Registry {
	t.Helper()
	ok := []catalog.Field{{Name: "ok", Type: catalog.Boolean, Description: "Always true."}}
	reg := &catalog.Registry{}
	for _, api := range []catalog.API{
		{ID: "sleep", Title: "Sleep", Description: "Takes ms milliseconds.", Method: http.MethodGet, Cost: 2,
			Params: []catalog.Param{{Name: "ms", Type: catalog.Integer, Min: catalog.Num(0), Max: catalog.Num(100000), Default: 0, Description: "How long."}},
			Result: ok,
			Handler: catalog.HandlerFunc(func(_ context.Context, req *catalog.Request) (any, error) {
				if clock != nil {
					clock.Advance(time.Duration(req.Params.Int("ms")) * time.Millisecond)
				}
				return map[string]any{"ok": true}, nil
			})},
		{ID: "reject", Title: "Reject", Description: "Rejects.", Method: http.MethodGet, Cost: 3, Result: ok,
			Handler: catalog.HandlerFunc(func(context.Context, *catalog.Request) (any, error) { return nil, catalog.Reject("no") })},
		{ID: "boom", Title: "Boom", Description: "Fails.", Method: http.MethodGet, Cost: 5, Result: ok,
			Handler: catalog.HandlerFunc(func(context.Context, *catalog.Request) (any, error) { return nil, errors.New("boom") })},
	} {
		if err := reg.Register(api); err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

// usageEnv is a service with usage recording (unless its usage store is nil) behind
// the three front doors, and the manager of its accounts behind the self-service API and
// the session routes.
type usageEnv struct {
	svc   *tollgate.Service
	mgr   *accounts.Manager
	rec   *usage.Recorder // nil without a usage store
	url   string
	clock *testenv.Clock
	logs  *testenv.Logs
}

// sharedStores are the stores several instances share.
func sharedStores() tollgate.Stores {
	return tollgate.Stores{Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
		Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter()}
}

var usagePlans = func() *billing.Plans {
	p, err := billing.NewPlans(
		billing.Plan{Name: "pro", Credits: 1000, GraphQLMaxAPIs: 10},
		billing.Plan{Name: "tiny", Credits: 1000, RatePerMinute: 1, GraphQLMaxAPIs: 10})
	if err != nil {
		panic(err)
	}
	return p
}()

func newUsageEnv(t *testing.T, stores tollgate.Stores, us usage.Store) *usageEnv {
	t.Helper()
	env := &usageEnv{clock: testenv.NewClock(usageT0), logs: &testenv.Logs{}}
	sessions, err := auth.NewSessions([]byte(strings.Repeat("s", auth.MinSessionSecret)))
	if err != nil {
		t.Fatal(err)
	}
	opts := &tollgate.Options{Now: env.clock.Now, Logger: env.logs.Logger(),
		Sessions: sessions, SessionStore: memory.NewSessionStore()}
	svc, err := tollgate.New(usageRegistry(t, env.clock), stores, usagePlans, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	env.svc = svc
	mo := &accounts.Options{Logger: env.logs.Logger()}
	if us != nil {
		env.rec, err = usage.NewRecorder(us, &usage.RecorderOptions{FlushInterval: -1, Now: env.clock.Now, Logger: env.logs.Logger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { env.rec.Close(context.Background()) })
		svc.Events().Subscribe(env.rec, env.rec.Kinds()...)
		mo.Usage = us
	}
	if env.mgr, err = accounts.New(svc, mo); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.mgr.Close)
	mux := http.NewServeMux()
	rh, err := rest.NewHandler(svc, &rest.Options{Logger: env.logs.Logger(), Accounts: env.mgr})
	if err != nil {
		t.Fatal(err)
	}
	gh, err := gql.NewHandler(svc, nil)
	if err != nil {
		t.Fatal(err)
	}
	mh, err := mcp.NewHandler(svc, nil)
	if err != nil {
		t.Fatal(err)
	}
	sh, err := session.NewHandler(env.mgr, &session.Options{Logger: env.logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	ah, err := selfservice.NewHandler(env.mgr, nil)
	if err != nil {
		t.Fatal(err)
	}
	mux.Handle("/v1/graphql", gh)
	mux.Handle("/v1/mcp", mh)
	mux.Handle("/v1/account/session", sh)
	mux.Handle("/v1/account", sh.Cookies(ah))
	mux.Handle("/v1/account/", sh.Cookies(ah))
	mux.Handle("/", rh)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	env.url = srv.URL
	return env
}

// account creates an account on plan, with its primary key and a sub-key "ci".
func (e *usageEnv) account(t *testing.T, plan string) (acct auth.Account, primary auth.Key, primaryValue string, sub auth.Key, subValue string) {
	t.Helper()
	acct, primary, primaryValue, err := e.mgr.CreateAccount(t.Context(), accounts.Spec{Plan: plan})
	if err != nil {
		t.Fatal(err)
	}
	sub, subValue, err = e.mgr.CreateKey(t.Context(), acct.ID, accounts.NewKey{Name: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	return acct, primary, primaryValue, sub, subValue
}

// do sends a request with key and returns the status and body.
func (e *usageEnv) do(t *testing.T, method, path, key, body string, hdr ...string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, e.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("X-Api-Key", key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// mcpCall initializes an MCP session with key and calls tool with args.
func (e *usageEnv) mcpCall(t *testing.T, key, tool, args string) string {
	t.Helper()
	status, body, hdr := e.do(t, http.MethodPost, "/v1/mcp", key,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	sid := hdr.Get("Mcp-Session-Id")
	if status != http.StatusOK || sid == "" {
		t.Fatalf("MCP initialize: %d %s", status, body)
	}
	if status, body, _ := e.do(t, http.MethodPost, "/v1/mcp", key, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, "Mcp-Session-Id", sid); status != http.StatusAccepted {
		t.Fatalf("MCP initialized: %d %s", status, body)
	}
	status, body, _ = e.do(t, http.MethodPost, "/v1/mcp", key,
		fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, tool, args), "Mcp-Session-Id", sid)
	if status != http.StatusOK {
		t.Fatalf("MCP tools/call %s: %d %s", tool, status, body)
	}
	return body
}

// usageStores are the usage stores the end-to-end tests run on.
func usageStores(t *testing.T) map[string]func(t *testing.T) usage.Store {
	return map[string]func(t *testing.T) usage.Store{
		"memory": func(*testing.T) usage.Store { return memory.NewUsageStore() },
		"postgres": func(t *testing.T) usage.Store {
			dsn := testenv.Var(t, testenv.Postgres)
			pool := testenv.PostgresPool(t, dsn, testenv.PostgresSchema(t, dsn), 8)
			if err := postgres.Migrate(t.Context(), pool); err != nil {
				t.Fatal(err)
			}
			s, err := postgres.NewUsageStore(pool)
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	}
}

// points sums a result's points per group: calls, credits and errors.
type groupSum struct {
	Calls, Credits int64
	Errors         map[string]int64
}

func sums(res usage.Result) map[string]groupSum {
	out := map[string]groupSum{}
	for _, s := range res.Series {
		g := groupSum{Errors: map[string]int64{}}
		for _, p := range s.Points {
			g.Calls += p.Calls
			g.Credits += p.Credits
			for code, n := range p.Errors {
				g.Errors[code] += n
			}
		}
		out[s.Group] = g
	}
	return out
}

// Calls over REST, GraphQL and MCP show up in the usage queries with their API, key,
// channel, outcome, credits and latency; refusals of an authenticated caller are counted
// with their code and no credits; unauthenticated callers and unknown APIs are not
// recorded; no key value is logged or stored.
func TestUsageEndToEnd(t *testing.T) {
	for name, newStore := range usageStores(t) {
		t.Run(name, func(t *testing.T) {
			us := newStore(t)
			env := newUsageEnv(t, sharedStores(), us)
			ctx := t.Context()
			acct, primary, primaryValue, sub, subValue := env.account(t, "pro")
			tiny, _, tinyValue, _, _ := env.account(t, "tiny")

			// Hour 12: REST.
			for _, c := range []struct {
				path, key string
				want      int
			}{
				{"/v1/sleep?ms=5", primaryValue, 200},
				{"/v1/reject", subValue, 400},
				{"/v1/boom", primaryValue, 500},
				{"/v1/sleep?ms=abc", primaryValue, 400},
				{"/v1/nosuchapi", primaryValue, 404},                       // not recorded: no such API
				{"/v1/sleep", "00000000-0000-4000-8000-000000000000", 401}, // not recorded: unknown key
				{"/v1/sleep", tinyValue, 200},
				{"/v1/sleep", tinyValue, 429}, // rate_limited
			} {
				if status, body, _ := env.do(t, http.MethodGet, c.path, c.key, ""); status != c.want {
					t.Fatalf("GET %s: %d %s, want %d", c.path, status, body, c.want)
				}
			}
			// Hour 13: GraphQL (three APIs in one call) and MCP.
			env.clock.Advance(time.Hour)
			status, body, _ := env.do(t, http.MethodPost, "/v1/graphql", primaryValue, `{"query":"{ sleep(ms: 40) { ok } reject { ok } boom { ok } }"}`)
			if status != http.StatusOK {
				t.Fatalf("GraphQL: %d %s", status, body)
			}
			if body := env.mcpCall(t, primaryValue, "sleep", `{"ms":700}`); strings.Contains(body, `"isError":true`) {
				t.Fatalf("MCP sleep: %s", body)
			}
			if err := env.rec.Flush(ctx); err != nil {
				t.Fatal(err)
			}

			day := usage.Query{Account: acct.ID, From: usageT0, To: usageT0.Add(24 * time.Hour), Interval: usage.Day}
			q := func(edit func(*usage.Query)) usage.Result {
				t.Helper()
				uq := day
				edit(&uq)
				res, err := env.mgr.Usage(ctx, uq)
				if err != nil {
					t.Fatalf("Usage(%+v): %v", uq, err)
				}
				return res
			}
			check := func(what string, got, want map[string]groupSum) {
				t.Helper()
				for g, w := range want {
					if w.Errors == nil {
						w.Errors = map[string]int64{}
					}
					gg := got[g]
					if gg.Calls != w.Calls || gg.Credits != w.Credits || fmt.Sprint(gg.Errors) != fmt.Sprint(w.Errors) {
						t.Errorf("%s, group %q: %+v, want %+v", what, g, gg, w)
					}
				}
				if len(got) != len(want) {
					t.Errorf("%s: groups %v, want %v", what, got, want)
				}
			}
			check("by api", sums(q(func(q *usage.Query) { q.By = usage.ByAPI })), map[string]groupSum{
				"sleep":  {Calls: 4, Credits: 6, Errors: map[string]int64{"invalid_input": 1}},
				"reject": {Calls: 2, Credits: 6, Errors: map[string]int64{"rejected": 2}},
				"boom":   {Calls: 2, Credits: 0, Errors: map[string]int64{"api_failed": 2}},
			})
			check("by channel", sums(q(func(q *usage.Query) { q.By = usage.ByChannel })), map[string]groupSum{
				"rest":    {Calls: 4, Credits: 5, Errors: map[string]int64{"rejected": 1, "api_failed": 1, "invalid_input": 1}},
				"graphql": {Calls: 3, Credits: 5, Errors: map[string]int64{"rejected": 1, "api_failed": 1}},
				"mcp":     {Calls: 1, Credits: 2},
			})
			check("by key", sums(q(func(q *usage.Query) { q.By = usage.ByKey })), map[string]groupSum{
				primary.ID: {Calls: 7, Credits: 9, Errors: map[string]int64{"rejected": 1, "api_failed": 2, "invalid_input": 1}},
				sub.ID:     {Calls: 1, Credits: 3, Errors: map[string]int64{"rejected": 1}},
			})
			check("tiny account by outcome", sums(q(func(q *usage.Query) { q.Account, q.By = tiny.ID, usage.ByOutcome })), map[string]groupSum{
				"ok":           {Calls: 1, Credits: 2},
				"rate_limited": {Calls: 1, Errors: map[string]int64{"rate_limited": 1}},
			})
			// Per hour and channel: REST in hour 12, GraphQL and MCP in hour 13.
			hourly := q(func(q *usage.Query) { q.Interval, q.By = usage.Hour, usage.ByChannel })
			for _, s := range hourly.Series {
				want := usageT0.Add(time.Hour)
				if s.Group == "rest" {
					want = usageT0
				}
				if len(s.Points) != 1 || !s.Points[0].Start.Equal(want) {
					t.Errorf("hourly %s: %+v, want one point at %v", s.Group, s.Points, want)
				}
			}
			// Latency: the REST call ran 5ms, the MCP call 700ms, as the clock measured.
			for _, c := range []struct {
				channel string
				want    time.Duration
			}{{"rest", 5 * time.Millisecond}, {"mcp", 700 * time.Millisecond}} {
				res := q(func(q *usage.Query) { q.API, q.Channel = "sleep", c.channel })
				p := res.Series[0].Points[0]
				if e := float64(p.P50-c.want) / float64(c.want); e > usage.QuantileError || e < -usage.QuantileError || p.P99 != p.P50 {
					t.Errorf("sleep over %s: p50 %v p99 %v, want %v within %.1f%%", c.channel, p.P50, p.P99, c.want, 100*usage.QuantileError)
				}
			}
			// The refused call has no latency: sleep over REST counts 2 calls, 1 latency.
			rows, err := us.Sum(ctx, mustNormalize(t, usage.Query{Account: acct.ID, From: usageT0, To: usageT0.Add(time.Hour), Interval: usage.Hour, API: "sleep"}))
			if err != nil {
				t.Fatal(err)
			}
			var lat usage.Histogram
			for _, r := range rows {
				lat.Merge(&r.Latency)
			}
			if lat.Count() != 1 {
				t.Errorf("REST sleep latencies: %d, want 1 (the refused call has none)", lat.Count())
			}
			// The credits in the statistics are the ledger's.
			info, err := env.mgr.Account(ctx, acct.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got := sums(q(func(*usage.Query) {}))[""].Credits; got != info.Balance.Used {
				t.Errorf("usage counts %d credits; the ledger %d", got, info.Balance.Used)
			}
			last, err := env.mgr.KeysLastUsed(ctx, acct.ID)
			if err != nil {
				t.Fatal(err)
			}
			// The sleeps moved the clock: 5ms in hour 12, 40ms (GraphQL) before the MCP call.
			wantPrimary, wantSub := usageT0.Add(time.Hour+45*time.Millisecond), usageT0.Add(5*time.Millisecond)
			if !last[primary.ID].Equal(wantPrimary) || !last[sub.ID].Equal(wantSub) || len(last) != 2 {
				t.Errorf("last used %v, want %s at %v and %s at %v", last, primary.ID, wantPrimary, sub.ID, wantSub)
			}
			// No key value anywhere.
			dump, _ := json.Marshal(rows)
			for _, v := range []string{primaryValue, subValue, tinyValue} {
				if strings.Contains(env.logs.String(), v) || strings.Contains(string(dump), v) {
					t.Errorf("a key value appears in the logs or the usage rows")
				}
			}
		})
	}
}

func mustNormalize(t *testing.T, q usage.Query) usage.Query {
	t.Helper()
	q, err := q.Normalized()
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// Several instances (services with recorders of their own) flushing into one usage
// store add up exactly.
func TestUsageSeveralInstances(t *testing.T) {
	for name, newStore := range usageStores(t) {
		t.Run(name, func(t *testing.T) {
			us := newStore(t)
			stores := sharedStores()
			const instances, callers, calls = 3, 4, 25
			envs := make([]*usageEnv, instances)
			for i := range envs {
				envs[i] = newUsageEnv(t, stores, us)
			}
			acct, _, value, err := envs[0].mgr.CreateAccount(t.Context(), accounts.Spec{Plan: "pro"})
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for _, env := range envs {
				for range callers {
					wg.Go(func() {
						for i := range calls {
							path := "/v1/sleep?ms=1"
							if i%5 == 0 {
								path = "/v1/reject"
							}
							if status, body, _ := env.do(t, http.MethodGet, path, value, ""); status != 200 && status != 400 {
								t.Errorf("GET %s: %d %s", path, status, body)
							}
							if i%10 == 9 {
								if err := env.rec.Flush(t.Context()); err != nil {
									t.Errorf("Flush: %v", err)
								}
							}
						}
					})
				}
			}
			wg.Wait()
			for _, env := range envs {
				if err := env.rec.Close(t.Context()); err != nil { // flushes
					t.Errorf("Close: %v", err)
				}
				if d, p := env.rec.Dropped(), env.rec.Pending(); d != 0 || p != 0 {
					t.Errorf("instance: %d dropped, %d pending", d, p)
				}
			}
			res, err := usage.Run(t.Context(), us, usage.Query{Account: acct.ID, From: usageT0, To: usageT0.Add(time.Hour), Interval: usage.Hour, By: usage.ByAPI})
			if err != nil {
				t.Fatal(err)
			}
			got := sums(res)
			const total = instances * callers * calls
			if got["sleep"].Calls != total*4/5 || got["reject"].Calls != total/5 || got["sleep"].Credits+got["reject"].Credits != total*4/5*2+total/5*3 {
				t.Errorf("sums %+v, want %d sleep and %d reject calls", got, total*4/5, total/5)
			}
		})
	}
}

// The REST time-series form of /v1/analytics: the caller's own account, a sub-key sees
// only its own calls, and a bad parameter is a 400 naming it.
func TestUsageAnalyticsREST(t *testing.T) {
	env := newUsageEnv(t, sharedStores(), memory.NewUsageStore())
	ctx := t.Context()
	acct, primary, primaryValue, sub, subValue := env.account(t, "pro")
	_, _, otherValue, _, _ := env.account(t, "pro")
	env.do(t, http.MethodGet, "/v1/sleep?ms=5", primaryValue, "")
	env.do(t, http.MethodGet, "/v1/sleep?ms=5", primaryValue, "")
	env.do(t, http.MethodGet, "/v1/reject", subValue, "")
	env.do(t, http.MethodGet, "/v1/sleep", otherValue, "")
	if err := env.rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	before, err := env.mgr.Account(ctx, acct.ID)
	if err != nil {
		t.Fatal(err)
	}
	type body struct {
		Data struct {
			Account  string    `json:"account"`
			From     time.Time `json:"from"`
			To       time.Time `json:"to"`
			Interval string    `json:"interval"`
			Key      *string   `json:"key"`
			Series   []struct {
				Group  string `json:"group"`
				Points []struct {
					Start   time.Time              `json:"start"`
					Calls   int64                  `json:"calls"`
					Credits int64                  `json:"credits"`
					Errors  map[string]int64       `json:"errors"`
					Latency *struct{ P50 float64 } `json:"latency_ms"`
				} `json:"points"`
			} `json:"series"`
		} `json:"data"`
		Error string `json:"error"`
		Code  string `json:"-"` // X-Error-Code
	}
	get := func(key string, params url.Values, want int) body {
		t.Helper()
		status, raw, hdr := env.do(t, http.MethodGet, "/v1/analytics?"+params.Encode(), key, "")
		if status != want {
			t.Fatalf("GET /v1/analytics?%s: %d %s, want %d", params.Encode(), status, raw, want)
		}
		if hdr.Get("X-Credits-Used") != "" && hdr.Get("X-Credits-Used") != fmt.Sprint(before.Balance.Used) {
			t.Errorf("the analytics call changed the credits: %s", hdr.Get("X-Credits-Used"))
		}
		var b body
		if err := json.Unmarshal([]byte(raw), &b); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		b.Code = hdr.Get("X-Error-Code")
		return b
	}
	b := get(primaryValue, url.Values{"from": {"2030-01-15"}, "to": {"2030-01-16"}, "interval": {"day"}, "by": {"api"}}, 200)
	if b.Data.Account != acct.ID || len(b.Data.Series) != 2 || b.Data.Key != nil {
		t.Fatalf("primary key, by api: %+v", b.Data)
	}
	for _, s := range b.Data.Series {
		p := s.Points[0]
		switch s.Group {
		case "sleep":
			if p.Calls != 2 || p.Credits != 4 || p.Latency == nil || p.Latency.P50 < 4.5 || p.Latency.P50 > 5.5 || !p.Start.Equal(usageT0.Truncate(24*time.Hour)) {
				t.Errorf("sleep: %+v", p)
			}
		case "reject":
			if p.Calls != 1 || p.Errors["rejected"] != 1 {
				t.Errorf("reject: %+v", p)
			}
		default:
			t.Errorf("unexpected group %q", s.Group)
		}
	}
	// A sub-key sees its own calls only.
	b = get(subValue, url.Values{"from": {"2030-01-15"}, "to": {"2030-01-16"}, "by": {"key"}}, 200)
	if b.Data.Key == nil || *b.Data.Key != sub.ID || len(b.Data.Series) != 1 || b.Data.Series[0].Group != sub.ID || b.Data.Series[0].Points[0].Calls != 1 {
		t.Errorf("sub-key by key: %+v", b.Data)
	}
	b = get(subValue, url.Values{"key": {primary.ID}}, 403)
	if b.Code != "forbidden" || !strings.HasPrefix(b.Error, "key:") {
		t.Errorf("sub-key asking for another key: %s %q", b.Code, b.Error)
	}
	// The primary key may filter on any key of its account; defaults: the last 30 days by day.
	b = get(primaryValue, url.Values{"key": {sub.ID}}, 200)
	if b.Data.Interval != "day" || !b.Data.To.After(usageT0) || len(b.Data.Series) != 1 || b.Data.Series[0].Points[0].Calls != 1 {
		t.Errorf("primary key, key filter, defaults: %+v", b.Data)
	}
	for _, c := range []struct {
		params url.Values
		param  string
	}{
		{url.Values{"from": {"yesterday"}}, "from"},
		{url.Values{"to": {"2030-13-01"}}, "to"},
		{url.Values{"interval": {"week"}}, "interval"},
		{url.Values{"by": {"plan"}}, "by"},
		{url.Values{"from": {"2030-01-15"}, "to": {"2030-01-14"}}, "to"},
		{url.Values{"from": {"2029-01-01"}, "to": {"2030-06-01"}}, "to"},
		{url.Values{"interval": {"minute"}, "from": {"2030-01-01"}, "to": {"2030-01-03"}}, "to"},
		{url.Values{"api": {"a\x00"}}, "api"},
	} {
		b := get(primaryValue, c.params, 400)
		if b.Code != "invalid_input" || !strings.HasPrefix(b.Error, c.param+":") {
			t.Errorf("?%s: %s %q, want invalid_input naming %s", c.params.Encode(), b.Code, b.Error, c.param)
		}
	}
	// No key: the edge's 403; unknown key: 401; without the parameters: the plain form.
	if status, _, _ := env.do(t, http.MethodGet, "/v1/analytics?interval=day", "", ""); status != 403 {
		t.Errorf("no key: %d, want 403", status)
	}
	if status, _, _ := env.do(t, http.MethodGet, "/v1/analytics?interval=day", "00000000-0000-4000-8000-000000000000", ""); status != 401 {
		t.Errorf("unknown key: %d, want 401", status)
	}
	if status, raw, _ := env.do(t, http.MethodGet, "/v1/analytics", primaryValue, ""); status != 200 || !strings.Contains(raw, `"calls":{`) {
		t.Errorf("plain form: %d %s", status, raw)
	}
	after, err := env.mgr.Account(ctx, acct.ID)
	if err != nil || after.Balance.Used != before.Balance.Used {
		t.Errorf("analytics calls were billed: used %d, then %d (%v)", before.Balance.Used, after.Balance.Used, err)
	}
}

// A manager without Options.Usage answers usage queries with CodeNotFound (and the
// time-series form of /v1/analytics is a 404: see TestOwnUsageOff); a recorder needs a
// store.
func TestUsageOff(t *testing.T) {
	stores := sharedStores()
	svc, err := tollgate.New(usageRegistry(t, nil), stores, usagePlans, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	mgr, err := accounts.New(svc, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mgr.Close()
	_, err = mgr.Usage(t.Context(), usage.Query{})
	if tollgate.CodeOf(err) != tollgate.CodeNotFound {
		t.Errorf("Usage without Options.Usage: %v, want not_found", err)
	}
	if _, err := mgr.KeysLastUsed(t.Context(), "a"); tollgate.CodeOf(err) != tollgate.CodeNotFound {
		t.Errorf("KeysLastUsed without Options.Usage: %v, want not_found", err)
	}
	if _, err := usage.NewRecorder(nil, &usage.RecorderOptions{}); err == nil {
		t.Error("a Recorder without a Store: no error")
	}
}
