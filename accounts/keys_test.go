package accounts_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store"
)

// The policy of keys (keys.go) through the operator's methods: how accounts and keys
// are made, rotated, revoked and changed. Conditioned rotations and revocations, and
// updates that race, are tested with self-service (selfservice_test.go), which is what
// conditions them.

// keysT0 is when the clock of the key tests starts.
var keysT0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// Key values for fixtures: one UUID in lower and in upper case, and another.
const (
	lowerKey = "3f2a9c1e-7b4d-4e8a-9c0f-1a2b3c4d5e6f"
	upperKey = "3F2A9C1E-7B4D-4E8A-9C0F-1A2B3C4D5E6F"
	otherKey = "0b1c2d3e-4f50-4617-8293-a4b5c6d7e8f9"
)

// newKeysHarness returns a harness (plan "p") whose clock starts at keysT0.
func newKeysHarness(t *testing.T) (*harness, *testenv.Clock) {
	t.Helper()
	clock := testenv.NewClock(keysT0)
	return newHarness(t, harnessOptions{opts: tollgate.Options{Now: clock.Now}}), clock
}

// authenticate authenticates a key value with the harness's service over REST from
// 10.1.1.1.
func authenticate(h *harness, value string) (tollgate.Principal, error) {
	return h.svc.Authenticate(context.Background(), tollgate.Caller{
		Credential: auth.Credential{Kind: auth.APIKeyHeader, Value: value},
		Channel:    auth.ChannelREST, Addr: netip.MustParseAddr("10.1.1.1"),
	})
}

// wantRefused checks that err has the code want and that its message contains each of
// parts.
func wantRefused(t *testing.T, what string, err error, want tollgate.Code, parts ...string) {
	t.Helper()
	var e *tollgate.Error
	if !errors.As(err, &e) || e.Code != want {
		t.Errorf("%s: %v (code %v); want a *tollgate.Error with code %v", what, err, tollgate.CodeOf(err), want)
		return
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %q does not mention %q", what, err, p)
		}
	}
}

// isLowerUUID reports whether v is a key value in its canonical (lowercase) form.
func isLowerUUID(v string) bool {
	p, ok := auth.ParseKey(v)
	return ok && p == v
}

func TestCreateAccount(t *testing.T) {
	h, _ := newKeysHarness(t)
	ctx := context.Background()
	acct, key, value, err := h.mgr.CreateAccount(ctx, accounts.Spec{ID: "acct_1", Plan: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if acct.ID != "acct_1" || acct.Plan != "p" || !acct.CreatedAt.Equal(keysT0) {
		t.Errorf("account = %+v", acct)
	}
	if key.AccountID != "acct_1" || !key.Primary || key.Name != "primary" || !strings.HasPrefix(key.ID, auth.KeyIDPrefix) ||
		!key.CreatedAt.Equal(keysT0) || key.Revoked() {
		t.Errorf("primary key = %+v", key)
	}
	if !isLowerUUID(value) {
		t.Fatalf("key value %q is not a lowercase UUID", value)
	}
	if key.Hash != auth.HashKey(value) {
		t.Error("the key's hash is not HashKey(value)")
	}
	stored, err := h.stores.Keys.Key(ctx, key.ID)
	if err != nil || stored.Hash != auth.HashKey(value) {
		t.Fatalf("stored key = %+v, %v", stored, err)
	}
	p, err := authenticate(h, value)
	if err != nil || p.Account.ID != "acct_1" || p.Key.ID != key.ID || !p.Key.Primary {
		t.Errorf("the new primary key authenticates as %+v, %v", p, err)
	}
}

func TestCreateAccountKeyValue(t *testing.T) {
	h, _ := newKeysHarness(t)
	ctx := context.Background()

	_, key, value, err := h.mgr.CreateAccount(ctx, accounts.Spec{ID: "fixture", Plan: "p", KeyValue: upperKey})
	if err != nil {
		t.Fatal(err)
	}
	if value != lowerKey {
		t.Errorf("returned value = %q; want the fixture in lowercase %q", value, lowerKey)
	}
	if p, err := authenticate(h, lowerKey); err != nil || p.Key.ID != key.ID {
		t.Errorf("fixture key: %+v, %v", p, err)
	}

	for _, bad := range []string{"undefined", lowerKey[:35], "{" + otherKey + "}", "YOUR_API_KEY"} {
		_, _, _, err := h.mgr.CreateAccount(ctx, accounts.Spec{ID: "bad_fixture", Plan: "p", KeyValue: bad})
		wantRefused(t, "CreateAccount(KeyValue "+bad+")", err, tollgate.CodeInvalidInput, "UUID")
	}
	if _, err := h.stores.Keys.Account(ctx, "bad_fixture"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an account with an invalid key value was stored: %v", err)
	}

	// A key value already in use is a conflict, and the second account is not created.
	_, _, _, err = h.mgr.CreateAccount(ctx, accounts.Spec{ID: "other", Plan: "p", KeyValue: lowerKey})
	wantRefused(t, "reusing a key value", err, tollgate.CodeConflict)
	if _, err := h.stores.Keys.Account(ctx, "other"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the conflicting account was stored: %v", err)
	}
}

func TestCreateAccountValidation(t *testing.T) {
	tests := []struct {
		name string
		spec accounts.Spec
		want tollgate.Code
	}{
		{"simple id", accounts.Spec{ID: "acct_1", Plan: "p"}, success},
		{"letters digits _ -", accounts.Spec{ID: "Ab-9_z", Plan: "p"}, success},
		{"one character", accounts.Spec{ID: "x", Plan: "p"}, success},
		{"64 characters", accounts.Spec{ID: strings.Repeat("a", 64), Plan: "p"}, success},
		{"65 characters", accounts.Spec{ID: strings.Repeat("a", 65), Plan: "p"}, tollgate.CodeInvalidInput},
		{"space", accounts.Spec{ID: "acct 1", Plan: "p"}, tollgate.CodeInvalidInput},
		{"dot", accounts.Spec{ID: "acct.1", Plan: "p"}, tollgate.CodeInvalidInput},
		{"slash", accounts.Spec{ID: "acct/1", Plan: "p"}, tollgate.CodeInvalidInput},
		{"non-ASCII", accounts.Spec{ID: "cuentañ", Plan: "p"}, tollgate.CodeInvalidInput},
		{"newline", accounts.Spec{ID: "acct\n", Plan: "p"}, tollgate.CodeInvalidInput},
		{"no plan", accounts.Spec{ID: "acct_2"}, tollgate.CodeInvalidInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _ := newKeysHarness(t)
			ctx := context.Background()
			acct, _, _, err := h.mgr.CreateAccount(ctx, tt.spec)
			wantCode(t, "CreateAccount", err, tt.want)
			_, lookup := h.stores.Keys.Account(ctx, tt.spec.ID)
			if err == nil && (acct.ID != tt.spec.ID || lookup != nil) {
				t.Errorf("created %+v, lookup %v", acct, lookup)
			}
			if err != nil && !errors.Is(lookup, store.ErrNotFound) {
				t.Errorf("a refused account was stored (lookup: %v)", lookup)
			}
		})
	}

	t.Run("generated id", func(t *testing.T) {
		h, _ := newKeysHarness(t)
		ctx := context.Background()
		var ids []string
		for range 2 {
			acct, _, _, err := h.mgr.CreateAccount(ctx, accounts.Spec{Plan: "p"})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(acct.ID, "acct_") || len(acct.ID) != len("acct_")+16 {
				t.Errorf("generated id %q", acct.ID)
			}
			if _, err := h.stores.Keys.Account(ctx, acct.ID); err != nil {
				t.Errorf("generated account not stored: %v", err)
			}
			ids = append(ids, acct.ID)
		}
		if ids[0] == ids[1] {
			t.Errorf("two generated ids are the same: %q", ids[0])
		}
	})

	t.Run("duplicate id", func(t *testing.T) {
		h, clock := newKeysHarness(t)
		ctx := context.Background()
		first, _, firstValue, err := h.mgr.CreateAccount(ctx, accounts.Spec{ID: "dup", Plan: "p"})
		if err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Hour)
		weather := mustRestrictions(t, auth.RestrictionSpec{APIs: []string{"weather"}})
		_, _, _, err = h.mgr.CreateAccount(ctx, accounts.Spec{ID: "dup", Plan: "p", Restrictions: weather})
		wantRefused(t, "duplicate account id", err, tollgate.CodeConflict, "dup")
		acct, _ := h.stores.Keys.Account(ctx, "dup")
		if !acct.CreatedAt.Equal(first.CreatedAt) || !acct.Restrictions.IsZero() {
			t.Errorf("the duplicate replaced the account: %+v", acct)
		}
		if _, err := authenticate(h, firstValue); err != nil {
			t.Errorf("the first account's key stopped working: %v", err)
		}
	})
}

func TestCreateKey(t *testing.T) {
	h, _ := newKeysHarness(t)
	ctx := context.Background()
	acctR := mustRestrictions(t, auth.RestrictionSpec{APIs: []string{"geo", "weather"}, Channels: []string{"rest", "mcp"}})
	acct, primary, primaryValue, err := h.mgr.CreateAccount(ctx, accounts.Spec{ID: "acct_1", Plan: "p", Restrictions: acctR})
	if err != nil {
		t.Fatal(err)
	}

	subR := mustRestrictions(t, auth.RestrictionSpec{
		APIs: []string{"weather"}, Channels: []string{"rest"}, AllowedIPs: []string{"10.0.0.0/8"}, ExpiresAt: at(keysT0.Add(24 * time.Hour)),
	})
	sub, value, err := h.mgr.CreateKey(ctx, acct.ID, accounts.NewKey{Name: "  ci  ", Restrictions: subR})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(sub.ID, auth.KeyIDPrefix) || sub.ID == primary.ID || sub.AccountID != acct.ID || sub.Name != "ci" ||
		sub.Primary || sub.Hash != auth.HashKey(value) || !sub.CreatedAt.Equal(keysT0) {
		t.Errorf("sub-key = %+v", sub)
	}
	if !isLowerUUID(value) || value == primaryValue {
		t.Errorf("sub-key value %q", value)
	}
	p, err := authenticate(h, value)
	if err != nil {
		t.Fatal(err)
	}
	if p.Key.ID != sub.ID || p.Account.ID != acct.ID || p.Session() {
		t.Fatalf("principal = %+v", p)
	}
	got := p.Key.Restrictions.Spec()
	if strings.Join(got.APIs, ",") != "weather" || strings.Join(got.Channels, ",") != "rest" ||
		strings.Join(got.AllowedIPs, ",") != "10.0.0.0/8" || got.ExpiresAt == nil || !got.ExpiresAt.Equal(keysT0.Add(24*time.Hour)) {
		t.Errorf("sub-key restrictions = %+v", got)
	}

	// A fixture value.
	fixed, fixedValue, err := h.mgr.CreateKey(ctx, acct.ID, accounts.NewKey{Name: "fixture", Restrictions: subR, Value: upperKey})
	if err != nil || fixedValue != lowerKey {
		t.Fatalf("CreateKey with a fixture value = %q, %v", fixedValue, err)
	}
	if p, err := authenticate(h, lowerKey); err != nil || p.Key.ID != fixed.ID {
		t.Errorf("fixture sub-key: %+v, %v", p, err)
	}

	keys, err := h.stores.Keys.Keys(ctx, auth.KeyQuery{Account: acct.ID})
	if err != nil || len(keys.Keys) != 3 {
		t.Fatalf("Keys = %d keys, %v; want 3", len(keys.Keys), err)
	}

	// Refusals: none of them stores a key.
	tests := []struct {
		name    string
		account string
		spec    accounts.NewKey
		want    tollgate.Code
		mention string
	}{
		{"widening APIs", acct.ID, accounts.NewKey{Name: "wide", Restrictions: mustRestrictions(t, auth.RestrictionSpec{APIs: []string{"stocks"}})}, tollgate.CodeInvalidInput, "stocks"},
		{"widening channels", acct.ID, accounts.NewKey{Name: "wide", Restrictions: mustRestrictions(t, auth.RestrictionSpec{APIs: []string{"geo"}, Channels: []string{"graphql"}})}, tollgate.CodeInvalidInput, "channels"},
		{"unrestricted sub-key of a restricted account", acct.ID, accounts.NewKey{Name: "wide"}, tollgate.CodeInvalidInput, "APIs"},
		{"no name", acct.ID, accounts.NewKey{Restrictions: subR}, tollgate.CodeInvalidInput, "name"},
		{"blank name", acct.ID, accounts.NewKey{Name: "   ", Restrictions: subR}, tollgate.CodeInvalidInput, "name"},
		{"name too long", acct.ID, accounts.NewKey{Name: strings.Repeat("n", 65), Restrictions: subR}, tollgate.CodeInvalidInput, "name"},
		{"already expired", acct.ID, accounts.NewKey{Name: "old", Restrictions: mustRestrictions(t, auth.RestrictionSpec{APIs: []string{"geo"}, Channels: []string{"rest"}, ExpiresAt: at(keysT0)})}, tollgate.CodeInvalidInput, "expires_at"},
		{"invalid value", acct.ID, accounts.NewKey{Name: "bad", Restrictions: subR, Value: "undefined"}, tollgate.CodeInvalidInput, "UUID"},
		{"value in use", acct.ID, accounts.NewKey{Name: "dup", Restrictions: subR, Value: primaryValue}, tollgate.CodeConflict, ""},
		{"unknown account", "nobody", accounts.NewKey{Name: "x"}, tollgate.CodeNotFound, "nobody"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, value, err := h.mgr.CreateKey(ctx, tt.account, tt.spec)
			wantRefused(t, "CreateKey", err, tt.want, tt.mention)
			if key != (auth.Key{}) || value != "" {
				t.Errorf("a refused CreateKey returned %+v, %q", key, value)
			}
			keys, _ := h.stores.Keys.Keys(ctx, auth.KeyQuery{Account: acct.ID})
			if len(keys.Keys) != 3 {
				t.Errorf("a refused sub-key was stored: %d keys", len(keys.Keys))
			}
		})
	}

	// A name is counted in characters: 64 of them are a name, whatever their bytes.
	if k, _, err := h.mgr.CreateKey(ctx, acct.ID, accounts.NewKey{Name: strings.Repeat("é", 64), Restrictions: subR}); err != nil || k.Name != strings.Repeat("é", 64) {
		t.Errorf("CreateKey with a name of 64 characters = %+v, %v", k, err)
	}
}

func TestRotateKey(t *testing.T) {
	h, clock := newKeysHarness(t)
	ctx := context.Background()
	r := mustRestrictions(t, auth.RestrictionSpec{APIs: []string{"weather"}})
	acct, _, primaryValue, err := h.mgr.CreateAccount(ctx, accounts.Spec{ID: "acct_1", Plan: "p"})
	if err != nil {
		t.Fatal(err)
	}
	key, oldValue, err := h.mgr.CreateKey(ctx, acct.ID, accounts.NewKey{Name: "ci", Restrictions: r})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := authenticate(h, oldValue); err != nil {
		t.Fatal(err)
	}

	t1 := keysT0.Add(time.Hour)
	clock.Set(t1)
	rotated, newValue, err := h.mgr.RotateKey(ctx, key.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rotated.ID != key.ID || rotated.Name != "ci" || !rotated.RotatedAt.Equal(t1) || !rotated.CreatedAt.Equal(keysT0) ||
		rotated.Hash != auth.HashKey(newValue) || !rotated.Restrictions.AllowsAPI("weather") || rotated.Restrictions.AllowsAPI("geo") {
		t.Errorf("rotated key = %+v", rotated)
	}
	if !isLowerUUID(newValue) || newValue == oldValue {
		t.Fatalf("new value %q (old %q)", newValue, oldValue)
	}

	// The very next call with the old value fails; no grace period.
	_, err = authenticate(h, oldValue)
	wantRefused(t, "old value after rotation", err, tollgate.CodeUnauthorized)
	p, err := authenticate(h, newValue)
	if err != nil || p.Key.ID != key.ID || !p.Key.RotatedAt.Equal(t1) {
		t.Fatalf("new value after rotation: %+v, %v", p, err)
	}
	// Other keys of the account are untouched.
	if _, err := authenticate(h, primaryValue); err != nil {
		t.Errorf("primary key after rotating a sub-key: %v", err)
	}
	// Rotating again retires the second value too.
	clock.Advance(time.Minute)
	_, third, err := h.mgr.RotateKey(ctx, key.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{oldValue, newValue} {
		_, err := authenticate(h, v)
		wantRefused(t, "retired value "+v, err, tollgate.CodeUnauthorized)
	}
	if _, err := authenticate(h, third); err != nil {
		t.Errorf("third value: %v", err)
	}
	if stored, _ := h.stores.Keys.Key(ctx, key.ID); stored.Hash != auth.HashKey(third) {
		t.Error("the store does not hold the latest hash")
	}

	_, value, err := h.mgr.RotateKey(ctx, "key_missing")
	wantRefused(t, "rotating an unknown key", err, tollgate.CodeNotFound, "key_missing")
	if value != "" {
		t.Errorf("rotating an unknown key returned a value %q", value)
	}

	// A revoked key is not rotated, and the refusal says why.
	if _, err := h.mgr.RevokeKey(ctx, key.ID); err != nil {
		t.Fatal(err)
	}
	_, value, err = h.mgr.RotateKey(ctx, key.ID)
	wantRefused(t, "rotating a revoked key", err, tollgate.CodeConflict, "is revoked; a revoked key cannot be rotated")
	if value != "" {
		t.Errorf("rotating a revoked key returned a value %q", value)
	}
}

func TestRevokeKey(t *testing.T) {
	h, clock := newKeysHarness(t)
	ctx := context.Background()
	acct, primary, primaryValue, err := h.mgr.CreateAccount(ctx, accounts.Spec{ID: "acct_1", Plan: "p"})
	if err != nil {
		t.Fatal(err)
	}
	sub, subValue, err := h.mgr.CreateKey(ctx, acct.ID, accounts.NewKey{Name: "ci"})
	if err != nil {
		t.Fatal(err)
	}

	t1 := keysT0.Add(time.Hour)
	clock.Set(t1)
	revoked, err := h.mgr.RevokeKey(ctx, sub.ID)
	if err != nil || !revoked.Revoked() || !revoked.RevokedAt.Equal(t1) || revoked.ID != sub.ID {
		t.Fatalf("RevokeKey = %+v, %v", revoked, err)
	}
	// A revoked key is forbidden (403), not unknown.
	_, err = authenticate(h, subValue)
	wantRefused(t, "a revoked key", err, tollgate.CodeForbidden, "revoked")

	// Revoking again changes nothing; rotating a revoked key is a conflict.
	clock.Advance(time.Hour)
	again, err := h.mgr.RevokeKey(ctx, sub.ID)
	if err != nil || !again.RevokedAt.Equal(t1) {
		t.Errorf("revoking again = %+v, %v; want the first revocation kept", again, err)
	}
	_, value, err := h.mgr.RotateKey(ctx, sub.ID)
	wantRefused(t, "rotating a revoked key", err, tollgate.CodeConflict)
	if value != "" {
		t.Errorf("rotating a revoked key returned a value %q", value)
	}
	_, err = authenticate(h, subValue)
	wantRefused(t, "a revoked key after a refused rotation", err, tollgate.CodeForbidden, "revoked")

	// The account's other keys still work.
	if p, err := authenticate(h, primaryValue); err != nil || p.Key.ID != primary.ID {
		t.Errorf("primary after revoking a sub-key: %+v, %v", p, err)
	}
	// The primary key itself can be revoked by the operator.
	if _, err := h.mgr.RevokeKey(ctx, primary.ID); err != nil {
		t.Fatal(err)
	}
	_, err = authenticate(h, primaryValue)
	wantRefused(t, "a revoked primary key", err, tollgate.CodeForbidden, "revoked")

	_, err = h.mgr.RevokeKey(ctx, "key_missing")
	wantRefused(t, "revoking an unknown key", err, tollgate.CodeNotFound, "key_missing")
}

// TestUpdateKey checks the operator's change of a key's name and restrictions: the name
// is trimmed and bounded, the restrictions stay within the account's and may not have
// expired already; a refused change leaves the key as it was.
func TestUpdateKey(t *testing.T) {
	h, _ := newKeysHarness(t)
	ctx := context.Background()
	acctR := mustRestrictions(t, auth.RestrictionSpec{APIs: []string{"geo", "weather"}})
	acct, _, _, err := h.mgr.CreateAccount(ctx, accounts.Spec{ID: "acct_1", Plan: "p", Restrictions: acctR})
	if err != nil {
		t.Fatal(err)
	}
	key, value, err := h.mgr.CreateKey(ctx, acct.ID, accounts.NewKey{Name: "ci", Restrictions: acctR})
	if err != nil {
		t.Fatal(err)
	}

	name := "  deploy  "
	weather := mustRestrictions(t, auth.RestrictionSpec{APIs: []string{"weather"}})
	updated, err := h.mgr.UpdateKey(ctx, key.ID, accounts.KeyChange{Name: &name, Restrictions: &weather})
	if err != nil {
		t.Fatal(err)
	}
	if updated.ID != key.ID || updated.Name != "deploy" || updated.Hash != key.Hash || updated.Revision <= key.Revision ||
		!updated.Restrictions.AllowsAPI("weather") || updated.Restrictions.AllowsAPI("geo") {
		t.Errorf("updated key = %+v", updated)
	}
	// The value is kept, and the very next call is held to the new restrictions.
	p, err := authenticate(h, value)
	if err != nil || p.Key.Name != "deploy" || p.Key.Restrictions.AllowsAPI("geo") {
		t.Errorf("the updated key authenticates as %+v, %v", p, err)
	}
	// A nil field is left as it is.
	renamed := "deploy-2"
	if k, err := h.mgr.UpdateKey(ctx, key.ID, accounts.KeyChange{Name: &renamed}); err != nil || k.Name != renamed || k.Restrictions.AllowsAPI("geo") {
		t.Errorf("renaming only = %+v, %v; want the restrictions kept", k, err)
	}

	before, err := h.stores.Keys.Key(ctx, key.ID)
	if err != nil {
		t.Fatal(err)
	}
	blank, long := "   ", strings.Repeat("n", 65)
	stocks := mustRestrictions(t, auth.RestrictionSpec{APIs: []string{"stocks"}})
	expired := mustRestrictions(t, auth.RestrictionSpec{APIs: []string{"geo"}, ExpiresAt: at(keysT0)})
	for _, tt := range []struct {
		name    string
		id      string
		change  accounts.KeyChange
		want    tollgate.Code
		mention string
	}{
		{"blank name", key.ID, accounts.KeyChange{Name: &blank}, tollgate.CodeInvalidInput, "name"},
		{"name too long", key.ID, accounts.KeyChange{Name: &long}, tollgate.CodeInvalidInput, "name"},
		{"widening APIs", key.ID, accounts.KeyChange{Restrictions: &stocks}, tollgate.CodeInvalidInput, "stocks"},
		{"lifting every restriction", key.ID, accounts.KeyChange{Restrictions: &auth.Restrictions{}}, tollgate.CodeInvalidInput, "APIs"},
		{"already expired", key.ID, accounts.KeyChange{Restrictions: &expired}, tollgate.CodeInvalidInput, "expires_at"},
		{"unknown key", "key_missing", accounts.KeyChange{Name: &renamed}, tollgate.CodeNotFound, "key_missing"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			k, err := h.mgr.UpdateKey(ctx, tt.id, tt.change)
			wantRefused(t, "UpdateKey", err, tt.want, tt.mention)
			if k != (auth.Key{}) {
				t.Errorf("a refused UpdateKey returned %+v", k)
			}
			if after, _ := h.stores.Keys.Key(ctx, key.ID); after.Revision != before.Revision || after.Name != before.Name {
				t.Errorf("a refused update changed the key: %+v", after)
			}
		})
	}

	// A revoked key cannot be changed.
	if _, err := h.mgr.RevokeKey(ctx, key.ID); err != nil {
		t.Fatal(err)
	}
	_, err = h.mgr.UpdateKey(ctx, key.ID, accounts.KeyChange{Name: &name})
	wantRefused(t, "updating a revoked key", err, tollgate.CodeConflict, "revoked")
}

// at returns a pointer to t, for RestrictionSpec.ExpiresAt.
func at(t time.Time) *time.Time { return &t }
