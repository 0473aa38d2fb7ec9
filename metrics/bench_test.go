package metrics_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/internal/benchhttp"
	"github.com/tollgate-dev/tollgate/metrics"
	"github.com/tollgate-dev/tollgate/rest"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// BenchmarkObserve measures what the metrics cost the goroutine of a call: Observe of
// a call of one API (REST), of a GraphQL query of two APIs, of a batch of 100 items,
// and of a refusal, once their series exist.
//
//	go test -run='^$' -bench=Observe -benchmem ./metrics/
func BenchmarkObserve(b *testing.B) {
	batch := make([]event.APIResult, 100)
	for i := range batch {
		batch[i] = event.APIResult{API: "hash", Credits: 1, Duration: time.Millisecond}
	}
	for _, bc := range []struct {
		name string
		e    event.Event
	}{
		{"rest", &event.Call{Account: "acme", Key: "key_1", Channel: "rest",
			APIs:    []event.APIResult{{API: "hash", Credits: 1, Duration: 3 * time.Millisecond}},
			Charged: 1, Admission: time.Millisecond, Run: 3 * time.Millisecond, Settle: time.Millisecond}},
		{"graphql-2", &event.Call{Account: "acme", Key: "key_1", Channel: "graphql",
			APIs:    []event.APIResult{{API: "hash", Credits: 1, Duration: 3 * time.Millisecond}, {API: "echo", Credits: 1, Duration: 2 * time.Millisecond}},
			Charged: 2, Admission: time.Millisecond, Run: 3 * time.Millisecond, Settle: time.Millisecond}},
		{"batch-100", &event.Call{Account: "acme", Key: "key_1", Channel: "batch", APIs: batch, Charged: 100,
			Admission: time.Millisecond, Run: 3 * time.Millisecond, Settle: time.Millisecond}},
		{"refusal", &event.Refusal{Account: "acme", Key: "key_1", Channel: "rest", APIs: []string{"hash"}, Code: "rate_limited"}},
	} {
		for _, parallel := range []bool{false, true} {
			mode := "serial"
			if parallel {
				mode = "parallel"
			}
			b.Run(bc.name+"/"+mode, func(b *testing.B) {
				m, err := metrics.New(prometheus.NewRegistry(), nil)
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				m.Observe(ctx, bc.e) // the series exist
				loop(b, parallel, func(ctx context.Context) { m.Observe(ctx, bc.e) })
			})
		}
	}
}

// BenchmarkStoreDecorator measures what the decorator of the stores costs one
// operation: a memory rate limiter's Allow, bare and decorated.
//
//	go test -run='^$' -bench=StoreDecorator -benchmem ./metrics/
func BenchmarkStoreDecorator(b *testing.B) {
	limit := driver.Limit{Rate: 1 << 20, Per: time.Hour, Burst: 1 << 20}
	now := time.Now()
	for _, decorated := range []bool{false, true} {
		name := "bare"
		if decorated {
			name = "decorated"
		}
		b.Run(name, func(b *testing.B) {
			var rates driver.RateLimiter = memory.NewRateLimiter()
			if decorated {
				m, err := metrics.New(prometheus.NewRegistry(), nil)
				if err != nil {
					b.Fatal(err)
				}
				rates = m.Stores(tollgate.Stores{Rates: rates}).Rates
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := rates.Allow(ctx, "k", limit, now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCallMetrics measures what the metrics cost a whole call (Service.Call of
// the hash API on the memory stores): none (no observer: the service takes no time
// stamps and builds no event), noop (an observer of calls that does nothing: the
// service's own cost of telling them), the metrics attached, and the metrics attached
// with the stores decorated.
//
//	go test -run='^$' -bench=CallMetrics -benchmem -count=6 ./metrics/
func BenchmarkCallMetrics(b *testing.B) {
	for _, bc := range []struct {
		name   string
		attach int // 0: none, 1: an observer that does nothing, 2: the metrics
		stores bool
	}{{"none", 0, false}, {"noop", 1, false}, {"events", 2, false}, {"events+stores", 2, true}} {
		for _, parallel := range []bool{false, true} {
			mode := "serial"
			if parallel {
				mode = "parallel"
			}
			b.Run(bc.name+"/"+mode, func(b *testing.B) {
				svc, caller := benchService(b, bc.attach, bc.stores)
				call := func(ctx context.Context) {
					if r := svc.Call(ctx, caller, "hash", nil); r.Err != nil {
						b.Fatal(r.Err)
					}
				}
				loop(b, parallel, call)
			})
		}
	}
}

// BenchmarkCallMetricsInterleaved measures the same as BenchmarkCallMetrics, but runs
// the variants by turns, a few hundred calls each, and reports the median time per call
// of each over the turns: on a busy machine the variants then meet the same noise, so
// their differences stay meaningful when their absolute times do not. It runs on the
// real clock, and on a clock that is read for nothing (the service's and the
// metrics'), which leaves the work of the metrics without the clock's: reading the
// clock costs 20 to 40ns on a Linux host, and ten times that on a sandbox without a
// vDSO.
//
//	go test -run='^$' -bench=CallMetricsInterleaved -benchtime=400000x ./metrics/
func BenchmarkCallMetricsInterleaved(b *testing.B) {
	fixed := time.Date(2030, 1, 15, 0, 0, 0, 0, time.UTC)
	for _, clock := range []struct {
		name string
		now  func() time.Time
	}{{"real", nil}, {"fixed", func() time.Time { return fixed }}} {
		b.Run("clock="+clock.name, func(b *testing.B) { interleave(b, clock.now) })
	}
}

// interleave runs the variants of BenchmarkCallMetricsInterleaved on the clock now
// (nil: the real one).
func interleave(b *testing.B, now func() time.Time) {
	type variant struct {
		svc    *tollgate.Service
		caller tollgate.Caller
	}
	var (
		names []string
		vs    []variant
	)
	for _, v := range []struct {
		name   string
		attach int
		stores bool
	}{{"none", 0, false}, {"noop", 1, false}, {"events", 2, false}, {"events+stores", 2, true}} {
		svc, caller := benchServiceAt(b, v.attach, v.stores, now)
		names, vs = append(names, v.name), append(vs, variant{svc, caller})
	}
	ctx := context.Background()
	benchhttp.ByTurns(b, names, 250, func(i int) {
		if r := vs[i].svc.Call(ctx, vs[i].caller, "hash", nil); r.Err != nil {
			b.Fatal(r.Err)
		}
	})
}

// BenchmarkRESTMetricsInterleaved measures what the metrics cost a REST call over
// HTTP (GET /v1/hash of an API that does nothing, through the REST door, on the memory
// stores, one keep-alive connection): none, the metrics attached, and the metrics
// attached with the stores decorated, by turns as BenchmarkCallMetricsInterleaved
// does, on the real clock.
//
//	go test -run='^$' -bench=RESTMetricsInterleaved -benchtime=60000x ./metrics/
func BenchmarkRESTMetricsInterleaved(b *testing.B) {
	var (
		names []string
		urls  []string
	)
	for _, v := range []struct {
		name   string
		attach int
		stores bool
	}{{"none", 0, false}, {"events", 2, false}, {"events+stores", 2, true}} {
		svc, _ := benchServiceAt(b, v.attach, v.stores, nil)
		h, err := rest.NewHandler(svc, &rest.Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		srv := httptest.NewServer(h)
		b.Cleanup(srv.Close)
		names, urls = append(names, v.name), append(urls, srv.URL+"/v1/hash")
	}
	get := func(i int) {
		req, _ := http.NewRequest(http.MethodGet, urls[i], nil)
		req.Header.Set("X-Api-Key", acmeKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("GET /v1/hash: %d", resp.StatusCode)
		}
	}
	for i := range urls {
		get(i) // the connection is open, the series exist
	}
	benchhttp.ByTurns(b, names, 100, get)
}

// loop runs f b.N times, on one goroutine or in parallel, reporting allocations.
func loop(b *testing.B, parallel bool, f func(ctx context.Context)) {
	b.ReportAllocs()
	b.ResetTimer()
	if !parallel {
		ctx := context.Background()
		for b.Loop() {
			f(ctx)
		}
		return
	}
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			f(ctx)
		}
	})
}

// benchService returns a service on the memory stores with an API that does nothing
// and an account whose plan never denies a call, and a caller of the account.
func benchService(b *testing.B, attach int, decorate bool) (*tollgate.Service, tollgate.Caller) {
	b.Helper()
	return benchServiceAt(b, attach, decorate, nil)
}

// benchServiceAt is benchService on the clock now, the service's and the metrics'
// (nil: the real one).
func benchServiceAt(b *testing.B, attach int, decorate bool, now func() time.Time) (*tollgate.Service, tollgate.Caller) {
	b.Helper()
	reg := &catalog.Registry{}
	err := reg.Register(catalog.API{ID: "hash", Method: "GET", Cost: 1,
		Handler: catalog.HandlerFunc(func(context.Context, *catalog.Request) (any, error) { return nil, nil })})
	if err != nil {
		b.Fatal(err)
	}
	plans, err := billing.NewPlans(billing.Plan{Name: "bench", Credits: billing.MaxCredits, RatePerMinute: 1 << 30, Concurrency: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	stores := tollgate.Stores{Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
		Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter()}
	m, err := metrics.New(prometheus.NewRegistry(), &metrics.Options{Now: now})
	if err != nil {
		b.Fatal(err)
	}
	if decorate {
		stores = m.Stores(stores)
	}
	quiet := slog.New(slog.DiscardHandler)
	svc, err := tollgate.New(reg, stores, plans, &tollgate.Options{Logger: quiet, Now: now})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(svc.Close)
	switch attach {
	case 1:
		b.Cleanup(svc.Events().Subscribe(event.ObserverFunc(func(context.Context, event.Event) {}), m.Kinds()...))
	case 2:
		b.Cleanup(m.Attach(svc))
	}
	mgr, err := accounts.New(svc, &accounts.Options{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(mgr.Close)
	balance := int64(billing.MaxCredits / 2)
	if _, _, _, err := mgr.CreateAccount(context.Background(), accounts.Spec{ID: "acme", Plan: "bench", Credits: &balance, KeyValue: acmeKey}); err != nil {
		b.Fatal(err)
	}
	cred, err := auth.CredentialFrom(map[string][]string{"X-Api-Key": {acmeKey}})
	if err != nil {
		b.Fatal(err)
	}
	return svc, tollgate.Caller{Credential: cred, Channel: auth.ChannelREST, Addr: netip.MustParseAddr("203.0.113.7")}
}
