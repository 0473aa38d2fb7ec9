package dashboard_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/auth"
)

// signedInPages are the dashboard's GET pages for a signed-in person.
var signedInPages = []string{
	"/dashboard/", "/dashboard/keys", "/dashboard/apis", "/dashboard/api?id=alpha", "/dashboard/usage",
	"/dashboard/usage.csv", "/dashboard/audit", "/dashboard/mcp", "/dashboard/graphql", "/dashboard/reference",
	"/dashboard/rotate?key=nope", "/dashboard/revoke?key=nope",
}

// TestPagesCheckSession checks that every page, those that ask the service for nothing
// (MCP, GraphQL explorer, API reference) included, sends the person to sign in once
// the session has ended: after sign-out, with the old cookie sent again, and after the
// session's key was revoked. None shows the account's id then.
func TestPagesCheckSession(t *testing.T) {
	e := newEnv(t)
	ended := func(t *testing.T, b *browser, when string) {
		t.Helper()
		for _, path := range signedInPages {
			p := b.do("GET", path, nil)
			if p.status != http.StatusSeeOther || p.header.Get("Location") != "sign-in?ended=1" || strings.Contains(p.body, "acme") {
				t.Errorf("%s, GET %s: %d (Location %q), want a redirect to sign in again\n%.300s",
					when, path, p.status, p.header.Get("Location"), p.body)
			}
		}
	}

	t.Run("signed out", func(t *testing.T) {
		b := e.browser(t)
		csrf := b.signIn(e.key)
		u, _ := url.Parse(e.srv.URL)
		cookies := b.c.Jar.Cookies(u)
		for _, path := range []string{"/dashboard/mcp", "/dashboard/graphql", "/dashboard/reference"} {
			if p := b.do("GET", path, nil); p.status != http.StatusOK {
				t.Fatalf("GET %s signed in: %d", path, p.status)
			}
		}
		if p := b.do("POST", "/dashboard/sign-out", url.Values{"csrf_token": {csrf}}); p.status != http.StatusSeeOther {
			t.Fatalf("sign out: %d", p.status)
		}
		// The cookie of the ended session, sent again.
		replay := e.browser(t)
		replay.c.Jar.SetCookies(u, cookies)
		ended(t, replay, "after sign-out")
	})

	t.Run("key revoked", func(t *testing.T) {
		k, value, err := e.svc.CreateKey(t.Context(), "acme", auth.NewKey{Name: "laptop"})
		if err != nil {
			t.Fatal(err)
		}
		b := e.browser(t)
		b.signIn(value)
		if p := b.do("GET", "/dashboard/reference", nil); p.status != http.StatusOK {
			t.Fatalf("GET /dashboard/reference signed in: %d", p.status)
		}
		if _, err := e.svc.RevokeKey(t.Context(), k.ID); err != nil {
			t.Fatal(err)
		}
		ended(t, b, "after the session's key was revoked")
	})
}
