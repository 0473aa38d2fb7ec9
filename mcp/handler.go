package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/internal/httpx"
)

// Options configures the MCP handler. The zero value is the default; every field is
// optional.
type Options struct {
	// VerifyToken turns on OAuth: it verifies an access token (an Authorization: Bearer
	// value that is not a UUID) and returns the id of the key the token was granted
	// for. An error refuses the token with 401 and error="invalid_token", except a
	// *tollgate.Error with CodeUnavailable, which answers 503: a token store that
	// cannot be read should not send clients through authorization again. The handler
	// then authenticates the key by its id ([tollgate.Caller.KeyID]), so
	// an OAuth connection survives a rotation of the key and ends with its revocation.
	// With a nil VerifyToken, OAuth is off and a bearer value that is not a UUID gets
	// the edge's HTML 403, as over REST.
	VerifyToken func(ctx context.Context, token string) (keyID string, err error)
	// Challenge is the WWW-Authenticate value of 401 answers. With OAuth on
	// (VerifyToken set) it is required, and points OAuth clients at the endpoint's
	// RFC 9728 protected resource metadata, which the host must serve at that URL
	// (auth/oauth's Server.Challenge builds the value and its
	// ProtectedResourceMetadata serves the document), for example
	//
	//	Bearer resource_metadata="https://api.example.com/.well-known/oauth-protected-resource/v1/mcp", scope="mcp"
	//
	// With OAuth off it defaults to Bearer realm="<Name>", which points nowhere: the
	// handler never sends clients to a metadata URL the host may not serve. A refused
	// token or key adds error="invalid_token" to it.
	Challenge string
	// RecheckInterval is how often an open stream (a GET event stream, or a POST whose
	// answer is still pending) authenticates its credential again; a refused
	// credential closes the stream. It catches revocations made on other instances and
	// expired tokens; revocations made through this handler's Service close streams at
	// once. The default is [DefaultRecheckInterval].
	RecheckInterval time.Duration
	// SessionTimeout closes a session that received no request for this long; a
	// client that comes back gets 404 and starts a new session, as the protocol
	// says. The default is [DefaultSessionTimeout].
	SessionTimeout time.Duration
	// AllowedOrigins lists the origins allowed by CORS; nil allows every origin.
	AllowedOrigins []string
	// TrustedProxies lists reverse proxies whose X-Forwarded-For is believed, for IP
	// allow-lists, and whose requests pass the DNS-rebinding check (see the package
	// documentation) with the public Host they forward.
	TrustedProxies []netip.Prefix
	// MaxBodyBytes caps a request body. The default is 1 MiB; file APIs take files by
	// URL, so no body holds a file.
	MaxBodyBytes int64
	// Name and Version identify the server to clients (serverInfo). The defaults are
	// "tollgate" and "1".
	Name, Version string
	// Instructions, if set, is sent to clients at initialization, for their models.
	Instructions string
	// Logger receives failures inside the handler and the MCP SDK's warnings and
	// errors, and at Info the clients' mistakes (see the package documentation). The
	// default is slog.Default(). Keys and tokens are never logged.
	Logger *slog.Logger
}

// The defaults of [Options].
const (
	DefaultRecheckInterval = 5 * time.Second
	DefaultSessionTimeout  = 30 * time.Minute
	DefaultMaxBodyBytes    = 1 << 20
)

// Handler serves the MCP tool connection. Create it with [NewHandler]; call
// [Handler.Close] when shutting down, since open event streams never end on their own.
type Handler struct {
	svc       *tollgate.Service
	server    *sdk.Server
	inner     http.Handler // the SDK's streamable handler behind the token plumbing
	cors      httpx.CORS
	trusted   []netip.Prefix
	maxBody   int64
	verify    func(context.Context, string) (string, error)
	challenge string
	recheck   time.Duration
	log       *slog.Logger

	toolsMu sync.Mutex              // serializes catalog syncs
	synced  atomic.Uint64           // catalog version + 1 of the registered tools; 0: none
	tools   map[string]*catalog.API // the registered tools, by id (guarded by toolsMu)

	streams streams

	closed  atomic.Bool
	cancels []func()
}

// NewHandler returns the MCP tool connection of svc: every API of svc's catalog is a
// tool, served over the Streamable HTTP transport wherever the host mounts the handler
// (conventionally /v1/mcp). opts may be nil.
func NewHandler(svc *tollgate.Service, opts *Options) (*Handler, error) {
	if svc == nil {
		return nil, errors.New("mcp: NewHandler needs a Service")
	}
	if opts == nil {
		opts = &Options{}
	}
	if opts.VerifyToken != nil && opts.Challenge == "" {
		return nil, errors.New("mcp: Options.VerifyToken needs Options.Challenge, the WWW-Authenticate value that points OAuth clients at the resource metadata the host serves (auth/oauth: Server.Challenge and Server.ProtectedResourceMetadata)")
	}
	h := &Handler{
		svc:       svc,
		cors:      httpx.NewCORS(opts.AllowedOrigins, "GET, POST, DELETE, OPTIONS"),
		trusted:   opts.TrustedProxies,
		maxBody:   opts.MaxBodyBytes,
		verify:    opts.VerifyToken,
		challenge: opts.Challenge,
		recheck:   opts.RecheckInterval,
		log:       opts.Logger,
		tools:     map[string]*catalog.API{},
	}
	if h.maxBody <= 0 {
		h.maxBody = DefaultMaxBodyBytes
	}
	if h.recheck <= 0 {
		h.recheck = DefaultRecheckInterval
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	timeout := opts.SessionTimeout
	if timeout <= 0 {
		timeout = DefaultSessionTimeout
	}
	name, version := opts.Name, opts.Version
	if name == "" {
		name = "tollgate"
	}
	if version == "" {
		version = "1"
	}
	if h.challenge == "" {
		h.challenge = `Bearer realm="` + strings.NewReplacer(`"`, "", `\`, "").Replace(name) + `"`
	}
	sdkLog := slog.New(sdkLogHandler{h.log.Handler()})
	h.server = sdk.NewServer(&sdk.Implementation{Name: name, Version: version}, &sdk.ServerOptions{
		Instructions: opts.Instructions,
		Logger:       sdkLog,
		// Advertise tools (with list changes) even while the catalog is empty, and
		// nothing else: no logging, prompts or resources.
		Capabilities: &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{ListChanged: true}},
		// One page holds the whole catalog, so that filtering a list by the key's
		// scope never leaves a short or empty page.
		PageSize: 1 << 16,
		// Lists depend on the key that asks.
		SetCacheable: func(_ context.Context, _ sdk.Request, c *sdk.Cacheable) { c.CacheScope = "private" },
	})
	h.server.AddReceivingMiddleware(h.middleware)
	stream := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return h.server }, &sdk.StreamableHTTPOptions{
		JSONResponse:   true,
		SessionTimeout: timeout,
		Logger:         sdkLog,
		// The handler checks the Host itself, knowing the trusted proxies.
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        h.maxBody,
	})
	// The SDK passes per-request identity to tool handlers only as the TokenInfo its
	// bearer middleware stores; the verifier hands over what ServeHTTP authenticated.
	h.inner = sdkauth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*sdkauth.TokenInfo, error) {
		c, ok := ctx.Value(callerKey{}).(*caller)
		if !ok {
			return nil, sdkauth.ErrInvalidToken
		}
		return &sdkauth.TokenInfo{UserID: c.user, Extra: map[string]any{callerExtra: c}}, nil
	}, &sdkauth.RequireBearerTokenOptions{AllowMissingExpiration: true})(stream)

	h.sync()
	h.cancels = append(h.cancels,
		svc.Catalog().Subscribe(h.sync),
		svc.OnKeyChange(h.keyChanged),
	)
	return h, nil
}

// Close ends every open stream and session and stops following the catalog and the
// key changes. Requests that arrive afterwards get 503. Hosts call it when shutting
// down (http.Server.RegisterOnShutdown(h.Close) does), because an open event stream
// never becomes idle and would hold http.Server.Shutdown until its deadline.
func (h *Handler) Close() {
	if h.closed.Swap(true) {
		return
	}
	for _, c := range h.cancels {
		c()
	}
	h.streams.closeAll()
	var wg sync.WaitGroup
	for ss := range h.server.Sessions() {
		wg.Go(func() { ss.Close() })
	}
	wg.Wait()
}

// callerKey is the context key of the *caller of a request.
type callerKey struct{}

// callerExtra is the key of the *caller in the SDK's TokenInfo.Extra.
const callerExtra = "tollgate.caller"

// A caller is an authenticated request: the principal, the credential (to check it
// again while a stream is open) and the response headers its tool calls write to.
type caller struct {
	p    tollgate.Principal
	as   tollgate.Caller // how its tool calls present it to the service
	cred credential
	user string // the SDK's session owner: the key id, or the account of a session token

	mu      sync.Mutex
	hdr     http.Header // the response's headers; nil once the response is under way
	done    bool
	charged int64            // what the request's tool calls were charged so far
	balance *billing.Balance // the lowest balance they left
}

// receipt writes the credit and rate headers of a tool call to the HTTP response, if
// it is still open, and Retry-After when the call was rate limited. A request may
// carry several tool calls (a batch of protocol 2025-03-26): X-Credits-Cost is then
// the sum of what they were charged, and the balance headers the lowest balance they
// left, so that the headers account for every credit the request spent.
func (c *caller) receipt(rc *tollgate.Receipt, retryAfter time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return
	}
	if rc != nil {
		sum := *rc
		c.charged += rc.Charged
		sum.Charged = c.charged
		if rc.Balance != (billing.Balance{}) && (c.balance == nil || rc.Balance.Remaining < c.balance.Remaining) {
			b := rc.Balance
			c.balance = &b
		}
		if c.balance != nil {
			sum.Balance = *c.balance
		}
		httpx.SetReceiptHeaders(c.hdr, &sum)
	}
	if retryAfter > 0 {
		httpx.SetRetryAfter(c.hdr, retryAfter)
	}
}

func (c *caller) finish() {
	c.mu.Lock()
	c.done = true
	c.mu.Unlock()
}

// callerFrom returns the caller of an MCP request.
func callerFrom(req sdk.Request) *caller {
	extra := req.GetExtra()
	if extra == nil || extra.TokenInfo == nil {
		return nil
	}
	c, _ := extra.TokenInfo.Extra[callerExtra].(*caller)
	return c
}

// ServeHTTP serves one HTTP request of the Streamable HTTP transport: CORS preflight,
// the DNS-rebinding check, authentication, the checks that give protocol misuse a
// proper JSON-RPC error, and then the SDK.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodOptions {
		h.preflight(w, r)
		return
	}
	if !h.hostAllowed(r) {
		writeRPCError(w, http.StatusForbidden, nil, CodeForbidden, "forbidden_host",
			"the Host header "+quote(r.Host)+" does not name this server (DNS rebinding protection); connect by the server's own name")
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodPost, http.MethodDelete:
	default:
		w.Header().Set("Allow", "GET, POST, DELETE, OPTIONS")
		h.applyCORS(w.Header(), r)
		writeRPCError(w, http.StatusMethodNotAllowed, nil, codeInvalidRequest, "method_not_allowed", msgMethods)
		return
	}
	if h.closed.Load() {
		h.applyCORS(w.Header(), r)
		writeRPCError(w, http.StatusServiceUnavailable, nil, codeInternal, "unavailable", "the MCP endpoint is shutting down; reconnect shortly")
		return
	}
	var msg message
	if r.Method == http.MethodPost {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				writeRPCError(w, http.StatusRequestEntityTooLarge, nil, codeInvalidRequest, "body_too_large",
					"the request body is larger than the "+itoa(tooBig.Limit)+" bytes allowed")
				return
			}
			writeRPCError(w, http.StatusBadRequest, nil, codeInvalidRequest, "invalid_input", "the request body cannot be read")
			return
		}
		msg = peek(body)
		r.Body = io.NopCloser(bytes.NewReader(body))
	}

	// A tool call checks a key that came from the service's key cache in its admission;
	// every other request checks it now.
	toolCall := msg.method == "tools/call"
	c, err := h.authenticate(r, !toolCall)
	if err != nil {
		h.refuse(w, r, msg.id, err)
		return
	}
	if r.Method == http.MethodPost {
		if status, code, text := h.misuse(r, msg); status != 0 {
			if toolCall && c.p.Cached {
				// Refused before admission: the key must be checked first.
				if _, err := h.svc.Check(r.Context(), c.as); err != nil {
					h.refuse(w, r, msg.id, err)
					return
				}
			}
			h.applyCORS(w.Header(), r)
			writeRPCError(w, status, msg.id, code, rpcCodeName(code), text)
			return
		}
	}
	h.sync()

	hdr := w.Header()
	h.applyCORS(hdr, r)
	c.hdr = hdr
	defer c.finish() // also on a panic: a tool call must not write headers after the response

	ctx := context.WithValue(r.Context(), callerKey{}, c)
	var st *openStream
	if sid := r.Header.Get(sessionHeader); sid != "" && r.Method != http.MethodDelete {
		// An open stream: registered so that a revocation ends it, and checked again
		// every RecheckInterval while it lasts.
		var end func()
		ctx, st, end = h.streams.open(ctx, h, c)
		defer end()
		if r.Method == http.MethodGet {
			// An event stream lasts as long as the session; the server's read and
			// write timeouts, meant for requests and answers, would cut it.
			rc := http.NewResponseController(w)
			rc.SetReadDeadline(time.Time{})
			rc.SetWriteDeadline(time.Time{})
		}
	}
	r = r.WithContext(ctx)
	if c.cred.kind != credToken && c.cred.kind != credBearerKey {
		// The SDK's bearer middleware wants an Authorization header; the credential
		// was checked above, in whatever form it came.
		r.Header = r.Header.Clone()
		r.Header.Set("Authorization", "Bearer checked")
	}
	sw := &sdkWriter{ResponseWriter: w}
	h.inner.ServeHTTP(sw, r)
	c.finish()
	wrote, status, text := sw.result()
	if !wrote && st != nil && r.Method == http.MethodPost {
		// The stream was ended before the answer: say why.
		if err := st.refused(); err != nil {
			h.refuse(w, r, msg.id, err)
			return
		}
	}
	if status != 0 {
		h.translate(w, r, msg.id, status, text)
	}
}

// sessionHeader is the header of the Streamable HTTP transport that names a session.
const sessionHeader = "Mcp-Session-Id"

// A message is what ServeHTTP needs to know of a POSTed JSON-RPC message.
type message struct {
	id        json.RawMessage // nil for a notification, a batch, a body that is not JSON or an id that is not valid
	badID     bool            // the id is not one the SDK answers as it was sent (see validID)
	method    string
	version   string // the jsonrpc member
	hasParams bool
	badParams bool      // params that are not a JSON object
	single    bool      // the body is one JSON object
	valid     bool      // the body is JSON
	batch     []message // the messages of a batch (a JSON array), which is neither single nor has an id
}

// peek reads the envelope of a POSTed message, or of each message of a batch, without
// their params.
func peek(body []byte) message {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var raw []json.RawMessage
		if err := json.Unmarshal(trimmed, &raw); err != nil {
			return message{}
		}
		m := message{valid: true, batch: make([]message, len(raw))}
		for i, r := range raw {
			m.batch[i] = peekOne(r)
		}
		return m
	}
	return peekOne(trimmed)
}

// peekOne reads the envelope of one message.
func peekOne(b []byte) message {
	var m struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
	}
	if len(b) == 0 || b[0] != '{' {
		return message{valid: json.Valid(b)} // not an object
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return message{valid: json.Valid(b)}
	}
	if string(m.ID) == "null" {
		m.ID = nil
	}
	badID := m.ID != nil && !validID(m.ID)
	if badID {
		m.ID = nil // answered with a null id, as JSON-RPC asks of an id that cannot be read
	}
	hasParams := len(m.Params) > 0 && string(m.Params) != "null"
	return message{id: m.ID, badID: badID, method: m.Method, version: m.JSONRPC,
		hasParams: hasParams, badParams: hasParams && m.Params[0] != '{', single: true, valid: true}
}

// maxID is the largest magnitude of an integer request id: a float64 holds every
// integer up to it exactly.
const maxID = 1<<53 - 1

// validID reports whether id, a JSON value, is an id the SDK answers as it was sent: a
// string, or an integer written without a fraction or an exponent, of at most maxID in
// magnitude. The SDK reads a number as a float64 and answers it as an int64, so it
// would answer 1.5 as 1 and 2^64 as -2^63, after serving the request.
func validID(id json.RawMessage) bool {
	if id[0] == '"' {
		return true
	}
	n, err := strconv.ParseInt(string(id), 10, 64)
	return err == nil && -maxID <= n && n <= maxID
}

// A methodRule says how a method of the server is sent.
type methodRule uint8

const (
	request            methodRule = iota // a call with an id and params
	requestNoParam                       // a call whose params may be left out
	notification                         // no id
	notificationParams                   // no id, and params
)

// methods are the methods the server answers: those of the SDK's server (v1.8.0). The
// handler answers a message outside them itself, because the SDK answers it with a
// plain HTTP error rather than a JSON-RPC one.
var methods = map[string]methodRule{
	"initialize":                       request,
	"ping":                             requestNoParam,
	"tools/list":                       requestNoParam,
	"tools/call":                       request,
	"prompts/list":                     requestNoParam,
	"prompts/get":                      request,
	"resources/list":                   requestNoParam,
	"resources/templates/list":         requestNoParam,
	"resources/read":                   request,
	"resources/subscribe":              request,
	"resources/unsubscribe":            request,
	"logging/setLevel":                 request,
	"completion/complete":              request,
	"server/discover":                  requestNoParam,
	"subscriptions/listen":             request,
	"notifications/initialized":        notification,
	"notifications/cancelled":          notification,
	"notifications/roots/list_changed": notification,
	"notifications/progress":           notificationParams,
}

// misuse finds the misuses that the SDK would answer with a plain HTTP error, a
// JSON-RPC error without a code, or an error it logs as its own, and returns the HTTP
// status, JSON-RPC code and message to answer them with; status 0 lets the message
// through.
func (h *Handler) misuse(r *http.Request, m message) (int, int64, string) {
	switch {
	case !m.valid:
		return http.StatusBadRequest, codeParseError, "the body is not JSON; send one JSON-RPC message"
	case m.batch != nil:
		return h.batchMisuse(r, m.batch)
	case !m.single:
		return http.StatusBadRequest, codeInvalidRequest, "the body is not a JSON-RPC message: send one JSON object"
	}
	return h.messageMisuse(r, m)
}

// batchMisuse checks a batch (protocol 2025-03-26 and earlier) message by message, as
// messageMisuse checks a single one. A batch has no id to answer a misuse with, so
// every misuse refuses the whole batch, with 400. initialize, which the protocol keeps
// out of batches, is refused too: in a batch the SDK would start a session with it and
// run the rest before the session is initialized.
func (h *Handler) batchMisuse(r *http.Request, batch []message) (int, int64, string) {
	if r.Header.Get("Mcp-Protocol-Version") >= "2025-06-18" {
		return 0, 0, "" // the SDK refuses batches in these versions
	}
	if len(batch) == 0 {
		return http.StatusBadRequest, codeInvalidRequest, "the batch is empty; send one JSON-RPC message, or a batch of them"
	}
	for i, m := range batch {
		status, code, text := 0, int64(0), ""
		switch {
		case m.method == "initialize":
			status, code, text = http.StatusBadRequest, codeInvalidRequest, "initialize cannot be part of a batch: send it alone"
		case !m.single:
			status, code, text = http.StatusBadRequest, codeInvalidRequest, "it is not a JSON-RPC message, an object"
		default:
			status, code, text = h.messageMisuse(r, m)
		}
		if status != 0 {
			return http.StatusBadRequest, code, "message " + strconv.Itoa(i+1) + " of the batch: " + text
		}
	}
	return 0, 0, ""
}

// messageMisuse checks one JSON-RPC message: its version, its method, its id and
// params, and the session it needs.
func (h *Handler) messageMisuse(r *http.Request, m message) (int, int64, string) {
	if m.version != "2.0" {
		return http.StatusBadRequest, codeInvalidRequest, `the body is not a JSON-RPC 2.0 message: it needs "jsonrpc": "2.0"`
	}
	if m.badID {
		return http.StatusBadRequest, codeInvalidRequest,
			"the id of a request must be a string or an integer of at most 2^53-1 in magnitude, which the server can answer as it was sent"
	}
	if m.method == "" {
		return 0, 0, "" // a response to a request of the server: the SDK takes it
	}
	rule, known := methods[m.method]
	isCall := m.id != nil
	isNotification := rule == notification || rule == notificationParams
	// A call's refusal is an answer to it (200); a notification gets none, so the HTTP
	// request is refused (400).
	paramsStatus := http.StatusOK
	if !isCall {
		paramsStatus = http.StatusBadRequest
	}
	switch {
	case !known && isCall:
		return http.StatusOK, codeMethodNotFound, "the server has no method " + quote(m.method) + "; its tools are called with tools/call"
	case !known:
		return http.StatusBadRequest, codeMethodNotFound, "the server has no notification " + quote(m.method)
	case isNotification && isCall:
		return http.StatusBadRequest, codeInvalidRequest, quote(m.method) + " is a notification: send it without an id"
	case !isNotification && !isCall:
		return http.StatusBadRequest, codeInvalidRequest, quote(m.method) + " is a request: send it with an id"
	case (rule == request || rule == notificationParams) && !m.hasParams:
		return paramsStatus, codeInvalidParams, quote(m.method) + " needs params"
	case m.badParams:
		return paramsStatus, codeInvalidParams, "the params of " + quote(m.method) + " must be a JSON object"
	}
	sid := r.Header.Get(sessionHeader)
	// A request of the sessionless protocol (2026-07-28) is answered by the SDK, which
	// tells the client the versions this stateful server speaks; everything else
	// needs a session, which only initialize starts.
	newProtocol := isCall && (r.Header.Get("Mcp-Protocol-Version") >= "2026-07-28" || m.method == "server/discover")
	switch {
	case sid == "" && m.method != "initialize" && !newProtocol:
		return http.StatusBadRequest, codeInvalidRequest,
			"no session: start one with an initialize request, then send its Mcp-Session-Id header with every request"
	case sid != "" && m.method == "initialize":
		return http.StatusBadRequest, codeInvalidRequest,
			"this session is already initialized; to start another, send initialize without the Mcp-Session-Id header"
	}
	return 0, 0, ""
}

// preflight answers a CORS preflight request, which needs no credential.
func (h *Handler) preflight(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	if h.applyCORS(hdr, r) {
		hdr.Set("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS")
		hdr.Set("Access-Control-Allow-Headers", "X-Api-Key, Authorization, X-Jwt, Content-Type, Accept, Mcp-Session-Id, Mcp-Protocol-Version, Last-Event-Id")
		hdr.Set("Access-Control-Max-Age", "600")
	}
	w.WriteHeader(http.StatusNoContent)
}

// applyCORS writes the CORS headers of a response, exposing the transport's headers and
// the challenge besides the credit, rate and error headers of the other front doors.
func (h *Handler) applyCORS(hdr http.Header, r *http.Request) bool {
	if !h.cors.Apply(hdr, r) {
		return false
	}
	hdr["Access-Control-Expose-Headers"] = exposeHeaders
	return true
}

var exposeHeaders = []string{strings.Join(append([]string{
	sessionHeader, "Mcp-Protocol-Version", "WWW-Authenticate", httpx.HeaderErrorCode,
}, httpx.CreditHeaderNames...), ", ")}

// Interface guard.
var _ http.Handler = (*Handler)(nil)
