package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// A call is what the load generator sends to one server.
type call struct {
	url    string
	method string            // GET or POST
	body   string            // the POST body; for MCP, a tools/call whose id the generator sets
	header map[string]string // headers sent with every request
	// keys, when above 1, is the number of accounts: each request sends the key of one
	// picked at random (benchKey), rather than the fixed x-api-key of header.
	keys int
	// sessions are MCP session ids: the requests take them in turn, each with a
	// JSON-RPC id of its own.
	sessions []string
	// items, when above 1, is the number of calls one request makes (a batch's items):
	// the rates and the CPU per call count each of them.
	items int
}

// The protocol version the MCP calls are made with.
const mcpVersion = "2025-11-25"

// mcpCallBody is a tools/call of hash; %d is its JSON-RPC id.
const mcpCallBody = `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"hash","arguments":{"text":"hello"}}}`

// request returns the i-th request of the generator's connection conn.
func (c *call) request(conn, i int) *http.Request {
	var body io.Reader
	var payload string
	if c.body != "" {
		payload = c.body
		if c.sessions != nil {
			payload = fmt.Sprintf(mcpCallBody, i*1024+conn)
		}
		body = strings.NewReader(payload)
	}
	req, _ := http.NewRequest(c.method, c.url, body)
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	if c.keys > 1 {
		req.Header.Set("X-Api-Key", benchKey(int(rnd.next()%uint64(c.keys))))
	}
	if c.sessions != nil {
		req.Header.Set("Mcp-Session-Id", c.sessions[(i+conn)%len(c.sessions)])
	}
	return req
}

// rnd is a cheap, goroutine-safe pseudo-random sequence for picking keys.
var rnd = &splitmix{}

type splitmix struct{ n atomic.Uint64 }

func (s *splitmix) next() uint64 {
	z := s.n.Add(0x9e3779b97f4a7c15)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// check makes one call and fails unless the server answers it as a success.
func (c *call) check() error {
	resp, err := http.DefaultClient.Do(c.request(0, 0))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || bytes.Contains(body, []byte(`"isError":true`)) || bytes.Contains(body, []byte(`"errors"`)) {
		return fmt.Errorf("%s answered %s: %.300s", c.url, resp.Status, body)
	}
	return nil
}

// openMCPSessions opens n MCP sessions (initialize, then notifications/initialized) and
// returns their ids.
func openMCPSessions(url string, header map[string]string, n int) ([]string, error) {
	post := func(body, session string) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		for k, v := range header {
			req.Header.Set(k, v)
		}
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		return http.DefaultClient.Do(req)
	}
	var ids []string
	for range n {
		resp, err := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+mcpVersion+`","capabilities":{},"clientInfo":{"name":"restbench","version":"1"}}}`, "")
		if err != nil {
			return nil, err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		id := resp.Header.Get("Mcp-Session-Id")
		if resp.StatusCode != http.StatusOK || id == "" {
			return nil, fmt.Errorf("initialize: %s %.300s", resp.Status, body)
		}
		resp, err = post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, id)
		if err != nil {
			return nil, err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			return nil, fmt.Errorf("notifications/initialized: %s", resp.Status)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// A generator drives a server for a while and returns the completed calls per second.
type generator interface {
	drive(c *call, dur time.Duration) (float64, error)
	cpu() float64 // the generator's CPU time so far, in microseconds
}

// wrkGen drives with wrk, -t threads and -c connections.
type wrkGen struct{ threads, conns int }

func (g wrkGen) cpu() float64 { return childrenCPU() }

var wrkRate = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)

func (g wrkGen) drive(c *call, dur time.Duration) (float64, error) {
	args := []string{"-t" + strconv.Itoa(g.threads), "-c" + strconv.Itoa(g.conns), "-d" + strconv.Itoa(int(dur.Seconds())) + "s"}
	for k, v := range c.header {
		if k == "X-Api-Key" && c.keys > 1 {
			continue // the script picks one per request
		}
		args = append(args, "-H", k+": "+v)
	}
	if script := c.wrkScript(); script != "" {
		f, err := os.CreateTemp("", "restbench-*.lua")
		if err != nil {
			return 0, err
		}
		defer os.Remove(f.Name())
		f.WriteString(script)
		f.Close()
		args = append(args, "-s", f.Name())
	}
	out, err := exec.Command("wrk", append(args, c.url)...).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("wrk: %v\n%s", err, out)
	}
	m := wrkRate.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("wrk printed no rate:\n%s", out)
	}
	if bytes.Contains(out, []byte("Non-2xx")) || bytes.Contains(out, []byte("Socket errors")) {
		return 0, fmt.Errorf("wrk saw failed calls:\n%s", out)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

// wrkScript returns the Lua script that makes wrk send c's requests, or "" when the
// command line says it all (a GET with fixed headers).
func (c *call) wrkScript() string {
	var b strings.Builder
	if c.method == http.MethodPost {
		fmt.Fprintf(&b, "wrk.method = \"POST\"\nwrk.body = %q\n", c.body)
	}
	if c.keys <= 1 && c.sessions == nil {
		return b.String()
	}
	// Threads number themselves in setup, so that their JSON-RPC ids differ.
	b.WriteString("local threads = 0\nfunction setup(thread) thread:set(\"tid\", threads); threads = threads + 1 end\n")
	b.WriteString("local n = 0\nfunction init(args) math.randomseed(os.time() * 1000 + (tid or 0)) end\n")
	if c.sessions != nil {
		b.WriteString("local sessions = {")
		for i, s := range c.sessions {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%q", s)
		}
		b.WriteString("}\n")
	}
	b.WriteString("function request()\n  n = n + 1\n  local h = wrk.headers\n")
	if c.keys > 1 {
		fmt.Fprintf(&b, "  h[\"X-Api-Key\"] = string.format(\"00000000-0000-4000-8000-%%012x\", math.random(0, %d))\n", c.keys-1)
	}
	body := "nil"
	if c.sessions != nil {
		b.WriteString("  h[\"Mcp-Session-Id\"] = sessions[(n % #sessions) + 1]\n")
		fmt.Fprintf(&b, "  local body = string.format(%q, n * 64 + tid)\n", mcpCallBody)
		body = "body"
	}
	fmt.Fprintf(&b, "  return wrk.format(nil, nil, h, %s)\nend\n", body)
	return b.String()
}

// goGen drives with conns goroutines, each on a keep-alive connection of its own.
type goGen struct{ conns int }

func (g goGen) cpu() float64 { return selfCPU() }

func (g goGen) drive(c *call, dur time.Duration) (float64, error) {
	tr := &http.Transport{MaxIdleConnsPerHost: g.conns, MaxConnsPerHost: g.conns}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	var done, failed atomic.Int64
	var firstErr atomic.Value
	deadline := time.Now().Add(dur)
	var wg sync.WaitGroup
	for conn := range g.conns {
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline); i++ {
				resp, err := hc.Do(c.request(conn, i))
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, resp.Status)
					continue
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		return 0, fmt.Errorf("%d calls to %s failed, the first with %v", n, c.url, firstErr.Load())
	}
	return float64(done.Load()) / dur.Seconds(), nil
}
