package mcp_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/internal/cleantext"
	"github.com/tollgate-dev/tollgate/mcp"
)

// The flags of a FuzzPost input: which headers the request carries.
const (
	fuzzSession        = 1 << iota // the Mcp-Session-Id of a live session
	fuzzNoJSONAccept               // Accept without application/json
	fuzzNoStreamAccept             // Accept without text/event-stream
	fuzzTextPlain                  // Content-Type: text/plain
	fuzzVersion0618                // Mcp-Protocol-Version: 2025-06-18
	fuzzVersion0728                // Mcp-Protocol-Version: 2026-07-28
	fuzzUnknownSession             // the Mcp-Session-Id of no session
	fuzzDelete                     // DELETE instead of POST
)

// FuzzPost sends arbitrary bodies, with and without a session and with the headers
// the flags choose, through the MCP handler. Whatever it gets, the handler never
// panics and never answers 5xx; every refusal is a JSON-RPC error object with a code
// in the JSON-RPC range and a clean message; a 200 is JSON (or the event stream of
// subscriptions/listen), a 202 empty; and only a 200 may change the balance.
//
//	go test -run='^$' -fuzz=FuzzPost -fuzztime=30s ./mcp/
func FuzzPost(f *testing.F) {
	for _, s := range []struct {
		body  string
		flags uint8
	}{
		{initBody, 0},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, fuzzSession},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hash","arguments":{"text":"a"}}}`, fuzzSession},
		{`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"message":"m","delay_ms":5000}}}`, fuzzSession},
		{`[{"jsonrpc":"2.0","id":4,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"}]`, fuzzSession},
		{`[{"jsonrpc":"2.0","id":4,"method":"rpc.discover"}]`, 0},
		{`{"jsonrpc":"2.0","id":5,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, fuzzSession | fuzzVersion0728},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, fuzzSession},
		{`{"jsonrpc":"2.0","id":6,"result":{}}`, fuzzSession},
		{`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, fuzzUnknownSession},
		{`{"jsonrpc":"2.0","id":8,"method":"tools/list"}`, fuzzSession | fuzzNoStreamAccept},
		{`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`, fuzzSession | fuzzTextPlain},
		{`[]`, fuzzSession | fuzzVersion0618},
		{``, fuzzSession | fuzzDelete},
		{`{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}`, fuzzSession},
		{`{"jsonrpc":"2.0","id":1e400,"method":"tools/call","params":{"name":"hash","arguments":"x"}}`, fuzzSession},
		{"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\x00\xff\"}", fuzzSession},
		{strings.Repeat("[", 10000), fuzzSession},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"hash","arguments":{"text":"` + strings.Repeat("x", 5000) + `"}}}`, fuzzSession},
	} {
		f.Add([]byte(s.body), s.flags)
	}
	h := newHarness(f, config{sampleOnly: true, noHTTP: true, mcp: mcp.Options{MaxBodyBytes: 8 << 10},
		svc: tollgate.Options{CallTimeout: 20 * time.Millisecond}})
	sid := fuzzSessionID(f, h)
	f.Fuzz(func(t *testing.T, body []byte, flags uint8) {
		method := http.MethodPost
		if flags&fuzzDelete != 0 {
			method = http.MethodDelete
		}
		req := httptest.NewRequestWithContext(t.Context(), method, path, bytes.NewReader(body))
		req.Header.Set("X-Api-Key", h.key)
		req.Header.Set("Content-Type", "application/json")
		accept := []string{"application/json", "text/event-stream"}
		if flags&fuzzNoJSONAccept != 0 {
			accept = accept[1:]
		}
		if flags&fuzzNoStreamAccept != 0 {
			accept = accept[:len(accept)-1]
		}
		req.Header.Set("Accept", strings.Join(accept, ", "))
		if flags&fuzzTextPlain != 0 {
			req.Header.Set("Content-Type", "text/plain")
		}
		switch {
		case flags&fuzzVersion0728 != 0:
			req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		case flags&fuzzVersion0618 != 0:
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		switch {
		case flags&fuzzUnknownSession != 0:
			req.Header.Set("Mcp-Session-Id", "no-such-session")
		case flags&fuzzSession != 0 && flags&fuzzDelete == 0: // never end the shared session
			req.Header.Set("Mcp-Session-Id", sid)
		}
		before := h.balance(t, h.account)
		rec := httptest.NewRecorder()
		h.handler.ServeHTTP(rec, req)
		if err := checkAnswer(rec); err != nil {
			t.Fatalf("%v\nrequest %s flags %08b body %q\nanswer %d %s", err, method, flags, body, rec.Code, rec.Body)
		}
		if rec.Code != http.StatusOK && h.balance(t, h.account) != before {
			t.Fatalf("a %d answer changed the balance: body %q", rec.Code, body)
		}
	})
}

// fuzzSessionID starts the session that FuzzPost's inputs use.
func fuzzSessionID(f *testing.F, h *harness) string {
	send := func(body, sid string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		req.Header.Set("X-Api-Key", h.key)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		rec := httptest.NewRecorder()
		h.handler.ServeHTTP(rec, req)
		return rec
	}
	rec := send(initBody, "")
	sid := rec.Header().Get("Mcp-Session-Id")
	if rec.Code != http.StatusOK || sid == "" {
		f.Fatalf("initialize: %d %s", rec.Code, rec.Body)
	}
	if rec := send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, sid); rec.Code != http.StatusAccepted {
		f.Fatalf("initialized: %d %s", rec.Code, rec.Body)
	}
	return sid
}

// checkAnswer checks the answer of the MCP endpoint to a request with a well-formed
// key: no 5xx; a refusal is a JSON-RPC error object; a success is JSON, an event
// stream, or an empty 202 or 204.
func checkAnswer(rec *httptest.ResponseRecorder) error {
	ct := rec.Header().Get("Content-Type")
	switch {
	case rec.Code >= 500:
		return errors.New("a server error")
	case rec.Code == http.StatusAccepted || rec.Code == http.StatusNoContent:
		if rec.Body.Len() != 0 {
			return fmt.Errorf("a %d with a body", rec.Code)
		}
		return nil
	case rec.Code == http.StatusOK && ct == "text/event-stream":
		return nil
	case ct != "application/json" || !json.Valid(rec.Body.Bytes()):
		return fmt.Errorf("not JSON: Content-Type %q", ct)
	case rec.Code == http.StatusOK:
		return nil
	}
	var r struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil || r.JSONRPC != "2.0" || r.Error == nil {
		return errors.New("not a JSON-RPC error object")
	}
	if r.Error.Code < -32768 || r.Error.Code > -32000 {
		return fmt.Errorf("code %d outside the JSON-RPC range", r.Error.Code)
	}
	if r.Error.Message == "" || cleantext.Message(r.Error.Message) != r.Error.Message {
		return fmt.Errorf("the message %q is empty or not clean text", r.Error.Message)
	}
	return nil
}
