package oauth

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/tollgate-dev/tollgate/brand"
	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/internal/safefetch"
)

// Keys is what the server needs from the service that owns the API keys. [ServiceKeys]
// implements it over a [tollgate.Service].
type Keys interface {
	// ApproveKey checks an API key value that a person typed on the consent page,
	// from addr, and returns its key id and account id. A key that may not approve a
	// connection gives an error wrapping [ErrKeyRefused], whose message is shown on
	// the page; any other error means the keys cannot be checked now.
	ApproveKey(ctx context.Context, value string, addr netip.Addr) (keyID, accountID string, err error)

	// ApproveKeyID is ApproveKey for a key named by its id, as [Options.Login]
	// returns it, and returns the key's account id.
	ApproveKeyID(ctx context.Context, keyID string, addr netip.Addr) (accountID string, err error)

	// CheckKeyID reports whether the key with this id may still be used (nil), or why
	// not: an error wrapping [ErrKeyRefused] for a revoked, expired or unknown key,
	// any other error when the keys cannot be checked now.
	CheckKeyID(ctx context.Context, keyID string) error
}

// Errors of the server.
var (
	// ErrInvalidToken is wrapped by the errors of [Server.VerifyAccessToken] for a
	// token that is malformed, unknown, expired, revoked or issued for another
	// resource. The resource server answers it with 401.
	ErrInvalidToken = errors.New("oauth: invalid access token")

	// ErrKeyRefused is wrapped by the errors of [Keys] methods that refuse the key
	// itself (unknown, revoked, expired, or not allowed on the channel).
	ErrKeyRefused = errors.New("the API key was refused")
)

// Scope is the one scope the server grants. Whatever scope a client asks for, its
// tokens carry this one: what a connection may do is decided by the API key's
// restrictions, not by OAuth scopes.
const Scope = "mcp"

// Lifetimes of what the server issues.
const (
	// DefaultAccessTokenTTL is the default [Options.AccessTokenTTL].
	DefaultAccessTokenTTL = time.Hour
	// DefaultRefreshTokenTTL is the default [Options.RefreshTokenTTL].
	DefaultRefreshTokenTTL = 30 * 24 * time.Hour
	// CodeTTL is how long an authorization code may be exchanged.
	CodeTTL = 60 * time.Second
	// ConsentTTL is how long a consent page may be submitted.
	ConsentTTL = 10 * time.Minute
	// UnusedClientTTL is how long a registered client with no approval is kept.
	UnusedClientTTL = 7 * 24 * time.Hour
	// purgeEvery is how often, at most, the server deletes expired records.
	purgeEvery = 10 * time.Minute
)

// DefaultRegistrationsPerMinute is the default [Options.RegistrationsPerMinute].
const DefaultRegistrationsPerMinute = 60

// Options configures a [Server]. Issuer is required; every other field is optional.
type Options struct {
	// Issuer is the server's issuer identifier: the https (or, for local development,
	// http) origin where the host mounts [Server.Handler], such as
	// "https://api.example.com", without a path. Endpoints are published under it.
	Issuer string
	// Resources are the protected resources (RFC 8707 resource indicators) tokens may
	// be issued for, such as "https://api.example.com/v1/mcp". An authorization
	// request without a resource gets the first. The default is Issuer + "/v1/mcp".
	Resources []string
	// Now returns the current time. The default is time.Now; tests inject a clock.
	Now func() time.Time
	// Logger receives failures (store errors, refused client metadata documents).
	// A failure of the store or of Keys is logged at Error, except when the request's
	// client gave up before it was answered (its context is done), which is logged at
	// Info. The default is slog.Default(). Codes, tokens and keys are never logged.
	Logger *slog.Logger
	// AccessTokenTTL is the lifetime of access tokens. The default is
	// DefaultAccessTokenTTL (1 hour).
	AccessTokenTTL time.Duration
	// RefreshTokenTTL is the lifetime of a refresh token; each refresh issues a new
	// one, so a connection used at least this often never expires. The default is
	// DefaultRefreshTokenTTL (30 days).
	RefreshTokenTTL time.Duration
	// Login, if set, lets a person who is logged in to the host approve without
	// typing a key: given the consent page's request, it returns the id of the key the
	// logged-in person approves for, or false to ask for a key. The server checks the
	// key with [Keys.ApproveKeyID]. The consent form is bound to the browser, so a
	// cross-site request cannot approve on the person's behalf.
	Login func(r *http.Request) (keyID string, ok bool)
	// Brand is the operator's brand, whose Name is the default ServiceName. The zero
	// value is brand.Default(); an invalid brand is an error.
	Brand brand.Brand
	// ServiceName is shown on the consent page. The default is the brand's Name
	// ("Tollgate").
	ServiceName string
	// Edge holds the HTTP settings every door shares; the server reads the client's
	// address through its trusted proxies, for the IP allow-lists of keys typed on the
	// consent page. The default is [edge.Default]. The discovery, registration and
	// token endpoints answer every origin whatever the edge's CORS origins: they take no
	// cookies, and OAuth clients in browsers must reach them.
	Edge *edge.Edge
	// RegistrationsPerMinute bounds dynamic client registrations, server-wide. The
	// default is DefaultRegistrationsPerMinute; a negative value means no limit.
	RegistrationsPerMinute int
	// Fetch configures the fetching of client metadata documents.
	Fetch FetchOptions
}

// FetchOptions configures how client metadata documents are fetched.
type FetchOptions struct {
	// AllowPrivate lets metadata documents be fetched from loopback, private and other
	// non-public addresses. It is for local development and tests only: it opens the
	// server to server-side request forgery.
	AllowPrivate bool
	// Timeout bounds one fetch. The default is 5 seconds.
	Timeout time.Duration
}

// A Server is the embedded OAuth 2.1 authorization server. Create it with [New]. It is
// safe for concurrent use.
type Server struct {
	store      Store
	keys       Keys
	issuer     string
	issuerURL  *url.URL
	resources  []string // canonical
	now        func() time.Time
	log        *slog.Logger
	accessTTL  time.Duration
	refreshTTL time.Duration
	login      func(*http.Request) (string, bool)
	name       string
	edge       *edge.Edge
	registry   *rate.Limiter // nil: unlimited
	fetcher    *safefetch.Fetcher
	documents  documentCache
	page       *template.Template
	styleCSP   string
	cookie     cookieAttrs
	handler    http.Handler

	purgeMu   sync.Mutex
	lastPurge time.Time
}

// New returns a Server that keeps its records in store and checks keys with keys.
func New(store Store, keys Keys, opts *Options) (*Server, error) {
	if store == nil || keys == nil {
		return nil, errors.New("oauth: New needs a Store and Keys")
	}
	if opts == nil || opts.Issuer == "" {
		return nil, errors.New("oauth: Options.Issuer is required")
	}
	issuer, err := parseIssuer(opts.Issuer)
	if err != nil {
		return nil, err
	}
	if err := opts.Brand.Check(); err != nil {
		return nil, errors.New("oauth: Options.Brand: " + strings.TrimPrefix(err.Error(), "brand: "))
	}
	s := &Server{
		store:      store,
		keys:       keys,
		issuer:     issuer.String(),
		issuerURL:  issuer,
		now:        opts.Now,
		log:        opts.Logger,
		accessTTL:  opts.AccessTokenTTL,
		refreshTTL: opts.RefreshTokenTTL,
		login:      opts.Login,
		name:       opts.ServiceName,
		edge:       opts.Edge,
		cookie:     newCookieAttrs(issuer.Scheme == "https"),
	}
	if s.edge == nil {
		s.edge = edge.Default()
	}
	resources := opts.Resources
	if len(resources) == 0 {
		resources = []string{s.issuer + "/v1/mcp"}
	}
	for _, r := range resources {
		c, ok := canonicalResource(r)
		if !ok {
			return nil, fmt.Errorf("oauth: resource %q is not an absolute http(s) URL without a fragment", r)
		}
		s.resources = append(s.resources, c)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.accessTTL <= 0 {
		s.accessTTL = DefaultAccessTokenTTL
	}
	if s.refreshTTL <= 0 {
		s.refreshTTL = DefaultRefreshTokenTTL
	}
	if s.name == "" {
		s.name = opts.Brand.OrDefault().Name
	}
	switch n := opts.RegistrationsPerMinute; {
	case n == 0:
		s.registry = rate.NewLimiter(rate.Limit(DefaultRegistrationsPerMinute)/60, DefaultRegistrationsPerMinute)
	case n > 0:
		s.registry = rate.NewLimiter(rate.Limit(n)/60, n)
	}
	timeout := opts.Fetch.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	s.fetcher = safefetch.New(&safefetch.Options{
		AllowPrivate: opts.Fetch.AllowPrivate,
		Timeout:      timeout,
		MaxRedirects: -1, // a metadata document is served at its own URL
		MaxBytes:     maxDocumentBytes,
	})
	s.documents.entries = make(map[string]documentEntry)
	if s.page, s.styleCSP, err = consentTemplate(); err != nil {
		return nil, err
	}
	s.handler = s.routes()
	return s, nil
}

// parseIssuer checks that raw is an http(s) origin without a path, query or fragment.
func parseIssuer(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSuffix(raw, "/"))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil ||
		u.Path != "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("oauth: Options.Issuer %q must be an http(s) origin such as https://api.example.com, without a path", raw)
	}
	u.Host = strings.ToLower(u.Host)
	return u, nil
}

// canonicalResource returns raw with its scheme and host in lowercase and without a
// trailing slash, which is how resources are compared; ok is false unless raw is an
// absolute http(s) URL without a fragment.
func canonicalResource(raw string) (string, bool) {
	if len(raw) > maxURI {
		return "", false
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.Fragment != "" || strings.Contains(raw, "#") {
		return "", false
	}
	u.Scheme = strings.ToLower(u.Scheme)
	u.Host = strings.ToLower(u.Host)
	return strings.TrimSuffix(u.String(), "/"), true
}

// resource returns the configured resource that raw names, or false.
func (s *Server) resource(raw string) (string, bool) {
	c, ok := canonicalResource(raw)
	if !ok {
		return "", false
	}
	for _, r := range s.resources {
		if r == c {
			return r, true
		}
	}
	return "", false
}

// Handler returns the handler of the server's endpoints, on relative routes:
//
//	GET  /.well-known/oauth-authorization-server   RFC 8414 metadata
//	POST /oauth/register                           dynamic client registration (RFC 7591)
//	GET  /oauth/authorize, POST /oauth/authorize   the consent page
//	POST /oauth/token                              the token endpoint
//	POST /oauth/revoke                             token revocation (RFC 7009)
//
// The host mounts it at the root of the issuer's origin.
func (s *Server) Handler() http.Handler { return s.handler }

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /.well-known/oauth-authorization-server", cors(http.HandlerFunc(s.serveMetadata)))
	mux.Handle("OPTIONS /.well-known/oauth-authorization-server", cors(nil))
	mux.Handle("POST /oauth/register", cors(http.HandlerFunc(s.serveRegister)))
	mux.Handle("OPTIONS /oauth/register", cors(nil))
	mux.HandleFunc("GET /oauth/authorize", s.serveAuthorize)
	mux.HandleFunc("POST /oauth/authorize", s.serveConsent)
	mux.Handle("POST /oauth/token", cors(http.HandlerFunc(s.serveToken)))
	mux.Handle("OPTIONS /oauth/token", cors(nil))
	mux.Handle("POST /oauth/revoke", cors(http.HandlerFunc(s.serveRevoke)))
	mux.Handle("OPTIONS /oauth/revoke", cors(nil))
	return mux
}

// cors lets browser-based clients call an endpoint from any origin. The endpoints it
// wraps take no cookies, so allowing every origin exposes nothing. A nil next answers
// the preflight.
func cors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		if next == nil {
			h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, MCP-Protocol-Version")
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// purge deletes expired records, at most once every purgeEvery. It runs on the rare
// requests that create records (registrations and approvals), so that a store never
// grows without bound and no background goroutine is needed.
func (s *Server) purge(ctx context.Context, now time.Time) {
	s.purgeMu.Lock()
	due := now.Sub(s.lastPurge) >= purgeEvery
	if due {
		s.lastPurge = now
	}
	s.purgeMu.Unlock()
	if !due {
		return
	}
	// The request's end must not cut the deletion short.
	if err := s.store.DeleteExpired(context.WithoutCancel(ctx), now, now.Add(-UnusedClientTTL)); err != nil {
		s.log.LogAttrs(ctx, slog.LevelWarn, "oauth: deleting expired records", slog.Any("error", err))
	}
}

// failed logs a failure of the store or of Keys while serving a request: the
// service's failure, at Error. When the request's context is done, its client gave up
// (or its deadline passed) and the failure is the call cut short: it is logged at
// Info, since a client's leaving is not the service's failure.
func (s *Server) failed(ctx context.Context, msg string, args ...any) {
	level := slog.LevelError
	if ctx.Err() != nil {
		level = slog.LevelInfo
	}
	s.log.Log(ctx, level, msg, args...)
}
