package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/examples/apis"
	"github.com/tollgate-dev/tollgate/health"
	"github.com/tollgate-dev/tollgate/idempotency"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/journal"
	"github.com/tollgate-dev/tollgate/metrics"
	"github.com/tollgate-dev/tollgate/rest"
	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/store/redis"
	"github.com/tollgate-dev/tollgate/store/storetest"
)

// steps is a clock that moves by step at every reading, so that every operation of a
// store takes step.
type steps struct {
	mu   sync.Mutex
	now  time.Time
	step time.Duration
}

func (s *steps) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = s.now.Add(s.step)
	return s.now
}

// failing is a rate limiter whose answer depends on the key: "down" fails as a store
// that cannot be reached, "slow" as one whose deadline passed, "canceled" as one whose
// caller went away, "bad" as one given a value it cannot hold, "gone" with
// store.ErrNotFound (an answer, not a failure); any other key is allowed.
type failing struct{}

func (failing) err(key string) error {
	switch key {
	case "down":
		return errors.New("dial tcp 10.0.0.1:6379: connection refused")
	case "slow":
		return fmt.Errorf("redis: %w", context.DeadlineExceeded)
	case "canceled":
		return fmt.Errorf("redis: %w", context.Canceled)
	case "bad":
		return fmt.Errorf("key %q: %w", key, store.ErrInvalid)
	case "gone":
		return fmt.Errorf("key %q: %w", key, store.ErrNotFound)
	}
	return nil
}

func (f failing) Allow(_ context.Context, key string, _ driver.Limit, _ time.Time) (driver.RateDecision, error) {
	return driver.RateDecision{Allowed: true}, f.err(key)
}

func (f failing) AllowN(_ context.Context, key string, _ driver.Limit, _ int, _ time.Time) (driver.RateDecision, error) {
	return driver.RateDecision{Allowed: true}, f.err(key)
}

func (f failing) Peek(_ context.Context, key string, _ driver.Limit, _ time.Time) (driver.RateDecision, error) {
	return driver.RateDecision{Allowed: true}, f.err(key)
}

// TestStoreOperations checks the latency of each operation and the kinds of failure
// counted, exactly: the answers a store gives are not failures.
func TestStoreOperations(t *testing.T) {
	clock := &steps{now: time.Unix(0, 0), step: ms8}
	m, reg := newMetrics(t, &metrics.Options{Now: clock.Now})
	st := m.Stores(tollgate.Stores{Rates: failing{}, Ledger: memory.NewLedger(nil)})
	ctx := context.Background()
	limit := driver.Limit{Rate: 1, Per: time.Second, Burst: 1}
	for _, key := range []string{"ok", "down", "down", "slow", "canceled", "bad", "gone"} {
		st.Rates.Allow(ctx, key, limit, time.Time{})
	}
	st.Rates.Peek(ctx, "ok", limit, time.Time{})
	if _, err := st.Ledger.Balance(ctx, "nobody", time.Unix(0, 0), driver.MonthOf(time.Unix(0, 0)), 10); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the balance of no account: %v", err)
	}

	const h = "tollgate_store_operation_duration_seconds"
	compare(t, reg, h, join(
		histogram(h, `operation="balance",store="memory"`, ms8),
		histogram(h, `operation="allow",store="metrics_test"`, ms8, ms8, ms8, ms8, ms8, ms8, ms8),
		histogram(h, `operation="peek",store="metrics_test"`, ms8),
	)...)
	compare(t, reg, "tollgate_store_errors_total",
		`tollgate_store_errors_total{error="canceled",operation="allow",store="metrics_test"} 1`,
		`tollgate_store_errors_total{error="invalid",operation="allow",store="metrics_test"} 1`,
		`tollgate_store_errors_total{error="timeout",operation="allow",store="metrics_test"} 1`,
		`tollgate_store_errors_total{error="unavailable",operation="allow",store="metrics_test"} 2`,
	)
}

// TestStoreInterfaces checks that a decorated store has the optional interfaces of the
// store it decorates and no other, that a value in several roles is decorated once,
// and that the decorator says what it decorates (TestDecoratorsForwardEveryInterface
// checks every store of the module).
func TestStoreInterfaces(t *testing.T) {
	m, _ := newMetrics(t, nil)
	keys, ledger := memory.NewKeyStore(), memory.NewLedger(nil)
	st := m.Stores(tollgate.Stores{Keys: keys, Ledger: ledger, Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter()})
	is := func(s any) string {
		var has []string
		for _, i := range []struct {
			name string
			t    reflect.Type
		}{
			{"Admitter", reflect.TypeFor[driver.Admitter]()}, {"Sweeper", reflect.TypeFor[driver.Sweeper]()},
			{"KeyChecker", reflect.TypeFor[driver.KeyChecker]()}, {"KeyExpiries", reflect.TypeFor[auth.KeyExpiries]()},
			{"journal", reflect.TypeFor[journal.Store]()}, {"Pinger", reflect.TypeFor[health.Pinger]()},
		} {
			if reflect.TypeOf(s).Implements(i.t) {
				has = append(has, i.name)
			}
		}
		return strings.Join(has, " ")
	}
	for _, tc := range []struct {
		name  string
		store any
		want  string
	}{
		{"memory keys", st.Keys, "KeyChecker KeyExpiries journal Pinger"},
		{"memory ledger", st.Ledger, "Sweeper journal Pinger"},
		{"memory rates", st.Rates, "Pinger"},
		{"memory slots", st.Slots, "Pinger"},
	} {
		if got := is(tc.store); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	if w, ok := st.Keys.(driver.Wrapper); !ok || w.Unwrap() != keys {
		t.Errorf("the decorated key store unwraps to %v", st.Keys)
	}
	if w, ok := st.Ledger.(driver.Wrapper); !ok || w.Unwrap() != ledger {
		t.Errorf("the decorated ledger unwraps to %v", st.Ledger)
	}

	// One value in every role, with every optional interface.
	t.Run("redis", func(t *testing.T) {
		rs := newRedisStore(t)
		st := m.Stores(tollgate.Stores{Keys: rs, Ledger: rs, Rates: rs, Slots: rs})
		if any(st.Keys) != any(st.Ledger) || any(st.Ledger) != any(st.Rates) || any(st.Rates) != any(st.Slots) {
			t.Error("a store in every role is decorated by distinct values")
		}
		if got := is(st.Keys); got != "Admitter Sweeper KeyChecker KeyExpiries journal Pinger" {
			t.Errorf("the decorated redis.Store is %q", got)
		}
		if w, ok := st.Keys.(driver.Wrapper); !ok || w.Unwrap() != rs {
			t.Errorf("the decorated redis.Store unwraps to %v", st.Keys)
		}
		// Its idempotency records are a value of their own (Store.Idempotency),
		// decorated apart.
		if _, ok := st.Keys.(idempotency.Store); ok {
			t.Error("the decorated redis.Store is an idempotency store: IdempotencyStore decorates its records")
		}
		if d := m.IdempotencyStore(rs.Idempotency()); d == nil || is(d) != "Pinger" {
			t.Errorf("the redis.Store decorated as an idempotency store is %q", is(d))
		}
	})
}

// newRedisStore returns a redis.Store on the test Redis under a fresh prefix, on the
// caller's clock (the conformance suites script time).
func newRedisStore(t *testing.T) *redis.Store {
	t.Helper()
	c := testenv.RedisClient(t, testenv.Var(t, testenv.Redis))
	s, err := redis.New(c, &redis.Options{Prefix: testenv.RedisPrefix(t, c), CallerClock: true})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestStoresConform runs the stores' conformance suites through the decorators: the
// memory stores, each in its role (the journals of the key store and the ledger, and
// every store's Ping, included), and a redis.Store in every role, whose Admitter suite
// runs through one decorator.
func TestStoresConform(t *testing.T) {
	m, _ := newMetrics(t, nil)
	for name, newStore := range map[string]func(*testing.T) any{
		"memory keys":   func(*testing.T) any { return m.Stores(tollgate.Stores{Keys: memory.NewKeyStore()}).Keys },
		"memory ledger": func(*testing.T) any { return m.Stores(tollgate.Stores{Ledger: memory.NewLedger(nil)}).Ledger },
		"memory rates":  func(*testing.T) any { return m.Stores(tollgate.Stores{Rates: memory.NewRateLimiter()}).Rates },
		"memory slots":  func(*testing.T) any { return m.Stores(tollgate.Stores{Slots: memory.NewConcurrencyLimiter()}).Slots },
		"memory idempotency": func(*testing.T) any {
			return m.IdempotencyStore(memory.NewIdempotencyStore(nil))
		},
		"memory sessions": func(*testing.T) any { return m.SessionStore(memory.NewSessionStore()) },
		"memory audit":    func(*testing.T) any { return m.AuditStore(memory.NewAuditStore()) },
		"memory usage":    func(*testing.T) any { return m.UsageStore(memory.NewUsageStore()) },
		"memory webhooks": func(*testing.T) any { return m.WebhookStore(memory.NewWebhookStore()) },
		"memory oauth":    func(*testing.T) any { return m.OAuthStore(memory.NewOAuthStore()) },
		"redis": func(t *testing.T) any {
			rs := newRedisStore(t)
			return m.Stores(tollgate.Stores{Keys: rs, Ledger: rs, Rates: rs, Slots: rs}).Keys
		},
	} {
		t.Run(name, func(t *testing.T) { storetest.Run(t, newStore) })
	}
}

// TestStoreAdmitsInOneStep checks that a service on a decorated redis.Store still
// admits a call in one round trip and settles it in another: the Meter warns of no
// split, and the store's operations are one admit and one close per call.
func TestStoreAdmitsInOneStep(t *testing.T) {
	m, reg := newMetrics(t, nil)
	c := testenv.RedisClient(t, testenv.Var(t, testenv.Redis))
	rs, err := redis.New(c, &redis.Options{Prefix: testenv.RedisPrefix(t, c)})
	if err != nil {
		t.Fatal(err)
	}
	var logs testenv.Logs
	cat := &catalog.Registry{}
	if err := apis.Register(cat); err != nil {
		t.Fatal(err)
	}
	plans, err := billing.NewPlans(billing.Plan{Name: "pro", Credits: 1000, RatePerMinute: 600, Concurrency: 10})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := tollgate.New(cat, m.Stores(tollgate.Stores{Keys: rs, Ledger: rs, Rates: rs, Slots: rs}), plans,
		&tollgate.Options{Logger: logs.Logger(), SweepInterval: -1,
			Idempotency: &tollgate.IdempotencyOptions{Store: m.IdempotencyStore(rs.Idempotency())}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	t.Cleanup(m.Attach(svc))
	mgr, err := accounts.New(svc, &accounts.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mgr.Close)
	if _, _, _, err := mgr.CreateAccount(t.Context(), accounts.Spec{ID: "acme", Plan: "pro", KeyValue: acmeKey}); err != nil {
		t.Fatal(err)
	}
	h, err := rest.NewHandler(svc, &rest.Options{Accounts: mgr, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	s := &server{url: srv.URL}
	for range 3 {
		s.do(t, http.MethodGet, "/v1/hash?text=a", acmeKey, "", http.StatusOK)
	}
	s.do(t, http.MethodPost, "/v1/hash/batch", acmeKey, `{"items":[{"text":"a"},{"text":"b"}]}`, http.StatusOK)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/v1/hash/batch", strings.NewReader(`{"items":[{"text":"c"}]}`))
	req.Header.Set("X-Api-Key", acmeKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "batch-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a batch with an idempotency key: %d", resp.StatusCode)
	}

	if strings.Contains(logs.String(), "round trips") {
		t.Errorf("the Meter split the decorated store's admission:\n%s", logs.String())
	}
	for op, want := range map[string]int{"admit": 5, "close": 5, "reserve": 0, "allow": 0, "allow_n": 0, "acquire": 0, "settle": 0} {
		if got := histogramCount(t, reg, "tollgate_store_operation_duration_seconds", "store", "redis", "operation", op); got != want {
			t.Errorf("%s: %d operations, want %d", op, got, want)
		}
	}
	if got := histogramCount(t, reg, "tollgate_store_operation_duration_seconds", "store", "redis", "operation", "claim"); got != 1 {
		t.Errorf("claim of the idempotency store: %d operations, want 1", got)
	}
}
