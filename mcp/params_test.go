package mcp_test

import (
	"regexp"
	"strings"
	"testing"
)

// goNames matches what an MCP error message must never show: Go's names of types and
// packages, and encoding/json's own words.
var goNames = regexp.MustCompile(`Go struct|\*?mcp\.[A-Z]|\bjson:|unmarshal|\bint64\b|float64`)

// TestParamsOfTheWrongType checks that params whose fields have values of the wrong
// type are refused with -32602 and a message that names the field and what it must
// be, not with the SDK's message, which names its Go types; and that a field the SDK
// does not read (another case) changes nothing.
func TestParamsOfTheWrongType(t *testing.T) {
	h := newHarness(t, config{})
	c := h.raw(t, keyHeader(h.key))
	c.initialize()
	for _, tt := range []struct{ body, want string }{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}}`, `the params of "tools/call": name must be a string, not a number`},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hash","arguments":{"text":"a"},"_meta":5}}`, `the params of "tools/call": _meta must be an object, not a number`},
		{`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"cursor":5}}`, `the params of "tools/list": cursor must be a string, not a number`},
		{`{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":["x"]}}`, `the params of "resources/read": uri must be a string, not an array`},
		{`{"jsonrpc":"2.0","id":5,"method":"prompts/get","params":{"name":true}}`, `the params of "prompts/get": name must be a string, not true or false`},
	} {
		resp, body := c.post(tt.body)
		r := decodeResponse(t, body)
		if resp.StatusCode != 200 || r.Error == nil || r.Error.Code != -32602 || r.Error.Message != tt.want || goNames.MatchString(r.Error.Message) {
			t.Errorf("%s: %d %s; want -32602 %q", tt.body, resp.StatusCode, body, tt.want)
		}
	}
	// A field of another case is not the SDK's: the call runs.
	resp, body := c.post(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"hash","Name":5,"arguments":{"text":"a"}}}`)
	if r := decodeResponse(t, body); resp.StatusCode != 200 || r.Error != nil || strings.Contains(string(body), `"isError":true`) {
		t.Errorf("a call with a field of another case: %d %s", resp.StatusCode, body)
	}
	// Initialize, without a session.
	c = h.raw(t, keyHeader(h.key))
	resp, body = c.post(`{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":2025,"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if r := decodeResponse(t, body); r.Error == nil || r.Error.Message != `the params of "initialize": protocolVersion must be a string, not a number` {
		t.Errorf("initialize with a number for its version: %d %s", resp.StatusCode, body)
	}
}
