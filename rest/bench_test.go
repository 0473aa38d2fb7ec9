package rest_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/internal/benchhttp"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/wire"
)

// benchPlans has one plan whose limits never deny a benchmark call.
var benchPlans = []billing.Plan{
	{Name: "bench", Credits: billing.MaxCredits, RatePerMinute: 1e9, Concurrency: 1e6, GraphQLMaxAPIs: 10},
}

const benchPath = "/v1/hash?text=hello"

// newBenchTollgate returns the full REST handler on a real clock and a key whose plan
// never denies a call.
func newBenchTollgate(b testing.TB) (http.Handler, string) {
	h := newHarness(b, config{noServer: true, sampleOnly: true, realClock: true, plans: benchPlans})
	return h.handler, h.newAccount(b, "bench").Key
}

// newBenchBare returns the baseline handler, writing the headers of a real answer of tg.
func newBenchBare(tb testing.TB, tg http.Handler, key string) http.Handler {
	req := httptest.NewRequestWithContext(tb.Context(), http.MethodGet, benchPath, nil)
	req.Header.Set("X-Api-Key", key)
	rec := httptest.NewRecorder()
	tg.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		tb.Fatalf("tollgate answered %d: %s", rec.Code, rec.Body)
	}
	return benchhttp.BareHash(rec.Header())
}

// TestBareMatchesTollgate keeps the benchmark honest: the bare handler answers with the
// same body bytes and the same number of headers as the full handler.
func TestBareMatchesTollgate(t *testing.T) {
	tg, k := newBenchTollgate(t)
	req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, benchPath, nil)
	req.Header.Set("X-Api-Key", k)
	want := httptest.NewRecorder()
	tg.ServeHTTP(want, req)
	got := httptest.NewRecorder()
	newBenchBare(t, tg, k).ServeHTTP(got, req)
	if want.Code != 200 || got.Code != 200 || !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) {
		t.Errorf("bodies differ:\n tollgate %d %s\n bare     %d %s", want.Code, want.Body, got.Code, got.Body)
	}
	if len(got.Header()) != len(want.Header()) {
		t.Errorf("bare writes %d headers, tollgate %d: %v", len(got.Header()), len(want.Header()), want.Header())
	}
	for name := range want.Header() {
		if got.Header().Get(name) == "" {
			t.Errorf("bare lacks %s", name)
		}
	}
	// In-process consumers (middleware, recorders) find every credit and rate header
	// with Header.Get, which canonicalizes the name it looks up.
	for _, name := range wire.CreditHeaders() {
		if name != wire.HeaderRetryAfter && want.Header().Get(name) == "" {
			t.Errorf("Header.Get(%q) finds nothing in %v", name, want.Header())
		}
	}
}

// BenchmarkREST measures GET /v1/hash?text=hello through the full REST handler (edge
// check, authentication against the key store, admission: rate limit, concurrency slot
// and credit reservation, the handler, settlement, envelope and headers) against a bare
// net/http handler that does only the API's work and writes the same bytes. Each is
// driven in-process with a recorder and a pre-built request, and over a real loopback
// server with keep-alive clients in parallel.
func BenchmarkREST(b *testing.B) {
	tg, k := newBenchTollgate(b)
	for _, c := range []struct {
		name    string
		handler http.Handler
	}{
		{"tollgate", tg},
		{"bare", newBenchBare(b, tg, k)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.Run("recorder", func(b *testing.B) {
				req := httptest.NewRequestWithContext(b.Context(), http.MethodGet, benchPath, nil)
				req.Header.Set("X-Api-Key", k)
				b.ReportAllocs()
				for b.Loop() {
					rec := httptest.NewRecorder()
					c.handler.ServeHTTP(rec, req)
					if rec.Code != http.StatusOK {
						b.Fatalf("status %d: %s", rec.Code, rec.Body)
					}
				}
			})
			b.Run("loopback", func(b *testing.B) {
				srv := httptest.NewServer(c.handler)
				defer srv.Close()
				tr := &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024}
				defer tr.CloseIdleConnections()
				client := &http.Client{Transport: tr}
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					req, err := http.NewRequestWithContext(b.Context(), http.MethodGet, srv.URL+benchPath, nil)
					if err != nil {
						b.Error(err)
						return
					}
					req.Header.Set("X-Api-Key", k)
					for pb.Next() {
						resp, err := client.Do(req)
						if err != nil {
							b.Error(err)
							return
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusOK {
							b.Errorf("status %d", resp.StatusCode)
							return
						}
					}
				})
			})
		})
	}
}

// BenchmarkRESTUsage measures the cost of usage recording (a usage.Recorder observing
// the service's events, on the memory usage store, flushed every 10 seconds) on GET
// /v1/hash?text=hello through the full REST handler: usage=off and usage=on alternate
// within one run, one call at a time (serial) and from every core at once (parallel).
// Compare them with
//
//	go test -run='^$' -bench=RESTUsage -count=10 ./rest/ | tee usage.txt
//	benchstat -col /usage usage.txt
func BenchmarkRESTUsage(b *testing.B) {
	for _, mode := range []string{"serial", "parallel"} {
		for _, on := range []bool{false, true} {
			name := "usage=off"
			cfg := config{noServer: true, sampleOnly: true, realClock: true, plans: benchPlans}
			if on {
				name = "usage=on"
				cfg.usage = memory.NewUsageStore()
			}
			b.Run(mode+"/"+name, func(b *testing.B) {
				h := newHarness(b, cfg)
				k := h.newAccount(b, "bench").Key
				call := func(req *http.Request) {
					rec := httptest.NewRecorder()
					h.handler.ServeHTTP(rec, req)
					if rec.Code != http.StatusOK {
						b.Fatalf("status %d: %s", rec.Code, rec.Body)
					}
				}
				newReq := func() *http.Request {
					req := httptest.NewRequestWithContext(b.Context(), http.MethodGet, benchPath, nil)
					req.Header.Set("X-Api-Key", k)
					return req
				}
				b.ReportAllocs()
				if mode == "serial" {
					req := newReq()
					for b.Loop() {
						call(req)
					}
					return
				}
				b.RunParallel(func(pb *testing.PB) {
					req := newReq()
					for pb.Next() {
						call(req)
					}
				})
			})
		}
	}
}
