package tracing_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/doors"
	"github.com/tollgate-dev/tollgate/examples/apis"
	"github.com/tollgate-dev/tollgate/internal/doclines"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/tracing"
)

// This example traces a service's calls: the tracer attached to the service, and its
// middleware around the mux of every door, which continues the client's trace. It
// prints the spans of a REST call, each under its parent.
func Example() {
	exporter := tracetest.NewInMemoryExporter() // the host's: OTLP, say
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	defer tp.Shutdown(context.Background())
	tr := tracing.New(&tracing.Options{
		TracerProvider: tp,
		Propagator:     propagation.TraceContext{},
	})

	cat := &catalog.Registry{}
	if err := apis.Register(cat); err != nil {
		log.Fatal(err)
	}
	plans, err := billing.NewPlans(billing.Plan{Name: "pro", Credits: 1000, RatePerMinute: 600})
	if err != nil {
		log.Fatal(err)
	}
	stores := tollgate.Stores{
		Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
		Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter(),
	}
	svc, err := tollgate.New(cat, stores, plans, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer svc.Close()
	defer tr.Attach(svc)() // the spans of calls and their phases

	mux := http.NewServeMux()
	m, err := doors.Mount(mux, svc, &doors.Options{Doors: doors.REST})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	handler := tr.Handler(mux) // the request's span, in the client's trace

	_, _, key, err := m.Accounts.CreateAccount(context.Background(), accounts.Spec{ID: "acme", Plan: "pro"})
	if err != nil {
		log.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, "/v1/hash?text=hello", nil)
	req.Header.Set("X-Api-Key", key)
	req.Header.Set("Traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	handler.ServeHTTP(httptest.NewRecorder(), req)

	spans := exporter.GetSpans() // in the order they ended: children first
	var show func(parent string, depth int)
	show = func(parent string, depth int) {
		for _, s := range spans {
			if s.Parent.SpanID().String() == parent {
				fmt.Printf("%s%s (%s)\n", strings.Repeat("  ", depth), s.Name, s.SpanKind)
				show(s.SpanContext.SpanID().String(), depth+1)
			}
		}
	}
	show("b7ad6b7169203331", 0) // the client's span
	// Output:
	// GET /v1/{api_id} (server)
	//   tollgate.call (internal)
	//     tollgate.authenticate (internal)
	//     tollgate.admit (internal)
	//     hash (internal)
	//     tollgate.settle (internal)
}

// TestDocWiring checks that the Go block of docs/tracing.md's "Wiring it" is lines of
// Example, in its order ("..." stands for the lines left out).
func TestDocWiring(t *testing.T) {
	doclines.InOrder(t, "../docs/tracing.md", "## Wiring it", "example_test.go")
}
