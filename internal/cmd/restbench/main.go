// Command restbench measures the throughput of a whole REST call through Tollgate against
// a bare net/http handler that writes the same envelope, in the same run, and prints the
// ratio. It starts both servers on loopback, then drives them in alternating rounds so
// that the machine's noise falls on both alike:
//
//	go run ./internal/cmd/restbench                 # uses wrk if it is on PATH
//	go run ./internal/cmd/restbench -rounds 5 -d 5s -c 64
//	go run ./internal/cmd/restbench -client go      # the built-in Go load generator
//
// The Tollgate servers serve the sample catalog with a plan whose limits never deny, so
// every call does the full work: edge check, key lookup, restrictions, validation, rate
// limit, concurrency slot, credit reservation, handler, settlement, envelope and headers.
// The call is GET /v1/hash?text=hello. -compare picks the two servers: bare (the
// baseline), memory, memory-usage (memory with usage recording on), redis (every store
// in Redis, keys cached) or postgres:
//
//	go run ./internal/cmd/restbench -compare memory,redis
//	go run ./internal/cmd/restbench -compare memory,memory-usage  # the cost of usage recording
//
// Each round also prints the CPU time a call costs, in microseconds: in this process
// (the servers, and the Go load generator), in wrk, and in redis-server when a server
// uses it; and at the end the median ratio of the two servers' CPU per call. On a
// shared machine this varies far less than throughput, and it is what sets throughput
// once the CPUs are busy.
//
// The same comparison with wrk by hand, against go run ./examples/server (whose pro
// plan's rate limit would deny most of a load test, so use -fixtures with a generous
// plan):
//
//	wrk -t2 -c64 -d10s -H "x-api-key: $KEY" "http://127.0.0.1:8080/v1/hash?text=hello"
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/examples/apis"
	"github.com/tollgate-dev/tollgate/gql"
	"github.com/tollgate-dev/tollgate/internal/benchhttp"
	"github.com/tollgate-dev/tollgate/rest"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/store/postgres"
	"github.com/tollgate-dev/tollgate/store/redis"
	"github.com/tollgate-dev/tollgate/usage"
)

const path = "/v1/hash?text=hello"

func main() {
	rounds := flag.Int("rounds", 3, "rounds; each drives both servers once")
	dur := flag.Duration("d", 5*time.Second, "duration of each drive")
	conns := flag.Int("c", 64, "concurrent connections")
	client := flag.String("client", "auto", "load generator: wrk, go, or auto (wrk if on PATH)")
	compare := flag.String("compare", "bare,memory", "the two servers to compare: bare, json, memory, memory-usage, gql-typename, gql-hash, redis or postgres")
	redisAddr := flag.String("redis", "127.0.0.1:6379", "Redis for -compare with redis: host:port, or the path of a Unix socket")
	pgDSN := flag.String("postgres", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "PostgreSQL for -compare with postgres")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the servers (this process) to the file")
	flag.Parse()
	names := strings.Split(*compare, ",")
	if len(names) != 2 {
		fmt.Fprintln(os.Stderr, "restbench: -compare takes two names, such as bare,memory")
		os.Exit(2)
	}
	env := &targets{redis: *redisAddr, postgres: *pgDSN}
	defer env.close()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "restbench:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(env, names, *rounds, *dur, *conns, *client); err != nil {
		fmt.Fprintln(os.Stderr, "restbench:", err)
		os.Exit(1)
	}
}

func run(env *targets, names []string, rounds int, dur time.Duration, conns int, client string) error {
	if client == "auto" {
		client = "go"
		if _, err := exec.LookPath("wrk"); err == nil {
			client = "wrk"
		}
	}
	var calls [2]call
	for i, name := range names {
		var err error
		if calls[i], err = env.start(name); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}

	fmt.Printf("load generator: %s, %d connections, %s per drive, %d rounds\n", client, conns, dur, rounds)
	meter := newCPUMeter(env, names)
	var ratios, cpuRatios []float64
	for i := 1; i <= rounds; i++ {
		// Alternate which server goes first, so that a drift in the machine's load
		// during a round does not favour either.
		var rates [2]float64
		var cpus [2]cpuUse
		order := []int{0, 1}
		if i%2 == 0 {
			order = []int{1, 0}
		}
		for _, j := range order {
			before := meter.read()
			var err error
			if rates[j], err = drive(client, calls[j], dur, conns); err != nil {
				return err
			}
			cpus[j] = meter.read().since(before, rates[j]*dur.Seconds())
		}
		ratios = append(ratios, rates[1]/rates[0])
		cpuRatios = append(cpuRatios, cpus[0].total()/cpus[1].total())
		fmt.Printf("round %d: %s %.0f req/s, %s %.0f req/s, ratio %.3f\n", i, names[0], rates[0], names[1], rates[1], rates[1]/rates[0])
		for j, name := range names {
			fmt.Printf("         %s CPU per call: %s\n", name, cpus[j])
		}
	}
	slices.Sort(ratios)
	slices.Sort(cpuRatios)
	fmt.Printf("median ratio %s/%s: %.3f (min %.3f, max %.3f)\n", names[1], names[0], ratios[len(ratios)/2], ratios[0], ratios[len(ratios)-1])
	fmt.Printf("median ratio of CPU per call %s/%s: %.3f (min %.3f, max %.3f)\n", names[0], names[1], cpuRatios[len(cpuRatios)/2], cpuRatios[0], cpuRatios[len(cpuRatios)-1])
	return nil
}

// A cpuMeter reads the CPU time used so far by the servers (this process), the load
// generator (wrk, a child; the Go generator counts with the servers) and, when a
// server uses it, redis-server (INFO cpu). On a machine where they share the CPUs,
// the CPU a call costs in all of them sets the throughput once the CPUs are busy, and
// it varies far less from run to run than the throughput itself.
type cpuMeter struct {
	redis *goredis.Client // nil when no server uses Redis
}

// cpuUse is CPU time, in microseconds: at a point, or per call.
type cpuUse struct{ server, client, redis float64 }

func newCPUMeter(env *targets, names []string) *cpuMeter {
	m := &cpuMeter{}
	if slices.Contains(names, "redis") {
		m.redis = goredis.NewClient(redisOptions(env.redis))
	}
	return m
}

func (m *cpuMeter) read() cpuUse {
	var self, children syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	us := func(r syscall.Rusage) float64 {
		return float64(r.Utime.Nano()+r.Stime.Nano()) / 1e3
	}
	u := cpuUse{server: us(self), client: us(children)}
	if m.redis != nil {
		info, err := m.redis.Info(context.Background(), "cpu").Result()
		if err == nil {
			for _, line := range strings.Split(info, "\r\n") {
				name, v, _ := strings.Cut(line, ":")
				if name == "used_cpu_sys" || name == "used_cpu_user" {
					f, _ := strconv.ParseFloat(v, 64)
					u.redis += f * 1e6
				}
			}
		}
	}
	return u
}

// since returns the CPU used since before, per call of n calls.
func (u cpuUse) since(before cpuUse, n float64) cpuUse {
	return cpuUse{(u.server - before.server) / n, (u.client - before.client) / n, (u.redis - before.redis) / n}
}

func (u cpuUse) total() float64 { return u.server + u.client + u.redis }

func (u cpuUse) String() string {
	s := fmt.Sprintf("%.1f µs (servers %.1f, load generator %.1f", u.total(), u.server, u.client)
	if u.redis != 0 {
		s += fmt.Sprintf(", redis-server %.1f", u.redis)
	}
	return s + ")"
}

// redisOptions returns the client options for the Redis at addr.
func redisOptions(addr string) *goredis.Options {
	ro := &goredis.Options{Addr: addr, PoolSize: 128, ContextTimeoutEnabled: true,
		DialTimeout: time.Second, DialerRetries: 1, ReadTimeout: time.Second, WriteTimeout: time.Second, Protocol: 2}
	if strings.HasPrefix(addr, "/") {
		ro.Network = "unix" // a Redis on this host, over its Unix socket
	}
	return ro
}

// A call is what the load generator sends: a GET of url, or a POST of a JSON body.
type call struct {
	url, key, body string
}

// targets starts the servers to compare and cleans up after them.
type targets struct {
	redis, postgres string
	cleanups        []func()
	memory          *call // the memory server's REST call, once started
}

func (e *targets) close() {
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		e.cleanups[i]()
	}
}

// GraphQL queries of the gql-* targets.
const (
	typenameQuery = `{"query":"{ __typename }"}`
	hashQuery     = `{"query":"{ hash(text: \"hello\") { algorithm hash } }"}`
)

// start starts the named server and returns the call to drive it with.
func (e *targets) start(name string) (call, error) {
	switch name {
	case "bare":
		// The baseline writes the headers of a real answer: start the memory server
		// to get one.
		m, err := e.memoryCall()
		if err != nil {
			return call{}, err
		}
		headers, err := answerHeaders(m.url, m.key)
		if err != nil {
			return call{}, err
		}
		url, err := e.serve(benchhttp.BareHash(headers))
		return call{url: url + path}, err
	case "json":
		// A bare net/http handler answering a small JSON document to a POST: the
		// baseline of the gateway's { __typename }.
		url, err := e.serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"data":{"__typename":"Query"}}`)
		}))
		return call{url: url + "/v1/graphql", body: typenameQuery}, err
	case "memory":
		return e.memoryCall()
	case "memory-usage":
		// The memory server with usage recording on (tollgate.Options.Usage, on the
		// memory usage store): -compare memory,memory-usage is its cost.
		return e.tollgate(tollgate.Stores{
			Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
			Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter(),
		}, false, memory.NewUsageStore())
	case "gql-typename", "gql-hash":
		m, err := e.memoryCall()
		if err != nil {
			return call{}, err
		}
		c := call{url: strings.TrimSuffix(m.url, path) + "/v1/graphql", key: m.key, body: typenameQuery}
		if name == "gql-hash" {
			c.body = hashQuery
		}
		return c, nil
	case "redis":
		client := goredis.NewClient(redisOptions(e.redis))
		var b [6]byte
		rand.Read(b[:])
		prefix := "restbench-" + hex.EncodeToString(b[:])
		e.cleanups = append(e.cleanups, func() {
			ctx := context.Background()
			it := client.Scan(ctx, 0, prefix+":*", 1000).Iterator()
			for it.Next(ctx) {
				client.Unlink(ctx, it.Val())
			}
			client.Close()
		})
		rd, err := redis.New(client, &redis.Options{Prefix: prefix})
		if err != nil {
			return call{}, err
		}
		return e.tollgate(tollgate.Stores{Keys: rd, Ledger: rd, Rates: rd, Slots: rd}, true, nil)
	case "postgres":
		ctx := context.Background()
		var b [6]byte
		rand.Read(b[:])
		schema := "restbench_" + hex.EncodeToString(b[:])
		cfg, err := pgxpool.ParseConfig(e.postgres)
		if err != nil {
			return call{}, err
		}
		cfg.ConnConfig.RuntimeParams["search_path"] = schema
		cfg.MaxConns = 32
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return call{}, err
		}
		if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
			return call{}, err
		}
		e.cleanups = append(e.cleanups, func() {
			pool.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
			pool.Close()
		})
		if err := postgres.Migrate(ctx, pool); err != nil {
			return call{}, err
		}
		pg, err := postgres.New(pool, nil)
		if err != nil {
			return call{}, err
		}
		return e.tollgate(tollgate.Stores{Keys: pg, Ledger: pg, Rates: pg, Slots: pg}, true, nil)
	}
	return call{}, fmt.Errorf("unknown server %q: use bare, json, memory, memory-usage, gql-typename, gql-hash, redis or postgres", name)
}

// memoryCall starts the memory server once.
func (e *targets) memoryCall() (call, error) {
	if e.memory != nil {
		return *e.memory, nil
	}
	c, err := e.tollgate(tollgate.Stores{
		Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
		Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter(),
	}, false, nil)
	if err == nil {
		e.memory = &c
	}
	return c, err
}

// tollgate serves the sample catalog over REST and GraphQL on the given stores with a
// plan whose limits never deny, so that every call does the full work: edge check, key,
// restrictions, validation, rate limit, slot, credits, handler, settlement, envelope,
// headers. On network stores the key records are cached, as a deployment does.
func (e *targets) tollgate(stores tollgate.Stores, cacheKeys bool, us usage.Store) (call, error) {
	reg := &catalog.Registry{}
	if err := apis.Register(reg); err != nil {
		return call{}, err
	}
	plans, err := billing.NewPlans(billing.Plan{Name: "bench", Credits: billing.MaxCredits, RatePerMinute: 1 << 30, Concurrency: 1 << 20, GraphQLMaxAPIs: 10})
	if err != nil {
		return call{}, err
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	opts := &tollgate.Options{Logger: quiet}
	if cacheKeys {
		opts.KeyCache = &auth.KeyCacheOptions{}
	}
	if us != nil {
		opts.Usage = &tollgate.UsageOptions{Store: us}
	}
	svc, err := tollgate.New(reg, stores, plans, opts)
	if err != nil {
		return call{}, err
	}
	_, _, key, err := svc.CreateAccount(context.Background(), tollgate.AccountSpec{Plan: "bench"})
	if err != nil {
		return call{}, err
	}
	restHandler, err := rest.NewHandler(svc, &rest.Options{Logger: quiet})
	if err != nil {
		return call{}, err
	}
	gqlHandler, err := gql.NewHandler(svc, &gql.Options{Logger: quiet})
	if err != nil {
		return call{}, err
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", restHandler)
	mux.Handle("/v1/graphql", gqlHandler)
	url, err := e.serve(mux)
	return call{url: url + path, key: key}, err
}

func (e *targets) serve(h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	e.cleanups = append(e.cleanups, func() { srv.Close() })
	return "http://" + ln.Addr().String(), nil
}

// answerHeaders makes one call to Tollgate and returns the headers of its answer, for the
// baseline to write the same.
func answerHeaders(url, key string) (http.Header, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-Api-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("tollgate answered %s", resp.Status)
	}
	return resp.Header, nil
}

// drive loads url for dur and returns the completed requests per second.
func drive(client string, c call, dur time.Duration, conns int) (float64, error) {
	if client == "wrk" {
		return driveWrk(c, dur, conns)
	}
	return driveGo(c, dur, conns)
}

var wrkRate = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)

func driveWrk(c call, dur time.Duration, conns int) (float64, error) {
	args := []string{"-t2", "-c" + strconv.Itoa(conns), "-d" + strconv.Itoa(int(dur.Seconds())) + "s"}
	if c.key != "" {
		args = append(args, "-H", "x-api-key: "+c.key)
	}
	if c.body != "" {
		script, err := os.CreateTemp("", "restbench-*.lua")
		if err != nil {
			return 0, err
		}
		defer os.Remove(script.Name())
		fmt.Fprintf(script, "wrk.method = \"POST\"\nwrk.body = %q\nwrk.headers[\"Content-Type\"] = \"application/json\"\n", c.body)
		script.Close()
		args = append(args, "-s", script.Name())
	}
	out, err := exec.Command("wrk", append(args, c.url)...).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("wrk: %v\n%s", err, out)
	}
	m := wrkRate.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("wrk printed no rate:\n%s", out)
	}
	if regexp.MustCompile(`Non-2xx`).Match(out) {
		return 0, fmt.Errorf("wrk saw failed calls:\n%s", out)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

func driveGo(c call, dur time.Duration, conns int) (float64, error) {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}}
	var done, failed atomic.Int64
	deadline := time.Now().Add(dur)
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				req, _ := http.NewRequest(http.MethodGet, c.url, nil)
				if c.body != "" {
					req, _ = http.NewRequest(http.MethodPost, c.url, strings.NewReader(c.body))
					req.Header.Set("Content-Type", "application/json")
				}
				if c.key != "" {
					req.Header.Set("X-Api-Key", c.key)
				}
				resp, err := hc.Do(req)
				if err != nil {
					failed.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					failed.Add(1)
					continue
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		return 0, fmt.Errorf("%d calls to %s failed", n, c.url)
	}
	return float64(done.Load()) / dur.Seconds(), nil
}
