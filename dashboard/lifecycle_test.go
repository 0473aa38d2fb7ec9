package dashboard_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/accounts"
)

// TestSuspendedAccount: the holder of a suspended account signs in and reads every
// page, each with the banner that says the account is suspended and what to do; a key
// cannot be created meanwhile, and the page says why. Once reactivated, the banner is
// gone. A closed account cannot sign in, and a session of it ends, as with a revoked
// key.
func TestSuspendedAccount(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	b := e.browser(t)
	csrf := b.signIn(e.key)
	const banner = "This account is suspended."
	if p := b.do("GET", "/dashboard/", nil); strings.Contains(p.body, banner) {
		t.Fatal("an active account's overview shows the suspension banner")
	}
	if _, _, err := e.mgr.CreateKey(ctx, "acme", accounts.NewKey{Name: "ci"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.mgr.SuspendAccount(ctx, "acme", "unpaid invoice"); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/dashboard/", "/dashboard/keys", "/dashboard/usage", "/dashboard/audit", "/dashboard/apis", "/dashboard/webhooks"} {
		p := b.do("GET", path, nil)
		if p.status != http.StatusOK || !strings.Contains(p.body, banner) || !strings.Contains(p.body, "Contact the operator") {
			t.Errorf("%s: %d, want the page with the suspension banner\n%.600s", path, p.status, p.body)
		}
		if strings.Contains(p.body, "unpaid invoice") {
			t.Errorf("%s shows the operator's reason", path)
		}
	}
	keys := b.do("GET", "/dashboard/keys", nil)
	if strings.Contains(keys.body, `action="keys"`) || strings.Contains(keys.body, `href="rotate?`) || !strings.Contains(keys.body, `href="revoke?`) {
		t.Errorf("the keys page of a suspended account offers to create or rotate keys, or not to revoke them:\n%s", keys.body)
	}
	p := b.do("POST", "/dashboard/keys", url.Values{"name": {"new"}, "csrf_token": {csrf}})
	if p.status != http.StatusForbidden || !strings.Contains(p.body, "The key was not created") || !strings.Contains(p.body, "suspended") {
		t.Errorf("creating a key: %d, want 403 saying the account is suspended\n%s", p.status, p.body)
	}
	// A new sign-in works too.
	other := e.browser(t)
	other.signIn(e.key)

	if _, err := e.mgr.ReactivateAccount(ctx, "acme", ""); err != nil {
		t.Fatal(err)
	}
	if p := b.do("GET", "/dashboard/", nil); p.status != http.StatusOK || strings.Contains(p.body, banner) {
		t.Errorf("after the reactivation: %d, banner shown: %v", p.status, strings.Contains(p.body, banner))
	}

	if _, err := e.mgr.CloseAccount(ctx, "acme", "the customer left"); err != nil {
		t.Fatal(err)
	}
	if p := b.do("GET", "/dashboard/", nil); p.status != http.StatusSeeOther || p.header.Get("Location") != "sign-in?ended=1" {
		t.Errorf("a session of the closed account: %d %q, want sent to sign in", p.status, p.header.Get("Location"))
	}
	p = e.browser(t).do("POST", "/dashboard/sign-in", url.Values{"api_key": {e.key}})
	if p.status != http.StatusForbidden || !strings.Contains(p.body, "revoked") {
		t.Errorf("signing in to the closed account: %d, want 403 as a revoked key\n%s", p.status, p.body)
	}
}
