package mcp_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/mcp"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// TestRotationHeaderClient checks that a client configured with a key in its header
// fails on its next call after the key is rotated (401, the old value is unknown), and
// works again with the new value.
func TestRotationHeaderClient(t *testing.T) {
	h := newHarness(t, config{})
	cs := h.mustConnect(t, h.key)
	if r := call(t, cs, "hash", map[string]any{"text": "a"}); r.IsError {
		t.Fatal(text(t, r))
	}
	_, newValue, err := h.mgr.RotateKey(t.Context(), h.keyID)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "hash", Arguments: map[string]any{"text": "a"}})
	if rpcCode(err) != -32041 || !strings.Contains(err.Error(), "rotated") {
		t.Fatalf("a call with the old value after rotation: %v; want -32041 unauthorized", err)
	}
	if _, err := cs.ListTools(t.Context(), nil); rpcCode(err) != -32041 {
		t.Fatalf("listing with the old value after rotation: %v; want -32041", err)
	}
	cs2 := h.mustConnect(t, newValue)
	if r := call(t, cs2, "hash", map[string]any{"text": "a"}); r.IsError {
		t.Fatalf("the new value: %s", text(t, r))
	}
}

// TestOAuthConnection checks an OAuth connection (a fake VerifyToken maps tokens to key
// ids): it survives a rotation of its key, and ends with its revocation.
func TestOAuthConnection(t *testing.T) {
	tokens := fakeTokens{}
	h := newHarness(t, config{mcp: tokens.options()})
	tokens["opaque-access-token"] = h.keyID
	cs, err := h.connect(t, bearerHeader("opaque-access-token"), clientOptions{noSSE: true})
	if err != nil {
		t.Fatal(err)
	}
	if r := call(t, cs, "hash", map[string]any{"text": "a"}); r.IsError {
		t.Fatal(text(t, r))
	}
	for range 2 {
		if _, _, err := h.mgr.RotateKey(t.Context(), h.keyID); err != nil {
			t.Fatal(err)
		}
		if r := call(t, cs, "hash", map[string]any{"text": "b"}); r.IsError {
			t.Fatalf("the OAuth connection after a rotation: %s", text(t, r))
		}
	}
	if _, err := h.mgr.RevokeKey(t.Context(), h.keyID); err != nil {
		t.Fatal(err)
	}
	_, err = cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "hash", Arguments: map[string]any{"text": "a"}})
	if rpcCode(err) != -32043 || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("a call after revocation: %v; want -32043 naming the revocation", err)
	}
	// An expired or revoked token is refused with the challenge.
	delete(tokens, "opaque-access-token")
	resp, _ := h.raw(t, bearerHeader("opaque-access-token")).post(initBody)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Fatalf("an unknown token: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
}

// TestRevocationClosesStreams checks, on one instance, that revoking a key ends at once
// the open GET event streams and the POSTs in flight of its connections, OAuth ones
// included, leaves other keys' streams open, and refuses the next call; and that a
// rotation ends the streams opened with the old value but not the OAuth ones.
func TestRevocationClosesStreams(t *testing.T) {
	tokens := fakeTokens{}
	h := newHarness(t, config{mcp: tokens.options()})
	tokens["tok"] = h.keyID
	_, other := h.newAccount(t, "other", "pro")

	header := h.raw(t, keyHeader(h.key))
	header.initialize()
	oauth := h.raw(t, bearerHeader("tok"))
	oauth.initialize()
	bystander := h.raw(t, keyHeader(other))
	bystander.initialize()
	headerEnded, _ := header.openStream()
	oauthEnded, _ := oauth.openStream()
	bystanderEnded, _ := bystander.openStream()

	// A rotation ends the stream opened with the old value, not the OAuth one.
	if _, _, err := h.mgr.RotateKey(t.Context(), h.keyID); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, headerEnded, "the end of the header client's stream after rotation")
	select {
	case <-oauthEnded:
		t.Fatal("a rotation ended the OAuth stream")
	default:
	}

	// A call in flight on the OAuth connection.
	cs, err := h.connect(t, bearerHeader("tok"), clientOptions{noSSE: true})
	if err != nil {
		t.Fatal(err)
	}
	inflight := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "block", Arguments: map[string]any{}})
		inflight <- err
	}()
	<-h.block.Entered()

	if _, err := h.mgr.RevokeKey(t.Context(), h.keyID); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, oauthEnded, "the end of the OAuth stream after revocation")
	select {
	case err := <-inflight:
		if rpcCode(err) != -32043 || !strings.Contains(err.Error(), "revoked") {
			t.Fatalf("the call in flight: %v; want -32043 naming the revocation", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the POST in flight was not ended by the revocation")
	}
	select {
	case <-bystanderEnded:
		t.Fatal("another account's stream was ended")
	default:
	}
	resp, body := oauth.post(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("the next request after revocation: %d %s", resp.StatusCode, body)
	}
	req, _ := http.NewRequest(http.MethodGet, h.url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", oauth.sid)
	req.Header.Set("Authorization", "Bearer tok")
	resp, err = h.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("reopening the stream after revocation: %d", resp.StatusCode)
	}
}

// pipeNet is an in-memory network for tests in a synctest bubble: its connections are
// net.Pipes, on which a blocked goroutine is durably blocked, so that the bubble's
// clock advances while a server and its clients wait.
type pipeNet struct {
	conns     chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
}

func newPipeNet() *pipeNet {
	return &pipeNet{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (p *pipeNet) Accept() (net.Conn, error) {
	select {
	case c := <-p.conns:
		return c, nil
	case <-p.done:
		return nil, net.ErrClosed
	}
}

func (p *pipeNet) Close() error {
	p.closeOnce.Do(func() { close(p.done) })
	return nil
}

func (p *pipeNet) Addr() net.Addr { return pipeAddr{} }

func (p *pipeNet) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case p.conns <- server:
		return client, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-p.done:
		return nil, net.ErrClosed
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// serveOverPipes serves the handler on an in-memory network and returns a client for
// it; both stop when the test ends. timeout, if positive, is the server's read and
// write timeout.
func serveOverPipes(t *testing.T, h *harness, timeout time.Duration) *http.Client {
	ln := newPipeNet()
	mux := http.NewServeMux()
	mux.Handle(path, h.handler)
	srv := &http.Server{Handler: mux, ReadTimeout: timeout, WriteTimeout: timeout}
	go srv.Serve(ln)
	tr := &http.Transport{DialContext: ln.dial}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		srv.Close()
	})
	return &http.Client{Transport: tr}
}

// TestRevocationOnAnotherInstance checks that a revocation made through another
// service on the same stores, which the handler's service does not hear of, ends an
// open stream at the next periodic check, and not before, and that the periodic checks
// leave a live key's stream open.
func TestRevocationOnAnotherInstance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newHarness(t, config{noHTTP: true, mcp: mcp.Options{RecheckInterval: 5 * time.Second}})
		b := newHarness(t, config{noHTTP: true, stores: &a.stores})
		_, other := a.newAccount(t, "other", "pro")
		client := serveOverPipes(t, a, 0)
		a.url = "http://mcp.test" + path

		open := func(key string) (*rpc, <-chan struct{}) {
			c := &rpc{t: t, url: a.url, c: client, hdr: keyHeader(key)}
			c.initialize()
			ended, _ := c.openStream()
			return c, ended
		}
		c, ended := open(a.key)
		_, otherEnded := open(other)
		isOpen := func(ch <-chan struct{}) bool {
			synctest.Wait()
			select {
			case <-ch:
				return false
			default:
				return true
			}
		}

		time.Sleep(12 * time.Second) // two checks of a live key
		if !isOpen(ended) {
			t.Fatal("the periodic check ended a live key's stream")
		}
		if _, err := b.mgr.RevokeKey(context.Background(), a.keyID); err != nil {
			t.Fatal(err)
		}
		if !isOpen(ended) {
			t.Fatal("the stream ended before the next check: the handler's service heard of another's revocation")
		}
		time.Sleep(2*time.Second + 999*time.Millisecond) // 14.999 s after opening
		if !isOpen(ended) {
			t.Fatal("the stream ended before the check at 15 s")
		}
		time.Sleep(time.Millisecond)
		if isOpen(ended) {
			t.Fatal("the check at 15 s did not end the revoked key's stream")
		}
		if !isOpen(otherEnded) {
			t.Fatal("another key's stream ended")
		}
		resp, body := c.post(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("the next request after revocation: %d %s", resp.StatusCode, body)
		}
	})
}

// TestKeyCache checks the handler on a service that caches key records: a revocation
// or rotation made through another instance, which the cache does not hear of, is
// still refused on the very next request of every kind, a tool call included.
func TestKeyCache(t *testing.T) {
	tests := []struct {
		name   string
		change func(b *harness, keyID string) error
		status int   // of a tools/list
		code   int64 // of the tool calls
	}{
		{"revoked", func(b *harness, id string) error { _, err := b.mgr.RevokeKey(context.Background(), id); return err }, 403, mcp.CodeForbidden},
		{"rotated", func(b *harness, id string) error { _, _, err := b.mgr.RotateKey(context.Background(), id); return err }, 401, mcp.CodeUnauthorized},
	}
	calls := []struct{ name, body string }{
		{"a paid call", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"hash","arguments":{"text":"a"}}}`},
		{"bad arguments", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"hash","arguments":{}}}`},
		{"an unknown tool", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"nope","arguments":{}}}`},
		{"arguments not an object", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"hash","arguments":[1]}}`},
	}
	// setup returns a session opened before the change, whose first call put the key's
	// record in the cache of the handler's service, and makes the change through
	// another instance.
	setup := func(t *testing.T, change func(b *harness, keyID string) error) *rpc {
		a := newHarness(t, config{svc: tollgate.Options{KeyCache: &auth.KeyCacheOptions{TTL: time.Hour}}})
		b := newHarness(t, config{noHTTP: true, stores: &a.stores})
		cl := a.raw(t, keyHeader(a.key))
		cl.initialize()
		if resp, body := cl.post(calls[0].body); resp.StatusCode != 200 || decodeResponse(t, body).Error != nil {
			t.Fatalf("a call before the change: %d %s", resp.StatusCode, body)
		}
		if err := change(b, a.keyID); err != nil {
			t.Fatal(err)
		}
		return cl
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The HTTP layer checks the key of every request but tool calls...
			cl := setup(t, tt.change)
			if resp, body := cl.post(`{"jsonrpc":"2.0","id":4,"method":"tools/list"}`); resp.StatusCode != tt.status {
				t.Fatalf("tools/list after the change: %d %s; want %d", resp.StatusCode, body, tt.status)
			}
			// ... which their admission checks, or the handler before it refuses them.
			for _, c := range calls {
				cl := setup(t, tt.change)
				resp, body := cl.post(c.body)
				if r := decodeResponse(t, body); resp.StatusCode != 200 || r.Error == nil || r.Error.Code != tt.code {
					t.Errorf("%s after the change: %d %s; want JSON-RPC error %d", c.name, resp.StatusCode, body, tt.code)
				}
			}
		})
	}
}

// TestStreamOutlivesServerTimeouts checks that a GET event stream is not cut by the
// server's read and write timeouts, and still carries notifications long after them.
func TestStreamOutlivesServerTimeouts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, config{noHTTP: true, mcp: mcp.Options{RecheckInterval: time.Hour}})
		client := serveOverPipes(t, h, time.Second)
		h.url = "http://mcp.test" + path
		c := &rpc{t: t, url: h.url, c: client, hdr: keyHeader(h.key)}
		c.initialize()
		ended, events := c.openStream()
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		select {
		case <-ended:
			t.Fatal("the server's timeouts cut the event stream")
		default:
		}
		h.reg.Remove("echo")
		time.Sleep(time.Second) // the SDK's debounce of list changes
		synctest.Wait()
		select {
		case ev := <-events:
			if !strings.Contains(ev, "notifications/tools/list_changed") {
				t.Fatalf("event %s; want tools/list_changed", ev)
			}
		default:
			t.Fatal("no notification on the stream after the catalog changed")
		}
	})
}

// TestKeyCacheBeforeRefusals checks, on a service that caches key records, that a tool
// call the handler or the SDK refuses before admission (which would have checked the
// key) is refused for its key first when the key was revoked or rotated through
// another instance: a refusal never answers a revoked key as if it were still good.
func TestKeyCacheBeforeRefusals(t *testing.T) {
	changes := []struct {
		name   string
		change func(b *harness, keyID string) error
		status int
		code   int64
	}{
		{"revoked", func(b *harness, id string) error { _, err := b.mgr.RevokeKey(context.Background(), id); return err }, 403, mcp.CodeForbidden},
		{"rotated", func(b *harness, id string) error { _, _, err := b.mgr.RotateKey(context.Background(), id); return err }, 401, mcp.CodeUnauthorized},
	}
	const call = `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"hash","arguments":{"text":"a"}}}`
	refusals := []struct {
		name string
		body string
		hdr  map[string]string
	}{
		{"params not an object", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":[1]}`, nil},
		{"no params (the SDK's refusal)", `{"jsonrpc":"2.0","id":5,"method":"tools/call"}`, nil},
		{"an id on a call in a bad form", `{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"hash","arguments":{"text":"a"}}}`, nil},
		{"an Accept the SDK refuses", call, map[string]string{"Accept": "application/json"}},
		{"an unknown session", call, map[string]string{"Mcp-Session-Id": "no-such-session"}},
	}
	for _, ch := range changes {
		for _, rf := range refusals {
			t.Run(ch.name+", "+rf.name, func(t *testing.T) {
				a := newHarness(t, config{svc: tollgate.Options{KeyCache: &auth.KeyCacheOptions{TTL: time.Hour}}})
				b := newHarness(t, config{noHTTP: true, stores: &a.stores})
				cl := a.raw(t, keyHeader(a.key))
				cl.initialize()
				if resp, body := cl.post(call); resp.StatusCode != 200 || decodeResponse(t, body).Error != nil {
					t.Fatalf("a call before the change: %d %s", resp.StatusCode, body)
				}
				if err := ch.change(b, a.keyID); err != nil {
					t.Fatal(err)
				}
				resp, body := cl.do(http.MethodPost, rf.body, rf.hdr)
				if r := decodeResponse(t, body); resp.StatusCode != ch.status || r.Error == nil || r.Error.Code != ch.code {
					t.Fatalf("%d %s; want %d with JSON-RPC error %d", resp.StatusCode, body, ch.status, ch.code)
				}
			})
		}
	}
}

// TestSignOutClosesStreams checks that ending a session (a sign-out) ends at once the
// open event streams of the MCP sessions that its token drives, and not those of
// another session of the same key: the periodic check is off, so only the sign-out can
// end them.
func TestSignOutClosesStreams(t *testing.T) {
	sessions, err := auth.NewSessions([]byte("mcp-signout-secret-0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, config{svc: tollgate.Options{Sessions: sessions, SessionStore: memory.NewSessionStore()},
		mcp: mcp.Options{RecheckInterval: time.Hour}})
	var toks []string
	for range 2 {
		s, err := h.mgr.StartSession(t.Context(), tollgate.Caller{Credential: auth.Credential{Kind: auth.APIKeyHeader, Value: h.key}})
		if err != nil {
			t.Fatal(err)
		}
		toks = append(toks, s.Token)
	}
	var ended []<-chan struct{}
	for _, tok := range toks {
		c := h.raw(t, http.Header{"X-Jwt": {tok}})
		c.initialize()
		ch, _ := c.openStream()
		ended = append(ended, ch)
	}
	if err := h.mgr.EndSession(t.Context(), toks[0], netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, ended[0], "the end of the signed-out session's stream")
	select {
	case <-ended[1]:
		t.Fatal("a sign-out ended the stream of another session of the same key")
	default:
	}
}

// TestEveryToolCallChecksItsKey checks that a tool call is held to its key as it is
// when the call arrives, not as it was when the session began or at the session's
// last call: a change made through another instance on the same stores (which this
// instance's key cache does not hear of) refuses the very next tools/call of an open
// session, with a key cache and without one. The handler authenticates each request
// once and the call runs on that principal; one kept from an earlier request would
// let these calls through.
func TestEveryToolCallChecksItsKey(t *testing.T) {
	const callBody = `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"hash","arguments":{"text":"a"}}}`
	narrowed, err := auth.NewRestrictions(auth.RestrictionSpec{APIs: []string{"uuid-generator"}})
	if err != nil {
		t.Fatal(err)
	}
	noMCP, err := auth.NewRestrictions(auth.RestrictionSpec{Channels: []string{"rest"}})
	if err != nil {
		t.Fatal(err)
	}
	expiry := t0.Add(time.Hour)
	// status is the HTTP status of the refusal without a key cache, and cached with
	// one: a key from the cache is checked in the call's admission, whose refusal is
	// the tool call's JSON-RPC error in a 200 (see TestKeyCache).
	tests := []struct {
		name           string
		change         func(t *testing.T, a, b *harness, keyID string)
		status, cached int
		code           int64
	}{
		{"revoked", func(t *testing.T, _, b *harness, id string) {
			if _, err := b.mgr.RevokeKey(context.Background(), id); err != nil {
				t.Fatal(err)
			}
		}, 403, 200, mcp.CodeForbidden},
		{"expired", func(t *testing.T, a, _ *harness, _ string) { a.clock.Set(expiry.Add(time.Second)) }, 403, 403, mcp.CodeForbidden},
		{"channel taken away", func(t *testing.T, _, b *harness, id string) {
			if _, err := b.mgr.UpdateKey(context.Background(), id, accounts.KeyChange{Restrictions: &noMCP}); err != nil {
				t.Fatal(err)
			}
		}, 403, 200, mcp.CodeForbidden},
		{"API taken away", func(t *testing.T, _, b *harness, id string) {
			if _, err := b.mgr.UpdateKey(context.Background(), id, accounts.KeyChange{Restrictions: &narrowed}); err != nil {
				t.Fatal(err)
			}
		}, 200, 200, -32602},
	}
	for _, cache := range []bool{false, true} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s, key cache %v", tt.name, cache), func(t *testing.T) {
				var svc tollgate.Options
				if cache {
					svc.KeyCache = &auth.KeyCacheOptions{TTL: time.Hour}
				}
				a := newHarness(t, config{svc: svc})
				b := newHarness(t, config{noHTTP: true, stores: &a.stores})
				keyID, key := a.subKey(t, a.account, "expiring", auth.RestrictionSpec{ExpiresAt: &expiry})
				cl := a.raw(t, keyHeader(key))
				cl.initialize()
				for i := range 2 { // the second call finds the key's record in the cache, if there is one
					if resp, body := cl.post(callBody); resp.StatusCode != 200 || decodeResponse(t, body).Error != nil {
						t.Fatalf("call %d before the change: %d %s", i+1, resp.StatusCode, body)
					}
				}
				before := a.balance(t, a.account)
				tt.change(t, a, b, keyID)
				status := tt.status
				if cache {
					status = tt.cached
				}
				resp, body := cl.post(callBody)
				if r := decodeResponse(t, body); resp.StatusCode != status || r.Error == nil || r.Error.Code != tt.code {
					t.Fatalf("the call after the change: %d %s; want %d with JSON-RPC error %d", resp.StatusCode, body, status, tt.code)
				}
				if after := a.balance(t, a.account); after != before {
					t.Fatalf("the refused call changed the balance from %d to %d", before, after)
				}
			})
		}
	}
}
