package auth_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/store/memory"
)

func newAuthority(t *testing.T, sessions *auth.Sessions) (*auth.Authority, *memory.KeyStore) {
	t.Helper()
	ks := memory.NewKeyStore()
	a, err := auth.NewAuthority(ks, &auth.AuthorityOptions{Sessions: sessions})
	if err != nil {
		t.Fatal(err)
	}
	return a, ks
}

// createAccount creates an account on plan "free" and returns it with its primary key
// and the key's value.
func createAccount(t *testing.T, a *auth.Authority, spec auth.NewAccount) (auth.Account, auth.Key, string) {
	t.Helper()
	if spec.Plan == "" {
		spec.Plan = "free"
	}
	acct, key, value, err := a.CreateAccount(t.Context(), spec, t0)
	if err != nil {
		t.Fatalf("CreateAccount(%+v): %v", spec, err)
	}
	return acct, key, value
}

func apiKey(v string) auth.Credential { return auth.Credential{Kind: auth.APIKeyHeader, Value: v} }

// wantDenied checks that err is a *DeniedError for reason that also matches ErrForbidden
// and whose message contains each of parts.
func wantDenied(t *testing.T, err, reason error, parts ...string) {
	t.Helper()
	var de *auth.DeniedError
	if !errors.As(err, &de) {
		t.Fatalf("error = %v (%T); want *auth.DeniedError", err, err)
	}
	if !errors.Is(err, reason) || !errors.Is(err, auth.ErrForbidden) || de.Reason != reason {
		t.Fatalf("error %v (reason %v) does not match %v and ErrForbidden", err, de.Reason, reason)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not mention %q", err, p)
		}
	}
}

func TestNewAuthority(t *testing.T) {
	if _, err := auth.NewAuthority(nil, nil); err == nil {
		t.Error("NewAuthority(nil, nil) succeeded")
	}
	ks := memory.NewKeyStore()
	a, err := auth.NewAuthority(ks, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Store() != auth.KeyStore(ks) {
		t.Error("Store() is not the store given")
	}
}

func TestAuthorityCreateAccountAuthenticates(t *testing.T) {
	a, ks := newAuthority(t, nil)
	ctx := t.Context()
	acct, key, value, err := a.CreateAccount(ctx, auth.NewAccount{ID: "acct_1", Plan: "pro"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if acct.ID != "acct_1" || acct.Plan != "pro" || !acct.CreatedAt.Equal(t0) {
		t.Errorf("account = %+v", acct)
	}
	if key.AccountID != "acct_1" || !key.Primary || key.Name != "primary" || key.ID == "" || !key.CreatedAt.Equal(t0) || key.Revoked() {
		t.Errorf("primary key = %+v", key)
	}
	if v, ok := auth.ParseKey(value); !ok || v != value {
		t.Fatalf("key value %q is not a lowercase UUID", value)
	}
	if key.Hash != auth.HashKey(value) {
		t.Error("the key's hash is not HashKey(value)")
	}
	stored, err := ks.Key(ctx, key.ID)
	if err != nil || stored.Hash != auth.HashKey(value) {
		t.Fatalf("stored key = %+v, %v", stored, err)
	}

	for _, cred := range []auth.Credential{
		apiKey(value),
		{Kind: auth.BearerHeader, Value: value},
		apiKey(strings.ToUpper(value)), // the hash is of the canonical form
	} {
		p, err := a.Authenticate(ctx, cred, t0.Add(time.Hour))
		if err != nil {
			t.Fatalf("Authenticate(%+v): %v", cred, err)
		}
		if p.Account.ID != "acct_1" || p.Account.Plan != "pro" || p.Key.ID != key.ID || !p.Key.Primary || p.Session() {
			t.Errorf("Authenticate(%+v) = %+v", cred, p)
		}
		if err := p.CheckAccess(auth.ChannelREST, addr("198.51.100.1")); err != nil {
			t.Errorf("unrestricted CheckAccess: %v", err)
		}
		if err := p.CheckAPI("anything"); err != nil {
			t.Errorf("unrestricted CheckAPI: %v", err)
		}
	}
}

func TestAuthorityUnknownKey(t *testing.T) {
	a, _ := newAuthority(t, nil)
	_, _, value := createAccount(t, a, auth.NewAccount{ID: "acct_1"})
	for _, v := range []string{lowerKey, otherKey, "00000000-0000-0000-0000-000000000000"} {
		if v == value {
			continue
		}
		p, err := a.Authenticate(t.Context(), apiKey(v), t0)
		if !errors.Is(err, auth.ErrUnknownKey) || err.Error() != "unauthorized" {
			t.Errorf("Authenticate(%q) = %+v, %v; want ErrUnknownKey", v, p, err)
		}
		if p != (auth.Principal{}) {
			t.Errorf("failed Authenticate returned %+v", p)
		}
	}
}

func TestAuthorityStoreFailure(t *testing.T) {
	a, _ := newAuthority(t, nil)
	_, _, value := createAccount(t, a, auth.NewAccount{ID: "acct_1"})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := a.Authenticate(ctx, apiKey(value), t0)
	if !errors.Is(err, context.Canceled) || errors.Is(err, auth.ErrUnknownKey) {
		t.Fatalf("Authenticate with a failing store = %v; want the store's error as it is", err)
	}
}

func TestAuthorityCreateAccountKeyValue(t *testing.T) {
	a, ks := newAuthority(t, nil)
	ctx := t.Context()

	_, key, value, err := a.CreateAccount(ctx, auth.NewAccount{ID: "fixture", Plan: "free", KeyValue: upperKey}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if value != lowerKey {
		t.Errorf("returned value = %q; want the fixture in lowercase %q", value, lowerKey)
	}
	if p, err := a.Authenticate(ctx, apiKey(lowerKey), t0); err != nil || p.Key.ID != key.ID {
		t.Errorf("fixture key: %+v, %v", p, err)
	}

	for _, bad := range []string{"undefined", lowerKey[:35], "{" + otherKey + "}", "YOUR_API_KEY"} {
		_, _, _, err := a.CreateAccount(ctx, auth.NewAccount{ID: "bad_fixture", Plan: "free", KeyValue: bad}, t0)
		if !errors.Is(err, auth.ErrInvalid) {
			t.Errorf("CreateAccount(KeyValue %q) = %v; want ErrInvalid", bad, err)
		}
	}
	if _, err := ks.Account(ctx, "bad_fixture"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an account with an invalid key value was stored: %v", err)
	}

	// A key value already in use is a conflict, and the second account is not created.
	_, _, _, err = a.CreateAccount(ctx, auth.NewAccount{ID: "other", Plan: "free", KeyValue: lowerKey}, t0)
	if !errors.Is(err, store.ErrConflict) {
		t.Errorf("reusing a key value: %v; want store.ErrConflict", err)
	}
	if _, err := ks.Account(ctx, "other"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the conflicting account was stored: %v", err)
	}
}

func TestAuthorityCreateAccountValidation(t *testing.T) {
	tests := []struct {
		name    string
		spec    auth.NewAccount
		wantErr error
	}{
		{"simple id", auth.NewAccount{ID: "acct_1", Plan: "free"}, nil},
		{"letters digits _ -", auth.NewAccount{ID: "Ab-9_z", Plan: "free"}, nil},
		{"one character", auth.NewAccount{ID: "x", Plan: "free"}, nil},
		{"64 characters", auth.NewAccount{ID: strings.Repeat("a", 64), Plan: "free"}, nil},
		{"65 characters", auth.NewAccount{ID: strings.Repeat("a", 65), Plan: "free"}, auth.ErrInvalid},
		{"space", auth.NewAccount{ID: "acct 1", Plan: "free"}, auth.ErrInvalid},
		{"dot", auth.NewAccount{ID: "acct.1", Plan: "free"}, auth.ErrInvalid},
		{"slash", auth.NewAccount{ID: "acct/1", Plan: "free"}, auth.ErrInvalid},
		{"non-ASCII", auth.NewAccount{ID: "cuentañ", Plan: "free"}, auth.ErrInvalid},
		{"newline", auth.NewAccount{ID: "acct\n", Plan: "free"}, auth.ErrInvalid},
		{"no plan", auth.NewAccount{ID: "acct_2"}, auth.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, ks := newAuthority(t, nil)
			acct, _, _, err := a.CreateAccount(t.Context(), tt.spec, t0)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("CreateAccount(%+v) = %v; want %v", tt.spec, err, tt.wantErr)
			}
			_, lookup := ks.Account(t.Context(), tt.spec.ID)
			if err == nil && (acct.ID != tt.spec.ID || lookup != nil) {
				t.Errorf("created %+v, lookup %v", acct, lookup)
			}
			if err != nil && !errors.Is(lookup, store.ErrNotFound) {
				t.Errorf("a refused account was stored (lookup: %v)", lookup)
			}
		})
	}

	t.Run("generated id", func(t *testing.T) {
		a, ks := newAuthority(t, nil)
		acct1, _, _ := createAccount(t, a, auth.NewAccount{})
		acct2, _, _ := createAccount(t, a, auth.NewAccount{})
		for _, acct := range []auth.Account{acct1, acct2} {
			if !strings.HasPrefix(acct.ID, "acct_") || len(acct.ID) != len("acct_")+16 {
				t.Errorf("generated id %q", acct.ID)
			}
			if _, err := ks.Account(t.Context(), acct.ID); err != nil {
				t.Errorf("generated account not stored: %v", err)
			}
		}
		if acct1.ID == acct2.ID {
			t.Errorf("two generated ids are the same: %q", acct1.ID)
		}
	})

	t.Run("duplicate id", func(t *testing.T) {
		a, ks := newAuthority(t, nil)
		_, _, first := createAccount(t, a, auth.NewAccount{ID: "dup"})
		_, _, _, err := a.CreateAccount(t.Context(), auth.NewAccount{ID: "dup", Plan: "pro"}, t0.Add(time.Hour))
		if !errors.Is(err, store.ErrConflict) {
			t.Fatalf("duplicate account id: %v; want an error wrapping store.ErrConflict", err)
		}
		acct, _ := ks.Account(t.Context(), "dup")
		if acct.Plan != "free" {
			t.Errorf("the duplicate replaced the account: %+v", acct)
		}
		if _, err := a.Authenticate(t.Context(), apiKey(first), t0); err != nil {
			t.Errorf("the first account's key stopped working: %v", err)
		}
	})
}

func TestAuthorityCreateKey(t *testing.T) {
	a, ks := newAuthority(t, nil)
	ctx := t.Context()
	acctR := mustRestrictions(t, auth.RestrictionSpec{APIs: []string{"geo", "weather"}, Channels: []string{"rest", "mcp"}})
	acct, primary, primaryValue := createAccount(t, a, auth.NewAccount{ID: "acct_1", Restrictions: acctR})

	subR := mustRestrictions(t, auth.RestrictionSpec{
		APIs: []string{"weather"}, Channels: []string{"rest"}, AllowedIPs: []string{"10.0.0.0/8"}, ExpiresAt: at(t0.Add(24 * time.Hour)),
	})
	sub, value, err := a.CreateKey(ctx, acct.ID, auth.NewKey{Name: "  ci  ", Restrictions: subR}, auth.KeyLimit{}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if sub.ID == "" || sub.ID == primary.ID || sub.AccountID != acct.ID || sub.Name != "ci" || sub.Primary || sub.Hash != auth.HashKey(value) {
		t.Errorf("sub-key = %+v", sub)
	}
	if v, ok := auth.ParseKey(value); !ok || v != value || value == primaryValue {
		t.Errorf("sub-key value %q", value)
	}
	p, err := a.Authenticate(ctx, apiKey(value), t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if p.Key.ID != sub.ID || p.Account.ID != acct.ID || p.Session() {
		t.Fatalf("principal = %+v", p)
	}
	got := p.Key.Restrictions.Spec()
	if strings.Join(got.APIs, ",") != "weather" || strings.Join(got.Channels, ",") != "rest" ||
		strings.Join(got.AllowedIPs, ",") != "10.0.0.0/8" || got.ExpiresAt == nil || !got.ExpiresAt.Equal(t0.Add(24*time.Hour)) {
		t.Errorf("sub-key restrictions = %+v", got)
	}
	// The sub-key's restrictions are enforced...
	if err := p.CheckAPI("weather"); err != nil {
		t.Errorf("CheckAPI(weather): %v", err)
	}
	wantDenied(t, p.CheckAPI("geo"), auth.ErrAPINotAllowed, "geo")
	wantDenied(t, p.CheckAccess(auth.ChannelMCP, addr("10.1.1.1")), auth.ErrChannelNotAllowed, "mcp")
	wantDenied(t, p.CheckAccess(auth.ChannelREST, addr("192.0.2.1")), auth.ErrIPNotAllowed, "192.0.2.1")
	if err := p.CheckAccess(auth.ChannelREST, addr("10.1.1.1")); err != nil {
		t.Errorf("CheckAccess(rest, 10.1.1.1): %v", err)
	}
	// ... and the primary key keeps the account's.
	pp, err := a.Authenticate(ctx, apiKey(primaryValue), t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := pp.CheckAPI("geo"); err != nil {
		t.Errorf("primary CheckAPI(geo): %v", err)
	}
	wantDenied(t, pp.CheckAPI("stocks"), auth.ErrAPINotAllowed, "stocks")

	// A fixture value.
	fixed, fixedValue, err := a.CreateKey(ctx, acct.ID, auth.NewKey{Name: "fixture", Restrictions: subR, Value: upperKey}, auth.KeyLimit{}, t0)
	if err != nil || fixedValue != lowerKey {
		t.Fatalf("CreateKey with a fixture value = %q, %v", fixedValue, err)
	}
	if p, err := a.Authenticate(ctx, apiKey(lowerKey), t0); err != nil || p.Key.ID != fixed.ID {
		t.Errorf("fixture sub-key: %+v, %v", p, err)
	}

	keys, err := ks.Keys(ctx, auth.KeyQuery{Account: acct.ID})
	if err != nil || len(keys.Keys) != 3 {
		t.Fatalf("Keys = %d keys, %v; want 3", len(keys.Keys), err)
	}

	// Refusals: none of them stores a key.
	tests := []struct {
		name    string
		account string
		spec    auth.NewKey
		wantErr error
		mention string
	}{
		{"widening APIs", acct.ID, auth.NewKey{Name: "wide", Restrictions: mustRestrictions(t, auth.RestrictionSpec{APIs: []string{"stocks"}})}, auth.ErrWidens, "stocks"},
		{"widening channels", acct.ID, auth.NewKey{Name: "wide", Restrictions: mustRestrictions(t, auth.RestrictionSpec{APIs: []string{"geo"}, Channels: []string{"graphql"}})}, auth.ErrWidens, "channels"},
		{"unrestricted sub-key of a restricted account", acct.ID, auth.NewKey{Name: "wide"}, auth.ErrWidens, "APIs"},
		{"no name", acct.ID, auth.NewKey{Restrictions: subR}, auth.ErrInvalid, "name"},
		{"blank name", acct.ID, auth.NewKey{Name: "   ", Restrictions: subR}, auth.ErrInvalid, "name"},
		{"name too long", acct.ID, auth.NewKey{Name: strings.Repeat("n", 65), Restrictions: subR}, auth.ErrInvalid, "name"},
		{"already expired", acct.ID, auth.NewKey{Name: "old", Restrictions: mustRestrictions(t, auth.RestrictionSpec{APIs: []string{"geo"}, Channels: []string{"rest"}, ExpiresAt: at(t0)})}, auth.ErrInvalid, "expires_at"},
		{"invalid value", acct.ID, auth.NewKey{Name: "bad", Restrictions: subR, Value: "undefined"}, auth.ErrInvalid, "UUID"},
		{"value in use", acct.ID, auth.NewKey{Name: "dup", Restrictions: subR, Value: primaryValue}, store.ErrConflict, ""},
		{"unknown account", "nobody", auth.NewKey{Name: "x"}, store.ErrNotFound, "nobody"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, value, err := a.CreateKey(ctx, tt.account, tt.spec, auth.KeyLimit{}, t0)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("CreateKey = %v; want %v", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("error %q does not mention %q", err, tt.mention)
			}
			if key != (auth.Key{}) || value != "" {
				t.Errorf("a refused CreateKey returned %+v, %q", key, value)
			}
			keys, _ := ks.Keys(ctx, auth.KeyQuery{Account: acct.ID})
			if len(keys.Keys) != 3 {
				t.Errorf("a refused sub-key was stored: %d keys", len(keys.Keys))
			}
		})
	}
}

func TestAuthorityRotateKey(t *testing.T) {
	a, ks := newAuthority(t, nil)
	ctx := t.Context()
	r := mustRestrictions(t, auth.RestrictionSpec{APIs: []string{"weather"}})
	acct, _, primaryValue := createAccount(t, a, auth.NewAccount{ID: "acct_1"})
	key, oldValue, err := a.CreateKey(ctx, acct.ID, auth.NewKey{Name: "ci", Restrictions: r}, auth.KeyLimit{}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate(ctx, apiKey(oldValue), t0); err != nil {
		t.Fatal(err)
	}

	t1 := t0.Add(time.Hour)
	rotated, newValue, err := a.RotateKey(ctx, key.ID, auth.AnyRevision, t1)
	if err != nil {
		t.Fatal(err)
	}
	if rotated.ID != key.ID || rotated.Name != "ci" || !rotated.RotatedAt.Equal(t1) || !rotated.CreatedAt.Equal(t0) ||
		rotated.Hash != auth.HashKey(newValue) || !rotated.Restrictions.AllowsAPI("weather") || rotated.Restrictions.AllowsAPI("geo") {
		t.Errorf("rotated key = %+v", rotated)
	}
	if v, ok := auth.ParseKey(newValue); !ok || v != newValue || newValue == oldValue {
		t.Fatalf("new value %q (old %q)", newValue, oldValue)
	}

	// The very next call with the old value fails; no grace period.
	if _, err := a.Authenticate(ctx, apiKey(oldValue), t1); !errors.Is(err, auth.ErrUnknownKey) {
		t.Fatalf("old value after rotation: %v; want ErrUnknownKey", err)
	}
	p, err := a.Authenticate(ctx, apiKey(newValue), t1)
	if err != nil || p.Key.ID != key.ID || !p.Key.RotatedAt.Equal(t1) {
		t.Fatalf("new value after rotation: %+v, %v", p, err)
	}
	// Other keys of the account are untouched.
	if _, err := a.Authenticate(ctx, apiKey(primaryValue), t1); err != nil {
		t.Errorf("primary key after rotating a sub-key: %v", err)
	}
	// Rotating again retires the second value too.
	_, third, err := a.RotateKey(ctx, key.ID, auth.AnyRevision, t1.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{oldValue, newValue} {
		if _, err := a.Authenticate(ctx, apiKey(v), t1.Add(time.Minute)); !errors.Is(err, auth.ErrUnknownKey) {
			t.Errorf("retired value %q: %v; want ErrUnknownKey", v, err)
		}
	}
	if _, err := a.Authenticate(ctx, apiKey(third), t1.Add(time.Minute)); err != nil {
		t.Errorf("third value: %v", err)
	}
	if stored, _ := ks.Key(ctx, key.ID); stored.Hash != auth.HashKey(third) {
		t.Error("the store does not hold the latest hash")
	}

	if _, _, err := a.RotateKey(ctx, "key_missing", auth.AnyRevision, t1); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("rotating an unknown key: %v; want store.ErrNotFound", err)
	}
}

func TestAuthorityRevokeKey(t *testing.T) {
	a, _ := newAuthority(t, nil)
	ctx := t.Context()
	acct, primary, primaryValue := createAccount(t, a, auth.NewAccount{ID: "acct_1"})
	sub, subValue, err := a.CreateKey(ctx, acct.ID, auth.NewKey{Name: "ci"}, auth.KeyLimit{}, t0)
	if err != nil {
		t.Fatal(err)
	}

	t1 := t0.Add(time.Hour)
	revoked, err := a.RevokeKey(ctx, sub.ID, auth.AnyRevision, t1)
	if err != nil || !revoked.Revoked() || !revoked.RevokedAt.Equal(t1) || revoked.ID != sub.ID {
		t.Fatalf("RevokeKey = %+v, %v", revoked, err)
	}
	p, err := a.Authenticate(ctx, apiKey(subValue), t1)
	wantDenied(t, err, auth.ErrKeyRevoked, "revoked")
	if errors.Is(err, auth.ErrUnknownKey) {
		t.Error("a revoked key reports ErrUnknownKey; it must be a 403")
	}
	if p != (auth.Principal{}) {
		t.Errorf("a revoked key returned a principal %+v", p)
	}
	// Revoking again changes nothing; rotating a revoked key is a conflict.
	again, err := a.RevokeKey(ctx, sub.ID, auth.AnyRevision, t1.Add(time.Hour))
	if err != nil || !again.RevokedAt.Equal(t1) {
		t.Errorf("revoking again = %+v, %v; want the first revocation kept", again, err)
	}
	if _, _, err := a.RotateKey(ctx, sub.ID, auth.AnyRevision, t1); !errors.Is(err, store.ErrConflict) {
		t.Errorf("rotating a revoked key: %v; want store.ErrConflict", err)
	}
	_, err = a.Authenticate(ctx, apiKey(subValue), t1)
	wantDenied(t, err, auth.ErrKeyRevoked)

	// The account's other keys still work.
	if p, err := a.Authenticate(ctx, apiKey(primaryValue), t1); err != nil || p.Key.ID != primary.ID {
		t.Errorf("primary after revoking a sub-key: %+v, %v", p, err)
	}
	// The primary key itself can be revoked.
	if _, err := a.RevokeKey(ctx, primary.ID, auth.AnyRevision, t1); err != nil {
		t.Fatal(err)
	}
	_, err = a.Authenticate(ctx, apiKey(primaryValue), t1)
	wantDenied(t, err, auth.ErrKeyRevoked)

	if _, err := a.RevokeKey(ctx, "key_missing", auth.AnyRevision, t1); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("revoking an unknown key: %v; want store.ErrNotFound", err)
	}
}

func TestAuthorityExpiry(t *testing.T) {
	a, _ := newAuthority(t, nil)
	ctx := t.Context()
	acct, _, _ := createAccount(t, a, auth.NewAccount{ID: "acct_1"})
	exp := t0.Add(time.Hour)
	_, value, err := a.CreateKey(ctx, acct.ID, auth.NewKey{Name: "temp", Restrictions: mustRestrictions(t, auth.RestrictionSpec{ExpiresAt: at(exp)})}, auth.KeyLimit{}, t0)
	if err != nil {
		t.Fatal(err)
	}

	// An expiring account: all its keys, and its sessions, expire with it.
	acctExp := t0.Add(2 * time.Hour)
	_, _, expiringValue := createAccount(t, a, auth.NewAccount{ID: "acct_2", Restrictions: mustRestrictions(t, auth.RestrictionSpec{ExpiresAt: at(acctExp)})})

	tests := []struct {
		name   string
		value  string
		now    time.Time
		ok     bool
		reason string
	}{
		{"key before expiry", value, exp.Add(-time.Nanosecond), true, ""},
		{"key exactly at expiry", value, exp, false, "2030-01-01T01:00:00Z"},
		{"key after expiry", value, exp.Add(time.Hour), false, "expired"},
		{"account before expiry", expiringValue, acctExp.Add(-time.Second), true, ""},
		{"account at expiry", expiringValue, acctExp, false, "account"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := a.Authenticate(ctx, apiKey(tt.value), tt.now)
			if tt.ok {
				if err != nil {
					t.Fatalf("Authenticate at %v: %v", tt.now, err)
				}
				return
			}
			wantDenied(t, err, auth.ErrKeyExpired, tt.reason)
		})
	}
}

func TestAuthoritySessions(t *testing.T) {
	sessions := newSessions(t, testSecret)
	a, _ := newAuthority(t, sessions)
	ctx := t.Context()
	acctR := mustRestrictions(t, auth.RestrictionSpec{APIs: []string{"weather"}, Channels: []string{"rest"}, AllowedIPs: []string{"10.0.0.0/8"}})
	createAccount(t, a, auth.NewAccount{ID: "acct_1", Plan: "pro", Restrictions: acctR})
	createAccount(t, a, auth.NewAccount{ID: "acct_exp", Restrictions: mustRestrictions(t, auth.RestrictionSpec{ExpiresAt: at(t0.Add(time.Minute))})})

	tok, err := sessions.Issue("acct_1", t0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// The token goes through the edge check like any other credential.
	h := make(map[string][]string)
	h["X-Jwt"] = []string{tok}
	cred, err := auth.CredentialFrom(h)
	if err != nil || cred.Kind != auth.SessionHeader {
		t.Fatalf("CredentialFrom(x-jwt) = %+v, %v", cred, err)
	}
	p, err := a.Authenticate(ctx, cred, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if p.Account.ID != "acct_1" || p.Account.Plan != "pro" || p.Key.ID != "" || !p.Session() {
		t.Fatalf("session principal = %+v", p)
	}
	// A session acts within the account's restrictions.
	if err := p.CheckAPI("weather"); err != nil {
		t.Errorf("session CheckAPI(weather): %v", err)
	}
	wantDenied(t, p.CheckAPI("geo"), auth.ErrAPINotAllowed, "geo")
	wantDenied(t, p.CheckAccess(auth.ChannelGraphQL, addr("10.0.0.1")), auth.ErrChannelNotAllowed, "graphql")
	wantDenied(t, p.CheckAccess(auth.ChannelREST, addr("192.0.2.9")), auth.ErrIPNotAllowed, "192.0.2.9")

	unknownTok, _ := sessions.Issue("acct_gone", t0, time.Hour)
	expTok, _ := sessions.Issue("acct_exp", t0, time.Hour)
	tests := []struct {
		name    string
		token   string
		now     time.Time
		wantErr error
	}{
		{"unknown account", unknownTok, t0, auth.ErrInvalidSession},
		{"expired token", tok, t0.Add(time.Hour), auth.ErrInvalidSession},
		{"tampered token", tok[:len(tok)-2] + "AA", t0, auth.ErrInvalidSession},
		{"token of another secret", func() string {
			s, _ := newSessions(t, []byte("ffffffffffffffffffffffffffffffff")).Issue("acct_1", t0, time.Hour)
			return s
		}(), t0, auth.ErrInvalidSession},
		{"expired account", expTok, t0.Add(time.Minute), auth.ErrKeyExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := a.Authenticate(ctx, auth.Credential{Kind: auth.SessionHeader, Value: tt.token}, tt.now)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Authenticate = %+v, %v; want %v", p, err, tt.wantErr)
			}
			if p != (auth.Principal{}) {
				t.Errorf("a failed session returned %+v", p)
			}
		})
	}

	// A store failure is returned as it is, not as an invalid session.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := a.Authenticate(cancelled, cred, t0); !errors.Is(err, context.Canceled) || errors.Is(err, auth.ErrInvalidSession) {
		t.Errorf("session with a failing store: %v; want the store's error", err)
	}

	// Without Sessions, every session token is refused, even a valid one.
	noSessions, _ := newAuthority(t, nil)
	createAccount(t, noSessions, auth.NewAccount{ID: "acct_1"})
	if _, err := noSessions.Authenticate(ctx, auth.Credential{Kind: auth.SessionHeader, Value: tok}, t0); !errors.Is(err, auth.ErrSessionsDisabled) {
		t.Errorf("sessions disabled: %v; want ErrSessionsDisabled", err)
	}
}

func TestPrincipalCheckAccess(t *testing.T) {
	a, _ := newAuthority(t, nil)
	ctx := t.Context()
	acct, _, primaryValue := createAccount(t, a, auth.NewAccount{ID: "acct_1", Restrictions: mustRestrictions(t, auth.RestrictionSpec{
		Channels: []string{"rest", "mcp"}, AllowedIPs: []string{"10.0.0.0/8", "2001:db8::/32"},
	})})
	_, value, err := a.CreateKey(ctx, acct.ID, auth.NewKey{Name: "office", Restrictions: mustRestrictions(t, auth.RestrictionSpec{
		Channels: []string{"rest"}, AllowedIPs: []string{"10.1.0.0/16"},
	})}, auth.KeyLimit{}, t0)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := a.Authenticate(ctx, apiKey(value), t0)
	if err != nil {
		t.Fatal(err)
	}
	primary, err := a.Authenticate(ctx, apiKey(primaryValue), t0)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		p       *auth.Principal
		ch      auth.Channel
		addr    netip.Addr
		reason  error    // nil when allowed
		mention []string // parts of the message
	}{
		{"sub: allowed", &sub, auth.ChannelREST, addr("10.1.2.3"), nil, nil},
		{"sub: IPv4-mapped address allowed", &sub, auth.ChannelREST, addr("::ffff:10.1.2.3"), nil, nil},
		{"sub: zero channel skips the channel check", &sub, 0, addr("10.1.2.3"), nil, nil},
		{"sub: graphql refused by the account", &sub, auth.ChannelGraphQL, addr("10.1.2.3"), auth.ErrChannelNotAllowed, []string{"graphql", "rest, mcp"}},
		{"sub: mcp refused by the key", &sub, auth.ChannelMCP, addr("10.1.2.3"), auth.ErrChannelNotAllowed, []string{"mcp", "channels are rest"}},
		{"sub: address outside the key's list", &sub, auth.ChannelREST, addr("10.2.0.1"), auth.ErrIPNotAllowed, []string{"10.2.0.1", "10.1.0.0/16"}},
		{"sub: address outside the account's list", &sub, auth.ChannelREST, addr("192.0.2.1"), auth.ErrIPNotAllowed, []string{"192.0.2.1", "10.0.0.0/8"}},
		{"sub: zero channel still checks the address", &sub, 0, addr("192.0.2.1"), auth.ErrIPNotAllowed, []string{"192.0.2.1"}},
		{"sub: unknown address", &sub, auth.ChannelREST, netip.Addr{}, auth.ErrIPNotAllowed, []string{"an unknown address"}},
		{"primary: mcp allowed", &primary, auth.ChannelMCP, addr("10.200.0.1"), nil, nil},
		{"primary: IPv6 allowed", &primary, auth.ChannelREST, addr("2001:db8::5"), nil, nil},
		{"primary: graphql refused", &primary, auth.ChannelGraphQL, addr("10.0.0.1"), auth.ErrChannelNotAllowed, []string{"graphql"}},
		{"primary: address refused", &primary, auth.ChannelREST, addr("2001:db9::5"), auth.ErrIPNotAllowed, []string{"2001:db9::5"}},
		{"no restrictions at all", &auth.Principal{}, auth.ChannelGraphQL, netip.Addr{}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.CheckAccess(tt.ch, tt.addr)
			if tt.reason == nil {
				if err != nil {
					t.Fatalf("CheckAccess(%v, %v) = %v; want nil", tt.ch, tt.addr, err)
				}
				return
			}
			wantDenied(t, err, tt.reason, tt.mention...)
		})
	}
}

func TestPrincipalCheckAPI(t *testing.T) {
	acctR := mustRestrictions(t, auth.RestrictionSpec{APIs: []string{"geo", "weather"}})
	keyR := mustRestrictions(t, auth.RestrictionSpec{APIs: []string{"weather"}})
	tests := []struct {
		name    string
		p       auth.Principal
		api     string
		ok      bool
		mention []string
	}{
		{"unrestricted", auth.Principal{}, "anything", true, nil},
		{"account allows", auth.Principal{Account: auth.Account{Restrictions: acctR}}, "geo", true, nil},
		{"account refuses", auth.Principal{Account: auth.Account{Restrictions: acctR}}, "stocks", false, []string{"stocks", "geo, weather"}},
		{"key allows", auth.Principal{Account: auth.Account{Restrictions: acctR}, Key: auth.Key{ID: "k", Restrictions: keyR}}, "weather", true, nil},
		{"key refuses what the account allows", auth.Principal{Account: auth.Account{Restrictions: acctR}, Key: auth.Key{ID: "k", Restrictions: keyR}}, "geo", false, []string{"geo", "limited to weather"}},
		{"account refuses what the key lists", auth.Principal{Account: auth.Account{Restrictions: keyR}, Key: auth.Key{ID: "k", Restrictions: acctR}}, "geo", false, []string{"geo"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.CheckAPI(tt.api)
			if tt.ok {
				if err != nil {
					t.Fatalf("CheckAPI(%q) = %v", tt.api, err)
				}
				return
			}
			wantDenied(t, err, auth.ErrAPINotAllowed, tt.mention...)
		})
	}
}

func TestDeniedError(t *testing.T) {
	err := error(&auth.DeniedError{Reason: auth.ErrKeyRevoked, Message: "nope"})
	if err.Error() != "nope" {
		t.Errorf("Error() = %q", err.Error())
	}
	if !errors.Is(err, auth.ErrKeyRevoked) || !errors.Is(err, auth.ErrForbidden) {
		t.Error("DeniedError does not match its reason and ErrForbidden")
	}
	if errors.Is(err, auth.ErrKeyExpired) || errors.Is(err, auth.ErrUnknownKey) {
		t.Error("DeniedError matches another reason")
	}
}

// TestAuthorityConcurrent exercises the Authority from many goroutines (run with -race):
// once a rotation returns, no later call accepts the old value.
func TestAuthorityConcurrent(t *testing.T) {
	a, _ := newAuthority(t, nil)
	ctx := t.Context()
	acct, _, primaryValue := createAccount(t, a, auth.NewAccount{ID: "acct_1"})
	key, oldValue, err := a.CreateKey(ctx, acct.ID, auth.NewKey{Name: "ci"}, auth.KeyLimit{}, t0)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if _, err := a.Authenticate(ctx, apiKey(primaryValue), t0); err != nil {
					t.Errorf("primary: %v", err)
					return
				}
				if _, err := a.Authenticate(ctx, apiKey(oldValue), t0); err != nil && !errors.Is(err, auth.ErrUnknownKey) {
					t.Errorf("sub-key during rotation: %v", err)
					return
				}
			}
		})
	}
	_, newValue, err := a.RotateKey(ctx, key.ID, auth.AnyRevision, t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate(ctx, apiKey(oldValue), t0); !errors.Is(err, auth.ErrUnknownKey) {
		t.Errorf("old value after rotation: %v", err)
	}
	wg.Wait()
	if _, err := a.Authenticate(ctx, apiKey(newValue), t0); err != nil {
		t.Errorf("new value: %v", err)
	}
}
