package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// The keys of the accounts of promFixtures.
const (
	promAcme     = "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b" // plan pro, 1000 credits
	promHashOnly = "6fa459ea-ee8a-4ca4-894e-db77e160355e" // a key of acme that may call hash only
	promTrickle  = "9b2f4c1e-3d5a-4e6b-8c7d-0e1f2a3b4c5d" // one call a minute
	promBroke    = "c0ffee00-1234-4abc-9def-0123456789ab" // no credits
)

// promFixtures are the plans and accounts the server of TestPrometheus loads: one
// account per refusal the test provokes.
const promFixtures = `{
  "plans": [
    {"name": "pro", "credits": 1000, "rate_per_minute": 600, "concurrency": 10, "graphql_max_apis": 10, "batch_max_items": 100},
    {"name": "trickle", "credits": 1000, "rate_per_minute": 1, "concurrency": 1, "graphql_max_apis": 1, "batch_max_items": 10}
  ],
  "accounts": [
    {"id": "acme", "plan": "pro", "credits": 1000, "keys": [
      {"name": "primary", "value": "` + promAcme + `", "primary": true},
      {"name": "hash only", "value": "` + promHashOnly + `", "apis": ["hash"]}]},
    {"id": "trickle", "plan": "trickle", "keys": [{"name": "primary", "value": "` + promTrickle + `", "primary": true}]},
    {"id": "broke", "plan": "pro", "credits": 0, "keys": [{"name": "primary", "value": "` + promBroke + `", "primary": true}]}
  ]
}`

// TestPrometheus runs the example server as a process with -ops-addr and a real
// Prometheus (the Debian package's /usr/bin/prometheus) scraping its /metrics every
// second, makes known calls through every door (paid REST calls, a refusal for each of
// four causes, a batch with an invalid item, a GraphQL query of two APIs, an MCP tool
// call), and checks through Prometheus's query API that the counters are what was sent,
// then that every query of the Grafana dashboard (docs/grafana/tollgate.json) returns
// data. It skips when prometheus is not installed, and fails for that in CI
// (scripts/test.sh installs it).
func TestPrometheus(t *testing.T) {
	promBin := testenv.Program(t, "prometheus")
	goBin := testenv.Program(t, "go")
	dir := t.TempDir()

	// The server, built from this package.
	bin := filepath.Join(dir, "server")
	if out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	fixtures := filepath.Join(dir, "fixtures.json")
	if err := os.WriteFile(fixtures, []byte(promFixtures), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, stdout := startProcess(t, "server", dir, bin, "-addr", "127.0.0.1:0", "-ops-addr", "127.0.0.1:0", "-fixtures", fixtures)
	base, opsBase, err := readAddresses(stdout)
	go io.Copy(io.Discard, stdout)
	if base == "" || opsBase == "" {
		t.Fatalf("the server printed the API at %q and the ops endpoints at %q (scan error %v)\n%s", base, opsBase, err, srv.logs())
	}

	// Prometheus, scraping the ops listener every second.
	promAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	config := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(config, []byte(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: tollgate
    static_configs:
      - targets: ['`+strings.TrimPrefix(opsBase, "http://")+`']
`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, promOut := startProcess(t, "prometheus", dir, promBin, "--config.file="+config,
		"--storage.tsdb.path="+filepath.Join(dir, "tsdb"), "--web.listen-address="+promAddr)
	go io.Copy(io.Discard, promOut)
	q := &promQuery{t: t, base: "http://" + promAddr}
	q.waitReady()

	// The calls, as metrics.TestThroughService makes them.
	c := &promClient{t: t, base: base}
	for range 3 {
		c.do("GET", "/v1/hash?text=a", promAcme, "", http.StatusOK)
	}
	c.do("GET", "/v1/hash?text=a", promTrickle, "", http.StatusOK)
	c.do("GET", "/v1/hash?text=a", promTrickle, "", http.StatusTooManyRequests) // rate_limited
	c.do("GET", "/v1/hash?text=a", promBroke, "", http.StatusTooManyRequests)   // credits_exhausted
	c.do("GET", "/v1/date-info?date=2024-02-29", promHashOnly, "", http.StatusForbidden)
	c.do("GET", "/v1/hash", promAcme, "", http.StatusBadRequest) // invalid_input: no text
	c.do("POST", "/v1/hash/batch", promAcme, `{"items":[{"text":"a"},{"text":"b"},{}]}`, http.StatusOK)
	c.do("POST", "/v1/graphql", promAcme,
		`{"query":"{ hash(text: \"x\") { hash } dateinfo(date: \"2024-02-29\") { day_of_week } }"}`, http.StatusOK)
	c.mcpToolCall(promAcme)
	lastCall := time.Now()

	// Prometheus's view, once a scrape after the last call shows every call.
	want := map[string][]string{
		"tollgate_calls_total": {
			`{api="date-info",channel="graphql",outcome="ok"} 1`,
			`{api="hash",channel="batch",outcome="ok"} 2`,
			`{api="hash",channel="graphql",outcome="ok"} 1`,
			`{api="hash",channel="mcp",outcome="ok"} 1`,
			`{api="hash",channel="rest",outcome="ok"} 4`,
		},
		"tollgate_refusals_total": {
			`{api="date-info",channel="rest",code="forbidden"} 1`,
			`{api="hash",channel="batch",code="invalid_input"} 1`,
			`{api="hash",channel="rest",code="credits_exhausted"} 1`,
			`{api="hash",channel="rest",code="invalid_input"} 1`,
			`{api="hash",channel="rest",code="rate_limited"} 1`,
		},
		"tollgate_credits_charged_total": {
			`{api="date-info"} 1`,
			`{api="hash"} 8`,
		},
		"tollgate_settlements_total": {
			`{settlement="deferred"} 0`,
			`{settlement="settled"} 7`,
			`{settlement="unsettled"} 0`,
			`{settlement="voided"} 0`,
		},
		// One observation of each phase per call that ran.
		`sum by (channel, phase) (tollgate_call_phase_duration_seconds_count)`: {
			`{channel="batch",phase="admission"} 1`, `{channel="batch",phase="handler"} 1`, `{channel="batch",phase="settlement"} 1`,
			`{channel="graphql",phase="admission"} 1`, `{channel="graphql",phase="handler"} 1`, `{channel="graphql",phase="settlement"} 1`,
			`{channel="mcp",phase="admission"} 1`, `{channel="mcp",phase="handler"} 1`, `{channel="mcp",phase="settlement"} 1`,
			`{channel="rest",phase="admission"} 4`, `{channel="rest",phase="handler"} 4`, `{channel="rest",phase="settlement"} 4`,
		},
		// The memory ledger: a reservation per call admitted and the one refused for its
		// credits, a settlement per call that ran.
		`tollgate_store_operation_duration_seconds_count{store="memory",operation=~"reserve|settle"}`: {
			`{operation="reserve",store="memory"} 8`,
			`{operation="settle",store="memory"} 7`,
		},
		// The stores outside the calls are decorated too: the audit log appended the
		// changes of the fixtures' accounts, the deliverer polls the outbox.
		`group by (operation) (tollgate_store_operation_duration_seconds_count{store="memory",operation=~"audit_append|webhook_claim"})`: {
			`{operation="audit_append"} 1`, `{operation="webhook_claim"} 1`,
		},
		"tollgate_store_errors_total":     nil,
		"tollgate_mcp_sessions":           {`{} 1`},
		"tollgate_pending_settlements":    {`{} 0`},
		"tollgate_usage_dropped_total":    {`{} 0`},
		"tollgate_audit_dropped_total":    {`{} 0`},
		"tollgate_webhook_outbox_pending": {`{} 0`},
	}
	queries := slices.Sorted(func(yield func(string) bool) {
		for k := range want {
			if !yield(k) {
				return
			}
		}
	})
	var got map[string][]string
	q.poll("the counters of the calls", func() (bool, string) {
		// A scrape after the last call: the samples' own time.
		scraped := q.vector("max(timestamp(tollgate_settlements_total))")
		if len(scraped) == 0 || scraped[0].at().Before(lastCall) {
			return false, "no scrape since the last call"
		}
		got = map[string][]string{}
		var diff []string
		for _, query := range queries {
			got[query] = series(q.vector(query))
			if !slices.Equal(got[query], want[query]) {
				diff = append(diff, fmt.Sprintf("%s:\n  got  %q\n  want %q", query, got[query], want[query]))
			}
		}
		return len(diff) == 0, strings.Join(diff, "\n")
	})

	// Every query of the dashboard returns data: rates once two scrapes hold the
	// series, over a minute.
	panels := dashboardQueries(t)
	if len(panels) < 20 {
		t.Fatalf("the dashboard has %d queries, want its 30 or so", len(panels))
	}
	replacer := strings.NewReplacer("$__rate_interval", "1m", "$instance", ".*", "$api", ".*")
	for _, p := range panels {
		query := replacer.Replace(p.expr)
		if strings.Contains(query, "$") {
			t.Errorf("panel %q: a variable left in %s", p.title, query)
			continue
		}
		q.poll(fmt.Sprintf("panel %q: %s", p.title, query), func() (bool, string) {
			r := q.vector(query)
			return len(r) > 0, fmt.Sprintf("no data: %v", r)
		})
	}
	t.Logf("%d dashboard queries return data", len(panels))
}

// A process is a program the test started, which its cleanup stops.
type process struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
}

func (p *process) logs() string { return p.stderr.String() }

// startProcess starts bin with args in dir and returns it with its standard output;
// the test's cleanup stops it (SIGTERM, then SIGKILL after 30 seconds) and waits for
// it.
func startProcess(t *testing.T, name, dir, bin string, args ...string) (*process, io.Reader) {
	t.Helper()
	p := &process{cmd: exec.Command(bin, args...), stderr: &syncBuffer{}}
	p.cmd.Dir = dir
	p.cmd.Stderr = p.stderr
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- p.cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Logf("%s exited: %v", name, err)
			}
		case <-time.After(30 * time.Second):
			p.cmd.Process.Kill()
			<-done
			t.Errorf("%s did not stop within 30s of SIGTERM: killed", name)
		}
		if t.Failed() {
			t.Logf("%s's standard error:\n%s", name, p.logs())
		}
	})
	return p, stdout
}

// promClient makes the calls of TestPrometheus.
type promClient struct {
	t    *testing.T
	base string
}

// send sends a request with the key and returns the answer.
func (c *promClient) send(method, path, key, body string, hdr ...string) (*http.Response, []byte) {
	c.t.Helper()
	req, err := http.NewRequestWithContext(c.t.Context(), method, c.base+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("x-api-key", key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return res, b
}

// do sends a request and checks its status.
func (c *promClient) do(method, path, key, body string, status int) {
	c.t.Helper()
	if res, b := c.send(method, path, key, body); res.StatusCode != status {
		c.t.Fatalf("%s %s: %d %s, want %d", method, path, res.StatusCode, b, status)
	}
}

// mcpToolCall opens an MCP session with the key, left open, and calls the hash tool.
func (c *promClient) mcpToolCall(key string) {
	c.t.Helper()
	accept := []string{"Accept", "application/json, text/event-stream"}
	res, b := c.send("POST", "/v1/mcp", key, mcpInitialize, accept...)
	session := res.Header.Get("Mcp-Session-Id")
	if res.StatusCode != http.StatusOK || session == "" {
		c.t.Fatalf("MCP initialize: %d %s", res.StatusCode, b)
	}
	hdr := append(accept, "Mcp-Session-Id", session)
	c.send("POST", "/v1/mcp", key, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, hdr...)
	res, b = c.send("POST", "/v1/mcp", key, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hash","arguments":{"text":"a"}}}`, hdr...)
	var call struct {
		Result struct{ IsError bool }
		Error  any
	}
	if err := json.Unmarshal(b, &call); err != nil || res.StatusCode != http.StatusOK || call.Error != nil || call.Result.IsError {
		c.t.Fatalf("MCP tools/call hash: %d %s", res.StatusCode, b)
	}
}

// promQuery asks Prometheus's HTTP API.
type promQuery struct {
	t    *testing.T
	base string
}

// sample is one series of an instant vector.
type sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"` // [unix time, "value"]
}

// at returns the sample's time (for a timestamp() query, its value).
func (s sample) at() time.Time {
	v, _ := strconv.ParseFloat(s.value(), 64)
	return time.UnixMilli(int64(v * 1000))
}

func (s sample) value() string { v, _ := s.Value[1].(string); return v }

// waitReady polls /-/ready until Prometheus answers 200.
func (q *promQuery) waitReady() {
	q.poll("Prometheus ready", func() (bool, string) {
		res, err := http.Get(q.base + "/-/ready")
		if err != nil {
			return false, err.Error()
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK, res.Status
	})
}

// vector runs an instant query, failing the test if Prometheus refuses it.
func (q *promQuery) vector(query string) []sample {
	q.t.Helper()
	res, err := http.PostForm(q.base+"/api/v1/query", url.Values{"query": {query}})
	if err != nil {
		q.t.Fatalf("query %s: %v", query, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var env struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string   `json:"resultType"`
			Result     []sample `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &env); err != nil || env.Status != "success" || env.Data.ResultType != "vector" {
		q.t.Fatalf("query %s: %d %s", query, res.StatusCode, b)
	}
	return env.Data.Result
}

// poll calls check until it reports done, failing the test with what it last said
// after a generous deadline: the machine may be busy, and no time is asserted.
func (q *promQuery) poll(what string, check func() (done bool, state string)) {
	q.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		done, state := check()
		if done {
			return
		}
		if time.Now().After(deadline) {
			q.t.Fatalf("%s: not after 90s: %s", what, state) // the cleanup logs the processes' stderr
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// series returns the samples as `{label="value",...} value`, without the labels
// Prometheus adds (instance, job), in order.
func series(samples []sample) []string {
	var out []string
	for _, s := range samples {
		var labels []string
		for k, v := range s.Metric {
			if k != "__name__" && k != "instance" && k != "job" {
				labels = append(labels, fmt.Sprintf("%s=%q", k, v))
			}
		}
		sort.Strings(labels)
		out = append(out, "{"+strings.Join(labels, ",")+"} "+s.value())
	}
	sort.Strings(out)
	return out
}

// panelQuery is a query of a panel of the dashboard.
type panelQuery struct{ title, expr string }

// dashboardQueries returns the queries of every panel of docs/grafana/tollgate.json,
// those of the panels in rows too.
func dashboardQueries(t *testing.T) []panelQuery {
	t.Helper()
	b, err := os.ReadFile("../../docs/grafana/tollgate.json")
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Title   string
		Targets []struct{ Expr string }
		Panels  []json.RawMessage
	}
	var d struct{ Panels []json.RawMessage }
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	var out []panelQuery
	var walk func([]json.RawMessage)
	walk = func(raw []json.RawMessage) {
		for _, r := range raw {
			var p panel
			if err := json.Unmarshal(r, &p); err != nil {
				t.Fatal(err)
			}
			for _, tg := range p.Targets {
				if tg.Expr != "" {
					out = append(out, panelQuery{p.Title, tg.Expr})
				}
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	if len(out) == 0 {
		t.Fatalf("no query in the dashboard: %s", bytes.TrimSpace(b[:min(len(b), 200)]))
	}
	return out
}
