package dashboard_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/accounts"
)

// TestAuditLog: the account's entries, newest first, a page of 50 at a time with a
// link to the next; a sub-key's session is refused with the service's reason, and a
// cursor that no page gave is a 400.
func TestAuditLog(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)
	csrf := b.signIn(e.key)
	sub, subID := b.createKey(csrf, url.Values{"name": {"limited"}, "api": {"alpha"}, "allowed_ips": {"127.0.0.1"}})
	for i := range 55 {
		if _, _, err := e.mgr.CreateOwnKey(t.Context(), e.caller(), accounts.NewKey{Name: "bulk-" + strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	first := b.do("GET", "/dashboard/audit", nil)
	if first.status != http.StatusOK || !strings.Contains(first.body, `aria-current="page">Audit log`) {
		t.Fatalf("audit: %d\n%s", first.status, first.body)
	}
	rows := strings.Count(first.body, "<tr data-action=")
	if rows != 50 {
		t.Errorf("the first page has %d entries, want 50", rows)
	}
	if !strings.Contains(first.body, "bulk-54") || strings.Contains(first.body, ">limited <code") {
		t.Error("the first page is not the newest entries")
	}
	next := regexp.MustCompile(`href="(audit\?cursor=[^"]+)" rel="next"`).FindStringSubmatch(first.body)
	if next == nil {
		t.Fatalf("no link to the next page:\n%s", first.body)
	}
	second := b.do("GET", "/dashboard/"+html.UnescapeString(next[1]), nil)
	if second.status != http.StatusOK || !strings.Contains(second.body, subID) || !strings.Contains(second.body, "127.0.0.1") ||
		!strings.Contains(second.body, `&#34;apis&#34;:[&#34;alpha&#34;]`) {
		t.Fatalf("the second page lacks the sub-key's creation with its restrictions and address:\n%s", second.body)
	}
	for _, p := range []page{first, second} {
		for _, v := range []string{e.key, sub} {
			if strings.Contains(p.body, v) {
				t.Error("the audit page shows a key value")
			}
		}
	}
	if p := b.do("GET", "/dashboard/audit?cursor=forged", nil); p.status != http.StatusBadRequest || !strings.Contains(p.body, `role="alert"`) {
		t.Errorf("a forged cursor: %d, want 400 with a message\n%s", p.status, p.body)
	}

	sb := e.browser(t)
	sb.signIn(sub)
	refused := sb.do("GET", "/dashboard/audit", nil)
	if refused.status != http.StatusForbidden || !strings.Contains(refused.body, "sub-key cannot read the audit log") ||
		strings.Contains(refused.body, "<tr data-action=") {
		t.Errorf("a sub-key's session: %d, want 403 saying why\n%s", refused.status, refused.body)
	}
	for _, r := range e.logs.Records(t) {
		if r.Level == "ERROR" {
			t.Errorf("logged at ERROR: %s %v", r.Msg, r.Attrs)
		}
	}
}
