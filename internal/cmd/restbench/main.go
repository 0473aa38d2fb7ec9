// Command restbench measures Tollgate against the servers a user would write or run
// instead, side by side on one machine: it starts two servers, each in a process of its
// own, drives them in alternating rounds so that the machine's noise falls on both
// alike, and prints the median of the per-round throughput ratios (with min and max)
// and the CPU time each server process spent per call, read from /proc. Run it from
// the module's root; it uses wrk (-t2 -c32) when wrk is on PATH, else a Go load
// generator (-client go).
//
// Each comparison of docs/performance.md is one command:
//
//	go run ./internal/cmd/restbench -compare bare,server            # REST: examples/server vs a bare handler
//	go run ./internal/cmd/restbench -compare bare,bare-headers      # what a paid call's headers cost net/http
//	go run ./internal/cmd/restbench -compare memory:1000,memory:1000000  # flat cost per call with the number of accounts
//	go run ./internal/cmd/restbench -compare memory,postgres        # PostgreSQL, one hot account, default options
//	go run ./internal/cmd/restbench -compare memory:256,postgres:256  # PostgreSQL, many accounts
//	go run ./internal/cmd/restbench -compare memory,redis           # Redis
//	go run ./internal/cmd/restbench -compare mcp-bare,mcp -c 16     # MCP tools/call, 16 sessions
//	go run ./internal/cmd/restbench -compare gql-bare,gql           # GraphQL vs bare graphql-go
//	go run ./internal/cmd/restbench -compare memory,gql             # GraphQL vs our REST
//	go run ./internal/cmd/restbench -compare memory,batch           # batches of 100 vs one call a request
//	go run ./internal/cmd/restbench -compare server-events,server-webhooks -rounds 6  # webhooks delivered while serving
//	go run ./internal/cmd/restbench -compare memory,observed        # metrics and tracing on, the trace not sampled
//	go run ./internal/cmd/restbench -compare memory,observed-sampled  # the same, every span sampled
//	go run ./internal/cmd/restbench -compare distributed -pgwork    # PostgreSQL's work per paid call of examples/distributed
//	TYK_BIN=/path/to/tyk go run ./internal/cmd/restbench -compare tyk,distributed  # a Tyk gateway vs examples/distributed
//
// -compare with one name measures that server alone, in as many drives as rounds.
//
// The servers (-compare takes two, the baseline first):
//
//	bare          a net/http handler that does the hash API's work and writes only the
//	              envelope and Content-Type (what a hand-written handler writes)
//	bare-headers  the bare handler writing the headers of a real Tollgate answer (credit
//	              and rate headers, Cache-Control) as values computed once: what the
//	              headers a paid call must carry cost net/http alone
//	server        go run ./examples/server (built, then run with a fixtures file whose
//	              plan never denies): memory stores, usage statistics, audit log, sessions
//	server-events the server, with a second account whose changes restbench makes while
//	              it drives the server (-events a second, 100 by default, through the
//	              admin API: credit grants and key rotations, in turns), no webhook
//	              endpoint registered
//	server-webhooks
//	              server-events with an endpoint of that account registered, on a
//	              receiver of restbench's own on loopback: every change is a webhook
//	              message signed and posted while the calls are served
//	memory        the sample catalog over REST, GraphQL and MCP on memory stores
//	memory-usage  the same, recording usage statistics
//	metrics       memory, with its Prometheus metrics (package metrics): attached to the
//	              service, every store decorated, as examples/server wires them
//	observed      metrics, and traces (package tracing: the tracer attached, its
//	              middleware around the mux) on the OpenTelemetry SDK's provider with
//	              a sampler that keeps no trace (ParentBased(TraceIDRatioBased(0)))
//	              and no exporter: what a request that is not sampled costs
//	observed-noop metrics, and the tracer on tracing.New's default provider,
//	              OpenTelemetry's global one, a no-op until the host sets one
//	observed-sampled
//	              metrics, and the tracer on the SDK's default provider
//	              (sdktrace.NewTracerProvider()): its default sampler,
//	              ParentBased(AlwaysSample), samples and records every span, and
//	              with no span processor nothing is exported
//	observed-exported
//	              observed-sampled, the spans handed to a batch span processor
//	              whose exporter drops them
//	redis         the same on every store in Redis (-redis), key records cached
//	postgres      the same on every store in PostgreSQL (-postgres), postgres.New(pool,
//	              nil): the default options; a new schema, 32 connections, as a new role
//	              whose settings name the schema and the statement timeout (-postgres's
//	              role must be allowed to create roles), so that -postgres may be a
//	              PgBouncer in transaction mode (add default_query_exec_mode=exec to it
//	              unless the PgBouncer keeps prepared statements)
//	batch         memory, called with POST /v1/hash/batch of 100 items {"text": "hello"}:
//	              its calls per second and CPU per call count each item
//	gql           memory, called with { hash(text: "hello") { algorithm hash } }
//	gql-bare      graphql-go's own handler over a schema with the same field
//	gql-typename  memory, called with { __typename }; json: a bare handler answering it
//	mcp           memory, called with MCP tools/call hash over -sessions sessions
//	mcp-bare      the go-sdk's Streamable HTTP handler over a server with the same tool,
//	              registered with Server.AddTool (no schema check per call)
//	distributed   go run ./examples/distributed, one instance, on -postgres and -redis (keys
//	              and credits in PostgreSQL, limits in Redis), in a new schema and under a
//	              new Redis prefix, both removed when it stops, with the fixtures of server;
//	              its busy accounts' credits are spent from credit blocks, its default
//	distributed-per-call
//	              the same with -credit-block-size -1: each call reserves its own credits
//	tyk           a Tyk gateway (-tyk or $TYK_BIN, a binary restbench does not build) in
//	              front of the bare server as its upstream, a process of its own, with the
//	              settings of Tyk's example configuration (tyk.conf.example), one API
//	              definition with key authentication (X-Api-Key) and one policy with a rate
//	              limit and a quota that never deny, its key created through the gateway's
//	              admin API; keys and quotas in -redis, which must be host:port, rate limits
//	              in the gateway's memory as Tyk does by default (in Redis with
//	              -tyk-redis-limiter). Its CPU per call counts the upstream's apart
//
// A Tollgate server holds one account on a plan whose limits never deny, so that every
// call does the full work: edge check, key, restrictions, validation, rate limit,
// concurrency slot, credit reservation, handler, settlement, envelope and headers.
// NAME:N gives it N accounts instead (memory:1000000), and then every request sends the
// key of an account picked at random. REST calls are GET /v1/hash?text=hello.
//
// Each round prints, for each server, the calls per second and the CPU time per call
// in microseconds: the server process's, the load generator's, and the database's
// (every postgres or redis-server process on the machine, so other clients of the
// same database count too). On a shared machine the CPU per call varies far less than
// the throughput, and it is what sets the throughput once the CPUs are busy. For
// postgres, each round also prints what its connections waited on (pg_stat_activity,
// sampled every 100 ms). -profile DIR writes each server's CPU profile of the last
// round and its allocation profile (go tool pprof DIR/memory.cpu.pprof). Each server
// process also prints its heap after the set-up and after the run: the live bytes, the
// bytes the garbage collector scans for pointers on every cycle, and the objects.
//
// -pgwork prints, for each drive of a server on PostgreSQL (postgres, distributed),
// PostgreSQL's work per call: the statements its clients sent and those run inside
// functions (pg_stat_statements, where the database has it loaded), the transactions
// and the rows inserted, updated and deleted (pg_stat_database), the WAL written
// (pg_current_wal_insert_lsn) and its records (pg_stat_wal), and the CPU of the
// backends of the server's connections (application_name restbench) and of the
// database server's other processes, when it runs on this machine; then their medians.
// PostgreSQL publishes its statistics up to 10 s late, so each reading waits 11 s
// (before a drive, and after it for the counters that lag); the database's figures
// are only as clean as its other clients are quiet: give -postgres a database of its
// own, or a PostgreSQL of its own (WAL and CPU count the whole server).
//
// -callgrind DIR runs both servers under valgrind's callgrind and prints, for each
// drive, the instructions each server process executed in user space per call (the
// handler, net/http, the scheduler and the garbage collector, every thread; not the
// kernel's work), which the load on the machine does not change as it changes CPU
// time. The servers answer about 30 times slower under callgrind, so that the drives
// make fewer calls; the figures need no more rounds than three:
//
//	go run ./internal/cmd/restbench -compare bare,server -callgrind /tmp/cg -rounds 3 -c 8
//
// With GOGC=off in restbench's environment, which the server processes inherit, the
// collector's share is left out of the counts, and their rounds agree within 1 - 2%
// (with the collector, 1 - 7%): what a change to a call's own work costs.
//
// -baseline-exe runs the baseline server from another build of restbench, so that a
// change is compared with the code before it, in the same run:
//
//	git stash; go build -o /tmp/restbench-before ./internal/cmd/restbench; git stash pop
//	go run ./internal/cmd/restbench -compare memory:1000,memory:1000 -baseline-exe /tmp/restbench-before
package main

import (
	"cmp"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	serveKind := flag.String("serve", "", "internal: serve this kind of server in this process, for the orchestrator")
	accounts := flag.Int("accounts", 1, "internal: the number of accounts of a -serve server")
	rounds := flag.Int("rounds", 5, "rounds; each drives both servers once")
	dur := flag.Duration("d", 5*time.Second, "duration of each drive")
	conns := flag.Int("c", 32, "concurrent connections")
	threads := flag.Int("t", 2, "wrk threads")
	sessions := flag.Int("sessions", 16, "MCP sessions of the mcp servers")
	events := flag.Int("events", 100, "changes a second that make webhook events while the server-events and server-webhooks servers are driven")
	client := flag.String("client", "auto", "load generator: wrk, go, or auto (wrk if on PATH)")
	compare := flag.String("compare", "bare,server", "the two servers to compare, baseline first, or one to measure alone: bare, bare-headers, server, server-events, server-webhooks, memory, memory-usage, metrics, observed, observed-noop, observed-sampled, observed-exported, redis, postgres, pgredis, pgredis-observed, distributed, distributed-per-call, tyk, batch, gql, gql-bare, gql-typename, json, mcp, mcp-bare; NAME:N for N accounts")
	redisAddr := flag.String("redis", "127.0.0.1:6379", "Redis for the redis server: host:port, or the path of a Unix socket")
	pgDSN := flag.String("postgres", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "PostgreSQL for the postgres server, or a PgBouncer in transaction mode in front of it")
	profile := flag.String("profile", "", "write each server's CPU profile of the last round and allocation profile into this directory")
	callgrind := flag.String("callgrind", "", "run each server under valgrind's callgrind, its profiles written into this directory, and print the instructions it executed per call in each drive")
	baselineExe := flag.String("baseline-exe", "", "run the baseline server from this build of restbench (one built from another commit), to compare a change with the code before it")
	pgWork := flag.Bool("pgwork", false, "print PostgreSQL's work per call for each drive of a server on PostgreSQL (postgres, distributed): statements, transactions, rows written, WAL and the CPU of its connections")
	tykBin := flag.String("tyk", os.Getenv("TYK_BIN"), "the Tyk gateway binary the tyk server runs (default $TYK_BIN)")
	tykRedisLimiter := flag.Bool("tyk-redis-limiter", false, "the tyk server keeps its rate limits in Redis (enable_redis_rolling_limiter), not in its memory as Tyk's example configuration does")
	flag.Parse()
	cfg := storeConfig{redis: *redisAddr, postgres: *pgDSN}
	if *serveKind != "" {
		if err := serve(*serveKind, *accounts, cfg); err != nil {
			fmt.Fprintln(os.Stderr, "restbench:", err)
			os.Exit(1)
		}
		return
	}

	names := strings.Split(*compare, ",")
	if len(names) > 2 || slices.Contains(names, "") {
		fmt.Fprintln(os.Stderr, "restbench: -compare takes two names, such as bare,server, or one to measure it alone")
		os.Exit(2)
	}
	if *client == "auto" {
		*client = "go"
		if _, err := exec.LookPath("wrk"); err == nil {
			*client = "wrk"
		}
	}
	var gen generator = goGen{conns: *conns}
	if *client == "wrk" {
		gen = wrkGen{threads: *threads, conns: *conns}
	}
	if *events < 1 {
		fmt.Fprintln(os.Stderr, "restbench: -events must be at least 1")
		os.Exit(2)
	}
	b := &bench{cfg: cfg, gen: gen, dur: *dur, rounds: *rounds, sessions: *sessions, events: *events, profile: *profile,
		baselineExe: *baselineExe, callgrind: *callgrind, pgWork: *pgWork, tyk: *tykBin, tykRedisLimiter: *tykRedisLimiter}
	err := b.run(names)
	b.close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "restbench:", err)
		os.Exit(1)
	}
}

// A bench is one comparison.
type bench struct {
	cfg      storeConfig
	gen      generator
	dur      time.Duration
	rounds   int
	sessions int
	events   int // changes a second while a webhook server is driven
	profile  string
	// baselineExe, if not "", is the restbench the baseline server (the first) runs
	// from.
	baselineExe string
	// callgrind, if not "", is the directory of the servers' callgrind profiles: they run
	// under callgrind, and each drive counts their instructions per call.
	callgrind string
	// pgWork asks for PostgreSQL's work per call of the servers on PostgreSQL.
	pgWork bool
	// tyk is the Tyk gateway binary of the tyk server.
	tyk string
	// tykRedisLimiter makes the tyk server keep its rate limits in Redis.
	tykRedisLimiter bool
	servers         []*server
}

// exe returns the program the i-th server runs from: "" for this one.
func (b *bench) exe(i int) string {
	if i == 0 {
		return b.baselineExe
	}
	return ""
}

func (b *bench) close() {
	for _, s := range b.servers {
		s.stop()
	}
}

// cpuUse is CPU time in microseconds, at a point or per call: the server process's,
// the load generator's, the server's other processes' (s.parts) and its databases'
// (s.stores).
type cpuUse struct {
	server, gen   float64
	parts, stores []float64
}

func (b *bench) run(names []string) error {
	for _, name := range names {
		s, err := b.start(name)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		b.servers = append(b.servers, s)
	}
	fmt.Printf("load generator: %s; %s per drive, %d rounds; load average %.2f on %d CPUs\n",
		b.gen, b.dur, b.rounds, loadAverage(), runtime.NumCPU())
	// A short drive of each first: connections, pools and heaps settle.
	for _, s := range b.servers {
		if _, err := b.gen.drive(s.call, min(b.dur, 2*time.Second)); err != nil {
			return err
		}
	}
	var watchers []*pgWatcher // per server; nil for one not on PostgreSQL
	if b.pgWork {
		for _, s := range b.servers {
			var w *pgWatcher
			if s.pgApp != "" {
				var err error
				if w, err = newPGWatcher(b.cfg.postgres, s.pgApp); err != nil {
					return fmt.Errorf("-pgwork: %w", err)
				}
				defer w.close()
				fmt.Printf("%s: %s\n", s.name, w.describeSources())
			}
			watchers = append(watchers, w)
		}
	}
	var ratios, cpuRatios, insRatios []float64
	perCall := make([][]float64, len(b.servers))
	insPerCall := make([][]float64, len(b.servers))
	works := make([][]pgCounters, len(b.servers))
	for round := 1; round <= b.rounds; round++ {
		order := []int{0, 1}[:len(b.servers)]
		if round%2 == 0 && len(b.servers) == 2 {
			order = []int{1, 0} // alternate, so that a drift in load favours neither
		}
		var rates [2]float64
		var cpus [2]cpuUse
		var ins [2]float64
		var waits, work [2]string
		for _, j := range order {
			s := b.servers[j]
			var watch *pgWatcher
			if watchers != nil {
				watch = watchers[j]
			}
			var stopSampling func() string
			if s.kind == "postgres" {
				stopSampling = sampleWaits(b.cfg.postgres)
			}
			var profiled chan error
			if b.profile != "" && round == b.rounds {
				profiled = s.startProfile(b.profile, b.dur)
			}
			if b.callgrind != "" {
				if err := s.zeroInstructions(); err != nil {
					return fmt.Errorf("%s: callgrind_control -z: %w", s.name, err)
				}
			}
			var pgBefore pgCounters
			if watch != nil {
				var err error
				if pgBefore, err = watch.read(true); err != nil {
					return fmt.Errorf("%s: -pgwork: %w", s.name, err)
				}
			}
			var stopEvents func() error
			if s.events != nil {
				stopEvents = s.events.start()
			}
			before := s.cpu(b.gen)
			rate, err := b.gen.drive(s.call, b.dur)
			if stopEvents != nil {
				err = cmp.Or(err, stopEvents())
			}
			if err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			rate *= float64(max(s.call.items, 1)) // calls, a batch's items each one
			calls := rate * b.dur.Seconds()
			rates[j], cpus[j] = rate, s.cpu(b.gen).perCall(before, calls)
			if watch != nil {
				after, err := watch.read(false)
				if err != nil {
					return fmt.Errorf("%s: -pgwork: %w", s.name, err)
				}
				w := after.sub(pgBefore).perCall(calls)
				works[j] = append(works[j], w)
				work[j] = w.String()
			}
			if b.callgrind != "" {
				n, err := s.instructions(b.callgrind)
				if err != nil {
					return fmt.Errorf("%s: %w", s.name, err)
				}
				ins[j] = n / calls
			}
			if stopSampling != nil {
				waits[j] = stopSampling()
			}
			if profiled != nil {
				if err := <-profiled; err != nil {
					return fmt.Errorf("%s: profile: %w", s.name, err)
				}
			}
		}
		if len(b.servers) == 2 {
			ratio := rates[1] / rates[0]
			ratios = append(ratios, ratio)
			cpuRatios = append(cpuRatios, cpus[1].server/cpus[0].server)
			fmt.Printf("round %d (load %.2f): %s %.0f calls/s, %s %.0f calls/s, ratio %.3f\n",
				round, loadAverage(), b.servers[0].name, rates[0], b.servers[1].name, rates[1], ratio)
		} else {
			fmt.Printf("round %d (load %.2f): %s %.0f calls/s\n", round, loadAverage(), b.servers[0].name, rates[0])
		}
		if b.callgrind != "" && len(b.servers) == 2 {
			insRatios = append(insRatios, ins[1]/ins[0])
		}
		for j, s := range b.servers {
			perCall[j] = append(perCall[j], cpus[j].server)
			insPerCall[j] = append(insPerCall[j], ins[j])
			fmt.Printf("    %-16s CPU per call: %s\n", s.name, cpus[j].describe(s))
			if b.callgrind != "" {
				fmt.Printf("    %-16s instructions per call (callgrind, user space): %.0f\n", "", ins[j])
			}
			if waits[j] != "" {
				fmt.Printf("    %-16s waits: %s\n", "", waits[j])
			}
			if work[j] != "" {
				fmt.Printf("    %-16s PostgreSQL per call: %s\n", "", work[j])
			}
			if s.events != nil {
				fmt.Printf("    %-16s events: %s\n", "", s.events.describe())
			}
		}
	}
	for j, s := range b.servers {
		if works[j] != nil {
			fmt.Printf("PostgreSQL per call of %s (medians of %d drives): %s\n", s.name, len(works[j]), medianWork(works[j]))
		}
	}
	if len(b.servers) == 1 {
		fmt.Printf("server CPU per call of %s: %.1f µs (median of %d drives)\n", b.servers[0].name, median(perCall[0]), len(perCall[0]))
		return nil
	}
	fmt.Printf("throughput %s/%s: median %.3f (min %.3f, max %.3f) over %d rounds\n",
		b.servers[1].name, b.servers[0].name, median(ratios), slices.Min(ratios), slices.Max(ratios), len(ratios))
	fmt.Printf("server CPU per call %s/%s: median %.2fx (min %.2f, max %.2f); %s %.1f µs, %s %.1f µs (medians)\n",
		b.servers[1].name, b.servers[0].name, median(cpuRatios), slices.Min(cpuRatios), slices.Max(cpuRatios),
		b.servers[0].name, median(perCall[0]), b.servers[1].name, median(perCall[1]))
	if b.callgrind != "" {
		fmt.Printf("instructions per call %s/%s: median %.3fx (min %.3f, max %.3f); %s %.0f, %s %.0f (medians)\n",
			b.servers[1].name, b.servers[0].name, median(insRatios), slices.Min(insRatios), slices.Max(insRatios),
			b.servers[0].name, median(insPerCall[0]), b.servers[1].name, median(insPerCall[1]))
	}
	return nil
}

func (u cpuUse) perCall(before cpuUse, n float64) cpuUse {
	out := cpuUse{server: (u.server - before.server) / n, gen: (u.gen - before.gen) / n}
	for i := range u.parts {
		out.parts = append(out.parts, (u.parts[i]-before.parts[i])/n)
	}
	for i := range u.stores {
		out.stores = append(out.stores, (u.stores[i]-before.stores[i])/n)
	}
	return out
}

func (u cpuUse) describe(s *server) string {
	out := fmt.Sprintf("server %.1f µs, load generator %.1f µs", u.server, u.gen)
	for i, p := range s.parts {
		out += fmt.Sprintf(", %s %.1f µs", p.name, u.parts[i])
	}
	for i, name := range s.stores {
		out += fmt.Sprintf(", %s %.1f µs", name, u.stores[i])
	}
	return out
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// parseName splits NAME:N into the server kind and its number of accounts.
func parseName(name string) (kind string, accounts int, err error) {
	kind, n, ok := strings.Cut(name, ":")
	if !ok {
		return kind, 1, nil
	}
	accounts, err = strconv.Atoi(n)
	if err != nil || accounts < 1 {
		return "", 0, fmt.Errorf("%q: the number of accounts after the colon must be a positive integer", name)
	}
	return kind, accounts, nil
}
