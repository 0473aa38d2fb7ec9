package auth_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/auth"
)

// The principals these tests check are built as the call core builds them from the key
// store's records (an account, and the key presented); the verification that makes them
// is internal/authn's, and tested there.

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

func TestPrincipalCheckAccess(t *testing.T) {
	acct := auth.Account{ID: "acct_1", Plan: "free", CreatedAt: t0, Restrictions: mustRestrictions(t, auth.RestrictionSpec{
		Channels: []string{"rest", "mcp"}, AllowedIPs: []string{"10.0.0.0/8", "2001:db8::/32"},
	})}
	sub := auth.Principal{Account: acct, Key: auth.Key{ID: auth.KeyIDPrefix + "office", AccountID: acct.ID, Name: "office",
		CreatedAt: t0, Restrictions: mustRestrictions(t, auth.RestrictionSpec{
			Channels: []string{"rest"}, AllowedIPs: []string{"10.1.0.0/16"},
		})}}
	primary := auth.Principal{Account: acct, Key: auth.Key{ID: auth.KeyIDPrefix + "primary", AccountID: acct.ID, Name: "primary",
		Primary: true, CreatedAt: t0}}

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
