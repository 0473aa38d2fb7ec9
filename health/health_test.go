package health_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tollgate-dev/tollgate/health"
)

// fake is a store whose ping the test scripts.
type fake struct {
	mu    sync.Mutex
	err   error         // what Ping returns
	gate  chan struct{} // when not nil, Ping waits for it to close (or for ctx)
	deaf  bool          // with gate: Ping ignores ctx and waits for the gate alone
	panic bool
	calls int
}

func (f *fake) Ping(ctx context.Context) error {
	f.mu.Lock()
	f.calls++
	gate, deaf, err, p := f.gate, f.deaf, f.err, f.panic
	f.mu.Unlock()
	if p {
		panic("the store's driver is broken")
	}
	if gate != nil {
		if deaf {
			<-gate
		} else {
			select {
			case <-gate:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return err
}

func (f *fake) set(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func (f *fake) pings() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// answer is a decoded answer of a handler.
type answer struct {
	code int
	hdr  http.Header
	body struct {
		Status      string
		Unreachable []string
		Message     string
	}
	raw string
}

func serve(t *testing.T, h http.Handler, method string) answer {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), method, "/", nil))
	a := answer{code: rec.Code, hdr: rec.Header(), raw: rec.Body.String()}
	if method != http.MethodHead {
		if err := json.Unmarshal(rec.Body.Bytes(), &a.body); err != nil {
			t.Fatalf("%s: the body %q is not JSON: %v", method, a.raw, err)
		}
	}
	return a
}

func newChecker(t *testing.T, stores []health.Store, opts *health.Options) *health.Checker {
	t.Helper()
	c, err := health.New(stores, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestNewRefuses(t *testing.T) {
	ok := &fake{}
	var nilFake *fake
	tests := []struct {
		name    string
		stores  []health.Store
		opts    *health.Options
		wantErr string
	}{
		{"empty role", []health.Store{{Role: "", Pinger: ok}}, nil, "1 to 64 bytes"},
		{"long role", []health.Store{{Role: strings.Repeat("k", health.MaxRole+1), Pinger: ok}}, nil, "1 to 64 bytes"},
		{"role not ASCII", []health.Store{{Role: "clés", Pinger: ok}}, nil, "ASCII letters"},
		{"role with a newline", []health.Store{{Role: "keys\nledger", Pinger: ok}}, nil, "ASCII letters"},
		{"role twice", []health.Store{{Role: "keys", Pinger: ok}, {Role: "keys", Pinger: &fake{}}}, nil, `two stores have the role "keys"`},
		{"nil store", []health.Store{{Role: "keys"}}, nil, `"keys" is nil`},
		{"nil pointer", []health.Store{{Role: "keys", Pinger: nilFake}}, nil, `"keys" is nil`},
		{"negative timeout", nil, &health.Options{Timeout: -time.Second}, "Options.Timeout"},
		{"negative cache", nil, &health.Options{CacheFor: -time.Second}, "Options.CacheFor"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := health.New(tt.stores, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.HasPrefix(err.Error(), "health: ") {
				t.Errorf("New: %v, want an error beginning with health: and saying %s", err, tt.wantErr)
			}
		})
	}
	if _, err := health.New([]health.Store{{Role: "Keys and credits/v2.1_x-y", Pinger: ok}}, nil); err != nil {
		t.Errorf("a role of every allowed character: %v", err)
	}
}

// TestLive checks the liveness handler: 200 to GET and HEAD whatever the stores say, 405
// to anything else.
func TestLive(t *testing.T) {
	down := &fake{err: errors.New("connection refused")}
	c := newChecker(t, []health.Store{{Role: "keys", Pinger: down}}, &health.Options{Logger: quiet()})
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		a := serve(t, c.Live(), method)
		if a.code != http.StatusOK || method == http.MethodGet && a.body.Status != "ok" {
			t.Errorf("%s /healthz: %d %s, want 200 {\"status\":\"ok\"}", method, a.code, a.raw)
		}
		if a.hdr.Get("Content-Type") != "application/json" || a.hdr.Get("Cache-Control") != "no-store" {
			t.Errorf("%s /healthz: headers %v", method, a.hdr)
		}
	}
	for _, h := range []http.Handler{c.Live(), c.Ready()} {
		a := serve(t, h, http.MethodPost)
		if a.code != http.StatusMethodNotAllowed || a.hdr.Get("Allow") != "GET, HEAD" {
			t.Errorf("POST: %d, Allow %q, want 405 and GET, HEAD", a.code, a.hdr.Get("Allow"))
		}
	}
	if n := down.pings(); n != 0 {
		t.Errorf("the liveness handler pinged the store %d times, want never", n)
	}
}

// TestReady checks the readiness answers: 200 when every store answers, else 503
// naming, by their roles, the stores that did not (a store's error, a panic, a ping
// past the timeout, whether or not it heeds its context), in the order given, and
// nothing of the errors.
func TestReady(t *testing.T) {
	const secret = "dial tcp 10.1.2.3:5432: connection refused"
	tests := []struct {
		name string
		// keys, ledger and rates are the stores of roles "keys", "ledger" and
		// "rates"; a nil ledger or rates means keys plays that role too.
		keys, ledger, rates *fake
		want                []string // the unreachable roles; none for 200
	}{
		{"all reachable", &fake{}, &fake{}, &fake{}, nil},
		{"one down", &fake{}, &fake{err: errors.New(secret)}, &fake{}, []string{"ledger"}},
		{"two down", &fake{err: errors.New(secret)}, &fake{}, &fake{err: errors.New(secret)}, []string{"keys", "rates"}},
		{"a store in two roles", &fake{err: errors.New(secret)}, nil, &fake{}, []string{"keys", "ledger"}},
		{"a store in three roles", &fake{err: errors.New(secret)}, nil, nil, []string{"keys", "ledger", "rates"}},
		{"a store in two roles apart", &fake{err: errors.New(secret)}, &fake{err: errors.New(secret)}, nil, []string{"keys", "ledger", "rates"}},
		{"a panic", &fake{}, &fake{panic: true}, &fake{}, []string{"ledger"}},
		{"no answer", &fake{}, &fake{}, &fake{gate: make(chan struct{})}, []string{"rates"}},
		{"no answer, deaf to its context", &fake{gate: make(chan struct{}), deaf: true}, &fake{}, &fake{}, []string{"keys"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				for _, f := range []*fake{tt.keys, tt.ledger, tt.rates} {
					if f != nil && f.gate != nil {
						f.gate = make(chan struct{}) // in the bubble, so that a wait on it is durable
					}
				}
				stores := []health.Store{{Role: "keys", Pinger: tt.keys}}
				ledger, rates := health.Pinger(tt.keys), health.Pinger(tt.keys)
				if tt.ledger != nil {
					ledger = tt.ledger
				}
				if tt.rates != nil {
					rates = tt.rates
				}
				stores = append(stores, health.Store{Role: "ledger", Pinger: ledger}, health.Store{Role: "rates", Pinger: rates})
				c := newChecker(t, stores, &health.Options{Logger: quiet()})

				start := time.Now()
				a := serve(t, c.Ready(), http.MethodGet)
				took := time.Since(start)
				if tt.want == nil {
					if a.code != http.StatusOK || a.body.Status != "ready" || a.body.Unreachable != nil || a.body.Message != "" {
						t.Errorf("GET /readyz: %d %s, want 200 {\"status\":\"ready\"}", a.code, a.raw)
					}
				} else {
					if a.code != http.StatusServiceUnavailable || a.body.Status != "unavailable" || !slices.Equal(a.body.Unreachable, tt.want) {
						t.Errorf("GET /readyz: %d %s, want 503 naming %v", a.code, a.raw, tt.want)
					}
					for _, role := range tt.want {
						if !strings.Contains(a.body.Message, role) {
							t.Errorf("the message %q does not name %s", a.body.Message, role)
						}
					}
				}
				if strings.Contains(a.raw, "10.1.2.3") || strings.Contains(a.raw, "refused") || strings.Contains(a.raw, "driver") {
					t.Errorf("the answer tells a store's error: %s", a.raw)
				}
				if a.hdr.Get("Content-Type") != "application/json" || a.hdr.Get("Cache-Control") != "no-store" {
					t.Errorf("headers %v", a.hdr)
				}
				// In the bubble the time is exact: pings that answer take none, and
				// one that does not is given up at the timeout.
				if want := time.Duration(0); tt.name == "no answer" || strings.HasPrefix(tt.name, "no answer,") {
					if took != health.DefaultTimeout {
						t.Errorf("the answer took %v, want the timeout, %v", took, health.DefaultTimeout)
					}
				} else if took != want {
					t.Errorf("the answer took %v, want no time", took)
				}
				for _, f := range []*fake{tt.keys, tt.ledger, tt.rates} {
					if f == nil {
						continue
					}
					if n := f.pings(); n != 1 {
						t.Errorf("a store was pinged %d times by one check, want once", n)
					}
					if f.gate != nil {
						close(f.gate) // let the deaf ping return before the bubble ends
					}
				}
			})
		})
	}
}

// TestHead checks that HEAD /readyz answers the status of GET, without a body.
func TestHead(t *testing.T) {
	down := &fake{err: errors.New("down")}
	c := newChecker(t, []health.Store{{Role: "keys", Pinger: down}}, &health.Options{Logger: quiet()})
	if a := serve(t, c.Ready(), http.MethodHead); a.code != http.StatusServiceUnavailable {
		t.Errorf("HEAD /readyz: %d, want 503", a.code)
	}
}

// TestCoalesced checks that requests arriving while a check runs wait for it and
// share its result: one ping for all of them.
func TestCoalesced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := &fake{gate: make(chan struct{})}
		c := newChecker(t, []health.Store{{Role: "keys", Pinger: slow}}, &health.Options{Logger: quiet()})
		const n = 50
		codes := make(chan int, n)
		for range n {
			go func() { codes <- serve(t, c.Ready(), http.MethodGet).code }()
		}
		synctest.Wait() // every request waits for the one check
		if got := slow.pings(); got != 1 {
			t.Fatalf("%d requests during a check made %d pings, want 1", n, got)
		}
		time.Sleep(100 * time.Millisecond)
		close(slow.gate)
		for range n {
			if code := <-codes; code != http.StatusOK {
				t.Errorf("a request waiting for the check: %d, want 200", code)
			}
		}
		if got := slow.pings(); got != 1 {
			t.Errorf("%d requests made %d pings, want 1", n, got)
		}
	})
}

// TestCached checks that a result, ready or not, is served for CacheFor after its
// check ended, then the stores are pinged again: a store that stops or comes back is
// reported by the first request after that.
func TestCached(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const cacheFor = 300 * time.Millisecond
		s := &fake{}
		c := newChecker(t, []health.Store{{Role: "keys", Pinger: s}}, &health.Options{CacheFor: cacheFor, Logger: quiet()})
		code := func() int { return serve(t, c.Ready(), http.MethodGet).code }
		steps := []struct {
			after     time.Duration // since the previous step
			err       error         // what the store answers from this step on
			wantCode  int
			wantPings int
		}{
			{0, nil, 200, 1},
			{cacheFor - time.Millisecond, errors.New("down"), 200, 1}, // cached
			{time.Millisecond, errors.New("down"), 503, 2},            // CacheFor after the check
			{cacheFor / 2, nil, 503, 2},                               // a failure is cached too
			{cacheFor / 2, nil, 200, 3},
			{10 * cacheFor, nil, 200, 4},
		}
		for i, st := range steps {
			time.Sleep(st.after)
			s.set(st.err)
			if got, pings := code(), s.pings(); got != st.wantCode || pings != st.wantPings {
				t.Errorf("step %d: %d after %d pings, want %d after %d", i, got, pings, st.wantCode, st.wantPings)
			}
		}
	})
}

// TestCallerGivesUp checks that a request that ends before the check does leaves it
// running for the others: the check's pings do not see the request's cancellation.
func TestCallerGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := &fake{gate: make(chan struct{})}
		c := newChecker(t, []health.Store{{Role: "keys", Pinger: slow}}, &health.Options{Logger: quiet()})
		ctx, cancel := context.WithCancel(t.Context())
		first := make(chan error, 1)
		go func() {
			_, err := c.Check(ctx)
			first <- err
		}()
		synctest.Wait()
		cancel()
		if err := <-first; !errors.Is(err, context.Canceled) {
			t.Fatalf("Check after its context ended: %v, want context.Canceled", err)
		}
		second := make(chan health.Report, 1)
		go func() {
			r, _ := c.Check(t.Context())
			second <- r
		}()
		synctest.Wait()
		close(slow.gate)
		if r := <-second; !r.Ready || slow.pings() != 1 {
			t.Errorf("the second caller got %+v after %d pings, want ready after the first check's one", r, slow.pings())
		}
	})
}

// TestLogs checks that a store that stops answering is logged once, at WARN with its
// error and roles, however often it is checked, and once again, at INFO, when it
// answers again.
func TestLogs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}}))
		s := &fake{}
		c := newChecker(t, []health.Store{{Role: "keys", Pinger: s}, {Role: "ledger", Pinger: s}, {Role: "rates", Pinger: &fake{}}},
			&health.Options{Logger: logger})
		check := func() {
			time.Sleep(health.DefaultCacheFor)
			c.Check(t.Context())
		}
		check()
		s.set(errors.New("connection refused"))
		check()
		check()
		check()
		s.set(nil)
		check()
		check()
		want := `level=WARN msg="health: a store is not reachable" roles="[keys ledger]" error="connection refused"
level=INFO msg="health: a store is reachable again" roles="[keys ledger]"
`
		if buf.String() != want {
			t.Errorf("logs:\n%s\nwant:\n%s", buf.String(), want)
		}
		buf.Reset()
		s.mu.Lock()
		s.gate = make(chan struct{}) // never closed: the ping ends at the timeout
		s.mu.Unlock()
		check()
		if !strings.Contains(buf.String(), `error="no answer within 500ms"`) {
			t.Errorf("a ping past the timeout is logged as %q", buf.String())
		}
	})
}

func ExampleChecker() {
	// The stores, by role: here stand-ins that always answer.
	keys, limits := reachable{}, reachable{}
	ready, err := health.New([]health.Store{
		{Role: "keys", Pinger: keys},
		{Role: "rates", Pinger: limits},
	}, nil)
	if err != nil {
		panic(err)
	}
	// A mux of the operators' own, on a listener apart from the API's.
	ops := http.NewServeMux()
	ops.Handle("/healthz", ready.Live())
	ops.Handle("/readyz", ready.Ready())

	rec := httptest.NewRecorder()
	ops.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	os.Stdout.Write(rec.Body.Bytes())
	// Output: {"status":"ready"}
}

type reachable struct{}

func (reachable) Ping(context.Context) error { return nil }
