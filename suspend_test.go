package tollgate_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// refusalLog records the refusals a service publishes.
type refusalLog struct {
	mu   sync.Mutex
	list []event.Refusal
}

func (l *refusalLog) Observe(_ context.Context, e event.Event) {
	if r, ok := e.(*event.Refusal); ok {
		l.mu.Lock()
		l.list = append(l.list, *r)
		l.mu.Unlock()
	}
}

func (l *refusalLog) all() []event.Refusal {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.list)
}

// suspension is a service whose plan "p" allows one call a minute (on a clock that
// does not move) and 100 credits, with an account "acct" and its key's value.
type suspension struct {
	svc      *tollgate.Service
	mgr      *accounts.Manager
	value    string
	refusals *refusalLog
}

func newSuspension(t *testing.T) *suspension {
	t.Helper()
	reg := &catalog.Registry{}
	for _, id := range []string{"ok", "other"} {
		err := reg.Register(catalog.API{ID: id, Method: "GET", Cost: 1,
			Params:  []catalog.Param{{Name: "n", Type: catalog.Integer}},
			Handler: catalog.HandlerFunc(func(context.Context, *catalog.Request) (any, error) { return map[string]any{}, nil })})
		if err != nil {
			t.Fatal(err)
		}
	}
	plans, _ := billing.NewPlans(billing.Plan{Name: "p", Credits: 100, RatePerMinute: 1, Concurrency: 10, BatchMaxItems: 5})
	stores := tollgate.Stores{Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil), Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter()}
	svc, err := tollgate.New(reg, stores, plans, &tollgate.Options{Now: testenv.NewClock(time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC)).Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	s := &suspension{svc: svc, mgr: newManager(t, svc, stores), refusals: &refusalLog{}}
	svc.Events().Subscribe(s.refusals, event.CallRefused)
	if _, _, s.value, err = s.mgr.CreateAccount(t.Context(), accounts.Spec{ID: "acct", Plan: "p"}); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *suspension) caller(ch auth.Channel) tollgate.Caller {
	return tollgate.Caller{Credential: auth.Credential{Kind: auth.APIKeyHeader, Value: s.value}, Channel: ch}
}

func (s *suspension) remaining(t *testing.T) int64 {
	t.Helper()
	info, err := s.mgr.Account(t.Context(), "acct")
	if err != nil {
		t.Fatal(err)
	}
	return info.Balance.Remaining
}

// wantSuspended checks that err is the refusal of a suspended account, which tells the
// holder what to do.
func wantSuspended(t *testing.T, what string, err error) {
	t.Helper()
	if tollgate.CodeOf(err) != tollgate.CodeAccountSuspended || !strings.Contains(err.Error(), "contact the operator") {
		t.Errorf("%s: %v (%s), want account_suspended telling to contact the operator", what, err, tollgate.CodeOf(err))
	}
}

// TestSuspendedAccountCalls: every way of calling refuses a suspended account's calls
// with CodeAccountSuspended: a call, a call of several APIs, a batch, a quote. None is
// charged, none takes a rate-limit event (the plan allows one call a minute, and the
// first call after the reactivation is served), and each is published as a refusal
// with its code and the APIs it named. A call of an API the catalog does not have is
// answered 404 as before.
func TestSuspendedAccountCalls(t *testing.T) {
	s := newSuspension(t)
	ctx := t.Context()
	acct, err := s.mgr.SuspendAccount(ctx, "acct", "unpaid invoice")
	if err != nil || acct.State != auth.AccountSuspended {
		t.Fatalf("SuspendAccount: %+v %v", acct, err)
	}
	items := func() ([]tollgate.Item, error) {
		return []tollgate.Item{{API: "ok"}, {API: "other"}}, nil
	}
	for range 3 {
		wantSuspended(t, "a call", s.svc.Call(ctx, s.caller(auth.ChannelREST), "ok", nil).Err)
		wantSuspended(t, "a call of several APIs", s.svc.CallAll(ctx, s.caller(auth.ChannelGraphQL), items).Err)
		b := s.svc.CallBatch(ctx, s.caller(auth.ChannelBatch), tollgate.Batch{API: "ok",
			Items: func(*catalog.API, int) ([]any, error) { return []any{map[string]any{}}, nil }})
		wantSuspended(t, "a batch", b.Err)
		wantSuspended(t, "a quote", s.svc.QuoteAll(ctx, s.caller(auth.ChannelGraphQL), items).Err)
	}
	if err := s.svc.Call(ctx, s.caller(auth.ChannelREST), "nope", nil).Err; tollgate.CodeOf(err) != tollgate.CodeNotFound {
		t.Errorf("an unknown API: %v, want not_found", err)
	}
	// A query that names no API (a GraphQL schema query) is answered.
	if r := s.svc.CallAll(ctx, s.caller(auth.ChannelGraphQL), func() ([]tollgate.Item, error) { return nil, nil }); r.Err != nil {
		t.Errorf("a call with nothing to run: %v", r.Err)
	}
	if got := s.remaining(t); got != 100 {
		t.Errorf("%d credits remain after the refusals, want 100: they were charged", got)
	}
	var suspended [][]string
	for _, r := range s.refusals.all() {
		if r.Code == "account_suspended" {
			suspended = append(suspended, r.APIs)
		}
	}
	want := [][]string{{"ok"}, {"ok", "other"}, {"ok"}}
	if len(suspended) != 9 || !slices.EqualFunc(suspended[:3], want, slices.Equal) {
		t.Errorf("published refusals %q, want 3 rounds of %q (a quote is not a call)", suspended, want)
	}

	if _, err := s.mgr.ReactivateAccount(ctx, "acct", ""); err != nil {
		t.Fatal(err)
	}
	if err := s.svc.Call(ctx, s.caller(auth.ChannelREST), "ok", nil).Err; err != nil {
		t.Fatalf("the first call after the reactivation: %v (the refusals took rate-limit events?)", err)
	}
	if err := s.svc.Call(ctx, s.caller(auth.ChannelREST), "ok", nil).Err; tollgate.CodeOf(err) != tollgate.CodeRateLimited {
		t.Errorf("the second call: %v, want rate_limited (one call a minute)", err)
	}
}

// TestSuspensionAcrossInstances runs two services on one key store, as two instances
// of a deployment, with key caches: a suspension made through one refuses the very
// next call on the other, whose cache still says the account is active, and a
// reactivation lets the next call through although that cache now says suspended. A
// closure answers the next call as a revoked key.
func TestSuspensionAcrossInstances(t *testing.T) {
	keys := &countingKeys{KeyStore: memory.NewKeyStore()}
	a, b := cachedInstances(t, keys, &auth.KeyCacheOptions{}, "ok")
	ctx := t.Context()
	_, _, value, err := a.CreateAccount(ctx, accounts.Spec{ID: "acct", Plan: "p"})
	if err != nil {
		t.Fatal(err)
	}
	call := func(m *accounts.Manager) error {
		t.Helper()
		return m.Service().Call(ctx, tollgate.Caller{Credential: auth.Credential{Kind: auth.APIKeyHeader, Value: value}, Channel: auth.ChannelREST}, "ok", nil).Err
	}
	for _, m := range []*accounts.Manager{a, b, b} {
		if err := call(m); err != nil {
			t.Fatal(err)
		}
	}
	resolves := keys.resolves.Load()
	if _, err := a.SuspendAccount(ctx, "acct", "abuse"); err != nil {
		t.Fatal(err)
	}
	wantSuspended(t, "the next call on the other instance", call(b))
	if keys.resolves.Load() == resolves {
		t.Error("the other instance refused the call without reading the account again")
	}
	wantSuspended(t, "a second call there", call(b))

	if _, err := a.ReactivateAccount(ctx, "acct", "paid"); err != nil {
		t.Fatal(err)
	}
	if err := call(b); err != nil {
		t.Errorf("the next call on the other instance after the reactivation: %v", err)
	}
	// The record read again is cached, at the account's new revision.
	resolves = keys.resolves.Load()
	if err := call(b); err != nil || keys.resolves.Load() != resolves {
		t.Errorf("a later call there: %v, reading %d key records, want none", err, keys.resolves.Load()-resolves)
	}

	if _, err := a.CloseAccount(ctx, "acct", "the customer left"); err != nil {
		t.Fatal(err)
	}
	err = call(b)
	if tollgate.CodeOf(err) != tollgate.CodeForbidden || err.Error() != "the API key has been revoked; use another key of the account" {
		t.Errorf("a key of the closed account on the other instance: %v, want it answered as a revoked key", err)
	}
}
