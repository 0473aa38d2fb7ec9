package session

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/internal/reqlog"
	"github.com/tollgate-dev/tollgate/wire"
)

// A Login is the host's own sign-in: from a request (a form, the host's cookie, a
// single sign-on assertion), it says which account the person may act for. A session
// started through it acts for that account as the account's primary key does.
//
// To refuse a person, return an error that wraps [ErrLoginRefused]: its text is shown
// to them, so say what to fix ("the password is wrong"). Any other error means the
// sign-in could not be checked (the host's user store is down, say); it is logged and
// answered with 503.
type Login interface {
	Login(ctx context.Context, r *http.Request) (accountID string, err error)
}

// LoginFunc makes a function a [Login].
type LoginFunc func(ctx context.Context, r *http.Request) (string, error)

// Login calls f.
func (f LoginFunc) Login(ctx context.Context, r *http.Request) (string, error) { return f(ctx, r) }

// ErrLoginRefused is wrapped by the error of a [Login] that refuses a person. It is
// accounts.ErrLoginRefused.
var ErrLoginRefused = accounts.ErrLoginRefused

// Options configures a [Handler]. The zero value is the default; every field is
// optional.
type Options struct {
	// Login, if set, starts sessions for requests that carry no API key. If nil,
	// sessions start with API keys only.
	Login Login
	// SecureCookies makes every cookie Secure (and named with the __Host- prefix),
	// for a service behind a proxy that terminates TLS. By default a cookie is Secure
	// when its request came over TLS.
	SecureCookies bool
	// Edge holds the HTTP settings every door shares; the handler reads the caller's
	// address through its trusted proxies (IP allow-lists, the audit log, the throttle
	// of failed sign-ins). The default is [edge.Default]: the address is the TCP peer.
	// Cookie requests are guarded by TrustedOrigins, not by the edge's CORS origins.
	Edge *edge.Edge
	// TrustedOrigins lists other origins ("https://dashboard.example.com") allowed to
	// make cookie requests and to start sessions, besides the service's own.
	TrustedOrigins []string
	// Logger receives the failures of the Login, and every failed sign-in. The
	// default is slog.Default(). Neither key values nor session tokens are ever
	// logged.
	Logger *slog.Logger
	// FailedSignIns throttles the failed sign-ins of each address and each key; the
	// zero value is the default (see [FailedSignIns]).
	FailedSignIns FailedSignIns
}

// Cookie names: with the __Host- prefix for a Secure cookie, without it over plain
// HTTP, where a browser refuses the prefix.
const (
	CookieName         = "__Host-tollgate-session"
	InsecureCookieName = "tollgate-session"
)

// CSRFHeader is the header that carries a session's CSRF token (wire.HeaderCSRFToken).
const CSRFHeader = wire.HeaderCSRFToken

// maxBody bounds the body of POST /v1/account/session.
const maxBody = 16 << 10

// Handler serves the session routes and makes the [Handler.Cookies] middleware. Create
// it with [NewHandler].
type Handler struct {
	mgr      *accounts.Manager
	svc      *tollgate.Service
	sessions *auth.Sessions
	login    Login
	secure   bool
	door     *edge.Door
	origins  *http.CrossOriginProtection
	failures *failures // nil when the throttle is off
	log      *slog.Logger
	mux      *http.ServeMux
}

// NewHandler returns the session handler of the accounts that mgr manages, whose routes are relative to where
// the host mounts it:
//
//	POST|GET|DELETE /v1/account/session
//
// Its service must have session tokens (tollgate.Options.Sessions) and a store of ended
// sessions (tollgate.Options.SessionStore), so that signing out ends a session on every
// instance. opts may be nil.
func NewHandler(mgr *accounts.Manager, opts *Options) (*Handler, error) {
	if mgr == nil {
		return nil, errors.New("session: NewHandler needs an accounts.Manager")
	}
	signer, _ := mgr.Service().Sessions()
	switch {
	case signer == nil:
		return nil, errors.New("session: the service has no session tokens: set tollgate.Options.Sessions")
	case !mgr.CanEndSessions():
		return nil, errors.New("session: the service cannot end sessions: set tollgate.Options.SessionStore")
	}
	if opts == nil {
		opts = &Options{}
	}
	e := opts.Edge
	if e == nil {
		e = edge.Default()
	}
	h := &Handler{mgr: mgr, svc: mgr.Service(), sessions: signer, login: opts.Login, secure: opts.SecureCookies,
		door: e.Door(edge.DoorSpec{Logger: opts.Logger}), origins: http.NewCrossOriginProtection(), failures: newFailures(opts.FailedSignIns),
		log: opts.Logger, mux: http.NewServeMux()}
	for _, o := range opts.TrustedOrigins {
		if err := h.origins.AddTrustedOrigin(o); err != nil {
			return nil, errors.New("session: Options.TrustedOrigins: " + err.Error())
		}
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	h.mux.HandleFunc("POST /v1/account/session", h.start)
	h.mux.Handle("GET /v1/account/session", h.Cookies(http.HandlerFunc(h.current)))
	h.mux.Handle("DELETE /v1/account/session", h.Cookies(http.HandlerFunc(h.end)))
	h.mux.HandleFunc("/v1/account/session", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", "GET, POST, DELETE")
		h.writeError(w, r, &tollgate.Error{Code: tollgate.CodeMethodNotAllowed,
			Message: "/v1/account/session takes POST (sign in), GET (the session) and DELETE (sign out)"})
	})
	return h, nil
}

// ServeHTTP serves the session routes.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	h.mux.ServeHTTP(w, r)
}

// secureFor reports whether the cookie of a response to r is Secure.
func (h *Handler) secureFor(r *http.Request) bool { return h.secure || r.TLS != nil }

// cookieName returns the name of the session cookie for requests like r.
func (h *Handler) cookieName(r *http.Request) string {
	if h.secureFor(r) {
		return CookieName
	}
	return InsecureCookieName
}

// setCookie sets the session cookie, to value until expires; an empty value clears it.
func (h *Handler) setCookie(w http.ResponseWriter, r *http.Request, value string, expires time.Time) {
	c := &http.Cookie{Name: h.cookieName(r), Value: value, Path: "/", HttpOnly: true,
		Secure: h.secureFor(r), SameSite: http.SameSiteStrictMode}
	if value == "" {
		c.MaxAge, c.Expires = -1, time.Unix(0, 0)
	} else {
		c.MaxAge, c.Expires = max(1, int(expires.Sub(h.svc.Now()).Seconds())), expires
	}
	http.SetCookie(w, c)
}

// headerCredential reports whether r carries a credential in a header, which takes
// precedence over the cookie.
func headerCredential(r *http.Request) bool {
	if strings.TrimSpace(r.Header.Get("X-Api-Key")) != "" || strings.TrimSpace(r.Header.Get("X-Jwt")) != "" {
		return true
	}
	v := r.Header.Get("Authorization")
	return len(v) > 7 && strings.EqualFold(v[:7], "bearer ") && strings.TrimSpace(v[7:]) != ""
}

// safeMethod reports whether a request with method m changes nothing.
func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// Cookies is middleware that authenticates a request by its session cookie: it hands
// the wrapped handler the cookie's token as the x-jwt credential, which the handler
// verifies as any session token (its signature, its expiry, whether it was signed out,
// its key). A state-changing request so authenticated needs the session's CSRF token
// and must come from the service's own origin; otherwise it is refused with a 403
// envelope. A request with a credential in a header passes untouched, its cookie
// ignored; so does a request without the cookie.
//
// Wrap the handlers that should accept browser sessions, for example the self-service
// API: mux.Handle("/v1/account/", sessions.Cookies(accountHandler)).
func (h *Handler) Cookies(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if headerCredential(r) {
			next.ServeHTTP(w, r)
			return
		}
		c, err := r.Cookie(h.cookieName(r))
		if err != nil || c.Value == "" {
			next.ServeHTTP(w, r)
			return
		}
		if !safeMethod(r.Method) {
			if msg := h.checkCSRF(r, c.Value); msg != "" {
				h.writeError(w, r, &tollgate.Error{Code: tollgate.CodeForbidden, Message: msg})
				return
			}
		}
		r = r.Clone(r.Context())
		r.Header.Set("X-Jwt", c.Value)
		next.ServeHTTP(w, r)
	})
}

// checkCSRF checks a state-changing request authenticated by the cookie token, and
// returns why it is refused, or "".
func (h *Handler) checkCSRF(r *http.Request, token string) string {
	if err := h.origins.Check(r); err != nil {
		return "this request comes from another origin; a session cookie is accepted only from the service's own pages"
	}
	c, err := h.sessions.Parse(token, h.svc.Now())
	if err != nil {
		// Not a valid session: the wrapped handler refuses it and says why.
		return ""
	}
	got := r.Header.Get(CSRFHeader)
	switch {
	case got == "":
		return "this request is authenticated by the session cookie, so it needs the " + CSRFHeader +
			" header: send the csrf_token of the session (POST or GET /v1/account/session answer it)"
	case !h.sessions.CheckCSRF(c.ID, got):
		return "the " + CSRFHeader + " header does not match this session: send the csrf_token of the current session (GET /v1/account/session answers it)"
	}
	return ""
}

// startRequest is the body of POST /v1/account/session.
type startRequest struct {
	// APIKey starts the session with this key, unless a header carries one.
	APIKey string `json:"api_key"`
	// Kind is "cookie" (the default) or "token".
	Kind string `json:"kind"`
}

// sessionInfo is the data of the session routes' answers.
type sessionInfo struct {
	ID        string    `json:"session_id"`
	Account   string    `json:"account"`
	KeyID     string    `json:"key_id"`
	ExpiresAt time.Time `json:"expires_at"`
	CSRFToken string    `json:"csrf_token,omitempty"`
	// Token is the session token, for kind "token" only.
	Token string `json:"token,omitempty"`
}

// start serves POST /v1/account/session.
func (h *Handler) start(w http.ResponseWriter, r *http.Request) {
	if err := h.origins.Check(r); err != nil {
		h.writeError(w, r, &tollgate.Error{Code: tollgate.CodeForbidden,
			Message: "a session cannot be started from another origin's page"})
		return
	}
	req, err := readStart(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	addr := h.door.Addr(r)
	cred, cerr := edge.CredentialFrom(r.Header)
	// What is tried, for the throttle of failed sign-ins: the key (a header's, or the
	// body's), or the host's Login.
	tried, with := strings.TrimSpace(req.APIKey), "key"
	switch {
	case cerr == nil:
		tried = cred.Value
	case tollgate.CodeOf(cerr) != tollgate.CodeMalformedCredential && tried == "" && h.login != nil:
		with = "login"
	}
	if err := h.signInAllowed(addr, tried); err != nil {
		h.writeError(w, r, err)
		return
	}
	var s accounts.Session
	switch {
	case cerr == nil:
		s, err = h.mgr.StartSession(r.Context(), tollgate.Caller{Credential: cred, Addr: addr})
	case tollgate.CodeOf(cerr) == tollgate.CodeMalformedCredential:
		err = &tollgate.Error{Code: tollgate.CodeUnauthorized,
			Message: "the credential header is not an API key, which has the form xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"}
	case req.APIKey != "":
		s, err = h.startWithKey(r, req.APIKey, "api_key", addr)
	case h.login != nil:
		s, err = h.startLogin(r, addr)
	default:
		err = &tollgate.Error{Code: tollgate.CodeUnauthorized,
			Message: "send an API key to start a session: in x-api-key, in Authorization: Bearer, or in the body's api_key field"}
	}
	if err != nil {
		h.signInFailed(r, addr, tried, with, err)
		h.writeError(w, r, err)
		return
	}
	info := sessionInfo{ID: s.ID, Account: s.Account, KeyID: s.KeyID, ExpiresAt: s.Expires, CSRFToken: s.CSRFToken}
	if req.Kind == "token" {
		info.Token, info.CSRFToken = s.Token, ""
	} else {
		h.setCookie(w, r, s.Token, s.Expires)
	}
	h.door.WriteJSON(w, r, http.StatusCreated, info)
}

// startWithKey starts a session with the key value a body or a form gave in the named
// field.
func (h *Handler) startWithKey(r *http.Request, value, field string, addr netip.Addr) (accounts.Session, error) {
	key, ok := auth.ParseKey(strings.TrimSpace(value))
	if !ok {
		return accounts.Session{}, &tollgate.Error{Code: tollgate.CodeUnauthorized,
			Message: field + " is not an API key, which has the form xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"}
	}
	return h.mgr.StartSession(r.Context(), tollgate.Caller{
		Credential: auth.Credential{Kind: auth.APIKeyHeader, Value: key}, Addr: addr})
}

// SignIn starts a cookie session with an API key that a page's own sign-in form sent
// (field names the form field, for the messages), as POST /v1/account/session does:
// it refuses a request from another origin, checks the key against the key store, and
// sets the session cookie. The key's value is never kept nor logged. Its errors are
// *tollgate.Error values whose message says what to fix (CodeUnauthorized for a value
// that is not a valid key, CodeForbidden for another origin or a key that may not be
// used from the caller's address).
func (h *Handler) SignIn(w http.ResponseWriter, r *http.Request, field, apiKey string) (accounts.Session, error) {
	if err := h.origins.Check(r); err != nil {
		return accounts.Session{}, &tollgate.Error{Code: tollgate.CodeForbidden,
			Message: "a session cannot be started from another origin's page"}
	}
	addr := h.ClientAddr(r)
	tried := strings.TrimSpace(apiKey)
	if err := h.signInAllowed(addr, tried); err != nil {
		return accounts.Session{}, err
	}
	s, err := h.startWithKey(r, apiKey, field, addr)
	if err != nil {
		h.signInFailed(r, addr, tried, "key", err)
		return accounts.Session{}, err
	}
	h.setCookie(w, r, s.Token, s.Expires)
	return s, nil
}

// HasLogin reports whether sessions can start through the host's [Login]
// ([Options.Login]).
func (h *Handler) HasLogin() bool { return h.login != nil }

// SignInWithLogin starts a cookie session through the host's [Login], for a page's own
// sign-in form, as POST /v1/account/session does without a key: it refuses a request
// from another origin, lets the Login read the request (the form's fields), and sets
// the session cookie. A refusal of the Login ([ErrLoginRefused]) is a *tollgate.Error
// with CodeUnauthorized and the Login's message; a Login that fails otherwise is logged
// and answered with CodeUnavailable and a message that says nothing of the failure.
// Without a Login it returns a CodeForbidden error.
func (h *Handler) SignInWithLogin(w http.ResponseWriter, r *http.Request) (accounts.Session, error) {
	if err := h.origins.Check(r); err != nil {
		return accounts.Session{}, &tollgate.Error{Code: tollgate.CodeForbidden,
			Message: "a session cannot be started from another origin's page"}
	}
	if h.login == nil {
		return accounts.Session{}, &tollgate.Error{Code: tollgate.CodeForbidden,
			Message: "this service signs people in with API keys only"}
	}
	addr := h.ClientAddr(r)
	if err := h.signInAllowed(addr, ""); err != nil {
		return accounts.Session{}, err
	}
	s, err := h.startLogin(r, addr)
	if err != nil {
		h.signInFailed(r, addr, "", "login", err)
		return accounts.Session{}, err
	}
	h.setCookie(w, r, s.Token, s.Expires)
	return s, nil
}

// SignOut ends the session of r's cookie on every instance and clears the cookie. A
// request without the cookie, or whose session has already ended or is not one of
// the service's, only has its cookie cleared. The cookie is kept, and the error
// returned, when the session could not be ended (its store is down), so that the
// person may sign out again. The caller checks the request's CSRF token first.
func (h *Handler) SignOut(w http.ResponseWriter, r *http.Request) error {
	token := h.CookieToken(r)
	if token == "" {
		return nil
	}
	err := h.mgr.EndSession(r.Context(), token, h.ClientAddr(r))
	if c := tollgate.CodeOf(err); err != nil && (c == tollgate.CodeUnavailable || c == tollgate.CodeInternal) {
		return err
	}
	h.setCookie(w, r, "", time.Time{})
	return nil
}

// CookieToken returns the session token that r's session cookie carries, or "" if it
// has none. The token is a bearer secret: send it to the service as the x-jwt
// credential, which checks it; never log it.
func (h *Handler) CookieToken(r *http.Request) string {
	c, err := r.Cookie(h.cookieName(r))
	if err != nil {
		return ""
	}
	return c.Value
}

// A Visit is the live session that a request's session cookie carries, for the host's
// own pages (package dashboard's): its claims, the Caller that acts as it (the cookie's
// token as the x-jwt credential, from the client's address), and its CSRF token, which
// the page's forms and scripts send back. It is edge.Visit, which pages built on this
// door name without importing it.
type Visit = edge.Visit

// Visit returns the visit of r, or false if r carries no session cookie, or one whose
// token is not a live session's. It does not read the stores: the session's end, the
// key's revocation and the account's limits are the service's to judge when the
// visit's Caller calls it.
func (h *Handler) Visit(r *http.Request) (Visit, bool) {
	token := h.CookieToken(r)
	if token == "" {
		return Visit{}, false
	}
	c, err := h.sessions.Parse(token, h.svc.Now())
	if err != nil {
		return Visit{}, false
	}
	return Visit{Claims: c,
		Caller:    tollgate.Caller{Credential: auth.Credential{Kind: auth.SessionHeader, Value: token}, Addr: h.ClientAddr(r)},
		CSRFToken: h.sessions.CSRFToken(c.ID)}, true
}

// CheckCSRF reports whether token is the CSRF token of the visit's session, as a
// state-changing request of the visit's page must send it (a form field, a header).
func (h *Handler) CheckCSRF(v Visit, token string) bool {
	return h.sessions.CheckCSRF(v.Claims.ID, token)
}

// CheckOrigin returns an error if r comes from another origin than the service's own
// (or one of [Options.TrustedOrigins]), by the browser's Sec-Fetch-Site or Origin
// header, as [http.CrossOriginProtection] decides. A page's state-changing forms are
// checked with it, besides their CSRF token.
func (h *Handler) CheckOrigin(r *http.Request) error { return h.origins.Check(r) }

// ClientAddr returns the address of r's client, believing X-Forwarded-For only from the
// trusted proxies of the edge ([Options.Edge]).
func (h *Handler) ClientAddr(r *http.Request) netip.Addr { return h.door.Addr(r) }

// readStart reads the optional JSON body of POST /v1/account/session.
func readStart(r *http.Request) (startRequest, error) {
	var req startRequest
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	switch {
	case err != nil:
		return req, &tollgate.Error{Code: tollgate.CodeInvalidInput, Message: "the body cannot be read", Err: err}
	case len(body) > maxBody:
		return req, &tollgate.Error{Code: tollgate.CodeBodyTooLarge, Message: "the body is larger than 16 KiB"}
	case len(strings.TrimSpace(string(body))) > 0:
		if err := json.Unmarshal(body, &req); err != nil {
			return req, &tollgate.Error{Code: tollgate.CodeInvalidInput,
				Message: `the body must be a JSON object such as {"api_key": "...", "kind": "cookie"}`}
		}
	}
	switch req.Kind {
	case "":
		req.Kind = "cookie"
	case "cookie", "token":
	default:
		return req, &tollgate.Error{Code: tollgate.CodeInvalidInput, Message: `kind must be "cookie" (the default) or "token"`}
	}
	return req, nil
}

// startLogin starts a session through the host's Login.
func (h *Handler) startLogin(r *http.Request, addr netip.Addr) (accounts.Session, error) {
	account, err := h.login.Login(r.Context(), r)
	switch {
	case errors.Is(err, ErrLoginRefused):
		return accounts.Session{}, &tollgate.Error{Code: tollgate.CodeUnauthorized, Message: err.Error(), Err: err}
	case err != nil:
		h.log.ErrorContext(r.Context(), "session: the login failed", "error", err)
		return accounts.Session{}, &tollgate.Error{Code: tollgate.CodeUnavailable,
			Message: "the sign-in cannot be checked now; try again shortly", Err: err}
	case account == "":
		h.log.ErrorContext(r.Context(), "session: the login named no account and no error")
		return accounts.Session{}, &tollgate.Error{Code: tollgate.CodeInternal, Message: "internal error: the sign-in named no account"}
	}
	s, err := h.mgr.StartLoginSession(r.Context(), account, addr)
	if tollgate.CodeOf(err) == tollgate.CodeNotFound {
		// The host vouched for an account that does not exist: its mistake, not the
		// person's, and nothing to show them about which accounts exist.
		h.log.ErrorContext(r.Context(), "session: the login named an account that cannot be used", "account", account, "error", err)
		return accounts.Session{}, &tollgate.Error{Code: tollgate.CodeInternal, Message: "internal error: the sign-in named an account that cannot be used"}
	}
	return s, err
}

// sessionOf authenticates the session a request carries (as x-jwt, from the header or,
// through Cookies, the cookie) and returns its token and claims. It refuses a request
// with an API key instead.
func (h *Handler) sessionOf(r *http.Request, check bool) (string, auth.SessionClaims, error) {
	cred, err := edge.CredentialFrom(r.Header)
	if err != nil || cred.Kind != auth.SessionHeader {
		return "", auth.SessionClaims{}, &tollgate.Error{Code: tollgate.CodeUnauthorized,
			Message: "this request carries no session: send its token in x-jwt, or its cookie"}
	}
	if check {
		p, err := h.svc.Authenticate(r.Context(), tollgate.Caller{Credential: cred, Addr: h.door.Addr(r), Verify: true})
		if err != nil {
			return "", auth.SessionClaims{}, err
		}
		reqlog.From(r.Context()).Identify(p.Account.ID, p.Key.ID)
	}
	c, err := h.sessions.Parse(cred.Value, h.svc.Now())
	if err != nil {
		return "", auth.SessionClaims{}, &tollgate.Error{Code: tollgate.CodeUnauthorized, Message: err.Error(), Err: err}
	}
	return cred.Value, c, nil
}

// current serves GET /v1/account/session.
func (h *Handler) current(w http.ResponseWriter, r *http.Request) {
	_, c, err := h.sessionOf(r, true)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	h.door.WriteJSON(w, r, http.StatusOK, sessionInfo{ID: c.ID, Account: c.Account, KeyID: c.KeyID, ExpiresAt: c.Expires,
		CSRFToken: h.sessions.CSRFToken(c.ID)})
}

// end serves DELETE /v1/account/session: it ends the session, and clears the cookie.
// The cookie is kept when the session could not be ended (its store is down): the
// page may sign out again, and the session is not left alive behind a cleared cookie.
func (h *Handler) end(w http.ResponseWriter, r *http.Request) {
	token, _, err := h.sessionOf(r, false)
	if err == nil {
		err = h.mgr.EndSession(r.Context(), token, h.door.Addr(r))
	}
	if e := (*tollgate.Error)(nil); err != nil && !errors.Is(err, auth.ErrSessionExpired) &&
		(!errors.As(err, &e) || e.Code == tollgate.CodeUnavailable || e.Code == tollgate.CodeInternal) {
		h.writeError(w, r, err) // the service failed: the session may still be alive
		return
	}
	if _, cerr := r.Cookie(h.cookieName(r)); cerr == nil {
		h.setCookie(w, r, "", time.Time{}) // a session that ended, or a cookie that names none
	}
	if err != nil && !errors.Is(err, auth.ErrSessionExpired) {
		h.writeError(w, r, err)
		return
	}
	h.door.WriteJSON(w, r, http.StatusOK, map[string]bool{"ended": true})
}

// writeError answers a refusal or a failure as the edge does, but for a missing or
// malformed credential: a 401 envelope with its code, not the edge's bare page, because
// a session may start without a credential header (a key in the body, the host's login)
// and a page must be able to read why it was refused.
func (h *Handler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if e := (*tollgate.Error)(nil); edge.Denied(err) && errors.As(err, &e) {
		edge.WriteEnvelopeError(w, http.StatusUnauthorized, e.Code.String(), e.Message)
		return
	}
	h.door.WriteError(w, r, err, nil)
}
