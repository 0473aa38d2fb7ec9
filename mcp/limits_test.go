package mcp_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/mcp"
)

// batchOf returns a batch of n copies of a message, each with its own id.
func batchOf(n int, method string) string {
	msgs := make([]string, n)
	for i := range msgs {
		msgs[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q}`, i+1, method)
	}
	return "[" + strings.Join(msgs, ",") + "]"
}

// decodeBatch decodes the answer to a batch.
func decodeBatch(t *testing.T, body []byte) []rpcResponse {
	t.Helper()
	var answers []rpcResponse
	if err := json.Unmarshal(body, &answers); err != nil {
		t.Fatalf("the answer is not a batch: %v: %.300s", err, body)
	}
	return answers
}

// TestBatchSize checks that a batch holds at most MaxBatchMessages messages: one
// larger is refused as a whole with one JSON-RPC error that names the limit, before
// any of its messages runs or is charged; one of the limit's size is served.
func TestBatchSize(t *testing.T) {
	h := newHarness(t, config{})
	c := h.raw(t, keyHeader(h.key))
	c.initializeVersion(batchVersion)

	resp, body := c.post(batchOf(mcp.DefaultMaxBatchMessages, "ping"))
	if resp.StatusCode != http.StatusOK || len(decodeBatch(t, body)) != mcp.DefaultMaxBatchMessages {
		t.Fatalf("a batch of %d pings: %d %.300s", mcp.DefaultMaxBatchMessages, resp.StatusCode, body)
	}
	for _, n := range []int{mcp.DefaultMaxBatchMessages + 1, 14_000} {
		resp, body := c.post(batchOf(n, "tools/list"))
		r := wantRPCError(t, resp, body, http.StatusBadRequest, -32600, "null")
		if r.Error.Data.Code != "batch_too_large" || resp.Header.Get("X-Error-Code") != "batch_too_large" ||
			!strings.Contains(r.Error.Message, "more than "+strconv.Itoa(mcp.DefaultMaxBatchMessages)+" messages") {
			t.Errorf("a batch of %d: %s", n, body)
		}
	}
	// Tool calls beyond the limit: none runs.
	before := h.balance(t, h.account)
	calls := strings.Repeat(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"hash","arguments":{"text":"a"}}},`, mcp.DefaultMaxBatchMessages+1)
	resp, body = c.post("[" + strings.TrimSuffix(calls, ",") + "]")
	wantRPCError(t, resp, body, http.StatusBadRequest, -32600, "null")
	if h.balance(t, h.account) != before {
		t.Error("a refused batch was charged")
	}

	// The option lowers the limit; above MaxBatchMessagesLimit it is refused.
	h3 := newHarness(t, config{mcp: mcp.Options{MaxBatchMessages: 3}})
	c3 := h3.raw(t, keyHeader(h3.key))
	c3.initializeVersion(batchVersion)
	if resp, body := c3.post(batchOf(3, "ping")); resp.StatusCode != http.StatusOK {
		t.Errorf("a batch of 3 under a limit of 3: %d %s", resp.StatusCode, body)
	}
	resp, body = c3.post(batchOf(4, "ping"))
	wantRPCError(t, resp, body, http.StatusBadRequest, -32600, "null")
	if _, err := mcp.NewHandler(h.svc, &mcp.Options{MaxBatchMessages: mcp.MaxBatchMessagesLimit + 1}); err == nil {
		t.Error("MaxBatchMessages above the limit was accepted")
	}
	if _, err := mcp.NewHandler(h.svc, &mcp.Options{MaxBatchMessages: 50, UnbilledBurst: 10}); err == nil {
		t.Error("an UnbilledBurst smaller than MaxBatchMessages was accepted")
	}
}

// TestBatchOnSessionWithoutBatches checks that a session that agreed on a protocol
// version without batches (2025-06-18 and later) refuses a batch whether or not the
// request says its version in Mcp-Protocol-Version: the handler looks the session up.
func TestBatchOnSessionWithoutBatches(t *testing.T) {
	h := newHarness(t, config{})
	for _, version := range []string{"2025-06-18", "2025-11-25"} {
		c := h.raw(t, keyHeader(h.key))
		c.initializeVersion(version)
		before := h.balance(t, h.account)
		for _, hdr := range [][]string{nil, {"Mcp-Protocol-Version", batchVersion}} {
			resp, body := c.post(`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"hash","arguments":{"text":"a"}}}]`, hdr...)
			if hdr != nil {
				// The SDK refuses a version header other than the session's.
				if resp.StatusCode != http.StatusBadRequest {
					t.Errorf("%s, header %v: %d %s", version, hdr, resp.StatusCode, body)
				}
				continue
			}
			r := wantRPCError(t, resp, body, http.StatusBadRequest, -32600, "null")
			if !strings.Contains(r.Error.Message, "2025-06-18") || !strings.Contains(r.Error.Message, version) {
				t.Errorf("%s: the message %q does not name the versions", version, r.Error.Message)
			}
		}
		if h.balance(t, h.account) != before {
			t.Errorf("%s: a refused batch was charged", version)
		}
	}
	// A session of 2025-03-26 takes batches.
	c := h.raw(t, keyHeader(h.key))
	c.initializeVersion(batchVersion)
	if resp, body := c.post(batchOf(2, "ping")); resp.StatusCode != http.StatusOK {
		t.Errorf("a batch on a session of %s: %d %s", batchVersion, resp.StatusCode, body)
	}
}

// TestUnbilledRate checks the token bucket of the requests that are not billed: a key
// may send UnbilledBurst of them at once, then UnbilledPerMinute a minute (by the
// service's clock); beyond, 429 with Retry-After and the JSON-RPC error rate_limited,
// for a batch as a whole. Tool calls do not count, and each key has its own bucket.
func TestUnbilledRate(t *testing.T) {
	h := newHarness(t, config{mcp: mcp.Options{MaxBatchMessages: 4, UnbilledBurst: 5, UnbilledPerMinute: 60}})
	c := h.raw(t, keyHeader(h.key))
	c.initializeVersion(batchVersion) // one token (notifications/initialized takes none)
	ping := `{"jsonrpc":"2.0","id":9,"method":"ping"}`
	for i := range 4 {
		if resp, body := c.post(ping); resp.StatusCode != http.StatusOK {
			t.Fatalf("ping %d: %d %s", i+1, resp.StatusCode, body)
		}
	}
	resp, body := c.post(`{"jsonrpc":"2.0","id":10,"method":"tools/list"}`)
	r := wantRPCError(t, resp, body, http.StatusTooManyRequests, mcp.CodeLimited, "10")
	if r.Error.Data.Code != "rate_limited" || resp.Header.Get("Retry-After") != "1" || !strings.Contains(r.Error.Message, "60 a minute") {
		t.Errorf("beyond the burst: Retry-After %q, %s", resp.Header.Get("Retry-After"), body)
	}
	// Tool calls are billed, and limited by the plan.
	if resp, body := c.post(`{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"hash","arguments":{"text":"a"}}}`); resp.StatusCode != http.StatusOK || decodeResponse(t, body).Error != nil {
		t.Errorf("a tool call once the unbilled requests are spent: %d %s", resp.StatusCode, body)
	}
	// Another key has its own bucket.
	_, other := h.newAccount(t, "other", "pro")
	c2 := h.raw(t, keyHeader(other))
	c2.initialize()
	if resp, body := c2.post(ping); resp.StatusCode != http.StatusOK {
		t.Errorf("another key: %d %s", resp.StatusCode, body)
	}
	// A second refills one token; a batch that needs more is refused whole.
	h.clock.Advance(time.Second)
	resp, body = c.post(batchOf(2, "ping"))
	wantRPCError(t, resp, body, http.StatusTooManyRequests, mcp.CodeLimited, "null")
	if resp, body := c.post(ping); resp.StatusCode != http.StatusOK {
		t.Errorf("a ping a second later: %d %s", resp.StatusCode, body)
	}
	h.clock.Advance(time.Minute)
	if resp, body := c.post(batchOf(4, "ping")); resp.StatusCode != http.StatusOK || len(decodeBatch(t, body)) != 4 {
		t.Errorf("a batch of 4 a minute later: %d %s", resp.StatusCode, body)
	}
}

// TestAnswerBudget checks that the answer to one request is bounded: once the results
// of a batch reach MaxAnswerBytes, the rest of its messages are answered with
// answer_too_large without running; a tool result larger than the budget ran and was
// charged, and is answered with a tool result with isError that says so.
func TestAnswerBudget(t *testing.T) {
	// The size of one tool list.
	probe := newHarness(t, config{})
	pc := probe.raw(t, keyHeader(probe.key))
	pc.initialize()
	_, list := pc.post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	budget := int64(len(list)) * 5 / 2 // two lists fit, three do not

	h := newHarness(t, config{mcp: mcp.Options{MaxAnswerBytes: budget}})
	c := h.raw(t, keyHeader(h.key))
	c.initializeVersion(batchVersion)
	resp, body := c.post(batchOf(10, "tools/list"))
	answers := decodeBatch(t, body)
	if resp.StatusCode != http.StatusOK || len(answers) != 10 {
		t.Fatalf("a batch of 10 lists: %d %.300s", resp.StatusCode, body)
	}
	served, refused := 0, 0
	for _, a := range answers {
		switch {
		case a.Error == nil:
			served++
		case a.Error.Code == mcp.CodeLimited && a.Error.Data.Code == "answer_too_large":
			refused++
		default:
			t.Errorf("answer %s: %+v", a.ID, a.Error)
		}
	}
	if served != 2 || refused != 8 || int64(len(body)) > budget+8*1024 {
		t.Errorf("%d lists served and %d refused in %d bytes under a budget of %d; want 2 and 8", served, refused, len(body), budget)
	}

	// A tool result larger than the budget: 100 UUIDs, about 4 KB twice over.
	h = newHarness(t, config{mcp: mcp.Options{MaxAnswerBytes: 4096}})
	c = h.raw(t, keyHeader(h.key))
	c.initialize()
	before := h.balance(t, h.account)
	resp, body = c.post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"uuid-generator","arguments":{"count":100}}}`)
	var res struct {
		Result struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal(body, &res); err != nil || resp.StatusCode != http.StatusOK || !res.Result.IsError ||
		len(res.Result.Content) != 1 || !strings.HasPrefix(res.Result.Content[0].Text, "answer_too_large: ") || len(body) > 2048 {
		t.Fatalf("a result larger than the budget: %d %.300s", resp.StatusCode, body)
	}
	if after := h.balance(t, h.account); after != before-1 || resp.Header.Get("X-Credits-Cost") != "1" {
		t.Errorf("the call that ran was not charged once: balance %d -> %d, X-Credits-Cost %q", before, after, resp.Header.Get("X-Credits-Cost"))
	}
	// A result within the budget is served.
	res.Result.IsError = false
	resp, body = c.post(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"uuid-generator","arguments":{"count":2}}}`)
	if err := json.Unmarshal(body, &res); err != nil || resp.StatusCode != http.StatusOK || res.Result.IsError {
		t.Errorf("a small result: %d %s", resp.StatusCode, body)
	}
}

// initializeOnce sends one initialize with a key and returns the answer and the
// session it started, if any.
func initializeOnce(t *testing.T, h *harness, key string) (*http.Response, []byte, string) {
	t.Helper()
	c := h.raw(t, keyHeader(key))
	resp, body := c.post(initBody)
	return resp, body, resp.Header.Get("Mcp-Session-Id")
}

// initializeN starts n sessions with key and returns their ids.
func initializeN(t *testing.T, h *harness, key string, n int) []string {
	t.Helper()
	var sids []string
	for range n {
		resp, body, sid := initializeOnce(t, h, key)
		if resp.StatusCode != http.StatusOK || sid == "" {
			t.Fatalf("initialize: %d %s", resp.StatusCode, body)
		}
		sids = append(sids, sid)
	}
	return sids
}

// waitInitialize sends initialize until it starts a session, failing after a
// generous deadline: a session's slot is freed by a goroutine that learns of its end.
func waitInitialize(t *testing.T, h *harness, key, what string) string {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, body, sid := initializeOnce(t, h, key)
		if resp.StatusCode == http.StatusOK && sid != "" {
			return sid
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: initialize still refused: %d %s", what, resp.StatusCode, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSessionCaps checks the caps on live sessions: per key (429) and per process
// (503), each refused with the JSON-RPC error too_many_sessions that names the cap,
// and the slot a session frees when it ends with DELETE.
func TestSessionCaps(t *testing.T) {
	h := newHarness(t, config{mcp: mcp.Options{MaxSessionsPerKey: 3, MaxSessions: 5}})
	sids := initializeN(t, h, h.key, 3)
	resp, body, sid := initializeOnce(t, h, h.key)
	r := wantRPCError(t, resp, body, http.StatusTooManyRequests, mcp.CodeLimited, "7")
	if sid != "" || r.Error.Data.Code != "too_many_sessions" || !strings.Contains(r.Error.Message, "3 live sessions") || !strings.Contains(r.Error.Message, "DELETE") {
		t.Errorf("beyond the key's cap: session %q, %s", sid, body)
	}
	// Another key, up to the process's cap.
	_, other := h.newAccount(t, "other", "pro")
	for range 2 {
		if resp, body, _ := initializeOnce(t, h, other); resp.StatusCode != http.StatusOK {
			t.Fatalf("another key: %d %s", resp.StatusCode, body)
		}
	}
	resp, body, _ = initializeOnce(t, h, other)
	r = wantRPCError(t, resp, body, http.StatusServiceUnavailable, mcp.CodeLimited, "7")
	if r.Error.Data.Code != "too_many_sessions" || !strings.Contains(r.Error.Message, "5 live sessions") {
		t.Errorf("beyond the process's cap: %s", body)
	}
	// DELETE frees a slot.
	c := h.raw(t, keyHeader(h.key))
	c.sid = sids[0]
	if resp, body := c.do(http.MethodDelete, "", nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", resp.StatusCode, body)
	}
	waitInitialize(t, h, h.key, "after a DELETE")
	// The other sessions still serve.
	c.sid = sids[1]
	if resp, body := c.post(`{"jsonrpc":"2.0","id":1,"method":"ping"}`); resp.StatusCode != http.StatusOK {
		t.Errorf("a session under the cap: %d %s", resp.StatusCode, body)
	}
}

// TestLiveSessions checks the count of live sessions: one per initialize served, one
// less once a session ends with DELETE (learned by a goroutine: polled).
func TestLiveSessions(t *testing.T) {
	h := newHarness(t, config{})
	if n := h.handler.LiveSessions(); n != 0 {
		t.Fatalf("before any session: %d live sessions", n)
	}
	sids := initializeN(t, h, h.key, 2)
	if n := h.handler.LiveSessions(); n != 2 {
		t.Errorf("after two initializes: %d live sessions, want 2", n)
	}
	c := h.raw(t, keyHeader(h.key))
	c.sid = sids[0]
	if resp, body := c.do(http.MethodDelete, "", nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", resp.StatusCode, body)
	}
	for deadline := time.Now().Add(time.Minute); h.handler.LiveSessions() != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after a DELETE: %d live sessions, want 1", h.handler.LiveSessions())
		}
	}
}

// TestSessionSlotFreedOnTimeout checks that a session that times out frees its slot.
func TestSessionSlotFreedOnTimeout(t *testing.T) {
	h := newHarness(t, config{mcp: mcp.Options{MaxSessionsPerKey: 1, SessionTimeout: 50 * time.Millisecond}})
	waitInitialize(t, h, h.key, "the first session")
	waitInitialize(t, h, h.key, "after the first session timed out")
}

// TestSessionSlotFreedOnKeyChange checks that the sessions of a revoked key free their
// slots at once, and so do those opened with a rotated key's old value, which can no
// longer be used, while an OAuth session survives a rotation and keeps its slot.
func TestSessionSlotFreedOnKeyChange(t *testing.T) {
	tokens := fakeTokens{}
	opts := tokens.options()
	opts.MaxSessionsPerKey, opts.MaxSessions = 2, 2
	h := newHarness(t, config{mcp: opts})

	// Rotation: the sessions opened with the old value end; the new value opens others.
	for range 2 {
		waitInitialize(t, h, h.key, "a session")
	}
	_, newValue, err := h.mgr.RotateKey(t.Context(), h.keyID)
	if err != nil {
		t.Fatal(err)
	}
	waitInitialize(t, h, newValue, "after a rotation")

	// An OAuth session survives the rotation: its slot stays taken. (It waits for the
	// second slot of the old value's sessions, which end in the background.)
	tokens["token"] = h.keyID
	resp, body := h.raw(t, bearerHeader("token")).post(initBody)
	for deadline := time.Now().Add(2 * time.Minute); resp.StatusCode == http.StatusTooManyRequests && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		resp, body = h.raw(t, bearerHeader("token")).post(initBody)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the OAuth session: %d %s", resp.StatusCode, body)
	}
	oauth := h.raw(t, bearerHeader("token"))
	oauth.sid = resp.Header.Get("Mcp-Session-Id")
	if _, _, err := h.mgr.RotateKey(t.Context(), h.keyID); err != nil {
		t.Fatal(err)
	}
	if resp, body := oauth.post(`{"jsonrpc":"2.0","id":1,"method":"ping"}`, "Mcp-Protocol-Version", "2025-06-18"); resp.StatusCode != http.StatusOK {
		t.Fatalf("the OAuth session after a rotation: %d %s", resp.StatusCode, body)
	}

	// Revocation: every session of the key ends, and the process's slots free.
	if _, err := h.mgr.RevokeKey(t.Context(), h.keyID); err != nil {
		t.Fatal(err)
	}
	_, other := h.newAccount(t, "other", "pro")
	waitInitialize(t, h, other, "another key after the revocation")
	waitInitialize(t, h, other, "another key's second session after the revocation")
}
