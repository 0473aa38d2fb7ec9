package dashboard_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/accounts"
)

// signedInPages are the dashboard's GET pages for a signed-in person.
var signedInPages = []string{
	"/dashboard/", "/dashboard/keys", "/dashboard/apis", "/dashboard/api?id=alpha", "/dashboard/usage",
	"/dashboard/usage.csv", "/dashboard/audit", "/dashboard/mcp", "/dashboard/graphql", "/dashboard/reference",
	"/dashboard/rotate?key=nope", "/dashboard/revoke?key=nope",
	"/dashboard/webhooks", "/dashboard/webhook?id=ep_nope", "/dashboard/webhook-delete?id=ep_nope",
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
		k, value, err := e.mgr.CreateKey(t.Context(), "acme", accounts.NewKey{Name: "laptop"})
		if err != nil {
			t.Fatal(err)
		}
		b := e.browser(t)
		b.signIn(value)
		if p := b.do("GET", "/dashboard/reference", nil); p.status != http.StatusOK {
			t.Fatalf("GET /dashboard/reference signed in: %d", p.status)
		}
		if _, err := e.mgr.RevokeKey(t.Context(), k.ID); err != nil {
			t.Fatal(err)
		}
		ended(t, b, "after the session's key was revoked")
	})
}

// TestSignInThrottled checks that failed sign-ins on the dashboard's form are counted:
// after the burst of failures (10 by default) from an address, its next sign-in, with
// the right key too, is answered 429 on the sign-in page with Retry-After, and every
// failure is logged without the key.
func TestSignInThrottled(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)
	const wrong = "00000000-0000-4000-8000-000000000000"
	for i := range 10 {
		if p := b.do("POST", "/dashboard/sign-in", url.Values{"api_key": {wrong}}); p.status != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d", i+1, p.status)
		}
	}
	p := b.do("POST", "/dashboard/sign-in", url.Values{"api_key": {e.key}})
	if p.status != http.StatusTooManyRequests || p.header.Get("Retry-After") == "" || !strings.Contains(p.body, "too many failed sign-ins") ||
		!strings.Contains(p.body, `name="api_key"`) {
		t.Fatalf("the right key after ten failures: %d %v\n%.500s", p.status, p.header, p.body)
	}
	e.clock.Advance(time.Minute)
	b.signIn(e.key)
	failed := 0
	for _, r := range e.logs.Records(t) {
		if r.Msg == "session: a sign-in failed" {
			failed++
		}
		for _, v := range r.Attrs {
			if strings.Contains(fmt.Sprint(v), wrong) || strings.Contains(fmt.Sprint(v), e.key) {
				t.Errorf("a log record holds a key: %s %v", r.Msg, r.Attrs)
			}
		}
	}
	if failed != 10 {
		t.Errorf("%d failed sign-ins logged, want 10", failed)
	}
}
