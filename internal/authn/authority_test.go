package authn_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/internal/authn"
	"github.com/tollgate-dev/tollgate/store/memory"
)

func newAuthority(t *testing.T, sessions *auth.Sessions) (*authn.Authority, *memory.KeyStore) {
	t.Helper()
	ks := memory.NewKeyStore()
	a, err := authn.New(ks, &authn.Options{Sessions: sessions})
	if err != nil {
		t.Fatal(err)
	}
	return a, ks
}

// The accounts and keys these tests verify are written straight to the key store: the
// policy that makes them (ids, names, values, restrictions within the account) is
// package accounts', and tested there.

// newKeyID returns a random key id.
func newKeyID() string {
	b := make([]byte, 10)
	rand.Read(b)
	return auth.KeyIDPrefix + hex.EncodeToString(b)
}

// seedAccount stores acct (on plan "free" unless it names one, created at t0 unless it
// says when) with a primary key of a random value, and returns them with the value.
func seedAccount(t *testing.T, ks auth.KeyStore, acct auth.Account) (auth.Account, auth.Key, string) {
	t.Helper()
	if acct.Plan == "" {
		acct.Plan = "free"
	}
	if acct.CreatedAt.IsZero() {
		acct.CreatedAt = t0
	}
	value := auth.NewKeyValue()
	key := auth.Key{ID: newKeyID(), AccountID: acct.ID, Name: "primary", Primary: true,
		Hash: auth.HashKey(value), CreatedAt: acct.CreatedAt}
	if err := ks.CreateAccount(t.Context(), acct, key); err != nil {
		t.Fatalf("CreateAccount(%+v): %v", acct, err)
	}
	return acct, key, value
}

// seedKey stores a sub-key of the account, created at t0, and returns it with its
// value.
func seedKey(t *testing.T, ks auth.KeyStore, account, name string, r auth.Restrictions) (auth.Key, string) {
	t.Helper()
	value := auth.NewKeyValue()
	key := auth.Key{ID: newKeyID(), AccountID: account, Name: name, Hash: auth.HashKey(value),
		Restrictions: r, CreatedAt: t0}
	if err := ks.CreateKey(t.Context(), key, auth.KeyLimit{}); err != nil {
		t.Fatalf("CreateKey(%+v): %v", key, err)
	}
	return key, value
}

// rotate gives the key a new random value in the store at the given moment, and
// returns the rotated key with its value.
func rotate(t *testing.T, ks auth.KeyStore, keyID string, at time.Time) (auth.Key, string) {
	t.Helper()
	value := auth.NewKeyValue()
	key, err := ks.RotateKey(t.Context(), keyID, auth.AnyRevision, auth.HashKey(value), at)
	if err != nil {
		t.Fatalf("RotateKey(%s): %v", keyID, err)
	}
	return key, value
}

// revoke revokes the key in the store at the given moment.
func revoke(t *testing.T, ks auth.KeyStore, keyID string, at time.Time) auth.Key {
	t.Helper()
	key, err := ks.RevokeKey(t.Context(), keyID, auth.AnyRevision, at)
	if err != nil {
		t.Fatalf("RevokeKey(%s): %v", keyID, err)
	}
	return key
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

func TestNew(t *testing.T) {
	if _, err := authn.New(nil, nil); err == nil {
		t.Error("New(nil, nil) succeeded")
	}
	ks := memory.NewKeyStore()
	a, err := authn.New(ks, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Store() != auth.KeyStore(ks) {
		t.Error("Store() is not the store given")
	}
}

// TestAuthorityAuthenticates checks that a stored key authenticates by its value, sent
// in either header and in either case (the hash is of the canonical form).
func TestAuthorityAuthenticates(t *testing.T) {
	a, _ := newAuthority(t, nil)
	ctx := t.Context()
	_, key, value := seedAccount(t, a.Store(), auth.Account{ID: "acct_1", Plan: "pro"})

	for _, cred := range []auth.Credential{
		apiKey(value),
		{Kind: auth.BearerHeader, Value: value},
		apiKey(strings.ToUpper(value)), // the hash is of the canonical form
	} {
		p, err := a.Authenticate(ctx, cred, t0.Add(time.Hour))
		if err != nil {
			t.Fatalf("Authenticate(%+v): %v", cred, err)
		}
		if p.Account.ID != "acct_1" || p.Account.Plan != "pro" || !p.Account.CreatedAt.Equal(t0) ||
			p.Key.ID != key.ID || !p.Key.Primary || p.Key.Hash != auth.HashKey(value) || p.Session() || p.Cached || p.ByID {
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
	_, _, value := seedAccount(t, a.Store(), auth.Account{ID: "acct_1"})
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
	_, _, value := seedAccount(t, a.Store(), auth.Account{ID: "acct_1"})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := a.Authenticate(ctx, apiKey(value), t0)
	if !errors.Is(err, context.Canceled) || errors.Is(err, auth.ErrUnknownKey) {
		t.Fatalf("Authenticate with a failing store = %v; want the store's error as it is", err)
	}
}

// TestAuthoritySubKey checks that a sub-key authenticates with its own restrictions,
// read back from the store, and is held to them and to its account's; the primary key
// is held to the account's alone.
func TestAuthoritySubKey(t *testing.T) {
	a, ks := newAuthority(t, nil)
	ctx := t.Context()
	acctR := mustRestrictions(t, auth.RestrictionSpec{APIs: []string{"geo", "weather"}, Channels: []string{"rest", "mcp"}})
	acct, primary, primaryValue := seedAccount(t, ks, auth.Account{ID: "acct_1", Restrictions: acctR})

	subR := mustRestrictions(t, auth.RestrictionSpec{
		APIs: []string{"weather"}, Channels: []string{"rest"}, AllowedIPs: []string{"10.0.0.0/8"}, ExpiresAt: at(t0.Add(24 * time.Hour)),
	})
	sub, value := seedKey(t, ks, acct.ID, "ci", subR)
	p, err := a.Authenticate(ctx, apiKey(value), t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if p.Key.ID != sub.ID || p.Key.ID == primary.ID || p.Key.Name != "ci" || p.Key.Primary || p.Account.ID != acct.ID || p.Session() {
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
}

// TestAuthorityRotatedKey checks that a key rotated in the store is refused by its old
// value from the very next call, and authenticates by its new one.
func TestAuthorityRotatedKey(t *testing.T) {
	a, ks := newAuthority(t, nil)
	ctx := t.Context()
	r := mustRestrictions(t, auth.RestrictionSpec{APIs: []string{"weather"}})
	acct, _, primaryValue := seedAccount(t, ks, auth.Account{ID: "acct_1"})
	key, oldValue := seedKey(t, ks, acct.ID, "ci", r)
	if _, err := a.Authenticate(ctx, apiKey(oldValue), t0); err != nil {
		t.Fatal(err)
	}

	t1 := t0.Add(time.Hour)
	_, newValue := rotate(t, ks, key.ID, t1)

	// The very next call with the old value fails; no grace period.
	if _, err := a.Authenticate(ctx, apiKey(oldValue), t1); !errors.Is(err, auth.ErrUnknownKey) {
		t.Fatalf("old value after rotation: %v; want ErrUnknownKey", err)
	}
	p, err := a.Authenticate(ctx, apiKey(newValue), t1)
	if err != nil || p.Key.ID != key.ID || p.Key.Name != "ci" || !p.Key.RotatedAt.Equal(t1) ||
		!p.Key.Restrictions.AllowsAPI("weather") || p.Key.Restrictions.AllowsAPI("geo") {
		t.Fatalf("new value after rotation: %+v, %v", p, err)
	}
	// Other keys of the account are untouched.
	if _, err := a.Authenticate(ctx, apiKey(primaryValue), t1); err != nil {
		t.Errorf("primary key after rotating a sub-key: %v", err)
	}
	// Rotating again retires the second value too.
	_, third := rotate(t, ks, key.ID, t1.Add(time.Minute))
	for _, v := range []string{oldValue, newValue} {
		if _, err := a.Authenticate(ctx, apiKey(v), t1.Add(time.Minute)); !errors.Is(err, auth.ErrUnknownKey) {
			t.Errorf("retired value %q: %v; want ErrUnknownKey", v, err)
		}
	}
	if _, err := a.Authenticate(ctx, apiKey(third), t1.Add(time.Minute)); err != nil {
		t.Errorf("third value: %v", err)
	}
}

// TestAuthorityRevokedKey checks that a key revoked in the store is refused with a
// *DeniedError (a 403, not an unknown key), and that the account's other keys still
// work until they are revoked too.
func TestAuthorityRevokedKey(t *testing.T) {
	a, ks := newAuthority(t, nil)
	ctx := t.Context()
	acct, primary, primaryValue := seedAccount(t, ks, auth.Account{ID: "acct_1"})
	sub, subValue := seedKey(t, ks, acct.ID, "ci", auth.Restrictions{})

	t1 := t0.Add(time.Hour)
	revoke(t, ks, sub.ID, t1)
	p, err := a.Authenticate(ctx, apiKey(subValue), t1)
	wantDenied(t, err, auth.ErrKeyRevoked, "revoked")
	if errors.Is(err, auth.ErrUnknownKey) {
		t.Error("a revoked key reports ErrUnknownKey; it must be a 403")
	}
	if p != (auth.Principal{}) {
		t.Errorf("a revoked key returned a principal %+v", p)
	}

	// The account's other keys still work.
	if p, err := a.Authenticate(ctx, apiKey(primaryValue), t1); err != nil || p.Key.ID != primary.ID {
		t.Errorf("primary after revoking a sub-key: %+v, %v", p, err)
	}
	// A revoked primary key is refused like any other.
	revoke(t, ks, primary.ID, t1)
	_, err = a.Authenticate(ctx, apiKey(primaryValue), t1)
	wantDenied(t, err, auth.ErrKeyRevoked)
}

func TestAuthorityExpiry(t *testing.T) {
	a, _ := newAuthority(t, nil)
	ctx := t.Context()
	acct, _, _ := seedAccount(t, a.Store(), auth.Account{ID: "acct_1"})
	exp := t0.Add(time.Hour)
	_, value := seedKey(t, a.Store(), acct.ID, "temp", mustRestrictions(t, auth.RestrictionSpec{ExpiresAt: at(exp)}))

	// An expiring account: all its keys, and its sessions, expire with it.
	acctExp := t0.Add(2 * time.Hour)
	_, _, expiringValue := seedAccount(t, a.Store(), auth.Account{ID: "acct_2", Restrictions: mustRestrictions(t, auth.RestrictionSpec{ExpiresAt: at(acctExp)})})

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
	seedAccount(t, a.Store(), auth.Account{ID: "acct_1", Plan: "pro", Restrictions: acctR})
	seedAccount(t, a.Store(), auth.Account{ID: "acct_exp", Restrictions: mustRestrictions(t, auth.RestrictionSpec{ExpiresAt: at(t0.Add(time.Minute))})})

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
	seedAccount(t, noSessions.Store(), auth.Account{ID: "acct_1"})
	if _, err := noSessions.Authenticate(ctx, auth.Credential{Kind: auth.SessionHeader, Value: tok}, t0); !errors.Is(err, auth.ErrSessionsDisabled) {
		t.Errorf("sessions disabled: %v; want ErrSessionsDisabled", err)
	}
}

// TestAuthorityConcurrent exercises the Authority from many goroutines (run with -race):
// once a rotation returns, no later call accepts the old value.
func TestAuthorityConcurrent(t *testing.T) {
	a, ks := newAuthority(t, nil)
	ctx := t.Context()
	acct, _, primaryValue := seedAccount(t, ks, auth.Account{ID: "acct_1"})
	key, oldValue := seedKey(t, ks, acct.ID, "ci", auth.Restrictions{})
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
	_, newValue := rotate(t, ks, key.ID, t0)
	if _, err := a.Authenticate(ctx, apiKey(oldValue), t0); !errors.Is(err, auth.ErrUnknownKey) {
		t.Errorf("old value after rotation: %v", err)
	}
	wg.Wait()
	if _, err := a.Authenticate(ctx, apiKey(newValue), t0); err != nil {
		t.Errorf("new value: %v", err)
	}
}
