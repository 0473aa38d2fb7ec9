// Package deploy assembles one instance of a Tollgate deployment on PostgreSQL and
// Redis, as the distributed example and the server (package server) run it: the
// connections, the schema's check (or its migration), the stores, the service and the
// manager of its accounts, every front door on one mux (package doors) behind one HTTP
// edge, the webhooks, the usage statistics, the audit log, the relay of the journal of
// changes, the compaction of the ledger, the Prometheus metrics, the traces, and the
// readiness check of the stores.
//
// [Open] builds an [Instance]; [Instance.Serve] serves its doors on a listener;
// [Instance.Close] shuts it down in order: the doors stop taking requests and the calls
// in flight finish (http.Server.Shutdown), the settlements being retried are waited
// for, then the service and the manager stop, the webhooks flush their queue, the usage
// statistics and the audit log flush theirs, and the connections close last.
package deploy

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	goredis "github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/blocks"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/doors"
	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/health"
	"github.com/tollgate-dev/tollgate/internal/every"
	"github.com/tollgate-dev/tollgate/internal/ops"
	"github.com/tollgate-dev/tollgate/journal"
	"github.com/tollgate-dev/tollgate/metrics"
	"github.com/tollgate-dev/tollgate/oauth"
	"github.com/tollgate-dev/tollgate/retention"
	"github.com/tollgate-dev/tollgate/store/postgres"
	"github.com/tollgate-dev/tollgate/store/redis"
	"github.com/tollgate-dev/tollgate/tracing"
	"github.com/tollgate-dev/tollgate/usage"
	"github.com/tollgate-dev/tollgate/webhook"
)

// The defaults of [Config].
const (
	DefaultSchema      = "tollgate"
	DefaultRedisPrefix = "tollgate"
	DefaultPGConns     = 16
	DefaultRedisConns  = 64
	// DefaultStartTimeout bounds how long Open waits for the connections to open.
	DefaultStartTimeout = time.Minute
	// DefaultRelayInterval is how often the journal's relay publishes the changes an
	// instance that died left unpublished.
	DefaultRelayInterval = 30 * time.Second
)

// Config is what an instance is made of. Postgres, Catalog and Plans are required;
// the zero value of every other field is its default.
type Config struct {
	// Postgres is the PostgreSQL connection string (keys, credits, sessions, OAuth
	// grants, webhooks, usage, audit, idempotency, the journal).
	Postgres string
	// Schema is the PostgreSQL schema of the tables; DefaultSchema by default.
	Schema string
	// Pooler reaches PostgreSQL through a pooler in transaction mode
	// (postgres.PoolerConfig): the connections send no startup parameter, so the schema
	// is the one the role's search_path names (ALTER ROLE ... SET search_path), which
	// must be Schema.
	Pooler bool
	// Migrate migrates the schema at Open (creating it if missing) rather than only
	// checking it (postgres.CheckSchema).
	Migrate bool
	// Redis is the address of Redis, for the rate limits and concurrency slots. Empty:
	// they live in PostgreSQL.
	Redis string
	// RedisPrefix is the prefix of the Redis keys; DefaultRedisPrefix by default.
	RedisPrefix string
	// PGConns and RedisConns are the sizes of the pools, opened before the instance
	// serves; DefaultPGConns and DefaultRedisConns by default.
	PGConns, RedisConns int

	Catalog *catalog.Registry
	Plans   *billing.Plans
	// Logger receives the instance's own log; slog.Default() by default.
	Logger *slog.Logger

	// The service's settings (tollgate.Options); zero is the service's default.
	CallTimeout, ReservationGrace, SweepInterval, Lease time.Duration
	// AllowPrivateFetch lets URL-form file fetches, OAuth client metadata fetches and
	// webhook deliveries reach private and loopback addresses: for development only.
	AllowPrivateFetch bool
	// SessionSecret signs session tokens (at least auth.MinSessionSecret bytes); with
	// it the instance serves sessions and the dashboard. Every instance of a
	// deployment needs the same one.
	SessionSecret []byte

	// AdminToken enables the admin API.
	AdminToken string
	// PublicURL is the origin clients reach the service at; with it, MCP clients may
	// authorize with OAuth (the issuer of the tokens).
	PublicURL string
	// Edge is the HTTP edge of every door (trusted proxies, CORS, access log).
	Edge edge.Options
	// Doors are the doors to mount (doors.Options.Doors); zero: all it can serve.
	Doors doors.Door

	// WebhookSchedule and WebhookTimeout are the deliverer's retry schedule and the
	// timeout of an attempt; zero: the deliverer's defaults.
	WebhookSchedule webhook.Schedule
	WebhookTimeout  time.Duration

	// TracerProvider makes the traces of the calls (package tracing); nil: none.
	TracerProvider trace.TracerProvider
	// RelayInterval is how often the journal's relay runs; DefaultRelayInterval by
	// default, negative for no relay.
	RelayInterval time.Duration
	// LedgerRetention is how long after its period ended a ledger entry is kept before
	// the compaction folds it into its period's totals (retention.Options.Retention);
	// retention.DefaultRetention by default, negative for no compaction.
	LedgerRetention time.Duration
	// CreditBlockSize is the most credits a credit block holds (package
	// billing/blocks: the instance reserves a busy account's credits a block at a
	// time, spends them call by call and records the calls' charges with one roll for
	// many); blocks.DefaultSize by default, negative for no credit blocks (each call's
	// credits reserved in PostgreSQL).
	CreditBlockSize int64
	// StartTimeout bounds the wait for the connections; DefaultStartTimeout by default.
	StartTimeout time.Duration
}

// An Instance is one assembled instance. Its fields are for the host to read, not to
// close: [Instance.Close] closes everything.
type Instance struct {
	Service  *tollgate.Service
	Accounts *accounts.Manager
	Doors    *doors.Mounted
	Webhooks *webhook.Webhooks
	// Handler serves every door, within the traces' middleware when there are traces.
	Handler http.Handler
	// Ready pings the stores, for /readyz; Metrics serves the scrape, for /metrics.
	Ready   *health.Checker
	Metrics http.Handler
	// Pool is the PostgreSQL pool; Redis the Redis client, nil without Redis.
	Pool  *pgxpool.Pool
	Redis *goredis.Client

	log     *slog.Logger
	closers []func(ctx context.Context) // in the order Close runs them, after the servers

	mu      sync.Mutex
	servers []*http.Server
	closed  bool
}

// Migrate creates the schema if it is missing and brings it to the store's version,
// on a connection of its own. Several processes may run it at once: the migrations
// take a lock, and each is applied once.
func Migrate(ctx context.Context, postgresURL, schema string, pooler bool) error {
	cfg := Config{Postgres: postgresURL, Schema: schema, Pooler: pooler, PGConns: 1}
	cfg.defaults()
	pc, err := poolConfig(&cfg, nil)
	if err != nil {
		return err
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return err
	}
	defer pool.Close()
	return migrate(ctx, pool, cfg.Schema, cfg.Pooler)
}

// migrate creates the schema if it is missing and migrates it; behind a pooler, it
// checks that the role's search_path selects it (pooledSchema).
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string, pooler bool) error {
	if _, err := pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize()); err != nil {
		// A role that may not create schemas may still migrate one that exists.
		var exists bool
		if qerr := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&exists); (qerr != nil || !exists) && !pooler {
			return fmt.Errorf("creating schema %q: %w", schema, err)
		}
	}
	if pooler {
		if err := pooledSchema(ctx, pool, schema); err != nil {
			return err
		}
	}
	return postgres.Migrate(ctx, pool)
}

// pooledSchema checks that the schema the sessions work in, behind a pooler, is schema:
// the pooler forwards no search_path from the connection, so the role's settings must
// name it, and it must exist. The error says how to set the role up.
func pooledSchema(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	var current *string
	var path, role string
	if err := pool.QueryRow(ctx, "SELECT current_schema(), current_setting('search_path'), current_user").
		Scan(&current, &path, &role); err != nil {
		return fmt.Errorf("reading the role's search_path: %w", err)
	}
	if current != nil && *current == schema {
		return nil
	}
	id := pgx.Identifier{schema}.Sanitize()
	return fmt.Errorf("behind a pooler the schema is the one the role's search_path selects, and the role %q has search_path %q, "+
		"which does not select the schema %q: as the database's owner, create the schema (CREATE SCHEMA IF NOT EXISTS %s) "+
		"and name it in the role's settings (ALTER ROLE %s SET search_path = %s)",
		role, path, schema, id, pgx.Identifier{role}.Sanitize(), id)
}

func (c *Config) defaults() {
	if c.Schema == "" {
		c.Schema = DefaultSchema
	}
	if c.RedisPrefix == "" {
		c.RedisPrefix = DefaultRedisPrefix
	}
	if c.PGConns <= 0 {
		c.PGConns = DefaultPGConns
	}
	if c.RedisConns <= 0 {
		c.RedisConns = DefaultRedisConns
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.RelayInterval == 0 {
		c.RelayInterval = DefaultRelayInterval
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = DefaultStartTimeout
	}
}

// poolConfig returns the pool's settings: the schema, a full pool that never shrinks
// (a call never waits for a connection to open), connections replaced after an hour or
// so at spread times, and the traces' hook.
func poolConfig(c *Config, tr *tracing.Tracer) (*pgxpool.Config, error) {
	parse := postgres.PoolConfig
	if c.Pooler {
		parse = postgres.PoolerConfig
	}
	pc, err := parse(c.Postgres)
	if err != nil {
		return nil, errors.New("the PostgreSQL connection string cannot be parsed; write it as postgres://user:password@host:port/database")
	}
	if !c.Pooler {
		pc.ConnConfig.RuntimeParams["search_path"] = c.Schema
	}
	pc.MaxConns, pc.MinConns = int32(c.PGConns), int32(c.PGConns)
	pc.ConnConfig.ConnectTimeout = 2 * time.Second
	pc.MaxConnLifetime, pc.MaxConnLifetimeJitter = time.Hour, 30*time.Minute
	if tr != nil {
		pc.ConnConfig.Tracer = postgres.QueryTracer(tr)
	}
	return pc, nil
}

// Open builds an instance. On failure everything it opened is closed again.
func Open(ctx context.Context, cfg Config) (_ *Instance, err error) {
	if cfg.Postgres == "" || cfg.Catalog == nil || cfg.Plans == nil {
		return nil, errors.New("deploy: Config needs Postgres, Catalog and Plans")
	}
	cfg.defaults()
	log := cfg.Logger
	in := &Instance{log: log}
	// undo closes what was opened so far, in the reverse order, when Open fails.
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	var tr *tracing.Tracer
	if cfg.TracerProvider != nil {
		tr = tracing.New(&tracing.Options{TracerProvider: cfg.TracerProvider})
	}

	// 1. The connections, full before the instance serves.
	pc, err := poolConfig(&cfg, tr)
	if err != nil {
		return nil, err
	}
	if in.Pool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
		return nil, err
	}
	undo = append(undo, in.Pool.Close)
	startCtx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	if err := fillPool(startCtx, in.Pool); err != nil {
		return nil, err
	}
	switch {
	case cfg.Migrate:
		err = migrate(ctx, in.Pool, cfg.Schema, cfg.Pooler)
	case cfg.Pooler:
		if err = pooledSchema(ctx, in.Pool, cfg.Schema); err == nil {
			err = postgres.CheckSchema(ctx, in.Pool)
		}
	default:
		err = postgres.CheckSchema(ctx, in.Pool)
	}
	if err != nil {
		return nil, err
	}
	pg, err := postgres.New(in.Pool, nil)
	if err != nil {
		return nil, err
	}
	stores := tollgate.Stores{Keys: pg, Ledger: pg, Rates: pg, Slots: pg}
	if cfg.Redis != "" {
		in.Redis = newRedis(cfg.Redis, cfg.RedisConns)
		undo = append(undo, func() { in.Redis.Close() })
		if tr != nil {
			in.Redis.AddHook(redis.Hook(tr))
		}
		if err := fillRedis(startCtx, in.Redis); err != nil {
			return nil, err
		}
		rd, err := redis.New(in.Redis, &redis.Options{Prefix: cfg.RedisPrefix})
		if err != nil {
			return nil, err
		}
		stores.Rates, stores.Slots = rd, rd
	}
	pgAnswers, err := postgres.NewIdempotencyStore(in.Pool)
	if err != nil {
		return nil, err
	}
	pgHooks, err := postgres.NewWebhookStore(in.Pool, nil)
	if err != nil {
		return nil, err
	}
	pgAudit, err := postgres.NewAuditStore(in.Pool)
	if err != nil {
		return nil, err
	}
	pgUsage, err := postgres.NewUsageStore(in.Pool)
	if err != nil {
		return nil, err
	}
	pgOAuth, err := postgres.NewOAuthStore(in.Pool)
	if err != nil {
		return nil, err
	}
	pgSessions, err := postgres.NewSessionStore(in.Pool)
	if err != nil {
		return nil, err
	}

	// 2. The metrics, on a registry of the instance's own. Every store is decorated, so
	// that each operation is timed, and the decorators are used wherever the stores are:
	// a decorator has every interface of its store (the readiness check pings through
	// it, the webhooks list the keys that expire through it).
	promReg := prometheus.NewRegistry()
	m, err := metrics.New(promReg, nil)
	if err != nil {
		return nil, err
	}
	in.Metrics = metrics.Handler(promReg)
	stores = m.Stores(stores)
	answers, hookStore := m.IdempotencyStore(pgAnswers), m.WebhookStore(pgHooks)
	auditStore, usageStore := m.AuditStore(pgAudit), m.UsageStore(pgUsage)
	oauthStore, sessionStore := m.OAuthStore(pgOAuth), m.SessionStore(pgSessions)

	// 3. The service. Key records are cached: a paid call checks its key in its
	// admission, so a revocation on one instance refuses the next call on any other.
	opts := &tollgate.Options{Logger: log, KeyCache: &auth.KeyCacheOptions{},
		CallTimeout: cfg.CallTimeout, ReservationGrace: cfg.ReservationGrace, SweepInterval: cfg.SweepInterval, Lease: cfg.Lease,
		Idempotency: &tollgate.IdempotencyOptions{Store: answers},
		Fetch:       tollgate.FetchOptions{AllowPrivate: cfg.AllowPrivateFetch}}
	if cfg.CreditBlockSize >= 0 {
		// A killed instance's blocks come back when its calls' reservations would.
		hold := cmp.Or(cfg.CallTimeout, tollgate.DefaultCallTimeout) + cmp.Or(cfg.ReservationGrace, tollgate.DefaultReservationGrace)
		if opts.CreditBlocks, err = blocks.New(stores.Ledger, &blocks.Options{Size: cfg.CreditBlockSize, Hold: hold, Logger: log}); err != nil {
			return nil, err
		}
	}
	if cfg.SessionSecret != nil {
		if opts.Sessions, err = auth.NewSessions(cfg.SessionSecret); err != nil {
			return nil, err
		}
		opts.SessionStore = sessionStore
	}
	if in.Service, err = tollgate.New(cfg.Catalog, stores, cfg.Plans, opts); err != nil {
		if opts.CreditBlocks != nil {
			opts.CreditBlocks.Close(context.Background())
		}
		return nil, err
	}
	undo = append(undo, in.Service.Close)
	detachMetrics := m.Attach(in.Service)
	undo = append(undo, detachMetrics)
	detachTraces := func() {}
	if tr != nil {
		detachTraces = tr.Attach(in.Service)
		undo = append(undo, detachTraces)
	}

	// 4. The observers: the audit log (kept 30 days), the usage statistics (flushed
	// every 5 seconds), the webhooks (every instance enqueues its events and delivers
	// the outbox).
	auditLog := audit.NewLog(auditStore, &audit.LogOptions{Retention: 30 * 24 * time.Hour, Logger: log})
	in.Service.Events().Subscribe(auditLog, auditLog.Kinds()...)
	undo = append(undo, auditLog.Close)
	recorder, err := usage.NewRecorder(usageStore, &usage.RecorderOptions{FlushInterval: 5 * time.Second, Logger: log})
	if err != nil {
		return nil, err
	}
	in.Service.Events().Subscribe(recorder, recorder.Kinds()...)
	closeUsage := func(ctx context.Context) {
		flush, cancel := context.WithTimeout(context.WithoutCancel(ctx), usage.DefaultFlushTimeout)
		defer cancel()
		_ = recorder.Close(flush) // the recorder logs a failed flush
	}
	undo = append(undo, func() { closeUsage(context.Background()) })
	if in.Webhooks, err = webhook.New(hookStore, in.Service.Events(), &webhook.Options{AllowPrivate: cfg.AllowPrivateFetch,
		Logger: log, Dispatcher: webhook.DispatcherOptions{Plans: cfg.Plans, Keys: stores.Keys, Ledger: stores.Ledger},
		Deliverer: webhook.DelivererOptions{Schedule: cfg.WebhookSchedule, Timeout: cfg.WebhookTimeout}}); err != nil {
		return nil, err
	}
	hooksCtx, stopHooks := context.WithCancel(context.WithoutCancel(ctx))
	hooksDone := make(chan struct{})
	go func() {
		defer close(hooksDone)
		if err := in.Webhooks.Run(hooksCtx); err != nil {
			log.Error("webhooks stopped", "error", err)
		}
	}()
	closeHooks := func() {
		stopHooks()
		<-hooksDone
		in.Webhooks.Close()
	}
	undo = append(undo, closeHooks)
	m.Watch(metrics.WebhookSources(in.Webhooks, hookStore))

	// 5. The relay of the journal: the changes an instance kept in the journal and died
	// before it published are published by whichever instance relays first.
	stopRelay := func() {}
	if cfg.RelayInterval > 0 {
		relay, err := journal.NewRelay(in.Service.Events(), []journal.Store{pg}, &journal.RelayOptions{Logger: log})
		if err != nil {
			return nil, err
		}
		stopRelay = every.Start(cfg.RelayInterval, every.Chore{
			Do:     relay.Relay,
			Failed: "tollgate: cannot relay the journal of changes; the next round tries again",
			Done:   "tollgate: published the changes the journal held",
		}.Run(log))
		undo = append(undo, stopRelay)
	}

	// 6. The compaction of the ledger: the entries of periods that ended more than the
	// retention ago are folded into their periods' totals, by every instance, each
	// account by one at a time; at start too, for instances that restart often.
	stopCompaction := func() {}
	if cfg.LedgerRetention >= 0 {
		compaction, err := retention.New(pg, &retention.Options{Retention: cfg.LedgerRetention})
		if err != nil {
			return nil, err
		}
		stopCompaction = every.StartNow(retention.DefaultInterval, every.Chore{
			Do:     compaction.Compact,
			Failed: "tollgate: cannot compact the ledger; the next round tries again",
			Done:   "tollgate: folded the ledger's old entries into their periods' totals",
		}.Run(log))
		undo = append(undo, stopCompaction)
	}

	// 7. The manager of the accounts, and every door on one mux.
	if in.Accounts, err = accounts.New(in.Service, &accounts.Options{CreditBlocks: opts.CreditBlocks, Audit: auditStore, Usage: usageStore,
		RevokedKeyRetention: 7 * 24 * time.Hour, Logger: log}); err != nil {
		return nil, err
	}
	undo = append(undo, in.Accounts.Close)
	mux := http.NewServeMux()
	dopts := &doors.Options{Doors: cfg.Doors, Edge: cfg.Edge, Accounts: in.Accounts, Webhooks: in.Webhooks.Endpoints(),
		AdminToken: cfg.AdminToken, PublicURL: cfg.PublicURL, Logger: log}
	if cfg.PublicURL != "" {
		dopts.OAuth = &doors.OAuth{Store: oauthStore, Options: oauth.Options{Fetch: oauth.FetchOptions{AllowPrivate: cfg.AllowPrivateFetch}}}
	}
	if in.Doors, err = doors.Mount(mux, in.Service, dopts); err != nil {
		return nil, err
	}
	undo = append(undo, in.Doors.Close)
	m.Watch(metrics.Sources{Usage: recorder, Audit: auditLog, MCP: in.Doors.MCP})
	in.Handler = mux
	if tr != nil {
		in.Handler = tr.Handler(mux)
	}

	// 8. The readiness of the stores, by role.
	if in.Ready, err = health.New([]health.Store{
		ops.Ping("keys", stores.Keys), ops.Ping("ledger", stores.Ledger),
		ops.Ping("rates", stores.Rates), ops.Ping("slots", stores.Slots),
		ops.Ping("idempotency", answers), ops.Ping("webhooks", hookStore),
		ops.Ping("audit", auditStore), ops.Ping("usage", usageStore),
		ops.Ping("sessions", sessionStore), ops.Ping("oauth", oauthStore),
	}, &health.Options{Logger: log}); err != nil {
		return nil, err
	}

	// What Close runs once the servers have stopped, in order.
	svc := in.Service
	in.closers = []func(ctx context.Context){
		func(ctx context.Context) { waitSettlements(ctx, svc) },
		func(context.Context) { in.Accounts.Close(); svc.Close(); stopRelay(); stopCompaction() },
		func(context.Context) { closeHooks() },
		closeUsage,
		func(context.Context) { auditLog.Close() },
		func(context.Context) { detachTraces(); detachMetrics() },
		func(context.Context) {
			if in.Redis != nil {
				in.Redis.Close()
			}
			in.Pool.Close()
		},
	}
	return in, nil
}

// NewServer returns the HTTP server of the doors over h: its timeouts bound slow
// clients (the doors bound bodies).
func NewServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 60 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 120 * time.Second, MaxHeaderBytes: 64 << 10,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
}

// Serve serves the instance's doors on ln until Close; it returns http.ErrServerClosed
// after Close, and at once if the instance is closed.
func (in *Instance) Serve(ln net.Listener) error {
	in.mu.Lock()
	if in.closed {
		in.mu.Unlock()
		ln.Close()
		return http.ErrServerClosed
	}
	srv := NewServer(in.Handler, in.log)
	in.servers = append(in.servers, srv)
	in.mu.Unlock()
	return srv.Serve(ln)
}

// Close shuts the instance down, in order: its servers stop taking requests and let
// the calls in flight finish (MCP's event streams are ended first), until ctx is done,
// when the calls still running are cut; the settlements being retried are waited for
// (until ctx is done); then the manager and the service stop, the webhooks flush their
// queue, the usage statistics and the audit log flush theirs, and the connections
// close. It returns ctx's error if the calls in flight did not finish in time. Calling
// it again does nothing.
func (in *Instance) Close(ctx context.Context) error {
	in.mu.Lock()
	if in.closed {
		in.mu.Unlock()
		return nil
	}
	in.closed = true
	servers := in.servers
	in.mu.Unlock()
	in.Doors.Close() // MCP's event streams, which Shutdown would wait for
	var err error
	for _, s := range servers {
		if serr := s.Shutdown(ctx); serr != nil {
			err = serr
			s.Close()
		}
	}
	for _, c := range in.closers {
		c(ctx)
	}
	return err
}

// waitSettlements waits until the service retries no settlement, or ctx is done.
func waitSettlements(ctx context.Context, svc *tollgate.Service) {
	for svc.Stats().PendingSettlements > 0 {
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// RandomSecret returns a session secret made now: sessions signed with it end when the
// process does.
func RandomSecret() []byte {
	b := make([]byte, auth.MinSessionSecret)
	rand.Read(b)
	return b
}

// newRedis returns a client whose pool is filled before the instance serves, and that
// fails fast: a down Redis fails a call in a fraction of a second (503, nothing
// charged) rather than hold it for go-redis's multi-second defaults.
func newRedis(addr string, size int) *goredis.Client {
	return goredis.NewClient(&goredis.Options{
		Addr: addr, PoolSize: size, MinIdleConns: size, PoolTimeout: 500 * time.Millisecond,
		DialTimeout: 250 * time.Millisecond, DialerRetries: 1, ReadTimeout: 250 * time.Millisecond,
		WriteTimeout: 250 * time.Millisecond, ContextTimeoutEnabled: true, MaxRetries: 1,
		Protocol: 2,
	})
}

// fillPool opens every connection of the pool, trying until ctx ends: an instance
// that starts with its database under load (or still starting) waits for it.
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

// fillRedis opens every connection of the client's pool, as fillPool does.
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
