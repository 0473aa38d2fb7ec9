package mcp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/brand"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/internal/reqlog"
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
	// (package oauth's Server.Challenge builds the value and its
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
	// Edge holds the HTTP settings every door shares: the origins CORS allows, the
	// IETF rate headers, and the trusted proxies, whose X-Forwarded-For is believed
	// for IP allow-lists and whose requests pass the DNS-rebinding check (see the
	// package documentation) with the public Host they forward. The default is
	// [edge.Default].
	Edge *edge.Edge
	// MaxBodyBytes caps a request body. The default is 1 MiB; file APIs take files by
	// URL, so no body holds a file.
	MaxBodyBytes int64
	// Brand is the operator's brand: its command is the default Name, and its Name,
	// when the brand is set, the server's title (serverInfo.title). The zero value is
	// brand.Default(); an invalid brand is an error.
	Brand brand.Brand
	// Name and Version identify the server to clients (serverInfo). The defaults are
	// the brand's command ("tollgate") and "1".
	Name, Version string
	// Instructions, if set, is sent to clients at initialization, for their models.
	Instructions string
	// MaxBatchMessages is the most messages a JSON-RPC batch (protocol 2025-03-26 and
	// earlier) may hold; a larger one is refused as a whole. The default is
	// [DefaultMaxBatchMessages]; more than [MaxBatchMessagesLimit] is an error.
	MaxBatchMessages int
	// MaxAnswerBytes bounds the answer to one HTTP request, as the handler counts its
	// results before they are encoded: a result that does not fit is replaced by an
	// error, and so is every message of the request after it (see the package
	// documentation, Limits). Set it above the largest result an API returns, twice
	// over: a tool result carries the API's data as text and as structured content.
	// The default is [DefaultMaxAnswerBytes].
	MaxAnswerBytes int64
	// UnbilledBurst and UnbilledPerMinute limit, per key, the requests that are not
	// billed (every method but tools/call: initialize, ping, tools/list, ...): a key
	// may send UnbilledBurst of them at once, and UnbilledPerMinute a minute after
	// that. The plan's rate limit counts tool calls only. The defaults are
	// [DefaultUnbilledBurst] and [DefaultUnbilledPerMinute]; UnbilledBurst may not be
	// smaller than MaxBatchMessages.
	UnbilledBurst, UnbilledPerMinute int
	// MaxSessionsPerKey and MaxSessions cap the live sessions of one key (or of one
	// account's session token that names no key) and of the handler. An initialize
	// beyond either is refused. The defaults are [DefaultMaxSessionsPerKey] and
	// [DefaultMaxSessions].
	MaxSessionsPerKey, MaxSessions int
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
	inner     http.Handler // the SDK's streamable handler behind its bearer middleware (see handOver)
	door      *edge.Door
	maxBody   int64
	verify    func(context.Context, string) (string, error)
	challenge string
	recheck   time.Duration
	log       *slog.Logger

	toolsMu sync.Mutex              // serializes catalog syncs
	synced  atomic.Uint64           // catalog version + 1 of the registered tools; 0: none
	tools   map[string]*catalog.API // the registered tools, by id (guarded by toolsMu)

	streams  streams
	limits   limits
	sessions *sessions
	// toolSizes are the encoded sizes of the registered tools, by name, which the
	// answer's budget counts for a tool list (replaced whole by sync).
	toolSizes atomic.Pointer[map[string]int64]

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
		return nil, errors.New("mcp: Options.VerifyToken needs Options.Challenge, the WWW-Authenticate value that points OAuth clients at the resource metadata the host serves (package oauth: Server.Challenge and Server.ProtectedResourceMetadata)")
	}
	if err := opts.Brand.Check(); err != nil {
		return nil, errors.New("mcp: Options.Brand: " + strings.TrimPrefix(err.Error(), "brand: "))
	}
	lim, err := newLimits(opts)
	if err != nil {
		return nil, err
	}
	h := &Handler{
		svc:       svc,
		limits:    lim,
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
	e := opts.Edge
	if e == nil {
		e = edge.Default()
	}
	spec := doorSpec
	spec.Logger = h.log
	h.door = e.Door(spec)
	timeout := opts.SessionTimeout
	if timeout <= 0 {
		timeout = DefaultSessionTimeout
	}
	h.sessions = newSessions(opts.MaxSessionsPerKey, opts.MaxSessions, timeout, h.log)
	h.toolSizes.Store(&map[string]int64{})
	name, version := opts.Name, opts.Version
	if name == "" {
		name = opts.Brand.OrDefault().Command
	}
	if version == "" {
		version = "1"
	}
	if h.challenge == "" {
		h.challenge = `Bearer realm="` + strings.NewReplacer(`"`, "", `\`, "").Replace(name) + `"`
	}
	sdkLog := slog.New(sdkLogHandler{h.log.Handler()})
	h.server = sdk.NewServer(&sdk.Implementation{Name: name, Title: opts.Brand.Name, Version: version}, &sdk.ServerOptions{
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
	h.inner = sdkauth.RequireBearerToken(handOver, &sdkauth.RequireBearerTokenOptions{AllowMissingExpiration: true})(stream)

	h.sync()
	h.cancels = append(h.cancels,
		svc.Catalog().Subscribe(h.sync),
		svc.Events().Subscribe(event.ObserverFunc(h.keyEvent), keyEvents...),
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
	door *edge.Door // writes the receipt
	p    tollgate.Principal
	as   tollgate.Caller // how its tool calls present it to the service
	cred credential
	user string         // the SDK's session owner: the key id, or the account of a session token
	rec  *reqlog.Record // the access log's record of the request; nil without one

	mu      sync.Mutex
	hdr     http.Header // the response's headers; nil once the response is under way
	done    bool
	charged int64            // what the request's tool calls were charged so far
	balance *billing.Balance // the lowest balance they left

	slot       *slot // the session slot of an initialize that starts a session (see limit)
	answered   int64 // the bytes of answer counted so far (see spend)
	overBudget bool  // a result did not fit the answer's budget
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
		c.door.Receipt(c.hdr, &sum)
	}
	if retryAfter > 0 {
		edge.SetRetryAfter(c.hdr, retryAfter)
	}
}

func (c *caller) finish() {
	c.mu.Lock()
	c.done = true
	c.mu.Unlock()
}

// callerFrom returns the caller of an MCP request.
func callerFrom(req sdk.Request) *caller {
	if req == nil {
		return nil
	}
	extra := req.GetExtra()
	if extra == nil || extra.TokenInfo == nil {
		return nil
	}
	c, _ := extra.TokenInfo.Extra[callerExtra].(*caller)
	return c
}

// ServeHTTP serves one HTTP request of the Streamable HTTP transport: CORS preflight,
// the DNS-rebinding check, authentication, the checks of the JSON-RPC envelope that
// the SDK cannot make (see envelope.go), and then the SDK, whose plain-text refusals
// it answers as JSON-RPC errors (see sdkwriter.go).
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
		h.door.CORS(w.Header(), r)
		writeRPCError(w, http.StatusMethodNotAllowed, nil, codeInvalidRequest, "method_not_allowed", msgMethods)
		return
	}
	if h.closed.Load() {
		h.log.InfoContext(r.Context(), "mcp: answered 503: the endpoint is shutting down (Handler.Close was called)")
		h.door.CORS(w.Header(), r)
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
		msg = peek(body, h.limits.maxBatch)
		r.Body = io.NopCloser(bytes.NewReader(body))
	}

	// A tool call checks a key that came from the service's key cache in its admission;
	// every other request checks it now.
	toolCall := msg.method == methodCallTool
	c, err := h.authenticate(r, !toolCall)
	if err != nil {
		h.refuse(w, r, msg.id, err)
		return
	}
	if r.Method == http.MethodPost {
		if status, code, name, text := h.misuse(r, msg); status != 0 {
			if !h.keyRefused(w, r, c, msg) {
				h.door.CORS(w.Header(), r)
				if name == "" {
					name = rpcCodeName(code)
				}
				writeRPCError(w, status, msg.id, code, name, text)
			}
			return
		}
		sl, ok := h.limit(w, r, c, msg)
		if !ok {
			return
		}
		c.slot = sl
		defer h.sessions.settle(sl)
	}
	h.sync()

	hdr := w.Header()
	h.door.CORS(hdr, r)
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
	r = forSDK(r.WithContext(ctx), c)
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
	if status == 0 || h.keyRefused(w, r, c, msg) {
		return
	}
	if status, code, text, ok := methodRefusal(msg, text); ok {
		writeRPCError(w, status, msg.id, code, rpcCodeName(code), text)
		return
	}
	h.translate(w, r, msg.id, status, text)
}

// keyRefused checks the key of a tool call that is about to be refused, which the
// call's admission would have checked (the request was authenticated without it, see
// ServeHTTP), and answers the refusal of the key if it is refused: a revoked key is
// never answered as if it were still good, whether or not it came from the service's
// key cache. It reports whether it answered.
func (h *Handler) keyRefused(w http.ResponseWriter, r *http.Request, c *caller, m message) bool {
	if m.method != methodCallTool {
		return false
	}
	as := c.as
	as.Verify = true
	if _, err := h.svc.Authenticate(r.Context(), as); err != nil {
		h.refuse(w, r, m.id, err)
		return true
	}
	return false
}

// handOver is the TokenVerifier of the SDK's bearer middleware, auth.RequireBearerToken,
// which stands in front of the SDK's handler (Handler.inner): it returns the TokenInfo
// of the caller that ServeHTTP authenticated and put in the request's context. The
// SDK's streamable transport puts the TokenInfo in the RequestExtra of each message
// the request carries, where the method handlers find the caller (callerFrom), and
// binds a session to the TokenInfo.UserID that opened it, so that another key cannot
// use it (go-sdk v1.8.0 mcp/streamable.go: servePOST, lookupSession).
//
// The middleware is the only way to hand the SDK a TokenInfo, or any per-request
// value besides the request's header: it stores it under an unexported context key
// (auth/auth.go), and method handlers run on the session's context, not the
// request's. It does not authenticate here, because it cannot answer as the endpoint
// does: it reads only an Authorization: Bearer header (auth/auth.go, verify), while a
// key may also come in x-api-key and a session token in x-jwt, and it answers a
// refusal with a plain 401 or 500, while the endpoint answers a JSON-RPC error with
// the request's id, its own challenge, the edge's 403, or 503 for a token store that
// cannot be read. So ServeHTTP authenticates every form, and forSDK gives a request
// whose credential is not a bearer value the header the middleware needs.
func handOver(ctx context.Context, _ string, _ *http.Request) (*sdkauth.TokenInfo, error) {
	c, ok := ctx.Value(callerKey{}).(*caller)
	if !ok {
		return nil, sdkauth.ErrInvalidToken
	}
	return &sdkauth.TokenInfo{UserID: c.user, Extra: map[string]any{callerExtra: c}}, nil
}

// forSDK returns the request as the SDK's bearer middleware is to see it (see
// handOver). A key sent in x-api-key or a session token in x-jwt leaves the request
// without the Authorization: Bearer header that the middleware requires before it
// calls its verifier; such a request gets one, in a copy of its header, with a value
// of no meaning: handOver takes the caller from the context.
func forSDK(r *http.Request, c *caller) *http.Request {
	if c.cred.kind == credToken || c.cred.kind == credBearerKey {
		return r
	}
	hdr := maps.Clone(r.Header)
	hdr["Authorization"] = []string{handedOver}
	r.Header = hdr
	return r
}

// handedOver is the Authorization header of a request whose credential came in
// another header (see forSDK).
const handedOver = "Bearer handed-over"

// sessionHeader is the header of the Streamable HTTP transport that names a session.
const sessionHeader = "Mcp-Session-Id"

// preflight answers a CORS preflight request, which needs no credential.
func (h *Handler) preflight(w http.ResponseWriter, r *http.Request) { h.door.Preflight(w, r) }

// doorSpec is what the MCP door asks of the edge: the transport's methods, its headers
// besides the other doors' (the session, the protocol version, the stream to resume),
// and the challenge that a script may read.
var doorSpec = edge.DoorSpec{
	Methods:       "GET, POST, DELETE, OPTIONS",
	AllowHeaders:  []string{sessionHeader, "Mcp-Protocol-Version", "Last-Event-Id"},
	ExposeHeaders: []string{sessionHeader, "Mcp-Protocol-Version", "WWW-Authenticate"},
}

// Interface guard.
var _ http.Handler = (*Handler)(nil)
