package dashboard_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/dashboard"
	"github.com/tollgate-dev/tollgate/session"
)

// postJSON posts body as JSON to path with header name/value pairs.
func (b *browser) postJSON(path, body string, hdr ...string) page {
	b.t.Helper()
	return b.send("POST", path, "application/json", body, hdr...)
}

// balance returns the remaining credits of the env's account.
func (e *env) balance(t *testing.T) int64 {
	t.Helper()
	a, err := e.mgr.OwnAccount(t.Context(), e.caller())
	if err != nil {
		t.Fatal(err)
	}
	return a.Balance.Remaining
}

// TestQueryCost: POST /dashboard/graphql/cost answers a query's APIs, cost, the plan's
// ceiling, the balance, and the gateway's refusal, before anything runs; it charges
// nothing. It needs the session, its CSRF token, the dashboard's origin and JSON.
func TestQueryCost(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)
	csrf := b.signIn(e.key)
	anon := e.browser(t)
	type answer struct {
		APIs []struct {
			ID, Field string
			Cost      int64
		}
		Credits int64
		Plan    string
		MaxAPIs int `json:"max_apis"`
		Balance int64
		Renewal string
		Refusal *struct {
			Status        int
			Code, Message string
		}
		Error string
	}
	tests := []struct {
		name    string
		b       *browser
		body    string
		hdr     []string
		status  int
		apis    string // the APIs' ids, space-separated
		credits int64
		code    string // the refusal's code
		message string // a fragment of the refusal's or the error's message
	}{
		{name: "one API", b: b, body: `{"query":"{ alpha }"}`, status: 200, apis: "alpha", credits: 1},
		{name: "aliases of one API", b: b, body: `{"query":"{ a: alpha b: alpha }"}`, status: 200, apis: "alpha", credits: 1},
		{name: "two APIs", b: b, body: `{"query":"{ beta alpha }"}`, status: 200, apis: "alpha beta", credits: 3},
		{name: "variables", b: b, body: `{"query":"query($t: String!) { hash(text: $t) { hash } }","variables":{"t":"x"}}`, status: 200, apis: "hash", credits: 1},
		{name: "the operation named", b: b, body: `{"query":"query A { alpha } query B { beta }","operationName":"B"}`, status: 200, apis: "beta", credits: 2},
		{name: "introspection", b: b, body: `{"query":"{ __schema { queryType { name } } }"}`, status: 200},
		{name: "over the ceiling", b: b, body: `{"query":"{ alpha beta hash(text: \"x\") { hash } vault }"}`, status: 200,
			apis: "alpha beta hash vault", credits: 5004, code: "PLAN_LIMIT_EXCEEDED", message: "allows 3 per query"},
		{name: "over the balance", b: b, body: `{"query":"{ vault }"}`, status: 200, apis: "vault", credits: 5000,
			code: "INSUFFICIENT_CREDITS", message: "costs 5000 and 1000 remain"},
		{name: "a file API", b: b, body: `{"query":"{ imageinfo(url: \"https://example.com/a.png\") { width } }"}`, status: 200,
			apis: "image-info", credits: 2, code: "FILE_UPLOAD_NOT_SUPPORTED", message: "POST /v1/image-info"},
		{name: "a syntax error", b: b, body: `{"query":"{ alpha"}`, status: 200, code: "GRAPHQL_PARSE_FAILED", message: "syntax error"},
		{name: "unauthenticated", b: anon, body: `{"query":"{ alpha }"}`, status: 401, message: "not signed in"},
		{name: "cross-site", b: b, body: `{"query":"{ alpha }"}`, hdr: []string{"Sec-Fetch-Site", "cross-site"}, status: 403, message: "another site"},
		{name: "another origin", b: b, body: `{"query":"{ alpha }"}`, hdr: []string{"Origin", "https://evil.example"}, status: 403, message: "another site"},
		{name: "without the CSRF token", b: b, body: `{"query":"{ alpha }"}`, hdr: []string{"X-CSRF-Token", ""}, status: 403, message: "security token"},
		{name: "with another token", b: b, body: `{"query":"{ alpha }"}`, hdr: []string{"X-CSRF-Token", "forged"}, status: 403, message: "security token"},
		{name: "not JSON", b: b, body: `{"query":"{ alpha }"}`, hdr: []string{"Content-Type", "text/plain"}, status: 415, message: "application/json"},
		{name: "not an object", b: b, body: `["{ alpha }"]`, status: 400, message: "JSON object"},
		{name: "too large", b: b, body: `{"query":"` + strings.Repeat("x", 300<<10) + `"}`, status: 413, message: "256 KiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hdr := append([]string{"X-CSRF-Token", csrf}, tt.hdr...)
			p := tt.b.postJSON("/dashboard/graphql/cost", tt.body, hdr...)
			if p.status != tt.status {
				t.Fatalf("status %d, want %d\n%s", p.status, tt.status, p.body)
			}
			if p.header.Get("Content-Type") != "application/json" || p.header.Get("Cache-Control") != "no-store" {
				t.Errorf("Content-Type %q, Cache-Control %q", p.header.Get("Content-Type"), p.header.Get("Cache-Control"))
			}
			var a answer
			if err := json.Unmarshal([]byte(p.body), &a); err != nil {
				t.Fatalf("%v\n%s", err, p.body)
			}
			if tt.status != http.StatusOK {
				if !strings.Contains(a.Error, tt.message) {
					t.Errorf("error %q, want %q", a.Error, tt.message)
				}
				return
			}
			var ids []string
			for _, api := range a.APIs {
				ids = append(ids, api.ID)
			}
			if strings.Join(ids, " ") != tt.apis || a.Credits != tt.credits {
				t.Errorf("APIs %v costing %d, want %q costing %d", ids, a.Credits, tt.apis, tt.credits)
			}
			if a.Plan != "starter" || a.MaxAPIs != 3 || a.Balance != 1000 || a.Renewal == "" {
				t.Errorf("plan %q, max %d, balance %d, renewal %q", a.Plan, a.MaxAPIs, a.Balance, a.Renewal)
			}
			switch {
			case tt.code == "" && a.Refusal != nil:
				t.Errorf("refused: %+v", *a.Refusal)
			case tt.code != "" && (a.Refusal == nil || a.Refusal.Code != tt.code || !strings.Contains(a.Refusal.Message, tt.message)):
				t.Errorf("refusal %+v, want %s %q", a.Refusal, tt.code, tt.message)
			}
		})
	}
	if got := e.balance(t); got != 1000 {
		t.Errorf("the estimates charged: the balance is %d", got)
	}
}

// TestGraphQLWithTheSessionCookie: GraphQL behind session.Handler.Cookies serves the
// dashboard's session with its CSRF token, from the same origin, and charges the
// account; a key in a header wins over the cookie.
func TestGraphQLWithTheSessionCookie(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)
	csrf := b.signIn(e.key)
	_, _, otherKey, err := e.mgr.CreateAccount(t.Context(), accounts.Spec{ID: "other", Plan: "starter"})
	if err != nil {
		t.Fatal(err)
	}
	const q = `{"query":"{ beta }"}`
	p := b.postJSON("/v1/graphql", q, "X-CSRF-Token", csrf)
	if p.status != http.StatusOK || p.header.Get("X-Credits-Cost") != "2" || p.header.Get("X-Credits-Remaining") != "998" {
		t.Fatalf("with the cookie: %d cost %q remaining %q\n%s", p.status, p.header.Get("X-Credits-Cost"), p.header.Get("X-Credits-Remaining"), p.body)
	}
	for _, tt := range []struct {
		name string
		hdr  []string
	}{
		{"without the CSRF token", nil},
		{"with another CSRF token", []string{"X-CSRF-Token", "forged"}},
		{"from another site", []string{"X-CSRF-Token", csrf, "Sec-Fetch-Site", "cross-site"}},
	} {
		if p := b.postJSON("/v1/graphql", q, tt.hdr...); p.status != http.StatusForbidden {
			t.Errorf("%s: %d, want 403\n%s", tt.name, p.status, p.body)
		}
	}
	// A key in a header is the credential: the cookie is ignored, no CSRF token needed.
	p = b.postJSON("/v1/graphql", q, "X-Api-Key", otherKey)
	if p.status != http.StatusOK || p.header.Get("X-Credits-Remaining") != "998" {
		t.Fatalf("with a key: %d remaining %q\n%s", p.status, p.header.Get("X-Credits-Remaining"), p.body)
	}
	other, err := e.mgr.OwnAccount(t.Context(), tollgate.Caller{Credential: auth.Credential{Kind: auth.APIKeyHeader, Value: otherKey}})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.balance(t); got != 998 || other.Balance.Remaining != 998 {
		t.Errorf("balances: the session's account %d, the key's %d; want 998 each", got, other.Balance.Remaining)
	}
}

// TestExplorerAndReferencePages: the pages' policies allow only the dashboard's own
// scripts, never inline script or eval, forbid framing, and the explorer's allows
// styles by a nonce that is new on every response and given to its script; the pages
// hold the CSRF token but no key.
func TestExplorerAndReferencePages(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)
	b.signIn(e.key)
	nonceRE := regexp.MustCompile(`'nonce-([A-Za-z0-9_-]{22})'`)
	var nonces []string
	for range 2 {
		p := b.do("GET", "/dashboard/graphql", nil)
		if p.status != http.StatusOK {
			t.Fatalf("explorer: %d\n%s", p.status, p.body)
		}
		csp := p.header.Get("Content-Security-Policy")
		m := nonceRE.FindStringSubmatch(csp)
		if m == nil {
			t.Fatalf("the explorer's policy has no style nonce: %q", csp)
		}
		nonces = append(nonces, m[1])
		if want := strings.Replace(dashboard.ContentSecurityPolicy, "style-src 'self'", "style-src 'self' "+m[0], 1); csp != want {
			t.Errorf("explorer policy %q, want %q", csp, want)
		}
		for _, want := range []string{`<script src="assets/vendor/explorer.js" defer nonce="` + m[1] + `">`, `data-endpoint="/v1/graphql"`,
			`data-cost="graphql/cost"`, `aria-current="page">GraphQL`, `id="query-heading"`, `<label for="variables">`} {
			if !strings.Contains(p.body, want) {
				t.Errorf("the explorer lacks %q", want)
			}
		}
		if strings.Contains(p.body, e.key) || p.header.Get("Cache-Control") != "no-store" {
			t.Error("the explorer shows the key, or may be cached")
		}
	}
	if nonces[0] == nonces[1] {
		t.Error("two responses share a nonce")
	}
	p := b.do("GET", "/dashboard/reference", nil)
	if p.status != http.StatusOK || p.header.Get("Content-Security-Policy") != dashboard.ContentSecurityPolicy {
		t.Fatalf("reference: %d, policy %q", p.status, p.header.Get("Content-Security-Policy"))
	}
	for _, want := range []string{`<script src="assets/vendor/reference.js" defer>`, `href="assets/vendor/swagger-ui.css"`,
		`data-spec="/v1/openapi.json"`, `aria-current="page">API reference`} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the reference lacks %q", want)
		}
	}
	// Under Options.PublicURL's path, the pages fetch from the service's root there.
	sessH, err := session.NewHandler(e.mgr, nil)
	if err != nil {
		t.Fatal(err)
	}
	under, err := dashboard.NewHandler(e.mgr, sessH, &dashboard.Options{PublicURL: "https://api.example.com/base/", GraphQL: noEstimates{}})
	if err != nil {
		t.Fatal(err)
	}
	for page, want := range map[string]string{"/graphql": `data-endpoint="/base/v1/graphql"`, "/reference": `data-spec="/base/v1/openapi.json"`} {
		r := httptest.NewRequest("GET", page, nil)
		for _, c := range b.c.Jar.Cookies(mustURL(t, e.srv.URL)) {
			r.AddCookie(c)
		}
		w := httptest.NewRecorder()
		under.ServeHTTP(w, r)
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), want) {
			t.Errorf("%s under a public URL with a path: %d, want %s", page, w.Code, want)
		}
	}
	for _, page := range []string{"/dashboard/graphql", "/dashboard/reference"} {
		p := b.do("GET", page, nil)
		csp := p.header.Get("Content-Security-Policy")
		for _, bad := range []string{"unsafe-inline", "unsafe-eval", "http:", "https:", "*"} {
			if strings.Contains(csp, bad) {
				t.Errorf("%s: the policy allows %s: %q", page, bad, csp)
			}
		}
		if !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "script-src 'self';") {
			t.Errorf("%s: policy %q", page, csp)
		}
		if strings.Contains(p.body, "<script>") || strings.Contains(p.body, " style=") {
			t.Errorf("%s has inline script or style", page)
		}
		if anon := e.browser(t).do("GET", page, nil); anon.status != http.StatusSeeOther {
			t.Errorf("%s signed out: %d, want 303", page, anon.status)
		}
	}
}

// TestAssets: the embedded files are served with a strong ETag (304 on a match),
// Cache-Control: no-cache, and gzip to a browser that accepts it; the compressed and
// the plain bodies are the same file.
func TestAssets(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)
	b.c.Transport = &http.Transport{DisableCompression: true} // see the encoding as sent
	for _, name := range []string{"vendor/explorer.js", "vendor/reference.js", "vendor/swagger-ui.css", "vendor/LICENSES.txt", "explorer.css", "dashboard.js"} {
		t.Run(name, func(t *testing.T) {
			plain := b.do("GET", "/dashboard/assets/"+name, nil)
			zipped := b.do("GET", "/dashboard/assets/"+name, nil, "Accept-Encoding", "br, gzip;q=0.8")
			if plain.status != 200 || zipped.status != 200 {
				t.Fatalf("status %d, %d", plain.status, zipped.status)
			}
			if plain.header.Get("Content-Encoding") != "" || zipped.header.Get("Content-Encoding") != "gzip" {
				t.Fatalf("encodings %q and %q", plain.header.Get("Content-Encoding"), zipped.header.Get("Content-Encoding"))
			}
			zr, err := gzip.NewReader(strings.NewReader(zipped.body))
			if err != nil {
				t.Fatal(err)
			}
			unzipped, err := io.ReadAll(zr)
			if err != nil || !bytes.Equal(unzipped, []byte(plain.body)) || len(zipped.body) >= len(plain.body) {
				t.Fatalf("the gzip body (%d bytes) is not the file (%d bytes): %v", len(zipped.body), len(plain.body), err)
			}
			for _, p := range []page{plain, zipped} {
				if p.header.Get("Cache-Control") != "no-cache" || !strings.Contains(p.header.Get("Vary"), "Accept-Encoding") || p.header.Get("ETag") == "" {
					t.Errorf("headers %v", p.header)
				}
			}
			if plain.header.Get("ETag") == zipped.header.Get("ETag") {
				t.Error("the two encodings share an ETag")
			}
			if again := b.do("GET", "/dashboard/assets/"+name, nil, "If-None-Match", zipped.header.Get("ETag"), "Accept-Encoding", "gzip"); again.status != http.StatusNotModified {
				t.Errorf("If-None-Match: %d, want 304", again.status)
			}
			if refused := b.do("GET", "/dashboard/assets/"+name, nil, "Accept-Encoding", "gzip;q=0"); refused.header.Get("Content-Encoding") != "" {
				t.Error("gzip;q=0 got gzip")
			}
		})
	}
	if p := b.do("GET", "/dashboard/assets/vendor/nothing.js", nil); p.status != http.StatusNotFound {
		t.Errorf("an unknown asset: %d", p.status)
	}
}

// noEstimates is an Estimator for pages that never ask it.
type noEstimates struct{}

func (noEstimates) QueryCost(context.Context, tollgate.Caller, dashboard.Query) dashboard.QueryCost {
	panic("not asked")
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
