package tollgate_test

import (
	"context"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// countingKeys counts the reads of key and account records and the key checks.
type countingKeys struct {
	*memory.KeyStore
	resolves, accounts, checks atomic.Int32
}

func (c *countingKeys) Account(ctx context.Context, id string) (auth.Account, error) {
	c.accounts.Add(1)
	return c.KeyStore.Account(ctx, id)
}

func (c *countingKeys) Resolve(ctx context.Context, h auth.Hash) (auth.Key, auth.Account, error) {
	c.resolves.Add(1)
	return c.KeyStore.Resolve(ctx, h)
}

func (c *countingKeys) CheckKey(ctx context.Context, k driver.KeyCheck) (driver.KeyState, error) {
	c.checks.Add(1)
	return c.KeyStore.CheckKey(ctx, k)
}

// cachedInstances returns the account managers of two services on the same stores with
// key caches, as two instances of a deployment (each manager publishes its changes on
// its own service's events): APIs of the given ids that answer {} for 1 credit, and
// plan "p" with 100 credits, a rate limit and a concurrency ceiling that the tests do
// not reach.
func cachedInstances(t *testing.T, keys auth.KeyStore, cache *auth.KeyCacheOptions, apis ...string) (a, b *accounts.Manager) {
	t.Helper()
	reg := &catalog.Registry{}
	for _, id := range apis {
		err := reg.Register(catalog.API{ID: id, Method: "GET", Cost: 1,
			Handler: catalog.HandlerFunc(func(context.Context, *catalog.Request) (any, error) { return map[string]any{}, nil })})
		if err != nil {
			t.Fatal(err)
		}
	}
	plans, _ := billing.NewPlans(billing.Plan{Name: "p", Credits: 100, RatePerMinute: 600, Concurrency: 10})
	stores := tollgate.Stores{Keys: keys, Ledger: memory.NewLedger(nil), Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter()}
	newInstance := func() *accounts.Manager {
		svc, err := tollgate.New(reg, stores, plans, &tollgate.Options{KeyCache: cache})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(svc.Close)
		return newManager(t, svc, stores)
	}
	return newInstance(), newInstance()
}

// TestKeyCacheAcrossInstances runs two services on the same stores, as two instances of
// a deployment do, with key caches: a rotation or revocation made through one is refused
// by the very next call on the other, whose cache still holds the key.
func TestKeyCacheAcrossInstances(t *testing.T) {
	keys := &countingKeys{KeyStore: memory.NewKeyStore()}
	a, b := cachedInstances(t, keys, &auth.KeyCacheOptions{}, "ok")
	ctx := t.Context()
	_, key, value, err := a.CreateAccount(ctx, accounts.Spec{ID: "acct", Plan: "p"})
	if err != nil {
		t.Fatal(err)
	}
	call := func(m *accounts.Manager, value string) error {
		t.Helper()
		return m.Service().Call(ctx, tollgate.Caller{Credential: auth.Credential{Kind: auth.APIKeyHeader, Value: value}, Channel: auth.ChannelREST}, "ok", nil).Err
	}

	// Warm both caches; then calls read no key record.
	for _, m := range []*accounts.Manager{a, b} {
		if err := call(m, value); err != nil {
			t.Fatal(err)
		}
	}
	resolves := keys.resolves.Load()
	for range 3 {
		if err := call(b, value); err != nil {
			t.Fatal(err)
		}
	}
	if got := keys.resolves.Load(); got != resolves {
		t.Errorf("cached calls read %d key records, want none", got-resolves)
	}

	// Rotate on a; b's cache still holds the old value, and its next call is refused.
	_, newValue, err := a.RotateKey(ctx, key.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := call(b, value); tollgate.CodeOf(err) != tollgate.CodeUnauthorized {
		t.Errorf("old value on the other instance: %v, want unauthorized", err)
	}
	if err := call(b, newValue); err != nil {
		t.Errorf("new value on the other instance: %v", err)
	}

	// Revoke on a; b's next call is refused with 403.
	if _, err := a.RevokeKey(ctx, key.ID); err != nil {
		t.Fatal(err)
	}
	if err := call(b, newValue); tollgate.CodeOf(err) != tollgate.CodeForbidden {
		t.Errorf("revoked key on the other instance: %v, want forbidden", err)
	}

	// Nothing was charged for the refused calls: 6 calls went through.
	if info, err := a.Account(ctx, "acct"); err != nil || info.Balance.Remaining != 100-6 {
		bal := info.Balance
		t.Errorf("balance %+v (%v), want %d", bal, err, 100-6)
	}
}

// TestVerifyChecksCachedPrincipals checks that calls without admission (analytics,
// errors) check a cached key on their own.
func TestVerifyChecksCachedPrincipals(t *testing.T) {
	reg := &catalog.Registry{}
	plans, _ := billing.NewPlans(billing.Plan{Name: "p", Credits: 100})
	keys := &countingKeys{KeyStore: memory.NewKeyStore()}
	stores := tollgate.Stores{Keys: keys, Ledger: memory.NewLedger(nil), Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter()}
	a, err := tollgate.New(reg, stores, plans, &tollgate.Options{KeyCache: &auth.KeyCacheOptions{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	b, _ := tollgate.New(reg, stores, plans, nil)
	t.Cleanup(b.Close)
	mgrA, mgrB := newManager(t, a, stores), newManager(t, b, stores)
	ctx := t.Context()
	_, key, value, _ := mgrA.CreateAccount(ctx, accounts.Spec{ID: "acct", Plan: "p"})
	cred := tollgate.Caller{Credential: auth.Credential{Kind: auth.APIKeyHeader, Value: value}}
	if _, err := a.Authenticate(ctx, cred); err != nil { // fills the cache
		t.Fatal(err)
	}
	p, err := a.Authenticate(ctx, cred)
	if err != nil || !p.Cached {
		t.Fatalf("second authentication: %v, cached %v; want a cached principal", err, p.Cached)
	}
	if _, err := a.Status(ctx, &p); err != nil || p.Cached {
		t.Fatalf("Status: %v; the principal is verified after it: %v", err, !p.Cached)
	}
	if _, err := mgrB.RevokeKey(ctx, key.ID); err != nil { // through the other instance
		t.Fatal(err)
	}
	p, _ = a.Authenticate(ctx, cred)
	if _, err := a.Status(ctx, &p); tollgate.CodeOf(err) != tollgate.CodeForbidden {
		t.Errorf("Status of a revoked cached key: %v, want forbidden", err)
	}
	verified := cred
	verified.Verify = true
	if _, err := a.Authenticate(ctx, verified); tollgate.CodeOf(err) != tollgate.CodeForbidden {
		t.Errorf("a verified authentication of a revoked cached key: %v, want forbidden", err)
	}
	refusal := func() ([]tollgate.Item, error) { return nil, &tollgate.Error{Code: tollgate.CodeNotFound} }
	if reply := a.CallAll(ctx, cred, refusal); tollgate.CodeOf(reply.Err) != tollgate.CodeForbidden {
		t.Errorf("a refusal of a revoked cached key: %v, want forbidden", reply.Err)
	}
}

func TestKeyCacheNeedsAChecker(t *testing.T) {
	plans, _ := billing.NewPlans(billing.Plan{Name: "p"})
	type plainKeys struct{ auth.KeyStore }
	_, err := tollgate.New(&catalog.Registry{}, tollgate.Stores{
		Keys: plainKeys{memory.NewKeyStore()}, Ledger: memory.NewLedger(nil), Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter(),
	}, plans, &tollgate.Options{KeyCache: &auth.KeyCacheOptions{}})
	if err == nil {
		t.Error("a key cache over a key store that cannot check keys was accepted")
	}
}

// TestAuthenticateKeyIDAcrossInstances checks callers bound to a key's stable id (OAuth
// grants): with warm caches on two instances, a rotation through one does not disturb
// them on the other (the stale record is read again, and the call goes through at once),
// and a revocation refuses their very next call there.
func TestAuthenticateKeyIDAcrossInstances(t *testing.T) {
	reg := &catalog.Registry{}
	err := reg.Register(catalog.API{ID: "ok", Method: "GET", Cost: 1,
		Handler: catalog.HandlerFunc(func(context.Context, *catalog.Request) (any, error) { return map[string]any{}, nil })})
	if err != nil {
		t.Fatal(err)
	}
	plans, _ := billing.NewPlans(billing.Plan{Name: "p", Credits: 100, RatePerMinute: 600, Concurrency: 10})
	keys := &countingKeys{KeyStore: memory.NewKeyStore()}
	stores := tollgate.Stores{Keys: keys, Ledger: memory.NewLedger(nil), Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter()}
	var instances [2]*tollgate.Service
	for i := range instances {
		if instances[i], err = tollgate.New(reg, stores, plans, &tollgate.Options{KeyCache: &auth.KeyCacheOptions{}}); err != nil {
			t.Fatal(err)
		}
	}
	a, b := instances[0], instances[1]
	mgrA := newManager(t, a, stores) // changes through a: a's cache hears of them
	ctx := t.Context()
	_, key, value, err := mgrA.CreateAccount(ctx, accounts.Spec{ID: "acct", Plan: "p"})
	if err != nil {
		t.Fatal(err)
	}
	sub, _, err := mgrA.CreateKey(ctx, "acct", accounts.NewKey{Name: "mcp only", Restrictions: mustRestrictions(t, auth.RestrictionSpec{Channels: []string{"mcp"}})})
	if err != nil {
		t.Fatal(err)
	}
	call := func(svc *tollgate.Service, keyID string, ch auth.Channel) error {
		t.Helper()
		p, err := svc.Authenticate(ctx, tollgate.Caller{KeyID: keyID, Channel: ch})
		if err != nil {
			return err
		}
		if p.Key.ID != keyID || !p.ByID {
			t.Fatalf("principal of key %s: key %s, ByID %v", keyID, p.Key.ID, p.ByID)
		}
		return svc.Call(ctx, tollgate.Caller{KeyID: keyID, Channel: ch}, "ok", nil).Err
	}

	tests := []struct {
		name  string
		keyID string
		ch    auth.Channel
		ok    bool
		want  tollgate.Code
	}{
		{"unknown id", "key_nosuchkey", auth.ChannelMCP, false, tollgate.CodeUnauthorized},
		{"channel the key does not allow", sub.ID, auth.ChannelREST, false, tollgate.CodeForbidden},
		{"allowed channel", sub.ID, auth.ChannelMCP, true, 0},
	}
	for _, tt := range tests {
		err := call(a, tt.keyID, tt.ch)
		if tt.ok && err != nil || !tt.ok && tollgate.CodeOf(err) != tt.want {
			t.Errorf("%s: %v, want ok %v or code %v", tt.name, err, tt.ok, tt.want)
		}
	}

	// Warm both caches, then rotate through a: b's cached record has the old hash, and
	// its next call goes through.
	for _, svc := range instances {
		if err := call(svc, key.ID, auth.ChannelMCP); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := mgrA.RotateKey(ctx, key.ID); err != nil {
		t.Fatal(err)
	}
	checks := keys.checks.Load()
	if err := call(b, key.ID, auth.ChannelMCP); err != nil {
		t.Errorf("call by key id after a rotation on the other instance: %v", err)
	}
	if keys.checks.Load() == checks {
		t.Error("the cached record was not checked")
	}
	// The old value no longer works by value.
	if _, err := b.Authenticate(ctx, tollgate.Caller{Credential: auth.Credential{Kind: auth.APIKeyHeader, Value: value}}); tollgate.CodeOf(err) != tollgate.CodeUnauthorized {
		t.Errorf("old value after rotation: %v, want unauthorized", err)
	}

	// Revoke through a: b refuses the very next call by id.
	if _, err := mgrA.RevokeKey(ctx, key.ID); err != nil {
		t.Fatal(err)
	}
	if err := call(b, key.ID, auth.ChannelMCP); tollgate.CodeOf(err) != tollgate.CodeForbidden {
		t.Errorf("call by key id after revocation on the other instance: %v, want forbidden", err)
	}
	if info, err := mgrA.Account(ctx, "acct"); err != nil || info.Balance.Remaining != 100-4 {
		bal := info.Balance
		t.Errorf("balance %+v (%v), want %d: four calls went through", bal, err, 100-4)
	}
}

// newManager returns the account manager of svc, on stores, svc's own; the test's end
// closes it.
func newManager(t *testing.T, svc *tollgate.Service, stores tollgate.Stores) *accounts.Manager {
	t.Helper()
	mgr, err := accounts.New(svc, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mgr.Close)
	return mgr
}

func mustRestrictions(t *testing.T, spec auth.RestrictionSpec) auth.Restrictions {
	t.Helper()
	r, err := auth.NewRestrictions(spec)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestSessionTokensWithKeyCache checks session tokens (x-jwt) that act for a whole
// account on an instance with a key cache: the account's record is read from the store
// once and then served from the cache, and every paid call still checks in its
// admission that the account exists; a call without admission (the analytics) checks it
// too. A token whose account's access expired is refused on its very next call, from
// the cached record.
func TestSessionTokensWithKeyCache(t *testing.T) {
	reg := &catalog.Registry{}
	err := reg.Register(catalog.API{ID: "ok", Method: "GET", Cost: 1,
		Handler: catalog.HandlerFunc(func(context.Context, *catalog.Request) (any, error) { return map[string]any{}, nil })})
	if err != nil {
		t.Fatal(err)
	}
	plans, _ := billing.NewPlans(billing.Plan{Name: "p", Credits: 100, RatePerMinute: 600, Concurrency: 10})
	sessions, err := auth.NewSessions([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	clock := testenv.NewClock(time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC))
	keys := &countingKeys{KeyStore: memory.NewKeyStore()}
	stores := tollgate.Stores{Keys: keys, Ledger: memory.NewLedger(nil), Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter()}
	svc, err := tollgate.New(reg, stores,
		plans, &tollgate.Options{KeyCache: &auth.KeyCacheOptions{TTL: time.Hour}, Sessions: sessions, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	mgr := newManager(t, svc, stores)
	ctx := t.Context()
	expiring := mustRestrictions(t, auth.RestrictionSpec{ExpiresAt: ptr(clock.Now().Add(time.Minute))})
	for _, spec := range []accounts.Spec{{ID: "acct", Plan: "p"}, {ID: "brief", Plan: "p", Restrictions: expiring}} {
		if _, _, _, err := mgr.CreateAccount(ctx, spec); err != nil {
			t.Fatal(err)
		}
	}
	caller := func(account string) tollgate.Caller {
		t.Helper()
		tok, err := sessions.Issue(account, clock.Now(), 2*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return tollgate.Caller{Credential: auth.Credential{Kind: auth.SessionHeader, Value: tok}, Channel: auth.ChannelREST}
	}
	acct, brief := caller("acct"), caller("brief")

	// A good token: one read of the account, then the cache; a check per admission.
	reads, checks := keys.accounts.Load(), keys.checks.Load()
	for i := range 3 {
		if err := svc.Call(ctx, acct, "ok", nil).Err; err != nil {
			t.Fatalf("call %d with a good token: %v", i+1, err)
		}
	}
	if got := keys.accounts.Load() - reads; got != 1 {
		t.Errorf("three calls read the account %d times, want once: the others are served from the cache", got)
	}
	if got := keys.checks.Load() - checks; got != 2 {
		t.Errorf("the two cached calls checked the account %d times, want once each", got)
	}
	p, err := svc.Authenticate(ctx, acct)
	if err != nil || !p.Cached || p.Account.ID != "acct" || p.Key.ID != "" {
		t.Fatalf("Authenticate: %+v, %v; want the cached account, no key", p, err)
	}
	checks = keys.checks.Load()
	if _, err := svc.Status(ctx, &p); err != nil || p.Cached || keys.checks.Load() != checks+1 {
		t.Errorf("Status of a cached session: %v, still cached %v, %d checks; want the account checked once", err, p.Cached, keys.checks.Load()-checks)
	}

	// A token whose account's access expires: served until then, refused from the
	// very next call on, without a read of the store.
	if err := svc.Call(ctx, brief, "ok", nil).Err; err != nil {
		t.Fatalf("a call before the account's access expired: %v", err)
	}
	clock.Advance(time.Minute)
	reads = keys.accounts.Load()
	reply := svc.Call(ctx, brief, "ok", nil)
	if tollgate.CodeOf(reply.Err) != tollgate.CodeForbidden || !strings.Contains(reply.Err.Error(), "expired") {
		t.Errorf("the next call after the account's access expired: %v, want forbidden, saying it expired", reply.Err)
	}
	if keys.accounts.Load() != reads {
		t.Error("the expired account was read from the store: its cached record should refuse it")
	}
	if err := svc.Call(ctx, acct, "ok", nil).Err; err != nil {
		t.Errorf("the other account's token after the expiry: %v", err)
	}
	info, err := mgr.Account(ctx, "brief")
	if err != nil || info.Balance.Remaining != 99 {
		t.Errorf("brief's balance %+v (%v), want 99: the refused call is not charged", info.Balance, err)
	}
}

func ptr[T any](v T) *T { return &v }

// TestCallAs checks Service.CallAs, which runs a call for a principal the front door
// authenticated: the call is held to the key as the key store has it (a key from the
// cache is checked in the admission, refreshed when it changed, and refused when it
// may no longer call the API), and the front door's principal is left as it was, since
// several calls of one request may share it.
func TestCallAs(t *testing.T) {
	a, b := cachedInstances(t, memory.NewKeyStore(), &auth.KeyCacheOptions{TTL: time.Hour}, "a", "b")
	ctx := context.Background()
	_, key, value, err := a.CreateAccount(ctx, accounts.Spec{ID: "acct", Plan: "p"})
	if err != nil {
		t.Fatal(err)
	}
	svc := a.Service()
	caller := tollgate.Caller{Credential: auth.Credential{Kind: auth.APIKeyHeader, Value: value}, Channel: auth.ChannelMCP}
	if reply := svc.Call(ctx, caller, "a", nil); reply.Err != nil { // puts the key in a's cache
		t.Fatal(reply.Err)
	}
	p, err := svc.Authenticate(ctx, caller)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Cached {
		t.Fatal("the principal did not come from the key cache")
	}
	kept := p
	if reply := svc.Call(ctx, tollgate.Caller{As: &p}, "a", nil); reply.Err != nil || reply.Receipt.Charged != 1 {
		t.Fatalf("a call as the principal: %v, charged %d", reply.Err, reply.Receipt.Charged)
	}
	// Narrowed through the other instance: a's cache still holds the old record.
	only, err := auth.NewRestrictions(auth.RestrictionSpec{APIs: []string{"b"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.UpdateKey(ctx, key.ID, accounts.KeyChange{Restrictions: &only}); err != nil {
		t.Fatal(err)
	}
	if reply := svc.Call(ctx, tollgate.Caller{As: &p}, "a", nil); tollgate.CodeOf(reply.Err) != tollgate.CodeForbidden {
		t.Fatalf("a call of an API the key may no longer call: %v; want forbidden", reply.Err)
	}
	if reply := svc.Call(ctx, tollgate.Caller{As: &p}, "b", nil); reply.Err != nil {
		t.Fatalf("a call of the API the key may still call: %v", reply.Err)
	}
	if _, err := b.RevokeKey(ctx, key.ID); err != nil {
		t.Fatal(err)
	}
	if reply := svc.Call(ctx, tollgate.Caller{As: &p}, "b", nil); tollgate.CodeOf(reply.Err) != tollgate.CodeForbidden {
		t.Fatalf("a call with a revoked key: %v; want forbidden", reply.Err)
	}
	if !reflect.DeepEqual(p, kept) {
		t.Fatalf("CallAs changed the principal:\n%+v\nwas\n%+v", p, kept)
	}
	if bal, err := a.Account(ctx, "acct"); err != nil || bal.Balance.Used != 3 {
		t.Fatalf("used %d credits (%v); want 3: the refused calls charge nothing", bal.Balance.Used, err)
	}
}

// TestKeyCacheAccountRevision checks that the key check of a cached principal names its
// account's revision: an account whose record changed in the store (its restrictions
// narrowed, here) is read again by the very next call on an instance whose cache
// still holds the old record, and the call is judged on the new one.
func TestKeyCacheAccountRevision(t *testing.T) {
	keys := &countingKeys{KeyStore: memory.NewKeyStore()}
	a, _ := cachedInstances(t, keys, &auth.KeyCacheOptions{}, "ok", "other")
	ctx := t.Context()
	_, _, value, err := a.CreateAccount(ctx, accounts.Spec{ID: "acct", Plan: "p"})
	if err != nil {
		t.Fatal(err)
	}
	call := func(api string) error {
		t.Helper()
		return a.Service().Call(ctx, tollgate.Caller{Credential: auth.Credential{Kind: auth.APIKeyHeader, Value: value}, Channel: auth.ChannelREST}, api, nil).Err
	}
	for range 2 { // the second call is served from the cache
		if err := call("ok"); err != nil {
			t.Fatal(err)
		}
	}
	acct, err := keys.Account(ctx, "acct")
	if err != nil {
		t.Fatal(err)
	}
	u := acct.Update()
	u.Restrictions, err = auth.NewRestrictions(auth.RestrictionSpec{APIs: []string{"other"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := keys.UpdateAccount(ctx, u); err != nil {
		t.Fatal(err)
	}
	if err := call("ok"); tollgate.CodeOf(err) != tollgate.CodeForbidden {
		t.Errorf("a call the account's new restrictions forbid, on a cached key: %v, want forbidden", err)
	}
	if err := call("other"); err != nil {
		t.Errorf("a call the account's new restrictions allow: %v", err)
	}
	// The record read again is cached, with the account's new revision: the next calls
	// read no record.
	resolves, accts := keys.resolves.Load(), keys.accounts.Load()
	for range 3 {
		if err := call("other"); err != nil {
			t.Fatal(err)
		}
	}
	if r, n := keys.resolves.Load()-resolves, keys.accounts.Load()-accts; r != 0 || n != 0 {
		t.Errorf("cached calls after the refresh read %d key and %d account records, want none", r, n)
	}
}
