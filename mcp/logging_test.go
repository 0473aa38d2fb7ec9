package mcp_test

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/mcp"
)

// TestClientMistakesLogAtInfo makes the calls out of order that the MCP SDK logs at
// Error or Warn as if they were the service's failures (a call before the session is
// initialized, notifications/initialized twice or before initialize, a request of the
// sessionless protocol), and checks that nothing is logged above Info: ERROR is for the
// service's own failures. The records still reach the log, at Info.
func TestClientMistakesLogAtInfo(t *testing.T) {
	var logs testenv.Logs
	h := newHarness(t, config{mcp: mcp.Options{Logger: logs.Logger()}})
	c := h.raw(t, keyHeader(h.key))
	c.initializeVersion(batchVersion)
	const initialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	steps := []struct {
		name    string
		session bool
		body    string
		hdr     []string
	}{
		{"notifications/initialized again", true, initialized, nil},
		{"both in a batch, on the session", true, `[` + initialized + `,` + initialized + `]`, nil},
		{"a call in a batch without a session", false, `[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`, nil},
		{"notifications/initialized before initialize", false, initialized, []string{"Mcp-Protocol-Version", "2026-07-28"}},
		{"a request of the sessionless protocol", true,
			`{"jsonrpc":"2.0","id":2,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, nil},
	}
	for _, s := range steps {
		sid := c.sid
		if !s.session {
			c.sid = ""
		}
		resp, body := c.post(s.body, s.hdr...)
		c.sid = sid
		t.Logf("%s: %d %s", s.name, resp.StatusCode, body)
	}
	// The session still works.
	if resp, body := c.post(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`); resp.StatusCode != 200 {
		t.Fatalf("tools/list: %d %s", resp.StatusCode, body)
	}
	demoted := false
	for _, r := range logs.Records(t) {
		if r.Level != "INFO" && r.Level != "DEBUG" {
			t.Errorf("a client's mistake was logged at %s: %q", r.Level, r.Msg)
		}
		demoted = demoted || strings.HasPrefix(r.Msg, "duplicate initialized notification")
	}
	if !demoted {
		t.Errorf("the SDK's record of the duplicate notification did not reach the log at Info: %+v", logs.Records(t))
	}
}

// TestClosedHandlerLogs503 checks that a request to a closed handler, answered 503,
// leaves a line in the log, as every other 503 does.
func TestClosedHandlerLogs503(t *testing.T) {
	var logs testenv.Logs
	h := newHarness(t, config{mcp: mcp.Options{Logger: logs.Logger()}})
	c := h.raw(t, keyHeader(h.key))
	h.handler.Close()
	resp, body := c.post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if resp.StatusCode != 503 {
		t.Fatalf("a request to a closed handler: %d %s", resp.StatusCode, body)
	}
	for _, r := range logs.Records(t) {
		if strings.Contains(r.Msg, "answered 503") && strings.Contains(r.Msg, "shutting down") {
			return
		}
	}
	t.Errorf("the 503 of a closed handler was not logged: %+v", logs.Records(t))
}
