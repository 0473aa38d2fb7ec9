package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"image"
	"image/png"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// The key values of testdata/fixtures.json: acme's primary key, and its sub-key ci,
// which may call only hash, only over REST, from 10.0.0.0/8, until 2030.
const (
	fixturePrimary = "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b"
	fixtureCI      = "6fa459ea-ee8a-4ca4-894e-db77e160355e"
)

const (
	testAdminToken    = "server-admin-token-0123456789"
	testSessionSecret = "0123456789abcdef0123456789abcdef"
)

var (
	apiKeyLine  = regexp.MustCompile(`^API key: ([0-9a-f-]{36})$`)
	sessionLine = regexp.MustCompile(`^Session token: ([A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+)$`)
)

// syncBuffer is a bytes.Buffer that several goroutines may write.
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

func TestParseFlags(t *testing.T) {
	defaults := config{addr: ":8080"}
	tests := []struct {
		name    string
		args    []string
		want    config
		wantErr string // a fragment of the error, "" for none
	}{
		{"defaults", nil, defaults, ""},
		{"addr", []string{"-addr", "127.0.0.1:9999"}, config{addr: "127.0.0.1:9999"}, ""},
		{"addr with =", []string{"--addr=:0"}, config{addr: ":0"}, ""},
		{"fixtures", []string{"-fixtures", "testdata/fixtures.json"}, config{addr: ":8080", fixtures: "testdata/fixtures.json"}, ""},
		{"admin token", []string{"-admin-token", testAdminToken}, config{addr: ":8080", adminToken: testAdminToken}, ""},
		{"session secret", []string{"-session-secret", testSessionSecret}, config{addr: ":8080", sessionSecret: testSessionSecret}, ""},
		{"allow private fetch", []string{"-allow-private-fetch"}, config{addr: ":8080", allowPrivateFetch: true}, ""},
		{"allow private fetch false", []string{"-allow-private-fetch=false"}, defaults, ""},
		{"public URL", []string{"-public-url", "https://api.example.com"}, config{addr: ":8080", publicURL: "https://api.example.com"}, ""},
		{"IETF rate headers", []string{"-ietf-rate-headers"}, config{addr: ":8080", ietfRateHeaders: true}, ""},
		{"ops address", []string{"-ops-addr", "127.0.0.1:9090"}, config{addr: ":8080", opsAddr: "127.0.0.1:9090"}, ""},
		{"webhook schedule", []string{"-webhook-schedule", "50ms,1s"}, config{addr: ":8080", webhookSchedule: "50ms,1s"}, ""},
		{"webhook timeout", []string{"-webhook-timeout", "2m"}, config{addr: ":8080", webhookTimeout: 2 * time.Minute}, ""},
		{"bad webhook schedule", []string{"-webhook-schedule", "1s,soon"}, config{}, `"soon" is not a duration`},
		{"webhook schedule with a zero wait", []string{"-webhook-schedule", "1s,0s"}, config{}, "must be positive"},
		{"negative webhook timeout", []string{"-webhook-timeout", "-1s"}, config{}, "-webhook-timeout -1s is negative"},
		{"all", []string{"-addr", ":1", "-fixtures", "f.json", "-admin-token", "t", "-session-secret", "s", "-allow-private-fetch"},
			config{addr: ":1", fixtures: "f.json", adminToken: "t", sessionSecret: "s", allowPrivateFetch: true}, ""},
		{"unknown flag", []string{"-port", "80"}, config{}, "-port"},
		{"missing value", []string{"-addr"}, config{}, "-addr"},
		{"stray argument", []string{"serve"}, config{}, `"serve"`},
		{"stray argument after flags", []string{"-addr", ":1", "extra", "more"}, config{}, `"extra" "more"`},
		{"bad boolean", []string{"-allow-private-fetch=maybe"}, config{}, "maybe"},
		{"help", []string{"-h"}, config{}, flag.ErrHelp.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			got, err := parseFlags(tt.args, &stderr)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseFlags(%q): %v, want an error mentioning %s", tt.args, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseFlags(%q): %v", tt.args, err)
			}
			if got != tt.want {
				t.Errorf("parseFlags(%q) = %+v, want %+v", tt.args, got, tt.want)
			}
			if stderr.Len() != 0 {
				t.Errorf("parseFlags wrote %q", stderr.String())
			}
		})
	}
	// The usage lists every flag.
	var stderr bytes.Buffer
	parseFlags([]string{"-h"}, &stderr)
	for _, f := range []string{"-addr", "-fixtures", "-admin-token", "-session-secret", "-allow-private-fetch", "-public-url", "-ietf-rate-headers", "-ops-addr",
		"-webhook-schedule", "-webhook-timeout"} {
		if !strings.Contains(stderr.String(), f) {
			t.Errorf("the usage does not mention %s:\n%s", f, stderr.String())
		}
	}
}

// server is the assembled handler behind a test server, with what assemble printed
// and logged; or the built command run as a process (startBinary), whose srv is nil.
type server struct {
	t      *testing.T
	srv    *httptest.Server
	url    string       // the base URL requests go to
	client *http.Client // the client that sends them
	stdout string
	logs   *syncBuffer
}

// start parses args, assembles the server and serves it.
func start(t *testing.T, args ...string) *server {
	t.Helper()
	return startClocked(t, nil, args...)
}

// startClocked is start with the service on clock, when it is not nil.
func startClocked(t *testing.T, clock interface{ Now() time.Time }, args ...string) *server {
	t.Helper()
	return startConfigured(t, func(c *config) { c.clock = clock }, args...)
}

// startConfigured is start with the configuration the flags make changed by configure:
// what no flag sets.
func startConfigured(t *testing.T, configure func(*config), args ...string) *server {
	t.Helper()
	c, err := parseFlags(args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	configure(&c)
	var stdout bytes.Buffer
	logs := &syncBuffer{}
	// The test server's address is the public URL, as run makes it: known before
	// assembling, for the OAuth issuer.
	srv := httptest.NewUnstartedServer(nil)
	c.publicURL = "http://" + srv.Listener.Addr().String()
	a, err := assemble(t.Context(), c, &stdout, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		srv.Close()
		t.Fatalf("assemble(%q): %v", args, err)
	}
	t.Cleanup(a.close) // after the server's Close: cleanups run last first
	srv.Config.Handler = a.handler
	srv.Start()
	t.Cleanup(srv.Close)
	return &server{t: t, srv: srv, url: srv.URL, client: srv.Client(), stdout: stdout.String(), logs: logs}
}

// lines returns the printed lines.
func (s *server) lines() []string {
	return strings.Split(strings.TrimSuffix(s.stdout, "\n"), "\n")
}

// apiKey returns the printed demo key, failing unless exactly the expected lines were
// printed.
func (s *server) apiKey(wantLines int) string {
	s.t.Helper()
	lines := s.lines()
	if len(lines) != wantLines {
		s.t.Fatalf("assemble printed %d lines, want %d:\n%s", len(lines), wantLines, s.stdout)
	}
	m := apiKeyLine.FindStringSubmatch(lines[0])
	if m == nil {
		s.t.Fatalf("the first line %q is not an API key line", lines[0])
	}
	return m[1]
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

// call sends a request; hdr holds header name/value pairs.
func (s *server) call(method, path, body string, hdr ...string) reply {
	s.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(s.t.Context(), method, s.url+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := s.client.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return reply{res.StatusCode, res.Header, b}
}

// data decodes the data of a success envelope.
func (r reply) data(t *testing.T) map[string]any {
	t.Helper()
	var env struct {
		Status string         `json:"status"`
		Data   map[string]any `json:"data"`
	}
	if err := json.Unmarshal(r.body, &env); err != nil || env.Status != "ok" {
		t.Fatalf("not a success envelope (%v): %s", err, r.body)
	}
	return env.Data
}

// noKeyInLogs fails if a key value appears in the logs.
func (s *server) noKeyInLogs(values ...string) {
	s.t.Helper()
	logs := s.logs.String()
	for _, v := range values {
		if v != "" && strings.Contains(strings.ToLower(logs), strings.ToLower(v)) {
			s.t.Errorf("the logs hold the key value %s:\n%s", v, logs)
		}
	}
}

var helloSHA256 = func() string { s := sha256.Sum256([]byte("hello")); return hex.EncodeToString(s[:]) }()

func TestAssembleDemo(t *testing.T) {
	s := start(t)
	key := s.apiKey(1)

	tests := []struct {
		name      string
		method    string
		path      string
		body      string
		hdr       []string
		status    int
		remaining string // X-Credits-Remaining, if the call reports one
	}{
		{"paid call", "GET", "/v1/hash?text=hello", "", []string{"x-api-key", key}, 200, "99999"},
		{"paid call with a bearer key", "GET", "/v1/hash?text=hello", "", []string{"Authorization", "Bearer " + key}, 200, "99998"},
		{"paid call with the key in uppercase", "GET", "/v1/hash?text=hello", "", []string{"x-api-key", strings.ToUpper(key)}, 200, "99997"},
		{"analytics (never billed)", "GET", "/v1/analytics", "", []string{"x-api-key", key}, 200, "99997"},
		{"POST API", "POST", "/v1/echo", `{"message":"hi"}`, []string{"x-api-key", key}, 200, "99996"},
		{"catalog without a key", "GET", "/v1/catalog", "", nil, 200, ""},
		{"OpenAPI without a key", "GET", "/v1/openapi.json", "", nil, 200, ""},
		{"unknown key", "GET", "/v1/hash?text=hello", "", []string{"x-api-key", "00000000-0000-4000-8000-000000000000"}, 401, ""},
		{"unknown API", "GET", "/v1/nope", "", []string{"x-api-key", key}, 404, "99996"},
		{"no admin API", "GET", "/admin/v1/accounts/demo", "", []string{"Authorization", "Bearer " + testAdminToken}, 404, ""},
		{"no admin API for POST", "POST", "/admin/v1/accounts", `{"plan":"pro"}`, []string{"Authorization", "Bearer " + testAdminToken}, 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := s.call(tt.method, tt.path, tt.body, tt.hdr...)
			if r.status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.status, tt.status, r.body)
			}
			if got := r.header.Get("X-Credits-Remaining"); got != tt.remaining {
				t.Errorf("X-Credits-Remaining %q, want %q", got, tt.remaining)
			}
			if tt.remaining != "" && tt.status == 200 && r.header.Get("X-Plan") != "pro" {
				t.Errorf("X-Plan %q, want pro", r.header.Get("X-Plan"))
			}
		})
	}

	r := s.call("GET", "/v1/hash?text=hello", "", "x-api-key", key)
	if d := r.data(t); d["hash"] != helloSHA256 || d["algorithm"] != "sha256" {
		t.Errorf("hash of hello: %v", d)
	}
	if d := s.call("GET", "/v1/analytics", "", "x-api-key", key).data(t); len(d) == 0 {
		t.Error("analytics has no data")
	}

	// No key, or a key of the wrong shape: the edge's bare HTML 403.
	for _, hdr := range [][]string{nil, {"x-api-key", "undefined"}, {"x-api-key", key[:35]}} {
		r := s.call("GET", "/v1/hash?text=hello", "", hdr...)
		if r.status != http.StatusForbidden || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") ||
			!bytes.Contains(r.body, []byte("403 Forbidden")) || r.header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%q: %d %q %s, want the edge's HTML 403", hdr, r.status, r.header.Get("Content-Type"), r.body)
		}
	}
	s.noKeyInLogs(key)
}

func TestAssembleSession(t *testing.T) {
	s := start(t, "-session-secret", testSessionSecret)
	key := s.apiKey(2)
	m := sessionLine.FindStringSubmatch(s.lines()[1])
	if m == nil {
		t.Fatalf("the second line %q is not a session token line", s.lines()[1])
	}
	token := m[1]
	tests := []struct {
		name   string
		hdr    []string
		status int
	}{
		{"session token", []string{"x-jwt", token}, 200},
		{"key", []string{"x-api-key", key}, 200},
		{"forged token", []string{"x-jwt", token[:len(token)-2] + "xx"}, 401},
	}
	for _, tt := range tests {
		r := s.call("GET", "/v1/hash?text=hello", "", tt.hdr...)
		if r.status != tt.status {
			t.Errorf("%s: %d, want %d: %s", tt.name, r.status, tt.status, r.body)
		}
	}
	if r := s.call("GET", "/v1/analytics", "", "x-jwt", token); r.status != 200 {
		t.Errorf("analytics with the session token: %d", r.status)
	}
	s.noKeyInLogs(key, token)

	// Without -session-secret, session tokens are refused.
	plain := start(t)
	if r := plain.call("GET", "/v1/hash?text=hello", "", "x-jwt", token); r.status != http.StatusUnauthorized {
		t.Errorf("a session token without -session-secret: %d, want 401", r.status)
	}
}

func TestAssembleFixtures(t *testing.T) {
	for _, args := range [][]string{
		{"-fixtures", "testdata/fixtures.json"},
		// With fixtures, no session token is printed either.
		{"-fixtures", "testdata/fixtures.json", "-session-secret", testSessionSecret},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			s := start(t, args...)
			if s.stdout != "" {
				t.Errorf("assemble printed %q, want nothing", s.stdout)
			}
			r := s.call("GET", "/v1/hash?text=hello", "", "x-api-key", fixturePrimary)
			if r.status != 200 || r.header.Get("X-Credits-Remaining") != "999" || r.header.Get("X-Plan") != "pro" {
				t.Errorf("the fixtures' primary key: %d, remaining %q, plan %q: %s", r.status,
					r.header.Get("X-Credits-Remaining"), r.header.Get("X-Plan"), r.body)
			}
			// The ci key is limited to 10.0.0.0/8; the test client comes from loopback.
			if r := s.call("GET", "/v1/hash?text=hello", "", "x-api-key", fixtureCI); r.status != http.StatusForbidden {
				t.Errorf("the ci key from loopback: %d, want 403", r.status)
			}
			s.noKeyInLogs(fixturePrimary, fixtureCI)
		})
	}
}

// TestAssembleBatch checks batches on the example server as it is assembled: the
// fixtures' plans give the batch sizes analytics reports (pro 100; free 10, held to its
// rate limit's burst of 5), a batch runs and charges its valid items, and one sent again
// with its Idempotency-Key is answered from the memory store without a second charge.
func TestAssembleBatch(t *testing.T) {
	s := start(t, "-fixtures", "testdata/fixtures.json", "-admin-token", testAdminToken)
	r := s.call("POST", "/admin/v1/accounts", `{"id":"small","plan":"free"}`, "Authorization", "Bearer "+testAdminToken)
	if r.status != http.StatusCreated {
		t.Fatalf("create a free account: %d: %s", r.status, r.body)
	}
	free, _ := r.data(t)["value"].(string)
	for k, want := range map[string]float64{fixturePrimary: 100, free: 5} {
		if got := s.call("GET", "/v1/analytics", "", "x-api-key", k).data(t)["batch_max_items"]; got != want {
			t.Errorf("batch_max_items %v, want %v", got, want)
		}
	}
	body := `{"items":[{"text":"hello"},{"text":"hello","algorithm":"md5"},{"algorithm":"sha1"}]}`
	first := s.call("POST", "/v1/hash/batch", body, "x-api-key", fixturePrimary, "Idempotency-Key", "k-1")
	d := first.data(t)
	items, _ := d["items"].([]any)
	if len(items) != 3 || first.header.Get("X-Credits-Cost") != "2" || first.header.Get("X-Credits-Remaining") != "998" {
		t.Fatalf("the batch: %d %s, cost %q, remaining %q", first.status, first.body, first.header.Get("X-Credits-Cost"), first.header.Get("X-Credits-Remaining"))
	}
	if got, _ := items[0].(map[string]any)["data"].(map[string]any)["hash"].(string); got != helloSHA256 {
		t.Errorf("the first item's hash %q, want %s", got, helloSHA256)
	}
	again := s.call("POST", "/v1/hash/batch", body, "x-api-key", fixturePrimary, "Idempotency-Key", "k-1")
	if !bytes.Equal(again.body, first.body) || again.header.Get("Idempotent-Replayed") != "true" || again.header.Get("X-Credits-Remaining") != "998" {
		t.Errorf("the retry: %s (replayed %q, remaining %q), want the first answer and no charge", again.body,
			again.header.Get("Idempotent-Replayed"), again.header.Get("X-Credits-Remaining"))
	}
	if r := s.call("POST", "/v1/hash/batch", `{"items":[`+strings.Repeat(`{"text":"a"},`, 5)+`{"text":"a"}]}`, "x-api-key", free); r.status != http.StatusBadRequest ||
		!strings.Contains(string(r.body), "at most 5 per batch") {
		t.Errorf("six items on the free plan: %d %s, want 400 saying the limit", r.status, r.body)
	}
	s.noKeyInLogs(fixturePrimary, free)
}

func TestAssembleAdmin(t *testing.T) {
	s := start(t, "-admin-token", testAdminToken)
	key := s.apiKey(1)
	tests := []struct {
		name   string
		method string
		path   string
		body   string
		hdr    []string
		status int
	}{
		{"no token", "GET", "/admin/v1/accounts/demo", "", nil, 401},
		{"wrong token", "GET", "/admin/v1/accounts/demo", "", []string{"Authorization", "Bearer " + testAdminToken + "x"}, 401},
		{"an API key", "GET", "/admin/v1/accounts/demo", "", []string{"Authorization", "Bearer " + key}, 401},
		{"token", "GET", "/admin/v1/accounts/demo", "", []string{"Authorization", "Bearer " + testAdminToken}, 200},
		{"unknown account", "GET", "/admin/v1/accounts/nobody", "", []string{"Authorization", "Bearer " + testAdminToken}, 404},
	}
	for _, tt := range tests {
		r := s.call(tt.method, tt.path, tt.body, tt.hdr...)
		if r.status != tt.status {
			t.Errorf("%s: %d, want %d: %s", tt.name, r.status, tt.status, r.body)
		}
		if tt.status == 401 && r.header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: a 401 without WWW-Authenticate", tt.name)
		}
	}

	// The admin API and REST share the service: an account created through one is
	// served by the other.
	r := s.call("POST", "/admin/v1/accounts", `{"id":"new","plan":"free"}`, "Authorization", "Bearer "+testAdminToken)
	if r.status != http.StatusCreated {
		t.Fatalf("create account: %d: %s", r.status, r.body)
	}
	value, _ := r.data(t)["value"].(string)
	r = s.call("GET", "/v1/hash?text=hello", "", "x-api-key", value)
	if r.status != 200 || r.header.Get("X-Plan") != "free" || r.header.Get("X-Credits-Remaining") != "49" {
		t.Errorf("the new account's key: %d, plan %q, remaining %q", r.status, r.header.Get("X-Plan"), r.header.Get("X-Credits-Remaining"))
	}
	// The admin API reads the demo account the server printed a key for.
	d := s.call("GET", "/admin/v1/accounts/demo", "", "Authorization", "Bearer "+testAdminToken).data(t)
	if acct, _ := d["account"].(map[string]any); acct["plan"] != "pro" {
		t.Errorf("demo account: %v", d["account"])
	}
	s.noKeyInLogs(key, value)
}

func TestAssembleAllowPrivateFetch(t *testing.T) {
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, 12, 7))); err != nil {
		t.Fatal(err)
	}
	img := buf.Bytes()
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write(img)
	}))
	t.Cleanup(files.Close)
	body := `{"url":"` + files.URL + `/pixel.png"}`

	tests := []struct {
		name   string
		args   []string
		status int // of the fetch
		hook   int // of the creation of a webhook endpoint on loopback
	}{
		{"off by default", nil, http.StatusBadRequest, http.StatusBadRequest},
		{"explicitly off", []string{"-allow-private-fetch=false"}, http.StatusBadRequest, http.StatusBadRequest},
		{"on", []string{"-allow-private-fetch"}, http.StatusOK, http.StatusCreated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := start(t, tt.args...)
			key := s.apiKey(1)
			// A webhook endpoint on loopback, which the flag allows too.
			hook := s.call("POST", "/v1/account/webhooks", `{"url":"`+files.URL+`/hooks"}`, "x-api-key", key)
			if hook.status != tt.hook {
				t.Errorf("a webhook endpoint on loopback: %d %s, want %d", hook.status, hook.body, tt.hook)
			}
			r := s.call("POST", "/v1/image-info", body, "x-api-key", key)
			if r.status != tt.status {
				t.Fatalf("image-info by URL: %d, want %d: %s", r.status, tt.status, r.body)
			}
			if tt.status != http.StatusOK {
				// Refused before admission: nothing is charged.
				if got := r.header.Get("X-Credits-Remaining"); got != "100000" {
					t.Errorf("X-Credits-Remaining %q after a refused fetch, want 100000", got)
				}
				return
			}
			d := r.data(t)
			want := map[string]any{"format": "png", "width": 12.0, "height": 7.0, "bytes": float64(len(img))}
			for k, v := range want {
				if d[k] != v {
					t.Errorf("data.%s = %v, want %v", k, d[k], v)
				}
			}
			if got := r.header.Get("X-Credits-Remaining"); got != "99998" {
				t.Errorf("X-Credits-Remaining %q, want 99998 (image-info costs 2)", got)
			}
		})
	}
}

func TestAssembleErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name     string
		args     []string
		fragment string
		is       error
	}{
		{"missing fixtures file", []string{"-fixtures", filepath.Join(dir, "nope.json")}, "nope.json", fs.ErrNotExist},
		{"fixtures not JSON", []string{"-fixtures", write("bad.json", "{")}, "fixtures", nil},
		{"fixtures with an unknown field", []string{"-fixtures", write("typo.json", `{"plan": []}`)}, "plan", nil},
		{"fixtures without plans", []string{"-fixtures", write("noplans.json", `{"plans": []}`)}, "no plans", nil},
		{"fixtures with an account without a primary key", []string{"-fixtures", write("noprimary.json",
			`{"plans": [{"name": "pro"}], "accounts": [{"id": "acme", "plan": "pro", "keys": []}]}`)}, `account "acme"`, nil},
		{"fixtures with an undefined plan", []string{"-fixtures", write("gold.json",
			`{"plans": [{"name": "pro"}], "accounts": [{"id": "acme", "plan": "gold", "keys": [
				{"name": "primary", "value": "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b", "primary": true}]}]}`)}, "gold", nil},
		{"short session secret", []string{"-session-secret", "short"}, "32", nil},
		{"short admin token", []string{"-admin-token", "short"}, "16", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseFlags(tt.args, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			var stdout bytes.Buffer
			a, err := assemble(t.Context(), c, &stdout, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err == nil {
				t.Fatalf("assemble accepted it: %v", a.handler)
			}
			if !strings.Contains(err.Error(), tt.fragment) {
				t.Errorf("err %q does not mention %s", err, tt.fragment)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("err %v is not %v", err, tt.is)
			}
		})
	}
}

func TestRun(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pr, pw := io.Pipe()
	stderr := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		err := run(ctx, []string{"-addr", "127.0.0.1:0", "-session-secret", testSessionSecret}, pw, stderr)
		pw.Close()
		done <- err
	}()

	// Read the key, the session token and the address from what run prints.
	sc := bufio.NewScanner(pr)
	var key, token, base string
	for base == "" && sc.Scan() {
		line := sc.Text()
		if m := apiKeyLine.FindStringSubmatch(line); m != nil {
			key = m[1]
		} else if m := sessionLine.FindStringSubmatch(line); m != nil {
			token = m[1]
		} else if addr, ok := strings.CutPrefix(line, "Listening on "); ok {
			base = addr
		} else {
			t.Errorf("unexpected line %q", line)
		}
	}
	if base == "" {
		cancel()
		t.Fatalf("run printed no address (scan error %v, run %v)", sc.Err(), <-done)
	}
	drained := make(chan struct{})
	go func() { // run writes nothing more, but never let it block on the pipe
		defer close(drained)
		io.Copy(io.Discard, pr)
	}()
	if key == "" || token == "" || !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Errorf("key %q, token %q, address %q", key, token, base)
	}

	req, err := http.NewRequestWithContext(t.Context(), "GET", base+"/v1/hash?text=hello", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-api-key", key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("X-Credits-Remaining") != "99999" || !bytes.Contains(b, []byte(helloSHA256)) {
		t.Errorf("GET /v1/hash: %d, remaining %q: %s", res.StatusCode, res.Header.Get("X-Credits-Remaining"), b)
	}

	// An MCP client's event stream, which stays open until the server stops.
	streamEnded := openMCPStream(t, base+"/v1/mcp", key)

	// Cancelling the context shuts the server down gracefully, ending the stream.
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run returned %v after the context was canceled, want nil", err)
	}
	<-streamEnded
	<-drained
	logs := stderr.String()
	if !strings.Contains(logs, "shutting down") {
		t.Errorf("stderr does not record the shutdown:\n%s", logs)
	}
	for _, secret := range []string{key, strings.ToUpper(key), token} {
		if strings.Contains(logs, secret) {
			t.Errorf("stderr holds a credential %s:\n%s", secret, logs)
		}
	}
}

// openMCPStream starts an MCP session with the key and opens its GET event stream; the
// returned channel is closed when the stream ends.
func openMCPStream(t *testing.T, url, key string) <-chan struct{} {
	t.Helper()
	post := func(body, session string) *http.Response {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("x-api-key", key)
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res
	}
	res := post(mcpInitialize, "")
	session := res.Header.Get("Mcp-Session-Id")
	if res.StatusCode != 200 || session == "" {
		t.Fatalf("MCP initialize: %d, session %q", res.StatusCode, session)
	}
	post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, session)
	req, _ := http.NewRequestWithContext(context.Background(), "GET", url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("x-api-key", key)
	req.Header.Set("Mcp-Session-Id", session)
	stream, err := http.DefaultClient.Do(req)
	if err != nil || stream.StatusCode != 200 {
		t.Fatalf("MCP event stream: %v %v", err, stream)
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		io.Copy(io.Discard, stream.Body)
		stream.Body.Close()
	}()
	return ended
}

const mcpInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`

// TestAssembleMCP checks that the MCP tool connection is mounted at /v1/mcp: a client
// without a key is challenged, one with the demo key lists the sample tools and calls
// hash at REST's cost.
func TestAssembleMCP(t *testing.T) {
	s := start(t)
	key := s.apiKey(1)
	accept := []string{"Accept", "application/json, text/event-stream"}

	r := s.call("POST", "/v1/mcp", mcpInitialize, accept...)
	if r.status != http.StatusUnauthorized ||
		!strings.HasPrefix(r.header.Get("WWW-Authenticate"), `Bearer resource_metadata="`+s.srv.URL+`/.well-known/oauth-protected-resource/v1/mcp"`) {
		t.Fatalf("without a key: %d %q %s", r.status, r.header.Get("WWW-Authenticate"), r.body)
	}
	r = s.call("POST", "/v1/mcp", mcpInitialize, append(accept, "x-api-key", key)...)
	session := r.header.Get("Mcp-Session-Id")
	if r.status != 200 || session == "" {
		t.Fatalf("initialize: %d %s", r.status, r.body)
	}
	hdr := append(accept, "x-api-key", key, "Mcp-Session-Id", session)
	s.call("POST", "/v1/mcp", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, hdr...)
	r = s.call("POST", "/v1/mcp", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, hdr...)
	var list struct {
		Result struct{ Tools []struct{ Name string } }
	}
	if err := json.Unmarshal(r.body, &list); err != nil || len(list.Result.Tools) != 6 {
		t.Fatalf("tools/list: %s; want the 6 sample tools", r.body)
	}
	r = s.call("POST", "/v1/mcp", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"hash","arguments":{"text":"hello"}}}`, hdr...)
	var call struct {
		Result struct {
			IsError           bool
			StructuredContent map[string]string
		}
	}
	if err := json.Unmarshal(r.body, &call); err != nil || call.Result.IsError || call.Result.StructuredContent["hash"] != helloSHA256 {
		t.Fatalf("tools/call hash: %s", r.body)
	}
	if got := r.header.Get("X-Credits-Remaining"); got != "99999" {
		t.Errorf("X-Credits-Remaining %q after one call, want 99999", got)
	}
	s.noKeyInLogs(key)
}

func TestRunErrors(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		fragment string
		stdout   bool // whether run prints the key before failing (it listens first)
	}{
		{"unknown flag", []string{"-nope"}, "-nope", false},
		{"stray argument", []string{"serve"}, "serve", false},
		// run listens before it reads the fixtures: a port of its own, never :8080.
		{"bad fixtures", []string{"-addr", "127.0.0.1:0", "-fixtures", "testdata/does-not-exist.json"}, "does-not-exist", false},
		{"bad address", []string{"-addr", "127.0.0.1:99999"}, "99999", false},
		{"bad ops address", []string{"-addr", "127.0.0.1:0", "-ops-addr", "127.0.0.1:99999"}, "-ops-addr", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(t.Context(), tt.args, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tt.fragment) {
				t.Fatalf("run: %v, want an error mentioning %s", err, tt.fragment)
			}
			if strings.Contains(stdout.String(), "Listening") {
				t.Errorf("run printed %q before failing", stdout.String())
			}
			if got := strings.HasPrefix(stdout.String(), "API key: "); got != tt.stdout {
				t.Errorf("stdout %q", stdout.String())
			}
		})
	}
}

// TestMCPOAuth runs the whole OAuth flow of the MCP connection with the official
// TypeScript SDK (tools/npm/mcp-oauth-client.mjs): the client connects without a key,
// follows the 401's challenge to the metadata, registers, gets the consent page
// approved with the demo key (the script plays the browser), and calls tools with its
// token. The connection keeps working after the key is rotated, and its next call
// fails once the key is revoked.
func TestMCPOAuth(t *testing.T) {
	dir, node := testenv.Node22(t)
	s := start(t, "-admin-token", testAdminToken)
	key := s.apiKey(1)
	admin := []string{"Authorization", "Bearer " + testAdminToken}
	keys, _ := s.call("GET", "/admin/v1/accounts/demo", "", admin...).data(t)["keys"].([]any)
	if len(keys) != 1 {
		t.Fatalf("the demo account has %d keys", len(keys))
	}
	keyID, _ := keys[0].(map[string]any)["id"].(string)

	cmd := exec.CommandContext(t.Context(), node, filepath.Join(dir, "mcp-oauth-client.mjs"), s.srv.URL+"/v1/mcp", key)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	lines := bufio.NewScanner(stdout)
	lines.Buffer(nil, 1<<20)
	// next reads the script's next line.
	next := func() (check string, ok bool, detail string, event string) {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("the client stopped (%v); stderr:\n%s", lines.Err(), stderr.String())
		}
		var l struct {
			Check, Detail, Event string
			OK                   bool
		}
		if err := json.Unmarshal(lines.Bytes(), &l); err != nil {
			t.Fatalf("output %q: %v", lines.Text(), err)
		}
		return l.Check, l.OK, l.Detail, l.Event
	}
	for {
		check, ok, detail, event := next()
		if event == "ready" {
			break
		}
		if !ok {
			t.Fatalf("check %s failed: %s\nstderr:\n%s", check, detail, stderr.String())
		}
		t.Logf("ok %s: %.120s", check, detail)
	}
	call := func(want bool, when string) {
		t.Helper()
		if _, err := io.WriteString(stdin, "call\n"); err != nil {
			t.Fatal(err)
		}
		check, ok, detail, _ := next()
		if ok != want {
			t.Fatalf("%s: %s ok=%v, want %v: %s", when, check, ok, want, detail)
		}
		t.Logf("%s: %s ok=%v: %.160s", when, check, ok, detail)
	}
	call(true, "the OAuth connection")

	r := s.call("POST", "/admin/v1/keys/"+keyID+"/rotate", "", admin...)
	if r.status != 200 {
		t.Fatalf("rotate: %d %s", r.status, r.body)
	}
	if r := s.call("GET", "/v1/hash?text=a", "", "x-api-key", key); r.status != http.StatusUnauthorized {
		t.Fatalf("the old key value after rotation: %d", r.status)
	}
	call(true, "after a rotation of the key")

	if r := s.call("POST", "/admin/v1/keys/"+keyID+"/revoke", "", admin...); r.status != 200 {
		t.Fatalf("revoke: %d %s", r.status, r.body)
	}
	call(false, "after the revocation of the key")
	io.WriteString(stdin, "quit\n")
	s.noKeyInLogs(key)
}

// TestAssembleSessionRoutes starts a session with the demo key at /v1/account/session,
// calls with its token, signs out, and is refused; without -session-secret too.
func TestAssembleSessionRoutes(t *testing.T) {
	s := start(t)
	key := s.apiKey(1)
	r := s.call("POST", "/v1/account/session", `{"kind":"token"}`, "x-api-key", key)
	if r.status != http.StatusCreated {
		t.Fatalf("starting a session: %d %s", r.status, r.body)
	}
	var env struct {
		Data struct {
			Token string `json:"token"`
		} `json:"data"`
	}
	if err := json.Unmarshal(r.body, &env); err != nil || env.Data.Token == "" {
		t.Fatalf("no token in %s", r.body)
	}
	tok := env.Data.Token
	if r := s.call("GET", "/v1/hash?text=hello", "", "x-jwt", tok); r.status != 200 {
		t.Errorf("a call with the session: %d %s", r.status, r.body)
	}
	if r := s.call("DELETE", "/v1/account/session", "", "x-jwt", tok); r.status != 200 {
		t.Errorf("signing out: %d %s", r.status, r.body)
	}
	if r := s.call("GET", "/v1/hash?text=hello", "", "x-jwt", tok); r.status != http.StatusUnauthorized {
		t.Errorf("a call after signing out: %d %s", r.status, r.body)
	}
	// A browser gets a cookie, not the token.
	r = s.call("POST", "/v1/account/session", `{"api_key":"`+key+`"}`)
	if r.status != http.StatusCreated || !strings.Contains(r.header.Get("Set-Cookie"), "HttpOnly") || bytes.Contains(r.body, []byte(`"token"`)) {
		t.Errorf("a cookie session: %d %v %s", r.status, r.header, r.body)
	}
	s.noKeyInLogs(key, tok)
}

// TestAssembleGraphQLSession: the assembled server serves GraphQL to a browser's
// session cookie with its CSRF token, as the dashboard's explorer sends it, and
// refuses the cookie without the token; a key in a header still wins over the
// cookie; the dashboard offers the explorer and its cost endpoint.
func TestAssembleGraphQLSession(t *testing.T) {
	s := start(t)
	key := s.apiKey(1)
	r := s.call("POST", "/v1/account/session", `{"api_key":"`+key+`"}`)
	var env struct {
		Data struct {
			CSRF string `json:"csrf_token"`
		} `json:"data"`
	}
	if err := json.Unmarshal(r.body, &env); r.status != http.StatusCreated || err != nil || env.Data.CSRF == "" {
		t.Fatalf("starting a session: %d %s", r.status, r.body)
	}
	cookie := strings.Split(r.header.Get("Set-Cookie"), ";")[0]
	const q = `{"query":"{ hash(text: \"x\") { hash } }"}`
	if r := s.call("POST", "/v1/graphql", q, "Cookie", cookie, "X-CSRF-Token", env.Data.CSRF); r.status != 200 || r.header.Get("X-Credits-Cost") != "1" {
		t.Errorf("GraphQL with the cookie and its token: %d %v %s", r.status, r.header, r.body)
	}
	if r := s.call("POST", "/v1/graphql", q, "Cookie", cookie); r.status != http.StatusForbidden {
		t.Errorf("GraphQL with the cookie alone: %d %s", r.status, r.body)
	}
	if r := s.call("POST", "/v1/graphql", q, "Cookie", cookie, "x-api-key", "7c9e6679-7425-40de-944b-e07fc1f90ae7"); r.status != http.StatusUnauthorized {
		t.Errorf("GraphQL with the cookie and an unknown key: %d, want the key's 401 %s", r.status, r.body)
	}
	if r := s.call("POST", "/v1/graphql", q, "x-api-key", key); r.status != 200 {
		t.Errorf("GraphQL with the key: %d %s", r.status, r.body)
	}
	if r := s.call("GET", "/dashboard/graphql", "", "Cookie", cookie); r.status != 200 || !bytes.Contains(r.body, []byte(`data-cost="graphql/cost"`)) {
		t.Errorf("the explorer: %d", r.status)
	}
	r = s.call("POST", "/dashboard/graphql/cost", q, "Cookie", cookie, "X-CSRF-Token", env.Data.CSRF)
	if r.status != 200 || !bytes.Contains(r.body, []byte(`"credits":1`)) {
		t.Errorf("the cost of a query: %d %s", r.status, r.body)
	}
	s.noKeyInLogs(key)
}

// readAddresses reads what the server prints with -ops-addr until the line of the ops
// endpoints, and returns the API's address and the ops listener's (http://host:port).
func readAddresses(r io.Reader) (base, opsBase string, err error) {
	sc := bufio.NewScanner(r)
	for opsBase == "" && sc.Scan() {
		line := sc.Text()
		if addr, ok := strings.CutPrefix(line, "Listening on "); ok {
			base = addr
		} else if rest, ok := strings.CutPrefix(line, "Ops endpoints at "); ok {
			opsBase, _, _ = strings.Cut(rest, " ")
		}
	}
	return base, opsBase, sc.Err()
}

// TestRunOps runs the server with -ops-addr: the operators' listener answers /healthz
// and /readyz (200: the stores are in memory) and serves /metrics, the API's listener
// serves none of them, and both listeners close when the server shuts down.
func TestRunOps(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, []string{"-addr", "127.0.0.1:0", "-ops-addr", "127.0.0.1:0"}, pw, io.Discard)
		pw.Close()
		done <- err
	}()
	base, opsBase, err := readAddresses(pr)
	go io.Copy(io.Discard, pr)
	if base == "" || !strings.HasPrefix(opsBase, "http://127.0.0.1:") {
		cancel()
		t.Fatalf("run printed the API at %q and the ops endpoints at %q (scan error %v, run %v)", base, opsBase, err, <-done)
	}
	get := func(url string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), "GET", url, nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, strings.TrimSpace(string(b))
	}
	// The metrics: the scrape of package metrics, on the ops listener only.
	if code, body := get(opsBase + "/metrics"); code != http.StatusOK || !strings.Contains(body, "tollgate_settlements_total") ||
		!strings.Contains(body, "tollgate_mcp_sessions 0") || !strings.Contains(body, "tollgate_webhook_outbox_pending 0") {
		t.Errorf("GET /metrics on the ops listener: %d\n%s", code, body)
	}
	if code, body := get(base + "/metrics"); code == http.StatusOK && strings.Contains(body, "tollgate_") {
		t.Errorf("GET /metrics on the API's listener: %d; the metrics are on the ops listener only", code)
	}
	for path, want := range map[string]string{"/healthz": `{"status":"ok"}`, "/readyz": `{"status":"ready"}`} {
		if code, body := get(opsBase + path); code != http.StatusOK || body != want {
			t.Errorf("GET %s on the ops listener: %d %s, want 200 %s", path, code, body, want)
		}
		if code, body := get(base + path); code == http.StatusOK && strings.Contains(body, `"status"`) {
			t.Errorf("GET %s on the API's listener: %d %s; the probes are on the ops listener only", path, code, body)
		}
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run returned %v after the context was canceled, want nil", err)
	}
	for _, url := range []string{base, opsBase} {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", url+"/healthz", nil)
		if res, err := (&http.Client{Transport: &http.Transport{}}).Do(req); err == nil {
			res.Body.Close()
			t.Errorf("%s still answers after the shutdown: %s", url, res.Status)
		}
	}
}
