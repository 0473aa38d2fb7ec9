package auth

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// A CredentialKind is the form in which a credential was sent.
type CredentialKind uint8

// The credential forms a client may send, in order of precedence: the first one present
// is used and the others are ignored.
const (
	// APIKeyHeader is "x-api-key: <key>".
	APIKeyHeader CredentialKind = iota + 1
	// BearerHeader is "Authorization: Bearer <key>".
	BearerHeader
	// SessionHeader is "x-jwt: <session token>".
	SessionHeader
)

// A Credential is what a request presents to prove who it is acting for.
type Credential struct {
	Kind CredentialKind
	// Value is the key in lowercase, or the session token.
	Value string
}

// maxSessionToken bounds the size of a session token.
const maxSessionToken = 4096

// CredentialFrom extracts the credential of a request, performing the edge check.
//
// The forms are tried in the order x-api-key, Authorization: Bearer, x-jwt; the first
// one present is used and the others are ignored, so sending several forms is not an
// error. Header names are case-insensitive. An Authorization header with another scheme
// (Basic, say) is not a credential form and is skipped.
//
// It returns [ErrNoCredential] when no form is present, and [ErrMalformedCredential] when
// the chosen form's value is not a UUID (for keys) or not three base64url segments (for
// session tokens).
func CredentialFrom(h http.Header) (Credential, error) {
	if v := strings.TrimSpace(first(h, "X-Api-Key")); v != "" {
		return keyCredential(APIKeyHeader, v)
	}
	if v := first(h, "Authorization"); len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
		if tok := strings.TrimSpace(v[7:]); tok != "" {
			return keyCredential(BearerHeader, tok)
		}
	}
	if v := strings.TrimSpace(first(h, "X-Jwt")); v != "" {
		if !jwtShaped(v) {
			return Credential{}, ErrMalformedCredential
		}
		return Credential{Kind: SessionHeader, Value: v}, nil
	}
	return Credential{}, ErrNoCredential
}

// first returns the first value of the header with the canonical name key, as
// h.Get(key) does without canonicalizing key again on every request.
func first(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func keyCredential(kind CredentialKind, v string) (Credential, error) {
	key, ok := ParseKey(v)
	if !ok {
		return Credential{}, ErrMalformedCredential
	}
	return Credential{Kind: kind, Value: key}, nil
}

// jwtShaped reports whether s is three non-empty base64url segments.
func jwtShaped(s string) bool {
	if len(s) > maxSessionToken || strings.Count(s, ".") != 2 {
		return false
	}
	for _, seg := range strings.Split(s, ".") {
		if seg == "" || strings.Trim(seg, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
			return false
		}
	}
	return true
}

// ClientAddr returns the address a request comes from, for IP allow-lists. It is the TCP
// peer, unless the peer is one of the trusted proxies: then X-Forwarded-For is read from
// right to left and the first address that is not a trusted proxy is the client. An
// unparseable header stops the walk at the last trusted hop, so a forged header can never
// name an address a proxy did not add.
func ClientAddr(r *http.Request, trusted []netip.Prefix) netip.Addr {
	addr := peerAddr(r.RemoteAddr)
	if len(trusted) == 0 || !isTrusted(addr, trusted) {
		return addr
	}
	hops := r.Header.Values("X-Forwarded-For")
	for i := len(hops) - 1; i >= 0; i-- {
		parts := strings.Split(hops[i], ",")
		for j := len(parts) - 1; j >= 0; j-- {
			a, err := netip.ParseAddr(strings.TrimSpace(parts[j]))
			if err != nil {
				return addr
			}
			addr = a.Unmap()
			if !isTrusted(addr, trusted) {
				return addr
			}
		}
	}
	return addr
}

func peerAddr(remote string) netip.Addr {
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		return ap.Addr().Unmap()
	}
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap()
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
