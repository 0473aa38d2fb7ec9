package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/mcp"
)

// The MCP part of the hostile suite that needs a server of its own: what one key can
// make the process build or hold through /v1/mcp (issue 28, items 1 and 2).

// mcpInitVersion is the initialize request of an MCP session that asks for a
// protocol version: 2025-03-26 is the last with JSON-RPC batches.
func mcpInitVersion(version string) string {
	return strings.Replace(mcpInit, "2025-06-18", version, 1)
}

// An mcpAnswer is an answer of /v1/mcp, checked as the suite checks every answer.
type mcpAnswer struct {
	status int
	header http.Header
	body   []byte
}

// rpcError decodes the JSON-RPC error of a single answer.
func (a mcpAnswer) rpcError(t *testing.T) (code int64, name, message string) {
	t.Helper()
	var r struct {
		Error *struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
			Data    struct {
				Code string `json:"code"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(a.body, &r); err != nil || r.Error == nil {
		t.Fatalf("not a JSON-RPC error (%v): %d %.300s", err, a.status, a.body)
	}
	return r.Error.Code, r.Error.Data.Code, r.Error.Message
}

// mcpSend sends one request to /v1/mcp with a key and, if sid is not empty, a
// session, and checks the answer as every answer of the suite is checked.
func (h *hostile) mcpSend(ctx context.Context, method, key, sid, body string, kv ...string) mcpAnswer {
	h.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, h.s.srv.URL+"/v1/mcp", rd)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("X-Api-Key", key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header.Set(kv[i], kv[i+1])
	}
	resp, err := h.client.Do(req)
	if err != nil {
		h.t.Fatalf("%s /v1/mcp: no answer: %v", method, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatalf("reading the answer: %v", err)
	}
	h.check("mcp", "/v1/mcp", keyAccount[key], resp, b, false)
	return mcpAnswer{resp.StatusCode, resp.Header, b}
}

// mcpSession starts an MCP session of a key that agrees on a protocol version.
func (h *hostile) mcpSession(key, version string) string {
	h.t.Helper()
	a := h.mcpSend(h.t.Context(), http.MethodPost, key, "", mcpInitVersion(version))
	sid := a.header.Get("Mcp-Session-Id")
	if a.status != http.StatusOK || sid == "" {
		h.t.Fatalf("initialize: %d %s", a.status, a.body)
	}
	if a := h.mcpSend(h.t.Context(), http.MethodPost, key, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); a.status != http.StatusAccepted {
		h.t.Fatalf("initialized: %d %s", a.status, a.body)
	}
	return sid
}

// batchOf returns a JSON-RPC batch of n requests of a method without params.
func batchOf(n int, method string) string {
	msgs := make([]string, n)
	for i := range msgs {
		msgs[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q}`, i+1, method)
	}
	return "[" + strings.Join(msgs, ",") + "]"
}

// TestHostileMCPBatchAmplification: a batch of 14,000 tools/list (0.79 MB, any key) was
// answered with 88 MB, and four at once took the server to 1.6 GiB. A batch holds at
// most mcp.DefaultMaxBatchMessages messages, and one larger is refused as a whole with
// one small JSON-RPC error that names the limit, at once, even four at a time.
func TestHostileMCPBatchAmplification(t *testing.T) {
	s := start(t, "-fixtures", "testdata/hostile.json", "-admin-token", testAdminToken)
	h := newHostile(t, s)
	h.client.Timeout = 60 * time.Second // a bound on the old answer, which took far longer
	sid := h.mcpSession(keyBeta, "2025-03-26")
	body := batchOf(14_000, "tools/list")
	var wg sync.WaitGroup
	answers := make([]mcpAnswer, 4)
	for i := range answers {
		wg.Go(func() { answers[i] = h.mcpSend(t.Context(), http.MethodPost, keyBeta, sid, body) })
	}
	wg.Wait()
	for _, a := range answers {
		if a.status != http.StatusBadRequest || len(a.body) > 1024 {
			t.Fatalf("a batch of 14,000 tools/list: %d, %d bytes: %.300s", a.status, len(a.body), a.body)
		}
		code, name, message := a.rpcError(t)
		if code != -32600 || name != "batch_too_large" || !strings.Contains(message, "more than "+strconv.Itoa(mcp.DefaultMaxBatchMessages)+" messages") {
			t.Errorf("a batch of 14,000 tools/list: %s", a.body)
		}
	}
	// A batch within the limit is served.
	a := h.mcpSend(t.Context(), http.MethodPost, keyBeta, sid, batchOf(mcp.DefaultMaxBatchMessages, "tools/list"))
	var list []json.RawMessage
	if a.status != http.StatusOK || json.Unmarshal(a.body, &list) != nil || len(list) != mcp.DefaultMaxBatchMessages {
		t.Errorf("a batch of %d tools/list: %d %.300s", mcp.DefaultMaxBatchMessages, a.status, a.body)
	}
}

// TestHostileMCPBatchOnSessionWithoutBatches: leaving Mcp-Protocol-Version out let a
// batch through on a session that agreed on 2025-06-18, which has no batches. The
// session is looked up: its batch is refused, before anything runs or is charged.
func TestHostileMCPBatchOnSessionWithoutBatches(t *testing.T) {
	s := start(t, "-fixtures", "testdata/hostile.json", "-admin-token", testAdminToken)
	h := newHostile(t, s)
	sid := h.mcpSession(keyBeta, "2025-06-18")
	before := h.balance("beta")
	for _, body := range []string{
		batchOf(1, "tools/list"),
		"[" + toolCall("1", "hash", `{"text":"a"}`) + "," + toolCall("2", "uuid-generator", `{}`) + "]",
	} {
		a := h.mcpSend(t.Context(), http.MethodPost, keyBeta, sid, body)
		if a.status != http.StatusBadRequest {
			t.Fatalf("a batch on a 2025-06-18 session without the version header: %d %.300s", a.status, a.body)
		}
		if code, _, message := a.rpcError(t); code != -32600 || !strings.Contains(message, "2025-06-18") {
			t.Errorf("the refusal: %s", a.body)
		}
	}
	if after := h.balance("beta"); after != before {
		t.Errorf("refused batches were charged: balance %d -> %d", before, after)
	}
}

// TestHostileMCPSessionCap: 20,000 initialize from one key were all accepted, each
// session kept 30 minutes. A key holds at most mcp.DefaultMaxSessionsPerKey live
// sessions; beyond, initialize is refused with a JSON-RPC error that says so, and a
// session ended with DELETE frees its slot.
func TestHostileMCPSessionCap(t *testing.T) {
	s := start(t, "-fixtures", "testdata/hostile.json", "-admin-token", testAdminToken)
	h := newHostile(t, s)
	const tries = 3 * mcp.DefaultMaxSessionsPerKey
	var sids []string
	refused := 0
	for range tries {
		a := h.mcpSend(t.Context(), http.MethodPost, keyAlpha, "", mcpInit)
		switch a.status {
		case http.StatusOK:
			sids = append(sids, a.header.Get("Mcp-Session-Id"))
		case http.StatusTooManyRequests:
			refused++
			code, name, message := a.rpcError(t)
			if name == "rate_limited" {
				continue // initialize is an unbilled request too
			}
			if code != mcp.CodeLimited || name != "too_many_sessions" || !strings.Contains(message, strconv.Itoa(mcp.DefaultMaxSessionsPerKey)+" live sessions") {
				t.Fatalf("initialize beyond the cap: %s", a.body)
			}
		default:
			t.Fatalf("initialize: %d %.300s", a.status, a.body)
		}
	}
	if len(sids) != mcp.DefaultMaxSessionsPerKey || refused != tries-mcp.DefaultMaxSessionsPerKey {
		t.Fatalf("%d initialize from one key: %d sessions started, %d refused; want %d started", tries, len(sids), refused, mcp.DefaultMaxSessionsPerKey)
	}
	// Another key of the account has its own cap.
	if a := h.mcpSend(t.Context(), http.MethodPost, keyHashOnly, "", mcpInit); a.status != http.StatusOK {
		t.Errorf("another key: %d %s", a.status, a.body)
	}

	// DELETE frees a slot: initialize succeeds again (the slot is freed as the session
	// ends, and initialize may wait for the key's unbilled requests to refill).
	if a := h.mcpSend(t.Context(), http.MethodDelete, keyAlpha, sids[0], ""); a.status != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", a.status, a.body)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		a := h.mcpSend(t.Context(), http.MethodPost, keyAlpha, "", mcpInit)
		if a.status == http.StatusOK {
			break
		}
		if _, name, _ := a.rpcError(t); time.Now().After(deadline) || name != "too_many_sessions" && name != "rate_limited" {
			t.Fatalf("initialize after a DELETE: %d %s", a.status, a.body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The other sessions still serve.
	if a := h.mcpSend(t.Context(), http.MethodPost, keyAlpha, sids[1], `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hash","arguments":{"text":"a"}}}`); a.status != http.StatusOK {
		t.Errorf("a session under the cap: %d %s", a.status, a.body)
	}
}

// TestHostileMCPUnbilledRate: tools/list, ping and initialize were neither billed nor
// limited. A key's requests that are not billed are limited by a rate of their own:
// beyond it, 429 with Retry-After and a JSON-RPC error, uncharged; tool calls, which
// the plan limits, still pass.
func TestHostileMCPUnbilledRate(t *testing.T) {
	s := start(t, "-fixtures", "testdata/hostile.json", "-admin-token", testAdminToken)
	h := newHostile(t, s)
	sid := h.mcpSession(keyBeta, "2025-06-18")
	var refusal mcpAnswer
	for i := range 2000 {
		a := h.mcpSend(t.Context(), http.MethodPost, keyBeta, sid, `{"jsonrpc":"2.0","id":`+strconv.Itoa(i)+`,"method":"ping"}`)
		if a.status != http.StatusOK {
			refusal = a
			break
		}
	}
	if refusal.status != http.StatusTooManyRequests || refusal.header.Get("Retry-After") == "" {
		t.Fatalf("2,000 pings: no refusal with Retry-After: %d %s", refusal.status, refusal.body)
	}
	if code, name, message := refusal.rpcError(t); code != mcp.CodeLimited || name != "rate_limited" || !strings.Contains(message, "a minute") {
		t.Errorf("the refusal: %s", refusal.body)
	}
	if a := h.mcpSend(t.Context(), http.MethodPost, keyBeta, sid, toolCall("9", "hash", `{"text":"a"}`)); a.status != http.StatusOK || a.header.Get("X-Credits-Cost") != "1" {
		t.Errorf("a tool call once the unbilled requests are spent: %d %s", a.status, a.body)
	}
}
