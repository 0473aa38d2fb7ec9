// Command distributed runs the sample catalog as a deployment of several instances that
// share PostgreSQL and Redis: every instance has its own service, its own connections
// and its own port, as separate processes would, and they agree on every key, balance,
// rate limit and concurrency slot. Each serves REST and batches, GraphQL, MCP, the
// account holders' API (/v1/account) and, with -admin-token, the admin API. Each is
// assembled by package internal/deploy, as tollgate-server's one instance is: the
// stores, the service, the doors, the webhooks, the usage statistics, the audit log,
// the journal's relay and the metrics, shut down in order when the command stops.
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
//	-pooler             -postgres is a connection pooler in transaction mode (PgBouncer): the
//	                    connections send no startup parameter (postgres.PoolerConfig), so the
//	                    schema is the one the role's search_path names, which must be -schema
//	                    (ALTER ROLE ... SET search_path, as docs/postgres.md says in "Behind a
//	                    pooler")
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
// not, by role: keys, ledger, rates, slots, idempotency, webhooks, audit, usage,
// sessions, oauth) and GET /metrics
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

	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/blocks"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/examples/apis"
	"github.com/tollgate-dev/tollgate/examples/internal/fixtures"
	"github.com/tollgate-dev/tollgate/health"
	"github.com/tollgate-dev/tollgate/internal/deploy"
	"github.com/tollgate-dev/tollgate/internal/ops"
	"github.com/tollgate-dev/tollgate/internal/webhookflag"
	"github.com/tollgate-dev/tollgate/retention"
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
	pooler                                  bool // -postgres is a pooler in transaction mode
	instances, port                         int
	fixtures, adminToken                    string
	callTimeout, grace, sweep, lease        time.Duration
	ledgerRetention                         time.Duration
	creditBlockSize                         int64
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
	fs.BoolVar(&c.pooler, "pooler", false, "-postgres is a connection pooler in transaction mode (PgBouncer): no startup parameter; the role's search_path names -schema")
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
	fs.Int64Var(&c.creditBlockSize, "credit-block-size", blocks.DefaultSize, "the most credits of an account one instance reserves at a time and spends call by call, recording the calls' charges with one roll for many (negative: each call's credits are reserved in PostgreSQL)")
	fs.DurationVar(&c.ledgerRetention, "ledger-retention", retention.DefaultRetention, "how long after its period ended a ledger entry is kept before it is folded into its period's totals (negative: every entry is kept)")
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
	var instances []*instance
	var opsServers []*http.Server
	var addrs, opsAddrs []string
	defer func() {
		for _, s := range opsServers {
			s.Close()
		}
	}()
	errc := make(chan error, 2*c.instances)
	for i := range c.instances {
		in, err := newInstance(ctx, c, plans, logger)
		if err != nil {
			return err
		}
		defer in.close() // nothing after the shutdown below
		instances = append(instances, in)
		addr := "127.0.0.1:0"
		if c.port != 0 {
			addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port+i))
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		go func() { errc <- in.d.Serve(ln) }()
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
		if err := fx.Load(ctx, instances[0].mgr); err != nil {
			return err
		}
	} else {
		_, _, value, err := instances[0].mgr.CreateAccount(ctx, accounts.Spec{Plan: "pro"})
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
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Each instance stops in order (its doors, the calls in flight, then what observes
	// them and its connections); the operators' listeners stop last: they answer while
	// the calls in flight finish.
	logger.Info("shutting down")
	shutdown, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, in := range instances {
		if err := in.d.Close(shutdown); err != nil {
			return err
		}
	}
	for _, s := range opsServers {
		if err := s.Shutdown(shutdown); err != nil {
			return err
		}
	}
	return nil
}

// prepare creates the schema if it is missing and migrates it; behind a pooler, it
// checks that the role's search_path selects it.
func prepare(ctx context.Context, c config) error {
	return deploy.Migrate(ctx, c.postgres, c.schema, c.pooler)
}

// The connections of each instance: to PostgreSQL (keys, credits, idempotency records,
// and limits with -limits postgres) and to Redis (limits).
const (
	pgConns    = 16
	redisConns = 64
)

// An instance is one service and what it runs on (package internal/deploy assembles
// it).
type instance struct {
	d       *deploy.Instance
	mgr     *accounts.Manager
	handler http.Handler    // every door
	ready   *health.Checker // pings the instance's stores, for /readyz
	metrics http.Handler    // the scrape of the instance's metrics, for /metrics
	pool    *pgxpool.Pool
	redis   *goredis.Client // nil with -limits postgres
}

// close shuts the instance down (see deploy.Instance.Close).
func (in *instance) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in.d.Close(ctx)
}

// newInstance builds one instance: its own pool and Redis client, both full before it
// serves (a call never opens a connection), its stores, its service and every door the
// service can serve: REST, batches, GraphQL, MCP, the account holders' API and, with
// -admin-token, the admin API.
func newInstance(ctx context.Context, c config, plans *billing.Plans, logger *slog.Logger) (*instance, error) {
	reg := &catalog.Registry{}
	if err := apis.Register(reg); err != nil {
		return nil, err
	}
	cfg := deploy.Config{Postgres: c.postgres, Schema: c.schema, Pooler: c.pooler, RedisPrefix: c.prefix,
		PGConns: pgConns, RedisConns: redisConns, Catalog: reg, Plans: plans, Logger: logger,
		CallTimeout: c.callTimeout, ReservationGrace: c.grace, SweepInterval: c.sweep, Lease: c.lease, LedgerRetention: c.ledgerRetention, CreditBlockSize: c.creditBlockSize,
		AllowPrivateFetch: c.allowPrivateFetch, AdminToken: c.adminToken,
		WebhookSchedule: c.webhookSchedule, WebhookTimeout: c.webhookTimeout}
	if c.limits == "redis" {
		cfg.Redis = c.redis
	}
	d, err := deploy.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &instance{d: d, mgr: d.Accounts, handler: d.Handler, ready: d.Ready, metrics: d.Metrics, pool: d.Pool, redis: d.Redis}, nil
}
