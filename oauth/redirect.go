package oauth

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// loopbackHosts are the hosts, written exactly so, of the http redirect URIs of native
// clients (RFC 8252 sections 7.3 and 8.3). localhost is accepted beside the loopback
// IP literals that RFC 8252 recommends, because MCP clients use it widely, browsers
// resolve it to the loopback interface only, and PKCE protects a code that another
// program on the machine might receive.
var loopbackHosts = []string{"127.0.0.1", "[::1]", "localhost"}

// checkRedirectURI checks that raw can be a redirect URI: an absolute https URI, or an
// http URI on a loopback host; written in printable ASCII, with a lowercase scheme,
// without userinfo, a fragment, percent-encoding in the host or a port out of range.
// Its error says what to fix.
func checkRedirectURI(raw string) error {
	if len(raw) > maxURI {
		return fmt.Errorf("a redirect URI is longer than %d bytes", maxURI)
	}
	shown := truncate(raw, 100)
	if !uriText(raw) {
		return fmt.Errorf("redirect URI %q has characters that must be percent-encoded", shown)
	}
	if strings.Contains(raw, "#") {
		return fmt.Errorf("redirect URI %q has a fragment, which is not allowed", shown)
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Opaque != "" || u.Host == "" {
		return fmt.Errorf("redirect URI %q is not an absolute URI with a host", shown)
	}
	if u.User != nil {
		return fmt.Errorf("redirect URI %q carries userinfo (credentials before an @), which is not allowed", shown)
	}
	if strings.Contains(u.Host, "%") || strings.Contains(authority(raw), "%") {
		return fmt.Errorf("redirect URI %q has percent-encoding in its host", shown)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("redirect URI %q has a port out of range", shown)
		}
	}
	switch {
	case strings.HasPrefix(raw, "https://"):
		return nil
	case strings.HasPrefix(raw, "http://"):
		if _, ok := loopbackBase(raw); ok {
			return nil
		}
		return fmt.Errorf("redirect URI %q uses http on a host that is not loopback; use https, or http on 127.0.0.1, [::1] or localhost", shown)
	}
	return fmt.Errorf("redirect URI %q must use https (or http on a loopback host), in lowercase", shown)
}

// uriText reports whether raw is written as the server takes a URI: in printable
// ASCII, without the characters that must be percent-encoded. Nothing in it can then
// change how the consent page reads, nor imitate a host with look-alike letters.
func uriText(raw string) bool {
	for i := 0; i < len(raw); i++ {
		if c := raw[i]; c <= ' ' || c >= 0x7f || strings.IndexByte("\"<>\\^`{|}", c) >= 0 {
			return false
		}
	}
	return true
}

// authority returns the authority of an absolute URI: what lies between "//" and the
// path, query or fragment.
func authority(raw string) string {
	_, rest, ok := strings.Cut(raw, "//")
	if !ok {
		return ""
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// loopbackBase returns raw without its port if raw is an http URI on a loopback host,
// written as checkRedirectURI requires: two loopback redirect URIs that differ only in
// their ports have the same base.
func loopbackBase(raw string) (string, bool) {
	rest, ok := strings.CutPrefix(raw, "http://")
	if !ok {
		return "", false
	}
	auth := authority(raw)
	host, port := auth, ""
	if i := strings.LastIndexByte(auth, ':'); i >= 0 && !strings.HasSuffix(auth, "]") {
		host, port = auth[:i], auth[i+1:]
	}
	for i := 0; i < len(port); i++ {
		if port[i] < '0' || port[i] > '9' {
			return "", false
		}
	}
	for _, h := range loopbackHosts {
		if host == h {
			return "http://" + host + rest[len(auth):], true
		}
	}
	return "", false
}

// matchRedirectURI checks that got, the redirect URI of an authorization request, is
// a valid redirect URI and one of the client's registered ones. URIs are compared as
// strings, exactly, except that a loopback URI may name another port than the one
// registered, since a native client listens on whatever port is free (RFC 8252
// section 7.3): its scheme, host, path and query must still be the registered ones.
func matchRedirectURI(registered []string, got string) error {
	if err := checkRedirectURI(got); err != nil {
		return err
	}
	for _, r := range registered {
		if r == got {
			return nil
		}
	}
	if base, ok := loopbackBase(got); ok {
		for _, r := range registered {
			if b, ok := loopbackBase(r); ok && b == base {
				return nil
			}
		}
	}
	return fmt.Errorf("redirect URI %q is not one the application registered", truncate(got, 200))
}
