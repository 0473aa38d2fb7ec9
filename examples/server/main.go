// Command server runs the sample catalog on in-memory stores: the whole of Tollgate in
// one process, for trying it out and for the end-to-end tests.
//
//	go run ./examples/server
//
// It listens on :8080, creates a demo account on the "pro" plan and prints its key:
//
//	API key: 3f1c...
//
// The dashboard, the account holders' web pages, is at /dashboard/: sign in there with
// the key. Besides the account's figures and keys it has a GraphQL explorer (queries
// run as the signed-in session, their cost shown before they run) and the API
// reference drawn from /v1/openapi.json. Its address is printed after the listening
// address:
//
//	Dashboard: http://localhost:8080/dashboard/ (sign in with the API key)
//
// Webhooks: account holders register endpoints at /v1/account/webhooks (with the
// primary key), operators theirs at /admin/v1/webhooks (with -admin-token), and the
// server posts them the account's events (keys, credits, plans, the account's state),
// signed, retried on the default schedule (or -webhook-schedule's); the endpoints and
// the outbox are in memory.
//
// Sessions start at /v1/account/session, with a key (POST with x-api-key) or sign out
// (DELETE): a browser gets an HttpOnly cookie and a CSRF token, a program asks for a
// token ({"kind":"token"}) to send as x-jwt.
//
// It serves REST at /v1/{api_id}, GraphQL at /v1/graphql and the MCP tool connection at
// /v1/mcp (Streamable HTTP): an MCP client sends the key in x-api-key, or connects
// without one and authorizes with OAuth, approving with a key on the consent page.
//
// Flags:
//
//	-addr ADDR             listen address (default :8080)
//	-fixtures FILE         load plans, accounts and keys from FILE instead of the demo account
//	-admin-token T         enable the admin API under /admin/v1/ with this bearer token
//	-session-secret S      sign session tokens (x-jwt, and the browser session cookie) with S
//	                       (at least 32 bytes); without fixtures, a session token for the demo
//	                       account is printed. Without it, sessions are signed with a random
//	                       secret made at start, so they all end when the server stops
//	-allow-private-fetch   let URL-form file fetches, the fetches of OAuth client metadata
//	                       documents and webhook deliveries reach private and loopback
//	                       addresses, and webhook endpoints have such URLs: for local
//	                       development and tests (a receiver on this machine)
//	-public-url URL        the origin clients reach the server at, the OAuth issuer
//	                       (default http://localhost:PORT, PORT the one listened on)
//	-ietf-rate-headers     add the IETF draft's RateLimit and RateLimit-Policy headers to
//	                       every door's answers (REST, batches, GraphQL, MCP), besides X-RateLimit-*
//	-webhook-schedule W    the waits between a webhook delivery's attempts, durations
//	                       separated by commas (1s,5s,30s: retries 1, 5 and 30 seconds after
//	                       the attempt before); default the deliverer's (5s, 5m, 30m, ...
//	                       about three days), shorter for trying out a failing receiver
//	-webhook-timeout D     how long a webhook delivery's attempt may take (default 15s)
//	-ops-addr ADDR         serve the operators' endpoints, /healthz, /readyz and /metrics, on a
//	                       listener of their own at ADDR, such as 127.0.0.1:9090 (default: none)
//
// With -ops-addr, /healthz answers 200 while the server serves, /readyz 200 when every
// store answers (503 naming those that do not; in memory they always answer), and GET
// /metrics serves the Prometheus metrics of package metrics (docs/metrics.md): the
// calls, refusals, credits and settlements, the stores' latency, and the queues of the
// usage statistics, the audit log and the webhooks, and the MCP sessions. Their address
// is printed after the dashboard's:
//
//	Ops endpoints at http://127.0.0.1:9090 (/healthz, /readyz, /metrics)
//
// The operators' listener is shut down after the API's, so that it answers while the
// calls in flight finish.
//
// Everything lives in memory: stop the server and it is gone.
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/doors"
	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/examples/apis"
	"github.com/tollgate-dev/tollgate/examples/internal/fixtures"
	"github.com/tollgate-dev/tollgate/health"
	"github.com/tollgate-dev/tollgate/internal/ops"
	"github.com/tollgate-dev/tollgate/internal/webhookflag"
	"github.com/tollgate-dev/tollgate/metrics"
	"github.com/tollgate-dev/tollgate/oauth"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/usage"
	"github.com/tollgate-dev/tollgate/webhook"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	var usage usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.As(err, &usage):
		os.Exit(2) // the flag package has printed the problem and the usage
	default:
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(1)
	}
}

// config is what the flags set.
type config struct {
	addr              string
	fixtures          string
	adminToken        string
	sessionSecret     string
	allowPrivateFetch bool
	publicURL         string
	ietfRateHeaders   bool
	// webhookSchedule is -webhook-schedule as given, checked ("" for the default);
	// webhookTimeout -webhook-timeout (0 for the default).
	webhookSchedule string
	webhookTimeout  time.Duration
	// clock is the service's clock, which no flag sets: nil is the time of day (tests
	// move it).
	clock   interface{ Now() time.Time }
	opsAddr string // "" for no operators' listener
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.addr, "addr", ":8080", "listen address")
	fs.StringVar(&c.fixtures, "fixtures", "", "load plans, accounts and keys from this JSON file")
	fs.StringVar(&c.adminToken, "admin-token", "", "enable the admin API with this bearer token")
	fs.StringVar(&c.sessionSecret, "session-secret", "", "accept x-jwt session tokens signed with this secret")
	fs.BoolVar(&c.allowPrivateFetch, "allow-private-fetch", false, "let URL-form file fetches, OAuth client metadata fetches and webhook deliveries reach private and loopback addresses")
	fs.StringVar(&c.publicURL, "public-url", "", "the origin clients reach the server at, the OAuth issuer (default http://localhost:PORT)")
	fs.BoolVar(&c.ietfRateHeaders, "ietf-rate-headers", false, "add the IETF draft's RateLimit and RateLimit-Policy headers to every door's answers")
	fs.StringVar(&c.opsAddr, "ops-addr", "", "serve /healthz, /readyz and /metrics on a listener of their own at this address (default: none)")
	fs.StringVar(&c.webhookSchedule, "webhook-schedule", "", "the waits between a webhook delivery's attempts, durations separated by commas, such as 1s,5s,30s (default the deliverer's: 5s, 5m, 30m, ... about three days)")
	fs.DurationVar(&c.webhookTimeout, "webhook-timeout", 0, "how long a webhook delivery's attempt may take (default 15s)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return c, err
		}
		return c, usageError{err}
	}
	var problem error
	switch {
	case fs.NArg() > 0:
		problem = fmt.Errorf("unexpected arguments %q", fs.Args())
	case c.webhookTimeout < 0:
		problem = fmt.Errorf("-webhook-timeout %s is negative: give a positive duration, or 0 for the default", c.webhookTimeout)
	default:
		_, problem = webhookflag.ParseSchedule(c.webhookSchedule)
	}
	if problem != nil {
		fmt.Fprintln(stderr, problem)
		fs.Usage()
		return c, usageError{problem}
	}
	return c, nil
}

// usageError is a command-line mistake, already reported with the usage.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// run assembles the service, prints how to reach it and serves until ctx is done.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))

	// Listen first: the OAuth issuer, by default, names the port listened on.
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	if c.publicURL == "" {
		c.publicURL = localURL(ln.Addr().String())
	}
	var opsLn net.Listener
	if c.opsAddr != "" {
		if opsLn, err = net.Listen("tcp", c.opsAddr); err != nil {
			return fmt.Errorf("-ops-addr: %w", err)
		}
		defer opsLn.Close()
	}
	a, err := assemble(ctx, c, stdout, logger)
	if err != nil {
		return err
	}
	// Once the server has stopped (calls in flight finished), the service and its
	// observers close: the last usage is flushed and the audit log's queue gets its last
	// attempt.
	defer a.close()

	// The host owns the server: its timeouts bound slow clients, the REST handler
	// bounds bodies.
	srv := &http.Server{
		Handler:           a.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	fmt.Fprintf(stdout, "Listening on http://%s\n", ln.Addr())
	fmt.Fprintf(stdout, "Dashboard: %s/dashboard/ (sign in with the API key)\n", strings.TrimSuffix(c.publicURL, "/"))

	// Serve until SIGINT or SIGTERM, then let calls in flight finish. The operators'
	// listener stops last: it answers while they do.
	servers, listeners := []*http.Server{srv}, []net.Listener{ln}
	if opsLn != nil {
		servers = append(servers, ops.NewServer(ops.Mux(a.ready, a.metrics), logger))
		listeners = append(listeners, opsLn)
		fmt.Fprintf(stdout, "Ops endpoints at http://%s (/healthz, /readyz, /metrics)\n", opsLn.Addr())
	}
	errc := make(chan error, len(servers))
	for i, s := range servers {
		go func() { errc <- s.Serve(listeners[i]) }()
	}
	defer func() {
		for _, s := range servers {
			s.Close() // after a server failed; nothing after a shutdown
		}
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, s := range servers {
		if err := s.Shutdown(shutdownCtx); err != nil {
			return err
		}
	}
	for range servers {
		if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	}
	return nil
}

// assembly is what assemble builds.
type assembly struct {
	handler http.Handler    // every door
	ready   *health.Checker // pings the stores, for /readyz
	metrics http.Handler    // the scrape of the metrics, for /metrics
	close   func()          // closes what assemble started, the observers last
}

// assemble builds the handler that serves everything, printing the demo credentials,
// the readiness check of its stores, and the function that closes what it started, in
// the reverse order (observers after the service and the manager that feed them).
func assemble(ctx context.Context, c config, stdout io.Writer, logger *slog.Logger) (_ *assembly, err error) {
	var closers []func()
	closeEverything := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	defer func() {
		if err != nil {
			closeEverything()
		}
	}()
	// 1. The catalog: the six sample APIs.
	reg := &catalog.Registry{}
	if err := apis.Register(reg); err != nil {
		return nil, err
	}

	// 2. Plans, from the fixtures or the two default plans.
	var fx *fixtures.File
	if c.fixtures != "" {
		f, err := os.Open(c.fixtures)
		if err != nil {
			return nil, err
		}
		fx, err = fixtures.Read(f)
		f.Close()
		if err != nil {
			return nil, err
		}
	} else {
		fx = &fixtures.File{Plans: defaultPlans}
	}
	plans, err := fx.PlanSet()
	if err != nil {
		return nil, err
	}

	// 3. The service, on in-memory stores. Batches sent with an Idempotency-Key keep
	// their answers in memory for a day (the service's default), so that a retried
	// batch runs and charges once.
	opts := &tollgate.Options{Logger: logger, Fetch: tollgate.FetchOptions{AllowPrivate: c.allowPrivateFetch}}
	if c.clock != nil {
		opts.Now = c.clock.Now
	}
	// Sessions: tokens signed with the -session-secret, or else with a random secret
	// made now, which signs nothing after the server stops (every session ends with
	// it). Signed-out sessions are remembered in memory until they expire.
	secret := []byte(c.sessionSecret)
	if c.sessionSecret == "" {
		secret = make([]byte, auth.MinSessionSecret)
		rand.Read(secret)
		logger.Info("sessions are signed with a random secret made at start: they end when the server stops; pass -session-secret to keep them across restarts")
	}
	if opts.Sessions, err = auth.NewSessions(secret); err != nil {
		return nil, err
	}
	// The Prometheus metrics (package metrics), on a registry of their own, served at
	// GET /metrics with -ops-addr: the stores are decorated, so that each operation is
	// timed, and health.New below is given the stores themselves (a decorator is no
	// health.Pinger).
	promReg := prometheus.NewRegistry()
	m, err := metrics.New(promReg, &metrics.Options{Now: opts.Now})
	if err != nil {
		return nil, err
	}
	sessionStore := memory.NewSessionStore()
	opts.SessionStore = m.SessionStore(sessionStore)
	keys, ledger, rates, slots := memory.NewKeyStore(), memory.NewLedger(nil), memory.NewRateLimiter(), memory.NewConcurrencyLimiter()
	stores := m.Stores(tollgate.Stores{Keys: keys, Ledger: ledger, Rates: rates, Slots: slots})
	svc, err := tollgate.New(reg, stores, plans, opts)
	if err != nil {
		return nil, err
	}
	// The service sweeps expired reservations in the background (see
	// tollgate.Options.SweepInterval); it stops when the server does. The metrics
	// observe its calls until then.
	closers = append(closers, svc.Close, m.Attach(svc))

	// Observers of the service's events. Every change to accounts, keys, credits and
	// sessions is recorded in an audit log, in memory like the rest, and kept 30 days;
	// the admin API serves it at /admin/v1/accounts/{account_id}/audit. Usage
	// statistics are recorded too, flushed every 5 seconds and kept for the default
	// retention (minute buckets 2 days, hour buckets 32 days, day buckets 400 days);
	// GET /v1/account/usage and /v1/analytics serve them (?from=&to=&interval=&by=).
	auditStore, usageStore := memory.NewAuditStore(), memory.NewUsageStore()
	auditLog := audit.NewLog(auditStore, &audit.LogOptions{Retention: 30 * 24 * time.Hour, Now: opts.Now, Logger: logger})
	svc.Events().Subscribe(auditLog, auditLog.Kinds()...)
	closers = append(closers, auditLog.Close)
	recorder, err := usage.NewRecorder(usageStore, &usage.RecorderOptions{FlushInterval: 5 * time.Second, Now: opts.Now, Logger: logger})
	if err != nil {
		return nil, err
	}
	svc.Events().Subscribe(recorder, recorder.Kinds()...)
	closers = append(closers, func() {
		flush, cancel := context.WithTimeout(context.Background(), usage.DefaultFlushTimeout)
		defer cancel()
		_ = recorder.Close(flush) // the recorder logs a failed flush
	})

	// Webhooks, their endpoints and outbox in memory: the dispatcher turns the
	// service's events into messages, the deliverer posts them (at once, then retried on
	// the schedule), and the endpoints are managed at /v1/account/webhooks and
	// /admin/v1/webhooks. -allow-private-fetch lets endpoints be on this machine or its
	// network, for a receiver run locally. The dispatcher also sweeps the key store for
	// the keys that expire (key.expired) and the accounts for their renewals
	// (period.renewed), the stores themselves: the metrics' decorators list no expiries.
	// They run until the server has stopped, so that the last calls' events are
	// enqueued, then the dispatcher flushes its queue. -webhook-schedule and
	// -webhook-timeout set the deliverer's retry schedule and the timeout of an attempt.
	schedule, err := webhookflag.ParseSchedule(c.webhookSchedule)
	if err != nil {
		return nil, err
	}
	hookOpts := &webhook.Options{AllowPrivate: c.allowPrivateFetch, Now: opts.Now, Logger: logger,
		Dispatcher: webhook.DispatcherOptions{Plans: plans, Keys: keys, Ledger: ledger},
		Deliverer:  webhook.DelivererOptions{Schedule: schedule, Timeout: c.webhookTimeout}}
	hookStore := memory.NewWebhookStore()
	hooks, err := webhook.New(hookStore, svc.Events(), hookOpts)
	if err != nil {
		return nil, err
	}
	hooksCtx, stopHooks := context.WithCancel(context.WithoutCancel(ctx))
	hooksDone := make(chan struct{})
	go func() {
		defer close(hooksDone)
		if err := hooks.Run(hooksCtx); err != nil {
			logger.Error("webhooks stopped", "error", err)
		}
	}()
	closers = append(closers, func() {
		stopHooks()
		<-hooksDone
		hooks.Close()
	})
	m.Watch(metrics.WebhookSources(hooks, hookStore))

	// The management of accounts: for operators (the admin API), account holders
	// (self-service, the dashboard) and sessions. What account holders can make the
	// server keep is bounded (see docs/behaviour.md, Bounds): revoked keys are kept 7 days (they
	// count for the cap of 100 keys per account until then), and session starts and
	// key changes spend a budget of 100 at once, then 30 an hour, per account.
	mgr, err := accounts.New(svc, &accounts.Options{Audit: auditStore, Usage: usageStore,
		RevokedKeyRetention: 7 * 24 * time.Hour, Logger: logger})
	if err != nil {
		return nil, err
	}
	closers = append(closers, mgr.Close)

	// 4. Accounts: the fixtures', or a demo account whose key is printed.
	if c.fixtures != "" {
		if err := fx.Load(ctx, mgr); err != nil {
			return nil, err
		}
	} else {
		acct, _, value, err := mgr.CreateAccount(ctx, accounts.Spec{ID: "demo", Plan: "pro"})
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(stdout, "API key: %s\n", value)
		if c.sessionSecret != "" {
			tok, err := opts.Sessions.Issue(acct.ID, svc.Now(), 24*time.Hour)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(stdout, "Session token: %s\n", tok)
		}
	}

	// 5. Every front door on one mux, sharing one HTTP edge (no trusted proxy here,
	// every origin for the doors that answer scripts): REST and batches at /v1/,
	// GraphQL, MCP, the account holders' API and sessions (the session cookie serves
	// the account API and GraphQL to browsers, with a CSRF token for every change), the
	// dashboard at /dashboard/, the admin API with -admin-token, and the OAuth
	// authorization server that sends MCP clients without a key through a person's
	// approval (its grants in memory, like the rest).
	publicURL := strings.TrimSuffix(c.publicURL, "/")
	if publicURL == "" {
		publicURL = localURL(c.addr)
	}
	oauthStore := memory.NewOAuthStore()
	mux := http.NewServeMux()
	mounted, err := doors.Mount(mux, svc, &doors.Options{
		Edge:       edge.Options{IETFRateHeaders: c.ietfRateHeaders},
		Accounts:   mgr,
		Webhooks:   hooks.Endpoints(),
		AdminToken: c.adminToken,
		OAuth: &doors.OAuth{Store: oauthStore,
			Options: oauth.Options{Fetch: oauth.FetchOptions{AllowPrivate: c.allowPrivateFetch}}},
		PublicURL: publicURL,
		Logger:    logger,
	})
	if err != nil {
		return nil, err
	}
	// MCP's event streams stay open as long as their sessions, so they end when the
	// server stops (ctx is done); the shutdown would wait for them.
	context.AfterFunc(ctx, mounted.Close)
	// The metrics read the queues of the usage statistics and the audit log, and the MCP
	// door's sessions, at each scrape.
	m.Watch(metrics.Sources{Usage: recorder, Audit: auditLog, MCP: mounted.MCP})

	// 6. The readiness of the stores, by role, for /readyz with -ops-addr. In memory
	// they always answer; a host on PostgreSQL or Redis names its stores the same way.
	ready, err := health.New([]health.Store{
		{Role: "keys", Pinger: keys}, {Role: "ledger", Pinger: ledger}, {Role: "rates", Pinger: rates},
		{Role: "slots", Pinger: slots}, {Role: "sessions", Pinger: sessionStore}, {Role: "audit", Pinger: auditStore},
		{Role: "usage", Pinger: usageStore}, {Role: "webhooks", Pinger: hookStore}, {Role: "oauth", Pinger: oauthStore},
	}, &health.Options{Logger: logger})
	if err != nil {
		return nil, err
	}
	return &assembly{handler: mux, ready: ready, metrics: metrics.Handler(promReg), close: closeEverything}, nil
}

// localURL returns the origin of a listen address (host:port) for clients on this
// machine: http://localhost:PORT when it is every interface.
func localURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// defaultPlans are the plans of a server started without fixtures.
var defaultPlans = []billing.Plan{
	{Name: "free", Credits: 50, RatePerMinute: 5, Concurrency: 1, GraphQLMaxAPIs: 1, BatchMaxItems: 10},
	{Name: "pro", Credits: 100000, RatePerMinute: 600, Concurrency: 10, GraphQLMaxAPIs: 10, BatchMaxItems: 100},
}
