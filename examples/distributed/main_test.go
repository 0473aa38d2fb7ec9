package main

import (
	"bufio"
	"context"
	"encoding/json"
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

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/client"
	"github.com/tollgate-dev/tollgate/internal/testenv"
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

	ctx, cancel := context.WithCancel(t.Context())
	out, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-postgres", dsn, "-schema", schema, "-redis", redisAddr, "-prefix", prefix,
			"-instances", "3", "-port", "0", "-allow-private-fetch"}, w, io.Discard)
		w.Close()
	}()
	var key string
	var urls []string
	sc := bufio.NewScanner(out)
	for len(urls) < 3 && sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "API key: "):
			key = strings.TrimPrefix(line, "API key: ")
		case strings.Contains(line, "listening on "):
			urls = append(urls, line[strings.Index(line, "http://"):])
		}
	}
	go io.Copy(io.Discard, out)
	if key == "" || len(urls) != 3 {
		t.Fatalf("printed key %q and instances %v", key, urls)
	}
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
	if status != http.StatusOK || credits["used"] != 3.0 {
		t.Errorf("analytics after one call on each instance: %d %v, want 3 credits used", status, body)
	}
	checkWebhooks(t, urls, key)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after its context ended")
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
	if n := dials.n.Load(); n != 0 {
		t.Errorf("%d calls opened %d connections to Redis, want none", clients*calls, n)
	}
}

// dialCounter counts the connections a Redis client opens.
type dialCounter struct{ n atomic.Int64 }

func (d *dialCounter) DialHook(next goredis.DialHook) goredis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		d.n.Add(1)
		return next(ctx, network, addr)
	}
}

func (d *dialCounter) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook { return next }

func (d *dialCounter) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
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
