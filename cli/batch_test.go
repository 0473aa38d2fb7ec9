package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/testserver"
)

// contractBatch is one batch the contract server received.
type contractBatch struct {
	key   string
	items []map[string]any
}

// contractServer answers batches as the wire contract of the service says, for the
// tests of the command's own work (reading lines, splitting, writing, drawing,
// stopping): each item's data echoes its parameters and costs 1. answer, if it returns
// true, has answered the batch number n (from 1) itself. The catalog comes from a live
// server; GET /v1/analytics reports batch_max_items max.
func contractServer(t *testing.T, max int, answer func(w http.ResponseWriter, n int) bool) (string, func() []contractBatch) {
	t.Helper()
	live := testserver.Start(t)
	target, _ := url.Parse(live.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var mu sync.Mutex
	var seen []contractBatch
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v1/analytics":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"status":"ok","error":null,"data":{"plan":"pro","batch_max_items":%d}}`, max)
		case strings.HasSuffix(r.URL.Path, "/batch"):
			var body struct {
				Items []map[string]any `json:"items"`
			}
			if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
				t.Errorf("the body of a batch is not JSON: %v", err)
			}
			mu.Lock()
			seen = append(seen, contractBatch{r.Header.Get("Idempotency-Key"), body.Items})
			n := len(seen)
			mu.Unlock()
			if answer != nil && answer(w, n) {
				return
			}
			var items []string
			for _, it := range body.Items {
				b, _ := json.Marshal(it)
				items = append(items, fmt.Sprintf(`{"status": "ok", "error": null, "data": {"params": %s}, "credits": 1}`, b))
			}
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Credits-Cost", fmt.Sprint(len(items)))
			w.Header().Set("X-Credits-Remaining", "100")
			fmt.Fprintf(w, `{"status":"ok","error":null,"data":{"items":[%s],"summary":{"ok":%d,"failed":0,"credits":%d}}}`,
				strings.Join(items, ",\n"), len(items), len(items))
		default:
			proxy.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []contractBatch {
		mu.Lock()
		defer mu.Unlock()
		return append([]contractBatch(nil), seen...)
	}
}

// writeLines writes lines to a file and returns its path.
func writeLines(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "items.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// batchSys is the system of a batch run against base: the primary key, standard input
// stdin, standard error a terminal or not, and waits recorded, not made.
func batchSys(base string, stdin io.Reader, tty bool, waits *[]time.Duration) system {
	env := map[string]string{envKey: testserver.PrimaryKey, envBaseURL: base}
	return system{getenv: func(k string) string { return env[k] }, stdin: stdin, stderrIsTerminal: tty,
		sleep: func(_ context.Context, d time.Duration) error {
			if waits != nil {
				*waits = append(*waits, d)
			}
			return nil
		}}
}

// resultLines decodes the result lines of a batch run.
func resultLines(t *testing.T, stdout string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.SplitAfter(stdout, "\n") {
		if line == "" {
			continue
		}
		if !strings.HasSuffix(line, "\n") || strings.Count(line, "\n") != 1 {
			t.Fatalf("result line %q is not one line", line)
		}
		var env map[string]any
		if err := json.Unmarshal([]byte(line), &env); err != nil {
			t.Fatalf("result line %q: %v", line, err)
		}
		out = append(out, env)
	}
	return out
}

// TestBatchLines checks how a batch run reads its input and writes its results:
// blank lines skipped, invalid lines answered without being sent and named on standard
// error, the valid ones split into batches of the plan's size, one result line per
// item in order, and nothing else on standard error when it is not a terminal.
func TestBatchLines(t *testing.T) {
	base, seen := contractServer(t, 3, nil)
	file := writeLines(t,
		`{"text": "a"}`,
		``,
		`{"text": "b", "algorithm": "md5"}`,
		`not json`,
		`["text", "c"]`,
		`{"algorithm": "md5"}`,
		`{"text": "d"} {"text": "e"}`,
		"  \t ",
		`{"text": "f", "algorithm": "crc32"}`,
		`{"text": "g"}`,
		`{"text": "h"}`,
		`{"text": "i", "algorithm": null}`,
		`{"text": "j"}`,
	)
	r := runSys(t, batchSys(base, nil, false, nil), "hash", "--batch", file)
	if r.code != exitAPI {
		t.Errorf("exit %d, want 1: some lines failed", r.code)
	}
	want := []string{
		`ok {"text":"a"}`,
		`ok {"algorithm":"md5","text":"b"}`,
		`invalid_input the line is not JSON`,
		`invalid_input the line is not a JSON object`,
		`invalid_input parameter "text": is required`,
		`invalid_input the line holds more than one JSON value`,
		`invalid_input parameter "algorithm": must be one of md5, sha1, sha256, sha512, got "crc32"`,
		`ok {"text":"g"}`,
		`ok {"text":"h"}`,
		`ok {"text":"i"}`,
		`ok {"text":"j"}`,
	}
	lines := resultLines(t, r.stdout)
	if len(lines) != len(want) {
		t.Fatalf("%d result lines, want %d:\n%s", len(lines), len(want), r.stdout)
	}
	for i, env := range lines {
		var got string
		if env["status"] == "ok" {
			params, _ := json.Marshal(env["data"].(map[string]any)["params"])
			got = "ok " + string(params)
		} else {
			got = fmt.Sprint(env["code"], " ", env["error"])
			if env["data"] != nil || env["credits"] != float64(0) {
				t.Errorf("line %d: %v, want data null and credits 0", i, env)
			}
		}
		if !strings.HasPrefix(got, want[i]) {
			t.Errorf("result %d: %s, want %s", i, got, want[i])
		}
	}
	var sizes []int
	for _, b := range seen() {
		sizes = append(sizes, len(b.items))
	}
	if fmt.Sprint(sizes) != "[3 3]" {
		t.Errorf("batches of %v items, want [3 3]", sizes)
	}
	for _, l := range []int{4, 5, 6, 7, 9} {
		if !strings.Contains(r.stderr, fmt.Sprintf("tollgate: line %d was not sent: ", l)) {
			t.Errorf("stderr does not name line %d:\n%s", l, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "\r") || strings.Count(r.stderr, "\n") != 5 {
		t.Errorf("stderr %q, want the five invalid lines and nothing else", r.stderr)
	}

	// Standard input, and only valid lines: exit 0, nothing on standard error.
	stdin := strings.NewReader(`{"text": "x"}` + "\r\n" + `{"text": "y"}`)
	r = runSys(t, batchSys(base, stdin, false, nil), "hash", "--batch=-")
	if r.code != exitOK || r.stderr != "" || len(resultLines(t, r.stdout)) != 2 {
		t.Errorf("exit %d, stderr %q, stdout %s", r.code, r.stderr, r.stdout)
	}
}

// TestBatchProgress checks the progress line drawn on a terminal: a bar for a file,
// counts alone for a pipe, the wait before a batch is sent again, and the final line.
func TestBatchProgress(t *testing.T) {
	base, _ := contractServer(t, 2, func(w http.ResponseWriter, n int) bool {
		if n != 2 {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Error-Code", "rate_limited")
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(429)
		io.WriteString(w, `{"status":"error","error":"rate limit reached","data":null}`)
		return true
	})
	file := writeLines(t, `{"text": "a"}`, `{"text": "b"}`, `{}`, `{"text": "c"}`)
	var waits []time.Duration
	r := runSys(t, batchSys(base, nil, true, &waits), "hash", "--batch", file)
	if r.code != exitAPI || len(resultLines(t, r.stdout)) != 4 {
		t.Fatalf("exit %d, stdout %s, stderr %q", r.code, r.stdout, r.stderr)
	}
	// The first batch is the first 28 bytes of 45: 62%, 14 cells of 24.
	want := "\r\x1b[K[##############..........]  62% 2 items, 2 credits, 0 errors" +
		"\r\x1b[K[##############..........]  62% 2 items, 2 credits, 0 errors (waiting 7s to send the batch again)" +
		"\r\x1b[Ktollgate: line 3 was not sent: parameter \"text\": is required\n" +
		"\r\x1b[K[########################] 100% 4 items, 3 credits, 1 error" +
		"\r\x1b[K[########################] 100% 4 items, 3 credits, 1 error\n"
	if r.stderr != want {
		t.Errorf("stderr\n%q\nwant\n%q", r.stderr, want)
	}
	if fmt.Sprint(waits) != "[7s]" {
		t.Errorf("waits %v, want the Retry-After", waits)
	}

	// Blank lines and CRLF line ends are part of the file: the bar ends full.
	crlf := filepath.Join(t.TempDir(), "crlf.jsonl")
	if err := os.WriteFile(crlf, []byte("\n \r\n{\"text\": \"a\"}\r\n\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = runSys(t, batchSys(base, nil, true, nil), "hash", "--batch", crlf)
	if want := "\r\x1b[K[########################] 100% 1 item, 1 credit, 0 errors\n"; r.code != exitOK || !strings.HasSuffix(r.stderr, want) {
		t.Errorf("exit %d, stderr %q, want it to end with %q", r.code, r.stderr, want)
	}

	// From a pipe, whose size is not known: the counts without a bar.
	r = runSys(t, batchSys(base, strings.NewReader(`{"text": "a"}`+"\n"), true, nil), "hash", "--batch", "-")
	if want := "\r\x1b[K1 item, 1 credit, 0 errors\r\x1b[K1 item, 1 credit, 0 errors\n"; r.code != exitOK || r.stderr != want {
		t.Errorf("exit %d, stderr %q, want %q", r.code, r.stderr, want)
	}
}

// TestBatchStops checks that a run stops at a batch the service refuses, with the
// results of the lines before it and the line to go on from.
func TestBatchStops(t *testing.T) {
	base, seen := contractServer(t, 2, func(w http.ResponseWriter, n int) bool {
		if n != 2 {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Error-Code", "credits_exhausted")
		w.WriteHeader(429)
		io.WriteString(w, `{"status":"error","error":"not enough credits: the batch costs 2, 1 left","data":null}`)
		return true
	})
	file := writeLines(t, `{"text": "a"}`, `{"text": "b"}`, ``, `{"text": "c"}`, `{"text": "d"}`, `{"text": "e"}`)
	r := runSys(t, batchSys(base, nil, false, nil), "hash", "--batch", file)
	if r.code != exitAPI || len(resultLines(t, r.stdout)) != 2 {
		t.Errorf("exit %d, stdout %s", r.code, r.stdout)
	}
	for _, s := range []string{"stopped at line 4: the service refused the batch: 429 (credits_exhausted): not enough credits", "tail -n +4 FILE"} {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("stderr %q, want %q", r.stderr, s)
		}
	}
	if n := len(seen()); n != 2 {
		t.Errorf("%d batches sent, want 2: none after the refusal", n)
	}
}

// TestBatchRetry checks that a batch whose answer was lost is sent again with the
// same idempotency key, and each batch has its own.
func TestBatchRetry(t *testing.T) {
	base, seen := contractServer(t, 1, func(w http.ResponseWriter, n int) bool {
		if n != 1 {
			return false
		}
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return true
		}
		conn.Close()
		return true
	})
	var waits []time.Duration
	r := runSys(t, batchSys(base, strings.NewReader(`{"text":"a"}`+"\n"+`{"text":"b"}`), false, &waits), "hash", "--batch", "-")
	if r.code != exitOK || len(resultLines(t, r.stdout)) != 2 || r.stderr != "" {
		t.Fatalf("exit %d, stdout %s, stderr %q", r.code, r.stdout, r.stderr)
	}
	// The batch is sent again by the command's retry policy, or first by net/http,
	// which retries a request with an Idempotency-Key on a reused connection itself.
	b := seen()
	if len(b) != 3 || b[0].key == "" || b[1].key != b[0].key || b[2].key == b[0].key || len(waits) > 1 {
		t.Errorf("batches %+v after waits %v: want the first sent twice with one key, the second with another", b, waits)
	}
}

// TestBatchMistakes checks the usage mistakes of a batch run: exit 2, nothing sent.
func TestBatchMistakes(t *testing.T) {
	base, seen := contractServer(t, 10, nil)
	file := writeLines(t, `{"text": "a"}`)
	env := map[string]string{envKey: testserver.PrimaryKey, envBaseURL: base}
	tests := []struct {
		name   string
		env    map[string]string
		args   []string
		stderr string
	}{
		{"no file", env, []string{"hash", "--batch"}, "--batch needs a file"},
		{"empty file name", env, []string{"hash", "--batch="}, "--batch needs a file"},
		{"other options", env, []string{"hash", "--batch", file, "--text", "a"}, "--batch takes no other option"},
		{"other options first", env, []string{"hash", "--text", "a", "--batch=" + file}, "--batch takes no other option"},
		{"missing file", env, []string{"hash", "--batch", file + ".missing"}, "no such file"},
		{"directory", env, []string{"hash", "--batch", filepath.Dir(file)}, "is a directory"},
		{"no key", map[string]string{envBaseURL: base}, []string{"hash", "--batch", file}, "TOLLGATE_API_KEY is not set"},
		{"unknown API", env, []string{"hsh", "--batch", file}, `unknown API "hsh"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runWith(t, tt.env, tt.args...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tt.stderr) || r.stdout != "" {
				t.Errorf("exit %d, stderr %q, stdout %q; want exit 2 and %q", r.code, r.stderr, r.stdout, tt.stderr)
			}
		})
	}
	if n := len(seen()); n != 0 {
		t.Errorf("%d batches sent, want none", n)
	}
}

// TestBatchWithoutKeys checks a run against a service that keeps no answers for
// idempotency keys, and refuses batches that carry one: the command says so once, and
// sends that batch and the next without a key.
func TestBatchWithoutKeys(t *testing.T) {
	var seen func() []contractBatch
	base, seen := contractServer(t, 2, func(w http.ResponseWriter, n int) bool {
		if seen()[n-1].key == "" {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Error-Code", "invalid_input")
		w.WriteHeader(400)
		io.WriteString(w, `{"status":"error","error":"this service keeps no answers for idempotency keys: send the batch without an Idempotency-Key","data":null}`)
		return true
	})
	file := writeLines(t, `{"text": "a"}`, `{"text": "b"}`, `{"text": "c"}`)
	r := runSys(t, batchSys(base, nil, false, nil), "hash", "--batch", file)
	if r.code != exitOK || len(resultLines(t, r.stdout)) != 3 {
		t.Fatalf("exit %d, stdout %s, stderr %q", r.code, r.stdout, r.stderr)
	}
	if want := "tollgate: the service keeps no answers for idempotency keys (this service keeps no answers for idempotency keys: send the batch without an Idempotency-Key): batches go without one, and one whose answer is lost is not sent again\n"; r.stderr != want {
		t.Errorf("stderr %q, want %q", r.stderr, want)
	}
	var keys []string
	for _, b := range seen() {
		keys = append(keys, fmt.Sprintf("%d:%v", len(b.items), b.key != ""))
	}
	if got := strings.Join(keys, " "); got != "2:true 2:false 1:false" {
		t.Errorf("batches (items:with a key) %s, want the first refused with its key, then sent without, and the next without", got)
	}
}
