package multiinstance_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/examples/apis"
	"github.com/tollgate-dev/tollgate/idempotency"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/rest"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// A deployment is a way to run several instances on shared stores.
type deployment struct {
	name string
	// stores returns the stores of one more instance: its own connections to the
	// deployment's shared servers. The first call may prepare the servers (migrate).
	stores func(t *testing.T) tollgate.Stores
	// answers returns the idempotency store of one more instance, as stores does; nil
	// for a deployment whose instances keep no answers.
	answers func(t *testing.T) idempotency.Store
	// serverClock is set when leases and rate limits run on the store's own clock, so
	// tests cannot move them with the service's clock.
	serverClock bool
	// pg returns the test's PostgreSQL schema, for a deployment whose credits
	// are there (see checkLedger); nil for one whose credits are elsewhere.
	pg func(t *testing.T) pgTarget
}

// deployments returns the deployments to test, one per way to share the stores.
func deployments() []deployment {
	return []deployment{memoryShared(), onPostgres(directly), onPostgres(throughPgBouncer), onRedisAndPostgres(), onRedis()}
}

// memoryShared shares one set of memory stores between instances in one process. It
// proves the harness (every instance a Service of its own), not the stores.
func memoryShared() deployment {
	var once sync.Once
	var s tollgate.Stores
	var answers idempotency.Store
	shared := func() {
		once.Do(func() {
			s = tollgate.Stores{Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
				Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter()}
			answers = memory.NewIdempotencyStore(nil)
		})
	}
	return deployment{name: "memory",
		stores:  func(*testing.T) tollgate.Stores { shared(); return s },
		answers: func(*testing.T) idempotency.Store { shared(); return answers }}
}

// plans are the plans of the tests: "open" has no rate or concurrency limit, "tight"
// a concurrency ceiling of 3, "busy" every limit, high, "batchy" a rate limit whose
// burst (5) holds a batch to 5 items, "slow" one call a minute (a second call within
// the minute is refused, on any clock, however slow the machine), and "metered" an
// allowance of 10 credits a period and no limit, for the tests of grants.
var plans = mustPlans(
	billing.Plan{Name: "open", Credits: 1_000_000},
	billing.Plan{Name: "tight", Credits: 1_000_000, Concurrency: 3},
	billing.Plan{Name: "busy", Credits: 1_000_000, RatePerMinute: 1_000_000, Concurrency: 1000},
	billing.Plan{Name: "slow", Credits: 1_000_000, RatePerMinute: 1, Concurrency: 10},
	billing.Plan{Name: "batchy", Credits: 1_000_000, RatePerMinute: 6, Burst: 5, Concurrency: 2, BatchMaxItems: 10},
	billing.Plan{Name: "metered", Credits: meteredAllowance},
)

// meteredAllowance is the plan "metered"'s credits per period.
const meteredAllowance = 10

func mustPlans(ps ...billing.Plan) *billing.Plans {
	p, err := billing.NewPlans(ps...)
	if err != nil {
		panic(err)
	}
	return p
}

// An instance is one service instance, with the manager of its accounts, behind its
// own HTTP server.
type instance struct {
	svc *tollgate.Service
	mgr *accounts.Manager
	srv *httptest.Server
}

// cluster is a deployment's instances.
type cluster struct {
	instances []*instance
	block     *blocker
	clock     *testenv.Clock
}

// blocker holds the calls of the "block" API until released: each call signals entered
// once it is admitted (its credits reserved) and running, and returns once a release is
// sent, failing on the service's side (refunded) if its parameter fail is true.
type blocker struct {
	entered chan struct{}
	release chan struct{}
}

func blockAPI(b *blocker) catalog.API {
	return catalog.API{ID: "block", Method: http.MethodGet, Cost: 1,
		Params: []catalog.Param{{Name: "fail", Type: catalog.Boolean}},
		Handler: catalog.HandlerFunc(func(ctx context.Context, req *catalog.Request) (any, error) {
			b.entered <- struct{}{}
			select {
			case <-b.release:
				if req.Params.Bool("fail") {
					return nil, errors.New("block: told to fail")
				}
				return map[string]any{}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})}
}

// flakyAPI fails on the service's side when its n is odd, and answers n otherwise.
var flakyAPI = catalog.API{ID: "flaky", Method: http.MethodGet, Cost: 1,
	Params: []catalog.Param{{Name: "n", Type: catalog.Integer, Required: true}},
	Handler: catalog.HandlerFunc(func(_ context.Context, req *catalog.Request) (any, error) {
		if n := req.Params.Int("n"); n%2 == 1 {
			return nil, fmt.Errorf("flaky: %d is odd", n)
		}
		return map[string]any{"n": req.Params.Int("n")}, nil
	})}

// start runs n instances of d with key caches (the configuration of a real deployment
// on network stores).
func start(t *testing.T, d deployment, n int) *cluster {
	t.Helper()
	return startWith(t, d, n, nil)
}

// startWith is start with the options of every instance changed by tune, if not nil,
// which is given the instance's stores.
func startWith(t *testing.T, d deployment, n int, tune func(*tollgate.Options, tollgate.Stores)) *cluster {
	t.Helper()
	c := &cluster{block: &blocker{entered: make(chan struct{}, 100), release: make(chan struct{})},
		clock: testenv.NewClock(time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC))}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for range n {
		reg := &catalog.Registry{}
		if err := apis.Register(reg); err != nil {
			t.Fatal(err)
		}
		if err := reg.Register(blockAPI(c.block)); err != nil {
			t.Fatal(err)
		}
		if err := reg.Register(flakyAPI); err != nil {
			t.Fatal(err)
		}
		opts := &tollgate.Options{Now: c.clock.Now, Logger: quiet, KeyCache: &auth.KeyCacheOptions{}, Lease: time.Minute}
		if d.answers != nil {
			opts.Idempotency = &tollgate.IdempotencyOptions{Store: d.answers(t)}
		}
		stores := d.stores(t)
		if tune != nil {
			tune(opts, stores)
		}
		svc, err := tollgate.New(reg, stores, plans, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(svc.Close)
		mgr, err := accounts.New(svc, &accounts.Options{Logger: quiet, CreditBlocks: opts.CreditBlocks})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(mgr.Close)
		h, err := rest.NewHandler(svc, &rest.Options{Accounts: mgr, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		c.instances = append(c.instances, &instance{svc: svc, mgr: mgr, srv: srv})
	}
	t.Cleanup(func() { close(c.block.release) })
	return c
}

// account creates an account with a starting balance through the first instance, and
// returns its id and key.
func (c *cluster) account(t *testing.T, plan string, credits int64) (string, auth.Key, string) {
	t.Helper()
	acct, key, value, err := c.instances[0].mgr.CreateAccount(t.Context(), accounts.Spec{Plan: plan, Credits: &credits})
	if err != nil {
		t.Fatal(err)
	}
	return acct.ID, key, value
}

// response is what a call answered.
type response struct {
	status int
	code   string // X-Error-Code
	header http.Header
	body   map[string]any
}

var client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second}

// call makes a GET to instance i with a key.
func (c *cluster) call(t *testing.T, i int, path, key string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, c.instances[i%len(c.instances)].srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Api-Key", key)
	resp, err := client.Do(req)
	if err != nil {
		t.Error(err)
		return response{}
	}
	defer resp.Body.Close()
	r := response{status: resp.StatusCode, code: resp.Header.Get("X-Error-Code"), header: resp.Header}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		json.NewDecoder(resp.Body).Decode(&r.body)
	}
	return r
}

// balance reads an account's balance through instance i.
func (c *cluster) balance(t *testing.T, i int, account string) billing.Balance {
	t.Helper()
	info, err := c.instances[i].mgr.Account(t.Context(), account)
	if err != nil {
		t.Fatal(err)
	}
	return info.Balance
}
