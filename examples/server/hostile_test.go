package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/cleantext"
	"github.com/tollgate-dev/tollgate/wire"
)

// The hostile-input suite lives here, beside the example server, because it attacks
// the service as a host assembles it: assemble's own wiring of every front door (REST,
// GraphQL, MCP with OAuth, the admin API and the embedded authorization server) on one
// ServeMux and memory stores, with no second copy of that wiring to drift from it.

// The keys of testdata/hostile.json, by the account they spend from.
const (
	keyAlpha    = "76b4978c-633d-4b48-81f6-430c904b135a" // alpha, plan open
	keyRESTOnly = "154aa5a1-71c0-44ee-bec9-1e7c2e1a46ec" // alpha, REST only
	keyHashOnly = "3016029e-0321-432c-b646-6762178400b1" // alpha, the hash API only
	keyOffice   = "c72efefe-d5b4-4efb-a4ad-35ee253f9ca4" // alpha, from 10.0.0.0/8 only
	keyRevoked  = "9a3fb378-ce5b-4aca-890b-98662f2aecc2" // alpha, revoked
	keyBeta     = "ff58dd52-a6f8-451f-80f2-2f21ed2871cc" // beta, plan open
	keyGamma    = "d488d5a6-161f-4b4f-8b4a-e66d8f3382f0" // gamma, plan tiny: 3 credits, 2 calls a minute
	keyRaw      = "cdae119f-e4d0-46e2-80a4-49076199726b" // raw, for the requests written as bytes
	keyUnknown  = "00000000-0000-4000-8000-000000000000" // no account
)

// keyAccount is the account each key spends from.
var keyAccount = map[string]string{
	keyAlpha: "alpha", keyRESTOnly: "alpha", keyHashOnly: "alpha", keyOffice: "alpha", keyRevoked: "alpha",
	keyBeta: "beta", keyGamma: "gamma", keyRaw: "raw",
}

// accounted are the accounts whose balances the suite checks. The admin requests
// change only the account scratch, and accounts they create.
var accounted = []string{"alpha", "beta", "gamma", "raw"}

// An attack is one HTTP request of the suite.
type attack struct {
	name   string
	method string
	target string // the path and query, as url.Parse takes it
	header http.Header
	body   []byte
	// session sends the Mcp-Session-Id of the suite's MCP session.
	session bool
	// stream is a GET of an event stream, which never ends: the suite reads its
	// status and headers, then closes it.
	stream bool
}

// hostile runs attacks against the server and checks every answer.
type hostile struct {
	t       *testing.T
	s       *server
	client  *http.Client
	session string // an MCP session of beta

	mu       sync.Mutex
	spent    map[string]int64 // the sum of X-Credits-Cost answered, by account
	sent     int
	byStatus map[int]int
	failures int
}

// maxFailures bounds the failures the suite reports in detail.
const maxFailures = 30

func newHostile(t *testing.T, s *server) *hostile {
	return &hostile{
		t: t, s: s,
		// A bound on every request: a hang is a failure, not a stuck suite.
		client:   &http.Client{Transport: s.srv.Client().Transport, Timeout: 20 * time.Second},
		spent:    map[string]int64{},
		byStatus: map[int]int{},
	}
}

func (h *hostile) fail(format string, args ...any) {
	h.t.Helper()
	h.mu.Lock()
	h.failures++
	n := h.failures
	h.mu.Unlock()
	if n <= maxFailures {
		h.t.Errorf(format, args...)
	} else if n == maxFailures+1 {
		h.t.Errorf("more failures follow; not reported")
	}
}

// account returns the account an attack spends from: that of its key, if any.
func account(a *attack) string {
	for _, v := range []string{a.header.Get("X-Api-Key"), strings.TrimPrefix(a.header.Get("Authorization"), "Bearer ")} {
		if acct := keyAccount[strings.TrimSpace(v)]; acct != "" {
			return acct
		}
	}
	return ""
}

// send sends an attack, checks the answer and returns its status (0 for none).
func (h *hostile) send(ctx context.Context, a *attack) int {
	h.t.Helper()
	var body io.Reader
	if a.body != nil {
		body = bytes.NewReader(a.body)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, a.method, h.s.srv.URL+a.target, body)
	if err != nil {
		h.fail("%s: the suite cannot build the request: %v", a.name, err)
		return 0
	}
	for k, v := range a.header {
		req.Header[k] = v
	}
	if a.session {
		req.Header.Set("Mcp-Session-Id", h.session)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		h.fail("%s: %s %.80s: no answer: %v", a.name, a.method, a.target, err)
		return 0
	}
	defer resp.Body.Close()
	var b []byte
	if a.stream && resp.StatusCode == http.StatusOK {
		cancel() // an open event stream: its headers are the answer
	} else if b, err = io.ReadAll(resp.Body); err != nil {
		h.fail("%s: reading the answer: %v", a.name, err)
		return 0
	}
	h.check(a.name, req.URL.Path, account(a), resp, b, false)
	return resp.StatusCode
}

// edge403 is the body of the edge's bare 403.
const edge403 = "<center><h1>403 Forbidden</h1></center>"

// check checks one answer: no 5xx; under /v1/ JSON, except the edge's bare 403 and
// answers without a body (204, 202), with error messages that are clean text (see
// internal/cleantext); no 4xx charged, except the API's own judgement of
// an input (X-Error-Code rejected, charged because the API ran and gave it); and
// X-Credits-Cost only for an account, added to what it spent. Bytes written on a
// connection may also get net/http's own refusal of a malformed request, which no
// handler sees: a plain-text 400 or 431, or the 501 that RFC 9112 section 6.1 asks
// for a transfer coding the server does not know.
func (h *hostile) check(name, path, acct string, resp *http.Response, body []byte, raw bool) {
	h.t.Helper()
	status, ct := resp.StatusCode, resp.Header.Get("Content-Type")
	h.mu.Lock()
	h.sent++
	h.byStatus[status]++
	h.mu.Unlock()
	if raw && resp.Close && strings.HasPrefix(ct, "text/plain") &&
		(status == http.StatusBadRequest || status == http.StatusRequestHeaderFieldsTooLarge ||
			status == http.StatusNotImplemented && string(body) == "Unsupported transfer encoding") {
		return // net/http refused the bytes before any handler
	}
	if status >= 500 {
		h.fail("%s: %s answered %d: %.300s", name, path, status, body)
		return
	}
	cost := int64(0)
	if v := resp.Header.Get(wire.HeaderCreditsCost); v != "" {
		var err error
		if cost, err = strconv.ParseInt(v, 10, 64); err != nil || cost < 0 {
			h.fail("%s: X-Credits-Cost %q", name, v)
		}
	}
	if status >= 400 && cost != 0 && resp.Header.Get("X-Error-Code") != "rejected" {
		h.fail("%s: a %d was charged %d credits: %.300s", name, status, cost, body)
	}
	if cost != 0 && acct == "" {
		h.fail("%s: a request without a key of an account was charged %d credits", name, cost)
	}
	h.mu.Lock()
	h.spent[acct] += cost
	h.mu.Unlock()
	if !strings.HasPrefix(path, "/v1/") {
		// No attack approves a consent (codeExchanges does, and checks its redirect
		// itself), so no redirect leaves the server's origin: the authorization server
		// answers a request it refuses before the consent page on its own origin (RFC
		// 9700 section 4.11).
		if loc := resp.Header.Get("Location"); status/100 == 3 && loc != "" {
			if u, err := url.Parse(loc); err != nil || u.Host != "" && u.Host != h.host() || u.User != nil {
				h.fail("%s: %s redirects to %q", name, path, loc)
			}
		}
		return
	}
	mt, _, _ := strings.Cut(ct, ";")
	switch {
	case status == http.StatusForbidden && ct == "text/html":
		if !strings.Contains(string(body), edge403) || resp.Header.Get("Access-Control-Allow-Origin") != "" {
			h.fail("%s: an HTML 403 that is not the edge's bare 403: %.300s", name, body)
		}
	case len(body) == 0 && (status == http.StatusNoContent || status == http.StatusAccepted):
	case mt == "text/event-stream" && status == http.StatusOK:
	case mt != "application/json" && mt != "application/graphql-response+json":
		h.fail("%s: %s answered %d with Content-Type %q: %.300s", name, path, status, ct, body)
	case len(body) > 0 && !json.Valid(body):
		h.fail("%s: %s answered %d with invalid JSON: %.300s", name, path, status, body)
	default:
		for _, m := range errorMessages(body) {
			if m == "" || cleantext.Message(m) != m {
				h.fail("%s: the error message %q is not clean text", name, m)
			}
			if implementation.MatchString(m) {
				h.fail("%s: the error message %q names an implementation", name, m)
			}
		}
	}
}

// errorMessages returns the error messages of a JSON answer: the error of the REST
// envelope, the messages of GraphQL's errors, and those of JSON-RPC errors (of one
// response or a batch).
func errorMessages(body []byte) []string {
	var out []string
	var one struct {
		Error  json.RawMessage
		Errors []struct{ Message string }
	}
	var batch []struct{ Error *struct{ Message string } }
	switch {
	case json.Unmarshal(body, &one) == nil:
		var s string
		var rpc struct{ Message string }
		switch {
		case len(one.Error) == 0 || string(one.Error) == "null":
		case json.Unmarshal(one.Error, &s) == nil:
			out = append(out, s)
		case json.Unmarshal(one.Error, &rpc) == nil:
			out = append(out, rpc.Message)
		}
		for _, e := range one.Errors {
			out = append(out, e.Message)
		}
	case json.Unmarshal(body, &batch) == nil:
		for _, r := range batch {
			if r.Error != nil {
				out = append(out, r.Error.Message)
			}
		}
	}
	return out
}

// sendAll sends attacks on workers goroutines.
func (h *hostile) sendAll(ctx context.Context, attacks []*attack, workers int) {
	next := make(chan *attack)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for a := range next {
				h.send(ctx, a)
			}
		})
	}
	for _, a := range attacks {
		next <- a
	}
	close(next)
	wg.Wait()
}

// A rawAttack is bytes written on a connection of their own: what net/http's client
// will not send (conflicting framing, NUL bytes in headers, huge chunk sizes).
type rawAttack struct {
	name    string
	account string
	bytes   string
	// answers is the most answers the bytes may get, as many as the requests they
	// hold: more would mean a request hidden in another's body was served.
	answers int
	// waits: the bytes announce more than they hold, and the server rightly waits
	// for the rest (until its ReadTimeout, in a real host), so the suite does not.
	waits bool
}

// sendRaw writes a raw attack, reads every answer until the server closes the
// connection or falls silent, and checks each.
func (h *hostile) sendRaw(a rawAttack) {
	h.t.Helper()
	conn, err := net.Dial("tcp", h.s.srv.Listener.Addr().String())
	if err != nil {
		h.fail("%s: %v", a.name, err)
		return
	}
	defer conn.Close()
	// The connection stays open for writing: a client that shuts down its side is gone
	// to net/http, which cancels the requests in flight.
	deadline := 10 * time.Second
	if a.waits {
		deadline = 300 * time.Millisecond
	}
	conn.SetDeadline(time.Now().Add(deadline))
	if _, err := io.WriteString(conn, a.bytes); err != nil {
		h.fail("%s: writing: %v", a.name, err)
		return
	}
	r := bufio.NewReader(conn)
	answers := 0
	for answers < a.answers {
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !isTimeout(err) && !errors.Is(err, net.ErrClosed) && !isReset(err) {
				h.fail("%s: reading an answer: %v", a.name, err)
			}
			break
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		answers++
		h.check(a.name, "/v1/", a.account, resp, body, true)
	}
	// A request hidden in another's body and served would be one answer too many.
	conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if resp, err := http.ReadResponse(r, nil); err == nil {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		h.check(a.name, "/v1/", a.account, resp, body, true)
		h.fail("%s: more answers than the %d requests the bytes hold", a.name, a.answers)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func isReset(err error) bool { return strings.Contains(err.Error(), "connection reset") }

// host is the server's host and port.
func (h *hostile) host() string { return strings.TrimPrefix(h.s.srv.URL, "http://") }

// registerClient registers an OAuth client whose redirect URIs an attacker chose, and
// returns the attacks that send a person to its authorization with parameters that
// fail validation: each must be answered on the server's origin, never redirected to
// the client (see check).
func (h *hostile) registerClient() []*attack {
	h.t.Helper()
	r := h.s.call(http.MethodPost, "/oauth/register", `{"redirect_uris":["https://evil.example/phish","http://127.0.0.1:9999/cb"],"client_name":"Evil"}`)
	var reg struct {
		ClientID string `json:"client_id"`
	}
	if r.status != http.StatusCreated || json.Unmarshal(r.body, &reg) != nil || reg.ClientID == "" {
		h.t.Fatalf("registering a client: %d %s", r.status, r.body)
	}
	pkce := "&response_type=code&code_challenge_method=S256&code_challenge=" + strings.Repeat("A", 43)
	var attacks []*attack
	for _, q := range []string{
		"",
		"&redirect_uri=" + url.QueryEscape("https://evil.example/phish"),
		"&redirect_uri=" + url.QueryEscape("https://evil.example/phish") + "&response_type=token",
		"&redirect_uri=" + url.QueryEscape("https://evil.example/phish") + "&response_type=code",
		"&redirect_uri=" + url.QueryEscape("https://evil.example/phish#frag") + pkce,
		"&redirect_uri=" + url.QueryEscape("https://evil.example/other") + pkce,
		"&redirect_uri=" + url.QueryEscape("http://127.0.0.1:9999/cb#frag") + pkce,
		"&redirect_uri=" + url.QueryEscape("http://evil.example@127.0.0.1:9999/cb") + pkce,
		"&redirect_uri=" + url.QueryEscape("https://evil.example/phish") + pkce + "&resource=" + url.QueryEscape("https://evil.example/"),
	} {
		attacks = append(attacks, oauthCall("an invalid authorization request", "GET", "/oauth/authorize?client_id="+url.QueryEscape(reg.ClientID)+q, "", ""))
	}
	return attacks
}

// hiddenField is a hidden field of the consent form.
var hiddenField = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)

// codeExchanges runs the authorization code flow as a person and an MCP client do, with
// a real consent, and attacks the code on its way. An exchange that gets the request
// wrong (no verifier, a repeated one, another resource) is refused without using the
// code up, so that the real client's exchange still succeeds; its token then opens an
// MCP session, and the code presented again is a replay, which revokes that token. An
// exchange by someone who holds the code but is not its client (a wrong verifier,
// client or redirect URI) is refused and burns the code, so that the real client's
// exchange that follows is refused too (issue 28, item 12). Every answer but the
// consent's redirect is checked as an attack's is.
func (h *hostile) codeExchanges(ctx context.Context) {
	h.t.Helper()
	const redirectURI = "http://127.0.0.1:9999/cb"
	r := h.s.call(http.MethodPost, "/oauth/register", `{"redirect_uris":["`+redirectURI+`"],"client_name":"Native"}`)
	var reg struct {
		ClientID string `json:"client_id"`
	}
	if r.status != http.StatusCreated || json.Unmarshal(r.body, &reg) != nil {
		h.t.Fatalf("registering a client: %d %s", r.status, r.body)
	}
	verifier := strings.Repeat("v", 43) + "-real._~"
	sum := sha256.Sum256([]byte(verifier))
	resource := h.s.srv.URL + "/v1/mcp"
	query := url.Values{
		"response_type": {"code"}, "client_id": {reg.ClientID}, "redirect_uri": {redirectURI}, "state": {"s-1"},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"},
		"resource": {resource},
	}

	// approve approves the request in the person's browser, which keeps the consent
	// cookie and does not follow the redirect to the client, and returns the code.
	approve := func() string {
		jar, err := cookiejar.New(nil)
		if err != nil {
			h.t.Fatal(err)
		}
		browser := &http.Client{Transport: h.client.Transport, Jar: jar, Timeout: h.client.Timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := browser.Get(h.s.srv.URL + "/oauth/authorize?" + query.Encode())
		if err != nil {
			h.t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		form := url.Values{}
		for _, m := range hiddenField.FindAllStringSubmatch(string(page), -1) {
			form.Set(m[1], html.UnescapeString(m[2]))
		}
		if resp.StatusCode != http.StatusOK || form.Get("consent") == "" {
			h.t.Fatalf("the consent page: %d %s", resp.StatusCode, page)
		}
		form.Set("api_key", keyBeta)
		form.Set("action", "approve")
		if resp, err = browser.PostForm(h.s.srv.URL+"/oauth/authorize", form); err != nil {
			h.t.Fatal(err)
		}
		resp.Body.Close()
		loc, err := url.Parse(resp.Header.Get("Location"))
		if resp.StatusCode != http.StatusSeeOther || err != nil || !strings.HasPrefix(loc.String(), redirectURI+"?") || loc.Query().Get("state") != "s-1" {
			h.t.Fatalf("the approval: %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
		}
		return loc.Query().Get("code")
	}
	exchange := func(name, code string, change func(url.Values)) *attack {
		v := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "client_id": {reg.ClientID},
			"redirect_uri": {redirectURI}, "code_verifier": {verifier}, "resource": {resource}}
		change(v)
		return oauthCall(name, "POST", "/oauth/token", "application/x-www-form-urlencoded", v.Encode())
	}

	// Exchanges by someone who is not the client: each burns its code.
	for name, change := range map[string]func(url.Values){
		"a code with another verifier":          func(v url.Values) { v.Set("code_verifier", strings.Repeat("w", 43)) },
		"a code with the verifier cut short":    func(v url.Values) { v.Set("code_verifier", verifier[:43]) },
		"a code with the challenge as verifier": func(v url.Values) { v.Set("code_verifier", query.Get("code_challenge")) },
		"a code for another client":             func(v url.Values) { v.Set("client_id", "tgcl_"+strings.Repeat("A", 43)) },
		"a code for another redirect URI":       func(v url.Values) { v.Set("redirect_uri", "http://127.0.0.1:9998/cb") },
	} {
		code := approve()
		if status := h.send(ctx, exchange(name, code, change)); status != http.StatusBadRequest {
			h.fail("%s: %d, want 400", name, status)
		}
		if status := h.send(ctx, exchange("the real exchange after "+name, code, func(url.Values) {})); status != http.StatusBadRequest {
			h.fail("the real exchange after %s: %d, want 400: the code is burnt", name, status)
		}
	}

	// Exchanges that get the request wrong leave the code to the real client.
	code := approve()
	for _, a := range []*attack{
		exchange("a code without a verifier", code, func(v url.Values) { v.Del("code_verifier") }),
		exchange("a code with the verifier twice", code, func(v url.Values) { v["code_verifier"] = []string{strings.Repeat("w", 43), verifier} }),
		exchange("a code for another resource", code, func(v url.Values) { v.Set("resource", h.s.srv.URL+"/v1/other") }),
	} {
		if status := h.send(ctx, a); status != http.StatusBadRequest {
			h.fail("%s: %d, want 400", a.name, status)
		}
	}
	real := exchange("the real exchange", code, func(url.Values) {})
	r = h.s.call(http.MethodPost, real.target, string(real.body), "Content-Type", "application/x-www-form-urlencoded")
	var tokens struct {
		AccessToken string `json:"access_token"`
	}
	if r.status != http.StatusOK || json.Unmarshal(r.body, &tokens) != nil || tokens.AccessToken == "" {
		h.fail("the real client's exchange after the failed ones: %d %s", r.status, r.body)
		return
	}
	initialize := func() *attack {
		a := mcpCall("initialize with the access token", mcpInit, "Authorization", "Bearer "+tokens.AccessToken)
		a.header.Del("X-Api-Key")
		a.session = false
		return a
	}
	if status := h.send(ctx, initialize()); status != http.StatusOK {
		h.fail("an MCP session with the access token: %d", status)
	}
	// The code again, with everything right: a replay, which revokes the token.
	if status := h.send(ctx, exchange("the code replayed", code, func(url.Values) {})); status != http.StatusBadRequest {
		h.fail("the code replayed: %d, want 400", status)
	}
	if status := h.send(ctx, initialize()); status != http.StatusUnauthorized {
		h.fail("the access token of a replayed code: %d, want 401", status)
	}
}

// balance reads an account's remaining credits through the admin API.
func (h *hostile) balance(acct string) int64 {
	h.t.Helper()
	r := h.s.call(http.MethodGet, "/admin/v1/accounts/"+acct, "", "Authorization", "Bearer "+testAdminToken)
	var env struct {
		Data struct {
			Balance struct {
				Remaining int64 `json:"remaining"`
			} `json:"balance"`
		} `json:"data"`
	}
	if r.status != http.StatusOK || json.Unmarshal(r.body, &env) != nil {
		h.t.Fatalf("reading the balance of %s: %d %s", acct, r.status, r.body)
	}
	return env.Data.Balance.Remaining
}

// startSession starts the MCP session of beta that attacks with session use.
func (h *hostile) startSession() {
	h.t.Helper()
	hdr := []string{"X-Api-Key", keyBeta, "Accept", "application/json, text/event-stream"}
	r := h.s.call(http.MethodPost, "/v1/mcp", mcpInit, hdr...)
	h.session = r.header.Get("Mcp-Session-Id")
	if r.status != http.StatusOK || h.session == "" {
		h.t.Fatalf("initialize: %d %s", r.status, r.body)
	}
	if r := h.s.call(http.MethodPost, "/v1/mcp", `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		append(hdr, "Mcp-Session-Id", h.session)...); r.status != http.StatusAccepted {
		h.t.Fatalf("initialized: %d %s", r.status, r.body)
	}
}

// TestHostileInput replays a fixed corpus of hostile requests, then some thousands
// of seeded random ones, against every front door of the example server, and checks
// what no client may get: the server stays up and answers; no 5xx; every answer under
// /v1/ is JSON except the edge's bare 403; no 4xx is charged (but the API's judgement
// of an input, which is charged since the API ran); each account's balance is its start
// minus the sum of the X-Credits-Cost it was answered; and nothing is logged at Error,
// since none of it is the service's failure.
func TestHostileInput(t *testing.T) {
	begin := time.Now()
	s := start(t, "-fixtures", "testdata/hostile.json", "-admin-token", testAdminToken)
	h := newHostile(t, s)
	h.startSession()
	startBalance := map[string]int64{}
	for _, acct := range accounted {
		startBalance[acct] = h.balance(acct)
	}

	for _, a := range append(h.registerClient(), corpus()...) {
		h.send(t.Context(), a)
	}
	h.codeExchanges(t.Context())
	for _, a := range rawCorpus() {
		h.sendRaw(a)
	}
	const seed, random = 13, 5000
	rng := rand.New(rand.NewPCG(seed, seed))
	attacks := make([]*attack, random)
	for i := range attacks {
		attacks[i] = randomAttack(rng, i)
	}
	h.sendAll(t.Context(), attacks, 6)

	// The server is up, and serves.
	if status := h.send(t.Context(), call("the server is up", "GET", "/v1/hash?text=hello", keyBeta, "")); status != http.StatusOK {
		t.Errorf("after the attacks, a good call: %d", status)
	}
	for _, acct := range accounted {
		if got, want := h.balance(acct), startBalance[acct]-h.spent[acct]; got != want {
			t.Errorf("%s: balance %d; it started at %d and was answered X-Credits-Cost summing to %d, so want %d",
				acct, got, startBalance[acct], h.spent[acct], want)
		}
	}
	for _, line := range strings.Split(s.logs.String(), "\n") {
		if strings.Contains(line, "level=ERROR") {
			t.Errorf("logged at Error: %.300s", line)
		}
	}
	t.Logf("%d answers in %v: %s; credits spent: %v", h.sent, time.Since(begin).Round(time.Millisecond), statusSummary(h.byStatus), h.spent)
}

func statusSummary(byStatus map[int]int) string {
	var parts []string
	for status := 100; status < 600; status++ {
		if n := byStatus[status]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d×%d", n, status))
		}
	}
	return strings.Join(parts, " ")
}
