// Command distributed runs the sample catalog as a deployment of several instances that
// share PostgreSQL and Redis: every instance has its own service, its own connections
// and its own port, as separate processes would, and they agree on every key, balance,
// rate limit and concurrency slot. Each serves REST, GraphQL, the account holders' API
// (/v1/account) and, with -admin-token, the admin API.
//
//	go run ./examples/distributed
//
// It prints the demo account's key and one line per instance:
//
//	API key: 3f1c...
//	Instance 1 listening on http://127.0.0.1:8081
//	Instance 2 listening on http://127.0.0.1:8082
//	Instance 3 listening on http://127.0.0.1:8083
//
// Flags:
//
//	-postgres DSN       PostgreSQL (default postgres://postgres@127.0.0.1:5432/test?sslmode=disable,
//	                    or $TOLLGATE_POSTGRES)
//	-schema NAME        the PostgreSQL schema of the tables (default tollgate; created if missing)
//	-redis ADDR         Redis (default 127.0.0.1:6379, or $TOLLGATE_REDIS)
//	-prefix P           the prefix of the Redis keys (default tollgate)
//	-limits STORE       where rate limits and concurrency slots live: redis (default) or postgres;
//	                    keys and credits always live in PostgreSQL
//	-instances N        how many instances (default 3)
//	-port P             the first instance's port (default 8081); the others follow
//	-fixtures FILE      load plans, accounts and keys from FILE (as examples/server does)
//	-admin-token T      enable the admin API on every instance
//	-call-timeout D     how long one API call may run (default 30s)
//	-reservation-grace D
//	                    how long a call's reservation outlives the call timeout before an
//	                    instance that finds it open voids it and gives its credits back
//	                    (default 30s)
//	-sweep-interval D   how often each instance voids the expired reservations of every
//	                    account (default 15s)
//	-lease D            how long a concurrency slot lasts without renewal (default: twice
//	                    the call timeout, at least 30s)
//	-allow-private-fetch
//	                    let URL-form file fetches and webhook deliveries reach private and
//	                    loopback addresses, and webhook endpoints have such URLs: for local
//	                    development and tests (a receiver on this machine)
//	-webhook-schedule W the waits between a webhook delivery's attempts, durations separated
//	                    by commas (1s,5s,30s: retries 1, 5 and 30 seconds after the attempt
//	                    before); default the deliverer's (5s, 5m, 30m, ... about three days)
//	-webhook-timeout D  how long a webhook delivery's attempt may take (default 15s); a
//	                    delivery claimed by an instance that died is claimed again once its
//	                    lease ends, a minute or the timeout and 10s, whichever is longer
//	-ops-addr ADDR      serve the operators' endpoints of the first instance on ADDR
//	                    (host:port), the others' on the next ports, or on any free ports
//	                    with port 0 (default: none, no operators' listener)
//
// Operators' endpoints: with -ops-addr, each instance serves /healthz (200 while it
// serves), /readyz (200 when its stores answer, else 503 naming the stores that do
// not, by role: keys, ledger, rates, slots, idempotency, webhooks) and GET /metrics
// (its Prometheus metrics, package metrics, on a registry of its own) on a listener of
// its own, printed after the instance's:
//
//	Instance 1 ops endpoints at http://127.0.0.1:9090 (/healthz, /readyz, /metrics)
//
// /readyz pings PostgreSQL and Redis at most twice a second, however often it is
// polled (package health). The listener is shut down after the instance's, so that it
// answers while the calls in flight finish.
//
// Every instance sweeps: an instance that dies takes the settlements of its calls in
// flight with it, and another one gives their credits back once they expire.
//
// Webhooks: account holders register endpoints at /v1/account/webhooks, operators at
// /admin/v1/webhooks. The endpoints and the outbox live in PostgreSQL, beside the
// keys and credits (postgres.WebhookStore, migrations 24 and 26): PostgreSQL is the durable
// store, so a message enqueued is delivered even if the instance that enqueued it
// dies. Every instance turns its own events into messages and delivers the outbox:
// any instance may deliver what another enqueued, each delivery claimed by one at a
// time.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/admin"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/examples/apis"
	"github.com/tollgate-dev/tollgate/examples/internal/fixtures"
	"github.com/tollgate-dev/tollgate/examples/internal/ops"
	"github.com/tollgate-dev/tollgate/examples/internal/webhookflag"
	"github.com/tollgate-dev/tollgate/gql"
	"github.com/tollgate-dev/tollgate/health"
	"github.com/tollgate-dev/tollgate/metrics"
	"github.com/tollgate-dev/tollgate/rest"
	"github.com/tollgate-dev/tollgate/selfservice"
	"github.com/tollgate-dev/tollgate/store/postgres"
	"github.com/tollgate-dev/tollgate/store/redis"
	"github.com/tollgate-dev/tollgate/webhook"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "distributed:", err)
		os.Exit(1)
	}
}

// config is what the flags set.
type config struct {
	postgres, schema, redis, prefix, limits string
	instances, port                         int
	fixtures, adminToken                    string
	callTimeout, grace, sweep, lease        time.Duration
	allowPrivateFetch                       bool
	opsAddr                                 string           // "" for no operators' listener
	webhookSchedule                         webhook.Schedule // nil: the default
	webhookTimeout                          time.Duration    // 0: the default
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	c := config{}
	fs := flag.NewFlagSet("distributed", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.postgres, "postgres", envOr("TOLLGATE_POSTGRES", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"), "PostgreSQL DSN")
	fs.StringVar(&c.schema, "schema", "tollgate", "PostgreSQL schema of the tables")
	fs.StringVar(&c.redis, "redis", envOr("TOLLGATE_REDIS", "127.0.0.1:6379"), "Redis address")
	fs.StringVar(&c.prefix, "prefix", "tollgate", "prefix of the Redis keys")
	fs.StringVar(&c.limits, "limits", "redis", "where rate limits and slots live: redis or postgres")
	fs.IntVar(&c.instances, "instances", 3, "number of instances")
	fs.IntVar(&c.port, "port", 8081, "port of the first instance (0: any free ports)")
	fs.StringVar(&c.fixtures, "fixtures", "", "load plans, accounts and keys from this JSON file")
	fs.StringVar(&c.adminToken, "admin-token", "", "enable the admin API with this bearer token")
	fs.DurationVar(&c.callTimeout, "call-timeout", tollgate.DefaultCallTimeout, "how long one API call may run")
	fs.DurationVar(&c.grace, "reservation-grace", tollgate.DefaultReservationGrace, "how long a reservation outlives the call timeout")
	fs.DurationVar(&c.sweep, "sweep-interval", tollgate.DefaultSweepInterval, "how often to void expired reservations")
	fs.DurationVar(&c.lease, "lease", 0, "how long a concurrency slot lasts without renewal (0: the default)")
	fs.BoolVar(&c.allowPrivateFetch, "allow-private-fetch", false, "let URL-form file fetches and webhook deliveries reach private and loopback addresses")
	fs.StringVar(&c.opsAddr, "ops-addr", "", "serve /healthz and /readyz of the first instance on this host:port, the others on the next ports (default: none)")
	schedule := fs.String("webhook-schedule", "", "the waits between a webhook delivery's attempts, durations separated by commas, such as 1s,5s,30s (default the deliverer's: 5s, 5m, 30m, ... about three days)")
	fs.DurationVar(&c.webhookTimeout, "webhook-timeout", 0, "how long a webhook delivery's attempt may take (default 15s)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	var err error
	if c.webhookSchedule, err = webhookflag.ParseSchedule(*schedule); err != nil {
		return c, err
	}
	switch {
	case fs.NArg() > 0:
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	case c.limits != "redis" && c.limits != "postgres":
		return c, fmt.Errorf("-limits %q: use redis or postgres", c.limits)
	case c.instances < 1:
		return c, errors.New("-instances must be at least 1")
	case c.schema == "":
		return c, errors.New("-schema must not be empty")
	case c.callTimeout <= 0 || c.grace <= 0 || c.sweep <= 0 || c.lease < 0:
		return c, errors.New("-call-timeout, -reservation-grace and -sweep-interval must be positive, -lease not negative")
	case c.webhookTimeout < 0:
		return c, fmt.Errorf("-webhook-timeout %s is negative: give a positive duration, or 0 for the default", c.webhookTimeout)
	}
	if c.opsAddr != "" {
		_, port, err := net.SplitHostPort(c.opsAddr)
		p, perr := strconv.Atoi(port)
		if err != nil || perr != nil || p < 0 || p > 65535 {
			return c, fmt.Errorf("-ops-addr %q: give host:port, such as 127.0.0.1:9090", c.opsAddr)
		}
		if p != 0 && p+c.instances-1 > 65535 {
			return c, fmt.Errorf("-ops-addr %q: %d instances need ports up to %d", c.opsAddr, c.instances, p+c.instances-1)
		}
	}
	return c, nil
}

// opsAddrOf returns the address of instance i's operators' listener: -ops-addr's port
// plus i, or any free port for port 0.
func opsAddrOf(c config, i int) string {
	host, port, _ := net.SplitHostPort(c.opsAddr) // checked by parseFlags
	p, _ := strconv.Atoi(port)
	if p == 0 {
		return c.opsAddr
	}
	return net.JoinHostPort(host, strconv.Itoa(p+i))
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// run starts the instances, prints how to reach them and serves until ctx is done.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))

	// 1. The shared servers: create the schema and apply the migrations once.
	if err := prepare(ctx, c); err != nil {
		return err
	}

	// 2. The plans: from the fixtures or the defaults.
	fx := &fixtures.File{Plans: []billing.Plan{
		{Name: "free", Credits: 50, RatePerMinute: 5, Concurrency: 1, GraphQLMaxAPIs: 1, BatchMaxItems: 10},
		{Name: "pro", Credits: 100000, RatePerMinute: 600, Concurrency: 10, GraphQLMaxAPIs: 10, BatchMaxItems: 100},
	}}
	if c.fixtures != "" {
		f, err := os.Open(c.fixtures)
		if err != nil {
			return err
		}
		fx, err = fixtures.Read(f)
		f.Close()
		if err != nil {
			return err
		}
	}
	plans, err := fx.PlanSet()
	if err != nil {
		return err
	}

	// 3. The instances, each with its own connections, service and server, and with
	// -ops-addr the operators' listener of each.
	var servers, opsServers []*http.Server
	var managers []*accounts.Manager
	var addrs, opsAddrs []string
	defer func() {
		for _, s := range append(servers, opsServers...) {
			s.Close()
		}
	}()
	errc := make(chan error, 2*c.instances)
	for i := range c.instances {
		in, err := newInstance(ctx, c, plans, logger)
		if err != nil {
			return err
		}
		defer in.close()
		managers = append(managers, in.mgr)
		addr := "127.0.0.1:0"
		if c.port != 0 {
			addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port+i))
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		srv := &http.Server{Handler: in.handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 60 * time.Second,
			WriteTimeout: 60 * time.Second, IdleTimeout: 120 * time.Second, MaxHeaderBytes: 64 << 10,
			ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
		servers = append(servers, srv)
		go func() { errc <- srv.Serve(ln) }()
		addrs = append(addrs, ln.Addr().String())
		if c.opsAddr != "" {
			ln, err := net.Listen("tcp", opsAddrOf(c, i))
			if err != nil {
				return fmt.Errorf("-ops-addr: %w", err)
			}
			srv := ops.NewServer(ops.Mux(in.ready, in.metrics), logger)
			opsServers = append(opsServers, srv)
			go func() { errc <- srv.Serve(ln) }()
			opsAddrs = append(opsAddrs, ln.Addr().String())
		}
	}

	// 4. Accounts: the fixtures', or a new demo account whose key is printed.
	if c.fixtures != "" {
		if err := fx.Load(ctx, managers[0]); err != nil {
			return err
		}
	} else {
		_, _, value, err := managers[0].CreateAccount(ctx, accounts.Spec{Plan: "pro"})
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "API key: %s\n", value)
	}
	for i, addr := range addrs {
		fmt.Fprintf(stdout, "Instance %d listening on http://%s\n", i+1, addr)
		if opsAddrs != nil {
			fmt.Fprintf(stdout, "Instance %d ops endpoints at http://%s (/healthz, /readyz, /metrics)\n", i+1, opsAddrs[i])
		}
	}
	// The operators' listeners stop last: they answer while calls in flight finish.
	return serve(ctx, append(servers, opsServers...), errc, logger)
}

// serve waits for ctx, then shuts every server down gracefully, in order.
func serve(ctx context.Context, servers []*http.Server, errc chan error, logger *slog.Logger) error {
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	shutdown, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, s := range servers {
		if err := s.Shutdown(shutdown); err != nil {
			return err
		}
	}
	return nil
}

// prepare creates the schema if it is missing and migrates it.
func prepare(ctx context.Context, c config) error {
	pool, err := newPool(ctx, c, 1)
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{c.schema}.Sanitize()); err != nil {
		return fmt.Errorf("creating schema %q: %w", c.schema, err)
	}
	return postgres.Migrate(ctx, pool)
}

// The connections of each instance: to PostgreSQL (keys, credits, idempotency records,
// and limits with -limits postgres) and to Redis (limits).
const (
	pgConns    = 16
	redisConns = 64
)

// newPool opens a pool of size connections whose sessions use the schema. The limits
// keep an instance from exhausting the server and make a down server fail fast rather
// than pile up calls. The pool never shrinks (MinConns is its size): a pool that grows
// on demand connects on the call's path, and under load a connection can take longer
// than the connect timeout to open, which fails the call with 503. Connections are
// replaced after an hour or so, at times spread over half an hour, so that they do not
// all expire at once.
func newPool(ctx context.Context, c config, size int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(c.postgres)
	if err != nil {
		return nil, fmt.Errorf("-postgres: %w", err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = c.schema
	cfg.MaxConns, cfg.MinConns = size, size
	cfg.ConnConfig.ConnectTimeout = 2 * time.Second
	cfg.MaxConnLifetime, cfg.MaxConnLifetimeJitter = time.Hour, 30*time.Minute
	return pgxpool.NewWithConfig(ctx, cfg)
}

// fillPool opens every connection of the pool before the instance serves, so that no
// call waits for one to open. It tries until ctx ends: an instance that starts with
// its database under load (or still starting) waits for it.
func fillPool(ctx context.Context, pool *pgxpool.Pool) error {
	conns := make([]*pgxpool.Conn, 0, pool.Config().MaxConns)
	defer func() {
		for _, conn := range conns {
			conn.Release()
		}
	}()
	for len(conns) < cap(conns) {
		conn, err := pool.Acquire(ctx)
		if err != nil {
			if pause(ctx) != nil {
				return fmt.Errorf("opening the %d connections to PostgreSQL: %w", cap(conns), err)
			}
			continue
		}
		conns = append(conns, conn)
	}
	return nil
}

// pause waits a tenth of a second before a connection is tried again, and returns
// ctx's error if it ends first.
func pause(ctx context.Context) error {
	t := time.NewTimer(100 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// newRedis returns a client of Redis whose pool is full before the instance serves
// (MinIdleConns is its size, and fillRedis opens them), for the same reason as the
// PostgreSQL pool's: a call never dials.
func newRedis(c config) *goredis.Client {
	// Fail fast: a down Redis makes a call fail in a fraction of a second (503,
	// nothing charged) rather than hold it for go-redis's multi-second defaults.
	return goredis.NewClient(&goredis.Options{
		Addr: c.redis, PoolSize: redisConns, MinIdleConns: redisConns, PoolTimeout: 500 * time.Millisecond,
		DialTimeout: 250 * time.Millisecond, DialerRetries: 1, ReadTimeout: 250 * time.Millisecond,
		WriteTimeout: 250 * time.Millisecond, ContextTimeoutEnabled: true, MaxRetries: 1,
		Protocol: 2,
	})
}

// fillRedis opens every connection of the client's pool, trying until ctx ends, as
// fillPool does.
func fillRedis(ctx context.Context, client *goredis.Client) error {
	conns := make([]*goredis.Conn, 0, client.Options().PoolSize)
	defer func() {
		for _, conn := range conns {
			conn.Close() // back to the pool
		}
	}()
	for len(conns) < cap(conns) {
		conn := client.Conn()
		if err := conn.Ping(ctx).Err(); err != nil {
			conn.Close()
			if pause(ctx) != nil {
				return fmt.Errorf("opening the %d connections to Redis: %w", cap(conns), err)
			}
			continue
		}
		conns = append(conns, conn)
	}
	return nil
}

// An instance is one service and what it runs on.
type instance struct {
	svc       *tollgate.Service
	mgr       *accounts.Manager
	hooks     *webhook.Webhooks
	stopHooks func() // stops the webhooks' Run and waits for it
	handler   http.Handler
	ready     *health.Checker // pings the instance's stores, for /readyz
	metrics   http.Handler    // the scrape of the instance's metrics, for /metrics
	pool      *pgxpool.Pool
	redis     *goredis.Client // nil with -limits postgres
}

// close stops the webhooks (the dispatcher flushes its queue), closes the service,
// then its connections.
func (in *instance) close() {
	in.stopHooks()
	in.hooks.Close()
	in.mgr.Close()
	in.svc.Close()
	if in.redis != nil {
		in.redis.Close()
	}
	in.pool.Close()
}

// startTimeout bounds how long an instance waits for its connections to open.
const startTimeout = time.Minute

// newInstance builds one instance: its own pool and Redis client, both full, its
// stores, its service and its handler with every front door.
func newInstance(ctx context.Context, c config, plans *billing.Plans, logger *slog.Logger) (_ *instance, err error) {
	in := &instance{}
	closeStores := func() {
		if in.redis != nil {
			in.redis.Close()
		}
		if in.pool != nil {
			in.pool.Close()
		}
	}
	defer func() {
		if err != nil {
			closeStores()
		}
	}()
	if in.pool, err = newPool(ctx, c, pgConns); err != nil {
		return nil, err
	}
	fillCtx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	if err := fillPool(fillCtx, in.pool); err != nil {
		return nil, err
	}
	pg, err := postgres.New(in.pool, nil)
	if err != nil {
		return nil, err
	}
	stores := tollgate.Stores{Keys: pg, Ledger: pg, Rates: pg, Slots: pg}
	if c.limits == "redis" {
		in.redis = newRedis(c)
		if err := fillRedis(fillCtx, in.redis); err != nil {
			return nil, err
		}
		rd, err := redis.New(in.redis, &redis.Options{Prefix: c.prefix})
		if err != nil {
			return nil, err
		}
		stores.Rates, stores.Slots = rd, rd
	}
	// The instance's Prometheus metrics, on a registry of its own: every store is
	// decorated, so that each operation is timed, and the decorators are used wherever
	// the stores are (a decorator has every interface of its store: the readiness check
	// pings through it, the webhooks list the keys that expire through it).
	promReg := prometheus.NewRegistry()
	m, err := metrics.New(promReg, nil)
	if err != nil {
		return nil, err
	}
	stores = m.Stores(stores)
	in.metrics = metrics.Handler(promReg)

	reg := &catalog.Registry{}
	if err := apis.Register(reg); err != nil {
		return nil, err
	}
	// Batches sent with an Idempotency-Key keep their answers in PostgreSQL, so that a
	// retry that reaches another instance gets the first answer.
	pgAnswers, err := postgres.NewIdempotencyStore(in.pool)
	if err != nil {
		return nil, err
	}
	answers := m.IdempotencyStore(pgAnswers)
	// Webhooks: the endpoints and the outbox in PostgreSQL, on the instance's pool, in
	// the same schema as the other tables.
	pgHooks, err := postgres.NewWebhookStore(in.pool, nil)
	if err != nil {
		return nil, err
	}
	hookStore := m.WebhookStore(pgHooks)
	// The readiness of the instance: every store it uses, by role. Each store value is
	// pinged once per check, whatever roles it plays.
	if in.ready, err = health.New([]health.Store{
		ops.Ping("keys", stores.Keys), ops.Ping("ledger", stores.Ledger),
		ops.Ping("rates", stores.Rates), ops.Ping("slots", stores.Slots),
		ops.Ping("idempotency", answers), ops.Ping("webhooks", hookStore),
	}, &health.Options{Logger: logger}); err != nil {
		return nil, err
	}
	// Key records are cached: every paid call checks its key in its admission step, so a
	// revocation on one instance is refused by the next call on any other. A revoked key
	// is kept 7 days, then deleted by whichever instance prunes first.
	in.svc, err = tollgate.New(reg, stores, plans, &tollgate.Options{Logger: logger, KeyCache: &auth.KeyCacheOptions{},
		CallTimeout: c.callTimeout, ReservationGrace: c.grace, SweepInterval: c.sweep, Lease: c.lease,
		Idempotency: &tollgate.IdempotencyOptions{Store: answers}, Fetch: tollgate.FetchOptions{AllowPrivate: c.allowPrivateFetch}})
	if err != nil {
		return nil, err
	}
	m.Attach(in.svc) // for as long as the service: the instance's registry goes with it
	// Every instance enqueues its events' messages and delivers the outbox, and the
	// instances share the sweeps of the keys that expire and of the accounts' renewals.
	if in.hooks, err = webhook.New(hookStore, in.svc.Events(), &webhook.Options{AllowPrivate: c.allowPrivateFetch,
		Logger: logger, Dispatcher: webhook.DispatcherOptions{Plans: plans, Keys: stores.Keys, Ledger: stores.Ledger},
		Deliverer: webhook.DelivererOptions{Schedule: c.webhookSchedule, Timeout: c.webhookTimeout}}); err != nil {
		in.svc.Close()
		return nil, err
	}
	if in.mgr, err = accounts.New(in.svc, &accounts.Options{RevokedKeyRetention: 7 * 24 * time.Hour, Logger: logger}); err != nil {
		in.hooks.Close()
		in.svc.Close()
		return nil, err
	}
	if in.handler, err = handler(in.mgr, in.hooks.Endpoints(), c, logger); err != nil {
		in.mgr.Close()
		in.hooks.Close()
		in.svc.Close()
		return nil, err
	}
	m.Watch(metrics.WebhookSources(in.hooks, hookStore))
	// The webhooks run until the instance closes, after its server has stopped.
	hooksCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := in.hooks.Run(hooksCtx); err != nil {
			logger.Error("webhooks stopped", "error", err)
		}
	}()
	in.stopHooks = func() { cancel(); <-done }
	return in, nil
}

// handler returns the front doors of an instance: REST, GraphQL, the account holders'
// API and, with an admin token, the admin API; hooks serves their webhook routes.
func handler(mgr *accounts.Manager, hooks *webhook.Endpoints, c config, logger *slog.Logger) (http.Handler, error) {
	svc := mgr.Service()
	mux := http.NewServeMux()
	restHandler, err := rest.NewHandler(svc, &rest.Options{Logger: logger})
	if err != nil {
		return nil, err
	}
	mux.Handle("/v1/", restHandler)
	gqlHandler, err := gql.NewHandler(svc, &gql.Options{Logger: logger})
	if err != nil {
		return nil, err
	}
	mux.Handle("/v1/graphql", gqlHandler)
	account, err := selfservice.NewHandler(mgr, &selfservice.Options{Webhooks: hooks})
	if err != nil {
		return nil, err
	}
	mux.Handle("/v1/account", account)
	mux.Handle("/v1/account/", account)
	if c.adminToken != "" {
		adminHandler, err := admin.NewHandler(mgr, c.adminToken, &admin.Options{Webhooks: hooks})
		if err != nil {
			return nil, err
		}
		mux.Handle("/admin/", adminHandler)
	}
	return mux, nil
}
