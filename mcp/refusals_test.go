package mcp_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/mcp"
)

// wantRPCError checks that an answer is a JSON-RPC error object: the status, JSON,
// the id of the request (null for none), a code in the range JSON-RPC reserves (MCP's
// codes included), a message, and data.code equal to X-Error-Code.
func wantRPCError(t *testing.T, resp *http.Response, body []byte, status int, code int64, id string) rpcResponse {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d: %s", resp.StatusCode, status, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q, want application/json: %s", ct, body)
	}
	var envelope struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal(body, &envelope); err != nil || envelope.JSONRPC != "2.0" {
		t.Fatalf("not a JSON-RPC 2.0 response: %s", body)
	}
	if string(envelope.ID) != id {
		t.Errorf("id %s, want %s", envelope.ID, id)
	}
	r := decodeResponse(t, body)
	if r.Error == nil {
		t.Fatalf("no error: %s", body)
	}
	if r.Error.Code != code || r.Error.Code < -32768 || r.Error.Code > -32000 {
		t.Errorf("code %d, want %d", r.Error.Code, code)
	}
	if len(r.Error.Message) < 20 {
		t.Errorf("the message %q does not say what to fix", r.Error.Message)
	}
	if r.Error.Data.Code == "" || r.Error.Data.Code != resp.Header.Get("X-Error-Code") {
		t.Errorf("data.code %q, X-Error-Code %q", r.Error.Data.Code, resp.Header.Get("X-Error-Code"))
	}
	return r
}

// TestEveryRefusalIsJSONRPC sends every request that the SDK refuses with a plain HTTP
// error (go-sdk v1.8.0's http.Error calls in its streamable handler that a client can
// reach), and the handler's own refusals, and checks that each is answered with a
// JSON-RPC error object, its id, the right status and a message that says what to fix,
// and costs nothing.
func TestEveryRefusalIsJSONRPC(t *testing.T) {
	h := newHarness(t, config{})
	const list = `{"jsonrpc":"2.0","id":41,"method":"tools/list"}`
	const batch = `[{"jsonrpc":"2.0","id":42,"method":"tools/list"}]`
	tests := []struct {
		name      string
		method    string
		body      string
		session   string // "ok" for a live session, "" for none, anything else as is
		hdr       map[string]string
		status    int
		code      int64
		id        string
		fragments []string // in the message
	}{
		{"unknown session, POST", "POST", list, "no-such-session", nil, 404, -32600, "41", []string{"initialize"}},
		{"unknown session, GET", "GET", "", "no-such-session", map[string]string{"Accept": "text/event-stream"}, 404, -32600, "null", []string{"initialize"}},
		{"unknown session, DELETE", "DELETE", "", "no-such-session", nil, 404, -32600, "null", []string{"initialize"}},
		{"POST accepting only JSON", "POST", list, "ok", map[string]string{"Accept": "application/json"}, 406, -32600, "41", []string{"text/event-stream"}},
		{"POST without Accept", "POST", list, "ok", map[string]string{"Accept": ""}, 406, -32600, "41", []string{"Accept"}},
		{"GET without text/event-stream", "GET", "", "ok", map[string]string{"Accept": "application/json"}, 406, -32600, "null", []string{"text/event-stream"}},
		{"GET without a session", "GET", "", "", map[string]string{"Accept": "text/event-stream"}, 400, -32600, "null", []string{"Mcp-Session-Id"}},
		{"DELETE without a session", "DELETE", "", "", nil, 400, -32600, "null", []string{"Mcp-Session-Id"}},
		{"PATCH", "PATCH", list, "ok", nil, 405, -32600, "null", []string{"POST", "GET", "DELETE"}},
		{"PUT", "PUT", list, "ok", nil, 405, -32600, "null", []string{"POST"}},
		{"Content-Type text/plain", "POST", list, "ok", map[string]string{"Content-Type": "text/plain"}, 415, -32600, "41", []string{"application/json"}},
		{"no Content-Type", "POST", list, "ok", map[string]string{"Content-Type": ""}, 415, -32600, "41", []string{"application/json"}},
		{"unknown protocol version", "POST", list, "ok", map[string]string{"Mcp-Protocol-Version": "1999-01-01"}, 400, -32022, "41", []string{"Mcp-Protocol-Version", "2025-06-18"}},
		{"Last-Event-ID on a POST", "POST", list, "ok", map[string]string{"Last-Event-ID": "x"}, 400, -32600, "41", []string{"GET"}},
		{"Last-Event-ID on a GET", "GET", "", "ok", map[string]string{"Accept": "text/event-stream", "Last-Event-ID": "0_1"}, 400, -32600, "null", []string{"Last-Event-ID"}},
		{"a batch in protocol 2025-06-18", "POST", batch, "ok", map[string]string{"Mcp-Protocol-Version": "2025-06-18"}, 400, -32600, "null", []string{"one message per POST"}},
		{"a foreign Host", "POST", list, "ok", map[string]string{"Host": "evil.example"}, 403, mcp.CodeForbidden, "null", []string{"Host"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := h.raw(t, keyHeader(h.key))
			if tt.session == "ok" {
				c.initialize()
			} else {
				c.sid = tt.session
			}
			before := h.balance(t, h.account)
			var resp *http.Response
			var body []byte
			if host, ok := tt.hdr["Host"]; ok {
				// net/http takes the Host from the request, not its headers.
				req, _ := http.NewRequestWithContext(t.Context(), tt.method, h.url, strings.NewReader(tt.body))
				req.Host = host
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("X-Api-Key", h.key)
				r, err := h.srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ = io.ReadAll(r.Body)
				r.Body.Close()
				resp = r
			} else {
				resp, body = c.do(tt.method, tt.body, tt.hdr)
			}
			r := wantRPCError(t, resp, body, tt.status, tt.code, tt.id)
			for _, f := range tt.fragments {
				if !strings.Contains(r.Error.Message, f) {
					t.Errorf("the message %q does not mention %q", r.Error.Message, f)
				}
			}
			if tt.status == http.StatusMethodNotAllowed && resp.Header.Get("Allow") != "GET, POST, DELETE, OPTIONS" {
				t.Errorf("Allow %q", resp.Header.Get("Allow"))
			}
			if got := h.balance(t, h.account); got != before {
				t.Errorf("the refusal was charged: balance %d, was %d", got, before)
			}
		})
	}

	t.Run("a second event stream on a session", func(t *testing.T) {
		c := h.raw(t, keyHeader(h.key))
		c.initialize()
		c.openStream()
		resp, body := c.do("GET", "", map[string]string{"Accept": "text/event-stream"})
		wantRPCError(t, resp, body, http.StatusConflict, -32600, "null")
	})
	t.Run("another key's session", func(t *testing.T) {
		_, other := h.newAccount(t, "other", "pro")
		c := h.raw(t, keyHeader(h.key))
		c.initialize()
		c.hdr = keyHeader(other)
		resp, body := c.do("POST", list, nil)
		wantRPCError(t, resp, body, http.StatusForbidden, mcp.CodeForbidden, "41")
	})
}
