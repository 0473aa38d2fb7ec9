package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/mcp"
	"github.com/tollgate-dev/tollgate/rest"
)

// TestToolsList checks the shape of the tool list: one tool per API in id order, the
// cost in the description and in _meta, the catalog's input schema (the URL form for a
// file API) and its result schema as output schema where it declares result fields.
func TestToolsList(t *testing.T) {
	h := newHarness(t, config{})
	cs := h.mustConnect(t, h.key)
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	names := toolNames(t, cs)
	var ids []string
	for _, api := range h.reg.List() {
		ids = append(ids, api.ID)
	}
	if !slices.Equal(names, ids) {
		t.Fatalf("tools %q, want the catalog's ids %q", names, ids)
	}
	for _, tool := range res.Tools {
		api, _ := h.reg.Lookup(tool.Name)
		t.Run(tool.Name, func(t *testing.T) {
			cost := "Costs 1 credit per call."
			switch api.Cost {
			case 0:
				cost = "Free: a call costs no credits."
			case 1:
			default:
				cost = "Costs " + itoa(api.Cost) + " credits per call."
			}
			if !strings.HasPrefix(tool.Description, api.Description) || !strings.HasSuffix(tool.Description, cost) {
				t.Errorf("description %q: want the API's description and %q", tool.Description, cost)
			}
			if tool.Title != api.Title {
				t.Errorf("title %q, want %q", tool.Title, api.Title)
			}
			if c, _ := tool.Meta[mcp.MetaCost].(float64); int64(c) != api.Cost {
				t.Errorf("_meta %v, want %s = %d", tool.Meta, mcp.MetaCost, api.Cost)
			}
			in, _ := json.Marshal(tool.InputSchema)
			want := string(api.InputSchema())
			if api.File != nil {
				// The URL form: url is required and is the only way to pass the file.
				var s map[string]any
				json.Unmarshal(api.InputSchema(), &s)
				s["required"] = []any{"url"}
				s["properties"].(map[string]any)["url"].(map[string]any)["description"] = "The http(s) address of the file, which the service fetches."
				b, _ := json.Marshal(s)
				want = string(b)
				if !strings.Contains(tool.Description, "files cannot be uploaded over MCP") {
					t.Errorf("the description of a file API does not explain the URL form: %q", tool.Description)
				}
			}
			if !jsonEqual(t, in, want) {
				t.Errorf("input schema\n%s\nwant\n%s", in, want)
			}
			switch {
			case len(api.Result) == 0 && tool.OutputSchema != nil:
				t.Errorf("an API without result fields has an output schema: %v", tool.OutputSchema)
			case len(api.Result) > 0:
				out, _ := json.Marshal(tool.OutputSchema)
				if !jsonEqual(t, out, string(api.ResultSchema())) {
					t.Errorf("output schema\n%s\nwant\n%s", out, api.ResultSchema())
				}
			}
		})
	}
}

// TestScopedKey checks that a key restricted to some APIs lists and calls only those,
// and that calling another is an unknown tool to it.
func TestScopedKey(t *testing.T) {
	h := newHarness(t, config{})
	_, scoped := h.subKey(t, h.account, "scoped", auth.RestrictionSpec{APIs: []string{"hash", "echo"}})
	cs := h.mustConnect(t, scoped)
	names := toolNames(t, cs)
	if !slices.Equal(names, []string{"echo", "hash"}) {
		t.Fatalf("the scoped key lists %q, want echo and hash", names)
	}
	if r := call(t, cs, "hash", map[string]any{"text": "a"}); r.IsError {
		t.Fatalf("an allowed call failed: %s", text(t, r))
	}
	before := h.balance(t, h.account)
	_, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "hmac", Arguments: map[string]any{"message": "m", "secret": "s"}})
	if rpcCode(err) != -32602 || !strings.Contains(err.Error(), "limited to echo, hash") {
		t.Fatalf("calling a tool outside the scope: %v; want invalid params naming the allowed APIs", err)
	}
	if after := h.balance(t, h.account); after != before {
		t.Fatalf("a refused call was charged: %d -> %d", before, after)
	}
}

// pngServer serves a 3x2 PNG at /img.png.
func pngServer(t *testing.T) *httptest.Server {
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewRGBA(image.Rect(0, 0, 3, 2))); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/img.png" {
			http.NotFound(w, r)
			return
		}
		w.Write(buf.Bytes())
	}))
	t.Cleanup(srv.Close)
	return srv
}

// headerRecorder keeps the response headers of the last tool call.
type headerRecorder struct {
	base http.RoundTripper
	mu   sync.Mutex
	last http.Header
}

func (r *headerRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	resp, err := r.base.RoundTrip(req)
	if err == nil && bytes.Contains(body, []byte(`"tools/call"`)) {
		r.mu.Lock()
		r.last = resp.Header.Clone()
		r.mu.Unlock()
	}
	return resp, err
}

func (r *headerRecorder) header() http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// TestChargesLikeREST makes the same calls over REST and as tool calls, and checks
// that they cost the same (a success, a charged rejection), that the refunded and the
// never-charged failures cost nothing either way, that failures are isError results
// naming their code, and that the credit headers of the HTTP answers agree.
func TestChargesLikeREST(t *testing.T) {
	h := newHarness(t, config{svc: tollgate.Options{Fetch: tollgate.FetchOptions{AllowPrivate: true}}})
	restHandler, err := rest.NewHandler(h.svc, nil)
	if err != nil {
		t.Fatal(err)
	}
	restSrv := httptest.NewServer(restHandler)
	defer restSrv.Close()
	img := pngServer(t)
	rec := &headerRecorder{base: h.srv.Client().Transport}
	cs, err := h.connect(t, keyHeader(h.key), clientOptions{noSSE: true, httpc: &http.Client{Transport: rec}})
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		api     string
		args    map[string]any
		cost    int64  // credits kept
		errCode string // the code an isError result starts with; "" for a success
		data    string // a fragment of the success's JSON
	}{
		{"hash", map[string]any{"text": "hello"}, 1, "", `"hash":"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"`},
		{"hash", map[string]any{"text": "hello", "algorithm": "md5"}, 1, "", `"5d41402abc4b2a76b9719d911017c592"`},
		{"hmac", map[string]any{"message": "m", "secret": "s", "encoding": "base64"}, 1, "", `"encoding":"base64"`},
		{"uuid-generator", map[string]any{"count": 3}, 1, "", `"count":3`},
		{"date-info", map[string]any{"date": "2024-02-29"}, 1, "", `"day-of-week":"Thursday"`},
		{"image-info", map[string]any{"url": img.URL + "/img.png"}, 2, "", `"width":3`},
		// The API judges a well-formed value wrong: charged, since the API ran and judged.
		{"date-info", map[string]any{"date": "2026-02-30"}, 1, "rejected", ""},
		// Refused by validation: never charged.
		{"date-info", map[string]any{}, 0, "invalid_input", ""},
		{"hash", map[string]any{"text": "x", "algorithm": "crc32"}, 0, "invalid_input", ""},
		{"hash", map[string]any{"text": "x", "colour": "red"}, 0, "invalid_input", ""},
		{"uuid-generator", map[string]any{"count": 101}, 0, "invalid_input", ""},
		{"image-info", map[string]any{}, 0, "invalid_input", ""},
		// Failed on the service's side: refunded.
		{"fail", map[string]any{}, 0, "api_failed", ""},
		{"image-info", map[string]any{"url": img.URL + "/missing.png"}, 0, "invalid_input", ""},
	}
	for _, tt := range tests {
		name := tt.api + " " + mustJSON(t, tt.args)
		t.Run(name, func(t *testing.T) {
			api, _ := h.reg.Lookup(tt.api)
			before := h.balance(t, h.account)
			restStatus, restHdr := callREST(t, restSrv.URL, h.key, api, tt.args)
			restCost := before - h.balance(t, h.account)

			before = h.balance(t, h.account)
			res := call(t, cs, tt.api, tt.args)
			mcpCost := before - h.balance(t, h.account)
			if restCost != tt.cost || mcpCost != tt.cost {
				t.Fatalf("REST cost %d (status %d), MCP cost %d; want %d each", restCost, restStatus, mcpCost, tt.cost)
			}
			if tt.errCode == "" {
				if res.IsError {
					t.Fatalf("the call failed: %s", text(t, res))
				}
				got := text(t, res)
				if !strings.Contains(got, tt.data) {
					t.Errorf("text %s lacks %s", got, tt.data)
				}
				sc, _ := json.Marshal(res.StructuredContent)
				if !jsonEqual(t, sc, got) {
					t.Errorf("structuredContent %s differs from the text %s", sc, got)
				}
			} else {
				if !res.IsError || !strings.HasPrefix(text(t, res), tt.errCode+": ") {
					t.Fatalf("result %+v; want isError starting with %q", res.Content, tt.errCode)
				}
				if strings.Contains(text(t, res), "secret internal detail") {
					t.Errorf("the error shows an internal detail: %s", text(t, res))
				}
			}
			// The credit headers agree with REST's wherever the call reached admission.
			mcpHdr := rec.header()
			if restHdr.Get("X-Credits-Cost") != "" {
				for _, k := range []string{"X-Credits-Cost", "X-Credits-Limit", "X-Plan", "X-RateLimit-Limit"} {
					if mcpHdr.Get(k) != restHdr.Get(k) {
						t.Errorf("%s: MCP %q, REST %q", k, mcpHdr.Get(k), restHdr.Get(k))
					}
				}
				if got, want := mcpHdr.Get("X-Credits-Remaining"), itoa(h.balance(t, h.account)); got != want {
					t.Errorf("X-Credits-Remaining %q, want %q", got, want)
				}
				credits, _ := res.Meta[mcp.MetaCredits].(map[string]any)
				if c, _ := credits["cost"].(float64); int64(c) != tt.cost {
					t.Errorf("_meta %v: want cost %d", res.Meta, tt.cost)
				}
			}
		})
	}
}

// callREST makes a call over REST and returns its status and headers.
func callREST(t *testing.T, base, key string, api *catalog.API, args map[string]any) (int, http.Header) {
	t.Helper()
	var req *http.Request
	if api.Method == http.MethodGet {
		q := url.Values{}
		for k, v := range args {
			q.Set(k, strings.Trim(mustJSON(t, v), `"`))
		}
		req, _ = http.NewRequest(http.MethodGet, base+"/v1/"+api.ID+"?"+q.Encode(), nil)
	} else {
		req, _ = http.NewRequest(http.MethodPost, base+"/v1/"+api.ID, strings.NewReader(mustJSON(t, args)))
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("X-Api-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header
}

func mustJSON(t testing.TB, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestLimits checks that the plan's limits are isError results that name them: the
// rate limit (with the time to wait), the concurrency ceiling and exhausted credits.
func TestLimits(t *testing.T) {
	h := newHarness(t, config{})
	_, key := h.newAccount(t, "small", "tiny") // 3 credits, 2 calls a minute, 1 at a time
	rec := &headerRecorder{base: h.srv.Client().Transport}
	cs, err := h.connect(t, keyHeader(key), clientOptions{noSSE: true, httpc: &http.Client{Transport: rec}})
	if err != nil {
		t.Fatal(err)
	}

	for i := range 2 {
		if r := call(t, cs, "hash", map[string]any{"text": "a"}); r.IsError {
			t.Fatalf("call %d: %s", i, text(t, r))
		}
	}
	r := call(t, cs, "hash", map[string]any{"text": "a"})
	if !r.IsError || !strings.HasPrefix(text(t, r), "rate_limited: ") || !strings.Contains(text(t, r), "retry in") {
		t.Fatalf("the third call in a minute: %+v; want rate_limited with a retry time", r.Content)
	}
	if h.balance(t, "small") != 1 {
		t.Fatalf("balance %d after two calls and a refusal, want 1", h.balance(t, "small"))
	}
	if hdr := rec.header(); hdr.Get("Retry-After") == "" || hdr.Get("X-Credits-Remaining") != "1" || hdr.Get("X-RateLimit-Remaining") != "0" {
		t.Errorf("headers of the rate-limited call: %v; want Retry-After, the balance and the rate", hdr)
	}

	// The concurrency ceiling: one call at a time.
	h.clock.Advance(time.Minute)
	done := make(chan *sdk.CallToolResult, 1)
	go func() {
		res, _ := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "block", Arguments: map[string]any{}})
		done <- res
	}()
	<-h.block.Entered()
	r = call(t, cs, "hash", map[string]any{"text": "a"})
	if !r.IsError || !strings.HasPrefix(text(t, r), "concurrency_limited: ") {
		t.Fatalf("a call beside a running one: %+v; want concurrency_limited", r.Content)
	}
	h.block.Release()
	if res := <-done; res == nil || res.IsError {
		t.Fatalf("the blocking call: %+v", res)
	}

	// Credits: the balance is now 0.
	h.clock.Advance(time.Minute)
	r = call(t, cs, "hash", map[string]any{"text": "a"})
	if !r.IsError || !strings.HasPrefix(text(t, r), "credits_exhausted: ") {
		t.Fatalf("a call without credits: %+v; want credits_exhausted", r.Content)
	}
	credits, _ := r.Meta[mcp.MetaCredits].(map[string]any)
	if rem, ok := credits["remaining"].(float64); !ok || rem != 0 {
		t.Errorf("_meta of the refusal %v: want remaining 0", r.Meta)
	}
}

// TestListChanged checks that a connected client is told when the catalog changes, and
// then lists the new tools.
func TestListChanged(t *testing.T) {
	h := newHarness(t, config{})
	changed := make(chan struct{}, 8)
	cs, err := h.connect(t, keyHeader(h.key), clientOptions{opts: &sdk.ClientOptions{
		ToolListChangedHandler: func(_ context.Context, _ *sdk.ToolListChangedRequest) { changed <- struct{}{} },
	}})
	if err != nil {
		t.Fatal(err)
	}
	names := func() []string { return toolNames(t, cs) }
	if slices.Contains(names(), "ping") {
		t.Fatal("ping is listed before it exists")
	}
	err = h.reg.Register(catalog.API{ID: "ping", Title: "Ping", Description: "Answers pong.", Method: http.MethodGet, Cost: 3,
		Handler: catalog.HandlerFunc(func(context.Context, *catalog.Request) (any, error) { return map[string]any{"pong": true}, nil })})
	if err != nil {
		t.Fatal(err)
	}
	waitNotified(t, changed)
	if !slices.Contains(names(), "ping") {
		t.Fatal("ping is not listed after the notification")
	}
	if r := call(t, cs, "ping", nil); r.IsError || text(t, r) != `{"pong":true}` {
		t.Fatalf("calling the new tool: %+v", r.Content)
	}
	h.reg.Remove("ping")
	waitNotified(t, changed)
	if slices.Contains(names(), "ping") {
		t.Fatal("ping is still listed after its removal")
	}
	if _, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "ping"}); rpcCode(err) != -32602 {
		t.Fatalf("calling a removed tool: %v; want invalid params", err)
	}
}

// toolNames lists the tools and returns their names.
func toolNames(t *testing.T, cs *sdk.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tool := range res.Tools {
		out = append(out, tool.Name)
	}
	return out
}

func waitNotified(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("no notifications/tools/list_changed arrived")
	}
}

// TestFreeTool: a tool whose API costs 0 is served at a zero balance and charges
// nothing: its result's _meta says cost 0 and the balance as it was.
func TestFreeTool(t *testing.T) {
	h := newHarness(t, config{})
	_, key := h.newAccount(t, "broke", "pro")
	info, err := h.mgr.Account(t.Context(), "broke")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.mgr.AdjustCredits(t.Context(), "broke", -info.Balance.Remaining, "spent", nil); err != nil {
		t.Fatal(err)
	}
	res := call(t, h.mustConnect(t, key), "free", map[string]any{})
	credits, _ := res.Meta[mcp.MetaCredits].(map[string]any)
	if res.IsError || credits["cost"] != float64(0) || credits["remaining"] != float64(0) {
		t.Errorf("the free tool at a zero balance: error %v, _meta %v; want a result costing 0", res.IsError, res.Meta)
	}
}
