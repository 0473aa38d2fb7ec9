package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	goredis "github.com/redis/go-redis/v9"
)

// A server is one of the two servers compared: a process of its own.
type server struct {
	name, kind string
	cmd        *exec.Cmd
	stdin      io.Closer
	pprof      string // the base URL of its profiles; "" for none
	call       *call
	stores     []string   // the commands of the databases it uses (postgres, redis-server), if any
	parts      []part     // its processes other than cmd's (the tyk server's upstream)
	pgApp      string     // the application_name of its PostgreSQL connections, if any
	events     *eventLoad // the changes made while it is driven, for the webhook servers
	key        string     // the API key its calls send, if not benchKey(0)
	stop       func()
}

// A part is a process of a server other than its own: its name and process id.
type part struct {
	name string
	pid  int
}

func (g wrkGen) String() string { return fmt.Sprintf("wrk -t%d -c%d", g.threads, g.conns) }
func (g goGen) String() string  { return fmt.Sprintf("Go, %d connections", g.conns) }

// start starts the named server and makes the call to drive it with.
func (b *bench) start(name string) (*server, error) {
	kind, accounts, err := parseName(name)
	if err != nil {
		return nil, err
	}
	s := &server{name: name, kind: kind}
	switch kind {
	case "postgres":
		s.stores, s.pgApp = []string{"postgres"}, "restbench"
	case "redis":
		s.stores = []string{"redis-server"}
	case "distributed", "distributed-per-call":
		s.stores, s.pgApp = []string{"postgres", "redis-server"}, "restbench"
	case "tyk":
		s.stores = []string{"redis-server"}
	case "pgredis", "pgredis-observed":
		s.stores, s.pgApp = []string{"postgres", "redis-server"}, "restbench"
	}
	var base string
	switch kind {
	case "server", "server-events", "server-webhooks":
		base, err = s.startExample(b.callgrind)
	case "distributed":
		base, err = s.startDistributed(b.cfg)
	case "distributed-per-call":
		base, err = s.startDistributed(b.cfg, "-credit-block-size", "-1")
	case "tyk":
		base, err = s.startTyk(b.cfg, b.tyk, b.tykRedisLimiter)
	default:
		base, err = s.startChild(b.cfg, accounts, b.exe(len(b.servers)), b.callgrind)
	}
	if err != nil {
		return nil, err
	}
	key := map[string]string{"X-Api-Key": cmp.Or(s.key, benchKey(0))}
	switch kind {
	case "bare", "bare-headers":
		s.call = &call{url: base + restPath, method: http.MethodGet}
	case "json", "gql-typename":
		s.call = &call{url: base + "/v1/graphql", method: http.MethodPost, body: typenameQuery,
			header: map[string]string{"Content-Type": "application/json"}}
	case "gql", "gql-bare":
		s.call = &call{url: base + "/v1/graphql", method: http.MethodPost, body: hashQuery,
			header: map[string]string{"Content-Type": "application/json"}}
	case "batch":
		s.call = &call{url: base + "/v1/hash/batch", method: http.MethodPost, body: batchBody, items: batchItems,
			header: map[string]string{"Content-Type": "application/json", "X-Api-Key": benchKey(0)}}
	case "mcp", "mcp-bare":
		s.call = &call{url: base + "/v1/mcp", method: http.MethodPost, body: mcpCallBody,
			header: map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
				"Mcp-Protocol-Version": mcpVersion}}
	default:
		s.call = &call{url: base + restPath, method: http.MethodGet, header: key, keys: accounts}
	}
	if kind == "gql" || kind == "gql-typename" || kind == "mcp" {
		s.call.header["X-Api-Key"] = benchKey(0)
	}
	if kind == "mcp" || kind == "mcp-bare" {
		if s.call.sessions, err = openMCPSessions(s.call.url, s.call.header, b.sessions); err != nil {
			s.stop()
			return nil, err
		}
	}
	if err := s.call.check(); err != nil {
		s.stop()
		return nil, err
	}
	if kind == "server-events" || kind == "server-webhooks" {
		if s.events, err = newEventLoad(kind, base, b.events); err != nil {
			s.stop()
			return nil, err
		}
		stop := s.stop
		s.stop = func() { stop(); s.events.close() }
	}
	return s, nil
}

// batchItems is the number of items of the batch server's calls, each the hash of
// "hello", as restPath asks for it.
const batchItems = 100

var batchBody = `{"items":[` + strings.TrimSuffix(strings.Repeat(`{"text":"hello"},`, batchItems), ",") + `]}`

const (
	restPath      = "/v1/hash?text=hello"
	typenameQuery = `{"query":"{ __typename }"}`
	hashQuery     = `{"query":"{ hash(text: \"hello\") { algorithm hash } }"}`
)

// startChild starts this program again (or exe, if not "", another build of it) as the
// server process (-serve) and returns the server's base URL. With callgrind not "", the
// process runs under callgrind, its profiles written there.
func (s *server) startChild(cfg storeConfig, accounts int, exe, callgrind string) (string, error) {
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return "", err
		}
	}
	args := []string{"-serve", s.kind, "-accounts", strconv.Itoa(accounts), "-redis", cfg.redis, "-postgres", cfg.postgres}
	s.cmd = exec.Command(exe, args...)
	if callgrind != "" {
		s.cmd = callgrindCommand(callgrind, s.name, exe, args...)
	}
	s.cmd.Stderr = os.Stderr
	stdin, err := s.cmd.StdinPipe()
	if err != nil {
		return "", err
	}
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := s.cmd.Start(); err != nil {
		return "", err
	}
	s.stdin = stdin
	s.stop = func() {
		stdin.Close() // the server stops when its standard input closes
		s.cmd.Wait()
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		s.stop()
		return "", fmt.Errorf("the server process ended before it served")
	}
	var r ready
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		s.stop()
		return "", fmt.Errorf("the server process printed %q", line)
	}
	s.pprof = r.Pprof
	return r.URL, nil
}

// startExample builds examples/server and runs it with a fixtures file that holds one
// account, whose primary key is benchKey(0), on the bench plan (and for the webhook
// servers, the events account: see exampleArgs); under callgrind, as startChild, if
// callgrind is not "".
func (s *server) startExample(callgrind string) (string, error) {
	dir, err := buildExample("./examples/server")
	if err != nil {
		return "", err
	}
	extra, fx := exampleArgs(s.kind)
	fixtures, _ := json.Marshal(fx)
	fxPath := filepath.Join(dir, "fixtures.json")
	if err := os.WriteFile(fxPath, fixtures, 0o600); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	args := append([]string{"-addr", "127.0.0.1:0", "-fixtures", fxPath}, extra...)
	s.cmd = exec.Command(filepath.Join(dir, "server"), args...)
	if callgrind != "" {
		s.cmd = callgrindCommand(callgrind, s.name, filepath.Join(dir, "server"), args...)
	}
	return s.runExample(dir, "Listening on ", nil)
}

// runExample starts s.cmd, an example built into dir, and returns what follows
// listening, the start of the line it prints once it serves: its address. Stopping it
// ends it with SIGTERM, removes dir and runs cleanup, if not nil.
func (s *server) runExample(dir, listening string, cleanup func()) (string, error) {
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	s.cmd.Stderr = io.Discard // its log
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	s.stop = func() {
		s.cmd.Process.Signal(syscall.SIGTERM)
		s.cmd.Wait()
		os.RemoveAll(dir)
		if cleanup != nil {
			cleanup()
		}
	}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if addr, ok := strings.CutPrefix(sc.Text(), listening); ok {
			go io.Copy(io.Discard, stdout)
			return addr, nil
		}
	}
	s.stop()
	return "", fmt.Errorf("%s ended before it listened", filepath.Base(s.cmd.Path))
}

// buildExample builds the command pkg of the module (./examples/server) into a new
// temporary directory, as a program named after its last element, and returns the
// directory.
func buildExample(pkg string) (string, error) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(gomod)) == "" || strings.TrimSpace(string(gomod)) == os.DevNull {
		return "", fmt.Errorf("run restbench from the module's root: it builds %s (%v)", pkg, err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	dir, err := os.MkdirTemp("", "restbench-")
	if err != nil {
		return "", err
	}
	build := exec.Command("go", "build", "-o", filepath.Join(dir, filepath.Base(pkg)), pkg)
	build.Dir, build.Stderr = root, os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("go build %s: %w", pkg, err)
	}
	return dir, nil
}

// cpu reads the CPU time used so far by the server process, the load generator and
// the server's database.
func (s *server) cpu(gen generator) cpuUse {
	u := cpuUse{gen: gen.cpu()}
	u.server, _ = processCPU(s.cmd.Process.Pid)
	for _, p := range s.parts {
		us, _ := processCPU(p.pid)
		u.parts = append(u.parts, us)
	}
	for _, name := range s.stores {
		u.stores = append(u.stores, commandCPU(name))
	}
	return u
}

// startProfile fetches the server's CPU profile for most of a drive of length d, then
// its allocation profile, into dir.
func (s *server) startProfile(dir string, d time.Duration) chan error {
	done := make(chan error, 1)
	if s.pprof == "" {
		fmt.Printf("    %s: no profile (not a restbench server process)\n", s.name)
		done <- nil
		return done
	}
	get := func(path, file string) error {
		resp, err := http.Get(s.pprof + path)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		f, err := os.Create(filepath.Join(dir, strings.ReplaceAll(s.name, ":", "-")+file))
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(f, resp.Body)
		return err
	}
	go func() {
		secs := max(1, int(d.Seconds())-1)
		err := get("/debug/pprof/profile?seconds="+strconv.Itoa(secs), ".cpu.pprof")
		done <- cmp.Or(err, get("/debug/pprof/allocs", ".allocs.pprof"))
	}()
	return done
}

// sampleWaits samples, every 100 ms until the returned function is called, what the
// connections of postgres servers (application_name restbench) are waiting on, and
// returns a summary: the share of samples in each state, most frequent first.
func sampleWaits(dsn string) func() string {
	ctx, cancel := context.WithCancel(context.Background())
	counts := map[string]int{}
	total, ticks := 0, 0
	var wg sync.WaitGroup
	wg.Go(func() {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return
		}
		defer conn.Close(context.Background())
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			ticks++
			rows, err := conn.Query(ctx, `SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU') FROM pg_stat_activity WHERE application_name = 'restbench' AND state = 'active'`)
			if err != nil {
				return
			}
			for rows.Next() {
				var w string
				if rows.Scan(&w) == nil {
					counts[w]++
					total++
				}
			}
			rows.Close()
		}
	})
	return func() string {
		cancel()
		wg.Wait()
		type kv struct {
			k string
			n int
		}
		var all []kv
		for k, n := range counts {
			all = append(all, kv{k, n})
		}
		slices.SortFunc(all, func(a, b kv) int { return b.n - a.n })
		var parts []string
		for i, e := range all {
			if i == 5 {
				break
			}
			parts = append(parts, fmt.Sprintf("%s %.0f%%", e.k, 100*float64(e.n)/float64(max(total, 1))))
		}
		return fmt.Sprintf("%.1f active connections on average: %s", float64(total)/float64(max(1, ticks)), strings.Join(parts, ", "))
	}
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
