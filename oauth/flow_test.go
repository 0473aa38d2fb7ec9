package oauth_test

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/oauth"
	"github.com/tollgate-dev/tollgate/oauth/oauthstore"
)

const callback = "http://127.0.0.1:9000/callback"

func TestMetadata(t *testing.T) {
	h := newHarness(t)
	resp, err := http.Get(h.issuer + "/.well-known/oauth-authorization-server")
	must(t, err)
	a := read(t, resp)
	if a.status != http.StatusOK || a.header.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("metadata: %d, CORS %q", a.status, a.header.Get("Access-Control-Allow-Origin"))
	}
	want := map[string]any{
		"issuer":                                         h.issuer,
		"authorization_endpoint":                         h.issuer + "/oauth/authorize",
		"token_endpoint":                                 h.issuer + "/oauth/token",
		"registration_endpoint":                          h.issuer + "/oauth/register",
		"revocation_endpoint":                            h.issuer + "/oauth/revoke",
		"code_challenge_methods_supported":               []any{"S256"},
		"response_types_supported":                       []any{"code"},
		"grant_types_supported":                          []any{"authorization_code", "refresh_token"},
		"token_endpoint_auth_methods_supported":          []any{"none"},
		"client_id_metadata_document_supported":          true,
		"authorization_response_iss_parameter_supported": true,
	}
	for k, v := range want {
		if got := a.json[k]; !equalJSON(got, v) {
			t.Errorf("metadata %s = %v, want %v", k, got, v)
		}
	}
}

func equalJSON(a, b any) bool {
	as, aok := a.([]any)
	bs, bok := b.([]any)
	if aok && bok {
		return slices.Equal(as, bs)
	}
	return a == b
}

func TestProtectedResourceMetadata(t *testing.T) {
	h := newHarness(t)
	resp, err := http.Get(h.issuer + "/.well-known/oauth-protected-resource/v1/mcp")
	must(t, err)
	a := read(t, resp)
	if a.status != http.StatusOK || a.json["resource"] != h.resource ||
		!equalJSON(a.json["authorization_servers"], []any{h.issuer}) || !equalJSON(a.json["bearer_methods_supported"], []any{"header"}) {
		t.Errorf("resource metadata: %d %s", a.status, a.body)
	}
	want := `Bearer resource_metadata="` + h.issuer + `/.well-known/oauth-protected-resource/v1/mcp", scope="mcp"`
	if got := h.srv.Challenge(h.resource); got != want {
		t.Errorf("Challenge = %s, want %s", got, want)
	}
	if got := h.srv.InvalidTokenChallenge(h.resource); !strings.HasPrefix(got, `Bearer error="invalid_token"`) || !strings.Contains(got, `resource_metadata="`+h.issuer) {
		t.Errorf("InvalidTokenChallenge = %s", got)
	}
	rec := newRecorder()
	h.srv.ProtectedResourceMetadata("https://elsewhere.example/v1/mcp").ServeHTTP(rec, httpRequest("GET", "/"))
	if rec.Code != http.StatusNotFound {
		t.Errorf("metadata of a resource that is not protected: %d, want 404", rec.Code)
	}
}

// TestFullFlow runs the authorization-code flow with PKCE as a client and a browser
// would, and checks each step's answer.
func TestFullFlow(t *testing.T) {
	h := newHarness(t)
	client := h.register(t, callback)
	q := h.newRequest(client, callback)
	b := h.browser(t)

	page := b.open(t, q.query())
	for k, v := range map[string]string{
		"X-Frame-Options": "DENY", "Cache-Control": "no-store", "Content-Type": "text/html; charset=utf-8",
	} {
		if got := page.header.Get(k); got != v {
			t.Errorf("consent page %s = %q, want %q", k, got, v)
		}
	}
	csp := page.header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("consent page CSP = %q", csp)
	}
	if _, style, ok := strings.Cut(page.body, "<style>"); ok {
		style, _, _ = strings.Cut(style, "</style>")
		sum := sha256.Sum256([]byte(style))
		if src := "style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"; !strings.Contains(csp, src) {
			t.Errorf("the CSP %q does not allow the page's style sheet (%s)", csp, src)
		}
	}
	if !strings.Contains(page.body, "Test &lt;Client&gt;") || strings.Contains(page.body, "Test <Client>") {
		t.Error("the consent page does not show the client's name escaped")
	}
	if !strings.Contains(page.body, "127.0.0.1:9000") {
		t.Error("the consent page does not show where the client returns to")
	}

	redirect := b.submit(t, approved(formOf(t, page), h.acct.Key))
	v := redirected(t, redirect, q)
	if v.Get("state") != q.state || v.Get("iss") != h.issuer || !strings.HasPrefix(v.Get("code"), "tgac_") {
		t.Fatalf("redirect query = %v", v)
	}

	tok := h.exchange(t, q, v.Get("code"))
	if tok.status != http.StatusOK || tok.header.Get("Cache-Control") != "no-store" || tok.header.Get("Pragma") != "no-cache" {
		t.Fatalf("token: %d %v %s", tok.status, tok.header, tok.body)
	}
	if tok.json["token_type"] != "Bearer" || tok.json["expires_in"] != float64(3600) || tok.json["scope"] != "mcp" {
		t.Errorf("token response = %s", tok.body)
	}
	access, refresh := tok.json["access_token"].(string), tok.json["refresh_token"].(string)
	g := h.wantValid(t, access)
	want := oauth.Grant{KeyID: h.acct.KeyID, AccountID: h.acct.ID, ClientID: client, Resource: h.resource, Scopes: []string{"mcp"}, ExpiresAt: t0.Add(time.Hour)}
	if g.KeyID != want.KeyID || g.AccountID != want.AccountID || g.ClientID != want.ClientID || g.Resource != want.Resource ||
		!slices.Equal(g.Scopes, want.Scopes) || !g.ExpiresAt.Equal(want.ExpiresAt) {
		t.Errorf("grant = %+v, want %+v", g, want)
	}

	// The resource server's view: the token acts for the key, by its id.
	p, err := h.svc.Authenticate(t.Context(), tollgate.Caller{KeyID: g.KeyID, Channel: auth.ChannelMCP})
	if err != nil || p.Account.ID != h.acct.ID {
		t.Errorf("AuthenticateKeyID(%s) = %v, %v", g.KeyID, p.Account.ID, err)
	}

	for _, value := range []string{access, refresh, v.Get("code")} {
		if h.store.contains(value) {
			t.Errorf("the store was given a secret value, %.9s..., not only its hash", value)
		}
	}
	if _, err := h.srv.VerifyAccessToken(t.Context(), refresh, h.resource); err == nil {
		t.Error("VerifyAccessToken accepted a refresh token")
	}
	if _, err := h.srv.VerifyAccessToken(t.Context(), access, h.issuer+"/other"); err == nil {
		t.Error("VerifyAccessToken accepted a token for another resource")
	}
	h.clock.Advance(time.Hour)
	h.wantInvalid(t, access)
}

// TestCodeRefused checks that a code is refused when anything about its exchange is
// wrong. An exchange from someone who holds the code but is not its client (a wrong
// verifier, client or redirect URI) burns the code, as RFC 9700 favours: the real
// client's exchange that follows fails too, and it must authorize again. A malformed
// exchange, or one for another resource, leaves the code to the real client.
func TestCodeRefused(t *testing.T) {
	h := newHarness(t, func(o *oauth.Options) { o.Resources = []string{o.Issuer + "/v1/mcp", o.Issuer + "/v2/mcp"} })
	client := h.register(t, callback, "http://127.0.0.1:9000/other")
	other := h.register(t, callback)
	tests := []struct {
		name   string
		change func(f url.Values)
		code   string
		burns  bool
	}{
		{"bad verifier", func(f url.Values) { f.Set("code_verifier", randomString(50)) }, "invalid_grant", true},
		{"missing verifier", func(f url.Values) { f.Del("code_verifier") }, "invalid_request", false},
		{"short verifier", func(f url.Values) { f.Set("code_verifier", "abc") }, "invalid_request", false},
		{"other redirect URI", func(f url.Values) { f.Set("redirect_uri", "http://127.0.0.1:9000/other") }, "invalid_grant", true},
		{"other client", func(f url.Values) { f.Set("client_id", other) }, "invalid_grant", true},
		{"other resource", func(f url.Values) { f.Set("resource", h.issuer+"/v2/mcp") }, "invalid_target", false},
		{"unknown resource", func(f url.Values) { f.Set("resource", h.issuer+"/v3/mcp") }, "invalid_target", false},
		{"forged code", func(f url.Values) { f.Set("code", "tgac_"+randomString(43)) }, "invalid_grant", false},
		{"not a code", func(f url.Values) { f.Set("code", "hello") }, "invalid_grant", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := h.newRequest(client, callback)
			code := h.authorize(t, q)
			form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {q.redirectURI},
				"code_verifier": {q.verifier}, "client_id": {q.clientID}, "resource": {q.resource}}
			tt.change(form)
			for i := range 3 {
				r := h.token(t, "/oauth/token", form)
				wantOAuthError(t, r, http.StatusBadRequest, tt.code)
				if i == 0 && tt.burns && !strings.Contains(r.json["error_description"].(string), "authorize again") {
					t.Errorf("the answer %s does not say that the code is burnt", r.body)
				}
			}
			a := h.exchange(t, q, code)
			if tt.burns {
				wantOAuthError(t, a, http.StatusBadRequest, "invalid_grant")
				return
			}
			if a.status != http.StatusOK {
				t.Fatalf("the real exchange after refused ones: %d %s, want tokens", a.status, a.body)
			}
			h.wantValid(t, a.json["access_token"].(string))
		})
	}
	t.Run("expired code", func(t *testing.T) {
		q := h.newRequest(client, callback)
		code := h.authorize(t, q)
		h.clock.Advance(oauth.CodeTTL)
		wantOAuthError(t, h.exchange(t, q, code), http.StatusBadRequest, "invalid_grant")
	})
}

// TestCodeReused checks that a code works once, and that redeeming it again revokes
// what it gave, while an exchange that fails its checks revokes nothing.
func TestCodeReused(t *testing.T) {
	h := newHarness(t)
	q := h.newRequest(h.register(t, callback), callback)
	code := h.authorize(t, q)
	first := h.exchange(t, q, code)
	if first.status != http.StatusOK {
		t.Fatalf("first exchange: %d %s", first.status, first.body)
	}
	h.wantValid(t, first.json["access_token"].(string))

	// Someone who saw the code but lacks the verifier is refused, and revokes nothing.
	thief := q
	thief.verifier = randomString(64)
	wantOAuthError(t, h.exchange(t, thief, code), http.StatusBadRequest, "invalid_grant")
	h.wantValid(t, first.json["access_token"].(string))

	// A second exchange that would have succeeded shows that the code was copied.
	replay := h.exchange(t, q, code)
	wantOAuthError(t, replay, http.StatusBadRequest, "invalid_grant")
	if !strings.Contains(replay.json["error_description"].(string), "revoked") {
		t.Errorf("replay answer %s does not say that the tokens are revoked", replay.body)
	}
	h.wantInvalid(t, first.json["access_token"].(string))
	wantOAuthError(t, h.refresh(t, q.clientID, first.json["refresh_token"].(string)), http.StatusBadRequest, "invalid_grant")
}

// TestCodeConcurrentExchange checks that of concurrent exchanges of one code at most
// one gets tokens, and that they are revoked: the other exchanges show that the code
// was copied.
func TestCodeConcurrentExchange(t *testing.T) {
	h := newHarness(t)
	q := h.newRequest(h.register(t, callback), callback)
	code := h.authorize(t, q)
	const n = 8
	answers := make([]answer, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { answers[i] = h.exchange(t, q, code) })
	}
	wg.Wait()
	statuses := make([]int, n)
	for i, a := range answers {
		statuses[i] = a.status
		if a.status == http.StatusOK {
			h.wantInvalid(t, a.json["access_token"].(string))
		}
	}
	if ok := count(statuses, http.StatusOK); ok > 1 {
		t.Errorf("statuses = %v: %d exchanges of one code succeeded, want at most 1", statuses, ok)
	}
}

func count(xs []int, x int) int {
	n := 0
	for _, v := range xs {
		if v == x {
			n++
		}
	}
	return n
}

// TestRefreshRotation checks that refresh tokens rotate, and that presenting a
// rotated one revokes the whole connection.
func TestRefreshRotation(t *testing.T) {
	h := newHarness(t)
	q := h.newRequest(h.register(t, callback), callback)
	access1, refresh1 := h.tokens(t, q)

	h.clock.Advance(2 * time.Hour)
	h.wantInvalid(t, access1) // expired
	r := h.refresh(t, q.clientID, refresh1)
	if r.status != http.StatusOK || r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("refresh: %d %s", r.status, r.body)
	}
	access2, refresh2 := r.json["access_token"].(string), r.json["refresh_token"].(string)
	if refresh2 == refresh1 || access2 == access1 {
		t.Fatal("refresh returned the same tokens")
	}
	if g := h.wantValid(t, access2); !g.ExpiresAt.Equal(h.clock.Now().Add(time.Hour)) {
		t.Errorf("refreshed token expires at %v, want an hour from now", g.ExpiresAt)
	}
	wantOAuthError(t, h.refresh(t, "tgcl_"+randomString(43), refresh2), http.StatusBadRequest, "invalid_grant")
	h.wantValid(t, access2) // a wrong client does not burn the token

	// The old refresh token again: it was copied, so the connection ends.
	wantOAuthError(t, h.refresh(t, q.clientID, refresh1), http.StatusBadRequest, "invalid_grant")
	h.wantInvalid(t, access2)
	wantOAuthError(t, h.refresh(t, q.clientID, refresh2), http.StatusBadRequest, "invalid_grant")

	// A refresh token outlives its access tokens, not its own lifetime.
	_, refresh3 := h.tokens(t, h.newRequest(q.clientID, callback))
	h.clock.Advance(oauth.DefaultRefreshTokenTTL)
	wantOAuthError(t, h.refresh(t, q.clientID, refresh3), http.StatusBadRequest, "invalid_grant")
}

// TestRevocation checks RFC 7009 revocation.
func TestRevocation(t *testing.T) {
	h := newHarness(t)
	client := h.register(t, callback)
	for _, which := range []string{"access", "refresh"} {
		t.Run(which, func(t *testing.T) {
			access, refresh := h.tokens(t, h.newRequest(client, callback))
			tok := access
			if which == "refresh" {
				tok = refresh
			}
			wantOAuthError(t, h.token(t, "/oauth/revoke", url.Values{"token": {tok}, "client_id": {"tgcl_" + randomString(43)}}), http.StatusBadRequest, "invalid_request")
			h.wantValid(t, access)
			a := h.token(t, "/oauth/revoke", url.Values{"token": {tok}, "client_id": {client}})
			if a.status != http.StatusOK {
				t.Fatalf("revoke: %d %s", a.status, a.body)
			}
			h.wantInvalid(t, access)
			wantOAuthError(t, h.refresh(t, client, refresh), http.StatusBadRequest, "invalid_grant")
		})
	}
	for _, tok := range []string{"tgat_" + randomString(43), "nonsense"} {
		if a := h.token(t, "/oauth/revoke", url.Values{"token": {tok}}); a.status != http.StatusOK {
			t.Errorf("revoking an unknown token: %d %s, want 200", a.status, a.body)
		}
	}
	wantOAuthError(t, h.token(t, "/oauth/revoke", url.Values{}), http.StatusBadRequest, "invalid_request")
}

// TestKeyLifecycle checks that tokens follow the key's stable id: a rotation keeps the
// connection, a revocation ends it.
func TestKeyLifecycle(t *testing.T) {
	h := newHarness(t)
	q := h.newRequest(h.register(t, callback), callback)
	access, refresh := h.tokens(t, q)

	if _, _, err := h.mgr.RotateKey(t.Context(), h.acct.KeyID); err != nil {
		t.Fatal(err)
	}
	g := h.wantValid(t, access)
	if _, err := h.svc.Authenticate(t.Context(), tollgate.Caller{KeyID: g.KeyID, Channel: auth.ChannelMCP}); err != nil {
		t.Errorf("after rotation, AuthenticateKeyID = %v, want the key to work", err)
	}
	r := h.refresh(t, q.clientID, refresh)
	if r.status != http.StatusOK {
		t.Fatalf("refresh after rotation: %d %s", r.status, r.body)
	}

	if _, err := h.mgr.RevokeKey(t.Context(), h.acct.KeyID); err != nil {
		t.Fatal(err)
	}
	wantOAuthError(t, h.refresh(t, q.clientID, r.json["refresh_token"].(string)), http.StatusBadRequest, "invalid_grant")
	// The token itself is still well-formed and unexpired; the resource server refuses
	// it because it authenticates the key by id on every call.
	g = h.wantValid(t, r.json["access_token"].(string))
	if _, err := h.svc.Authenticate(t.Context(), tollgate.Caller{KeyID: g.KeyID, Channel: auth.ChannelMCP}); tollgate.CodeOf(err) != tollgate.CodeForbidden {
		t.Errorf("after revocation, AuthenticateKeyID = %v, want forbidden", err)
	}
	// A revoked key cannot approve a new connection either.
	b := h.browser(t)
	page := b.submit(t, approved(formOf(t, b.open(t, q.query())), h.acct.Key))
	if page.status != http.StatusForbidden || !strings.Contains(page.body, "cannot approve") {
		t.Errorf("approving with a rotated-away key: %d", page.status)
	}
}

// TestResource checks the resource parameter: the default when absent, and refusal of
// one that is not protected.
func TestResource(t *testing.T) {
	h := newHarness(t, func(o *oauth.Options) {
		o.Resources = []string{o.Issuer + "/v1/mcp", o.Issuer + "/v2/mcp"}
	})
	client := h.register(t, callback)

	q := h.newRequest(client, callback)
	q.resource = ""
	access, _ := h.tokens(t, q)
	if g := h.wantValid(t, access); g.Resource != h.resource {
		t.Errorf("a request without resource got %q, want the default %q", g.Resource, h.resource)
	}

	q = h.newRequest(client, callback)
	q.resource = h.issuer + "/v2/mcp/" // a trailing slash names the same resource
	access, _ = h.tokens(t, q)
	if _, err := h.srv.VerifyAccessToken(t.Context(), access, h.issuer+"/v2/mcp"); err != nil {
		t.Errorf("token for /v2/mcp: %v", err)
	}
	h.wantInvalid(t, access) // not for /v1/mcp
}

// TestAuthorizeErrors checks that every authorization request that cannot be
// completed is answered with an error page on the server's origin, never with a
// redirect: before the person has seen the consent page, no redirect URI is trusted.
// The page names the OAuth error code of a parameter that is wrong.
func TestAuthorizeErrors(t *testing.T) {
	h := newHarness(t)
	client := h.register(t, callback)
	tests := []struct {
		name   string
		change func(v url.Values)
		code   string // the OAuth error code the page names; "" for an error about the client
	}{
		{"no client", func(v url.Values) { v.Del("client_id") }, ""},
		{"unknown client", func(v url.Values) { v.Set("client_id", "tgcl_"+randomString(43)) }, ""},
		{"foreign client id", func(v url.Values) { v.Set("client_id", "someone-else") }, ""},
		{"http client id URL", func(v url.Values) { v.Set("client_id", "http://example.com/client.json") }, ""},
		{"unregistered redirect", func(v url.Values) { v.Set("redirect_uri", "https://attacker.example/cb") }, ""},
		{"redirect path differs", func(v url.Values) { v.Set("redirect_uri", "http://127.0.0.1:9000/callback/x") }, ""},
		{"repeated parameter", func(v url.Values) { v.Add("state", "again") }, "invalid_request"},
		{"no response type", func(v url.Values) { v.Del("response_type") }, "invalid_request"},
		{"token response type", func(v url.Values) { v.Set("response_type", "token") }, "unsupported_response_type"},
		{"no challenge", func(v url.Values) { v.Del("code_challenge"); v.Del("code_challenge_method") }, "invalid_request"},
		{"plain method", func(v url.Values) { v.Set("code_challenge_method", "plain") }, "invalid_request"},
		{"no method", func(v url.Values) { v.Del("code_challenge_method") }, "invalid_request"},
		{"short challenge", func(v url.Values) { v.Set("code_challenge", "abc") }, "invalid_request"},
		{"unknown resource", func(v url.Values) { v.Set("resource", "https://elsewhere.example/v1/mcp") }, "invalid_target"},
		{"resource with fragment", func(v url.Values) { v.Set("resource", h.resource+"#x") }, "invalid_target"},
		{"long scope", func(v url.Values) { v.Set("scope", strings.Repeat("s", 2000)) }, "invalid_scope"},
		{"long state", func(v url.Values) { v.Set("state", strings.Repeat("s", 2000)) }, "invalid_request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := h.newRequest(client, callback).query()
			tt.change(v)
			a := h.browser(t).open(t, v)
			wantErrorPage(t, a, http.StatusBadRequest)
			if tt.code != "" && !strings.Contains(a.body, "("+tt.code+")") {
				t.Errorf("the error page does not name %s:\n%s", tt.code, a.body)
			}
		})
	}

	t.Run("one registered redirect is the default", func(t *testing.T) {
		q := h.newRequest(client, callback)
		v := q.query()
		v.Del("redirect_uri")
		formOf(t, h.browser(t).open(t, v))
	})
	t.Run("loopback port may differ", func(t *testing.T) {
		q := h.newRequest(client, "http://127.0.0.1:61234/callback")
		code := h.authorize(t, q)
		if a := h.exchange(t, q, code); a.status != http.StatusOK {
			t.Errorf("exchange: %d %s", a.status, a.body)
		}
	})
	t.Run("method not allowed", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPut, h.issuer+"/oauth/authorize", nil)
		resp, err := h.ts.Client().Do(req)
		must(t, err)
		if a := read(t, resp); a.status != http.StatusMethodNotAllowed {
			t.Errorf("PUT: %d", a.status)
		}
	})
}

// TestNoOpenRedirect replays the open redirect through dynamic client registration:
// anyone may register https://evil.example/phish, then send people to the
// authorization endpoint with that client and broken parameters. Whatever the
// parameters, GET or POST, the answer is a page on the server's origin; the browser
// goes to the registered URI only after the person acts on the consent page.
func TestNoOpenRedirect(t *testing.T) {
	h := newHarness(t)
	const phish = "https://evil.example/phish"
	client := h.register(t, phish)
	queries := []string{
		"client_id=" + client,
		"client_id=" + client + "&redirect_uri=" + url.QueryEscape(phish),
		"client_id=" + client + "&response_type=token",
		"client_id=" + client + "&response_type=code",
		"client_id=" + client + "&response_type=code&code_challenge=x&code_challenge_method=plain",
		"client_id=" + client + "&response_type=code&code_challenge=" + challenge(randomString(50)) + "&code_challenge_method=S256&resource=https://elsewhere.example/",
		"client_id=" + client + "&response_type=code&code_challenge=" + challenge(randomString(50)) + "&code_challenge_method=S256&scope=%07",
		"client_id=" + client + "&response_type=code&response_type=code",
		"client_id=" + client + "&state=" + strings.Repeat("s", 2000),
	}
	for _, query := range queries {
		resp, err := h.browser(t).client.Get(h.issuer + "/oauth/authorize?" + query)
		must(t, err)
		wantErrorPage(t, read(t, resp), http.StatusBadRequest)

		resp, err = h.browser(t).client.Post(h.issuer+"/oauth/authorize", "application/x-www-form-urlencoded", strings.NewReader(query+"&action=deny"))
		must(t, err)
		if a := read(t, resp); a.header.Get("Location") != "" || a.status < 400 {
			t.Errorf("POST %s: %d, Location %q; want an error page", truncated(query), a.status, a.header.Get("Location"))
		}
	}

	// A valid request shows the consent page, with the destination in plain sight.
	q := h.newRequest(client, phish)
	b := h.browser(t)
	page := b.open(t, q.query())
	if !strings.Contains(page.body, `<p class="destination">If you approve or deny, you will be sent to <strong>evil.example</strong>.</p>`) {
		t.Errorf("the consent page does not show the destination prominently:\n%s", page.body)
	}
	// Once the person denies, the browser goes back to the application.
	deny := approved(formOf(t, page), "")
	deny.Set("action", "deny")
	if v := redirected(t, b.submit(t, deny), q); v.Get("error") != "access_denied" {
		t.Errorf("deny redirect = %v", v)
	}
}

func truncated(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// TestConsentPage checks what the consent page says about the client: its name, the
// host it returns to, and that it is unverified, for a registered client and for one
// described by a metadata document.
func TestConsentPage(t *testing.T) {
	docs := newDocumentServer(t, map[string]string{
		"/client.json": `{"client_id":"{url}","client_name":"Doc Client","redirect_uris":["https://elsewhere.example/cb","` + callback + `"]}`,
	})
	h := newHarness(t, func(o *oauth.Options) { o.Fetch.AllowPrivate = true })
	registered := h.register(t, "https://app.example/cb", callback)
	docHost := strings.TrimPrefix(docs.URL, "https://")
	tests := []struct {
		name        string
		client, uri string
		want        []string
		not         []string
	}{
		{"registered", registered, "https://app.example/cb",
			[]string{"Test &lt;Client&gt; wants to use", "sent to <strong>app.example</strong>.", "Unverified application.</strong> It registered itself"},
			[]string{"a program on this computer"}},
		{"registered, loopback", registered, callback,
			[]string{"sent to <strong>127.0.0.1:9000</strong>, a program on this computer.", "Unverified application.", "receives the answer on this computer"},
			nil},
		{"document", docs.URL + "/client.json", "https://elsewhere.example/cb",
			[]string{"Doc Client wants to use", "sent to <strong>elsewhere.example</strong>.", "Unverified application.</strong> Its name comes from a document published at " + docHost,
				"It returns to elsewhere.example, not to " + docHost},
			[]string{"It registered itself"}},
		{"document, loopback", docs.URL + "/client.json", callback,
			[]string{"Unverified application.</strong> Its name comes from a document", "a program on this computer"},
			[]string{"not to " + docHost}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			page := h.browser(t).open(t, h.newRequest(tt.client, tt.uri).query())
			formOf(t, page)
			for _, w := range tt.want {
				if !strings.Contains(page.body, w) {
					t.Errorf("the consent page does not say %q:\n%s", w, page.body)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(page.body, n) {
					t.Errorf("the consent page says %q", n)
				}
			}
		})
	}
}

// TestConsentPageFormatting checks that a client cannot change how the consent page
// reads with invisible characters: bidirectional controls, which reorder the page's
// own text around them, or other formatting characters. A name or client_id URL that
// carries them is refused, from a metadata document as from a registration, and an
// id URL must be written in ASCII, so that its host cannot imitate another with
// look-alike letters; a name stored before these rules is shown without them.
func TestConsentPageFormatting(t *testing.T) {
	docs := newDocumentServer(t, map[string]string{
		"/bidi-name.json":       `{"client_id":"{url}","client_name":"Good \u202eppA","redirect_uris":["` + callback + `"]}`,
		"/\u202enosj.x":         `{"client_id":"{url}","client_name":"Doc","redirect_uris":["` + callback + `"]}`,
		"/caf\u00e9.json":       `{"client_id":"{url}","client_name":"Doc","redirect_uris":["` + callback + `"]}`,
		"/zero\u200bwidth.json": `{"client_id":"{url}","client_name":"Doc","redirect_uris":["` + callback + `"]}`,
	})
	h := newHarness(t, func(o *oauth.Options) { o.Fetch.AllowPrivate = true })
	for _, id := range []string{
		docs.URL + "/bidi-name.json",
		docs.URL + "/\u202enosj.x",
		docs.URL + "/caf\u00e9.json",
		docs.URL + "/zero\u200bwidth.json",
		"https://g\u0456thub.com/client.json", // a Cyrillic i
	} {
		a := h.browser(t).open(t, h.newRequest(id, callback).query())
		if a.status != http.StatusBadRequest || strings.Contains(a.body, `name="consent"`) {
			t.Errorf("client_id %+q: got %d, want an error page", id, a.status)
		}
	}

	stored := "tgcl_" + randomString(43)
	must(t, h.store.CreateClient(t.Context(), oauthstore.Client{
		ID: stored, Name: "Good \u202eppA\u2066", RedirectURIs: []string{callback}, CreatedAt: t0,
	}))
	page := h.browser(t).open(t, h.newRequest(stored, callback).query())
	formOf(t, page)
	if strings.ContainsAny(page.body, "\u202e\u2066") || !strings.Contains(page.body, "Good") {
		t.Errorf("the consent page of a client named with bidirectional controls:\n%s", page.body)
	}
}

// TestConsentForm checks that the consent form is bound to the browser and to the
// request, expires, and is accepted once.
func TestConsentForm(t *testing.T) {
	h := newHarness(t)
	client := h.register(t, callback, "http://127.0.0.1:9000/other")
	open := func(t *testing.T) (*browser, request, url.Values) {
		q := h.newRequest(client, callback)
		b := h.browser(t)
		return b, q, formOf(t, b.open(t, q.query()))
	}
	wantRefused := func(t *testing.T, a answer, status int) {
		t.Helper()
		if a.status != status || a.header.Get("Location") != "" {
			t.Errorf("got %d (Location %q), want %d without a redirect", a.status, a.header.Get("Location"), status)
		}
	}

	t.Run("another browser", func(t *testing.T) {
		_, _, form := open(t)
		wantRefused(t, h.browser(t).submit(t, approved(form, h.acct.Key)), http.StatusForbidden)
	})
	t.Run("changed request", func(t *testing.T) {
		for _, name := range []string{"redirect_uri", "code_challenge", "scope", "state", "consent"} {
			b, _, form := open(t)
			f := approved(form, h.acct.Key)
			switch name {
			case "redirect_uri":
				f.Set(name, "http://127.0.0.1:9000/other")
			case "code_challenge":
				f.Set(name, challenge(randomString(50)))
			default:
				f.Set(name, form.Get(name)+"x")
			}
			if a := b.submit(t, f); a.status != http.StatusForbidden {
				t.Errorf("changed %s: got %d, want 403", name, a.status)
			}
		}
	})
	t.Run("expired", func(t *testing.T) {
		h := newHarness(t)
		client := h.register(t, callback)
		q := h.newRequest(client, callback)
		b := h.browser(t)
		form := formOf(t, b.open(t, q.query()))
		h.clock.Advance(oauth.ConsentTTL)
		wantRefused(t, b.submit(t, approved(form, h.acct.Key)), http.StatusForbidden)
	})
	t.Run("submitted twice", func(t *testing.T) {
		b, q, form := open(t)
		redirected(t, b.submit(t, approved(form, h.acct.Key)), q)
		// The browser's cookie is gone; a copy of it does not help either.
		again := b.submit(t, approved(form, h.acct.Key))
		wantRefused(t, again, http.StatusForbidden)
	})
	t.Run("replayed with the cookie", func(t *testing.T) {
		b, q, form := open(t)
		u, _ := url.Parse(h.issuer + "/oauth/authorize")
		cookies := b.client.Jar.Cookies(u)
		redirected(t, b.submit(t, approved(form, h.acct.Key)), q)
		b.client.Jar.SetCookies(u, cookies)
		wantRefused(t, b.submit(t, approved(form, h.acct.Key)), http.StatusConflict)
	})
	t.Run("denied", func(t *testing.T) {
		b, q, form := open(t)
		f := approved(form, "")
		f.Set("action", "deny")
		v := redirected(t, b.submit(t, f), q)
		if v.Get("error") != "access_denied" || v.Get("state") != q.state {
			t.Errorf("deny redirect = %v", v)
		}
	})
	t.Run("wrong key, then the right one", func(t *testing.T) {
		b, q, form := open(t)
		for _, key := range []string{"not-a-key", "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b", ""} {
			a := b.submit(t, approved(form, key))
			if a.status != http.StatusForbidden || !strings.Contains(a.body, `class="error"`) {
				t.Errorf("key %q: got %d, want the page again with an error", key, a.status)
			}
			if strings.Contains(a.body, "1b4e28ba-2fa1") {
				t.Error("the page repeats the key that was typed")
			}
			form = formOf(t, a)
		}
		redirected(t, b.submit(t, approved(form, h.acct.Key)), q)
	})
	t.Run("key not allowed on mcp", func(t *testing.T) {
		restricted, err := auth.NewRestrictions(auth.RestrictionSpec{Channels: []string{"rest"}})
		must(t, err)
		k := h.newAccount(t, restricted)
		b, _, form := open(t)
		a := b.submit(t, approved(form, k.Key))
		if a.status != http.StatusForbidden || !strings.Contains(a.body, "mcp") {
			t.Errorf("got %d, want the page with the channel error", a.status)
		}
	})
	t.Run("wrong content type", func(t *testing.T) {
		a := h.post(t, "/oauth/authorize", "application/json", "{}")
		wantRefused(t, a, http.StatusUnsupportedMediaType)
	})
}

// TestLogin checks approval through the host's login hook.
func TestLogin(t *testing.T) {
	var keyID string
	h := newHarness(t, func(o *oauth.Options) {
		o.Login = func(r *http.Request) (string, bool) {
			if c, err := r.Cookie("host_session"); err == nil && c.Value == "alice" {
				return keyID, true
			}
			return "", false
		}
	})
	keyID = h.acct.KeyID
	q := h.newRequest(h.register(t, callback), callback)
	b := h.browser(t)
	u, _ := url.Parse(h.issuer)
	b.client.Jar.SetCookies(u, []*http.Cookie{{Name: "host_session", Value: "alice", Path: "/"}})
	page := b.open(t, q.query())
	if !strings.Contains(page.body, "You are signed in") || strings.Contains(page.body, `name="api_key"`) {
		t.Fatalf("the consent page of a logged-in person:\n%s", page.body)
	}
	v := redirected(t, b.submit(t, approved(formOf(t, page), "")), q)
	a := h.exchange(t, q, v.Get("code"))
	if a.status != http.StatusOK {
		t.Fatalf("exchange: %d %s", a.status, a.body)
	}
	if g := h.wantValid(t, a.json["access_token"].(string)); g.KeyID != h.acct.KeyID || g.AccountID != h.acct.ID {
		t.Errorf("grant = %+v, want the logged-in key", g)
	}

	// A page of a sibling site is same-site, so the browser sends it the host's session
	// cookie; if it also planted a consent cookie of its own (cookies may be set for a
	// parent domain), it could submit a form it made up. The browser says where a
	// submission comes from (Sec-Fetch-Site): only the consent page's own origin may
	// decide.
	for _, site := range []string{"same-site", "cross-site", "same-origin"} {
		q := h.newRequest(q.clientID, callback)
		form := approved(formOf(t, b.open(t, q.query())), "")
		req, err := http.NewRequest(http.MethodPost, h.issuer+"/oauth/authorize", strings.NewReader(form.Encode()))
		must(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", site)
		resp, err := b.client.Do(req)
		must(t, err)
		a := read(t, resp)
		if site == "same-origin" {
			redirected(t, a, q)
		} else if a.status != http.StatusForbidden || a.header.Get("Location") != "" {
			t.Errorf("a consent sent from a %s page: got %d (Location %q), want 403", site, a.status, a.header.Get("Location"))
		}
	}

	// Someone who is not logged in must type a key.
	anon := h.browser(t)
	page = anon.open(t, q.query())
	if !strings.Contains(page.body, `name="api_key"`) {
		t.Fatal("the consent page asks no key of a person who is not logged in")
	}
	if a := anon.submit(t, approved(formOf(t, page), "")); a.status != http.StatusForbidden {
		t.Errorf("approving without key or login: %d, want 403", a.status)
	}
}

// TestConsentOrigin checks the consent form's check of Origin, for a browser that
// does not send Sec-Fetch-Site: a submission whose Origin is another site, or the
// opaque "null", is refused even though it carries the consent cookie and a key; one
// from the server's own origin, or with no Origin at all, is accepted.
func TestConsentOrigin(t *testing.T) {
	h := newHarness(t)
	client := h.register(t, callback)
	u, _ := url.Parse(h.issuer)
	for _, tt := range []struct {
		origin string
		ok     bool
	}{
		{"https://evil.example", false},
		{"null", false},
		{"http://" + u.Host + ".evil.example", false},
		{"https://" + u.Host, false}, // another scheme is another origin
		{"http://" + u.Host + "/path", false},
		{h.issuer, true},
		{"", true},
	} {
		b := h.browser(t)
		q := h.newRequest(client, callback)
		form := approved(formOf(t, b.open(t, q.query())), h.acct.Key)
		req, err := http.NewRequest(http.MethodPost, h.issuer+"/oauth/authorize", strings.NewReader(form.Encode()))
		must(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if tt.origin != "" {
			req.Header.Set("Origin", tt.origin)
		}
		resp, err := b.client.Do(req)
		must(t, err)
		a := read(t, resp)
		if tt.ok {
			redirected(t, a, q)
		} else if a.status != http.StatusForbidden || a.header.Get("Location") != "" {
			t.Errorf("a consent with Origin %q and no Sec-Fetch-Site: got %d (Location %q), want 403", tt.origin, a.status, a.header.Get("Location"))
		}
	}
}

// TestTokenEndpointErrors checks the answers to malformed token requests.
func TestTokenEndpointErrors(t *testing.T) {
	h := newHarness(t)
	tests := []struct {
		name        string
		contentType string
		body        string
		status      int
		code        string
	}{
		{"json body", "application/json", `{"grant_type":"authorization_code"}`, 400, "invalid_request"},
		{"no grant type", "application/x-www-form-urlencoded", "client_id=x", 400, "invalid_request"},
		{"no client id", "application/x-www-form-urlencoded", "grant_type=refresh_token&refresh_token=x", 400, "invalid_request"},
		{"unknown grant type", "application/x-www-form-urlencoded", "grant_type=password&client_id=x", 400, "unsupported_grant_type"},
		{"client credentials", "application/x-www-form-urlencoded", "grant_type=client_credentials&client_id=x", 400, "unsupported_grant_type"},
		{"repeated parameter", "application/x-www-form-urlencoded", "grant_type=refresh_token&grant_type=refresh_token&client_id=x", 400, "invalid_request"},
		{"client secret", "application/x-www-form-urlencoded", "grant_type=refresh_token&client_id=x&client_secret=s&refresh_token=x", 401, "invalid_client"},
		{"no refresh token", "application/x-www-form-urlencoded", "grant_type=refresh_token&client_id=x", 400, "invalid_request"},
		{"foreign refresh token", "application/x-www-form-urlencoded", "grant_type=refresh_token&client_id=x&refresh_token=abc", 400, "invalid_grant"},
		{"too large", "application/x-www-form-urlencoded", "grant_type=refresh_token&client_id=x&pad=" + strings.Repeat("a", 20<<10), 400, "invalid_request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantOAuthError(t, h.post(t, "/oauth/token", tt.contentType, tt.body), tt.status, tt.code)
		})
	}
	resp, err := http.Get(h.issuer + "/oauth/token")
	must(t, err)
	if a := read(t, resp); a.status != http.StatusMethodNotAllowed {
		t.Errorf("GET /oauth/token: %d, want 405", a.status)
	}
	req := httpRequest(http.MethodOptions, h.issuer+"/oauth/token")
	resp, err = h.ts.Client().Do(req)
	must(t, err)
	if a := read(t, resp); a.status != http.StatusNoContent || a.header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("preflight: %d %v", a.status, a.header)
	}
}

func TestNewValidatesOptions(t *testing.T) {
	h := newHarness(t)
	keys := oauth.ServiceKeys(h.svc)
	tests := []struct {
		name string
		opts *oauth.Options
	}{
		{"nil options", nil},
		{"no issuer", &oauth.Options{}},
		{"issuer with a path", &oauth.Options{Issuer: "https://api.example.com/auth"}},
		{"issuer not http", &oauth.Options{Issuer: "ftp://api.example.com"}},
		{"bad resource", &oauth.Options{Issuer: "https://api.example.com", Resources: []string{"/v1/mcp"}}},
	}
	for _, tt := range tests {
		if _, err := oauth.New(h.store, keys, tt.opts); err == nil {
			t.Errorf("%s: New succeeded", tt.name)
		}
	}
	if _, err := oauth.New(nil, keys, &oauth.Options{Issuer: "https://api.example.com"}); err == nil {
		t.Error("New without a store succeeded")
	}
}

// TestRedirectURIMatching checks how the redirect URI of an authorization request is
// matched against the registered ones: exactly, except for the port of a loopback URI;
// fragments, userinfo and every other difference are refused on a page of the server,
// before any consent, and the token request must repeat the URI exactly.
func TestRedirectURIMatching(t *testing.T) {
	h := newHarness(t)
	client := h.register(t, "http://127.0.0.1:9999/cb", "http://[::1]/v6", "http://localhost/native", "https://app.example/cb?x=1")
	accepted := []string{
		"http://127.0.0.1:9999/cb",
		"http://127.0.0.1:12345/cb",
		"http://127.0.0.1/cb",
		"http://[::1]:8080/v6",
		"http://localhost:5555/native",
		"https://app.example/cb?x=1",
	}
	for _, uri := range accepted {
		t.Run("accepted "+uri, func(t *testing.T) {
			q := h.newRequest(client, uri)
			approve := func() string {
				b := h.browser(t)
				a := b.submit(t, approved(formOf(t, b.open(t, q.query())), h.acct.Key))
				loc := a.header.Get("Location")
				if a.status != http.StatusSeeOther || !strings.HasPrefix(loc, uri+sep(uri)) {
					t.Fatalf("approval: %d, Location %q; want a redirect to %s", a.status, loc, uri)
				}
				u, err := url.Parse(loc)
				must(t, err)
				return u.Query().Get("code")
			}
			if tok := h.exchange(t, q, approve()); tok.status != http.StatusOK {
				t.Errorf("exchange with the redirect URI of the request: %d %s", tok.status, tok.body)
			}
			// The token request must repeat the request's URI, not another
			// registered one (which burns the code).
			if other := "http://127.0.0.1:9999/cb"; uri != other {
				wrong := q
				wrong.redirectURI = other
				wantOAuthError(t, h.exchange(t, wrong, approve()), http.StatusBadRequest, "invalid_grant")
			}
		})
	}
	refused := []string{
		"http://127.0.0.1:9999/cb#frag",
		"http://127.0.0.1:9999/cb#",
		"http://evil.example@127.0.0.1:9999/cb",
		"http://user:pass@127.0.0.1:9999/cb",
		"http://127.0.0.1:9999@evil.example/cb",
		"https://evil.example@app.example/cb?x=1",
		"http://localhost:9999/cb",     // another loopback host than the registered one
		"http://127.0.0.1:9999/native", // another path
		"http://[::1]:9999/cb",
		"http://127.0.0.1:9999/cb/",
		"http://127.0.0.1:9999/CB",
		"http://127.0.0.1:9999/cb?x=1",
		"http://127.0.0.1:9999/%63b",
		"https://app.example/cb?x=2",
		"https://app.example/cb?x=1&y=2",
		"https://app.example:443/cb?x=1",
		"https://APP.example/cb?x=1",
		"http://app.example/cb?x=1",
		"https://127.0.0.1:9999/cb",
		"http://127.0.0.2:9999/cb",
		"HTTP://127.0.0.1:9999/cb",
		"http://LOCALHOST:5555/native",
		"http://127.0.0.%31:9999/cb",
		"http://127.0.0.1:99999/cb",
		"http://127.0.0.1.:9999/cb",
		"http://[::ffff:127.0.0.1]:9999/cb",
		"http://127.0.0.1:9999\\@evil.example/cb",
		"http://127.0.0.1:9999/cb\t",
		"//127.0.0.1:9999/cb",
		"javascript://127.0.0.1:9999/cb",
	}
	for _, uri := range refused {
		t.Run("refused "+uri, func(t *testing.T) {
			q := h.newRequest(client, uri)
			a := h.browser(t).open(t, q.query())
			wantErrorPage(t, a, http.StatusBadRequest)
		})
	}

	t.Run("token request", func(t *testing.T) {
		q := h.newRequest(client, "http://127.0.0.1:9999/cb")
		code := h.authorize(t, q)
		for _, uri := range []string{"http://127.0.0.1:9999/cb#frag", "http://evil.example@127.0.0.1:9999/cb"} {
			wrong := q
			wrong.redirectURI = uri
			wantOAuthError(t, h.exchange(t, wrong, code), http.StatusBadRequest, "invalid_request")
		}
		if a := h.exchange(t, q, code); a.status != http.StatusOK {
			t.Errorf("exchange with the redirect URI of the request: %d %s", a.status, a.body)
		}
		// Another port than the request's: refused, and the code is burnt.
		code = h.authorize(t, q)
		wrong := q
		wrong.redirectURI = "http://127.0.0.1:9998/cb"
		wantOAuthError(t, h.exchange(t, wrong, code), http.StatusBadRequest, "invalid_grant")
		wantOAuthError(t, h.exchange(t, q, code), http.StatusBadRequest, "invalid_grant")
	})
}

// sep returns the character that starts the parameters added to uri's query.
func sep(uri string) string {
	if strings.Contains(uri, "?") {
		return "&"
	}
	return "?"
}

// wantErrorPage checks that an answer of the authorization endpoint is an error page on
// the server's origin: HTML with the page's headers, the status, no redirect and no
// consent form.
func wantErrorPage(t testing.TB, a answer, status int) {
	t.Helper()
	if a.status != status || a.header.Get("Location") != "" {
		t.Errorf("got %d (Location %q), want an error page with %d", a.status, a.header.Get("Location"), status)
	}
	if strings.Contains(a.body, `name="consent"`) || !strings.Contains(a.body, `class="error"`) {
		t.Errorf("the answer is not an error page:\n%s", a.body)
	}
	for k, v := range map[string]string{"Content-Type": "text/html; charset=utf-8", "X-Frame-Options": "DENY", "Cache-Control": "no-store"} {
		if got := a.header.Get(k); got != v {
			t.Errorf("error page %s = %q, want %q", k, got, v)
		}
	}
	if csp := a.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("error page CSP = %q", csp)
	}
}

// TestConsentCookieHostOnly checks the consent cookie of an https issuer: __Host-
// prefixed (so Secure, Path=/ and no Domain), which a browser accepts only from the
// issuer's own host. A sibling site cannot plant one, even in a browser that does not
// say where a submission comes from (Sec-Fetch-Site); the form still works with it.
func TestConsentCookieHostOnly(t *testing.T) {
	h := newHarness(t)
	const issuer = "https://api.example.com"
	srv, err := oauth.New(h.store, oauth.ServiceKeys(h.svc), &oauth.Options{Issuer: issuer, Now: h.clock.Now})
	must(t, err)
	q := h.newRequest(h.register(t, callback), callback)
	q.resource = issuer + "/v1/mcp"
	w := newRecorder()
	srv.Handler().ServeHTTP(w, httpRequest(http.MethodGet, issuer+"/oauth/authorize?"+q.query().Encode()))
	page := read(t, w.Result())
	cookies := w.Result().Cookies()
	if len(cookies) != 1 {
		t.Fatalf("the consent page set %d cookies", len(cookies))
	}
	c := cookies[0]
	if !strings.HasPrefix(c.Name, "__Host-") || !c.Secure || c.Path != "/" || c.Domain != "" || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
		t.Errorf("consent cookie %s", c)
	}
	r, err := http.NewRequest(http.MethodPost, issuer+"/oauth/authorize", strings.NewReader(approved(formOf(t, page), h.acct.Key).Encode()))
	must(t, err)
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value})
	w = newRecorder()
	srv.Handler().ServeHTTP(w, r)
	redirected(t, read(t, w.Result()), q)
	if cleared := w.Result().Cookies(); len(cleared) != 1 || cleared[0].Name != c.Name || cleared[0].MaxAge >= 0 || cleared[0].Path != "/" || !cleared[0].Secure {
		t.Errorf("the approval clears the cookie with %v", cleared)
	}
}
