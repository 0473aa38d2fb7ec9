package mcp_test

// Benchmarks of tool calls over loopback, with the official Go SDK's client. Run them
// with
//
//	go test -run='^$' -bench=ToolCall -benchtime=5s -count=3 ./mcp/
//
// The server runs in a child process (this test binary, started again with
// TOLLGATE_MCP_BENCH_SERVER=1), so that its CPU time can be told from the client's:
// besides ns/op, each benchmark reports calls/s and server-cpu-µs/call, the CPU time
// (user and system, GC included) the server process spent per call, read from the
// child before and after the loop. The call is hash {"text": "hello"} with an API key
// in x-api-key: authentication, validation, admission and settlement on memory stores,
// for an account whose plan has no rate or concurrency limit.
//
//   - serial: one session, one call at a time (latency-bound);
//   - parallel: GOMAXPROCS sessions calling at once (throughput).

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/examples/apis"
	"github.com/tollgate-dev/tollgate/internal/baremcp"
	"github.com/tollgate-dev/tollgate/mcp"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// benchServerEnv makes this test binary serve the benchmark's server instead of
// running tests.
const benchServerEnv = "TOLLGATE_MCP_BENCH_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(benchServerEnv) != "" {
		if err := serveBench(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	os.Exit(m.Run())
}

// serveBench serves the sample catalog on a loopback port, prints its URL and key on
// one line, and serves until its standard input closes. GET /cpu answers with the
// process's CPU time in nanoseconds.
func serveBench() error {
	reg := &catalog.Registry{}
	if err := apis.Register(reg); err != nil {
		return err
	}
	plans, err := billing.NewPlans(billing.Plan{Name: "bench", Credits: 1 << 40})
	if err != nil {
		return err
	}
	stores := tollgate.Stores{
		Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
		Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter(),
	}
	svc, err := tollgate.New(reg, stores, plans, &tollgate.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	mgr, err := accounts.New(svc, &accounts.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer mgr.Close()
	_, _, key, err := mgr.CreateAccount(context.Background(), accounts.Spec{Plan: "bench"})
	if err != nil {
		return err
	}
	h, err := mcp.NewHandler(svc, &mcp.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle(path, h)
	mux.HandleFunc("/cpu", func(w http.ResponseWriter, _ *http.Request) {
		cpu, _ := cpuTime()
		fmt.Fprint(w, cpu.Nanoseconds())
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	fmt.Printf("http://%s %s\n", ln.Addr(), key)
	io.Copy(io.Discard, os.Stdin)
	h.Close()
	return srv.Close()
}

// benchServer starts the server process and returns its base URL and key.
func benchServer(b *testing.B) (base, key string) {
	b.Helper()
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), benchServerEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("the server process: %v", err)
	}
	base, key, _ = strings.Cut(strings.TrimSpace(line), " ")
	return base, key
}

// serverCPU reads the server process's CPU time.
func serverCPU(b *testing.B, base string) time.Duration {
	resp, err := http.Get(base + "/cpu")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	ns, err := strconv.ParseInt(string(body), 10, 64)
	if err != nil {
		b.Fatalf("/cpu: %q", body)
	}
	return time.Duration(ns)
}

// benchSession connects a go-sdk client session with the key.
func benchSession(b *testing.B, url, key string, tr *http.Transport) *sdk.ClientSession {
	client := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &sdk.StreamableClientTransport{
		Endpoint: url, HTTPClient: &http.Client{Transport: headerTransport{tr, keyHeader(key)}}, DisableStandaloneSSE: true,
	}, nil)
	if err != nil {
		b.Fatal(err)
	}
	return cs
}

var benchArgs = map[string]any{"text": "hello"}

func benchCall(cs *sdk.ClientSession) error {
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "hash", Arguments: benchArgs})
	if err != nil {
		return err
	}
	if res.IsError {
		return fmt.Errorf("the call failed: %v", res.Content)
	}
	return nil
}

func BenchmarkToolCall(b *testing.B) {
	base, key := benchServer(b)
	url := base + path
	tr := &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024}
	defer tr.CloseIdleConnections()
	report := func(b *testing.B, cpu0 time.Duration) {
		cpu := serverCPU(b, base) - cpu0
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
		b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "server-cpu-µs/call")
	}

	b.Run("serial", func(b *testing.B) {
		cs := benchSession(b, url, key, tr)
		defer cs.Close()
		if err := benchCall(cs); err != nil { // warm up
			b.Fatal(err)
		}
		cpu0 := serverCPU(b, base)
		b.ResetTimer()
		for b.Loop() {
			if err := benchCall(cs); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		report(b, cpu0)
	})

	b.Run("parallel", func(b *testing.B) {
		var failed atomic.Value
		cpu0 := serverCPU(b, base)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			cs := benchSession(b, url, key, tr)
			defer cs.Close()
			for pb.Next() {
				if err := benchCall(cs); err != nil {
					failed.Store(err)
					return
				}
			}
		})
		b.StopTimer()
		if err, _ := failed.Load().(error); err != nil {
			b.Fatal(err)
		}
		report(b, cpu0)
	})
}

// BenchmarkToolCallInProcess measures a tool call with client and server in this
// process, for allocations: one session over loopback, one call at a time.
func BenchmarkToolCallInProcess(b *testing.B) {
	h := newHarness(b, config{sampleOnly: true, mcp: mcp.Options{}})
	_, key := h.newAccount(b, "bench", "open")
	// A balance that lasts the benchmark.
	if _, err := h.mgr.AdjustCredits(context.Background(), "bench", 1<<40, "benchmark", nil); err != nil {
		b.Fatal(err)
	}
	cs := benchSession(b, h.url, key, h.srv.Client().Transport.(*http.Transport))
	defer cs.Close()
	b.ReportAllocs()
	cpu0, cpuOK := cpuTime()
	for b.Loop() {
		if err := benchCall(cs); err != nil {
			b.Fatal(err)
		}
	}
	if cpu1, ok := cpuTime(); ok && cpuOK {
		b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(b.N), "process-cpu-µs/call")
	}
}

// BenchmarkToolCallServer measures the server's side of a tool call alone, for
// allocations and instruction counts: the handler's ServeHTTP, called directly with a
// recorder, on a session initialized beforehand. bare is the go-sdk's Streamable HTTP
// handler over a server with the same tool, registered with Server.AddTool (no schema
// check per call) and answering with text only, as a hand-written server would
// (package baremcp, restbench's baseline too);
// tollgate is the MCP handler in front of the service.
func BenchmarkToolCallServer(b *testing.B) {
	const body = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"hash","arguments":{"text":"hello"}}}`
	run := func(b *testing.B, h http.Handler, hdr http.Header) {
		hdr = hdr.Clone()
		hdr.Set("Content-Type", "application/json")
		hdr.Set("Accept", "application/json, text/event-stream")
		post := func(body string) *httptest.ResponseRecorder {
			req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
			req.Header = hdr.Clone()
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			return w
		}
		w := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
		if w.Code != http.StatusOK {
			b.Fatalf("initialize: %d %s", w.Code, w.Body)
		}
		hdr.Set("Mcp-Session-Id", w.Header().Get("Mcp-Session-Id"))
		hdr.Set("Mcp-Protocol-Version", "2025-11-25")
		if w := post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); w.Code != http.StatusAccepted {
			b.Fatalf("initialized: %d %s", w.Code, w.Body)
		}
		if w := post(body); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824") {
			b.Fatalf("tools/call: %d %s", w.Code, w.Body)
		}
		u, err := neturl.Parse(path)
		if err != nil {
			b.Fatal(err)
		}
		rd := strings.NewReader(body)
		b.ReportAllocs()
		for b.Loop() {
			rd.Reset(body)
			req := &http.Request{Method: http.MethodPost, URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
				Header: hdr, Body: io.NopCloser(rd), ContentLength: int64(len(body)), Host: "localhost", RemoteAddr: "127.0.0.1:1234"}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != http.StatusOK {
				b.Fatalf("tools/call: %d %s", w.Code, w.Body)
			}
		}
	}
	b.Run("bare", func(b *testing.B) {
		run(b, baremcp.Handler(), http.Header{})
	})
	b.Run("tollgate", func(b *testing.B) {
		h := newHarness(b, config{sampleOnly: true, noHTTP: true})
		_, key := h.newAccount(b, "bench", "open")
		if _, err := h.mgr.AdjustCredits(context.Background(), "bench", 1<<40, "benchmark", nil); err != nil {
			b.Fatal(err)
		}
		run(b, h.handler, keyHeader(key))
	})
}
