package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/testserver"
)

// liveSys is the system of a batch run against a live server with key.
func liveSys(srv string, key string, stdin io.Reader, tty bool) system {
	env := map[string]string{envKey: key, envBaseURL: srv}
	return system{getenv: func(k string) string { return env[k] }, stdin: stdin, stderrIsTerminal: tty}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestBatchLive runs a file of 1,000 lines through the live service: the plan's batch
// size read from the analytics, ten batches, each line's result in order (the valid
// ones hashed and charged once, the invalid ones refused before anything is sent), the
// progress drawn on a terminal, and the exit status.
func TestBatchLive(t *testing.T) {
	srv := testserver.Start(t)
	var lines []string
	for i := 1; i <= 1000; i++ {
		switch i {
		case 250:
			lines = append(lines, `{"txt": "line 250"}`)
		case 700:
			lines = append(lines, `line 700`)
		default:
			lines = append(lines, fmt.Sprintf(`{"text": "line %d"}`, i))
		}
	}
	file := writeLines(t, lines...)
	balance := srv.Balance(t, "bulk")
	r := runSys(t, liveSys(srv.URL, testserver.BulkKey, nil, true), "hash", "--batch", file)
	if r.code != exitAPI {
		t.Errorf("exit %d, want 1: two lines failed", r.code)
	}
	results := resultLines(t, r.stdout)
	if len(results) != 1000 {
		t.Fatalf("%d result lines, want 1000", len(results))
	}
	for i, env := range results {
		n := i + 1
		switch n {
		case 250, 700:
			if env["status"] != "error" || env["code"] != "invalid_input" || env["credits"] != float64(0) {
				t.Errorf("line %d: %v, want an invalid_input error", n, env)
			}
		default:
			data, _ := env["data"].(map[string]any)
			if env["status"] != "ok" || env["credits"] != float64(1) || data["hash"] != sha256Hex(fmt.Sprintf("line %d", n)) {
				t.Fatalf("line %d: %v, want the hash of its text", n, env)
			}
		}
	}
	if got := srv.Balance(t, "bulk"); got != balance-998 {
		t.Errorf("balance %d, want %d: 998 items charged once each", got, balance-998)
	}
	// The catalog, the analytics and ten batches of at most 100 items.
	if n := srv.APICalls(); n != 1+10 {
		t.Errorf("%d requests, want the analytics and 10 batches", n)
	}
	for _, s := range []string{
		`tollgate: line 250 was not sent: parameter "txt": unknown parameter`,
		"tollgate: line 700 was not sent: the line is not JSON",
		"\r\x1b[K[########################] 100% 1000 items, 998 credits, 2 errors\n",
	} {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("stderr lacks %q:\n%q", s, r.stderr[max(0, len(r.stderr)-400):])
		}
	}
	for _, m := range srv.AuthModes() {
		if m != "cli" {
			t.Fatalf("X-Auth-Mode %q, want cli", m)
		}
	}

	// From standard input, every line valid, standard error not a terminal: exit 0,
	// nothing on standard error.
	var in bytes.Buffer
	for i := range 150 {
		fmt.Fprintf(&in, `{"text": "%d", "algorithm": "md5"}`+"\n", i)
	}
	r = runSys(t, liveSys(srv.URL, testserver.BulkKey, &in, false), "hash", "--batch", "-")
	if r.code != exitOK || r.stderr != "" || len(resultLines(t, r.stdout)) != 150 {
		t.Errorf("exit %d, stderr %q, %d result lines", r.code, r.stderr, len(resultLines(t, r.stdout)))
	}

	// A file API's URL form, on the pro plan.
	r = runSys(t, liveSys(srv.URL, testserver.PrimaryKey, strings.NewReader(`{"url": "`+srv.FileURL+`"}`+"\n{}\n"), false), "image-info", "--batch", "-")
	if res := resultLines(t, r.stdout); r.code != exitAPI || len(res) != 2 || res[0]["status"] != "ok" || res[1]["code"] != "invalid_input" ||
		!strings.Contains(r.stderr, `line 2 was not sent: parameter "image": is required: a batch takes the URL form`) {
		t.Errorf("image-info: exit %d, stdout %s, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// TestBatchLiveRefused checks a run the service refuses: nothing written on standard
// output, the line to go on from on standard error, nothing charged.
func TestBatchLiveRefused(t *testing.T) {
	srv := testserver.Start(t)
	file := writeLines(t, `{"text": "a"}`, `{"text": "b"}`)
	tests := []struct {
		key, stderr string
	}{
		{testserver.NoCreditsKey, "stopped at line 1: the service refused the batch: 429 (credits_exhausted)"},
		{testserver.UnknownKey, "reading the plan's batch size (GET /v1/analytics): 401 (unauthorized): unauthorized; the key in TOLLGATE_API_KEY is not a key"},
	}
	for _, tt := range tests {
		r := runSys(t, liveSys(srv.URL, tt.key, nil, false), "hash", "--batch", file)
		if r.code != exitAPI || r.stdout != "" || !strings.Contains(r.stderr, tt.stderr) {
			t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 and %q", r.code, r.stdout, r.stderr, tt.stderr)
		}
	}
	if got := srv.Balance(t, "broke"); got != 0 {
		t.Errorf("balance %d", got)
	}
}

// TestBatchLiveLostAnswer loses the answer of the first batch after the service ran it:
// the command sends the batch again with the same idempotency key, and the service
// answers it from its record, so that every line is charged once.
func TestBatchLiveLostAnswer(t *testing.T) {
	srv := testserver.Start(t)
	var mu sync.Mutex
	var keys []string
	lost := false
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, srv.URL+r.URL.String(), bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		answer, _ := io.ReadAll(resp.Body)
		mu.Lock()
		drop := strings.HasSuffix(r.URL.Path, "/batch") && !lost
		if strings.HasSuffix(r.URL.Path, "/batch") {
			keys = append(keys, r.Header.Get("Idempotency-Key")+" "+resp.Header.Get("Idempotent-Replayed"))
		}
		lost = lost || drop
		mu.Unlock()
		if drop { // the service ran the batch; its answer is lost on the way back
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		w.Write(answer)
	}))
	t.Cleanup(proxy.Close)
	var lines []string
	for i := range 120 {
		lines = append(lines, fmt.Sprintf(`{"text": "%d"}`, i))
	}
	file := writeLines(t, lines...)
	balance := srv.Balance(t, "bulk")
	var waits int
	sys := liveSys(proxy.URL, testserver.BulkKey, nil, false)
	sys.sleep = func(context.Context, time.Duration) error { waits++; return nil }
	r := runSys(t, sys, "hash", "--batch", file)
	if r.code != exitOK || len(resultLines(t, r.stdout)) != 120 || r.stderr != "" {
		t.Fatalf("exit %d, %d result lines, stderr %q", r.code, len(resultLines(t, r.stdout)), r.stderr)
	}
	if got := srv.Balance(t, "bulk"); got != balance-120 {
		t.Errorf("balance %d, want %d: each line charged once", got, balance-120)
	}
	mu.Lock()
	defer mu.Unlock()
	// The first batch twice with one key, its second answer replayed; the second batch
	// with a key of its own.
	first, _, _ := strings.Cut(keys[0], " ")
	if len(keys) != 3 || first == "" || keys[1] != first+" true" || strings.HasPrefix(keys[2], first) || strings.HasSuffix(keys[2], "true") {
		t.Errorf("batches (key, replayed): %q; want the first sent again with its key and replayed, the second with another key", keys)
	}
}
