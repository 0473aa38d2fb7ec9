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
	compare := flag.String("compare", "bare,server", "the two servers to compare, baseline first: bare, bare-headers, server, server-events, server-webhooks, memory, memory-usage, metrics, observed, observed-noop, observed-sampled, observed-exported, redis, postgres, batch, gql, gql-bare, gql-typename, json, mcp, mcp-bare; NAME:N for N accounts")
	redisAddr := flag.String("redis", "127.0.0.1:6379", "Redis for the redis server: host:port, or the path of a Unix socket")
	pgDSN := flag.String("postgres", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "PostgreSQL for the postgres server, or a PgBouncer in transaction mode in front of it")
	profile := flag.String("profile", "", "write each server's CPU profile of the last round and allocation profile into this directory")
	callgrind := flag.String("callgrind", "", "run each server under valgrind's callgrind, its profiles written into this directory, and print the instructions it executed per call in each drive")
	baselineExe := flag.String("baseline-exe", "", "run the baseline server from this build of restbench (one built from another commit), to compare a change with the code before it")
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
	if len(names) != 2 {
		fmt.Fprintln(os.Stderr, "restbench: -compare takes two names, such as bare,server")
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
	b := &bench{cfg: cfg, gen: gen, dur: *dur, rounds: *rounds, sessions: *sessions, events: *events, profile: *profile, baselineExe: *baselineExe, callgrind: *callgrind}
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
	servers   []*server
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

// cpuUse is CPU time in microseconds, at a point or per call.
type cpuUse struct{ server, gen, store float64 }

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
	var ratios, cpuRatios, insRatios []float64
	perCall := make([][]float64, len(b.servers))
	insPerCall := make([][]float64, len(b.servers))
	for round := 1; round <= b.rounds; round++ {
		order := []int{0, 1}
		if round%2 == 0 {
			order = []int{1, 0} // alternate, so that a drift in load favours neither
		}
		var rates [2]float64
		var cpus [2]cpuUse
		var ins [2]float64
		var waits [2]string
		for _, j := range order {
			s := b.servers[j]
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
			rates[j], cpus[j] = rate, s.cpu(b.gen).perCall(before, rate*b.dur.Seconds())
			if b.callgrind != "" {
				n, err := s.instructions(b.callgrind)
				if err != nil {
					return fmt.Errorf("%s: %w", s.name, err)
				}
				ins[j] = n / (rate * b.dur.Seconds())
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
		ratio := rates[1] / rates[0]
		ratios = append(ratios, ratio)
		cpuRatios = append(cpuRatios, cpus[1].server/cpus[0].server)
		fmt.Printf("round %d (load %.2f): %s %.0f calls/s, %s %.0f calls/s, ratio %.3f\n",
			round, loadAverage(), b.servers[0].name, rates[0], b.servers[1].name, rates[1], ratio)
		if b.callgrind != "" {
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
			if s.events != nil {
				fmt.Printf("    %-16s events: %s\n", "", s.events.describe())
			}
		}
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
	return cpuUse{(u.server - before.server) / n, (u.gen - before.gen) / n, (u.store - before.store) / n}
}

func (u cpuUse) describe(s *server) string {
	out := fmt.Sprintf("server %.1f µs, load generator %.1f µs", u.server, u.gen)
	if s.store != "" {
		out += fmt.Sprintf(", %s %.1f µs", s.store, u.store)
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
