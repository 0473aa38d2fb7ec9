package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/client"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store/postgres"
	"github.com/tollgate-dev/tollgate/webhook"
)

// TestRun starts three instances on the shared test servers (a fresh schema and prefix),
// makes a paid call on each and checks that they share one balance; registers a
// webhook endpoint on one instance, creates a key on another, and checks that the
// receiver gets the key.created message once, signed, and that a third instance lists
// it delivered (the outbox is in PostgreSQL); then stops them.
func TestRun(t *testing.T) {
	dsn := testenv.Var(t, testenv.Postgres)
	redisAddr := testenv.Var(t, testenv.Redis)
	schema := testenv.PostgresSchema(t, dsn)
	prefix := testenv.RedisPrefix(t, testenv.RedisClient(t, redisAddr))

	out, stop := startRun(t, []string{"-postgres", dsn, "-schema", schema, "-redis", redisAddr, "-prefix", prefix,
		"-instances", "3", "-port", "0", "-allow-private-fetch"}, io.Discard)
	defer stop()
	key, urls := started(t, out, 3)
	paidCallOnEach(t, urls, key)
	checkWebhooks(t, urls, key)
}

// TestRunBehindPgBouncer starts two instances through a PgBouncer in transaction mode
// (-pooler), with everything in PostgreSQL, as a role whose settings name the schema
// (the connections send no startup parameter, which PgBouncer would refuse): a paid
// call on each is charged to one balance. With a -schema that the role's search_path
// does not select, run fails, and says how to set the role up.
func TestRunBehindPgBouncer(t *testing.T) {
	dsn := testenv.Var(t, testenv.Postgres)
	redisAddr := testenv.Var(t, testenv.Redis)
	pgb := testenv.StartPgBouncer(t, dsn)
	schema := testenv.PostgresSchema(t, dsn)
	role := testenv.PostgresRole(t, dsn, schema, postgres.DefaultStatementTimeout)
	prefix := testenv.RedisPrefix(t, testenv.RedisClient(t, redisAddr))
	args := []string{"-postgres", pgb.DSN(role), "-pooler", "-limits", "postgres", "-redis", redisAddr, "-prefix", prefix,
		"-instances", "2", "-port", "0"}

	err := run(t.Context(), append(args, "-schema", "elsewhere"), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "ALTER ROLE "+pgx.Identifier{role}.Sanitize()+" SET search_path") {
		t.Errorf("run with a -schema the role does not select: %v; want an error that says to set the role's search_path", err)
	}

	out, stop := startRun(t, append(args, "-schema", schema), io.Discard)
	defer stop()
	key, urls := started(t, out, 2)
	paidCallOnEach(t, urls, key)
}

// started reads what run prints until n instances listen, and returns the demo key and
// the instances' URLs; the rest of out is discarded.
func started(t *testing.T, out io.Reader, n int) (key string, urls []string) {
	t.Helper()
	sc := bufio.NewScanner(out)
	for len(urls) < n && sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "API key: "):
			key = strings.TrimPrefix(line, "API key: ")
		case strings.Contains(line, "listening on "):
			urls = append(urls, line[strings.Index(line, "http://"):])
		}
	}
	go io.Copy(io.Discard, out)
	if key == "" || len(urls) != n {
		t.Fatalf("printed key %q and instances %v", key, urls)
	}
	return key, urls
}

// paidCallOnEach makes a paid call on each instance with key, and checks on the first
// that they were charged to one balance.
func paidCallOnEach(t *testing.T, urls []string, key string) {
	t.Helper()
	get := func(url string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
		req.Header.Set("X-Api-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body
	}
	for _, u := range urls {
		if status, body := get(u + "/v1/hash?text=hello"); status != http.StatusOK {
			t.Fatalf("%s: %d %v", u, status, body)
		}
	}
	status, body := get(urls[0] + "/v1/analytics")
	credits, _ := body["data"].(map[string]any)["credits"].(map[string]any)
	if want := float64(len(urls)); status != http.StatusOK || credits["used"] != want {
		t.Errorf("analytics after one call on each instance: %d %v, want %v credits used", status, body, want)
	}
}

// startRun runs run with args in the background, its logs to stderr, and returns what
// it prints, which the caller reads (or discards) to the end, and the function that
// cancels its context and checks that it returns nil, in time; the second call of
// stop does nothing.
func startRun(t *testing.T, args []string, stderr io.Writer) (out io.Reader, stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	r, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, args, w, stderr)
		w.Close()
	}()
	var once sync.Once
	return r, func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("run: %v", err)
				}
			case <-time.After(60 * time.Second):
				t.Error("run did not return after its context ended")
			}
		})
	}
}

// TestCallsNeedNoNewConnection starts an instance and makes paid calls on it, more at
// once than its pools hold connections: its pools are full when it starts, and no call
// opens a connection, to PostgreSQL or to Redis. (A pool that grows on demand connects
// on the call's path, and under load a connect that outlives its timeout fails the
// call with 503.)
func TestCallsNeedNoNewConnection(t *testing.T) {
	dsn := testenv.Var(t, testenv.Postgres)
	redisAddr := testenv.Var(t, testenv.Redis)
	c, err := parseFlags([]string{"-postgres", dsn, "-schema", testenv.PostgresSchema(t, dsn), "-redis", redisAddr,
		"-prefix", testenv.RedisPrefix(t, testenv.RedisClient(t, redisAddr))}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := prepare(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	plans, err := billing.NewPlans(billing.Plan{Name: "busy", Credits: 1_000_000, Concurrency: 1000})
	if err != nil {
		t.Fatal(err)
	}
	in, err := newInstance(t.Context(), c, plans, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer in.close()
	srv := httptest.NewServer(in.handler)
	defer srv.Close()
	_, _, key, err := in.mgr.CreateAccount(t.Context(), accounts.Spec{Plan: "busy"})
	if err != nil {
		t.Fatal(err)
	}

	pg, rd := in.pool.Stat(), in.redis.PoolStats()
	if pg.TotalConns() != pgConns || rd.TotalConns != redisConns {
		t.Fatalf("after start: %d connections to PostgreSQL and %d to Redis, want %d and %d", pg.TotalConns(), rd.TotalConns, pgConns, redisConns)
	}
	dials := &dialCounter{}
	in.redis.AddHook(dials)
	const clients, calls = 4 * redisConns, 8
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for range calls {
				req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/v1/hash?text=x", nil)
				req.Header.Set("X-Api-Key", key)
				resp, err := client.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("a call: %s", resp.Status)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := in.pool.Stat().NewConnsCount() - pg.NewConnsCount(); n != 0 {
		t.Errorf("%d calls opened %d connections to PostgreSQL, want none", clients*calls, n)
	}
	if n, broken := dials.n.Load(), dials.broken.Load(); n > broken {
		t.Errorf("%d calls opened %d connections to Redis, want none beyond the %d that replaced connections a network error broke", clients*calls, n, broken)
	}
}

// dialCounter counts the connections dialed to Redis, and the commands that failed with
// a network error (a timeout on a loaded machine) or an ended context, after which go-redis drops the
// connection and dials another: such a dial replaces a connection, it adds none.
type dialCounter struct{ n, broken atomic.Int64 }

func (d *dialCounter) DialHook(next goredis.DialHook) goredis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		d.n.Add(1)
		return next(ctx, network, addr)
	}
}

func (d *dialCounter) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		err := next(ctx, cmd)
		d.count(err)
		return err
	}
}

func (d *dialCounter) count(err error) {
	// A command whose context ended while it waited for its reply leaves the reply on
	// the connection, so go-redis drops that connection too (with ContextTimeoutEnabled).
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		d.broken.Add(1)
	}
}

func (d *dialCounter) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		err := next(ctx, cmds)
		d.count(err)
		return err
	}
}

// checkWebhooks registers a webhook endpoint on the first instance, creates a sub-key
// on the second, and waits until the receiver has verified the key.created message
// (client.VerifyWebhook) and the third instance lists its delivery delivered. Any
// instance may deliver it: the outbox is shared.
func checkWebhooks(t *testing.T, urls []string, key string) {
	t.Helper()
	send := func(method, url, body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
		req.Header.Set("X-Api-Key", key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var env struct{ Data map[string]any }
		json.NewDecoder(resp.Body).Decode(&env)
		return resp.StatusCode, env.Data
	}
	var mu sync.Mutex
	var secret string
	var got []client.WebhookEvent
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		ev, err := client.VerifyWebhook(secret, r.Header, body, time.Now(), 0)
		if err != nil {
			t.Errorf("a delivery that does not verify: %v", err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		got = append(got, ev)
	}))
	defer rc.Close()

	status, ep := send("POST", urls[0]+"/v1/account/webhooks", `{"url":"`+rc.URL+`/hooks","events":["key.created"]}`)
	if status != http.StatusCreated {
		t.Fatalf("register a webhook endpoint: %d %v", status, ep)
	}
	mu.Lock()
	secret, _ = ep["secret"].(string)
	mu.Unlock()
	if status, k := send("POST", urls[1]+"/v1/account/keys", `{"name":"deploys"}`); status != http.StatusCreated {
		t.Fatalf("create a sub-key: %d %v", status, k)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, page := send("GET", urls[2]+"/v1/account/webhooks/"+ep["id"].(string)+"/deliveries", "")
		ds, _ := page["deliveries"].([]any)
		if len(ds) == 1 && ds[0].(map[string]any)["state"] == "delivered" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the key.created delivery was not delivered: %v", page)
		}
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	// One message, delivered at least once: a second request would carry its id.
	var data struct{ Name string }
	if len(got) == 0 || got[0].Type != "key.created" || got[0].Decode(&data) != nil || data.Name != "deploys" ||
		slices.ContainsFunc(got, func(ev client.WebhookEvent) bool { return ev.ID != got[0].ID }) {
		t.Errorf("the receiver got %+v, want the one key.created of the key deploys", got)
	}
}

// TestReadyz starts an instance with -ops-addr on a PostgreSQL and a Redis of the
// test's own, which it stops and starts again (never the shared servers): /readyz
// answers 200, turns 503 naming, by role, the stores of a server soon after it stops,
// and 200 again once it is back; /healthz answers 200 throughout, and /metrics serves
// the instance's metrics. The test logs how long each change took to show (about
// health.DefaultCacheFor plus the time a ping takes to fail, under a second) but
// asserts no time: each change must happen within a generous deadline.
func TestReadyz(t *testing.T) {
	pg := testenv.StartPostgres(t)
	rd := testenv.StartRedis(t)

	logs := &testenv.Logs{}
	out, stop := startRun(t, []string{"-postgres", pg.DSN, "-redis", rd.Addr, "-instances", "1", "-port", "0",
		"-ops-addr", "127.0.0.1:0"}, logs)
	defer stop() // before the servers' own cleanups stop them
	var base, opsURL string
	sc := bufio.NewScanner(out)
	for opsURL == "" && sc.Scan() {
		line := sc.Text()
		switch {
		case strings.Contains(line, "listening on "):
			base = line[strings.Index(line, "http://"):]
		case strings.Contains(line, " ops endpoints at "):
			opsURL = strings.Fields(line[strings.Index(line, "http://"):])[0]
		}
	}
	go io.Copy(io.Discard, out)
	if base == "" || opsURL == "" {
		t.Fatalf("printed the instance at %q and its ops endpoints at %q", base, opsURL)
	}

	type answer struct {
		Status      string
		Unreachable []string
		Message     string
	}
	get := func(url string) (int, answer, error) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, answer{}, err
		}
		defer resp.Body.Close()
		var a answer
		err = json.NewDecoder(resp.Body).Decode(&a)
		return resp.StatusCode, a, err
	}
	// await polls /readyz until it answers status naming unreachable, and returns how
	// long that took.
	await := func(what string, status int, unreachable ...string) time.Duration {
		t.Helper()
		start := time.Now()
		deadline := start.Add(60 * time.Second)
		for {
			code, a, err := get(opsURL + "/readyz")
			if err == nil && code == status && slices.Equal(a.Unreachable, unreachable) {
				if status != http.StatusOK {
					for _, internal := range []string{"postgres", "redis", "127.0.0.1", "dial", "refused"} {
						if strings.Contains(strings.ToLower(a.Message), internal) {
							t.Errorf("%s: the message %q names %s", what, a.Message, internal)
						}
					}
				}
				took := time.Since(start)
				t.Logf("%s: /readyz answered %d %v after %v", what, code, unreachable, took.Round(time.Millisecond))
				return took
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: /readyz answers %d %+v (%v), want %d naming %v", what, code, a, err, status, unreachable)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	live := func(what string) {
		t.Helper()
		if code, a, err := get(opsURL + "/healthz"); err != nil || code != http.StatusOK || a.Status != "ok" {
			t.Errorf("%s: /healthz answers %d %+v %v, want 200 ok", what, code, a, err)
		}
	}
	postgresRoles := []string{"keys", "ledger", "idempotency", "webhooks", "audit", "usage", "sessions", "oauth"}
	redisRoles := []string{"rates", "slots"}

	await("at start", http.StatusOK)
	live("at start")
	if code, _, _ := get(base + "/readyz"); code != http.StatusNotFound {
		t.Errorf("the API's listener answers /readyz with %d, want 404: the probes are on the ops listener only", code)
	}
	// The ops listener serves the instance's metrics too, the outbox read from PostgreSQL.
	if resp, err := http.Get(opsURL + "/metrics"); err != nil {
		t.Errorf("GET /metrics: %v", err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "tollgate_settlements_total") ||
			!strings.Contains(string(b), "tollgate_webhook_outbox_pending 0") {
			t.Errorf("GET /metrics on the ops listener: %d\n%s", resp.StatusCode, b)
		}
	}

	pg.Stop()
	await("PostgreSQL stopped", http.StatusServiceUnavailable, postgresRoles...)
	live("PostgreSQL stopped")
	pg.Start()
	await("PostgreSQL back", http.StatusOK)

	rd.Stop()
	await("Redis stopped", http.StatusServiceUnavailable, redisRoles...)
	live("Redis stopped")
	rd.Start()
	await("Redis back", http.StatusOK)

	pg.Stop()
	rd.Stop()
	await("both stopped", http.StatusServiceUnavailable, "keys", "ledger", "rates", "slots", "idempotency", "webhooks", "audit", "usage", "sessions", "oauth")
	pg.Start()
	rd.Start()
	await("both back", http.StatusOK)

	stop()
	if l := logs.String(); !strings.Contains(l, `"health: a store is not reachable" roles="[keys ledger]"`) ||
		!strings.Contains(l, `"health: a store is reachable again" roles="[rates slots]"`) {
		t.Errorf("the logs do not record the stores' changes:\n%s", l)
	}
}

// TestOpsAddr checks -ops-addr: the first instance's operators' listener on the address
// given, the others' on the next ports, or every one on a free port with port 0; an
// address that is not host:port, or whose ports would run past 65535, is refused.
func TestOpsAddr(t *testing.T) {
	tests := []struct {
		args    []string
		want    []string // the addresses of instances 1, 2, 3
		wantErr string
	}{
		{[]string{"-ops-addr", "127.0.0.1:9090"}, []string{"127.0.0.1:9090", "127.0.0.1:9091", "127.0.0.1:9092"}, ""},
		{[]string{"-ops-addr", ":9090"}, []string{":9090", ":9091", ":9092"}, ""},
		{[]string{"-ops-addr", "[::1]:9090"}, []string{"[::1]:9090", "[::1]:9091", "[::1]:9092"}, ""},
		{[]string{"-ops-addr", "127.0.0.1:0"}, []string{"127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"}, ""},
		{[]string{"-ops-addr", "127.0.0.1"}, nil, "give host:port"},
		{[]string{"-ops-addr", "127.0.0.1:http"}, nil, "give host:port"},
		{[]string{"-ops-addr", "127.0.0.1:70000"}, nil, "give host:port"},
		{[]string{"-ops-addr", "127.0.0.1:65534"}, nil, "ports up to 65536"},
	}
	for _, tt := range tests {
		c, err := parseFlags(tt.args, io.Discard)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("parseFlags(%q): %v, want an error saying %s", tt.args, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseFlags(%q): %v", tt.args, err)
			continue
		}
		for i, want := range tt.want {
			if got := opsAddrOf(c, i); got != want {
				t.Errorf("%q: instance %d's ops address %q, want %q", tt.args, i+1, got, want)
			}
		}
	}
	if c, err := parseFlags(nil, io.Discard); err != nil || c.opsAddr != "" {
		t.Errorf("by default: -ops-addr %q, %v; want none", c.opsAddr, err)
	}
}

// TestParseFlagsWebhooks checks the webhook flags: the retry schedule and the timeout
// of an attempt, given to every instance's deliverer.
func TestParseFlagsWebhooks(t *testing.T) {
	for _, tt := range []struct {
		args     []string
		schedule webhook.Schedule
		timeout  time.Duration
		wantErr  string // a fragment of the error, "" for none
	}{
		{nil, nil, 0, ""},
		{[]string{"-webhook-schedule", "250ms,1s,1m"}, webhook.Schedule{250 * time.Millisecond, time.Second, time.Minute}, 0, ""},
		{[]string{"-webhook-timeout", "5s"}, nil, 5 * time.Second, ""},
		{[]string{"-webhook-schedule", "1s,later"}, nil, 0, `"later" is not a duration`},
		{[]string{"-webhook-schedule", "0s"}, nil, 0, "must be positive"},
		{[]string{"-webhook-timeout", "-5s"}, nil, 0, "-webhook-timeout -5s is negative"},
	} {
		c, err := parseFlags(tt.args, io.Discard)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("parseFlags(%q): %v, want an error mentioning %s", tt.args, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(c.webhookSchedule, tt.schedule) || c.webhookTimeout != tt.timeout {
			t.Errorf("parseFlags(%q): schedule %v, timeout %s (%v); want %v and %s", tt.args, c.webhookSchedule, c.webhookTimeout, err, tt.schedule, tt.timeout)
		}
	}
}
