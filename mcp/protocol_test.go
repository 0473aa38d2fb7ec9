package mcp_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/mcp"
)

// TestProtocolMisuse sends malformed and misplaced messages and checks that each gets
// a JSON-RPC error with a proper code (never 0) and a message, and costs nothing.
func TestProtocolMisuse(t *testing.T) {
	h := newHarness(t, config{mcp: mcp.Options{MaxBodyBytes: 4096}})
	tests := []struct {
		name    string
		session bool // send the session id
		body    string
		status  int
		code    int64
	}{
		{"unknown tool", true, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope","arguments":{}}}`, 200, -32602},
		{"unknown method", true, `{"jsonrpc":"2.0","id":2,"method":"tools/destroy","params":{}}`, 200, -32601},
		{"arguments not an object", true, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"hash","arguments":["hello"]}}`, 200, -32602},
		{"arguments a string", true, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"hash","arguments":"text=hello"}}`, 200, -32602},
		{"name not a string", true, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":5}}`, 200, -32602},
		{"no params", true, `{"jsonrpc":"2.0","id":5,"method":"tools/call"}`, 200, -32602},
		{"null params", true, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":null}`, 200, -32602},
		{"unknown notification", true, `{"jsonrpc":"2.0","method":"notifications/whatever"}`, 400, -32601},
		{"notification with an id", true, `{"jsonrpc":"2.0","id":9,"method":"notifications/initialized"}`, 400, -32600},
		{"request without an id", true, `{"jsonrpc":"2.0","method":"tools/list"}`, 400, -32600},
		{"not JSON-RPC 2.0", true, `{"jsonrpc":"1.0","id":1,"method":"tools/list"}`, 400, -32600},
		{"an array of numbers", true, `[1,2]`, 400, -32600},
		{"a number", true, `5`, 400, -32600},
		{"an empty batch", true, `[]`, 400, -32600},
		{"a batch without a session", false, `[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`, 400, -32600},
		{"initialize in a batch", false, `[` + initBody + `]`, 400, -32600},
		{"initialize in a session's batch", true, `[` + initBody + `]`, 400, -32600},
		{"an unknown method in a batch", true, `[{"jsonrpc":"2.0","id":1,"method":"rpc.discover"}]`, 400, -32601},
		{"a request without an id in a batch", true, `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"tools/list"}]`, 400, -32600},
		{"a notification without a session", false, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, 400, -32600},
		{"not JSON", true, `{"jsonrpc":"2.0",`, 400, -32700},
		{"initialize twice", true, initBody, 400, -32600},
		{"no session", false, `{"jsonrpc":"2.0","id":6,"method":"tools/list"}`, 400, -32600},
		{"too large", true, `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"hash","arguments":{"text":"` + strings.Repeat("a", 5000) + `"}}}`, 413, -32600},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := h.raw(t, keyHeader(h.key))
			c.initializeVersion(batchVersion)
			if !tt.session {
				c.sid = ""
			}
			before := h.balance(t, h.account)
			resp, body := c.post(tt.body)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, body)
			}
			if h.balance(t, h.account) != before {
				t.Fatal("a refused message was charged")
			}
			r := decodeResponse(t, body)
			if r.Error == nil || r.Error.Code != tt.code || r.Error.Message == "" {
				t.Fatalf("answer %s; want JSON-RPC error %d", body, tt.code)
			}
		})
	}
}

// TestNoCodeZero makes the calls that the SDK would answer with a plain Go error (code
// 0) and checks that they carry a JSON-RPC code.
func TestNoCodeZero(t *testing.T) {
	h := newHarness(t, config{})
	c := h.raw(t, keyHeader(h.key))
	c.initialize()
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"x"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"file:///etc/passwd"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"logging/setLevel","params":{"level":"nonsense"}}`,
		`{"jsonrpc":"2.0","id":4,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"x"},"argument":{"name":"a","value":"b"}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"hash","arguments":{"text":"a"},"_meta":5}}`,
	} {
		resp, out := c.post(body)
		if resp.StatusCode == http.StatusOK {
			r := decodeResponse(t, out)
			if r.Error != nil && r.Error.Code == 0 {
				t.Errorf("%s: answered with code 0: %s", body, out)
			}
		}
	}
}

// TestMethods checks the HTTP methods: 405 with Allow for the others, and DELETE ends
// a session.
func TestMethods(t *testing.T) {
	h := newHarness(t, config{})
	req, _ := http.NewRequest(http.MethodPut, h.url, nil)
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, POST, DELETE, OPTIONS" {
		t.Fatalf("PUT: %d, Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
	c := h.raw(t, keyHeader(h.key))
	c.initialize()
	req, _ = http.NewRequest(http.MethodDelete, h.url, nil)
	req.Header.Set("Mcp-Session-Id", c.sid)
	req.Header.Set("X-Api-Key", h.key)
	if resp, err = h.srv.Client().Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %d", resp.StatusCode)
	}
	if resp, body := c.post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a request on a deleted session: %d %s; want 404", resp.StatusCode, body)
	}
	// Another key may not use the session (the SDK's hijacking check).
	_, other := h.newAccount(t, "other", "pro")
	c2 := h.raw(t, keyHeader(h.key))
	c2.initialize()
	c2.hdr = keyHeader(other)
	if resp, body := c2.post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("another account's key on a session: %d %s; want 403", resp.StatusCode, body)
	}
}

// TestBatch checks that a well-formed batch (protocol 2025-03-26) on a session is
// still served: one answer per request.
func TestBatch(t *testing.T) {
	h := newHarness(t, config{})
	c := h.raw(t, keyHeader(h.key))
	c.initializeVersion(batchVersion)
	resp, body := c.post(`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/list"},{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}]`)
	var answers []rpcResponse
	if err := json.Unmarshal(body, &answers); resp.StatusCode != http.StatusOK || err != nil || len(answers) != 2 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	for _, a := range answers {
		if a.Error != nil || len(a.Result) == 0 {
			t.Errorf("answer %s %+v", a.ID, a.Error)
		}
	}
}

// TestBatchCreditHeaders: the tool calls of one batch share one HTTP answer, whose
// X-Credits-Cost is the sum of what they were charged (a refunded failure counts 0)
// and whose X-Credits-Remaining is the balance they left.
func TestBatchCreditHeaders(t *testing.T) {
	h := newHarness(t, config{})
	c := h.raw(t, keyHeader(h.key))
	c.initializeVersion(batchVersion)
	before := h.balance(t, h.account)
	resp, body := c.post(`[` +
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"hash","arguments":{"text":"a"}}},` +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"uuid-generator","arguments":{}}},` +
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"fail","arguments":{}}}]`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	after := h.balance(t, h.account)
	if before-after != 2 {
		t.Fatalf("the batch cost %d credits, want 2", before-after)
	}
	if got := resp.Header.Get("X-Credits-Cost"); got != "2" {
		t.Errorf("X-Credits-Cost %q, want 2", got)
	}
	if got := resp.Header.Get("X-Credits-Remaining"); got != strconv.FormatInt(after, 10) {
		t.Errorf("X-Credits-Remaining %q, want %d", got, after)
	}
}

// TestRequestIDs checks that a request is answered with its own id or refused. The
// SDK reads a numeric id as a float64 and answers it as an int64: it would answer 1.5
// as 1 and 2^64 as -2^63, after running and charging the call, and it refuses a
// boolean, an object or an array with a message about batches. A string, or an integer
// of at most 2^53-1 in magnitude (what a float64 holds exactly), is answered with its
// id; any other id is refused with 400 and -32600, with a null id as JSON-RPC asks of an
// id it cannot read, before anything runs or is charged, alone or in a batch.
func TestRequestIDs(t *testing.T) {
	h := newHarness(t, config{})
	c := h.raw(t, keyHeader(h.key))
	c.initializeVersion(batchVersion)
	call := func(id string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"hash","arguments":{"text":"a"}}}`
	}
	for _, id := range []string{`7`, `-7`, `0`, `"x"`, `""`, `"1.5"`, `9007199254740991`, `-9007199254740991`} {
		resp, body := c.post(call(id))
		r := decodeResponse(t, body)
		if resp.StatusCode != http.StatusOK || r.Error != nil || !jsonEqual(t, r.ID, id) {
			t.Errorf("id %s: %d %s", id, resp.StatusCode, body)
		}
	}
	for _, id := range []string{`1.5`, `1e2`, `1e400`, `9007199254740993`, `18446744073709551616`, `-9223372036854775809`, `true`, `{"a":1}`, `[1]`} {
		for _, body := range []string{call(id), `[` + call(`1`) + `,` + call(id) + `]`} {
			before := h.balance(t, h.account)
			resp, out := c.post(body)
			r := wantRPCError(t, resp, out, http.StatusBadRequest, -32600, "null")
			if !strings.Contains(r.Error.Message, "id") {
				t.Errorf("id %s: the message %q does not say what is wrong", id, r.Error.Message)
			}
			if h.balance(t, h.account) != before {
				t.Errorf("id %s: a refused call was charged", id)
			}
		}
	}
}

// TestParamsNotAnObject checks the answer to params that are not an object, which MCP
// requires of every method: -32602 with a message that says so, never the SDK's code
// 0 (initialize's) or its Go error naming the SDK's types; for a notification, 400.
func TestParamsNotAnObject(t *testing.T) {
	h := newHarness(t, config{})
	for _, params := range []string{`[]`, `[{"name":"hash"}]`, `1`, `"x"`, `true`} {
		for _, method := range []string{"initialize", "ping", "tools/list", "tools/call", "resources/read", "logging/setLevel", "notifications/cancelled", "notifications/progress"} {
			c := h.raw(t, keyHeader(h.key))
			if method != "initialize" {
				c.initialize()
			}
			body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`
			status := http.StatusOK
			if strings.HasPrefix(method, "notifications/") {
				body = `{"jsonrpc":"2.0","method":"` + method + `","params":` + params + `}`
				status = http.StatusBadRequest
			}
			resp, out := c.post(body)
			r := decodeResponse(t, out)
			if resp.StatusCode != status || r.Error == nil || r.Error.Code != -32602 ||
				!strings.Contains(r.Error.Message, "params") || strings.Contains(r.Error.Message, "mcp.") {
				t.Errorf("%s with params %s: %d %s", method, params, resp.StatusCode, out)
			}
		}
	}
	c := h.raw(t, keyHeader(h.key))
	c.initialize()
	resp, out := c.post(`{"jsonrpc":"2.0","method":"notifications/progress"}`)
	if r := decodeResponse(t, out); resp.StatusCode != http.StatusBadRequest || r.Error == nil || r.Error.Code != -32602 {
		t.Errorf("notifications/progress without params: %d %s", resp.StatusCode, out)
	}
}

// TestMethodRefusals checks the answers to messages that the SDK refuses by their
// method (an unknown one, an id where the method is a notification or none where it is
// a request, missing params): the handler restates the SDK's refusal as the JSON-RPC
// error of the message, with its id, naming the method, in a 200 for a request and a
// 400 for a notification or a batch. Params that are not an object, null included, the
// handler refuses itself.
func TestMethodRefusals(t *testing.T) {
	h := newHarness(t, config{})
	tests := []struct {
		name      string
		body      string
		status    int
		code      int64
		id        string
		fragments []string
	}{
		{"unknown method", `{"jsonrpc":"2.0","id":2,"method":"tools/destroy","params":{}}`, 200, -32601, "2", []string{`"tools/destroy"`, "tools/call"}},
		{"unknown method, string id", `{"jsonrpc":"2.0","id":"a","method":"rpc.discover"}`, 200, -32601, `"a"`, []string{`"rpc.discover"`}},
		{"unknown notification", `{"jsonrpc":"2.0","method":"notifications/whatever"}`, 400, -32601, "null", []string{`"notifications/whatever"`}},
		{"notification with an id", `{"jsonrpc":"2.0","id":9,"method":"notifications/initialized"}`, 400, -32600, "9", []string{`"notifications/initialized"`, "without an id"}},
		{"request without an id", `{"jsonrpc":"2.0","method":"tools/list"}`, 400, -32600, "null", []string{`"tools/list"`, "with an id"}},
		{"tools/call without params", `{"jsonrpc":"2.0","id":5,"method":"tools/call"}`, 200, -32602, "5", []string{`"tools/call"`, "params"}},
		{"a notification without its params", `{"jsonrpc":"2.0","method":"notifications/progress"}`, 400, -32602, "null", []string{`"notifications/progress"`, "params"}},
		{"null params", `{"jsonrpc":"2.0","id":6,"method":"ping","params":null}`, 200, -32602, "6", []string{`"ping"`, "JSON object"}},
		{"an unknown method in a batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"rpc.discover"}]`, 400, -32601, "null", []string{"batch", `"rpc.discover"`}},
		{"a request without an id in a batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"tools/list"}]`, 400, -32600, "null", []string{"batch", `"tools/list"`, "with an id"}},
		{"a notification with an id in a batch", `[{"jsonrpc":"2.0","id":1,"method":"notifications/cancelled","params":{"requestId":1}}]`, 400, -32600, "null", []string{"batch", `"notifications/cancelled"`}},
		{"missing params in a batch", `[{"jsonrpc":"2.0","id":1,"method":"tools/call"}]`, 400, -32602, "null", []string{"batch", "params"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := h.raw(t, keyHeader(h.key))
			c.initializeVersion(batchVersion)
			before := h.balance(t, h.account)
			resp, body := c.post(tt.body)
			r := wantRPCError(t, resp, body, tt.status, tt.code, tt.id)
			for _, f := range tt.fragments {
				if !strings.Contains(r.Error.Message, f) {
					t.Errorf("the message %q does not mention %s", r.Error.Message, f)
				}
			}
			if h.balance(t, h.account) != before {
				t.Error("a refused message was charged")
			}
		})
	}
}
