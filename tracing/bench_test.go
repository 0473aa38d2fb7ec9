package tracing_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/examples/apis"
	"github.com/tollgate-dev/tollgate/internal/benchhttp"
	"github.com/tollgate-dev/tollgate/metrics"
	"github.com/tollgate-dev/tollgate/rest"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/tracing"
)

// discard is an exporter that drops what it is given.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// BenchmarkREST measures GET /v1/hash?text=hello through the REST door, driven
// in-process with a recorder, with tracing off and on. The modes alternate within one
// run:
//
//   - off: no tracer on the service, no middleware;
//   - noop: the tracer and its middleware on OpenTelemetry's no-op provider (the
//     global provider of a host that sets none): the cost of the seam alone;
//   - unsampled: the SDK's provider sampling one trace in a million (a
//     ParentBased(TraceIDRatioBased) sampler, as production runs sample a share):
//     the cost of a call whose trace is not kept;
//   - default: the SDK's default provider, which samples every trace
//     (ParentBased(AlwaysSample)) and records its spans, with no span processor, so
//     nothing is exported;
//   - sampled: every span sampled and handed to a batch span processor whose
//     exporter drops them.
//
// Compare them with
//
//	go test -run='^$' -bench=REST -benchmem -count=10 ./tracing/ | tee trace.txt
//	benchstat -col /mode trace.txt
func BenchmarkREST(b *testing.B) {
	for _, m := range modes {
		b.Run("mode="+m.name, func(b *testing.B) {
			h, key := benchHandler(b, m.provider)
			req := benchRequest(b, key)
			b.ReportAllocs()
			for b.Loop() {
				serve(b, h, req)
			}
		})
	}
}

// BenchmarkRESTInterleaved measures the same as BenchmarkREST, but runs the modes by
// turns, a few hundred calls each, and reports the median time per call of each over
// the turns, and its ratio to the median of off: on a busy machine the modes then meet
// the same noise, so their ratios stay meaningful when their absolute times do not.
// It drives the door in-process with a recorder (via=recorder), and over HTTP on one
// keep-alive loopback connection (via=loopback), as a client calls. In-process, it runs
// the service on the real clock, and on a clock read for nothing (clock=fixed): a
// tracer's observer has the service time each call's steps, as any observer of calls
// does, and reading the clock costs 20 to 40ns on a Linux host but ten times that on a
// sandbox without a vDSO, which the fixed clock leaves out. (The spans' own times are
// read from the real clock either way.)
//
//	go test -run='^$' -bench=RESTInterleaved -benchtime=200000x ./tracing/
func BenchmarkRESTInterleaved(b *testing.B) {
	fixed := time.Date(2030, 1, 15, 0, 0, 0, 0, time.UTC)
	for _, clock := range []struct {
		name string
		now  func() time.Time
	}{{"real", nil}, {"fixed", func() time.Time { return fixed }}} {
		b.Run("via=recorder/clock="+clock.name, func(b *testing.B) {
			calls := make([]func(), len(modes))
			for i, m := range modes {
				h, key := benchHandlerAt(b, m.provider, clock.now)
				req := benchRequest(b, key)
				calls[i] = func() { serve(b, h, req) }
			}
			byTurns(b, calls)
		})
	}
	b.Run("via=loopback/clock=real", func(b *testing.B) {
		calls := make([]func(), len(modes))
		for i, m := range modes {
			h, key := benchHandler(b, m.provider)
			calls[i] = loopbackCall(b, h, key)
		}
		byTurns(b, calls)
	})
}

// BenchmarkObservedInterleaved measures what the metrics and the traces together cost a
// REST call over HTTP (GET /v1/hash?text=hello on one keep-alive loopback connection),
// by turns as BenchmarkRESTInterleaved does: off (neither), metrics (the metrics
// attached, the stores decorated, as examples/server wires them), observed (the
// metrics, and the tracer with its middleware on the SDK's provider sampling one
// trace in a million, no exporter: what a request that is not sampled costs), noop
// (the metrics, and the tracer on OpenTelemetry's no-op provider, tracing.New's
// default), and sampled (the metrics, and the SDK's default provider, whose default
// sampler, ParentBased(AlwaysSample), samples and records every span; no exporter).
//
//	go test -run='^$' -bench=ObservedInterleaved -benchtime=100000x ./tracing/
func BenchmarkObservedInterleaved(b *testing.B) {
	variants := []struct {
		name     string
		metrics  bool
		provider func(*testing.B) trace.TracerProvider
	}{
		{"off", false, nil},
		{"metrics", true, nil},
		{"observed", true, provider(b, "unsampled")},
		{"noop", true, provider(b, "noop")},
		{"sampled", true, provider(b, "default")},
	}
	names := make([]string, len(variants))
	calls := make([]func(), len(variants))
	for i, v := range variants {
		names[i] = v.name
		h, key := observedHandler(b, v.metrics, v.provider, nil)
		calls[i] = loopbackCall(b, h, key)
	}
	benchhttp.ByTurns(b, names, 100, func(i int) { calls[i]() })
}

// provider returns the provider of the named mode (see modes).
func provider(b *testing.B, name string) func(*testing.B) trace.TracerProvider {
	for _, m := range modes {
		if m.name == name {
			return m.provider
		}
	}
	b.Fatalf("no mode %q", name)
	return nil
}

// loopbackCall serves h on loopback and returns a GET /v1/hash?text=hello of it with
// key, on one keep-alive connection, which it has opened.
func loopbackCall(b *testing.B, h http.Handler, key string) func() {
	srv := httptest.NewServer(h)
	b.Cleanup(srv.Close)
	client := srv.Client()
	req, err := http.NewRequestWithContext(b.Context(), http.MethodGet, srv.URL+"/v1/hash?text=hello", nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("X-Api-Key", key)
	call := func() {
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
	call()
	return call
}

// byTurns runs calls[i], a call of modes[i], by turns (see benchhttp.ByTurns).
func byTurns(b *testing.B, calls []func()) {
	names := make([]string, len(modes))
	for i, m := range modes {
		names[i] = m.name
	}
	benchhttp.ByTurns(b, names, 200, func(i int) { calls[i]() })
}

// modes are the ways of tracing the benchmarks compare (see BenchmarkREST).
var modes = []struct {
	name     string
	provider func(b *testing.B) trace.TracerProvider // nil: no tracing
}{
	{"off", nil},
	{"noop", func(*testing.B) trace.TracerProvider { return noop.NewTracerProvider() }},
	{"unsampled", func(b *testing.B) trace.TracerProvider {
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(1e-6))))
		b.Cleanup(func() { tp.Shutdown(context.Background()) })
		return tp
	}},
	{"default", func(b *testing.B) trace.TracerProvider {
		tp := sdktrace.NewTracerProvider()
		b.Cleanup(func() { tp.Shutdown(context.Background()) })
		return tp
	}},
	{"sampled", func(b *testing.B) trace.TracerProvider {
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(discard{}))
		b.Cleanup(func() { tp.Shutdown(context.Background()) })
		return tp
	}},
}

func benchRequest(b *testing.B, key string) *http.Request {
	req := httptest.NewRequestWithContext(b.Context(), http.MethodGet, "/v1/hash?text=hello", nil)
	req.Header.Set("X-Api-Key", key)
	return req
}

func serve(b *testing.B, h http.Handler, req *http.Request) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		b.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
}

// benchHandler returns the REST door of a service on memory stores whose plan never
// denies a call, traced on the provider that provider returns (none if nil), and the
// key of an account.
func benchHandler(b *testing.B, provider func(*testing.B) trace.TracerProvider) (http.Handler, string) {
	return benchHandlerAt(b, provider, nil)
}

// benchHandlerAt is benchHandler with the service on the clock now (nil: the real one).
func benchHandlerAt(b *testing.B, provider func(*testing.B) trace.TracerProvider, now func() time.Time) (http.Handler, string) {
	return observedHandler(b, false, provider, now)
}

// observedHandler is benchHandlerAt, with the service's Prometheus metrics if
// withMetrics (attached, the stores decorated, as examples/server wires them).
func observedHandler(b *testing.B, withMetrics bool, provider func(*testing.B) trace.TracerProvider, now func() time.Time) (http.Handler, string) {
	reg := &catalog.Registry{}
	if err := apis.Register(reg); err != nil {
		b.Fatal(err)
	}
	plans, err := billing.NewPlans(billing.Plan{Name: "bench", Credits: billing.MaxCredits, RatePerMinute: 1e9, Concurrency: 1e6})
	if err != nil {
		b.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	stores := tollgate.Stores{Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
		Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter()}
	var m *metrics.Metrics
	if withMetrics {
		if m, err = metrics.New(prometheus.NewRegistry(), &metrics.Options{Now: now}); err != nil {
			b.Fatal(err)
		}
		stores = m.Stores(stores)
	}
	svc, err := tollgate.New(reg, stores, plans, &tollgate.Options{Logger: log, Now: now})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(svc.Close)
	if m != nil {
		b.Cleanup(m.Attach(svc))
	}
	mgr, err := accounts.New(svc, &accounts.Options{Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(mgr.Close)
	_, _, value, err := mgr.CreateAccount(b.Context(), accounts.Spec{ID: "bench", Plan: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	var h http.Handler
	if h, err = rest.NewHandler(svc, &rest.Options{Accounts: mgr, Logger: log}); err != nil {
		b.Fatal(err)
	}
	if provider != nil {
		tr := tracing.New(&tracing.Options{TracerProvider: provider(b)})
		b.Cleanup(tr.Attach(svc))
		h = tr.Handler(h)
	}
	return h, value
}
