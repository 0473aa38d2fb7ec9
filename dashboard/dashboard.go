package dashboard

import (
	"bytes"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/brand"
	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/internal/paramdoc"
	"github.com/tollgate-dev/tollgate/internal/reqlog"
	"github.com/tollgate-dev/tollgate/webhook"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// ContentSecurityPolicy is the Content-Security-Policy of every dashboard response:
// only the dashboard's own script, styles and images (and data: images), no framing,
// forms posted only to the dashboard's own origin. The GraphQL explorer's adds to
// style-src the nonce of the style element its editor writes, new on every response.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"frame-ancestors 'none'; form-action 'self'; base-uri 'none'"

// CSRFField is the name of the hidden form field that carries the session's CSRF token.
const CSRFField = "csrf_token"

// maxForm bounds the body of a form post.
const maxForm = 64 << 10

// Options configures a [Handler]. The zero value is the default; opts may be nil.
type Options struct {
	// Logger receives the failures of the service that the pages cannot show as a
	// person's mistake (a store that is down). The default is slog.Default(). Neither
	// key values, session tokens nor form contents are ever logged.
	Logger *slog.Logger
	// Brand is the operator's brand: its Name is the default Title, its command and
	// environment variables those of the command-line client and of the packages'
	// examples in the snippets. The zero value is brand.Default(); an invalid brand
	// is an error.
	Brand brand.Brand
	// Title names the portal in every page's header and title. The default is the
	// brand's Name ("Tollgate").
	Title string
	// PublicURL is the service's public root URL, such as https://api.example.com: the
	// MCP page gives its MCP endpoint as PublicURL + "/v1/mcp", and the APIs' code
	// calls PublicURL + "/v1/<api_id>". The default is the
	// scheme and host each request came to (http unless the request came over TLS), so
	// a host behind a proxy that ends TLS sets it.
	PublicURL string
	// GraphQL, if set, judges queries as the service's GraphQL gateway does
	// (doors.QueryCosts of the *gql.Handler): the dashboard then offers the GraphQL
	// explorer, which sends queries to /v1/graphql with the session cookie (the host
	// mounts the gateway behind session.Handler.Cookies) and shows each query's cost,
	// judged by the gateway's Estimate, before it runs. doors.Mount sets it.
	GraphQL Estimator
	// Packages are the names the host's generated client packages have (the flags it
	// runs tollgate-gen with), for the examples on the APIs page. The zero value is
	// the generator's defaults.
	Packages PackageNames
	// LoginFields are the fields of the host's own sign-in form, shown on the sign-in
	// page when the session handler has a Login (session.Options.Login): the form
	// posts them, and the Login reads them from the request (r.PostFormValue). A Login
	// that needs no field (the host's single sign-on cookie, say) leaves it empty: the
	// page then offers a button. Setting it without a Login is an error.
	LoginFields []LoginField
	// LoginTitle heads the host's sign-in form. The default is "Sign in with your
	// account".
	LoginTitle string
	// Webhooks, if set, manages the webhook endpoints (webhook.NewEndpoints, the one
	// the account holders' API serves): the dashboard then offers the Webhooks page,
	// where the account's holder manages the account's endpoints with the rules of
	// /v1/account/webhooks. Nil: no Webhooks page, and no link to it. doors.Mount sets
	// it from doors.Options.Webhooks.
	Webhooks *webhook.Endpoints
}

// Handler serves the dashboard. Create it with [NewHandler].
type Handler struct {
	mgr      *accounts.Manager
	svc      *tollgate.Service
	sessions Sessions
	log      *slog.Logger
	title    string
	brand    brand.Brand
	// publicURL is Options.PublicURL without a trailing slash.
	publicURL string
	graphql   Estimator
	webhooks  *webhook.Endpoints
	packages  PackageNames
	login     loginForm
	pages     map[string]*template.Template
	mux       *http.ServeMux
}

// Sessions is the session door as the dashboard's pages use it: a *session.Handler, the
// one the host mounts for /v1/account/session, so that one cookie serves both.
type Sessions interface {
	// Visit returns the live session r's cookie carries.
	Visit(r *http.Request) (edge.Visit, bool)
	// CheckCSRF reports whether token is the visit's CSRF token.
	CheckCSRF(v edge.Visit, token string) bool
	// CheckOrigin refuses a request from another origin than the service's own.
	CheckOrigin(r *http.Request) error
	// SignIn starts a session with an API key and sets its cookie; field names the
	// form's field in messages.
	SignIn(w http.ResponseWriter, r *http.Request, field, apiKey string) (accounts.Session, error)
	// HasLogin reports whether the host has its own sign-in, and SignInWithLogin
	// starts a session through it (its refusals wrap accounts.ErrLoginRefused).
	HasLogin() bool
	SignInWithLogin(w http.ResponseWriter, r *http.Request) (accounts.Session, error)
	// SignOut ends the session r's cookie carries, and clears the cookie.
	SignOut(w http.ResponseWriter, r *http.Request) error
}

// NewHandler returns the dashboard of the accounts that mgr manages. sessions is the
// session handler the host mounts for /v1/account/session (the dashboard signs in and
// out through it, so that one cookie serves both). Its service must have sessions
// (tollgate.Options.Sessions and SessionStore), which session.NewHandler has
// checked. opts may be nil.
func NewHandler(mgr *accounts.Manager, sessions Sessions, opts *Options) (*Handler, error) {
	switch {
	case mgr == nil:
		return nil, errors.New("dashboard: NewHandler needs an accounts.Manager")
	case sessions == nil:
		return nil, errors.New("dashboard: NewHandler needs the session handler (session.NewHandler)")
	case !mgr.CanEndSessions():
		return nil, errors.New("dashboard: the service has no session tokens: set tollgate.Options.Sessions")
	}
	if opts == nil {
		opts = &Options{}
	}
	if err := opts.Brand.Check(); err != nil {
		return nil, errors.New("dashboard: Options.Brand: " + strings.TrimPrefix(err.Error(), "brand: "))
	}
	h := &Handler{mgr: mgr, svc: mgr.Service(), sessions: sessions, log: opts.Logger, title: opts.Title, mux: http.NewServeMux(),
		graphql: opts.GraphQL, webhooks: opts.Webhooks, packages: opts.Packages, brand: opts.Brand.OrDefault()}
	if h.log == nil {
		h.log = slog.Default()
	}
	if h.title == "" {
		h.title = h.brand.Name
	}
	var err error
	if opts.PublicURL != "" {
		if h.publicURL, err = checkPublicURL(opts.PublicURL); err != nil {
			return nil, err
		}
	}
	if err := h.names().Check(); err != nil {
		field := "Packages"
		if strings.HasPrefix(err.Error(), "-brand-") {
			field = "Brand" // a command that would name the packages' base error class as another
		}
		return nil, errors.New("dashboard: Options." + field + ": " + err.Error())
	}
	if h.login, err = newLoginForm(sessions, opts.LoginFields, opts.LoginTitle); err != nil {
		return nil, err
	}
	if h.pages, err = parsePages(); err != nil {
		return nil, err
	}
	assets, err := fs.Sub(assetFS, "assets")
	if err != nil {
		return nil, err
	}
	files, err := newAssetServer(assets)
	if err != nil {
		return nil, err
	}
	h.mux.Handle("GET /assets/", http.StripPrefix("/assets/", files))
	h.mux.HandleFunc("GET /sign-in", h.signInPage)
	h.mux.HandleFunc("POST /sign-in", h.signIn)
	h.mux.HandleFunc("POST /login", h.signInLogin)
	h.mux.HandleFunc("POST /sign-out", h.form(h.signOut))
	h.mux.HandleFunc("GET /{$}", h.page(h.overview))
	h.mux.HandleFunc("GET /keys", h.page(h.keys))
	h.mux.HandleFunc("POST /keys", h.form(h.createKey))
	h.mux.HandleFunc("GET /rotate", h.page(h.confirmRotate))
	h.mux.HandleFunc("POST /rotate", h.form(h.rotate))
	h.mux.HandleFunc("GET /revoke", h.page(h.confirmRevoke))
	h.mux.HandleFunc("POST /revoke", h.form(h.revoke))
	h.mux.HandleFunc("GET /apis", h.page(h.apisPage))
	h.mux.HandleFunc("GET /api", h.page(h.apiPage))
	h.mux.HandleFunc("POST /api", h.formUpTo(h.tryLimit, h.try))
	h.mux.HandleFunc("GET /usage", h.page(h.usagePage))
	h.mux.HandleFunc("GET /usage.csv", h.page(h.usageCSV))
	h.mux.HandleFunc("GET /audit", h.page(h.auditLog))
	h.mux.HandleFunc("GET /mcp", h.page(h.mcpPage))
	h.mux.HandleFunc("GET /graphql", h.page(h.explorerPage))
	h.mux.HandleFunc("POST /graphql/cost", h.queryCost)
	h.mux.HandleFunc("GET /reference", h.page(h.referencePage))
	if h.webhooks != nil {
		h.webhookRoutes()
	}
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h.render(w, r, http.StatusNotFound, "message", &view{Title: "Page not found",
			Message: "There is no dashboard page at this address.", Link: "./", LinkText: "Go to the overview"})
	})
	return h, nil
}

// parsePages parses each page template with the layout.
func parsePages() (map[string]*template.Template, error) {
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if name == "layout" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", n)
		if err != nil {
			return nil, err
		}
		pages[name] = t
	}
	return pages, nil
}

// ServeHTTP sets the security headers every response carries and routes the request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", ContentSecurityPolicy)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.mux.ServeHTTP(w, r)
}

// A view is what a page template reads.
type view struct {
	// Title is the page's heading and title; Nav the navigation entry it is under.
	Title, Nav string
	// Portal is the name of the portal.
	Portal string
	// Account is the account signed in ("" on the sign-in page), CSRF its token.
	Account, CSRF string
	// Notice and Error are messages shown at the top of the page.
	Notice, Error string
	// Message, Link and LinkText are the body of the "message" page.
	Message, Link, LinkText string
	// Data is the page's own data.
	Data any
	// GraphQL is set when the dashboard offers the GraphQL explorer, Webhooks when it
	// offers the Webhooks page.
	GraphQL, Webhooks bool
	// Nonce is the nonce of the page's Content-Security-Policy, for the style element
	// its script writes ("" for a page without one).
	Nonce string
	// Suspended is set when the account is suspended: the page says so in a banner.
	Suspended bool
}

// render writes the page with status. Pages are never cached: one may show a key's
// value.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, page string, v *view) {
	v.Portal, v.GraphQL, v.Webhooks = h.title, h.graphql != nil, h.webhooks != nil
	var buf bytes.Buffer
	if err := h.pages[page].Execute(&buf, v); err != nil {
		h.log.ErrorContext(r.Context(), "dashboard: a page cannot be rendered", "page", page, "error", err)
		http.Error(w, "internal error: the page cannot be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// seeOther redirects to a path relative to the dashboard's root (all pages are at its
// first level), so that the dashboard works wherever it is mounted.
func seeOther(w http.ResponseWriter, to string) {
	w.Header().Set("Location", to)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusSeeOther)
}

// A visit is a request of a signed-in person.
type visit struct {
	edge.Visit
	// suspended is set when the account is suspended, as the page's check of the
	// session read it (see page): every page then says so.
	suspended bool
}

// view returns a view of a page for the visit.
func (v *visit) view(title, nav string) *view {
	return &view{Title: title, Nav: nav, Account: v.Claims.Account, CSRF: v.CSRFToken, Suspended: v.suspended}
}

// visitOf returns the visit of r, or false if r carries no live session cookie.
func (h *Handler) visitOf(r *http.Request) (*visit, bool) {
	sv, ok := h.sessions.Visit(r)
	if !ok {
		return nil, false
	}
	return &visit{Visit: sv}, true
}

// page makes a handler of a GET page for signed-in people: others are sent to the
// sign-in page. The session is checked with the service before any page is served,
// whether or not the page asks the service for anything else, so that every page
// sends the person to sign in once the session has ended (signed out elsewhere, or
// its key rotated, revoked or expired).
func (h *Handler) page(serve func(http.ResponseWriter, *http.Request, *visit)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, ok := h.visitOf(r)
		if !ok {
			seeOther(w, "sign-in")
			return
		}
		c := v.Caller
		c.Verify = true
		p, err := h.svc.Authenticate(r.Context(), c)
		if err != nil {
			h.failed(w, r, v, err)
			return
		}
		reqlog.From(r.Context()).Identify(p.Account.ID, p.Key.ID)
		v.suspended = p.Account.State == auth.AccountSuspended
		serve(w, r, v)
	}
}

// form makes a handler of a form post that changes something: it must come from the
// service's own origin, with a live session and the session's CSRF token; otherwise
// it is refused with 403 before anything is read or changed.
func (h *Handler) form(serve func(http.ResponseWriter, *http.Request, *visit)) http.HandlerFunc {
	return h.formUpTo(nil, serve)
}

// formUpTo is form for a post that may be a multipart form (a file upload) of at most
// limit(r) bytes; nil takes URL-encoded forms of at most 64 KiB only.
func (h *Handler) formUpTo(limit func(*http.Request) int64, serve func(http.ResponseWriter, *http.Request, *visit)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h.sessions.CheckOrigin(r); err != nil {
			h.refuse(w, r, "This form was sent from another site's page, so it was refused. Use the dashboard's own pages.")
			return
		}
		max := int64(maxForm)
		multipart := limit != nil && strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data")
		if multipart {
			max = limit(r)
		}
		r.Body = http.MaxBytesReader(w, r.Body, max)
		var err error
		if multipart {
			err = r.ParseMultipartForm(max) // all in memory: the body is bounded
		} else {
			err = r.ParseForm()
		}
		if err != nil {
			status, msg := http.StatusBadRequest, "The form is not valid."
			if tooBig := (*http.MaxBytesError)(nil); errors.As(err, &tooBig) {
				status, msg = http.StatusRequestEntityTooLarge, "The form is larger than the "+paramdoc.Bytes(max)+" it may be."
			}
			h.render(w, r, status, "message", &view{Title: "The form cannot be read",
				Message: msg, Link: "./", LinkText: "Go to the overview"})
			return
		}
		v, ok := h.visitOf(r)
		if !ok {
			h.refuse(w, r, "You are not signed in, or your session has ended. Sign in again, then retry.")
			return
		}
		if !h.sessions.CheckCSRF(v.Visit, r.PostForm.Get(CSRFField)) {
			h.refuse(w, r, "This form does not carry your session's security token, so it was refused. Reload the page and send it again.")
			return
		}
		serve(w, r, v)
	}
}

// refuse answers 403 with a page that says why.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, msg string) {
	h.render(w, r, http.StatusForbidden, "message", &view{Title: "Request refused", Message: msg,
		Link: "./", LinkText: "Go to the overview"})
}

// failed answers a refusal or failure of the service on a page: a person's mistake
// with its message and the status of its code; a session that no longer works sends
// them to sign in; an outage is logged.
func (h *Handler) failed(w http.ResponseWriter, r *http.Request, v *visit, err error) {
	code := tollgate.CodeOf(err)
	switch code {
	case tollgate.CodeUnauthorized, tollgate.CodeNoCredential, tollgate.CodeMalformedCredential:
		seeOther(w, "sign-in?ended=1")
		return
	}
	status, msg := statusOf(err)
	if status >= 500 {
		h.log.ErrorContext(r.Context(), "dashboard: the service failed", "account", v.Claims.Account, "code", code.String(), "error", err)
	}
	setRetryAfter(w, err)
	page := v.view("Something went wrong", "")
	page.Message, page.Link, page.LinkText = msg, "./", "Go to the overview"
	h.render(w, r, status, "message", page)
}

// setRetryAfter sets Retry-After for a refusal that says when to try again (an account
// past its self-service budget).
func setRetryAfter(w http.ResponseWriter, err error) {
	if e := (*tollgate.Error)(nil); errors.As(err, &e) && e.RetryAfter > 0 {
		edge.SetRetryAfter(w.Header(), e.RetryAfter)
	}
}

// statusOf returns the HTTP status of a service error (the envelope's, see
// edge.Status) and the message for a person.
func statusOf(err error) (int, string) {
	var e *tollgate.Error
	if !errors.As(err, &e) {
		return http.StatusInternalServerError, "Internal error: the request could not be completed. Try again later."
	}
	switch status := edge.Status(e.Code); {
	case e.Code == tollgate.CodeUnavailable:
		return status, "The service cannot answer now; try again shortly."
	case status >= 500:
		return status, "Internal error: the request could not be completed. Try again later."
	case e.Code == tollgate.CodeNoCredential || e.Code == tollgate.CodeMalformedCredential:
		return http.StatusUnauthorized, e.Message
	default:
		return status, e.Message
	}
}

// signInPage serves the sign-in form; a signed-in person goes to the overview.
func (h *Handler) signInPage(w http.ResponseWriter, r *http.Request) {
	if _, ok := h.visitOf(r); ok {
		seeOther(w, "./")
		return
	}
	notice := ""
	switch {
	case r.URL.Query().Has("ended"):
		notice = "Your session has ended. Sign in again."
	case r.URL.Query().Has("signed_out"):
		notice = "You have signed out."
	}
	h.renderSignIn(w, r, http.StatusOK, &view{Notice: notice}, nil)
}

// signIn starts a session with the API key of the form. The key is never echoed back,
// logged, or put in a URL.
func (h *Handler) signIn(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		h.renderSignIn(w, r, http.StatusBadRequest, &view{Error: "The form is not valid or is larger than 64 KiB."}, nil)
		return
	}
	key := r.PostForm.Get("api_key")
	if strings.TrimSpace(key) == "" {
		h.renderSignIn(w, r, http.StatusBadRequest, &view{Error: "Enter your API key."}, nil)
		return
	}
	_, err := h.sessions.SignIn(w, r, "The API key", key)
	if err != nil {
		setRetryAfter(w, err)
		status, msg := statusOf(err)
		if status >= 500 {
			h.log.ErrorContext(r.Context(), "dashboard: a session cannot be started", "code", tollgate.CodeOf(err).String(), "error", err)
		}
		h.renderSignIn(w, r, status, &view{Error: msg}, nil)
		return
	}
	seeOther(w, "./")
}

// signOut ends the session.
func (h *Handler) signOut(w http.ResponseWriter, r *http.Request, v *visit) {
	if err := h.sessions.SignOut(w, r); err != nil {
		h.failed(w, r, v, err)
		return
	}
	seeOther(w, "sign-in?signed_out=1")
}

// funcs are the template functions.
var funcs = template.FuncMap{
	"date": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04 UTC")
	},
	"day": func(t time.Time) string { return t.UTC().Format("2006-01-02") },
	"num": formatInt,
	"ms":  millis,
}

// formatInt writes n with thousands separators.
func formatInt(n int64) string {
	digits := strconv.FormatInt(n, 10)
	sign := ""
	if n < 0 {
		sign, digits = "-", digits[1:]
	}
	var out strings.Builder
	for i, d := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			out.WriteByte(',')
		}
		out.WriteRune(d)
	}
	return sign + out.String()
}
