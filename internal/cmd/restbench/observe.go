package main

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/metrics"
	"github.com/tollgate-dev/tollgate/tracing"
)

// An observation is what observes a memory server: its Prometheus metrics (attached to
// the service, every store decorated, as examples/server wires them) and, but for the
// metrics server, its traces (the tracer attached to the service, its middleware
// around the mux). The servers differ by their tracer provider:
//
//	metrics            no tracer
//	observed           the SDK's provider with a sampler that keeps no trace
//	                   (ParentBased(TraceIDRatioBased(0))): what production pays for a
//	                   request it does not sample
//	observed-noop      tracing.New's default provider, OpenTelemetry's global one, which
//	                   makes no span until the host sets one
//	observed-sampled   the SDK's default provider (sdktrace.NewTracerProvider()): its
//	                   default sampler, ParentBased(AlwaysSample), samples and records
//	                   every span; no span processor, so nothing is exported
//	observed-exported  every span sampled and handed to a batch span processor whose
//	                   exporter drops them
type observation struct {
	metrics  *metrics.Metrics
	tracer   *tracing.Tracer // nil: no tracing
	provider *sdktrace.TracerProvider
}

func newObservation(kind string) (*observation, error) {
	m, err := metrics.New(prometheus.NewRegistry(), nil)
	if err != nil {
		return nil, err
	}
	o := &observation{metrics: m}
	var tp trace.TracerProvider
	switch kind {
	case "metrics":
		return o, nil
	case "observed":
		o.provider = sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0))))
	case "observed-noop":
	case "observed-sampled":
		o.provider = sdktrace.NewTracerProvider()
	case "observed-exported":
		o.provider = sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardSpans{}))
	default:
		return nil, fmt.Errorf("unknown observed server %q", kind)
	}
	if o.provider != nil {
		tp = o.provider
	}
	o.tracer = tracing.New(&tracing.Options{TracerProvider: tp})
	return o, nil
}

// attach has o observe svc, and returns what stops it.
func (o *observation) attach(svc *tollgate.Service) func() {
	detachMetrics := o.metrics.Attach(svc)
	detachTracer := func() {}
	if o.tracer != nil {
		detachTracer = o.tracer.Attach(svc)
	}
	return func() {
		detachTracer()
		detachMetrics()
		if o.provider != nil {
			_ = o.provider.Shutdown(context.Background())
		}
	}
}

// discardSpans is an exporter that drops the spans it is given.
type discardSpans struct{}

func (discardSpans) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardSpans) Shutdown(context.Context) error                             { return nil }
