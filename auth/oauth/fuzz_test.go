package oauth_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// FuzzAuthorize sends arbitrary queries to the authorization endpoint. Whatever the
// query, the answer is the consent page or an error page, never a redirect (the person
// has not acted on a consent page), never framed, and never a server error.
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
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/oauth/authorize", nil)
		req.URL.RawQuery = query
		handler.ServeHTTP(rec, req)
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

// FuzzToken sends arbitrary bodies to the token endpoint. Every answer is an OAuth
// error from RFC 6749 section 5.2 in JSON, never cached and never a server error.
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
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/oauth/token", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		handler.ServeHTTP(rec, req)
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
	})
}
