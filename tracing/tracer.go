package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/event"
)

// ScopeName is the name of the instrumentation scope of the spans a [Tracer] makes.
const ScopeName = "github.com/tollgate-dev/tollgate/tracing"

// The attributes of Tollgate's own that the spans carry, beside OpenTelemetry's
// conventions (see the package documentation).
const (
	// ChannelKey is the door a call came through: rest, graphql, mcp, batch, other.
	ChannelKey = attribute.Key("tollgate.channel")
	// KeyIDKey is the id of the key that made a call (never its value).
	KeyIDKey = attribute.Key("tollgate.key.id")
	// AccountIDKey is the id of the caller's account, with [Options.AccountIDs] only.
	AccountIDKey = attribute.Key("tollgate.account.id")
	// PlanKey is the name of the caller's plan.
	PlanKey = attribute.Key("tollgate.plan")
	// CreditsChargedKey is what a call that ran was charged in the end.
	CreditsChargedKey = attribute.Key("tollgate.credits.charged")
	// SettlementKey is what became of a call's charge: settled, deferred, voided,
	// unsettled.
	SettlementKey = attribute.Key("tollgate.settlement")
)

// Options configures a [Tracer]. The zero value is the default; every field is
// optional.
type Options struct {
	// TracerProvider makes the spans. Nil is OpenTelemetry's global provider
	// (otel.GetTracerProvider), which makes no spans until the host sets one.
	TracerProvider trace.TracerProvider
	// Propagator reads the trace context of an incoming request ([Tracer.Handler]).
	// Nil reads the W3C Trace Context headers (traceparent, tracestate) alone; give
	// propagation.NewCompositeTextMapPropagator(propagation.TraceContext{},
	// propagation.Baggage{}) to take the client's baggage too, or
	// otel.GetTextMapPropagator() for the host's.
	Propagator propagation.TextMapPropagator
	// ClientAddr returns the address a request comes from, for client.address. Nil is
	// the TCP peer; give the edge's Addr (edge.Edge.Addr) so that the trusted proxies
	// the doors believe are believed here too.
	ClientAddr func(*http.Request) netip.Addr
	// AccountIDs puts account ids on spans: tollgate.account.id on a call's span, and
	// the account id of a management path (/admin/v1/accounts/{account_id}/...) in its
	// url.path, which otherwise has "{account_id}" in its place. Off by default: an
	// account id names a customer, and spans leave the service for the host's
	// tracing backend.
	AccountIDs bool
}

// A Tracer makes the OpenTelemetry spans of a service's work: it is the
// [event.Tracer] that the service tells of the phases of its calls (see
// [Tracer.Attach]) and that the stores' hooks tell of their round trips, the
// [event.Observer] that completes a call's span with what the call did, and the HTTP
// middleware that continues the trace context of incoming requests
// ([Tracer.Handler]). It is safe for concurrent use.
type Tracer struct {
	tracer     trace.Tracer
	prop       propagation.TextMapPropagator
	clientAddr func(*http.Request) netip.Addr
	accountIDs bool
	w3c        bool // prop is propagation.TraceContext, which reads the traceparent alone
}

// New returns a Tracer with the given options. opts may be nil.
func New(opts *Options) *Tracer {
	if opts == nil {
		opts = &Options{}
	}
	tp := opts.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	t := &Tracer{
		tracer:     tp.Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL)),
		prop:       opts.Propagator,
		clientAddr: opts.ClientAddr,
		accountIDs: opts.AccountIDs,
	}
	if t.prop == nil {
		t.prop = propagation.TraceContext{}
	}
	switch t.prop.(type) {
	case propagation.TraceContext, *propagation.TraceContext:
		t.w3c = true
	}
	return t
}

// Attach sets t on the service's seam (svc.Events()): as its tracer, for the spans of
// calls and their phases, and as an observer of the calls that finished or were
// refused, for their spans' attributes. detach undoes both.
func (t *Tracer) Attach(svc *tollgate.Service) (detach func()) {
	bus := svc.Events()
	untrace := bus.Trace(t)
	unsubscribe := bus.Subscribe(t, event.CallFinished, event.CallRefused)
	return func() {
		unsubscribe()
		untrace()
	}
}

// callKey is the key, in a call's context, of the call's span, which Observe
// completes.
type callKey struct{}

// Begin starts the span of a phase, a child of the span ctx carries, and returns the
// context that carries it and the function that ends it (see [event.Tracer]):
//
//   - a call: "tollgate.call", a server span when ctx carries no span of this process
//     (its parent, if any, is remote), else internal;
//   - its authentication, admission and settlement: "tollgate.authenticate",
//     "tollgate.admit", "tollgate.settle";
//   - an API's run: named by the API's id, with rpc.method, as OpenTelemetry's RPC
//     conventions name a method's call; the handler's own spans are its children;
//   - a round trip to a store: a client span named by its operation ("SELECT",
//     "EVALSHA admit") with the database conventions' attributes. A round trip made
//     outside any span (the background work of a store) makes none.
//
// A phase begun within a span of this process that does not record (its trace was
// not sampled, or the provider is a no-op) makes no span: a sampler that keeps whole traces (ParentBased, the
// SDK's default) would drop it, and another would keep a span whose parent is never
// exported. So a request whose trace is not sampled costs the start of its first
// span only, and such a phase has no end (nil: see [event.Tracer]); a call whose span
// does not record tells the service that t wants none of its phases (see
// [Tracer.BeginCall]), which then begins none. The attributes are
// set once a span is started, and only on a span that records; the sampler sees the
// span's name, kind and parent.
func (t *Tracer) Begin(ctx context.Context, p event.Phase) (context.Context, func(error)) {
	parent := trace.SpanFromContext(ctx)
	psc := parent.SpanContext() // ctx's span context, read once
	if parent != noSpan && !parent.IsRecording() && (!psc.IsValid() || !psc.IsRemote()) {
		// Within a span of this process that does not record: one that was not
		// sampled, or a no-op provider's.
		return ctx, nil
	}
	var span trace.Span
	switch p.Step {
	case event.StepCall:
		opts := callOptions
		if psc.IsValid() && !psc.IsRemote() {
			opts = innerCallOptions
		}
		ctx, span = t.tracer.Start(ctx, "tollgate.call", opts...)
		if !span.IsRecording() {
			return ctx, nil
		}
		span.SetAttributes(ChannelKey.String(p.Channel))
		ctx = context.WithValue(ctx, callKey{}, span)
	case event.StepRun:
		ctx, span = t.tracer.Start(ctx, p.API)
		if !span.IsRecording() {
			return ctx, nil
		}
		span.SetAttributes(semconv.RPCMethod(p.API))
		return ctx, endRun(span)
	case event.StepStore:
		if !psc.IsValid() {
			return ctx, nil // the background work of a store
		}
		ctx, span = t.tracer.Start(ctx, storeSpanName(&p), clientOptions...)
		if !span.IsRecording() {
			return ctx, nil
		}
		span.SetAttributes(storeAttributes(&p)...)
	default:
		name := "tollgate.unknown"
		if int(p.Step) < len(phaseNames) {
			name = phaseNames[p.Step]
		}
		ctx, span = t.tracer.Start(ctx, name)
		if !span.IsRecording() {
			return ctx, nil
		}
	}
	return ctx, ender(span)
}

// BeginCall begins a call's phase as Begin does (see [event.CallTracer]), and reports
// whether t wants the phases within it: only if the call's span records, since a
// phase begun within a span that does not record makes no span.
func (t *Tracer) BeginCall(ctx context.Context, p event.Phase) (context.Context, func(error), bool) {
	ctx, end := t.Begin(ctx, p)
	return ctx, end, end != nil
}

// ender returns the function that ends span. (Apart from Begin, so that only a span
// that records costs the closure.)
func ender(span trace.Span) func(error) { return func(err error) { end(span, err) } }

// endRun returns the function that ends the span of an API's run, with its code.
func endRun(span trace.Span) func(error) {
	return func(err error) {
		code := "ok"
		if err != nil {
			code = tollgate.CodeOf(err).String()
		}
		span.SetAttributes(semconv.RPCResponseStatusCode(code))
		end(span, err)
	}
}

// The options of the spans' starts, made once.
var (
	callOptions      = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}
	innerCallOptions = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal)}
	clientOptions    = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}
)

// phaseNames are the names of the spans of the other phases, by their step.
var phaseNames = [...]string{
	event.StepAuthenticate: "tollgate.authenticate",
	event.StepAdmit:        "tollgate.admit",
	event.StepSettle:       "tollgate.settle",
}

// noSpan is what trace.SpanFromContext returns for a context that carries no span.
var noSpan = trace.SpanFromContext(context.Background())

// end ends span with err's outcome: error.type names what failed (a Tollgate code, an
// SQLSTATE, a Go type), and the span's status is Error when the service or a store
// failed, unset when the caller did (a refusal, a rejection), as OpenTelemetry's
// conventions leave 4xx answers of a server. No error's message is recorded: a
// message may quote the caller's input.
func end(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		var e *tollgate.Error
		switch {
		case errors.As(err, &e):
			span.SetAttributes(semconv.ErrorTypeKey.String(e.Code.String()))
			if serverSide(e.Code) {
				span.SetStatus(codes.Error, e.Code.String())
			}
		default:
			typ := errorType(err)
			span.SetAttributes(semconv.ErrorTypeKey.String(typ))
			if sqlState(err) != "" || redisPrefix(err) != "" {
				span.SetAttributes(semconv.DBResponseStatusCode(typ))
			}
			span.SetStatus(codes.Error, typ)
		}
	}
	span.End()
}

// serverSide reports whether a call that ends with code failed on the service's side.
func serverSide(code tollgate.Code) bool {
	switch code {
	case tollgate.CodeInternal, tollgate.CodeAPIFailed, tollgate.CodeTimeout, tollgate.CodeUnavailable:
		return true
	}
	return false
}

// errorType names an error that is not the call pipeline's, for error.type: its
// SQLSTATE, for PostgreSQL's error; its prefix ("NOSCRIPT"), for Redis's; "timeout" or
// "canceled" for a context's; else its Go type.
func errorType(err error) string {
	if state := sqlState(err); state != "" {
		return state
	}
	if prefix := redisPrefix(err); prefix != "" {
		return prefix
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return fmt.Sprintf("%T", err)
}

// sqlState returns the SQLSTATE of a database's error in err's chain (pgconn.PgError
// has one), or "".
func sqlState(err error) string {
	var e interface{ SQLState() string }
	if errors.As(err, &e) {
		return e.SQLState()
	}
	return ""
}

// redisPrefix returns the prefix of a Redis error reply in err's chain (go-redis's
// errors have a RedisError method), the upper-case word that says what failed
// ("ERR", "NOSCRIPT", "WRONGTYPE"), or "".
func redisPrefix(err error) string {
	var e interface {
		error
		RedisError()
	}
	if !errors.As(err, &e) {
		return ""
	}
	word, _, _ := strings.Cut(e.Error(), " ")
	if word == "" || len(word) > 32 || strings.IndexFunc(word, func(r rune) bool { return (r < 'A' || r > 'Z') && r != '_' }) >= 0 {
		return "_OTHER"
	}
	return word
}

// storeSpanName names the span of a round trip as the database conventions do: its
// operation and the procedure it runs, else its operation, else the store.
func storeSpanName(p *event.Phase) string {
	switch {
	case p.Operation == "":
		return p.Store
	case p.Procedure != "":
		return p.Operation + " " + p.Procedure
	}
	return p.Operation
}

// storeAttributes are the database conventions' attributes of a round trip.
func storeAttributes(p *event.Phase) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 5)
	attrs = append(attrs, semconv.DBSystemNameKey.String(p.Store))
	if p.Operation != "" {
		attrs = append(attrs, semconv.DBOperationName(p.Operation))
	}
	if p.Procedure != "" {
		attrs = append(attrs, semconv.DBStoredProcedureName(p.Procedure))
	}
	if p.Statement != "" {
		attrs = append(attrs, semconv.DBQueryText(p.Statement))
	}
	if p.Batch > 1 {
		attrs = append(attrs, semconv.DBOperationBatchSize(p.Batch))
	}
	return attrs
}

// Observe completes the span of a call with what it did, once it finished or was
// refused: the key's id, the plan, what it was charged and what became of the charge,
// and the account's id with [Options.AccountIDs]. Events of calls that no span of t
// covers are ignored.
func (t *Tracer) Observe(ctx context.Context, e event.Event) {
	span, ok := ctx.Value(callKey{}).(trace.Span)
	if !ok || !span.IsRecording() {
		return
	}
	var key, account, plan string
	switch e := e.(type) {
	case *event.Call:
		key, account, plan = e.Key, e.Account, e.Plan
		span.SetAttributes(CreditsChargedKey.Int64(e.Charged), SettlementKey.String(e.Settlement.String()))
	case *event.Refusal:
		key, account, plan = e.Key, e.Account, e.Plan
	default:
		return
	}
	attrs := make([]attribute.KeyValue, 0, 3)
	if key != "" {
		attrs = append(attrs, KeyIDKey.String(key))
	}
	if plan != "" {
		attrs = append(attrs, PlanKey.String(plan))
	}
	if t.accountIDs && account != "" {
		attrs = append(attrs, AccountIDKey.String(account))
	}
	span.SetAttributes(attrs...)
}
