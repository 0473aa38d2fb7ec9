package event

import (
	"context"
	"fmt"
	"runtime/debug"
	"slices"
	"sync/atomic"
)

// A Tracer is told of each phase of the service's work as it begins, and of its end:
// a call, its authentication, its admission, each API it runs, its settlement, and
// (through the stores' hooks, see [StepStore]) each round trip to a store. Where an
// [Observer] hears of a call after the fact, a Tracer wraps the work: Begin returns
// the context the phase runs under, which it may have derived (a span of a trace,
// profiler labels, a deadline of its own), and the function that ends the phase with
// its outcome. The phases nest as the work does: a phase begun under the context of
// another is its child, so an API's handler, which runs under its Run phase's context,
// makes its own children of it.
//
// Begin runs on the goroutine of the work, before it starts, and end after it ends,
// on the same goroutine; both must return promptly and should not panic. end is called
// exactly once. Begin returns a nil end when it has nothing to do at the phase's end
// (it made no span): that costs the bus nothing, where an end costs it one allocation.
// The [Bus] guards the work against a tracer that fails: a nil context is taken for
// ctx itself, and a panic in Begin or in end is recovered and logged, the phase going
// on untraced by that tracer (see [Bus.Begin]); a call is answered and charged as
// without it. A phase's err is nil when it succeeded, else why it did not: an error of
// the call pipeline (package tollgate's *Error, with its code) or a store's error.
// Tracers are set on a [Bus] with [Bus.Trace]. A tracer that wants none of a call's
// inner phases (it traces only some calls) says so as the call begins, by being a
// [CallTracer], so that those phases cost nothing.
type Tracer interface {
	Begin(ctx context.Context, p Phase) (context.Context, func(err error))
}

// A CallTracer is a [Tracer] that says, as it begins a call, whether it wants to be
// told of the phases within it: the call's authentication, admission, runs and
// settlement, and the store round trips the service makes for it. The service begins a
// call's phase with [Bus.BeginCall], which asks this of each CallTracer once; when
// none of the bus's tracers wants them, the service begins none of the call's inner
// phases (their contexts are the call's, and nothing ends them). A tracer that is not
// a CallTracer wants them all. A CallTracer that wants none may still be told of them
// when another tracer of the bus wants them, so its Begin handles them as it would
// without this method; saying false only spares the bus and the tracer the work.
//
// BeginCall is Begin for a phase whose Step is [StepCall], with the same contract,
// and reports whether the tracer wants the phases begun under the context it returns
// (the call's). A CallTracer whose BeginCall panicked (the bus recovers it, as it does
// Begin's panics) counts as wanting none.
type CallTracer interface {
	Tracer
	BeginCall(ctx context.Context, p Phase) (pctx context.Context, end func(err error), within bool)
}

// TracerFunc is a function that is a [Tracer].
type TracerFunc func(ctx context.Context, p Phase) (context.Context, func(err error))

// Begin calls f.
func (f TracerFunc) Begin(ctx context.Context, p Phase) (context.Context, func(err error)) {
	return f(ctx, p)
}

// A Step is what a [Phase] is.
type Step uint8

// The steps.
const (
	// StepCall: a call of one API, of several (a GraphQL query) or a batch, from its
	// authentication to its answer. Its Channel is set. Its err is why the call was
	// refused before it ran; a call that ran ends with nil, whatever its APIs did
	// (each Run phase tells that).
	StepCall Step = iota + 1
	// StepAuthenticate: the check of the caller's credential (or key id) against the
	// key store, within a call or for a front door that authenticates its caller
	// first (Service.Authenticate in package tollgate).
	StepAuthenticate
	// StepAdmit: the admission of a call against its plan: rate limit, concurrency
	// slot, credit reservation, the check of a cached key.
	StepAdmit
	// StepRun: one API's run, its handler (and the fetch of a file given by its url);
	// API names it. The APIs of a GraphQL query run in parallel, each in a Run phase of
	// its own; a batch has one per item. The handler's context is the phase's.
	StepRun
	// StepSettle: the settlement of a call's charge: kept, or refunded for the APIs
	// that failed on the service's side.
	StepSettle
	// StepStore: one round trip to a store: a statement, a command, or a batch or
	// pipeline of them sent together. Store, Operation, Procedure, Statement and Batch
	// describe it. The service does not begin these phases itself: the hooks of the
	// stores that make round trips do (store/postgres's QueryTracer, store/redis's
	// Hook), with the context of the work that made it.
	StepStore

	numSteps
)

var stepNames = [numSteps]string{
	StepCall:         "call",
	StepAuthenticate: "authenticate",
	StepAdmit:        "admit",
	StepRun:          "run",
	StepSettle:       "settle",
	StepStore:        "store",
}

// String returns the step's stable name ("admit").
func (s Step) String() string {
	if s < numSteps && stepNames[s] != "" {
		return stepNames[s]
	}
	return "unknown"
}

// A Phase describes a phase of the service's work, for a [Tracer]. Which fields are
// set depends on its Step. No field ever holds a key's value, a call's input or its
// result.
type Phase struct {
	Step Step
	// Channel is the door a call came through (StepCall): "rest", "graphql", "mcp",
	// "batch", or "other".
	Channel Channel
	// API is the id of the API that a StepRun runs: always an API of the catalog.
	API string

	// Store names the store system of a round trip (StepStore), as OpenTelemetry's
	// db.system.name does: "postgresql", "redis".
	Store string
	// Operation is what the round trip sends: a SQL statement's first keyword
	// ("SELECT", "INSERT", "BEGIN"), a Redis command's name ("EVALSHA", "GET"),
	// "BATCH" for several statements sent together, "PIPELINE" for several commands.
	Operation string
	// Procedure names the stored procedure the round trip runs, when it runs one that
	// the store knows: the Lua script of an EVALSHA ("admit").
	Procedure string
	// Statement is the text of a SQL statement as the store sent it, with its
	// arguments as placeholders ($1); the store's own code, never a value. Empty for a
	// batch and for stores that send no text.
	Statement string
	// Batch is the number of statements or commands sent in the round trip, when it
	// sends more than one.
	Batch int
}

// tracerList are the tracers set on a Bus, in the order they were set. A list is never
// changed once published: a change publishes a new one.
type tracerList []*tracing

type tracing struct {
	t Tracer
	// panics counts the panics of t, recovered by the bus (see Bus.recovered).
	panics atomic.Int64
}

// Trace has t told of every phase begun on the bus (see [Bus.Begin]) from now on,
// until cancel is called. Phases begun before are not told to it, nor are their ends.
// With several tracers, each begins a phase under the context the previous one
// returned, and the ends run in the reverse order.
func (b *Bus) Trace(t Tracer) (cancel func()) {
	tr := &tracing{t: t}
	b.mu.Lock()
	defer b.mu.Unlock()
	var list tracerList
	if old := b.tracers.Load(); old != nil {
		list = slices.Clone(*old)
	}
	list = append(list, tr)
	b.tracers.Store(&list)
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		old := b.tracers.Load()
		if old == nil || !slices.Contains(*old, tr) {
			return
		}
		list := slices.DeleteFunc(slices.Clone(*old), func(x *tracing) bool { return x == tr })
		if len(list) == 0 {
			b.tracers.Store(nil)
			return
		}
		b.tracers.Store(&list)
	}
}

// Begin begins a phase: it tells p to the bus's tracers and returns the context the
// phase runs under and the function that ends it, which the caller calls exactly once
// with the phase's outcome. Without a tracer it costs one atomic load, allocates
// nothing, and returns ctx itself. A Bus is itself a [Tracer], so that a store's hook
// may be given a service's bus.
//
// A tracer that fails does not fail the work: a panic in its Begin or in its end is
// recovered, and the phase goes on under the context it was begun under, untraced by
// that tracer (a tracer whose Begin panicked is not told of the phase's end); a nil
// context is ctx. A tracer's nil end is no end: with one tracer, Begin then returns an
// end that allocates nothing; otherwise it allocates the end it returns, which
// recovers the tracers' panics. The bus logs the panics of a tracer to its Logger, with
// a stack: the first, then each time their number doubles (the 2nd, the 4th, the
// 8th...), with that number, since a tracer is told of every phase of every call.
func (b *Bus) Begin(ctx context.Context, p Phase) (context.Context, func(err error)) {
	pctx, end, _ := b.beginAll(ctx, p, false)
	return pctx, end
}

// BeginCall begins a call's phase (p's Step is [StepCall]) as [Bus.Begin] does, and
// reports whether any of the bus's tracers wants the phases within it (see
// [CallTracer]): a caller that is told false may begin none of the call's inner
// phases, as no tracer would act on them. Without a tracer it costs one atomic load
// and reports false. A Bus is itself a [CallTracer].
func (b *Bus) BeginCall(ctx context.Context, p Phase) (context.Context, func(err error), bool) {
	return b.beginAll(ctx, p, true)
}

// beginAll begins p with every tracer of the bus, as Begin says, and reports whether
// any wants the phases within it: for a call's phase (call), as BeginCall asks each
// tracer; for any other, true when the bus has a tracer.
func (b *Bus) beginAll(ctx context.Context, p Phase, call bool) (context.Context, func(err error), bool) {
	list := b.tracers.Load()
	if list == nil {
		return ctx, noEnd, false
	}
	step := p.Step // for the ends to capture, rather than the whole Phase
	if len(*list) == 1 {
		tr := (*list)[0]
		pctx, end, within := b.beginOne(ctx, tr, p, call)
		if end == nil {
			return pctx, noEnd, within
		}
		return pctx, func(err error) { b.end(ctx, tr, step, end, err) }, within
	}
	tracers := *list
	ends := make([]func(error), len(tracers))
	pctx := ctx
	wanted := false
	for i, tr := range tracers {
		var within bool
		pctx, ends[i], within = b.beginOne(pctx, tr, p, call)
		wanted = wanted || within
	}
	return pctx, func(err error) {
		for i := len(ends) - 1; i >= 0; i-- {
			if ends[i] != nil {
				b.end(ctx, tracers[i], step, ends[i], err)
			}
		}
	}, wanted
}

// beginOne begins p with tr: with beginCall for a call's phase (call), else with begin.
func (b *Bus) beginOne(ctx context.Context, tr *tracing, p Phase, call bool) (context.Context, func(error), bool) {
	if call {
		return b.beginCall(ctx, tr, p)
	}
	pctx, end := b.begin(ctx, tr, p)
	return pctx, end, true
}

// Guard returns t as a Tracer that fails nothing, as the tracers of a Bus do (see
// [Bus.Begin]): its panics are recovered and logged to slog.Default, its nil end and
// context taken for an end that does nothing and the context given. It is t itself if
// t is a *Bus. A nil t traces nothing. The stores' hooks guard the tracer they are
// given.
func Guard(t Tracer) Tracer {
	if b, ok := t.(*Bus); ok {
		return b
	}
	b := new(Bus)
	if t != nil {
		b.Trace(t)
	}
	return b
}

// begin tells p to tr under ctx, and returns the context the phase runs under and
// tr's end of it: ctx and nil when tr panicked or returned them nil.
func (b *Bus) begin(ctx context.Context, tr *tracing, p Phase) (pctx context.Context, end func(error)) {
	defer func() {
		if v := recover(); v != nil {
			b.recovered(ctx, tr, p.Step, "Begin", v)
			pctx, end = ctx, nil
		}
	}()
	pctx, end = tr.t.Begin(ctx, p)
	if pctx == nil {
		pctx = ctx
	}
	return pctx, end
}

// beginCall is begin for a call's phase, which also reports whether tr wants the
// phases within it: true unless tr is a [CallTracer] that says otherwise, or panicked.
func (b *Bus) beginCall(ctx context.Context, tr *tracing, p Phase) (pctx context.Context, end func(error), within bool) {
	ct, ok := tr.t.(CallTracer)
	if !ok {
		pctx, end = b.begin(ctx, tr, p)
		return pctx, end, true
	}
	defer func() {
		if v := recover(); v != nil {
			b.recovered(ctx, tr, p.Step, "BeginCall", v)
			pctx, end, within = ctx, nil, false
		}
	}()
	pctx, end, within = ct.BeginCall(ctx, p)
	if pctx == nil {
		pctx = ctx
	}
	return pctx, end, within
}

// end calls tr's end of a phase of step, begun under ctx, recovering from its panic.
func (b *Bus) end(ctx context.Context, tr *tracing, step Step, end func(error), err error) {
	defer func() {
		if v := recover(); v != nil {
			b.recovered(ctx, tr, step, "end", v)
		}
	}()
	end(err)
}

// recovered counts a panic of tr, recovered in its Begin or its end (in) of a phase
// of step, and logs it if it is its first or their number is a power of two.
func (b *Bus) recovered(ctx context.Context, tr *tracing, step Step, in string, v any) {
	n := tr.panics.Add(1)
	if n&(n-1) != 0 {
		return
	}
	b.logger().ErrorContext(ctx, "tollgate: a tracer panicked; the phase goes on untraced by it",
		"tracer", fmt.Sprintf("%T", tr.t), "step", step.String(), "in", in, "panic", fmt.Sprint(v),
		"panics", n, "stack", string(debug.Stack()))
}

// noEnd is the end of a phase that no tracer was told of.
func noEnd(error) {}
