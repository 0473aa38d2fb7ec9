package accounts_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/store/postgres"
	"github.com/tollgate-dev/tollgate/store/redis"
)

const (
	seedValue  = "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b"
	otherValue = "6fa459ea-ee8a-4ca4-894e-db77e160355e"
)

// countChanges counts the changes the service publishes.
func countChanges(h *harness) *atomic.Int64 {
	var n atomic.Int64
	h.svc.Events().Subscribe(event.ObserverFunc(func(context.Context, event.Event) { n.Add(1) }),
		event.AccountCreated, event.KeyCreated, event.KeyRevoked)
	return &n
}

// TestCreateAccountIdempotent: creating an account that exists with the same plan,
// restrictions and primary key value returns it as it is (its balance as it moved,
// nothing published); another definition is a conflict that says what differs.
func TestCreateAccountIdempotent(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	ctx := t.Context()
	office := mustRestrictions(t, auth.RestrictionSpec{AllowedIPs: []string{"10.0.0.0/8"}})
	spec := accounts.Spec{ID: "seeded", Plan: "p", Restrictions: office, KeyValue: seedValue}
	acct, key, value, err := h.mgr.CreateAccount(ctx, spec)
	if err != nil || value != seedValue {
		t.Fatalf("CreateAccount: %v, value %q", err, value)
	}
	if _, err := h.mgr.AdjustCredits(ctx, acct.ID, -30, "spent", nil); err != nil {
		t.Fatal(err)
	}
	published := countChanges(h)

	again, againKey, againValue, err := h.mgr.CreateAccount(ctx, spec)
	if err != nil || again.ID != acct.ID || againKey.ID != key.ID || againValue != seedValue {
		t.Fatalf("the same creation again: %+v %+v %q %v, want the account, its key and the value", again, againKey, againValue, err)
	}
	// Without the value in the spec, the value is not known: it is not stored.
	spec.KeyValue = ""
	if _, k, v, err := h.mgr.CreateAccount(ctx, spec); err != nil || k.ID != key.ID || v != "" {
		t.Errorf("the same creation without the value: key %s value %q %v, want the key and no value", k.ID, v, err)
	}
	if info, err := h.mgr.Account(ctx, acct.ID); err != nil || info.Balance.Remaining != 70 {
		t.Errorf("balance %+v %v, want the 70 left, untouched by the creations", info.Balance, err)
	}
	if n := published.Load(); n != 0 {
		t.Errorf("%d changes published for creations that changed nothing", n)
	}

	for _, tt := range []struct {
		name string
		spec accounts.Spec
		want string
	}{
		{"another value", accounts.Spec{ID: "seeded", Plan: "p", Restrictions: office, KeyValue: otherValue}, "its primary key has another value"},
		{"other restrictions", accounts.Spec{ID: "seeded", Plan: "p", KeyValue: seedValue}, "its restrictions differ"},
	} {
		_, _, _, err := h.mgr.CreateAccount(ctx, tt.spec)
		if tollgate.CodeOf(err) != tollgate.CodeConflict || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want a conflict saying %q", tt.name, err, tt.want)
		}
	}
}

// TestSeedingAfterAPlanChange: seeding compares the plan in force: a change the
// operator scheduled for the renewal counts from the renewal on, whether or not the
// account's record was written since.
func TestSeedingAfterAPlanChange(t *testing.T) {
	clock := testenv.NewClock(time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC))
	mgr, _ := plansManagerOn(t, memory.NewKeyStore(), memory.NewLedger(nil), clock)
	ctx := t.Context()
	if _, err := mgr.ChangePlan(ctx, "acct", "pro", accounts.EffectiveRenewal); err != nil {
		t.Fatal(err)
	}
	seed := func(plan string) error {
		_, _, _, err := mgr.CreateAccount(ctx, accounts.Spec{ID: "acct", Plan: plan})
		return err
	}
	if err := seed("basic"); err != nil {
		t.Errorf("seeding on basic before the renewal: %v", err)
	}
	clock.Set(time.Date(2030, 2, 15, 12, 0, 0, 0, time.UTC)) // the account's renewal
	if err := seed("pro"); err != nil {
		t.Errorf("seeding on pro from the renewal: %v", err)
	}
	if err := seed("basic"); tollgate.CodeOf(err) != tollgate.CodeConflict || !strings.Contains(err.Error(), `its plan is "pro"`) {
		t.Errorf("seeding on basic from the renewal: %v, want a conflict naming pro", err)
	}
}

// TestCreateAccountHealsACutShortCreation: an account whose creation stopped before its
// balance was opened gets it when it is created again.
func TestCreateAccountHealsACutShortCreation(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	ctx := t.Context()
	now := h.svc.Now()
	if err := h.stores.Keys.CreateAccount(ctx, auth.Account{ID: "half", Plan: "p", CreatedAt: now},
		auth.Key{ID: "key_half", AccountID: "half", Name: "primary", Primary: true, Hash: auth.HashKey(seedValue), CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.mgr.Account(ctx, "half"); err == nil {
		t.Fatal("the half-created account has a balance")
	}
	if _, _, _, err := h.mgr.CreateAccount(ctx, accounts.Spec{ID: "half", Plan: "p", KeyValue: seedValue}); err != nil {
		t.Fatal(err)
	}
	if info, err := h.mgr.Account(ctx, "half"); err != nil || info.Balance.Remaining != 100 {
		t.Errorf("balance %+v %v, want the plan's 100", info.Balance, err)
	}
}

// TestCreateKeyIdempotent: creating a key with a value a key of the account has, with
// the same name and restrictions, returns it (revoked, once revoked); another name,
// other restrictions or another account's value is a conflict.
func TestCreateKeyIdempotent(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	ctx := t.Context()
	hashOnly := mustRestrictions(t, auth.RestrictionSpec{APIs: []string{"ok"}})
	spec := accounts.NewKey{Name: "ci", Restrictions: hashOnly, Value: seedValue}
	key, value, err := h.mgr.CreateKey(ctx, "acct", spec)
	if err != nil || value != seedValue {
		t.Fatalf("CreateKey: %v", err)
	}
	published := countChanges(h)
	if again, v, err := h.mgr.CreateKey(ctx, "acct", spec); err != nil || again.ID != key.ID || v != seedValue {
		t.Fatalf("the same key again: %+v %q %v", again, v, err)
	}
	if n := published.Load(); n != 0 {
		t.Errorf("%d changes published for a creation that changed nothing", n)
	}
	if _, _, _, err := h.mgr.CreateAccount(ctx, accounts.Spec{ID: "other", Plan: "p", KeyValue: otherValue}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		account string
		spec    accounts.NewKey
		want    string
	}{
		{"another name", "acct", accounts.NewKey{Name: "cd", Restrictions: hashOnly, Value: seedValue}, "another name or other restrictions"},
		{"other restrictions", "acct", accounts.NewKey{Name: "ci", Value: seedValue}, "another name or other restrictions"},
		{"another account's value", "acct", accounts.NewKey{Name: "x", Value: otherValue}, "the key's value is taken"},
		{"this key's value, from another account", "other", accounts.NewKey{Name: "ci", Value: seedValue}, "the key's value is taken"},
	} {
		_, _, err := h.mgr.CreateKey(ctx, tt.account, tt.spec)
		if tollgate.CodeOf(err) != tollgate.CodeConflict || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want a conflict saying %q", tt.name, err, tt.want)
		}
		if tt.spec.Value == otherValue && strings.Contains(err.Error(), `"other"`) {
			t.Errorf("%s: the conflict names the account that holds the value: %v", tt.name, err)
		}
	}
	if _, err := h.mgr.RevokeKey(ctx, key.ID); err != nil {
		t.Fatal(err)
	}
	if again, _, err := h.mgr.CreateKey(ctx, "acct", spec); err != nil || again.ID != key.ID || !again.Revoked() {
		t.Errorf("the same key after its revocation: %+v %v, want it, revoked", again, err)
	}
}

// TestSeedingOnStores: a host that seeds its account and key at every start, on the
// shared key stores (a restart is a new manager on the same stores), gets them back
// unchanged, and a conflict for another definition.
func TestSeedingOnStores(t *testing.T) {
	for _, tt := range []struct {
		name string
		keys func(t *testing.T) auth.KeyStore
	}{
		{"postgres", func(t *testing.T) auth.KeyStore {
			dsn := testenv.Var(t, testenv.Postgres)
			pool := testenv.PostgresPool(t, dsn, testenv.PostgresSchema(t, dsn), 4)
			if err := postgres.Migrate(t.Context(), pool); err != nil {
				t.Fatal(err)
			}
			s, err := postgres.New(pool, nil)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
		{"redis", func(t *testing.T) auth.KeyStore {
			c := testenv.RedisClient(t, testenv.Var(t, testenv.Redis))
			s, err := redis.New(c, &redis.Options{Prefix: testenv.RedisPrefix(t, c)})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			keys := tt.keys(t)
			ctx := t.Context()
			spec := accounts.Spec{ID: "seeded", Plan: "p", KeyValue: seedValue}
			key := accounts.NewKey{Name: "ci", Value: otherValue}
			var first auth.Key
			for start := range 2 {
				h := newHarness(t, harnessOptions{keys: keys})
				acct, primary, _, err := h.mgr.CreateAccount(ctx, spec)
				if err != nil || acct.ID != "seeded" {
					t.Fatalf("start %d: CreateAccount: %v", start, err)
				}
				k, _, err := h.mgr.CreateKey(ctx, "seeded", key)
				if err != nil {
					t.Fatalf("start %d: CreateKey: %v", start, err)
				}
				if start == 0 {
					first = k
				} else if k.ID != first.ID || !primary.Primary {
					t.Errorf("start %d: key %s, want %s", start, k.ID, first.ID)
				}
			}
			h := newHarness(t, harnessOptions{keys: keys})
			spec.Plan, spec.KeyValue = "p", otherValue
			if _, _, _, err := h.mgr.CreateAccount(ctx, spec); tollgate.CodeOf(err) != tollgate.CodeConflict {
				t.Errorf("another primary value: %v, want a conflict", err)
			}
		})
	}
}

// TestSeedingAnExpiredKey: a seeded key that has expired since is answered as it is
// when it is seeded again, not refused for its expiry.
func TestSeedingAnExpiredKey(t *testing.T) {
	clock := testenv.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	h := newHarness(t, harnessOptions{opts: tollgate.Options{Now: clock.Now}})
	expires := clock.Now().Add(time.Hour)
	spec := accounts.NewKey{Name: "trial", Value: seedValue,
		Restrictions: mustRestrictions(t, auth.RestrictionSpec{ExpiresAt: &expires})}
	key, _, err := h.mgr.CreateKey(t.Context(), "acct", spec)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Hour)
	again, _, err := h.mgr.CreateKey(t.Context(), "acct", spec)
	if err != nil || again.ID != key.ID {
		t.Errorf("the expired key seeded again: %+v %v, want it as it is", again, err)
	}
	// A new key that would expire in the past is still refused.
	spec.Value = otherValue
	if _, _, err := h.mgr.CreateKey(t.Context(), "acct", spec); tollgate.CodeOf(err) != tollgate.CodeInvalidInput {
		t.Errorf("a new key already expired: %v, want invalid_input", err)
	}
}

// TestAdjustingACutShortCreation: credits adjusted on an account whose creation stopped
// before its balance was opened open it as the creation would have, with the plan's
// allowance, and adjust that: a grant comes on top of it, a take from it.
func TestAdjustingACutShortCreation(t *testing.T) {
	for _, tt := range []struct {
		amount               int64
		remaining, allowance int64
	}{
		{30, 130, 100},
		{-10, 90, 90},
	} {
		h := newHarness(t, harnessOptions{})
		ctx := t.Context()
		now := h.svc.Now()
		if err := h.stores.Keys.CreateAccount(ctx, auth.Account{ID: "half", Plan: "p", CreatedAt: now},
			auth.Key{ID: "key_half", AccountID: "half", Name: "primary", Primary: true, Hash: auth.HashKey(seedValue), CreatedAt: now}); err != nil {
			t.Fatal(err)
		}
		b, err := h.mgr.AdjustCredits(ctx, "half", tt.amount, "fix", nil)
		if err != nil || b.Remaining != tt.remaining || b.AllowanceLeft() != tt.allowance {
			t.Errorf("adjusting %+d: %+v %v, want %d remaining, %d of them the allowance", tt.amount, b, err, tt.remaining, tt.allowance)
		}
	}
}
