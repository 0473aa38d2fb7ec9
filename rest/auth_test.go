package rest_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/wire"
)

// TestEdgeRejectsMissingOrMalformedKey proves the edge rule: no key header, or a value
// that is not UUID-shaped, gets the bare HTML 403 (no JSON, no CORS headers), on API
// calls and on the analytics probe alike, and never touches the account.
func TestEdgeRejectsMissingOrMalformedKey(t *testing.T) {
	h := newHarness(t, config{sessions: true})
	acct := h.newAccount(t, "pro")
	cases := []struct {
		name string
		hdrs []header
	}{
		{"no key header", nil},
		{"empty x-api-key", []header{key("")}},
		{"blank x-api-key", []header{key("   ")}},
		{"undefined", []header{key("undefined")}},
		{"null", []header{key("null")}},
		{"truncated UUID", []header{key(acct.Key[:30])}},
		{"UUID with a character too many", []header{key(acct.Key + "0")}},
		{"placeholder", []header{key("YOUR_API_KEY")}},
		{"placeholder in UUID shape", []header{key("xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx")}},
		{"UUID without hyphens", []header{key(strings.ReplaceAll(acct.Key, "-", ""))}},
		{"UUID in braces", []header{key("{" + acct.Key[:34] + "}")}},
		{"bearer undefined", []header{bearer("undefined")}},
		{"bearer truncated", []header{bearer(acct.Key[:8])}},
		{"x-jwt not a JWT", []header{jwt("undefined")}},
		{"Authorization Basic is no credential", []header{{"Authorization", "Basic dXNlcjpwYXNz"}}},
	}
	for _, path := range []string{"/v1/hash?text=hello", "/v1/analytics", "/v1/echo", "/v1/nope", "/v1/hash/extra"} {
		for _, c := range cases {
			t.Run(path+"/"+c.name, func(t *testing.T) {
				method := http.MethodGet
				if path == "/v1/echo" {
					method = http.MethodPost
				}
				r := h.do(t, method, path, nil, c.hdrs...)
				if !r.Edge {
					t.Fatalf("got %d %s %q, want the edge's HTML 403", r.Status, r.Header.Get("Content-Type"), r.Body)
				}
			})
		}
	}
	if b := h.balance(t, acct.ID); b.Used != 0 {
		t.Errorf("edge rejections spent %d credits", b.Used)
	}
}

// TestUnknownKeyIs401 proves that a well-formed UUID that matches no key gets the JSON
// 401 whose message is exactly "unauthorized", in every key form and on analytics.
func TestUnknownKeyIs401(t *testing.T) {
	h := newHarness(t, config{})
	h.newAccount(t, "pro")
	const unknown = "0b6a8f64-7a3c-4f43-9d7e-2c1f00000000"
	for _, c := range []struct {
		name, path string
		cred       header
	}{
		{"x-api-key", "/v1/hash?text=a", key(unknown)},
		{"bearer", "/v1/hash?text=a", bearer(unknown)},
		{"uppercase", "/v1/hash?text=a", key(strings.ToUpper(unknown))},
		{"analytics", "/v1/analytics", key(unknown)},
		{"unknown API", "/v1/nope", key(unknown)},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := h.do(t, http.MethodGet, c.path, nil, c.cred)
			wantError(t, r, http.StatusUnauthorized, "unauthorized")
			if r.Error != "unauthorized" {
				t.Errorf("error = %q, want exactly \"unauthorized\"", r.Error)
			}
			if r.Header.Get(wire.HeaderCreditsRemaining) != "" {
				t.Error("a 401 reveals an account's credit headers")
			}
		})
	}
}

// TestCredentialForms proves section 5's credential rules: x-api-key, Authorization:
// Bearer and x-jwt resolve to the same account and billing; header names are
// case-insensitive; several forms at once are no error and x-api-key wins.
func TestCredentialForms(t *testing.T) {
	h := newHarness(t, config{sessions: true})
	acct := h.newAccount(t, "pro")
	other := h.newAccount(t, "pro")
	tok := h.session(t, acct.ID, time.Hour)

	forms := []struct {
		name string
		hdrs []header
	}{
		{"x-api-key", []header{key(acct.Key)}},
		{"x-api-key uppercase value", []header{key(strings.ToUpper(acct.Key))}},
		{"bearer", []header{bearer(acct.Key)}},
		{"bearer lowercase scheme", []header{{"Authorization", "bearer " + acct.Key}}},
		{"x-jwt", []header{jwt(tok)}},
		{"lowercase names", []header{{"x-api-key", acct.Key}}},
		{"all three forms", []header{key(acct.Key), bearer(other.Key), jwt(h.session(t, other.ID, time.Hour))}},
		{"x-api-key wins over another account's bearer", []header{bearer(other.Key), key(acct.Key)}},
		{"bearer wins over x-jwt", []header{jwt(h.session(t, other.ID, time.Hour)), bearer(acct.Key)}},
	}
	want := int64(100000)
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			r := h.do(t, http.MethodGet, "/v1/hash?text=hello", nil, f.hdrs...)
			wantOK(t, r)
			want--
			if got := r.Int(wire.HeaderCreditsRemaining); got != want {
				t.Errorf("X-Credits-Remaining = %d, want %d (the same account's balance)", got, want)
			}
			if a := h.analytics(t, f.hdrs...); a.Account != acct.ID {
				t.Errorf("analytics account = %s, want %s", a.Account, acct.ID)
			}
		})
	}
	if b := h.balance(t, other.ID); b.Used != 0 {
		t.Errorf("the other account was charged %d credits", b.Used)
	}
	if b := h.balance(t, acct.ID); b.Used != int64(len(forms)) {
		t.Errorf("account used %d credits, want %d", b.Used, len(forms))
	}
}

// TestHeaderNamesCaseInsensitiveOnTheWire writes requests by hand over TCP, with header
// names in cases no Go client would send, and proves every form is recognised.
func TestHeaderNamesCaseInsensitiveOnTheWire(t *testing.T) {
	h := newHarness(t, config{sessions: true})
	acct := h.newAccount(t, "pro")
	tok := h.session(t, acct.ID, time.Hour)
	for i, line := range []string{
		"X-API-KEY: " + acct.Key,
		"x-api-key: " + acct.Key,
		"x-Api-kEY: " + strings.ToUpper(acct.Key),
		"AUTHORIZATION: BEARER " + acct.Key,
		"authorization: Bearer " + acct.Key,
		"X-JWT: " + tok,
		"x-jwt: " + tok,
	} {
		t.Run(strings.SplitN(line, ":", 2)[0], func(t *testing.T) {
			status, hdr, body := rawRequest(t, h, "GET /v1/hash?text=hello HTTP/1.1\r\nHost: test\r\n"+line+"\r\nConnection: close\r\n\r\n")
			if status != http.StatusOK {
				t.Fatalf("got %d: %s", status, body)
			}
			if got, want := hdr.Get(wire.HeaderCreditsRemaining), fmt.Sprint(100000-i-1); got != want {
				t.Errorf("X-Credits-Remaining = %s, want %s", got, want)
			}
		})
	}
}

// rawRequest writes a request by hand to the test server and reads the answer.
func rawRequest(t *testing.T, h *harness, req string) (int, http.Header, string) {
	t.Helper()
	var d net.Dialer
	conn, err := d.DialContext(t.Context(), "tcp", h.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(body)
}

// TestSessionTokens proves x-jwt's failure modes: refused with 401 when the service has
// no sessions configured, when expired and when forged; and that a session acts within
// the account's billing.
func TestSessionTokens(t *testing.T) {
	t.Run("disabled", func(t *testing.T) {
		h := newHarness(t, config{})
		acct := h.newAccount(t, "pro")
		s, err := auth.NewSessions(sessionSecret)
		if err != nil {
			t.Fatal(err)
		}
		tok, err := s.Issue(acct.ID, h.clock.Now(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range []string{"/v1/hash?text=a", "/v1/analytics"} {
			r := h.do(t, http.MethodGet, path, nil, jwt(tok))
			wantError(t, r, http.StatusUnauthorized, "unauthorized", "session", "not accepted")
		}
	})

	h := newHarness(t, config{sessions: true})
	acct := h.newAccount(t, "pro")
	forger, err := auth.NewSessions([]byte("another secret of at least 32 bytes!!"))
	if err != nil {
		t.Fatal(err)
	}
	forged, err := forger.Issue(acct.ID, h.clock.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	good := h.session(t, acct.ID, time.Hour)
	parts := strings.Split(good, ".")
	tampered := parts[0] + "." + parts[1] + "x." + parts[2]
	unknownAcct := h.session(t, "no-such-account", time.Hour)

	t.Run("valid", func(t *testing.T) {
		wantOK(t, h.do(t, http.MethodGet, "/v1/hash?text=a", nil, jwt(good)))
		if b := h.balance(t, acct.ID); b.Used != 1 {
			t.Errorf("used %d, want 1", b.Used)
		}
	})
	for _, c := range []struct{ name, tok, why string }{
		{"forged", forged, "signature"},
		{"tampered", tampered, ""},
		{"unknown account", unknownAcct, "account"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := h.do(t, http.MethodGet, "/v1/hash?text=a", nil, jwt(c.tok))
			wantError(t, r, http.StatusUnauthorized, "unauthorized", "session", c.why)
		})
	}
	t.Run("expired", func(t *testing.T) {
		h.clock.Advance(2 * time.Hour)
		r := h.do(t, http.MethodGet, "/v1/hash?text=a", nil, jwt(good))
		wantError(t, r, http.StatusUnauthorized, "unauthorized", "expired")
		r = h.do(t, http.MethodGet, "/v1/analytics", nil, jwt(good))
		wantError(t, r, http.StatusUnauthorized, "unauthorized", "expired")
	})
	if b := h.balance(t, acct.ID); b.Used != 1 {
		t.Errorf("refused sessions were charged: used %d, want 1", b.Used)
	}
}
