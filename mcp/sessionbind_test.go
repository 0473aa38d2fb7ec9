package mcp_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/auth"
)

// TestSubKeySessionCannotJoinPrimarySession checks that an MCP session belongs to the
// key it was opened with, also when the requests come with session tokens: a session
// token acts as the key that started it, so a sub-key's session may not drive (nor read
// the event stream of) an MCP session that the primary key's session opened, as the
// sub-key's own key may not.
func TestSubKeySessionCannotJoinPrimarySession(t *testing.T) {
	sessions, err := auth.NewSessions([]byte("mcp-session-binding-secret-0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, config{svc: tollgate.Options{Sessions: sessions}})
	_, subValue := h.subKey(t, h.account, "alpha-only", auth.RestrictionSpec{APIs: []string{"echo"}})
	start := func(value string) string {
		s, err := h.mgr.StartSession(context.Background(), tollgate.Caller{Credential: auth.Credential{Kind: auth.APIKeyHeader, Value: value}})
		if err != nil {
			t.Fatal(err)
		}
		return s.Token
	}
	primaryTok, subTok := start(h.key), start(subValue)

	c := h.raw(t, http.Header{"X-Jwt": {primaryTok}})
	c.initialize()
	// The sub-key's own key is refused on the primary's MCP session...
	c.hdr = keyHeader(subValue)
	if resp, body := c.post(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("the sub-key's key on the primary's session: %d %s; want 403", resp.StatusCode, body)
	}
	// ...and so must be a session that acts as the sub-key.
	c.hdr = http.Header{"X-Jwt": {subTok}}
	if resp, body := c.post(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a sub-key's session on the primary key's session's MCP session: %d %.200s; want 403", resp.StatusCode, body)
	}
}
