package dashboard_test

import (
	"encoding/csv"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/accounts"
)

// usageTotal reads a total of the usage page's table.
func usageTotal(t *testing.T, p page, field string) int64 {
	t.Helper()
	m := regexp.MustCompile(`data-field="` + field + `" data-value="(\d+)"`).FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("the page has no %s (%d):\n%s", field, p.status, p.body)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}

// TestUsage: the usage page and its CSV give the figures of OwnUsage, a sub-key sees
// only its own calls, the CSV names keys by id and name and never by value, and a bad
// range is the person's mistake (400 with the service's message).
func TestUsage(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)
	csrf := b.signIn(e.key)
	sub, subID := b.createKey(csrf, url.Values{"name": {"=evil()"}})
	for _, c := range []struct{ api, key string }{{"alpha", e.key}, {"alpha", e.key}, {"beta", e.key}, {"beta", sub}} {
		if got := e.call(t, c.api, c.key); got != http.StatusOK {
			t.Fatalf("call %s: %d", c.api, got)
		}
	}
	if got := e.call(t, "nothing", e.key); got != http.StatusNotFound {
		t.Fatalf("call of an unknown API: %d", got)
	}
	if err := e.rec.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}

	p := b.do("GET", "/dashboard/usage", nil)
	if p.status != http.StatusOK {
		t.Fatalf("usage: %d\n%s", p.status, p.body)
	}
	if got := usageTotal(t, p, "total-calls"); got != 4 {
		t.Errorf("total calls %d, want 4", got)
	}
	if got := usageTotal(t, p, "total-credits"); got != 1+1+2+2 {
		t.Errorf("total credits %d, want 6", got)
	}
	for _, want := range []string{`aria-current="page">Usage`, `<svg class="chart"`, "p95 ms", `usage.csv?api=&amp;by=api&amp;from=2029-12-17&amp;interval=day&amp;to=2030-01-15`} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the usage page lacks %q\n%s", want, p.body)
		}
	}
	if f := b.do("GET", "/dashboard/usage?api=beta&by=key&interval=hour&from=2030-01-15&to=2030-01-15", nil); usageTotal(t, f, "total-credits") != 4 ||
		!strings.Contains(f.body, subID) {
		t.Errorf("beta by key, by hour: want 4 credits and the sub-key's row\n%s", f.body)
	}

	// The CSV, grouped by key.
	c := b.do("GET", "/dashboard/usage.csv?by=key", nil)
	if c.status != http.StatusOK || !strings.HasPrefix(c.header.Get("Content-Type"), "text/csv") ||
		!strings.HasPrefix(c.header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("csv: %d %q %q", c.status, c.header.Get("Content-Type"), c.header.Get("Content-Disposition"))
	}
	recs, err := csv.NewReader(strings.NewReader(c.body)).ReadAll()
	if err != nil || len(recs) < 2 || strings.Join(recs[0], ",") != "start,key_id,key_name,calls,credits,errors,p50_ms,p95_ms,p99_ms" {
		t.Fatalf("csv %v:\n%s", err, c.body)
	}
	var calls int64
	for _, r := range recs[1:] {
		n, _ := strconv.ParseInt(r[3], 10, 64)
		calls += n
		if r[1] == subID && r[2] != "'=evil()" {
			t.Errorf("the sub-key's name %q is not kept from being a formula", r[2])
		}
	}
	if calls != 4 {
		t.Errorf("the CSV counts %d calls, want 4", calls)
	}
	for _, v := range []string{e.key, sub} {
		if strings.Contains(c.body, v) {
			t.Error("the CSV holds a key value")
		}
	}

	// A sub-key's session sees only its own calls.
	sb := e.browser(t)
	sb.signIn(sub)
	if sp := sb.do("GET", "/dashboard/usage", nil); usageTotal(t, sp, "total-calls") != 1 {
		t.Errorf("the sub-key's session sees %d calls, want 1", usageTotal(t, sp, "total-calls"))
	}

	// Mistakes: 400 with a message, never 5xx.
	tests := []struct{ name, query, says string }{
		{"bad date", "from=yesterday", "YYYY-MM-DD"},
		{"end before start", "from=2030-01-10&to=2030-01-01", "must be after its start"},
		{"range too long by hour", "interval=hour&from=2029-01-01&to=2030-01-01", "at most 31 days"},
		{"unknown interval", "interval=week", "hour or day"},
		{"unknown grouping", "by=outcome", "api or key"},
		{"unknown API", "api=nope", "catalog"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := b.do("GET", "/dashboard/usage?"+tt.query, nil)
			if p.status != http.StatusBadRequest || !strings.Contains(p.body, tt.says) || !strings.Contains(p.body, `role="alert"`) {
				t.Errorf("page: %d, want 400 saying %q\n%s", p.status, tt.says, p.body)
			}
			if c := b.do("GET", "/dashboard/usage.csv?"+tt.query, nil); c.status != http.StatusBadRequest || !strings.Contains(c.body, tt.says) {
				t.Errorf("csv: %d %q, want 400 saying %q", c.status, c.body, tt.says)
			}
		})
	}
	for _, r := range e.logs.Records(t) {
		if r.Level == "ERROR" {
			t.Errorf("logged at ERROR: %s %v", r.Msg, r.Attrs)
		}
	}
}

// TestUsagePages: a table of more rows than a page holds is shown a page at a time,
// with links to the pages around it; the totals and the charts are those of every row.
func TestUsagePages(t *testing.T) {
	e := newEnv(t)
	// 260 hours with calls of alpha and beta, from 2030-01-04: 520 rows by hour and API.
	now := e.clock.Now()
	e.clock.Set(time.Date(2030, 1, 4, 0, 30, 0, 0, time.UTC))
	for range 260 {
		for _, api := range []string{"alpha", "beta"} {
			if got := e.call(t, api, e.key); got != http.StatusOK {
				t.Fatalf("call %s: %d", api, got)
			}
		}
		e.clock.Advance(time.Hour)
	}
	e.clock.Set(now)
	if err := e.rec.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	b := e.browser(t)
	b.signIn(e.key)
	rowsOf := func(p page) int { return strings.Count(p.body, `<tr><th scope="row">20`) }
	const form = "interval=hour&by=api&from=2030-01-01&to=2030-01-15"
	for _, tt := range []struct {
		page       string
		rows       int
		says       string
		prev, next bool
	}{
		{"", 500, "Rows 1 to 500 of 520", false, true},
		{"1", 500, "Rows 1 to 500 of 520", false, true},
		{"2", 20, "Rows 501 to 520 of 520", true, false},
		{"3", 500, "Rows 1 to 500 of 520", false, true}, // past the rows: the first page
		{"-1", 500, "Rows 1 to 500 of 520", false, true},
		{"x", 500, "Rows 1 to 500 of 520", false, true},
	} {
		p := b.do("GET", "/dashboard/usage?"+form+"&page="+tt.page, nil)
		if p.status != http.StatusOK {
			t.Fatalf("page %q: %d\n%s", tt.page, p.status, p.body)
		}
		if got := rowsOf(p); got != tt.rows {
			t.Errorf("page %q: %d rows, want %d", tt.page, got, tt.rows)
		}
		if !strings.Contains(p.body, tt.says) {
			t.Errorf("page %q does not say %q", tt.page, tt.says)
		}
		if got := strings.Contains(p.body, `rel="prev"`); got != tt.prev {
			t.Errorf("page %q: a link to the previous page: %v, want %v", tt.page, got, tt.prev)
		}
		if got := strings.Contains(p.body, `rel="next"`); got != tt.next {
			t.Errorf("page %q: a link to the next page: %v, want %v", tt.page, got, tt.next)
		}
		if tt.next && !strings.Contains(p.body, `href="usage?api=&amp;by=api&amp;from=2030-01-01&amp;interval=hour&amp;page=2&amp;to=2030-01-15"`) {
			t.Errorf("page %q: the link to page 2 does not keep the form", tt.page)
		}
		if calls, credits := usageTotal(t, p, "total-calls"), usageTotal(t, p, "total-credits"); calls != 520 || credits != 260*(1+2) {
			t.Errorf("page %q: totals %d calls, %d credits; want those of every row: 520, 780", tt.page, calls, credits)
		}
	}
}

// TestOverviewCredits: the overview shows the balance's two parts, what is left of the
// month's allowance and the granted credits, and when the next grant lapses.
func TestOverviewCredits(t *testing.T) {
	e := newEnv(t)
	lapse := e.clock.Now().Add(48 * time.Hour)
	if _, err := e.mgr.AdjustCredits(t.Context(), "acme", 40, "prepaid", &accounts.CreditOptions{ExpiresAt: lapse}); err != nil {
		t.Fatal(err)
	}
	b := e.browser(t)
	b.signIn(e.key)
	p := b.do("GET", "/dashboard/", nil)
	if p.status != http.StatusOK {
		t.Fatalf("overview: %d\n%s", p.status, p.body)
	}
	remaining, granted, allowance := usageTotal(t, p, "credits-remaining"), usageTotal(t, p, "credits-granted"), usageTotal(t, p, "credits-allowance")
	if granted != 40 || remaining != allowance+40 {
		t.Errorf("remaining %d, granted %d, allowance left %d: want 40 granted on top of the allowance", remaining, granted, allowance)
	}
	if got := usageTotal(t, p, "grants-lapsing"); got != 40 || !strings.Contains(p.body, `data-field="grants-lapse" data-value="2030-01-17T12:00:00Z"`) {
		t.Errorf("the next lapse: %d credits, want 40 on 2030-01-17\n%s", got, p.body)
	}
}
