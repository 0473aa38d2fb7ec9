package tollgate_test

import (
	"context"
	"testing"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// cachedPair is two instances of a service on one set of stores (with an idempotency
// store), each with a key cache, and an account "acct" of plan "p" with 100 credits.
type cachedPair struct {
	a, b  *accounts.Manager
	value string
}

func newCachedPair(t *testing.T) *cachedPair {
	t.Helper()
	reg := &catalog.Registry{}
	err := reg.Register(catalog.API{ID: "ok", Method: "GET", Cost: 1,
		Params:  []catalog.Param{{Name: "n", Type: catalog.Integer}},
		Handler: catalog.HandlerFunc(func(context.Context, *catalog.Request) (any, error) { return map[string]any{"v": 1}, nil })})
	if err != nil {
		t.Fatal(err)
	}
	plans, _ := billing.NewPlans(billing.Plan{Name: "p", Credits: 100, RatePerMinute: 600, Concurrency: 10, BatchMaxItems: 5})
	stores := tollgate.Stores{Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil), Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter()}
	records := memory.NewIdempotencyStore(nil)
	instance := func() *accounts.Manager {
		svc, err := tollgate.New(reg, stores, plans, &tollgate.Options{KeyCache: &auth.KeyCacheOptions{},
			Idempotency: &tollgate.IdempotencyOptions{Store: records}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(svc.Close)
		return newManager(t, svc, stores)
	}
	p := &cachedPair{a: instance(), b: instance()}
	if _, _, p.value, err = p.a.CreateAccount(t.Context(), accounts.Spec{ID: "acct", Plan: "p"}); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *cachedPair) caller(ch auth.Channel) tollgate.Caller {
	return tollgate.Caller{Credential: auth.Credential{Kind: auth.APIKeyHeader, Value: p.value}, Channel: ch}
}

// batch sends a batch of the given items of "ok" through m, with an idempotency key
// when key is not empty.
func (p *cachedPair) batch(ctx context.Context, m *accounts.Manager, key string, items ...any) tollgate.BatchReply {
	return m.Service().CallBatch(ctx, p.caller(auth.ChannelBatch), tollgate.Batch{API: "ok", IdempotencyKey: key,
		Items: func(*catalog.API, int) ([]any, error) { return items, nil }})
}

// TestSuspendedReplayAcrossInstances: a retry of a batch sent with an Idempotency-Key
// before the account was suspended is refused with CodeAccountSuspended, as every
// call of a suspended account is, on the instance that made the suspension and on
// another one whose key cache still says the account is active: the answer one
// instance refuses is not handed out by the other.
func TestSuspendedReplayAcrossInstances(t *testing.T) {
	p := newCachedPair(t)
	ctx := t.Context()
	for _, m := range []*accounts.Manager{p.a, p.b} {
		// Warm both caches; the first batch keeps its answer under "k".
		if r := p.batch(ctx, m, "k", map[string]any{"n": 1}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if _, err := p.a.SuspendAccount(ctx, "acct", "unpaid invoice"); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		m    *accounts.Manager
	}{{"the instance that suspended it", p.a}, {"another instance, its cache stale", p.b}} {
		r := p.batch(ctx, tt.m, "k", map[string]any{"n": 1})
		if r.Replayed || tollgate.CodeOf(r.Err) != tollgate.CodeAccountSuspended {
			t.Errorf("a retry of a batch kept before the suspension, on %s: replayed %v, %v; want account_suspended", tt.name, r.Replayed, r.Err)
		}
	}
}

// TestSuspendedRefusalsAcrossInstances: whatever else is wrong with a call of a
// suspended account made after the API is known (a batch with no items, an input the
// catalog refuses), it is refused with CodeAccountSuspended on every instance, as the
// instance that suspended it does, and not with the other refusal on an instance
// whose key cache still says the account is active.
func TestSuspendedRefusalsAcrossInstances(t *testing.T) {
	p := newCachedPair(t)
	ctx := t.Context()
	for _, m := range []*accounts.Manager{p.a, p.b} {
		if r := p.batch(ctx, m, "", map[string]any{"n": 1}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if _, err := p.a.SuspendAccount(ctx, "acct", "unpaid invoice"); err != nil {
		t.Fatal(err)
	}
	for _, m := range []*accounts.Manager{p.a, p.b} {
		if r := p.batch(ctx, m, ""); tollgate.CodeOf(r.Err) != tollgate.CodeAccountSuspended {
			t.Errorf("a batch with no items: %v, want account_suspended", r.Err)
		}
		if r := p.batch(ctx, m, "", map[string]any{"n": 1}); tollgate.CodeOf(r.Err) != tollgate.CodeAccountSuspended {
			t.Errorf("a batch: %v, want account_suspended", r.Err)
		}
	}
	for _, m := range []*accounts.Manager{p.a, p.b} {
		if _, err := p.a.ReactivateAccount(ctx, "acct", ""); err != nil {
			t.Fatal(err)
		}
		if r := p.batch(ctx, m, "", map[string]any{"n": 1}); r.Err != nil {
			t.Fatal(r.Err)
		}
		if _, err := p.a.SuspendAccount(ctx, "acct", "again"); err != nil {
			t.Fatal(err)
		}
		bad := func(*catalog.API) (tollgate.Input, error) {
			return tollgate.Input{JSON: map[string]any{"n": "not a number"}}, nil
		}
		if err := m.Service().Call(ctx, p.caller(auth.ChannelREST), "ok", bad).Err; tollgate.CodeOf(err) != tollgate.CodeAccountSuspended {
			t.Errorf("a call with an input the catalog refuses: %v, want account_suspended", err)
		}
	}
}
