package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/pprof"
	"os"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/examples/apis"
	"github.com/tollgate-dev/tollgate/gql"
	"github.com/tollgate-dev/tollgate/internal/baremcp"
	"github.com/tollgate-dev/tollgate/internal/benchhttp"
	"github.com/tollgate-dev/tollgate/mcp"
	"github.com/tollgate-dev/tollgate/rest"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/store/postgres"
	"github.com/tollgate-dev/tollgate/store/redis"
	"github.com/tollgate-dev/tollgate/usage"
)

// A ready line is what a server process prints once it serves: the orchestrator reads
// it from the process's standard output.
type ready struct {
	URL   string `json:"url"`   // the server's base URL
	Pprof string `json:"pprof"` // the base URL of its net/http/pprof handlers
	Keys  int    `json:"keys"`  // how many keys (accounts) it holds; 0 for a bare server
}

// benchKey returns the value of the primary key of the i-th benchmark account. The
// values are fixed, so that a load generator can pick one at random per request
// without a list of them.
func benchKey(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012x", i) }

// serve runs the server kind in this process (restbench -serve KIND), for the
// orchestrator: it prints a ready line and serves until its standard input closes.
func serve(kind string, accounts int, cfg storeConfig) error {
	h, closeFn, err := buildServer(kind, accounts, cfg)
	if err != nil {
		return err
	}
	defer closeFn()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()

	// The profiles, on a listener of their own, so that the server's handler is the
	// one measured.
	pln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	pmux := http.NewServeMux()
	pmux.HandleFunc("/debug/pprof/", pprof.Index)
	pmux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	psrv := &http.Server{Handler: pmux, ReadHeaderTimeout: 10 * time.Second}
	go psrv.Serve(pln)
	defer psrv.Close()

	n := 0
	if !strings.HasPrefix(kind, "bare") && !strings.HasSuffix(kind, "bare") && kind != "json" {
		n = accounts
	}
	// Start the measurement from a collected heap, not from the garbage of the set-up.
	runtime.GC()
	fmt.Fprintf(os.Stderr, "    %s:%d heap after set-up: %s\n", kind, accounts, heapFigures())
	line, _ := json.Marshal(ready{URL: "http://" + ln.Addr().String(), Pprof: "http://" + pln.Addr().String(), Keys: n})
	fmt.Println(string(line))
	io.Copy(io.Discard, os.Stdin)
	runtime.GC()
	fmt.Fprintf(os.Stderr, "    %s:%d heap after the run: %s\n", kind, accounts, heapFigures())
	return nil
}

// heapFigures describes the heap as the last garbage collection left it: the live
// bytes, the bytes the collector scans for pointers (those of objects that hold
// pointers, up to their last one), and the number of objects.
func heapFigures() string {
	m := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/heap:bytes"}, {Name: "/gc/heap/objects:objects"}}
	metrics.Read(m)
	return fmt.Sprintf("live %.1f MB, scannable %.1f MB, %d objects",
		float64(m[0].Value.Uint64())/1e6, float64(m[1].Value.Uint64())/1e6, m[2].Value.Uint64())
}

// bareWithHeaders returns the bare handler writing the headers of a real Tollgate
// answer to GET /v1/hash?text=hello (the credit and rate headers, Cache-Control), as
// values computed once: what those headers alone cost net/http (its copy of the
// header map, its sort and its writes) when a handler does nothing else for them.
func bareWithHeaders() (http.Handler, error) {
	tg, closeFn, err := tollgateServer(memoryStores(), false, nil, 1, nil)
	if err != nil {
		return nil, err
	}
	defer closeFn()
	req := httptest.NewRequest(http.MethodGet, restPath, nil)
	req.Header.Set("X-Api-Key", benchKey(0))
	rec := httptest.NewRecorder()
	tg.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		return nil, fmt.Errorf("tollgate answered %d: %s", rec.Code, rec.Body)
	}
	return benchhttp.BareHash(rec.Header()), nil
}

// storeConfig is where the network stores are.
type storeConfig struct {
	redis, postgres string
}

// buildServer returns the handler of the server kind, and what to do when it stops.
func buildServer(kind string, accounts int, cfg storeConfig) (http.Handler, func(), error) {
	nop := func() {}
	switch kind {
	case "bare":
		return benchhttp.BareHash(nil), nop, nil
	case "bare-headers":
		h, err := bareWithHeaders()
		return h, nop, err
	case "json":
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"data":{"__typename":"Query"}}`)
		}), nop, nil
	case "gql-bare":
		h, err := bareGraphQL()
		return h, nop, err
	case "mcp-bare":
		return baremcp.Handler(), nop, nil
	case "memory", "gql", "gql-typename", "mcp", "batch":
		return tollgateServer(memoryStores(), false, nil, accounts, nil)
	case "memory-usage":
		return tollgateServer(memoryStores(), false, memory.NewUsageStore(), accounts, nil)
	case "metrics", "observed", "observed-noop", "observed-sampled", "observed-exported":
		obs, err := newObservation(kind)
		if err != nil {
			return nil, nil, err
		}
		return tollgateServer(memoryStores(), false, nil, accounts, obs)
	case "redis":
		return redisServer(cfg.redis, accounts)
	case "postgres":
		return postgresServer(cfg.postgres, accounts)
	case "pgredis", "pgredis-observed":
		return pgredisServer(kind, cfg, accounts)
	}
	return nil, nil, fmt.Errorf("unknown server %q", kind)
}

func memoryStores() tollgate.Stores {
	return tollgate.Stores{Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
		Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter()}
}

func redisServer(addr string, accounts int) (http.Handler, func(), error) {
	rd, cleanup, err := openRedis(addr, nil)
	if err != nil {
		return nil, nil, err
	}
	return serveOn(tollgate.Stores{Keys: rd, Ledger: rd, Rates: rd, Slots: rd}, cleanup, accounts, nil)
}

// openRedis opens the Redis stores at addr under a new prefix, whose keys cleanup
// removes; with hook not nil, the client's round trips are told to it.
func openRedis(addr string, hook goredis.Hook) (_ *redis.Store, cleanup func(), _ error) {
	client := goredis.NewClient(redisOptions(addr))
	if hook != nil {
		client.AddHook(hook)
	}
	var b [6]byte
	rand.Read(b[:])
	prefix := "restbench-" + hex.EncodeToString(b[:])
	cleanup = func() {
		ctx := context.Background()
		it := client.Scan(ctx, 0, prefix+":*", 1000).Iterator()
		for it.Next(ctx) {
			client.Unlink(ctx, it.Val())
		}
		client.Close()
	}
	rd, err := redis.New(client, &redis.Options{Prefix: prefix})
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	return rd, cleanup, nil
}

// postgresServer serves on every store in a new schema of the PostgreSQL at dsn, with
// the store's default options (postgres.New(pool, nil)) and the pool settings
// postgres.PoolConfig recommends, but 32 connections. It works as a new role of its
// own (dsn's role must be allowed to create roles), whose settings name the schema and
// the statement timeout, as a service behind a connection pooler is wired: its
// connections send no startup parameter but application_name (restbench, for
// pg_stat_activity), so that dsn may be a PgBouncer in transaction mode (with
// default_query_exec_mode=exec in it, unless the pooler keeps prepared statements).
func postgresServer(dsn string, accounts int) (http.Handler, func(), error) {
	pg, cleanup, err := openPostgres(dsn, nil)
	if err != nil {
		return nil, nil, err
	}
	return serveOn(tollgate.Stores{Keys: pg, Ledger: pg, Rates: pg, Slots: pg}, cleanup, accounts, nil)
}

// openPostgres opens the PostgreSQL stores of postgresServer, which cleanup closes and
// drops; with tracer not nil, the pool's statements are told to it.
func openPostgres(dsn string, tracer pgx.QueryTracer) (_ *postgres.Store, cleanup func(), _ error) {
	ctx := context.Background()
	var b [6]byte
	rand.Read(b[:])
	name := "restbench_" + hex.EncodeToString(b[:])
	rand.Read(b[:])
	password := hex.EncodeToString(b[:])
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, nil, err
	}
	defer admin.Close(ctx)
	id := pgx.Identifier{name}.Sanitize()
	drop := func() {
		ctx := context.Background()
		admin, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return
		}
		defer admin.Close(ctx)
		admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+id+" CASCADE")
		admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", name)
		admin.Exec(ctx, "DROP ROLE IF EXISTS "+id)
	}
	for _, sql := range []string{
		"CREATE SCHEMA " + id,
		"CREATE ROLE " + id + " LOGIN PASSWORD '" + password + "'",
		"ALTER ROLE " + id + " SET search_path = " + id,
		fmt.Sprintf("ALTER ROLE %s SET statement_timeout = %d", id, postgres.DefaultStatementTimeout.Milliseconds()),
		"GRANT USAGE, CREATE ON SCHEMA " + id + " TO " + id,
	} {
		if _, err := admin.Exec(ctx, sql); err != nil {
			drop()
			return nil, nil, fmt.Errorf("%s: %w", sql, err)
		}
	}
	cfg, err := postgres.PoolConfig(dsn)
	if err != nil {
		drop()
		return nil, nil, err
	}
	cfg.ConnConfig.User, cfg.ConnConfig.Password = name, password
	delete(cfg.ConnConfig.RuntimeParams, "statement_timeout") // the role's
	cfg.ConnConfig.RuntimeParams["application_name"] = "restbench"
	cfg.MaxConns = 32
	cfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		drop()
		return nil, nil, err
	}
	cleanup = func() {
		pool.Close()
		drop()
	}
	if err := postgres.Migrate(ctx, pool); err != nil {
		cleanup()
		return nil, nil, err
	}
	pg, err := postgres.New(pool, nil)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	return pg, cleanup, nil
}

// tollgateServer serves the sample catalog over REST, GraphQL and MCP on the given
// stores, with accounts accounts on a plan whose limits never deny (the primary key of
// account i is benchKey(i)), so that every call does the full work: edge check, key,
// restrictions, validation, rate limit, slot, credits, handler, settlement, envelope,
// headers. On network stores the key records are cached, as a deployment does. With
// obs not nil, the service is observed: its metrics, its traces (see observation).
func tollgateServer(stores tollgate.Stores, cacheKeys bool, us usage.Store, naccounts int, obs *observation) (http.Handler, func(), error) {
	reg := &catalog.Registry{}
	if err := apis.Register(reg); err != nil {
		return nil, nil, err
	}
	plans, err := billing.NewPlans(benchPlan)
	if err != nil {
		return nil, nil, err
	}
	quiet := slog.New(slog.DiscardHandler)
	opts := &tollgate.Options{Logger: quiet}
	if cacheKeys {
		opts.KeyCache = &auth.KeyCacheOptions{}
	}
	if obs != nil {
		stores = obs.metrics.Stores(stores)
	}
	svc, err := tollgate.New(reg, stores, plans, opts)
	if err != nil {
		return nil, nil, err
	}
	closeUsage := func() {} // and the observation's
	if obs != nil {
		closeUsage = obs.attach(svc)
	}
	if us != nil {
		rec, err := usage.NewRecorder(us, &usage.RecorderOptions{Logger: quiet})
		if err != nil {
			svc.Close()
			return nil, nil, err
		}
		svc.Events().Subscribe(rec, rec.Kinds()...)
		detach := closeUsage
		closeUsage = func() { _ = rec.Close(context.Background()); detach() }
	}
	mgr, err := accounts.New(svc, nil)
	if err != nil {
		svc.Close()
		closeUsage()
		return nil, nil, err
	}
	if err := createAccounts(mgr, naccounts); err != nil {
		mgr.Close()
		svc.Close()
		closeUsage()
		return nil, nil, err
	}
	restHandler, err := rest.NewHandler(svc, &rest.Options{Logger: quiet})
	if err != nil {
		return nil, nil, err
	}
	gqlHandler, err := gql.NewHandler(svc, &gql.Options{Logger: quiet})
	if err != nil {
		return nil, nil, err
	}
	mcpHandler, err := mcp.NewHandler(svc, &mcp.Options{Logger: quiet})
	if err != nil {
		return nil, nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", restHandler)
	mux.Handle("/v1/graphql", gqlHandler)
	mux.Handle("/v1/mcp", mcpHandler)
	var h http.Handler = mux
	if obs != nil && obs.tracer != nil {
		h = obs.tracer.Handler(mux)
	}
	return h, func() { mcpHandler.Close(); mgr.Close(); svc.Close(); closeUsage() }, nil
}

// benchPlan is the plan of the benchmark accounts: its limits never deny, but every
// part of an admission (rate limit, slot, credits) is taken.
var benchPlan = billing.Plan{Name: "bench", Credits: billing.MaxCredits, RatePerMinute: 1 << 30, Concurrency: 1 << 20, GraphQLMaxAPIs: 10}

// createAccounts creates n accounts on the bench plan, account i with the primary key
// benchKey(i), with a few goroutines (a million accounts take a while).
func createAccounts(mgr *accounts.Manager, n int) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range max(1, min(runtime.GOMAXPROCS(0), 8)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				_, _, _, err := mgr.CreateAccount(context.Background(), accounts.Spec{
					ID: fmt.Sprintf("acct-%d", i), Plan: benchPlan.Name, KeyValue: benchKey(i)})
				if err != nil {
					mu.Lock()
					first = cmp.Or(first, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// serveOn is tollgateServer on network stores (key records cached), which cleanup
// closes once the server stops, or at once if it cannot start.
func serveOn(stores tollgate.Stores, cleanup func(), accounts int, obs *observation) (http.Handler, func(), error) {
	h, closeFn, err := tollgateServer(stores, true, nil, accounts, obs)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	return h, func() { closeFn(); cleanup() }, nil
}
