package rest_test

import (
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/edge"
)

// TestForbiddenCauses proves each cause of the JSON 403 (scope, channel, IP allow-list,
// expiry, revocation) with a message that says which, that none of them is charged, and
// that /v1/analytics, which any valid key may call, answers 200 to scope- and
// channel-restricted keys but 403 to revoked, expired and IP-blocked ones.
func TestForbiddenCauses(t *testing.T) {
	h := newHarness(t, config{})
	acct := h.newAccount(t, "pro")
	expiresAt := h.clock.Now().Add(time.Hour)

	scoped := h.newSubKey(t, acct, "hash-only", auth.RestrictionSpec{APIs: []string{"hash"}})
	gqlOnly := h.newSubKey(t, acct, "graphql-only", auth.RestrictionSpec{Channels: []string{"graphql"}})
	office := h.newSubKey(t, acct, "office", auth.RestrictionSpec{AllowedIPs: []string{"10.0.0.0/8"}})
	expiring := h.newSubKey(t, acct, "expiring", auth.RestrictionSpec{ExpiresAt: &expiresAt})
	revoked := h.newSubKey(t, acct, "revoked", auth.RestrictionSpec{})

	// Before the expiry and the revocation, both keys work.
	wantOK(t, h.hash(t, expiring.Key))
	wantOK(t, h.hash(t, revoked.Key))
	if _, err := h.mgr.RevokeKey(t.Context(), revoked.KeyID); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(2 * time.Hour)
	before := h.balance(t, acct.ID)

	cases := []struct {
		name       string
		key        string
		method     string
		path       string
		fragments  []string
		analyticOK bool
	}{
		{"scope", scoped.Key, http.MethodPost, "/v1/echo", []string{"may not call echo", "hash"}, true},
		{"channel", gqlOnly.Key, http.MethodGet, "/v1/hash?text=a", []string{"over rest", "graphql"}, true},
		{"ip allow-list", office.Key, http.MethodGet, "/v1/hash?text=a", []string{"from " + h.peerAddr().String(), "10.0.0.0/8"}, false},
		{"expiry", expiring.Key, http.MethodGet, "/v1/hash?text=a", []string{"expired", expiresAt.Format(time.RFC3339)}, false},
		{"revocation", revoked.Key, http.MethodGet, "/v1/hash?text=a", []string{"revoked"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var body *strings.Reader
			hdrs := []header{key(c.key)}
			if c.method == http.MethodPost {
				body = strings.NewReader(`{"message":"hi"}`)
				hdrs = append(hdrs, jsonType)
			}
			var r *response
			if body != nil {
				r = h.do(t, c.method, c.path, body, hdrs...)
			} else {
				r = h.do(t, c.method, c.path, nil, hdrs...)
			}
			wantError(t, r, http.StatusForbidden, "forbidden", c.fragments...)

			r = h.do(t, http.MethodGet, "/v1/analytics", nil, key(c.key))
			if c.analyticOK {
				if a := wantOK(t, r); a["account"] != acct.ID {
					t.Errorf("analytics account = %v, want %s", a["account"], acct.ID)
				}
			} else {
				wantError(t, r, http.StatusForbidden, "forbidden", c.fragments...)
			}
		})
	}
	if after := h.balance(t, acct.ID); after.Remaining != before.Remaining {
		t.Errorf("403s changed the balance from %d to %d", before.Remaining, after.Remaining)
	}
	// The account's other keys are untouched.
	wantOK(t, h.hash(t, acct.Key))
	wantOK(t, h.hash(t, scoped.Key))
}

// TestIPAllowListForwardedFor proves that X-Forwarded-For is believed only from
// edge.Options.TrustedProxies: from a trusted peer the forwarded client address is
// checked against the allow-list; from an untrusted one the header is ignored and the
// TCP peer is checked.
func TestIPAllowListForwardedFor(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128")}
	cases := []struct {
		name    string
		trusted []netip.Prefix
		xff     []string
		want    int
	}{
		{"trusted proxy, allowed client", trusted, []string{"10.1.2.3"}, http.StatusOK},
		{"trusted proxy, client chain", trusted, []string{"203.0.113.9, 10.1.2.3"}, http.StatusOK},
		{"trusted proxy, two trusted hops", trusted, []string{"10.1.2.3, 127.0.0.1"}, http.StatusOK},
		{"trusted proxy, header repeated", trusted, []string{"192.0.2.1", "10.1.2.3"}, http.StatusOK},
		{"trusted proxy, spoofed left hop ignored", trusted, []string{"10.9.9.9, 192.0.2.1"}, http.StatusForbidden},
		{"trusted proxy, client outside list", trusted, []string{"192.168.1.1"}, http.StatusForbidden},
		{"trusted proxy, no header", trusted, nil, http.StatusForbidden},
		{"trusted proxy, garbage header", trusted, []string{"not-an-ip"}, http.StatusForbidden},
		{"untrusted peer, header ignored", nil, []string{"10.1.2.3"}, http.StatusForbidden},
		{"other proxy trusted, header ignored", []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}, []string{"10.1.2.3"}, http.StatusForbidden},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, config{edge: edge.Options{TrustedProxies: c.trusted}})
			acct := h.newAccount(t, "pro")
			office := h.newSubKey(t, acct, "office", auth.RestrictionSpec{AllowedIPs: []string{"10.0.0.0/8"}})
			hdrs := []header{key(office.Key)}
			for _, v := range c.xff {
				hdrs = append(hdrs, header{"X-Forwarded-For", v})
			}
			r := h.do(t, http.MethodGet, "/v1/hash?text=a", nil, hdrs...)
			if c.want == http.StatusOK {
				wantOK(t, r)
			} else {
				wantError(t, r, http.StatusForbidden, "forbidden", "may not be used from", "10.0.0.0/8")
			}
		})
	}
}

// TestRotationAndRevocation proves section 5's rotation and revocation rules: after a
// rotation the old value gets 401 on the very next call and the new value works as the
// same key; after a revocation the very next call gets 403.
func TestRotationAndRevocation(t *testing.T) {
	h := newHarness(t, config{})
	acct := h.newAccount(t, "pro")
	sub := h.newSubKey(t, acct, "ci", auth.RestrictionSpec{APIs: []string{"hash"}})

	values := map[string]string{}
	for _, k := range []account{acct, sub} {
		wantOK(t, h.hash(t, k.Key))
		rotated, value, err := h.mgr.RotateKey(t.Context(), k.KeyID)
		if err != nil {
			t.Fatal(err)
		}
		if rotated.ID != k.KeyID || value == k.Key {
			t.Fatalf("RotateKey gave key %s value %s, want id %s and a new value", rotated.ID, value, k.KeyID)
		}
		values[k.KeyID] = value
		// No grace period: the very next call with the old value is refused.
		r := h.hash(t, k.Key)
		wantError(t, r, http.StatusUnauthorized, "unauthorized")
		if r.Error != "unauthorized" {
			t.Errorf("old value: error %q, want exactly \"unauthorized\"", r.Error)
		}
		wantError(t, h.do(t, http.MethodGet, "/v1/analytics", nil, key(k.Key)), http.StatusUnauthorized, "unauthorized")
		wantOK(t, h.hash(t, value))
		a := h.analytics(t, key(value))
		if a.Key == nil || a.Key.ID != k.KeyID || a.Key.Primary != (k.KeyID == acct.KeyID) {
			t.Errorf("analytics key = %+v, want id %s", a.Key, k.KeyID)
		}
		if a.Account != acct.ID {
			t.Errorf("analytics account = %s, want %s", a.Account, acct.ID)
		}
	}
	// The sub-key keeps its restrictions through the rotation.
	wantError(t, h.do(t, http.MethodPost, "/v1/echo", strings.NewReader(`{"message":"a"}`), key(values[sub.KeyID]), jsonType),
		http.StatusForbidden, "forbidden", "may not call echo")
	// All four successful calls were billed to the one account.
	if b := h.balance(t, acct.ID); b.Used != 4 {
		t.Errorf("used %d, want 4", b.Used)
	}

	// Revocation: the very next call is refused with 403; the other key still works.
	if _, err := h.mgr.RevokeKey(t.Context(), sub.KeyID); err != nil {
		t.Fatal(err)
	}
	wantError(t, h.hash(t, values[sub.KeyID]), http.StatusForbidden, "forbidden", "revoked")
	wantError(t, h.do(t, http.MethodGet, "/v1/analytics", nil, key(values[sub.KeyID])), http.StatusForbidden, "forbidden", "revoked")
	wantOK(t, h.hash(t, values[acct.KeyID]))
	// A revoked key cannot be rotated back to life.
	if _, _, err := h.mgr.RotateKey(t.Context(), sub.KeyID); tollgate.CodeOf(err) != tollgate.CodeConflict {
		t.Errorf("RotateKey of a revoked key: %v, want a conflict", err)
	}
	if b := h.balance(t, acct.ID); b.Used != 5 {
		t.Errorf("used %d, want 5 (refused calls are free)", b.Used)
	}
}

// TestSubKeyCannotWiden proves that a sub-key asking for more than its account allows
// is refused with an error wrapping auth.ErrWidens, and that no key is created.
func TestSubKeyCannotWiden(t *testing.T) {
	h := newHarness(t, config{})
	acct := h.newAccount(t, "pro", accountOpts{restrictions: auth.RestrictionSpec{APIs: []string{"hash"}}})
	for _, spec := range []auth.RestrictionSpec{
		{APIs: []string{"hash", "echo"}},
		{},                           // no list means every API: wider than the account
		{APIs: []string{"echo"}},     // disjoint
		{Channels: []string{"rest"}}, // narrows channels, but widens APIs
	} {
		_, _, err := h.mgr.CreateKey(t.Context(), acct.ID, accounts.NewKey{Name: "wider", Restrictions: restrictions(t, spec)})
		if !errors.Is(err, auth.ErrWidens) {
			t.Errorf("CreateKey(%+v): %v, want an error wrapping auth.ErrWidens", spec, err)
		}
		if tollgate.CodeOf(err) != tollgate.CodeInvalidInput {
			t.Errorf("CreateKey(%+v): code %v, want invalid_input", spec, tollgate.CodeOf(err))
		}
	}
	info, err := h.mgr.Account(t.Context(), acct.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Keys) != 1 || !info.Keys[0].Primary {
		t.Fatalf("the account has %d keys, want only its primary", len(info.Keys))
	}
	// The account's own restriction applies to its primary key, and a narrowing
	// sub-key is accepted.
	wantError(t, h.do(t, http.MethodPost, "/v1/echo", strings.NewReader(`{"message":"a"}`), key(acct.Key), jsonType),
		http.StatusForbidden, "forbidden", "may not call echo")
	sub := h.newSubKey(t, acct, "narrow", auth.RestrictionSpec{APIs: []string{"hash"}, Channels: []string{"rest"}})
	wantOK(t, h.hash(t, sub.Key))
}
