package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// TestRun starts three instances on the shared test servers (a fresh schema and prefix),
// makes a paid call on each and checks that they share one balance, then stops them.
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
			"-instances", "3", "-port", "0"}, w, io.Discard)
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
