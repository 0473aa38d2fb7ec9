package mcp_test

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/internal/doortest"
	"github.com/tollgate-dev/tollgate/mcp"
)

// fakeTokens is a fake authorization server: access tokens mapped to key ids.
type fakeTokens map[string]string

// options returns the handler options of OAuth with the fake tokens.
func (f fakeTokens) options() mcp.Options {
	return mcp.Options{VerifyToken: f.verify, Challenge: testChallenge}
}

// testChallenge is the challenge of the tests with OAuth on.
const testChallenge = `Bearer resource_metadata="https://mcp.example/.well-known/oauth-protected-resource/v1/mcp", scope="mcp"`

func (f fakeTokens) verify(_ context.Context, token string) (string, error) {
	if token == "store-down" {
		return "", &tollgate.Error{Code: tollgate.CodeUnavailable, Message: "the token store cannot be reached; try again shortly"}
	}
	if id, ok := f[token]; ok {
		return id, nil
	}
	return "", errors.New("unknown token")
}

const initBody = `{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// TestCredentials sends initialize with every form of credential and checks the
// answer: the edge's HTML 403 for malformed keys, 401 with the challenge for a missing
// or unknown credential, a JSON-RPC 403 for a key that may not use MCP, and a session
// for the good ones.
func TestCredentials(t *testing.T) {
	tokens := fakeTokens{}
	h := newHarness(t, config{mcp: tokens.options()})
	restOnlyID, restOnly := h.subKey(t, h.account, "rest-only", auth.RestrictionSpec{Channels: []string{"rest"}})
	_, mcpOnly := h.subKey(t, h.account, "mcp-only", auth.RestrictionSpec{Channels: []string{"mcp"}})
	_, farAway := h.subKey(t, h.account, "office", auth.RestrictionSpec{AllowedIPs: []string{"10.0.0.0/8"}})
	tokens["good-token"] = h.keyID
	tokens["rest-token"] = restOnlyID
	metadata := testChallenge

	tests := []struct {
		name      string
		hdr       http.Header
		status    int
		edge      bool   // the bare HTML 403
		rpcCode   int64  // the JSON-RPC error code, 0 for a success
		errorCode string // data.code and X-Error-Code
		challenge string // WWW-Authenticate
	}{
		{name: "no credential", status: 401, rpcCode: -32041, errorCode: "no_credential", challenge: metadata},
		{name: "malformed x-api-key", hdr: keyHeader("undefined"), status: 403, edge: true},
		{name: "truncated key", hdr: keyHeader(h.key[:30]), status: 403, edge: true},
		{name: "non-UUID bearer, OAuth on, unknown token", hdr: bearerHeader("not-a-token"), status: 401, rpcCode: -32041,
			errorCode: "unauthorized", challenge: metadata + `, error="invalid_token"`},
		{name: "unknown key", hdr: keyHeader("00000000-0000-4000-8000-000000000000"), status: 401, rpcCode: -32041,
			errorCode: "unauthorized", challenge: metadata + `, error="invalid_token"`},
		{name: "token store unavailable", hdr: bearerHeader("store-down"), status: 503, rpcCode: -32603, errorCode: "unavailable"},
		{name: "key without the mcp channel", hdr: keyHeader(restOnly), status: 403, rpcCode: -32043, errorCode: "forbidden"},
		{name: "token for a key without the mcp channel", hdr: bearerHeader("rest-token"), status: 403, rpcCode: -32043, errorCode: "forbidden"},
		{name: "address not allowed", hdr: keyHeader(farAway), status: 403, rpcCode: -32043, errorCode: "forbidden"},
		{name: "x-api-key", hdr: keyHeader(h.key), status: 200},
		{name: "key in uppercase", hdr: keyHeader(strings.ToUpper(h.key)), status: 200},
		{name: "bearer key", hdr: bearerHeader(h.key), status: 200},
		{name: "mcp-only key", hdr: keyHeader(mcpOnly), status: 200},
		{name: "OAuth token", hdr: bearerHeader("good-token"), status: 200},
		{name: "x-api-key wins over a token", hdr: http.Header{"X-Api-Key": {h.key}, "Authorization": {"Bearer nonsense"}}, status: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := h.raw(t, tt.hdr).post(initBody, "Origin", "https://app.example")
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, body)
			}
			if tt.edge {
				if ct := resp.Header.Get("Content-Type"); ct != "text/html" || resp.Header.Get("Access-Control-Allow-Origin") != "" {
					t.Errorf("the edge 403 has Content-Type %q and CORS %q; want bare HTML", ct, resp.Header.Get("Access-Control-Allow-Origin"))
				}
				return
			}
			if resp.Header.Get("Access-Control-Allow-Origin") != "*" {
				t.Errorf("no CORS headers on a JSON answer")
			}
			if got := resp.Header.Get("WWW-Authenticate"); got != tt.challenge {
				t.Errorf("WWW-Authenticate %q, want %q", got, tt.challenge)
			}
			r := decodeResponse(t, body)
			if tt.rpcCode == 0 {
				if r.Error != nil || resp.Header.Get("Mcp-Session-Id") == "" {
					t.Fatalf("no session: %s", body)
				}
				return
			}
			if r.Error == nil || r.Error.Code != tt.rpcCode || r.Error.Data.Code != tt.errorCode || string(r.ID) != "7" {
				t.Fatalf("answer %s; want JSON-RPC error %d (%s) for id 7", body, tt.rpcCode, tt.errorCode)
			}
			if got := resp.Header.Get("X-Error-Code"); got != tt.errorCode {
				t.Errorf("X-Error-Code %q, want %q", got, tt.errorCode)
			}
			if r.Error.Message == "" {
				t.Error("the error has no message")
			}
		})
	}
}

// TestOAuthOff checks that without VerifyToken a bearer value that is not a key gets
// the edge's 403, as over REST.
func TestOAuthOff(t *testing.T) {
	h := newHarness(t, config{})
	resp, _ := h.raw(t, bearerHeader("some-oauth-token")).post(initBody)
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Content-Type") != "text/html" {
		t.Fatalf("status %d %q; want the edge's HTML 403", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// TestChallenge checks the WWW-Authenticate value of a 401: the option verbatim, and
// without OAuth a bare realm that sends no client to a metadata URL (which a host
// without the OAuth metadata would answer with 404). OAuth without the option is
// refused when the handler is made.
func TestChallenge(t *testing.T) {
	tests := []struct {
		name string
		opts mcp.Options
		want string
	}{
		{"OAuth off", mcp.Options{}, `Bearer realm="tollgate"`},
		{"OAuth off, named", mcp.Options{Name: `acme "tools"`}, `Bearer realm="acme tools"`},
		{"option", mcp.Options{Challenge: `Bearer resource_metadata="https://x.example/.well-known/oauth-protected-resource/v1/mcp", scope="mcp"`},
			`Bearer resource_metadata="https://x.example/.well-known/oauth-protected-resource/v1/mcp", scope="mcp"`},
		{"OAuth on", fakeTokens{}.options(), testChallenge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, config{mcp: tt.opts})
			resp, body := h.raw(t, nil).post(initBody)
			if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != tt.want {
				t.Fatalf("%d %q: %s; want 401 with %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body, tt.want)
			}
			if r := decodeResponse(t, body); strings.Contains(r.Error.Message, "OAuth") != (tt.opts.VerifyToken != nil) {
				t.Errorf("the message %q, with OAuth %v", r.Error.Message, tt.opts.VerifyToken != nil)
			}
			if strings.Contains(tt.want, "resource_metadata") {
				return
			}
			// Nothing answers at the metadata's conventional place on this server, and
			// the challenge does not point there.
			meta, err := h.srv.Client().Get(h.srv.URL + "/.well-known/oauth-protected-resource/v1/mcp")
			if err != nil {
				t.Fatal(err)
			}
			meta.Body.Close()
			if meta.StatusCode != http.StatusNotFound {
				t.Fatalf("the test server serves metadata: %d", meta.StatusCode)
			}
		})
	}
	t.Run("OAuth without the option", func(t *testing.T) {
		svc := newHarness(t, config{}).svc
		_, err := mcp.NewHandler(svc, &mcp.Options{VerifyToken: fakeTokens{}.verify})
		if err == nil || !strings.Contains(err.Error(), "Challenge") {
			t.Fatalf("NewHandler: %v; want an error naming Options.Challenge", err)
		}
	})
}

// TestDNSRebinding checks the Host check on a loopback socket: a foreign Host is
// refused before anything else, unless a trusted proxy forwards it.
func TestDNSRebinding(t *testing.T) {
	trusted := mcp.Options{Edge: doortest.NewEdge(t, edge.Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})}
	tests := []struct {
		name   string
		opts   mcp.Options
		host   string
		status int
	}{
		{"loopback address", mcp.Options{}, "", 200},
		{"localhost", mcp.Options{}, "localhost", 200},
		{"localhost with port", mcp.Options{}, "localhost:8080", 200},
		{"IPv6 loopback", mcp.Options{}, "[::1]:8080", 200},
		{"foreign host", mcp.Options{}, "evil.example", 403},
		{"foreign host with port", mcp.Options{}, "evil.example:80", 403},
		{"public name through a trusted proxy", trusted, "api.example.com", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, config{mcp: tt.opts})
			req, _ := http.NewRequest(http.MethodPost, h.url, strings.NewReader(initBody))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("X-Api-Key", h.key)
			if tt.host != "" {
				req.Host = tt.host
			}
			resp, err := h.srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.status)
			}
		})
	}
}

// TestSessionToken checks that a dashboard session token (x-jwt) connects as its
// account.
func TestSessionToken(t *testing.T) {
	sessions, err := auth.NewSessions([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, config{svc: tollgate.Options{Sessions: sessions}})
	tok, err := sessions.Issue(h.account, t0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := h.connect(t, http.Header{"X-Jwt": {tok}}, clientOptions{noSSE: true})
	if err != nil {
		t.Fatal(err)
	}
	if res := call(t, cs, "hash", map[string]any{"text": "a"}); res.IsError {
		t.Fatalf("a call with a session token failed: %s", text(t, res))
	}
}

// TestCORS checks the preflight, which needs no credential, and the headers a browser
// client needs to read.
func TestCORS(t *testing.T) {
	h := newHarness(t, config{mcp: mcp.Options{Edge: doortest.NewEdge(t, edge.Options{AllowedOrigins: []string{"https://app.example"}})}})
	req, _ := http.NewRequest(http.MethodOptions, h.url, nil)
	req.Header.Set("Origin", "https://app.example")
	req.Header.Set("Access-Control-Request-Method", "POST")
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Fatalf("preflight: %d, origin %q", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
	for _, want := range []string{"Mcp-Session-Id", "Mcp-Protocol-Version", "X-Api-Key"} {
		if !strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), want) {
			t.Errorf("Access-Control-Allow-Headers %q lacks %s", resp.Header.Get("Access-Control-Allow-Headers"), want)
		}
	}
	resp2, _ := h.raw(t, keyHeader(h.key)).post(initBody, "Origin", "https://app.example")
	for _, want := range []string{"Mcp-Session-Id", "WWW-Authenticate", "X-Credits-Remaining"} {
		if !strings.Contains(resp2.Header.Get("Access-Control-Expose-Headers"), want) {
			t.Errorf("Access-Control-Expose-Headers %q lacks %s", resp2.Header.Get("Access-Control-Expose-Headers"), want)
		}
	}
	resp3, _ := h.raw(t, keyHeader(h.key)).post(initBody, "Origin", "https://other.example")
	if resp3.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("an origin that is not allowed got %q", resp3.Header.Get("Access-Control-Allow-Origin"))
	}
	// A request without Origin is not cross-origin: no CORS header would serve it, on a
	// session's start, a paid call or a refusal.
	for _, allowed := range [][]string{{"https://app.example"}, nil} {
		h := newHarness(t, config{mcp: mcp.Options{Edge: doortest.NewEdge(t, edge.Options{AllowedOrigins: allowed})}})
		cl := h.raw(t, keyHeader(h.key))
		resp, _ := cl.post(initBody)
		cl.sid = resp.Header.Get("Mcp-Session-Id")
		call, _ := cl.post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hash","arguments":{"text":"a"}}}`)
		refused, _ := h.raw(t, nil).post(initBody)
		for _, r := range []*http.Response{resp, call, refused} {
			for name := range r.Header {
				if strings.HasPrefix(name, "Access-Control-") {
					t.Errorf("allowed origins %v: a %d answer to a request without Origin has %s: %q", allowed, r.StatusCode, name, r.Header.Get(name))
				}
			}
		}
		if call.Header.Get("X-Credits-Remaining") == "" {
			t.Errorf("allowed origins %v: the paid call's answer lacks X-Credits-Remaining", allowed)
		}
	}
}
