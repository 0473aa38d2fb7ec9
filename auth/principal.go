package auth

import (
	"fmt"
	"net/netip"
	"strings"
)

// A Principal is who a request acts for: an account, and the key it presented or its
// session acts as (the zero Key for a session that acts for the whole account).
type Principal struct {
	Account Account
	Key     Key
	// SessionID is the id of the session the request authenticated with; empty for an
	// API key, and for a session token issued without an id.
	SessionID string
	// Cached reports that the key's record came from the service's key cache
	// (tollgate.Options.KeyCache), so the key may have been rotated or revoked since:
	// check it (a key check, see billing/driver's KeyChecker) before serving the call,
	// or read the record from the store again. The Service does both.
	Cached bool
	// ByID reports that the caller was authenticated by the key's stable id rather than
	// its value (an OAuth access token, say: tollgate.Caller.KeyID): a rotation of the
	// value does not affect it, a revocation does.
	ByID bool
}

// Session reports whether the principal authenticated with a session token.
func (p *Principal) Session() bool { return p.Key.ID == "" || p.SessionID != "" }

// WholeAccount reports whether the principal acts for its whole account: the primary
// key, a session that acts as it, or a session that names no key (a token the host
// issued for the whole account). It sees and manages every key of the account; any
// other principal acts as a sub-key, with that key's rights and never more.
func (p *Principal) WholeAccount() bool { return p.Key.Primary || p.Key.ID == "" }

// CheckAccess checks the restrictions of the account and the key that depend on how a
// request arrives: its channel and its address. A zero ch skips the channel check (for
// endpoints any valid key may use).
func (p *Principal) CheckAccess(ch Channel, addr netip.Addr) error {
	for _, r := range []Restrictions{p.Account.Restrictions, p.Key.Restrictions} {
		if ch != 0 && !r.AllowsChannel(ch) {
			return denied(ErrChannelNotAllowed, fmt.Sprintf("the API key may not be used over %s; its channels are %s",
				ch, strings.Join(r.Spec().Channels, ", ")))
		}
		if !r.AllowsAddr(addr) {
			shown := "an unknown address"
			if addr.IsValid() {
				shown = addr.String()
			}
			return denied(ErrIPNotAllowed, fmt.Sprintf("the API key may not be used from %s; it is limited to %s",
				shown, strings.Join(r.Spec().AllowedIPs, ", ")))
		}
	}
	return nil
}

// CheckAPI checks that the account and the key may call the API with the given id.
func (p *Principal) CheckAPI(id string) error {
	for _, r := range []Restrictions{p.Account.Restrictions, p.Key.Restrictions} {
		if !r.AllowsAPI(id) {
			return denied(ErrAPINotAllowed, fmt.Sprintf("the API key may not call %s; it is limited to %s",
				id, strings.Join(r.Spec().APIs, ", ")))
		}
	}
	return nil
}
