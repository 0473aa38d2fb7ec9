package gql_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/gql"
	"github.com/tollgate-dev/tollgate/internal/doortest"
)

// TestCredentialForms: the three credential forms (x-api-key, Authorization: Bearer and
// x-jwt) reach the same account through GraphQL, header names in any case; with several,
// x-api-key wins.
func TestCredentialForms(t *testing.T) {
	sessions, err := auth.NewSessions([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, config{svc: tollgate.Options{Sessions: sessions}})
	acct := h.newAccount(t, "pro", 100)
	other := h.newAccount(t, "pro", 100)
	tok, err := sessions.Issue(acct.ID, h.clock.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	forms := []struct {
		name string
		hdrs []header
	}{
		{"x-api-key", []header{{"x-api-key", acct.Key}}},
		{"X-API-KEY", []header{{"X-API-KEY", acct.Key}}},
		{"bearer", []header{{"Authorization", "Bearer " + acct.Key}}},
		{"x-jwt", []header{{"x-jwt", tok}}},
		{"x-api-key before bearer", []header{{"X-Api-Key", acct.Key}, {"Authorization", "Bearer " + other.Key}}},
		{"x-api-key before x-jwt of another account", []header{{"X-Api-Key", acct.Key}, {"X-Jwt", "not even a token"}}},
	}
	// Over a real server, so that header names travel as written.
	srv := httptest.NewServer(h.handler)
	defer srv.Close()
	for i, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			req := newRequest(t.Context(), http.MethodPost, gqlBody(t, hashQuery, nil), append([]header{contentType(mediaJSON)}, f.hdrs...)...)
			req.RequestURI = ""
			req.URL, _ = url.Parse(srv.URL + "/v1/graphql")
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			r := &response{Status: resp.StatusCode, Header: resp.Header, Body: body}
			if err := checkResponse(req, r); err != nil {
				t.Fatalf("%v: %s", err, body)
			}
			wantOK(t, r)
			wantCredits(t, r, "pro", 1, int64(100-i-1))
		})
	}
	if got := h.balance(t, other.ID); got != 100 {
		t.Errorf("the other account was charged: %d", got)
	}
	// An invalid session token is a verdict on the credential: 401.
	r := h.serve(t, newRequest(t.Context(), http.MethodPost, gqlBody(t, hashQuery, nil), contentType(mediaJSON), header{"X-Jwt", "a.b.c"}))
	wantGatewayError(t, r, http.StatusUnauthorized, "INVALID_API_KEY")
}

// TestTrustedProxies: the IP allow-list applies to the client behind a trusted proxy,
// and X-Forwarded-For from anyone else is ignored.
func TestTrustedProxies(t *testing.T) {
	h := newHarness(t, config{gql: gql.Options{Edge: doortest.NewEdge(t, edge.Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}})}})
	acct := h.newAccount(t, "pro", -1)
	office := h.newSubKey(t, acct, "office", auth.RestrictionSpec{AllowedIPs: []string{"10.0.0.0/8"}})
	tests := []struct {
		remote, xff string
		ok          bool
	}{
		{"192.0.2.1:1234", "10.1.2.3", true},     // trusted proxy, client inside
		{"192.0.2.1:1234", "203.0.113.9", false}, // trusted proxy, client outside
		{"198.51.100.7:1234", "10.1.2.3", false}, // untrusted peer: its header is ignored
		{"10.9.9.9:1234", "", true},              // the client itself
	}
	for _, tt := range tests {
		req := newRequest(t.Context(), http.MethodPost, gqlBody(t, hashQuery, nil), contentType(mediaJSON), apiKey(office.Key))
		req.RemoteAddr = tt.remote
		if tt.xff != "" {
			req.Header.Set("X-Forwarded-For", tt.xff)
		}
		r := h.serve(t, req)
		if tt.ok {
			wantOK(t, r)
		} else {
			wantGatewayError(t, r, http.StatusForbidden, "FORBIDDEN")
		}
	}
}
