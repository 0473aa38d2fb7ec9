package mcp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/examples/apis"
	"github.com/tollgate-dev/tollgate/internal/doortest"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/mcp"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// t0 is the instant every test clock starts at: the middle of a month.
var t0 = time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC)

// testPlans are the plans of the test services. tiny reaches each limit in a few
// calls; open has none but its credits.
var testPlans = []billing.Plan{
	{Name: "pro", Credits: 1000, RatePerMinute: 600, Concurrency: 10, GraphQLMaxAPIs: 10},
	{Name: "tiny", Credits: 3, RatePerMinute: 2, Concurrency: 1, GraphQLMaxAPIs: 1},
	{Name: "open", Credits: 1000},
}

// path is where the tests mount the handler.
const path = "/v1/mcp"

// stores are the memory stores a test service runs on; two services on the same
// stores are two instances of one deployment.
type stores struct {
	tollgate.Stores
}

func newStores() stores {
	return stores{tollgate.Stores{
		Keys:   memory.NewKeyStore(),
		Ledger: memory.NewLedger(nil),
		Rates:  memory.NewRateLimiter(),
		Slots:  memory.NewConcurrencyLimiter(),
	}}
}

// harness is a service with the sample catalog and a few test APIs, the MCP handler
// in front of it on an httptest server, and one account on the pro plan.
type harness struct {
	clock   *testenv.Clock
	reg     *catalog.Registry
	stores  stores
	svc     *tollgate.Service
	mgr     *accounts.Manager // manages svc's accounts
	handler *mcp.Handler
	srv     *httptest.Server
	url     string
	account string
	key     string // the account's primary key
	keyID   string
	block   *doortest.Blocker
}

type config struct {
	mcp    mcp.Options
	stores *stores // shared stores; nil for new ones
	svc    tollgate.Options
	noHTTP bool // no httptest server (the synctest tests serve over pipes)
	// sampleOnly serves the sample catalog (examples/apis) without the test APIs.
	sampleOnly bool
}

func newRegistry(t testing.TB, b *doortest.Blocker, sampleOnly bool) *catalog.Registry {
	t.Helper()
	reg := &catalog.Registry{}
	if err := apis.Register(reg); err != nil {
		t.Fatal(err)
	}
	if sampleOnly {
		return reg
	}
	for _, a := range []catalog.API{
		b.API(),
		doortest.FailAPI(2),
		{
			ID: "free", Title: "Free", Description: "Costs nothing.", Method: http.MethodGet, Cost: 0,
			Handler: catalog.HandlerFunc(func(context.Context, *catalog.Request) (any, error) {
				return map[string]any{"ok": true}, nil
			}),
		},
	} {
		if err := reg.Register(a); err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

func newHarness(t testing.TB, cfg config) *harness {
	t.Helper()
	h := &harness{clock: testenv.NewClock(t0), block: doortest.NewBlocker()}
	h.reg = newRegistry(t, h.block, cfg.sampleOnly)
	if cfg.stores != nil {
		h.stores = *cfg.stores
	} else {
		h.stores = newStores()
	}
	plans, err := billing.NewPlans(testPlans...)
	if err != nil {
		t.Fatal(err)
	}
	opts := cfg.svc
	opts.Now = h.clock.Now
	opts.Logger = slog.New(slog.DiscardHandler)
	if h.svc, err = tollgate.New(h.reg, h.stores.Stores, plans, &opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.svc.Close)
	if h.mgr, err = accounts.New(h.svc, &accounts.Options{Logger: opts.Logger}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.mgr.Close)
	mopts := cfg.mcp
	if mopts.Logger == nil {
		mopts.Logger = slog.New(slog.DiscardHandler)
	}
	if h.handler, err = mcp.NewHandler(h.svc, &mopts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.handler.Close)
	if cfg.stores == nil {
		acct, key, value, err := h.mgr.CreateAccount(context.Background(), accounts.Spec{ID: "acme", Plan: "pro"})
		if err != nil {
			t.Fatal(err)
		}
		h.account, h.key, h.keyID = acct.ID, value, key.ID
	}
	if !cfg.noHTTP {
		mux := http.NewServeMux()
		mux.Handle(path, h.handler)
		h.srv = httptest.NewServer(mux)
		t.Cleanup(h.srv.Close)
		h.url = h.srv.URL + path
	}
	t.Cleanup(h.block.Release) // first: closing the handler waits for the calls in flight
	return h
}

// account creates an account on a plan and returns its primary key.
func (h *harness) newAccount(t testing.TB, id, plan string) (keyID, value string) {
	t.Helper()
	_, key, value, err := h.mgr.CreateAccount(context.Background(), accounts.Spec{ID: id, Plan: plan})
	if err != nil {
		t.Fatal(err)
	}
	return key.ID, value
}

// subKey creates a sub-key of the account with the given restrictions.
func (h *harness) subKey(t testing.TB, account, name string, spec auth.RestrictionSpec) (keyID, value string) {
	t.Helper()
	r, err := auth.NewRestrictions(spec)
	if err != nil {
		t.Fatal(err)
	}
	key, value, err := h.mgr.CreateKey(context.Background(), account, accounts.NewKey{Name: name, Restrictions: r})
	if err != nil {
		t.Fatal(err)
	}
	return key.ID, value
}

// balance returns an account's remaining credits.
func (h *harness) balance(t testing.TB, account string) int64 {
	t.Helper()
	info, err := h.mgr.Account(context.Background(), account)
	if err != nil {
		t.Fatal(err)
	}
	return info.Balance.Remaining
}

// headerTransport adds headers to every request.
type headerTransport struct {
	base http.RoundTripper
	hdr  http.Header
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.hdr {
		r.Header[k] = v
	}
	return t.base.RoundTrip(r)
}

// clientOptions configures a go-sdk client connection.
type clientOptions struct {
	opts    *sdk.ClientOptions
	httpc   *http.Client // the base client; the server's by default
	noSSE   bool
	version string // the protocol version to ask for
}

// connect connects the go-sdk client to the handler, sending hdr with every request.
func (h *harness) connect(t testing.TB, hdr http.Header, co clientOptions) (*sdk.ClientSession, error) {
	t.Helper()
	base := co.httpc
	if base == nil {
		base = h.srv.Client()
	}
	httpc := &http.Client{Transport: headerTransport{base.Transport, hdr}}
	client := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, co.opts)
	cs, err := client.Connect(t.Context(), &sdk.StreamableClientTransport{
		Endpoint: h.url, HTTPClient: httpc, MaxRetries: -1, DisableStandaloneSSE: co.noSSE,
	}, &sdk.ClientSessionOptions{ProtocolVersion: co.version})
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

// mustConnect connects with an API key in x-api-key.
func (h *harness) mustConnect(t testing.TB, key string) *sdk.ClientSession {
	t.Helper()
	cs, err := h.connect(t, keyHeader(key), clientOptions{noSSE: true})
	if err != nil {
		t.Fatalf("connecting: %v", err)
	}
	return cs
}

func keyHeader(key string) http.Header { return http.Header{"X-Api-Key": {key}} }

func bearerHeader(v string) http.Header { return http.Header{"Authorization": {"Bearer " + v}} }

// call calls a tool and fails the test on a protocol error.
func call(t testing.TB, cs *sdk.ClientSession, name string, args any) *sdk.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("calling %s: %v", name, err)
	}
	return res
}

// rpcCode returns the JSON-RPC error code of a client call's error, 0 if it has none.
func rpcCode(err error) int64 {
	var e *jsonrpc.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// text returns the text of a result's single content.
func text(t testing.TB, res *sdk.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("the result has %d contents, want 1: %+v", len(res.Content), res.Content)
	}
	tc, ok := res.Content[0].(*sdk.TextContent)
	if !ok {
		t.Fatalf("the content is %T, want text", res.Content[0])
	}
	return tc.Text
}

// rpc is a raw JSON-RPC exchange over HTTP, for the tests of the transport itself.
type rpc struct {
	t   testing.TB
	url string
	c   *http.Client
	hdr http.Header
	sid string
}

func (h *harness) raw(t testing.TB, hdr http.Header) *rpc {
	return &rpc{t: t, url: h.url, c: h.srv.Client(), hdr: hdr}
}

// post sends a body and returns the response with its body read; extra are header
// names and values to set.
func (c *rpc) post(body string, extra ...string) (*http.Response, []byte) {
	c.t.Helper()
	hdr := make(map[string]string, len(extra)/2)
	for i := 0; i+1 < len(extra); i += 2 {
		hdr[extra[i]] = extra[i+1]
	}
	return c.do(http.MethodPost, body, hdr)
}

// do sends one HTTP request with the client's credential and session, and returns the
// response with its body read. hdr adds to, or with an empty value removes, the
// default headers (the JSON Content-Type and both Accept types for a POST).
func (c *rpc) do(method, body string, hdr map[string]string) (*http.Response, []byte) {
	c.t.Helper()
	req, err := http.NewRequestWithContext(c.t.Context(), method, c.url, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	for k, v := range c.hdr {
		req.Header[k] = v
	}
	if c.sid != "" {
		req.Header.Set("Mcp-Session-Id", c.sid)
	}
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := c.c.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp, b
}

// initialize starts a session of protocol 2025-06-18.
func (c *rpc) initialize() {
	c.t.Helper()
	c.initializeVersion("2025-06-18")
}

// batchVersion is the last protocol version with JSON-RPC batches: the tests that send
// batches start their sessions with it.
const batchVersion = "2025-03-26"

// initializeVersion starts a session that agrees on a protocol version.
func (c *rpc) initializeVersion(version string) {
	c.t.Helper()
	resp, body := c.post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if resp.StatusCode != http.StatusOK {
		c.t.Fatalf("initialize: %s %s", resp.Status, body)
	}
	c.sid = resp.Header.Get("Mcp-Session-Id")
	if c.sid == "" {
		c.t.Fatal("initialize: no session id")
	}
	if resp, body := c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		c.t.Fatalf("initialized: %s %s", resp.Status, body)
	}
}

// rpcResponse is a JSON-RPC response.
type rpcResponse struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
		Data    struct {
			Code string `json:"code"`
		} `json:"data"`
	} `json:"error"`
}

func decodeResponse(t testing.TB, body []byte) rpcResponse {
	t.Helper()
	var r rpcResponse
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("the answer %q is not a JSON-RPC response: %v", body, err)
	}
	return r
}

// openStream opens the session's GET event stream and returns a channel that is
// closed when the stream ends.
func (c *rpc) openStream() (ended <-chan struct{}, events <-chan string) {
	c.t.Helper()
	req, err := http.NewRequestWithContext(c.t.Context(), http.MethodGet, c.url, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", c.sid)
	for k, v := range c.hdr {
		req.Header[k] = v
	}
	resp, err := c.c.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		c.t.Fatalf("GET stream: %s %s", resp.Status, b)
	}
	done := make(chan struct{})
	ev := make(chan string, 16)
	go func() {
		defer close(done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				select {
				case ev <- data:
				default:
				}
			}
		}
	}()
	return done, ev
}

// waitClosed waits until ch is closed, failing after a real-time bound (the tests that
// need exact time use synctest).
func waitClosed(t testing.TB, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not happen", what)
	}
}

func jsonEqual(t testing.TB, got json.RawMessage, want string) bool {
	t.Helper()
	var a, b any
	if err := json.Unmarshal(got, &a); err != nil {
		t.Fatalf("%q: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &b); err != nil {
		t.Fatal(err)
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}
