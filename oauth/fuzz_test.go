package oauth_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/oauth"
)

// FuzzAuthorize sends arbitrary queries to the authorization endpoint, as a GET and as
// a consent form. Whatever the query, the answer is the consent page or an error page,
// never a redirect (no person acted on a consent page), never framed, and never a
// server error. Seeds are in testdata/fuzz/FuzzAuthorize.
func FuzzAuthorize(f *testing.F) {
	h := newHarness(f)
	client := h.register(f, callback)
	q := h.newRequest(client, callback)
	f.Add(q.query().Encode())
	v := q.query()
	v.Set("code_challenge_method", "plain")
	f.Add(v.Encode())
	v.Del("redirect_uri")
	f.Add(v.Encode())
	f.Add("client_id=" + client + "&redirect_uri=https%3A%2F%2Fattacker.example%2F&response_type=code")
	f.Add("client_id=https%3A%2F%2F127.0.0.1%2Fc.json&state=%00")
	f.Add("a=%zz&&&=;")

	handler := h.srv.Handler()
	f.Fuzz(func(t *testing.T, query string) {
		// The same parameters, sent as a consent form without the browser's cookie,
		// never pass the form's check: no redirect either.
		rec := serve(handler, http.MethodPost, "/oauth/authorize", "application/x-www-form-urlencoded", query)
		if rec.Code < 400 || rec.Code >= 500 || rec.Header().Get("Location") != "" || rec.Header().Get("X-Frame-Options") != "DENY" {
			t.Fatalf("consent form: %d, Location %q", rec.Code, rec.Header().Get("Location"))
		}

		rec = serve(handler, http.MethodGet, "/oauth/authorize?"+query, "", "")
		if rec.Header().Get("X-Frame-Options") != "DENY" {
			t.Fatalf("answer %d without X-Frame-Options", rec.Code)
		}
		switch rec.Code {
		case http.StatusOK:
			if !strings.Contains(rec.Body.String(), `name="consent"`) {
				t.Fatal("200 without the consent form")
			}
		case http.StatusBadRequest, http.StatusRequestURITooLong:
			if !strings.Contains(rec.Body.String(), `class="error"`) || rec.Header().Get("Location") != "" {
				t.Fatalf("%d without an error page", rec.Code)
			}
		default:
			t.Fatalf("status %d", rec.Code)
		}
	})
}

// FuzzToken sends arbitrary bodies to the token and revocation endpoints. Every answer
// of the token endpoint is an OAuth error from RFC 6749 section 5.2 in JSON, never
// cached and never a server error; the revocation endpoint answers the same, or 200
// for a token it does not know (RFC 7009). Seeds are in testdata/fuzz/FuzzToken.
func FuzzToken(f *testing.F) {
	h := newHarness(f)
	client := h.register(f, callback)
	f.Add("grant_type=authorization_code&code=tgac_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA&redirect_uri=" + url.QueryEscape(callback) +
		"&client_id=" + client + "&code_verifier=" + strings.Repeat("v", 43))
	f.Add("grant_type=refresh_token&refresh_token=tgrt_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA&client_id=" + client)
	f.Add("grant_type=refresh_token&grant_type=x")
	f.Add("%zz=1&client_id")

	handler := h.srv.Handler()
	codes := []string{"invalid_request", "invalid_client", "invalid_grant", "unsupported_grant_type", "invalid_target"}
	f.Fuzz(func(t *testing.T, body string) {
		rec := serve(handler, http.MethodPost, "/oauth/token", "application/x-www-form-urlencoded", body)
		var e struct{ Error string }
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
			t.Fatalf("answer %d is not JSON: %q", rec.Code, rec.Body)
		}
		if (rec.Code != http.StatusBadRequest && rec.Code != http.StatusUnauthorized) || !slices.Contains(codes, e.Error) {
			t.Fatalf("answer %d with error %q", rec.Code, e.Error)
		}
		if rec.Header().Get("Cache-Control") != "no-store" {
			t.Fatal("answer without Cache-Control: no-store")
		}

		rec = serve(handler, http.MethodPost, "/oauth/revoke", "application/x-www-form-urlencoded", body)
		if rec.Code == http.StatusOK {
			return
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || (rec.Code != http.StatusBadRequest && rec.Code != http.StatusUnauthorized) ||
			!slices.Contains(codes, e.Error) {
			t.Fatalf("revocation answer %d: %q", rec.Code, rec.Body)
		}
	})
}

// FuzzRegister sends arbitrary bodies to the registration endpoint. A registration is
// answered 201 with the redirect URIs as sent, each https or http on a loopback host,
// without userinfo or a fragment; anything else is an RFC 7591 error in JSON; nothing
// is a server error. Seeds are in testdata/fuzz/FuzzRegister.
func FuzzRegister(f *testing.F) {
	h := newHarness(f, func(o *oauth.Options) { o.RegistrationsPerMinute = -1 })
	f.Add(`{"client_name":"App","redirect_uris":["http://127.0.0.1:3000/cb","https://app.example/cb?x=1"]}`)
	handler := h.srv.Handler()
	f.Fuzz(func(t *testing.T, body string) {
		rec := serve(handler, http.MethodPost, "/oauth/register", "application/json", body)
		if rec.Header().Get("Cache-Control") != "no-store" {
			t.Fatalf("answer %d without Cache-Control: no-store", rec.Code)
		}
		if rec.Code != http.StatusCreated {
			var e struct{ Error string }
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil ||
				(rec.Code != http.StatusBadRequest && rec.Code != http.StatusRequestEntityTooLarge) ||
				(e.Error != "invalid_redirect_uri" && e.Error != "invalid_client_metadata") {
				t.Fatalf("answer %d: %q", rec.Code, rec.Body)
			}
			return
		}
		var sent, got struct {
			RedirectURIs []string `json:"redirect_uris"`
		}
		if err := json.Unmarshal([]byte(body), &sent); err != nil {
			t.Fatalf("registered a body that is not JSON: %q", body)
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || !slices.Equal(sent.RedirectURIs, got.RedirectURIs) || len(got.RedirectURIs) == 0 {
			t.Fatalf("registered redirect URIs %q, sent %q", got.RedirectURIs, sent.RedirectURIs)
		}
		for _, uri := range got.RedirectURIs {
			u, err := url.Parse(uri)
			if err != nil || u.User != nil || strings.Contains(uri, "#") ||
				!(u.Scheme == "https" || u.Scheme == "http" && slices.Contains([]string{"127.0.0.1", "::1", "localhost"}, u.Hostname())) {
				t.Fatalf("registered redirect URI %q", uri)
			}
		}
	})
}

// serve sends a request to handler and returns the recorded answer. target may carry
// any query, even one that is not valid.
func serve(handler http.Handler, method, target, contentType, body string) *httptest.ResponseRecorder {
	path, query, _ := strings.Cut(target, "?")
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.URL.RawQuery = query
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, req)
	return rec
}
