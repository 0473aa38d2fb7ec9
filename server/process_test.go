package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store/postgres"
)

// bin is the built tollgate-server, made once by TestMain.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tollgate-server-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "tollgate-server")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/tollgate-dev/tollgate/cmd/tollgate-server").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building tollgate-server: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// secretPassword is in the connection string the tests give the server (the test
// server trusts the role, so it is never checked): it must never be printed.
const secretPassword = "pw-n0t-t0-b3-pr1nted"

// stores returns the connection string (with a password) and a fresh schema's name,
// and a Redis address and prefix of the test's own.
func stores(t *testing.T) (dsn, schema, redisAddr, prefix string) {
	t.Helper()
	plain := testenv.Var(t, testenv.Postgres)
	u, err := url.Parse(plain)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), secretPassword)
	redisAddr = testenv.Var(t, testenv.Redis)
	return u.String(), testenv.PostgresSchema(t, plain), redisAddr, testenv.RedisPrefix(t, testenv.RedisClient(t, redisAddr))
}

// syncBuffer collects a process's output.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// command returns the server's command with the test's stores in its environment.
func command(dsn, redisAddr string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "TOLLGATE_POSTGRES="+dsn, "TOLLGATE_REDIS="+redisAddr)
	return cmd
}

// migrate runs tollgate-server migrate on the schema.
func migrate(t *testing.T, dsn, schema string) {
	t.Helper()
	if out, err := command(dsn, "", "migrate", "-schema", schema).CombinedOutput(); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
}

// A proc is a tollgate-server serve process.
type proc struct {
	t              *testing.T
	cmd            *exec.Cmd
	stdout, stderr *syncBuffer
	addr, opsAddr  string
	key            string // the demo account's
	done           chan error
}

// planFile is a -config file whose pro plan lets 200 calls run at once.
const planFile = `{"plans":[{"name":"pro","credits":1000000,"rate_per_minute":60000,"concurrency":200,"graphql_max_apis":10,"batch_max_items":100}],"log-format":"json"}`

// serve starts tollgate-server serve -demo on free ports, and waits until it serves.
func serve(t *testing.T, dsn, schema, redisAddr, prefix string, args ...string) *proc {
	t.Helper()
	dir := t.TempDir()
	cfgFile, ready := filepath.Join(dir, "config.json"), filepath.Join(dir, "ready.json")
	if err := os.WriteFile(cfgFile, []byte(planFile), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan error, 1)}
	p.cmd = command(dsn, redisAddr, append([]string{"serve", "-config", cfgFile, "-schema", schema, "-redis-prefix", prefix,
		"-addr", "127.0.0.1:0", "-ops-addr", "127.0.0.1:0", "-ready-file", ready, "-demo", "-pg-conns", "4", "-redis-conns", "4"}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("stderr of tollgate-server:\n%s", p.stderr.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		b, err := os.ReadFile(ready)
		if err == nil {
			var addrs struct{ Addr, Ops_addr string }
			if err := json.Unmarshal(b, &addrs); err != nil {
				t.Fatal(err)
			}
			p.addr, p.opsAddr = "http://"+addrs.Addr, "http://"+addrs.Ops_addr
			break
		}
		select {
		case err := <-p.done:
			t.Fatalf("tollgate-server exited before it served: %v\n%s", err, p.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("tollgate-server did not serve within a minute:\n%s", p.stderr.String())
		}
	}
	// The key is printed before the ready file is written, but it reaches p.stdout
	// through a pipe that another goroutine copies: wait for it too.
	keyLine := regexp.MustCompile(`API key: (\S+)\n`)
	for {
		if m := keyLine.FindStringSubmatch(p.stdout.String()); m != nil {
			p.key = m[1]
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("no demo key printed: %q", p.stdout.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// do sends a request to the doors with the demo key and returns the answer.
func (p *proc) do(method, path, body string, hdr ...string) (*http.Response, string) {
	p.t.Helper()
	req, err := http.NewRequest(method, p.addr+path, strings.NewReader(body))
	if err != nil {
		p.t.Fatal(err)
	}
	req.Header.Set("X-Api-Key", p.key)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// get fetches an operators' endpoint.
func (p *proc) get(path string) (int, string) {
	p.t.Helper()
	res, err := http.Get(p.opsAddr + path)
	if err != nil {
		p.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestMigrate: four migrate processes at once against a fresh schema all succeed, and
// the schema has every migration once.
func TestMigrate(t *testing.T) {
	dsn, schema, _, _ := stores(t)
	// A schema that does not exist yet: migrate creates it.
	schema += "_new"
	conn, err := pgx.Connect(t.Context(), testenv.Var(t, testenv.Postgres))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		conn.Close(context.Background())
	})
	var wg sync.WaitGroup
	outs := make([][]byte, 4)
	errs := make([]error, 4)
	for i := range 4 {
		wg.Go(func() { outs[i], errs[i] = command(dsn, "", "migrate", "-schema", schema).CombinedOutput() })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("migrate %d: %v\n%s", i, err, outs[i])
		}
		if bytes.Contains(outs[i], []byte(secretPassword)) {
			t.Errorf("migrate %d printed the database's password: %s", i, outs[i])
		}
	}
	var n, top int
	if err := conn.QueryRow(t.Context(), `SELECT count(*), max(version) FROM `+pgx.Identifier{schema, "tollgate_schema_migrations"}.Sanitize()).Scan(&n, &top); err != nil {
		t.Fatal(err)
	}
	// Every migration once (their versions need not be contiguous).
	files, err := os.ReadDir(filepath.Join("..", "store", "postgres", "migrations"))
	if err != nil {
		t.Fatal(err)
	}
	if top != postgres.SchemaVersion || n != len(files) {
		t.Errorf("the schema has %d migrations up to version %d, want %d up to %d", n, top, len(files), postgres.SchemaVersion)
	}
	// serve checks the schema: it starts on this one.
	_, _, redisAddr, prefix := stores(t)
	serve(t, dsn, schema, redisAddr, prefix)
}

// TestServeRefusesUnmigrated: serve on a schema never migrated stops at once, saying
// to migrate.
func TestServeRefusesUnmigrated(t *testing.T) {
	dsn, schema, redisAddr, _ := stores(t)
	out, err := command(dsn, redisAddr, "serve", "-schema", schema, "-addr", "127.0.0.1:0", "-ops-addr", "off").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "migrate") {
		t.Fatalf("serve on an unmigrated schema: %v\n%s", err, out)
	}
}

// TestServe: a served instance answers a paid REST call and a GraphQL query, is
// ready, and its metrics count the calls; it never prints the database's password.
func TestServe(t *testing.T) {
	dsn, schema, redisAddr, prefix := stores(t)
	migrate(t, dsn, schema)
	p := serve(t, dsn, schema, redisAddr, prefix)
	res, body := p.do("GET", "/v1/hash?text=a", "")
	if res.StatusCode != 200 || res.Header.Get("X-Credits-Cost") != "1" {
		t.Fatalf("REST call: %d %s %v", res.StatusCode, body, res.Header)
	}
	res, body = p.do("POST", "/v1/graphql", `{"query":"{ hash(text: \"x\") { hash } }"}`)
	if res.StatusCode != 200 || !strings.Contains(body, `"hash"`) || strings.Contains(body, `"errors"`) {
		t.Fatalf("GraphQL: %d %s", res.StatusCode, body)
	}
	if status, body := p.get("/readyz"); status != 200 {
		t.Fatalf("/readyz: %d %s", status, body)
	}
	if status, body := p.get("/healthz"); status != 200 {
		t.Fatalf("/healthz: %d %s", status, body)
	}
	if status, body := p.get("/metrics"); status != 200 || !strings.Contains(body, "tollgate_calls_total") {
		t.Fatalf("/metrics: %d, tollgate_calls_total missing", status)
	}
	for _, out := range []string{p.stdout.String(), p.stderr.String()} {
		if strings.Contains(out, secretPassword) {
			t.Fatal("tollgate-server printed the database's password")
		}
	}
}

// TestGracefulShutdown: SIGTERM while 100 slow calls run, on the server's defaults
// (credit blocks on): /readyz turns 503, every call is answered 200, the ledger has
// charged each one once and holds no reservation open (the calls' nor the blocks'),
// and the process exits 0.
func TestGracefulShutdown(t *testing.T) {
	dsn, schema, redisAddr, prefix := stores(t)
	migrate(t, dsn, schema)
	p := serve(t, dsn, schema, redisAddr, prefix, "-shutdown-timeout", "60s")
	conn, err := pgx.Connect(t.Context(), testenv.Var(t, testenv.Postgres))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	table := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	count := func(sql string) int {
		t.Helper()
		var n int
		if err := conn.QueryRow(t.Context(), sql, "demo").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// Calls are sent in waves of 100, each call sleeping 5 s in its handler. The signal
	// goes when every call sent is admitted (it holds one of the plan's concurrency
	// slots: a call that took its credits from a block has no reservation of its own)
	// or answered, and some are still in flight. On a machine so busy that a whole
	// wave was answered before that, another wave is sent.
	const calls = 100
	var (
		sent     int
		answered []int
		statuses = make(chan int, 10*calls)
		client   = &http.Client{Transport: &http.Transport{MaxConnsPerHost: calls, MaxIdleConnsPerHost: calls}}
	)
	wave := func() {
		for range calls {
			go func() {
				req, _ := http.NewRequest("POST", p.addr+"/v1/echo", strings.NewReader(`{"message":"slow","delay_ms":5000}`))
				req.Header.Set("X-Api-Key", p.key)
				req.Header.Set("Content-Type", "application/json")
				res, err := client.Do(req)
				if err != nil {
					statuses <- 0
					return
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				statuses <- res.StatusCode
			}()
		}
		sent += calls
	}
	inUse := func() int {
		res, body := p.do("GET", "/v1/analytics", "")
		var st struct {
			Data struct {
				Concurrency struct {
					InUse int `json:"in_use"`
				} `json:"concurrency"`
			} `json:"data"`
		}
		if res.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil {
			t.Fatalf("GET /v1/analytics: %d %s", res.StatusCode, body)
		}
		return st.Data.Concurrency.InUse
	}
	deadline := time.Now().Add(3 * time.Minute)
	wave()
	for {
		for len(statuses) > 0 {
			answered = append(answered, <-statuses)
		}
		n := inUse()
		if n > 0 && n+len(answered) >= sent {
			break
		}
		if n == 0 && len(answered) == sent {
			if sent == 10*calls {
				t.Fatal("ten waves of calls were each answered before they were all admitted")
			}
			wave()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls sent, %d in flight, %d answered after three minutes", sent, n, len(answered))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// /readyz says the server is shutting down while the calls finish.
	for {
		status, body := p.get("/readyz")
		if status == http.StatusServiceUnavailable && strings.Contains(body, "shutting down") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz answers %d %s after SIGTERM", status, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for len(answered) < sent {
		answered = append(answered, <-statuses)
	}
	for _, s := range answered {
		if s != 200 {
			t.Errorf("a call was answered %d, want 200", s)
		}
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("tollgate-server exited with %v, want 0\n%s", err, p.stderr.String())
		}
		p.done <- nil // for the cleanup
	case <-time.After(60 * time.Second):
		t.Fatal("tollgate-server did not exit within its shutdown timeout")
	}
	if n := count(`SELECT count(*) FROM ` + table("tollgate_reservations") + ` WHERE account_id = $1`); n != 0 {
		t.Errorf("%d reservations open after the shutdown, want 0", n)
	}
	// A reservation's entry holds its credits (negative) and its closing returns what
	// was not charged: their sum is what the calls were charged, one credit each.
	if n := count(`SELECT coalesce(-sum(amount), 0) FROM ` + table("tollgate_ledger") +
		` WHERE account_id = $1 AND kind IN ('reserve', 'settle', 'refund', 'expire', 'void')`); n != sent {
		t.Errorf("%d credits charged, want %d", n, sent)
	}
	if !strings.Contains(p.stderr.String(), "tollgate-server: stopped") {
		t.Error("the log does not say the server stopped")
	}
}

// TestAccessLog: the server logs one access line per request, with its request id,
// door, account and key id, and never the key's value.
func TestAccessLog(t *testing.T) {
	dsn, schema, redisAddr, prefix := stores(t)
	migrate(t, dsn, schema)
	p := serve(t, dsn, schema, redisAddr, prefix)
	requests := []struct{ method, path, body, door string }{
		{"GET", "/v1/hash?text=a", "", "rest"},
		{"POST", "/v1/hash/batch", `{"items":[{"text":"a"},{"text":"b"}]}`, "batch"},
		{"POST", "/v1/graphql", `{"query":"{ hash(text: \"x\") { hash } }"}`, "graphql"},
		{"GET", "/v1/account", "", "account"},
		{"GET", "/v1/" + p.key, "", "rest"},
	}
	for i, r := range requests {
		res, body := p.do(r.method, r.path, r.body, "X-Request-Id", fmt.Sprintf("test-%d", i))
		if res.Header.Get("X-Request-Id") != fmt.Sprintf("test-%d", i) {
			t.Errorf("%s %s: X-Request-Id %q not echoed (%d %s)", r.method, r.path, res.Header.Get("X-Request-Id"), res.StatusCode, body)
		}
	}
	type line struct {
		Msg, RequestID, Door, Account, KeyID, Path string
		Status                                     int
	}
	var lines []line
	deadline := time.Now().Add(10 * time.Second)
	for {
		lines = lines[:0]
		sc := bufio.NewScanner(strings.NewReader(p.stderr.String()))
		for sc.Scan() {
			var l struct {
				Msg       string `json:"msg"`
				RequestID string `json:"request_id"`
				Door      string `json:"door"`
				Account   string `json:"account"`
				KeyID     string `json:"key_id"`
				Path      string `json:"path"`
				Status    int    `json:"status"`
			}
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "request" {
				lines = append(lines, line{l.Msg, l.RequestID, l.Door, l.Account, l.KeyID, l.Path, l.Status})
			}
		}
		if len(lines) >= len(requests) || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(lines) != len(requests) {
		t.Fatalf("%d access lines, want %d: %+v", len(lines), len(requests), lines)
	}
	for i, l := range lines {
		if l.RequestID != fmt.Sprintf("test-%d", i) || l.Door != requests[i].door || (l.Status < 400 && (l.Account != "demo" || l.KeyID == "")) {
			t.Errorf("line %d: %+v, want request id test-%d, door %s, account demo", i, l, i, requests[i].door)
		}
	}
	if strings.Contains(p.stderr.String(), p.key) {
		t.Error("the log holds the key's value")
	}
	if lines[len(lines)-1].Path != "/v1/[redacted]" {
		t.Errorf("a key in the path is logged as %q", lines[len(lines)-1].Path)
	}
}
