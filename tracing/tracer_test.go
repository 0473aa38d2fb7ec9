package tracing

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/event"
)

// sqlError and redisError stand for the stores' errors, which this package knows by
// their methods only.
type sqlError struct{ state string }

func (e *sqlError) Error() string    { return "ERROR: something (SQLSTATE " + e.state + ")" }
func (e *sqlError) SQLState() string { return e.state }

type redisError string

func (e redisError) Error() string { return string(e) }
func (redisError) RedisError()     {}

func recorder(t *testing.T, sampler sdktrace.Sampler) (*Tracer, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sampler))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return New(&Options{TracerProvider: tp}), exp
}

// TestOutcomes: a phase's error names what failed in error.type, and sets the span's
// status to Error only when the service or a store failed; no message is recorded.
func TestOutcomes(t *testing.T) {
	tr, exp := recorder(t, sdktrace.AlwaysSample())
	for _, tc := range []struct {
		step      event.Step
		err       error
		errorType string
		status    codes.Code
		dbStatus  string
	}{
		{event.StepAdmit, nil, "", codes.Unset, ""},
		{event.StepAdmit, &tollgate.Error{Code: tollgate.CodeRateLimited, Message: "secret message"}, "rate_limited", codes.Unset, ""},
		{event.StepAdmit, &tollgate.Error{Code: tollgate.CodeUnavailable, Message: "secret message"}, "unavailable", codes.Error, ""},
		{event.StepCall, fmt.Errorf("wrapped: %w", &tollgate.Error{Code: tollgate.CodeTimeout}), "timeout", codes.Error, ""},
		{event.StepStore, &sqlError{"40001"}, "40001", codes.Error, "40001"},
		{event.StepStore, fmt.Errorf("admit: %w", redisError("NOSCRIPT No matching script")), "NOSCRIPT", codes.Error, "NOSCRIPT"},
		{event.StepStore, redisError("odd reply"), "_OTHER", codes.Error, "_OTHER"},
		{event.StepStore, context.DeadlineExceeded, "timeout", codes.Error, ""},
		{event.StepStore, errors.New("secret message"), "*errors.errorString", codes.Error, ""},
	} {
		ctx, root := tr.tracer.Start(context.Background(), "root")
		_, end := tr.Begin(ctx, event.Phase{Step: tc.step, Store: "postgresql", Operation: "SELECT"})
		end(tc.err)
		root.End()
		spans := exp.GetSpans()
		exp.Reset()
		sp := spans[0]
		a := map[string]string{}
		for _, kv := range sp.Attributes {
			a[string(kv.Key)] = kv.Value.String()
		}
		if a["error.type"] != tc.errorType || sp.Status.Code != tc.status || a["db.response.status_code"] != tc.dbStatus {
			t.Errorf("%v: error.type %q, status %v, db.response.status_code %q; want %q, %v, %q",
				tc.err, a["error.type"], sp.Status.Code, a["db.response.status_code"], tc.errorType, tc.status, tc.dbStatus)
		}
		if sp.Status.Description == "secret message" || len(sp.Events) > 0 {
			t.Errorf("%v: the span records the error's message: %+v", tc.err, sp)
		}
	}
}

// TestUnsampled: within a span of this process that does not record, a phase makes no
// span, and costs no context; within a remote parent, or none, it makes one.
func TestUnsampled(t *testing.T) {
	tr, exp := recorder(t, sdktrace.ParentBased(sdktrace.NeverSample()))
	ctx, root := tr.tracer.Start(context.Background(), "request")
	if root.IsRecording() {
		t.Fatal("the root was sampled")
	}
	for _, step := range []event.Step{event.StepCall, event.StepAdmit, event.StepRun, event.StepStore} {
		got, end := tr.Begin(ctx, event.Phase{Step: step, API: "hash", Store: "redis"})
		if got != ctx || end != nil {
			t.Errorf("%s: the phase derived a context, or has an end, within an unsampled span", step)
		}
	}
	root.End()

	// A remote parent that was sampled: the phase's span is its child.
	remote := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2},
		TraceFlags: trace.FlagsSampled, Remote: true})
	_, end := tr.Begin(trace.ContextWithRemoteSpanContext(context.Background(), remote), event.Phase{Step: event.StepCall, Channel: "rest"})
	end(nil)
	spans := exp.GetSpans()
	if len(spans) != 1 || spans[0].Parent.SpanID() != remote.SpanID() || spans[0].SpanKind != trace.SpanKindServer {
		t.Fatalf("spans %+v, want the call's, a server span child of the remote parent", spans)
	}

	// A store's round trip outside any span makes none.
	_, end = tr.Begin(context.Background(), event.Phase{Step: event.StepStore, Store: "redis", Operation: "GET"})
	if n := len(exp.GetSpans()); n != 1 || end != nil {
		t.Errorf("a round trip outside any span made a span")
	}

	// A no-op provider: nothing, and no context.
	nt := New(&Options{TracerProvider: noop.NewTracerProvider()})
	ctx, _ = nt.tracer.Start(context.Background(), "request")
	got, end := nt.Begin(ctx, event.Phase{Step: event.StepAdmit})
	if got != ctx || end != nil {
		t.Error("a phase derived a context, or has an end, within a no-op span")
	}
}

// TestBeginCall: a call whose span records wants the phases within it; one whose span
// does not (not sampled, a no-op provider) wants none, and its context carries the
// call's span context, for the handler to propagate.
func TestBeginCall(t *testing.T) {
	var _ event.CallTracer = (*Tracer)(nil)
	call := event.Phase{Step: event.StepCall, Channel: "rest"}

	tr, exp := recorder(t, sdktrace.AlwaysSample())
	_, end, within := tr.BeginCall(context.Background(), call)
	if !within || end == nil {
		t.Errorf("a sampled call: within %v, end %v", within, end != nil)
	} else {
		end(nil)
	}
	if n := len(exp.GetSpans()); n != 1 {
		t.Errorf("a sampled call made %d spans, want 1", n)
	}

	tr, exp = recorder(t, sdktrace.ParentBased(sdktrace.NeverSample()))
	remote := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, Remote: true})
	for _, ctx := range []context.Context{context.Background(), trace.ContextWithRemoteSpanContext(context.Background(), remote)} {
		got, end, within := tr.BeginCall(ctx, call)
		sc := trace.SpanContextFromContext(got)
		if within || end != nil || !sc.IsValid() || sc.IsRemote() {
			t.Errorf("an unsampled call: within %v, end %v, span context %+v; want the call's", within, end != nil, sc)
		}
	}
	if n := len(exp.GetSpans()); n != 0 {
		t.Errorf("unsampled calls made %d spans", n)
	}
}
