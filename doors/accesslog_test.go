package doors_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/doors"
	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/wire"
)

// syncBuffer is a buffer the access log's handler writes to from the server's
// goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// accessLine is one line of the access log, as the JSON handler writes it.
type accessLine struct {
	Msg       string   `json:"msg"`
	RequestID string   `json:"request_id"`
	Door      string   `json:"door"`
	Method    string   `json:"method"`
	Path      string   `json:"path"`
	Status    int      `json:"status"`
	Account   string   `json:"account"`
	KeyID     string   `json:"key_id"`
	APIs      []string `json:"apis"`
	Code      string   `json:"code"`
	Credits   int64    `json:"credits"`
}

// TestAccessLog: every door mounted writes one line per request, with its door, the
// account and key id of its caller, the APIs, status, error code and credits of its
// calls, and the request id it echoes; no line holds a key's value, and key material
// in a path is redacted.
func TestAccessLog(t *testing.T) {
	svc := newService(t, true)
	var out syncBuffer
	mux := http.NewServeMux()
	m, err := doors.Mount(mux, svc, &doors.Options{
		Edge:       edge.Options{AccessLog: slog.New(slog.NewJSONHandler(&out, nil))},
		AdminToken: token,
		OAuth:      &doors.OAuth{Store: memory.NewOAuthStore()},
		PublicURL:  "http://tollgate.test",
		Logger:     slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	_, keyRec, _, err := m.Accounts.CreateAccount(t.Context(), accounts.Spec{ID: "acme", Plan: "pro", KeyValue: key})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	send := func(method, path, body string, hdr ...string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		c := srv.Client()
		c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res
	}
	withKey := []string{wire.HeaderAPIKey, key, "Content-Type", "application/json"}
	mcpHdr := append(slices.Clone(withKey), "Accept", "application/json, text/event-stream")
	init := send("POST", "/v1/mcp", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`, mcpHdr...)
	session := init.Header.Get("Mcp-Session-Id")
	if init.StatusCode != 200 || session == "" {
		t.Fatalf("MCP initialize: %d", init.StatusCode)
	}
	mcpHdr = append(mcpHdr, "Mcp-Session-Id", session)
	send("POST", "/v1/mcp", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, mcpHdr...)
	out.mu.Lock()
	out.buf.Reset() // the lines of the MCP handshake are not checked
	out.mu.Unlock()

	type want struct {
		door, account, keyID string
		apis                 []string
		status               int
		code                 string
		credits              int64
	}
	acme := func(door string, apis []string, status int, code string, credits int64) want {
		return want{door, "acme", keyRec.ID, apis, status, code, credits}
	}
	for _, tc := range []struct {
		name, method, path, body string
		hdr                      []string
		want                     want
		wantPath                 string
	}{
		{"rest call", "GET", "/v1/hash?text=a", "", withKey, acme("rest", []string{"hash"}, 200, "", 1), "/v1/hash"},
		{"rest refused", "GET", "/v1/hash", "", withKey, acme("rest", []string{"hash"}, 400, "invalid_input", 0), "/v1/hash"},
		{"batch", "POST", "/v1/hash/batch", `{"items":[{"text":"a"},{"text":"b"}]}`, withKey, acme("batch", []string{"hash"}, 200, "", 2), "/v1/hash/batch"},
		{"graphql", "POST", "/v1/graphql", `{"query":"{ hash(text: \"x\") { hash } }"}`, withKey, acme("graphql", []string{"hash"}, 200, "", 1), "/v1/graphql"},
		{"mcp tool call", "POST", "/v1/mcp", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hash","arguments":{"text":"a"}}}`, mcpHdr, acme("mcp", []string{"hash"}, 200, "", 1), "/v1/mcp"},
		{"account", "GET", "/v1/account", "", withKey, acme("account", nil, 200, "", 0), "/v1/account"},
		{"session", "POST", "/v1/account/session", `{"kind":"token"}`, withKey, acme("session", nil, 201, "", 0), "/v1/account/session"},
		{"dashboard", "GET", "/dashboard/", "", nil, want{door: "dashboard", status: 303}, "/dashboard/"},
		{"admin", "GET", "/admin/v1/accounts/acme", "", []string{"Authorization", "Bearer " + token}, want{door: "admin", status: 200}, "/admin/v1/accounts/acme"},
		{"oauth", "GET", "/.well-known/oauth-authorization-server", "", nil, want{door: "oauth", status: 200}, "/.well-known/oauth-authorization-server"},
		{"no credential", "GET", "/v1/hash?text=a", "", nil, want{door: "rest", status: 403}, "/v1/hash"},
		{"key in the path", "GET", "/v1/" + key + "/x", "", withKey, want{door: "rest", status: 404, code: "not_found"}, "/v1/[redacted]/x"},
		{"hex in the path", "GET", "/v1/" + strings.Repeat("ab", 20), "", nil, want{door: "rest", status: 403}, "/v1/[redacted]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out.mu.Lock()
			out.buf.Reset()
			out.mu.Unlock()
			id := "req-" + strings.ReplaceAll(tc.name, " ", "_")
			res := send(tc.method, tc.path, tc.body, append(slices.Clone(tc.hdr), wire.HeaderRequestID, id)...)
			if got := res.Header.Get(wire.HeaderRequestID); got != id {
				t.Errorf("X-Request-Id %q, want %q echoed", got, id)
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if len(lines) != 1 {
				t.Fatalf("%d lines, want 1:\n%s", len(lines), out.String())
			}
			if strings.Contains(lines[0], key) {
				t.Fatalf("the line holds the key's value: %s", lines[0])
			}
			var l accessLine
			if err := json.Unmarshal([]byte(lines[0]), &l); err != nil {
				t.Fatal(err)
			}
			w := tc.want
			if l.Msg != "request" || l.RequestID != id || l.Door != w.door || l.Method != tc.method || l.Path != tc.wantPath ||
				l.Status != w.status || l.Account != w.account || l.KeyID != w.keyID || l.Code != w.code || l.Credits != w.credits ||
				(w.apis != nil && !slices.Equal(l.APIs, w.apis)) {
				t.Errorf("line %s\nwant %+v, path %s", lines[0], w, tc.wantPath)
			}
		})
	}

	// A request id that is not sane is replaced with one the edge makes.
	for _, bad := range []string{"a b", strings.Repeat("x", wire.MaxRequestIDLen+1), "<script>", key} {
		res := send("GET", "/v1/hash?text=a", "", append(slices.Clone(withKey), wire.HeaderRequestID, bad)...)
		if got := res.Header.Get(wire.HeaderRequestID); got == bad || got == "" {
			t.Errorf("request id %q answered with %q, want a new one", bad, got)
		}
	}
	if strings.Contains(out.String(), "<script>") || strings.Contains(out.String(), key) {
		t.Error("an insane request id, or a key sent as one, was logged")
	}
}

// TestAccessLogOff: without an access log the edge leaves a door's handler as it is,
// and answers carry no request id.
func TestAccessLogOff(t *testing.T) {
	e, err := edge.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	h := http.NotFoundHandler()
	if got := e.Handler("rest", h); got == nil || e.AccessLogged() {
		t.Fatal("Handler without an access log changed the handler")
	}
	svc := newService(t, false)
	mux := http.NewServeMux()
	m, err := doors.Mount(mux, svc, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/catalog", nil))
	if rec.Header().Get(wire.HeaderRequestID) != "" {
		t.Error("an answer without an access log carries a request id")
	}
}
