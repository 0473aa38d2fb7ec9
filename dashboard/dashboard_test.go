package dashboard_test

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/dashboard"
	"github.com/tollgate-dev/tollgate/session"
)

// shownValue returns the key value a secret page shows.
func shownValue(t *testing.T, p page) string {
	t.Helper()
	m := regexp.MustCompile(`id="key-value" type="text" readonly value="([0-9a-f-]{36})"`).FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("the page shows no key value (%d):\n%s", p.status, p.body)
	}
	return m[1]
}

// createKey creates a sub-key through the dashboard and returns its value and id.
func (b *browser) createKey(csrf string, form url.Values) (value, id string) {
	b.t.Helper()
	form.Set("csrf_token", csrf)
	p := b.do("POST", "/dashboard/keys", form)
	if p.status != http.StatusCreated {
		b.t.Fatalf("create: %d\n%s", p.status, p.body)
	}
	value = shownValue(b.t, p)
	m := regexp.MustCompile(`\(<code>([^<]+)</code>\) is created`).FindStringSubmatch(p.body)
	if m == nil {
		b.t.Fatalf("the created page names no key id:\n%s", p.body)
	}
	return value, m[1]
}

func TestSecurityHeaders(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)
	csrf := b.signIn(e.key)
	anon := e.browser(t)
	tests := []struct {
		name    string
		b       *browser
		method  string
		path    string
		form    url.Values
		status  int
		noStore bool
	}{
		{"sign-in page", anon, "GET", "/dashboard/sign-in", nil, 200, true},
		{"overview, signed out", anon, "GET", "/dashboard/", nil, 303, true},
		{"overview", b, "GET", "/dashboard/", nil, 200, true},
		{"keys", b, "GET", "/dashboard/keys", nil, 200, true},
		{"usage", b, "GET", "/dashboard/usage", nil, 200, true},
		{"usage, bad range", b, "GET", "/dashboard/usage?from=2030-02-01&to=2030-01-01", nil, 400, true},
		{"usage CSV", b, "GET", "/dashboard/usage.csv", nil, 200, true},
		{"audit log", b, "GET", "/dashboard/audit", nil, 200, true},
		{"MCP", b, "GET", "/dashboard/mcp", nil, 200, true},
		{"webhooks", b, "GET", "/dashboard/webhooks", nil, 200, true},
		{"added endpoint", b, "POST", "/dashboard/webhooks", url.Values{"url": {"https://example.com/hooks"}, "csrf_token": {csrf}}, 201, true},
		{"usage, signed out", anon, "GET", "/dashboard/usage", nil, 303, true},
		{"created key", b, "POST", "/dashboard/keys", url.Values{"name": {"ci"}, "csrf_token": {csrf}}, 201, true},
		{"refused post", b, "POST", "/dashboard/keys", url.Values{"name": {"ci"}}, 403, true},
		{"style sheet", anon, "GET", "/dashboard/assets/dashboard.css", nil, 200, false},
		{"script", anon, "GET", "/dashboard/assets/dashboard.js", nil, 200, false},
		{"unknown page", b, "GET", "/dashboard/nothing", nil, 404, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.b.do(tt.method, tt.path, tt.form)
			if p.status != tt.status {
				t.Fatalf("status %d, want %d\n%s", p.status, tt.status, p.body)
			}
			for name, want := range map[string]string{
				"Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
				"X-Content-Type-Options":  "nosniff",
				"Referrer-Policy":         "no-referrer",
			} {
				if got := p.header.Get(name); got != want {
					t.Errorf("%s: %q, want %q", name, got, want)
				}
			}
			if got := p.header.Get("Cache-Control"); tt.noStore && got != "no-store" {
				t.Errorf("Cache-Control: %q, want no-store", got)
			}
			if strings.Contains(p.body, "<script>") || strings.Contains(p.body, " style=") || strings.Contains(p.body, "onclick") {
				t.Errorf("the page has inline script or style, which the policy forbids:\n%s", p.body)
			}
		})
	}
	if dashboard.ContentSecurityPolicy != tests[0].b.do("GET", "/dashboard/sign-in", nil).header.Get("Content-Security-Policy") {
		t.Error("ContentSecurityPolicy is not the policy sent")
	}
}

// TestFormsNeedCSRF: a change is refused with 403, and nothing changes, unless it
// comes from the dashboard's origin with the session's CSRF token.
func TestFormsNeedCSRF(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)
	csrf := b.signIn(e.key)
	value, id := b.createKey(csrf, url.Values{"name": {"victim"}})
	other := e.browser(t)
	otherCSRF := other.signIn(e.key) // another session of the same account
	tests := []struct {
		name string
		form url.Values
		hdr  []string
		want string
	}{
		{"no token", url.Values{"key_id": {id}}, nil, "security token"},
		{"empty token", url.Values{"key_id": {id}, "csrf_token": {""}}, nil, "security token"},
		{"another session's token", url.Values{"key_id": {id}, "csrf_token": {otherCSRF}}, nil, "security token"},
		{"forged token", url.Values{"key_id": {id}, "csrf_token": {csrf[:len(csrf)-2] + "xx"}}, nil, "security token"},
		{"cross-site, with the token", url.Values{"key_id": {id}, "csrf_token": {csrf}}, []string{"Sec-Fetch-Site", "cross-site"}, "another site"},
		{"other origin, with the token", url.Values{"key_id": {id}, "csrf_token": {csrf}}, []string{"Origin", "https://evil.example"}, "another site"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, path := range []string{"/dashboard/revoke", "/dashboard/rotate", "/dashboard/keys", "/dashboard/sign-out"} {
				p := b.do("POST", path, tt.form, tt.hdr...)
				if p.status != http.StatusForbidden || !strings.Contains(p.body, tt.want) {
					t.Errorf("POST %s: %d, want 403 saying %q\n%s", path, p.status, tt.want, p.body)
				}
			}
		})
	}
	if got := e.call(t, "alpha", value); got != http.StatusOK {
		t.Fatalf("after the refused posts the key answers %d: something changed", got)
	}
	keys := b.do("GET", "/dashboard/keys", nil)
	if keys.status != http.StatusOK || strings.Count(keys.body, `data-field="state">active<`) != 2 {
		t.Fatalf("the session or a key did not survive the refused posts:\n%s", keys.body)
	}
	// Signed out, a post with a once-valid token is refused too.
	anon := e.browser(t)
	if p := anon.do("POST", "/dashboard/revoke", url.Values{"key_id": {id}, "csrf_token": {csrf}}); p.status != http.StatusForbidden {
		t.Errorf("a post without a session: %d, want 403", p.status)
	}
	// The real thing works.
	if p := b.do("POST", "/dashboard/revoke", url.Values{"key_id": {id}, "csrf_token": {csrf}}); p.status != http.StatusSeeOther {
		t.Fatalf("revoke with the token: %d\n%s", p.status, p.body)
	}
	if got := e.call(t, "alpha", value); got != http.StatusForbidden {
		t.Errorf("the revoked key answers %d, want 403", got)
	}
}

func TestSignIn(t *testing.T) {
	e := newEnv(t)
	admin := e.browser(t)
	csrf := admin.signIn(e.key)
	revoked, id := admin.createKey(csrf, url.Values{"name": {"old"}})
	if p := admin.do("POST", "/dashboard/revoke", url.Values{"key_id": {id}, "csrf_token": {csrf}}); p.status != http.StatusSeeOther {
		t.Fatalf("revoke: %d", p.status)
	}
	elsewhere, _ := admin.createKey(csrf, url.Values{"name": {"office"}, "allowed_ips": {"203.0.113.0/24"}})
	tests := []struct {
		name   string
		key    string
		hdr    []string
		status int
		says   string
	}{
		{"empty", "", nil, 400, "Enter your API key"},
		{"not a key", "hunter2", nil, 401, "is not an API key"},
		{"unknown key", "00000000-0000-4000-8000-000000000000", nil, 401, ""},
		{"revoked key", revoked, nil, 403, "revoked"},
		{"key not allowed from this address", elsewhere, nil, 403, "127.0.0.1"},
		{"from another site", e.key, []string{"Sec-Fetch-Site", "cross-site"}, 403, "another origin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := e.browser(t)
			p := b.do("POST", "/dashboard/sign-in", url.Values{"api_key": {tt.key}}, tt.hdr...)
			if p.status != tt.status || !strings.Contains(p.body, tt.says) || !strings.Contains(p.body, `role="alert"`) {
				t.Fatalf("status %d, want %d with a message saying %q\n%s", p.status, tt.status, tt.says, p.body)
			}
			if tt.key != "" && strings.Contains(p.body, tt.key) {
				t.Error("the page echoes the key")
			}
			if c := p.header.Get("Set-Cookie"); c != "" {
				t.Errorf("a refused sign-in set a cookie: %s", c)
			}
			if again := b.do("GET", "/dashboard/", nil); again.status != http.StatusSeeOther {
				t.Errorf("after a refused sign-in the overview answers %d", again.status)
			}
		})
	}
	for _, r := range e.logs.Records(t) {
		if r.Level == "ERROR" {
			t.Errorf("a refused sign-in was logged at ERROR: %s %v", r.Msg, r.Attrs)
		}
	}

	// A good key signs in, with the session cookie of package session; signing out
	// ends the session.
	b := e.browser(t)
	csrf = b.signIn(e.key)
	u, _ := url.Parse(e.srv.URL)
	if cs := b.c.Jar.Cookies(u); len(cs) != 1 || cs[0].Name != session.InsecureCookieName {
		t.Fatalf("cookies %v", cs)
	}
	if p := b.do("GET", "/dashboard/sign-in", nil); p.status != http.StatusSeeOther {
		t.Errorf("the sign-in page of a signed-in person: %d, want a redirect to the overview", p.status)
	}
	if p := b.do("POST", "/dashboard/sign-out", url.Values{"csrf_token": {csrf}}); p.status != http.StatusSeeOther ||
		p.header.Get("Location") != "sign-in?signed_out=1" {
		t.Fatalf("sign out: %d %q", p.status, p.header.Get("Location"))
	}
	if p := b.do("GET", "/dashboard/", nil); p.status != http.StatusSeeOther || p.header.Get("Location") != "sign-in" {
		t.Errorf("after signing out the overview answers %d %q", p.status, p.header.Get("Location"))
	}
}

// TestValueShownOnce: a new or rotated key's value is on the page that answers the
// change, and on no other page, URL or log line.
func TestValueShownOnce(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)
	csrf := b.signIn(e.key)
	value, id := b.createKey(csrf, url.Values{"name": {"ci"}, "api": {"alpha"}, "channel": {"rest"},
		"allowed_ips": {"127.0.0.1, 10.0.0.0/8"}, "expires": {"2031-01-01"}})
	if got := e.call(t, "alpha", value); got != http.StatusOK {
		t.Errorf("the new key calls alpha: %d", got)
	}
	if got := e.call(t, "beta", value); got != http.StatusForbidden {
		t.Errorf("the new key calls beta: %d, want 403", got)
	}
	rotated := b.do("POST", "/dashboard/rotate", url.Values{"key_id": {id}, "csrf_token": {csrf}})
	if rotated.status != http.StatusOK {
		t.Fatalf("rotate: %d\n%s", rotated.status, rotated.body)
	}
	newValue := shownValue(t, rotated)
	if newValue == value {
		t.Fatal("the rotation showed the old value")
	}
	if got := e.call(t, "alpha", value); got != http.StatusUnauthorized {
		t.Errorf("the old value answers %d, want 401", got)
	}
	if got := e.call(t, "alpha", newValue); got != http.StatusOK {
		t.Errorf("the new value answers %d, want 200", got)
	}
	var seen []page
	for _, path := range []string{"/dashboard/", "/dashboard/keys", "/dashboard/rotate?key=" + id, "/dashboard/revoke?key=" + id} {
		p := b.do("GET", path, nil)
		if p.status != http.StatusOK {
			t.Fatalf("GET %s: %d", path, p.status)
		}
		seen = append(seen, p)
	}
	for _, p := range seen {
		for _, v := range []string{e.key, value, newValue} {
			if strings.Contains(p.body, v) {
				t.Errorf("a later page shows a key value:\n%s", p.body)
			}
		}
	}
	keys := seen[1].body
	for _, want := range []string{"APIs: alpha", "Channels: rest", "Addresses: 10.0.0.0/8, 127.0.0.1/32", "2031-01-01 00:00 UTC"} {
		if !strings.Contains(keys, want) {
			t.Errorf("the keys table lacks %q", want)
		}
	}
	logged := fmt.Sprint(e.logs.Records(t))
	for _, v := range []string{e.key, value, newValue} {
		if strings.Contains(logged, v) {
			t.Errorf("a key value was logged")
		}
	}
}

// TestRefusals: the service's refusals are shown as the person's mistakes, with its
// message and a 4xx, and the form keeps what was typed.
func TestRefusals(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)
	csrf := b.signIn(e.key)
	tests := []struct {
		name   string
		form   url.Values
		status int
		says   string
	}{
		{"bad address", url.Values{"name": {"x"}, "allowed_ips": {"not-an-ip"}}, 400, "not-an-ip"},
		{"bad date", url.Values{"name": {"x"}, "expires": {"tomorrow"}}, 400, "YYYY-MM-DD"},
		{"unknown channel", url.Values{"name": {"x"}, "channel": {"smoke"}}, 400, "smoke"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.form.Set("csrf_token", csrf)
			p := b.do("POST", "/dashboard/keys", tt.form)
			if p.status != tt.status || !strings.Contains(p.body, tt.says) || !strings.Contains(p.body, "The key was not created") {
				t.Fatalf("status %d, want %d saying %q\n%s", p.status, tt.status, tt.says, p.body)
			}
		})
	}
	for _, tt := range []struct{ path, form string }{
		{"/dashboard/rotate?key=nope", ""}, {"/dashboard/revoke?key=nope", ""},
	} {
		if p := b.do("GET", tt.path, nil); p.status != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", tt.path, p.status)
		}
	}
	// The primary key cannot be revoked: 403 with the service's reason.
	keys := b.do("GET", "/dashboard/keys", nil)
	primary := regexp.MustCompile(`data-key-id="([^"]+)"`).FindStringSubmatch(keys.body)
	if primary == nil {
		t.Fatal("no key row")
	}
	if p := b.do("POST", "/dashboard/revoke", url.Values{"key_id": {primary[1]}, "csrf_token": {csrf}}); p.status != http.StatusForbidden ||
		!strings.Contains(p.body, "primary key cannot be revoked") {
		t.Errorf("revoking the primary key: %d\n%s", p.status, p.body)
	}
	// Rotating the key the session was started with ends the session: the value is
	// shown, and the next page asks to sign in again.
	p := b.do("POST", "/dashboard/rotate", url.Values{"key_id": {primary[1]}, "csrf_token": {csrf}})
	if p.status != http.StatusOK || !strings.Contains(p.body, "your session has ended") {
		t.Fatalf("rotating the session's key: %d\n%s", p.status, p.body)
	}
	if p := b.do("GET", "/dashboard/keys", nil); p.status != http.StatusSeeOther || p.header.Get("Location") != "sign-in?ended=1" {
		t.Errorf("after rotating the session's key: %d %q", p.status, p.header.Get("Location"))
	}
	for _, r := range e.logs.Records(t) {
		if r.Level == "ERROR" {
			t.Errorf("a refusal was logged at ERROR: %s %v", r.Msg, r.Attrs)
		}
	}
}
