// Benchmarks of the GraphQL gateway. Run them with
//
//	go test -run='^$' -bench=. -benchmem -count=5 ./gql/
//
// and compare runs with benchstat. What they measure:
//
//   - BenchmarkGraphQL drives four handlers of one service (memory stores, real clock, a
//     plan that never refuses) in-process, with httptest.NewRecorder and pre-built
//     requests: bare (a bare net/http handler that decodes the same JSON body and writes
//     a small JSON answer), typename ({ __typename } through the gateway), rest-hash
//     (GET /v1/hash?text=hello through the REST handler), hash (the same call as
//     { hash(text: "hello") { hash } } through the gateway) and hash-fragment (the same
//     call through a variable and a named fragment, as generated clients write it).
//     Besides ns/op it reports x-bare (typename's throughput as a fraction of bare's, on
//     typename's line), x-rest (the throughput of hash and hash-fragment as a fraction
//     of rest-hash's) and gateway-ns/op (their ns/op minus rest-hash's: what GraphQL
//     adds to a one-API call), on their lines, and cpu-ns/op (process CPU time per
//     operation, GC and goroutines included) on every line where the platform reports
//     it. The ratios need the sub-benchmarks to run in one process, in this order: do
//     not narrow -bench below BenchmarkGraphQL.
//   - BenchmarkGraphQLNewQuery sends a query the gateway has not seen before on every
//     request ({ hash(text: "<n>") { hash } } with a new n), so that nothing it keeps
//     per query text helps: what the first request of every query costs.
//   - BenchmarkGraphQLLoopback does the same over a loopback httptest.Server with
//     keep-alive clients in parallel, which is how the throughput targets were first
//     measured (with wrk); here the client runs in the same process.
//   - BenchmarkSchemaBuild300 builds the gateway (gql.NewHandler: SDL, reflect types,
//     graphql-go's ParseSchema) over a generated catalog of 300 APIs with every kind of
//     parameter and result: cold with new names each time (new Go types), warm with
//     the same catalog (the runtime's cached types). It reports ms/op.
package gql_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/gql"
	"github.com/tollgate-dev/tollgate/rest"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// benchPlans has one plan whose limits never refuse a benchmark call.
var benchPlans = []billing.Plan{
	{Name: "bench", Credits: billing.MaxCredits, RatePerMinute: 1e9, Concurrency: 1e6, GraphQLMaxAPIs: 10},
}

// A benchCase is one handler and the request it answers.
type benchCase struct {
	name    string
	handler http.Handler
	method  string
	target  string
	body    []byte
	hdrs    http.Header
}

// benchCases returns the four handlers of BenchmarkGraphQL, in the order the ratios
// need: each baseline before the case measured against it.
func benchCases(tb testing.TB) []benchCase {
	h := newHarness(tb, config{sampleOnly: true, realClock: true, plans: benchPlans})
	key := h.newAccount(tb, "bench", -1).Key
	rh, err := rest.NewHandler(h.svc, &rest.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	gqlHeaders := http.Header{"X-Api-Key": {key}, "Content-Type": {mediaJSON}, "Accept": {mediaGraphQL}}
	return []benchCase{
		{"bare", bareJSON(), http.MethodPost, "/v1/graphql", []byte(`{"query":"{ __typename }"}`), gqlHeaders},
		{"typename", h.handler, http.MethodPost, "/v1/graphql", []byte(`{"query":"{ __typename }"}`), gqlHeaders},
		{"rest-hash", rh, http.MethodGet, "/v1/hash?text=hello", nil, http.Header{"X-Api-Key": {key}}},
		{"hash", h.handler, http.MethodPost, "/v1/graphql", []byte(`{"query":"{ hash(text: \"hello\") { hash } }"}`), gqlHeaders},
		{"hash-fragment", h.handler, http.MethodPost, "/v1/graphql", []byte(`{"query":"query Digest($t: String!) { hash(text: $t) { ...H } } fragment H on HashResult { hash }","variables":{"t":"hello"}}`), gqlHeaders},
	}
}

// bareJSON is the baseline: a bare net/http handler that decodes a JSON request and
// writes a small JSON answer, the least a JSON endpoint does.
func bareJSON() http.Handler {
	answer := map[string]any{"data": map[string]any{"__typename": "Query"}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Query string `json:"query"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Query == "" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		body, err := json.Marshal(answer)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", mediaGraphQL)
		w.WriteHeader(http.StatusOK)
		w.Write(body)
	})
}

// rewindBody is a request body that can be read again after Reset, without allocating.
type rewindBody struct{ *bytes.Reader }

func (rewindBody) Close() error { return nil }

// nsPerOp keeps the ns/op of the sub-benchmarks of one benchmark, for the ratios.
type nsPerOp struct {
	mu sync.Mutex
	ns map[string]float64
}

func (m *nsPerOp) set(name string, ns float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ns[name] = ns
}

func (m *nsPerOp) get(name string) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ns[name]
}

// reportRatios reports, on the line of the case just measured, its throughput against
// its baseline and, for hash, the time GraphQL adds to the REST call.
func (m *nsPerOp) reportRatios(b *testing.B, name string, ns float64) {
	m.set(name, ns)
	switch name {
	case "typename":
		if bare := m.get("bare"); bare > 0 {
			b.ReportMetric(bare/ns, "x-bare")
		}
	case "hash", "hash-fragment":
		if r := m.get("rest-hash"); r > 0 {
			b.ReportMetric(r/ns, "x-rest")
			b.ReportMetric(ns-r, "gateway-ns/op")
		}
	}
}

// BenchmarkGraphQL measures the gateway in-process against a bare JSON handler and
// against the REST handler of the same service (see the file comment).
func BenchmarkGraphQL(b *testing.B) {
	m := &nsPerOp{ns: map[string]float64{}}
	for _, c := range benchCases(b) {
		b.Run(c.name, func(b *testing.B) {
			req := httptest.NewRequestWithContext(context.Background(), c.method, c.target, nil)
			req.Header = c.hdrs.Clone()
			body := rewindBody{bytes.NewReader(c.body)}
			if c.body != nil {
				req.ContentLength = int64(len(c.body))
			}
			b.ReportAllocs()
			cpu0, cpuOK := cpuTime()
			for b.Loop() {
				if c.body != nil {
					body.Reset(c.body)
					req.Body = body
				}
				rec := httptest.NewRecorder()
				c.handler.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("status %d: %s", rec.Code, rec.Body)
				}
			}
			ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			if cpu1, ok := cpuTime(); ok && cpuOK {
				b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
			}
			m.reportRatios(b, c.name, ns)
		})
	}
}

// BenchmarkGraphQLLoopback measures the same four handlers over a loopback server with
// keep-alive clients in parallel (see the file comment).
func BenchmarkGraphQLLoopback(b *testing.B) {
	m := &nsPerOp{ns: map[string]float64{}}
	for _, c := range benchCases(b) {
		b.Run(c.name, func(b *testing.B) {
			srv := httptest.NewServer(c.handler)
			defer srv.Close()
			tr := &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr}
			b.ReportAllocs()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req, err := http.NewRequestWithContext(context.Background(), c.method, srv.URL+c.target, bytes.NewReader(c.body))
					if err != nil {
						b.Error(err)
						return
					}
					req.Header = c.hdrs.Clone()
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
			m.reportRatios(b, c.name, float64(time.Since(start).Nanoseconds())/float64(b.N))
		})
	}
}

// BenchmarkGraphQLNewQuery measures a one-API query the gateway has not seen before
// (see the file comment).
func BenchmarkGraphQLNewQuery(b *testing.B) {
	h := newHarness(b, config{sampleOnly: true, realClock: true, plans: benchPlans})
	key := h.newAccount(b, "bench", -1).Key
	req := httptest.NewRequestWithContext(context.Background(), http.MethodPost, "/v1/graphql", nil)
	req.Header = http.Header{"X-Api-Key": {key}, "Content-Type": {mediaJSON}, "Accept": {mediaGraphQL}}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		n++
		body := fmt.Appendf(nil, `{"query":"{ hash(text: \"%d\") { hash } }"}`, n)
		req.Body, req.ContentLength = rewindBody{bytes.NewReader(body)}, int64(len(body))
		rec := httptest.NewRecorder()
		h.handler.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	}
}

// generatedCatalog returns n APIs with every kind of parameter and result, their names
// made unique by prefix, so that each catalog needs Go types of its own.
func generatedCatalog(prefix string, n int) []catalog.API {
	handler := catalog.HandlerFunc(func(context.Context, *catalog.Request) (any, error) { return map[string]any{}, nil })
	out := make([]catalog.API, 0, n)
	for i := range n {
		id := fmt.Sprintf("%s-api-%03d", prefix, i)
		a := catalog.API{
			ID: id, Title: "Generated " + id, Description: "A generated API for the schema benchmark.",
			Method: http.MethodPost, Cost: int64(1 + i%3), Handler: handler,
			Params: []catalog.Param{
				{Name: "text", Type: catalog.String, Required: true, MaxLength: catalog.Len(100), Description: "A text."},
				{Name: "count", Type: catalog.Integer, Min: catalog.Num(1), Max: catalog.Num(50), Default: 5, Description: "A count."},
				{Name: "mode", Type: catalog.String, Enum: []any{"fast", "slow", "exact"}, Default: "fast", Description: "A mode."},
			},
			Result: []catalog.Field{
				{Name: "id", Type: catalog.String, Description: "An id."},
				{Name: "total-count", Type: catalog.Integer},
				{Name: fmt.Sprintf("%s.value-%d", prefix, i), Type: catalog.Number},
			},
		}
		switch i % 4 {
		case 0:
			a.Params = append(a.Params,
				catalog.Param{Name: "tags", Type: catalog.Array, Items: &catalog.Param{Type: catalog.String}},
				catalog.Param{Name: "flag", Type: catalog.Boolean})
			a.Result = append(a.Result, catalog.Field{Name: "items", Type: catalog.Array, Items: &catalog.Field{
				Type: catalog.Object, Fields: []catalog.Field{{Name: "name", Type: catalog.String}, {Name: "score", Type: catalog.Number}},
			}})
		case 1:
			a.Params = append(a.Params, catalog.Param{Name: "point", Type: catalog.Object, Fields: []catalog.Param{
				{Name: "x", Type: catalog.Number, Required: true}, {Name: "y", Type: catalog.Number}, {Name: "label", Type: catalog.String},
			}})
			a.Result = append(a.Result, catalog.Field{Name: "nested", Type: catalog.Object, Fields: []catalog.Field{
				{Name: "inner", Type: catalog.Object, Fields: []catalog.Field{{Name: "deep-value", Type: catalog.Integer}, {Name: "ok?", Type: catalog.Boolean}}},
			}})
		case 2:
			a.Params = append(a.Params, catalog.Param{Name: "ratio", Type: catalog.Number, Default: 0.5})
			a.Result = append(a.Result, catalog.Field{Name: "meta", Type: catalog.JSON},
				catalog.Field{Name: "numbers", Type: catalog.Array, Items: &catalog.Field{Type: catalog.Integer}})
		case 3:
			a.Result = nil // a free-form result: the JSON scalar
		}
		out = append(out, a)
	}
	return out
}

// newGeneratedService returns a service on memory stores over a generated catalog.
func newGeneratedService(tb testing.TB, prefix string, n int) *tollgate.Service {
	reg := &catalog.Registry{}
	for _, a := range generatedCatalog(prefix, n) {
		if err := reg.Register(a); err != nil {
			tb.Fatal(err)
		}
	}
	plans, err := billing.NewPlans(benchPlans...)
	if err != nil {
		tb.Fatal(err)
	}
	svc, err := tollgate.New(reg, tollgate.Stores{
		Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
		Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter(),
	}, plans, &tollgate.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(svc.Close)
	return svc
}

// TestGeneratedCatalog keeps the schema benchmark honest: its catalog builds, and a
// query of each kind of API works.
func TestGeneratedCatalog(t *testing.T) {
	svc := newGeneratedService(t, "check", 300)
	h, err := gql.NewHandler(svc, &gql.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	sdl, err := h.Schema()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"checkapi000(", "checkapi299(", "point: Checkapi001PointInput", "mode: Checkapi002Mode = fast", ": JSON\n", "deep_value: Int", "check_value_4: Float"} {
		if !bytes.Contains([]byte(sdl), []byte(want)) {
			t.Errorf("the generated schema lacks %q", want)
		}
	}
}

// coldCatalogs numbers the catalogs of the cold schema build, so that no two runs of
// it in one process (-count) share names, and so Go types.
var coldCatalogs atomic.Int64

// BenchmarkSchemaBuild300 measures building the gateway over a generated catalog of
// 300 APIs (see the file comment).
func BenchmarkSchemaBuild300(b *testing.B) {
	opts := &gql.Options{Logger: slog.New(slog.DiscardHandler)}
	report := func(b *testing.B, d time.Duration) {
		b.ReportMetric(float64(d.Nanoseconds())/1e6/float64(b.N), "ms/op")
	}
	b.Run("cold", func(b *testing.B) {
		b.ReportAllocs()
		var built time.Duration
		for b.Loop() {
			b.StopTimer()
			svc := newGeneratedService(b, fmt.Sprintf("c%d", coldCatalogs.Add(1)), 300)
			b.StartTimer()
			start := time.Now()
			if _, err := gql.NewHandler(svc, opts); err != nil {
				b.Fatal(err)
			}
			built += time.Since(start)
		}
		report(b, built)
	})
	b.Run("warm", func(b *testing.B) {
		svc := newGeneratedService(b, "warm", 300)
		if _, err := gql.NewHandler(svc, opts); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := gql.NewHandler(svc, opts); err != nil {
				b.Fatal(err)
			}
		}
		report(b, b.Elapsed())
	})
}
