package dashboard_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/dashboard"
	"github.com/tollgate-dev/tollgate/doors"
	"github.com/tollgate-dev/tollgate/examples/apis"
	"github.com/tollgate-dev/tollgate/gql"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/rest"
	"github.com/tollgate-dev/tollgate/selfservice"
	"github.com/tollgate-dev/tollgate/session"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/usage"
	"github.com/tollgate-dev/tollgate/webhook"
)

// env is a host as examples/server assembles it: REST at /v1/, the session routes,
// the self-service API and GraphQL behind the session cookie, and the dashboard at
// /dashboard/ (with the GraphQL explorer and the Webhooks page),
// on in-memory stores with an audit log, usage statistics and webhook endpoints (which
// may be on private hosts, for a receiver the test starts), a clock the test moves,
// and a log the test reads.
type env struct {
	svc *tollgate.Service
	mgr *accounts.Manager
	// rec records the usage statistics; it flushes only when a test calls Flush.
	rec   *usage.Recorder
	srv   *httptest.Server
	clock *testenv.Clock
	logs  *testenv.Logs
	// key is the value of the primary key of account "acme".
	key string
	// hooks manages the webhook endpoints that hookStore keeps.
	hooks     *webhook.Endpoints
	hookStore *memory.WebhookStore
}

// newEnv starts the host. Its catalog has alpha (1 credit), beta (2) and vault (5,000,
// more than the plan's allowance), which take no parameters, the sample catalog (hash,
// hmac, uuid-generator, date-info, echo, image-info), and broken, which fails on the
// service's side. Its plans are starter (1000 credits, three APIs per GraphQL query)
// and tiny (1 credit, 2 calls a minute).
func newEnv(t *testing.T) *env { return newEnvWith(t, nil) }

// newEnvWith starts the host, with opts (if not nil) changing the options of the
// session handler and the dashboard (whose Webhooks it finds set to e.hooks).
func newEnvWith(t *testing.T, opts func(*session.Options, *dashboard.Options)) *env {
	t.Helper()
	reg := &catalog.Registry{}
	for id, cost := range map[string]int64{"alpha": 1, "beta": 2, "vault": 5000} {
		if err := reg.Register(catalog.API{ID: id, Method: http.MethodGet, Cost: cost,
			Handler: catalog.HandlerFunc(func(context.Context, *catalog.Request) (any, error) {
				return map[string]any{"api": id}, nil
			})}); err != nil {
			t.Fatal(err)
		}
	}
	if err := apis.Register(reg); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(catalog.API{ID: "broken", Title: "Broken", Description: "Always fails on the service's side.",
		Method: http.MethodGet, Cost: 3,
		Handler: catalog.HandlerFunc(func(context.Context, *catalog.Request) (any, error) {
			return nil, errors.New("the disk is on fire")
		})}); err != nil {
		t.Fatal(err)
	}
	plans, err := billing.NewPlans(billing.Plan{Name: "starter", Credits: 1000, RatePerMinute: 600, Concurrency: 4, GraphQLMaxAPIs: 3},
		billing.Plan{Name: "tiny", Credits: 1, RatePerMinute: 2, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	sessions, err := auth.NewSessions([]byte("dashboard-test-secret-0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{clock: testenv.NewClock(time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC)), logs: &testenv.Logs{}}
	logger := e.logs.Logger()
	stores := tollgate.Stores{Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
		Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter()}
	e.svc, err = tollgate.New(reg, stores, plans,
		&tollgate.Options{Now: e.clock.Now, Logger: logger, Sessions: sessions, SessionStore: memory.NewSessionStore(),
			SweepInterval: -1, Fetch: tollgate.FetchOptions{AllowPrivate: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.svc.Close)
	e.mgr, e.rec = manage(t, e.svc, stores, memory.NewAuditStore(), memory.NewUsageStore(), e.clock.Now, logger)
	e.hookStore = memory.NewWebhookStore()
	e.hooks = webhook.NewEndpoints(e.hookStore, e.svc.Events(), &webhook.EndpointsOptions{AllowPrivate: true, Now: e.clock.Now, Logger: logger})
	mux := mount(t, e.mgr, logger, func(so *session.Options, do *dashboard.Options) {
		do.Webhooks = e.hooks
		if opts != nil {
			opts(so, do)
		}
	})
	e.srv = httptest.NewServer(mux)
	t.Cleanup(e.srv.Close)
	_, _, e.key, err = e.mgr.CreateAccount(t.Context(), accounts.Spec{ID: "acme", Plan: "starter"})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// manage subscribes to svc's events an audit log and a usage recorder (which flushes
// only when told, and prunes with the clock now), as examples/server does, and returns
// the manager of svc's accounts that reads them. The test's cleanup closes them.
func manage(t testing.TB, svc *tollgate.Service, stores tollgate.Stores, auditStore audit.Store, usageStore usage.Store,
	now func() time.Time, logger *slog.Logger) (*accounts.Manager, *usage.Recorder) {
	t.Helper()
	auditLog := audit.NewLog(auditStore, &audit.LogOptions{Now: now, Logger: logger})
	svc.Events().Subscribe(auditLog, auditLog.Kinds()...)
	t.Cleanup(auditLog.Close)
	rec, err := usage.NewRecorder(usageStore, &usage.RecorderOptions{FlushInterval: -1, Now: now, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	svc.Events().Subscribe(rec, rec.Kinds()...)
	t.Cleanup(func() {
		if err := rec.Close(context.Background()); err != nil {
			t.Errorf("closing the usage recorder: %v", err)
		}
	})
	mgr, err := accounts.New(svc, &accounts.Options{Audit: auditStore, Usage: usageStore, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mgr.Close)
	return mgr, rec
}

// mount returns the host's routes over the service mgr manages, as examples/server
// mounts them: REST at /v1/, the session routes, the self-service API and GraphQL
// behind the session cookie, and the dashboard at /dashboard/. opts, if not nil,
// changes the options of the session handler and the dashboard; the self-service API
// serves the dashboard's Webhooks.
func mount(t testing.TB, mgr *accounts.Manager, logger *slog.Logger, opts func(*session.Options, *dashboard.Options)) *http.ServeMux {
	t.Helper()
	svc := mgr.Service()
	restH, err := rest.NewHandler(svc, &rest.Options{Accounts: mgr, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	sessOpts, dashOpts := &session.Options{Logger: logger}, &dashboard.Options{Logger: logger}
	if opts != nil {
		opts(sessOpts, dashOpts)
	}
	sessH, err := session.NewHandler(mgr, sessOpts)
	if err != nil {
		t.Fatal(err)
	}
	accountH, err := selfservice.NewHandler(mgr, &selfservice.Options{Webhooks: dashOpts.Webhooks})
	if err != nil {
		t.Fatal(err)
	}
	gqlH, err := gql.NewHandler(svc, &gql.Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	dashOpts.GraphQL = doors.QueryCosts(gqlH)
	dash, err := dashboard.NewHandler(mgr, sessH, dashOpts)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", restH)
	mux.Handle("/v1/account/session", sessH)
	mux.Handle("/v1/account", sessH.Cookies(accountH))
	mux.Handle("/v1/account/", sessH.Cookies(accountH))
	mux.Handle("/v1/graphql", sessH.Cookies(gqlH))
	mux.Handle("/dashboard/", http.StripPrefix("/dashboard", dash))
	return mux
}

// browser is an HTTP client with a cookie jar that does not follow redirects, as a
// browser on the dashboard's own pages (it sends no Origin or Sec-Fetch-Site, which
// a same-origin request may lack).
type browser struct {
	t *testing.T
	e *env
	c *http.Client
}

func (e *env) browser(t *testing.T) *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, e: e, c: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// page is an answer of the dashboard.
type page struct {
	status int
	header http.Header
	body   string
}

// do sends a request to path (under the server's root); form, if not nil, is posted.
// hdr holds header name/value pairs.
func (b *browser) do(method, path string, form url.Values, hdr ...string) page {
	b.t.Helper()
	if form == nil {
		return b.send(method, path, "", "", hdr...)
	}
	return b.send(method, path, "application/x-www-form-urlencoded", form.Encode(), hdr...)
}

// send sends a request to path with a body of the content type ct ("" for none), and
// header name/value pairs, which may replace the content type.
func (b *browser) send(method, path, ct, body string, hdr ...string) page {
	b.t.Helper()
	req, err := http.NewRequestWithContext(b.t.Context(), method, b.e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		b.t.Fatal(err)
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return page{status: res.StatusCode, header: res.Header, body: string(data)}
}

// signIn signs in with key and returns the session's CSRF token, read from the
// overview's sign-out form.
func (b *browser) signIn(key string) string {
	b.t.Helper()
	p := b.do("POST", "/dashboard/sign-in", url.Values{"api_key": {key}})
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "./" {
		b.t.Fatalf("sign in: %d %q\n%s", p.status, p.header.Get("Location"), p.body)
	}
	return b.csrf(b.do("GET", "/dashboard/", nil))
}

// csrf returns the CSRF token of the page's forms.
func (b *browser) csrf(p page) string {
	b.t.Helper()
	_, rest, ok := strings.Cut(p.body, `name="csrf_token" value="`)
	if !ok {
		b.t.Fatalf("no CSRF field in the page (%d):\n%s", p.status, p.body)
	}
	token, _, _ := strings.Cut(rest, `"`)
	return token
}

// call calls an API over REST with a key and returns the status.
func (e *env) call(t *testing.T, api, key string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", e.srv.URL+"/v1/"+api, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-api-key", key)
	res, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// caller is the primary key as a self-service caller.
func (e *env) caller() tollgate.Caller {
	return tollgate.Caller{Credential: auth.Credential{Kind: auth.APIKeyHeader, Value: e.key}}
}

// primaryID returns the id of the account's primary key.
func (e *env) primaryID(t *testing.T) string {
	t.Helper()
	page, err := e.mgr.OwnKeys(t.Context(), e.caller(), auth.KeyQuery{Limit: auth.MaxKeyPage})
	keys := page.Keys
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if k.Primary {
			return k.ID
		}
	}
	t.Fatal("the account has no primary key")
	return ""
}
