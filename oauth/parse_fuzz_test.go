package oauth

import (
	"errors"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/cleantext"
)

// FuzzRedirectURI checks the parser and the matching of redirect URIs, which every
// client controls, against their rules: a URI that passes has a host, no userinfo and
// no fragment, and is https or http on a loopback host; a URI that matches a
// registered one differs from it in a loopback port at most; and the redirect to it
// keeps it as it is, with no userinfo. Seeds are in testdata/fuzz/FuzzRedirectURI.
func FuzzRedirectURI(f *testing.F) {
	f.Add("http://127.0.0.1:9999/cb", "http://127.0.0.1:51234/cb")
	f.Add("https://app.example/cb?x=1", "https://app.example/cb?x=1")
	s := &Server{issuer: "https://as.example"}
	f.Fuzz(func(t *testing.T, registered, got string) {
		if err := checkRedirectURI(got); err == nil {
			u, perr := url.Parse(got)
			switch {
			case perr != nil:
				t.Fatalf("%q passed but does not parse: %v", got, perr)
			case u.User != nil || u.Fragment != "" || strings.Contains(got, "#") || u.Host == "":
				t.Fatalf("%q passed with userinfo, a fragment or no host", got)
			case u.Scheme != "https" && !isLoopbackHTTP(u):
				t.Fatalf("%q passed with scheme %q on host %q", got, u.Scheme, u.Host)
			}
		}
		if err := matchRedirectURI([]string{registered}, got); err != nil {
			return
		}
		if err := checkRedirectURI(got); err != nil {
			t.Fatalf("%q matched %q but is invalid: %v", got, registered, err)
		}
		if got != registered {
			r, g := mustParse(t, registered), mustParse(t, got)
			if !isLoopbackHTTP(r) || !isLoopbackHTTP(g) || r.Hostname() != g.Hostname() ||
				r.EscapedPath() != g.EscapedPath() || r.RawQuery != g.RawQuery || r.User != nil {
				t.Fatalf("%q matched the registered %q, from which it differs in more than a loopback port", got, registered)
			}
		}
		rec := httptest.NewRecorder()
		s.redirect(rec, authzRequest{redirectURI: got, state: "st"}, url.Values{"code": {"c"}})
		loc := rec.Header().Get("Location")
		u := mustParse(t, loc)
		if !strings.HasPrefix(loc, got) || u.User != nil || u.Fragment != "" || u.Query().Get("iss") != s.issuer {
			t.Fatalf("redirect to %q: Location %q", got, loc)
		}
	})
}

// isLoopbackHTTP reports whether u is http on one of the loopback hosts.
func isLoopbackHTTP(u *url.URL) bool {
	if u.Scheme != "http" {
		return false
	}
	for _, h := range loopbackHosts {
		if u.Host == h || strings.HasPrefix(u.Host, h+":") {
			return true
		}
	}
	return false
}

func mustParse(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("%q does not parse: %v", raw, err)
	}
	return u
}

// FuzzClientMetadataDocument checks the parsing of client metadata documents, which
// anyone may publish, and of the client_id URLs they are fetched from: a document is
// accepted only if it names the URL it was fetched from and lists between one and
// maxRedirectURIs valid redirect URIs, with a printable, bounded name; every refusal
// wraps errClientRefused. Seeds are in testdata/fuzz/FuzzClientMetadataDocument.
func FuzzClientMetadataDocument(f *testing.F) {
	f.Add("https://app.example/client.json", `{"client_id":"https://app.example/client.json","client_name":"App","redirect_uris":["http://127.0.0.1/cb"]}`)
	f.Fuzz(func(t *testing.T, id, body string) {
		if err := checkDocumentURL(id); err == nil {
			u := mustParse(t, id)
			if u.Scheme != "https" || u.Host == "" || u.User != nil || strings.Contains(id, "#") || u.Path == "" || u.Path == "/" {
				t.Fatalf("client_id URL %q passed", id)
			}
		} else if !errors.Is(err, errClientRefused) {
			t.Fatalf("checkDocumentURL(%q) = %v, not wrapping errClientRefused", id, err)
		}
		c, err := parseDocument(id, []byte(body))
		if err != nil {
			if !errors.Is(err, errClientRefused) {
				t.Fatalf("parseDocument = %v, not wrapping errClientRefused", err)
			}
			return
		}
		if c.id != id || !c.document || len(c.redirectURIs) == 0 || len(c.redirectURIs) > maxRedirectURIs ||
			len(c.name) > maxClientName || !cleantext.Printable(c.name) {
			t.Fatalf("document %q accepted as %+v", body, c)
		}
		for _, r := range c.redirectURIs {
			if err := checkRedirectURI(r); err != nil {
				t.Fatalf("document %q accepted with redirect URI %q: %v", body, r, err)
			}
		}
	})
}
