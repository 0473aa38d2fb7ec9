package admin_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/store/postgres"
	"github.com/tollgate-dev/tollgate/usage"
)

// usageEnv is env on a service that records usage into a store, with the recorder that
// flushes it.
type usageEnv struct {
	*env
	rec *usage.Recorder
}

// usageCatalog holds "hello" (succeeds, 2 credits), "reject" (rejects its input:
// charged 3 credits) and "boom" (fails on the service's side: refunded).
func usageCatalog(t *testing.T) *catalog.Registry {
	t.Helper()
	ok := []catalog.Field{{Name: "ok", Type: catalog.Boolean, Description: "Always true."}}
	reg := &catalog.Registry{}
	for _, api := range []catalog.API{
		{ID: "hello", Title: "Hello", Description: "Succeeds.", Method: http.MethodGet, Cost: 2, Result: ok,
			Handler: catalog.HandlerFunc(func(context.Context, *catalog.Request) (any, error) { return map[string]any{"ok": true}, nil })},
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

// newUsageEnv returns the admin and REST handlers of a service on memory stores whose
// calls are recorded into us, flushed by hand.
func newUsageEnv(t *testing.T, us usage.Store) *usageEnv {
	t.Helper()
	clk := testenv.NewClock(t0)
	logs := &testenv.Logs{}
	logger := logs.Logger()
	ps, err := billing.NewPlans(billing.Plan{Name: "pro", Credits: 1000}, billing.Plan{Name: "tiny", Credits: 1000, RatePerMinute: 1})
	if err != nil {
		t.Fatal(err)
	}
	stores := tollgate.Stores{Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil), Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter()}
	svc, err := tollgate.New(usageCatalog(t), stores, ps, &tollgate.Options{Now: clk.Now, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	rec, err := usage.NewRecorder(us, &usage.RecorderOptions{FlushInterval: -1, PruneInterval: -1, Now: clk.Now, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rec.Close(context.Background()) })
	svc.Events().Subscribe(rec, rec.Kinds()...)
	mgr, err := accounts.New(svc, &accounts.Options{Usage: us, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mgr.Close)
	return &usageEnv{env: serve(t, clk, logs, mgr, nil), rec: rec}
}

// usageStoresUnderTest are the usage stores the end-to-end tests run on.
var usageStoresUnderTest = map[string]func(t *testing.T) usage.Store{
	"memory": func(*testing.T) usage.Store { return memory.NewUsageStore() },
	"postgres": func(t *testing.T) usage.Store {
		dsn := testenv.Var(t, testenv.Postgres)
		pool := testenv.PostgresPool(t, dsn, testenv.PostgresSchema(t, dsn), 4)
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

// totalsJSON is the data of GET /admin/v1/usage.
type totalsJSON struct {
	From       time.Time          `json:"from"`
	To         time.Time          `json:"to"`
	Resolution string             `json:"resolution"`
	GroupBy    string             `json:"group_by"`
	Order      string             `json:"order"`
	Filters    map[string]*string `json:"filters"`
	Rows       []groupJSON        `json:"rows"`
	Total      figuresJSON        `json:"total"`
	Groups     int64              `json:"groups"`
	Next       *string            `json:"next"`
}

type figuresJSON struct {
	Calls   int64 `json:"calls"`
	Credits int64 `json:"credits"`
	Errors  int64 `json:"errors"`
}

type groupJSON struct {
	Group string `json:"group"`
	figuresJSON
}

// g is a row of the usage route.
func g(group string, calls, credits, errs int64) groupJSON {
	return groupJSON{Group: group, figuresJSON: figuresJSON{calls, credits, errs}}
}

// totals reads GET /admin/v1/usage with params and returns its data.
func (e *usageEnv) totals(params string) totalsJSON {
	e.t.Helper()
	r := e.admin(http.MethodGet, "/admin/v1/usage?"+params, "")
	wantStatus(e.t, "usage "+params, r, http.StatusOK)
	return data[totalsJSON](e.t, r)
}

// allTotals reads every page of GET /admin/v1/usage with params, following next, and
// returns the rows and the number of pages.
func (e *usageEnv) allTotals(params string) ([]groupJSON, int) {
	e.t.Helper()
	v, err := url.ParseQuery(params)
	if err != nil {
		e.t.Fatal(err)
	}
	var rows []groupJSON
	for pages := 1; pages < 100; pages++ {
		p := e.totals(v.Encode())
		rows = append(rows, p.Rows...)
		if p.Next == nil {
			return rows, pages
		}
		v.Set("cursor", *p.Next)
	}
	e.t.Fatalf("usage %s: the pages never end", params)
	return nil, 0
}

// call calls api over REST with key and checks the status.
func (e *usageEnv) call(key, api string, status int) {
	e.t.Helper()
	if r := e.do(http.MethodGet, "/v1/"+api, nil, "x-api-key", key); r.status != status {
		e.t.Fatalf("GET /v1/%s: %d, want %d\n%s", api, r.status, status, r.body)
	}
}

// Calls of several accounts over REST, which succeed, are rejected, fail or are refused,
// are counted across accounts by the usage route, exactly, in every grouping and order,
// a page at a time, with its filters and the buckets its range allows.
func TestUsageTotals(t *testing.T) {
	for name, newStore := range usageStoresUnderTest {
		t.Run(name, func(t *testing.T) {
			e := newUsageEnv(t, newStore(t))
			acme := e.createAccount(`{"id":"acme","plan":"pro"}`).Value
			globex := e.createAccount(`{"id":"globex","plan":"pro"}`).Value
			initech := e.createAccount(`{"id":"initech","plan":"tiny"}`).Value

			// 2030-01-15, 12:00.
			for range 4 {
				e.call(acme, "hello", http.StatusOK)
			}
			e.call(acme, "reject", http.StatusBadRequest)
			e.call(acme, "reject", http.StatusBadRequest)
			e.call(acme, "boom", http.StatusInternalServerError)
			e.call(globex, "hello", http.StatusOK)
			e.call(globex, "hello", http.StatusOK)
			e.call(globex, "reject", http.StatusBadRequest)
			e.call(globex, "boom", http.StatusInternalServerError)
			e.call(globex, "boom", http.StatusInternalServerError)
			e.call(initech, "hello", http.StatusOK)
			e.call(initech, "hello", http.StatusTooManyRequests)
			e.call(initech, "nosuchapi", http.StatusNotFound) // not recorded: no such API
			// 13:00.
			e.clock.Advance(time.Hour)
			e.call(acme, "hello", http.StatusOK)
			// 2030-01-16, 09:00.
			e.clock.Advance(20 * time.Hour)
			for range 4 {
				e.call(globex, "boom", http.StatusInternalServerError)
			}
			if err := e.rec.Flush(t.Context()); err != nil {
				t.Fatal(err)
			}

			// One day, per account by calls: the whole body.
			r := e.admin(http.MethodGet, "/admin/v1/usage?from=2030-01-15&to=2030-01-16", "")
			wantStatus(t, "usage of 2030-01-15", r, http.StatusOK)
			const want = `{"filters":{"account":null,"api":null,"channel":null,"outcome":null},"from":"2030-01-15T00:00:00Z",` +
				`"group_by":"account","groups":3,"next":null,"order":"calls","resolution":"day",` +
				`"rows":[{"calls":8,"credits":16,"errors":3,"group":"acme"},{"calls":5,"credits":7,"errors":3,"group":"globex"},` +
				`{"calls":2,"credits":2,"errors":1,"group":"initech"}],"to":"2030-01-16T00:00:00Z","total":{"calls":15,"credits":25,"errors":7}}`
			if got := string(r.env.Data); got != want {
				t.Errorf("usage of 2030-01-15:\n got %s\nwant %s", got, want)
			}

			two := "from=2030-01-15&to=2030-01-17"
			for _, tc := range []struct {
				params string
				rows   []groupJSON
				total  figuresJSON
				res    string
			}{
				{two, []groupJSON{g("globex", 9, 7, 7), g("acme", 8, 16, 3), g("initech", 2, 2, 1)}, figuresJSON{19, 25, 11}, "day"},
				{two + "&order=credits", []groupJSON{g("acme", 8, 16, 3), g("globex", 9, 7, 7), g("initech", 2, 2, 1)}, figuresJSON{19, 25, 11}, "day"},
				{two + "&group_by=api", []groupJSON{g("hello", 9, 16, 1), g("boom", 7, 0, 7), g("reject", 3, 9, 3)}, figuresJSON{19, 25, 11}, "day"},
				{"from=2030-01-15&to=2030-01-16&group_by=api", []groupJSON{g("hello", 9, 16, 1), g("boom", 3, 0, 3), g("reject", 3, 9, 3)}, figuresJSON{15, 25, 7}, "day"},
				{"from=2030-01-15&to=2030-01-16&group_by=api&order=credits", []groupJSON{g("hello", 9, 16, 1), g("reject", 3, 9, 3), g("boom", 3, 0, 3)}, figuresJSON{15, 25, 7}, "day"},
				{"from=2030-01-15&to=2030-01-16&group_by=outcome", []groupJSON{g("ok", 8, 16, 0), g("api_failed", 3, 0, 3), g("rejected", 3, 9, 3), g("rate_limited", 1, 0, 1)}, figuresJSON{15, 25, 7}, "day"},
				{two + "&group_by=channel", []groupJSON{g("rest", 19, 25, 11)}, figuresJSON{19, 25, 11}, "day"},
				{two + "&group_by=api&account=acme", []groupJSON{g("hello", 5, 10, 0), g("reject", 2, 6, 2), g("boom", 1, 0, 1)}, figuresJSON{8, 16, 3}, "day"},
				{two + "&api=boom", []groupJSON{g("globex", 6, 0, 6), g("acme", 1, 0, 1)}, figuresJSON{7, 0, 7}, "day"},
				{two + "&outcome=rejected&order=credits", []groupJSON{g("acme", 2, 6, 2), g("globex", 1, 3, 1)}, figuresJSON{3, 9, 3}, "day"},
				{two + "&outcome=rate_limited&group_by=api", []groupJSON{g("hello", 1, 0, 1)}, figuresJSON{1, 0, 1}, "day"},
				{two + "&channel=rest&api=hello&outcome=ok", []groupJSON{g("acme", 5, 10, 0), g("globex", 2, 4, 0), g("initech", 1, 2, 0)}, figuresJSON{8, 16, 0}, "day"},
				{two + "&channel=mcp", []groupJSON{}, figuresJSON{}, "day"},
				{two + "&account=nobody", []groupJSON{}, figuresJSON{}, "day"},
				// 13:00 to 14:00 from the hour buckets; 12:00 to 12:01 from the minutes.
				{"from=2030-01-15T13:00:00Z&to=2030-01-15T14:00:00Z", []groupJSON{g("acme", 1, 2, 0)}, figuresJSON{1, 2, 0}, "hour"},
				{"from=2030-01-15T12:00:00Z&to=2030-01-15T12:01:00Z", []groupJSON{g("acme", 7, 14, 3), g("globex", 5, 7, 3), g("initech", 2, 2, 1)}, figuresJSON{14, 23, 7}, "minute"},
				{"from=2030-01-15T12:01:00Z&to=2030-01-15T13:00:00Z", []groupJSON{}, figuresJSON{}, "minute"},
			} {
				p := e.totals(tc.params)
				if !slices.Equal(p.Rows, tc.rows) || p.Total != tc.total || p.Groups != int64(len(tc.rows)) || p.Resolution != tc.res || p.Next != nil {
					t.Errorf("usage %s:\n got %+v, total %+v of %d groups from %s buckets, next %v\nwant %+v, total %+v of %d groups from %s buckets",
						tc.params, p.Rows, p.Total, p.Groups, p.Resolution, p.Next, tc.rows, tc.total, len(tc.rows), tc.res)
				}
				// The same a group a page, following next.
				rows, pages := e.allTotals(tc.params + "&limit=1")
				if !slices.Equal(rows, tc.rows) || pages != max(len(tc.rows), 1) {
					t.Errorf("usage %s, a group a page: %+v in %d pages, want %+v", tc.params, rows, pages, tc.rows)
				}
			}

			// The range as read: widened to whole minutes; by default the 30 days to the end of today.
			p := e.totals("from=2030-01-15T12:00:30Z&to=2030-01-15T12:00:45Z&account=initech&api=hello&group_by=outcome")
			if !p.From.Equal(t0) || !p.To.Equal(t0.Add(time.Minute)) || p.Resolution != "minute" ||
				!slices.Equal(p.Rows, []groupJSON{g("ok", 1, 2, 0), g("rate_limited", 1, 0, 1)}) ||
				*p.Filters["account"] != "initech" || *p.Filters["api"] != "hello" || p.Filters["channel"] != nil || p.Filters["outcome"] != nil {
				t.Errorf("usage of 12:00:30 to 12:00:45: %+v", p)
			}
			p = e.totals("limit=2")
			if end := time.Date(2030, 1, 17, 0, 0, 0, 0, time.UTC); !p.From.Equal(end.Add(-30*24*time.Hour)) || !p.To.Equal(end) ||
				p.Resolution != "day" || p.GroupBy != "account" || p.Order != "calls" || p.Total != (figuresJSON{19, 25, 11}) ||
				p.Groups != 3 || len(p.Rows) != 2 || p.Next == nil {
				t.Errorf("usage with the defaults: %+v", p)
			}
			p = e.totals("to=2030-01-16")
			if !p.From.Equal(time.Date(2029, 12, 17, 0, 0, 0, 0, time.UTC)) || p.Total != (figuresJSON{15, 25, 7}) {
				t.Errorf("usage to 2030-01-16: %+v", p)
			}

			// The credits counted are the ledger's.
			for id, want := range map[string]int64{"acme": 16, "globex": 7, "initech": 2} {
				if used := e.account(id).Balance.Used; used != want {
					t.Errorf("%s: the ledger counts %d credits used, the usage %d", id, used, want)
				}
			}

			// A cursor continues its own ranking only.
			first := e.totals(two + "&limit=1")
			for _, params := range []string{two + "&group_by=api", two + "&order=credits", two + "&group_by=api&order=credits"} {
				r := e.admin(http.MethodGet, "/admin/v1/usage?"+params+"&cursor="+url.QueryEscape(*first.Next), "")
				wantError(t, "a cursor of another ranking: "+params, r, http.StatusBadRequest, "cursor:")
			}
		})
	}
}

// The usage route refuses every bad parameter with a 400 whose message begins with its
// name, and answers 404 on a service that records no usage.
func TestUsageTotalsRefusals(t *testing.T) {
	e := newUsageEnv(t, memory.NewUsageStore())
	for _, tc := range []struct{ params, says string }{
		{"from=yesterday", "from:"},
		{"to=2030-13-01", "to:"},
		{"from=2030-01-16&to=2030-01-15", "to:"},
		{"from=2030-01-15&to=2030-01-15", "to:"},
		{"from=1969-12-31&to=1970-01-02", "from:"},
		{"from=2199-12-01&to=2200-01-02", "to:"},
		{"from=2029-01-01&to=2030-02-06", "to:"},                       // 400 days at most
		{"from=2030-01-15T01:00:00Z&to=2030-02-20", "from:"},           // more than 31 days from an hour
		{"from=2030-01-15&to=2030-01-16T00:01:00Z", "to:"},             // more than a day to a minute
		{"from=2030-01-15T12:30:00Z&to=2030-01-17T12:00:00Z", "from:"}, // more than a day from a minute
		{"to=2030-01-15T12:34:00Z", "to:"},                             // 30 days to a minute
		{"group_by=key", "group_by:"},
		{"group_by=none", "group_by:"},
		{"order=latency", "order:"},
		{"limit=0", "limit:"},
		{"limit=201", "limit:"},
		{"limit=abc", "limit:"},
		{"limit=%2B5", "limit:"},
		{"limit=1&limit=2", "limit:"},
		{"cursor=garbage", "cursor:"},
		{"cursor=account.calls.5.YQ%3D%3D", "cursor:"},
		{"cursor=" + strings.Repeat("a", 1000), "cursor:"},
		{"channel=fax", "channel:"},
		{"outcome=error", "outcome:"},
		{"account=", "account:"},
		{"account=" + strings.Repeat("a", 65), "account:"},
		{"account=a%00b", "account:"},
		{"api=a%00b", "api:"},
		{"api=" + strings.Repeat("a", 257), "api:"},
		{"api=%FF", "api:"},
		{"foo=1", `"foo"`},
	} {
		r := e.admin(http.MethodGet, "/admin/v1/usage?"+tc.params, "")
		wantError(t, "usage "+tc.params, r, http.StatusBadRequest, tc.says)
		if strings.HasSuffix(tc.says, ":") && !strings.HasPrefix(*r.env.Error, tc.says) {
			t.Errorf("usage %s: error %q does not begin with %s", tc.params, *r.env.Error, tc.says)
		}
	}
	wantStatus(t, "usage without the token", e.do(http.MethodGet, "/admin/v1/usage", nil), http.StatusUnauthorized)
	r := e.admin(http.MethodPost, "/admin/v1/usage", "{}")
	wantStatus(t, "POST usage", r, http.StatusMethodNotAllowed)
	if allow := r.header.Get("Allow"); allow != "GET, HEAD" {
		t.Errorf("POST usage: Allow %q, want GET, HEAD", allow)
	}

	// A service that records no usage.
	plain := newEnv(t)
	wantError(t, "usage without a usage store", plain.admin(http.MethodGet, "/admin/v1/usage", ""), http.StatusNotFound, "records no usage")
}
