package dashboard_test

import (
	"fmt"
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/auth"
)

// TestKeysPaged checks that the keys page shows the account's keys a page at a time,
// oldest first, with a link to the next page and one back to the first, so that an
// account with many keys is never read whole; a cursor whose key is gone leads back to
// the first page.
func TestKeysPaged(t *testing.T) {
	e := newEnv(t)
	for i := range 70 {
		if _, _, err := e.mgr.CreateKey(t.Context(), "acme", accounts.NewKey{Name: fmt.Sprintf("k%03d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	b := e.browser(t)
	b.signIn(e.key)
	rows := regexp.MustCompile(`<tr data-key-id="([^"]+)"`)
	next := regexp.MustCompile(`<a href="(keys\?cursor=[^"]+)" rel="next">`)

	first := b.do("GET", "/dashboard/keys", nil)
	if first.status != http.StatusOK {
		t.Fatalf("GET /dashboard/keys: %d", first.status)
	}
	if n := len(rows.FindAllStringSubmatch(first.body, -1)); n != auth.DefaultKeyPage {
		t.Errorf("the first page shows %d keys, want %d", n, auth.DefaultKeyPage)
	}
	if !strings.Contains(first.body, ">k000<") || strings.Contains(first.body, ">k060<") {
		t.Error("the first page does not show the oldest keys")
	}
	m := next.FindStringSubmatch(first.body)
	if m == nil {
		t.Fatalf("the first page has no link to the next:\n%s", first.body)
	}
	second := b.do("GET", "/dashboard/"+html.UnescapeString(m[1]), nil)
	if second.status != http.StatusOK {
		t.Fatalf("GET the second page: %d", second.status)
	}
	if n := len(rows.FindAllStringSubmatch(second.body, -1)); n != 71-auth.DefaultKeyPage {
		t.Errorf("the second page shows %d keys, want %d", n, 71-auth.DefaultKeyPage)
	}
	if next.MatchString(second.body) || !strings.Contains(second.body, `<a href="keys">First keys</a>`) {
		t.Errorf("the last page: want a link to the first page and none to a next one")
	}
	if r := b.do("GET", "/dashboard/keys?cursor=key_gone", nil); r.status != http.StatusSeeOther || r.header.Get("Location") != "keys" {
		t.Errorf("a cursor that names no key: %d to %q, want 303 to the first page", r.status, r.header.Get("Location"))
	}
}
