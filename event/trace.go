package event

import (
	"context"
	"slices"
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
// on the same goroutine; both must return promptly and must not panic (the service
// does not recover them). end is called exactly once. A phase's err is nil when it
// succeeded, else why it did not: an error of the call pipeline (package tollgate's
// *Error, with its code) or a store's error. Tracers are set on a [Bus] with
// [Bus.Trace].
type Tracer interface {
	Begin(ctx context.Context, p Phase) (context.Context, func(err error))
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

type tracing struct{ t Tracer }

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
func (b *Bus) Begin(ctx context.Context, p Phase) (context.Context, func(err error)) {
	list := b.tracers.Load()
	if list == nil {
		return ctx, noEnd
	}
	if len(*list) == 1 {
		return (*list)[0].t.Begin(ctx, p)
	}
	ends := make([]func(error), len(*list))
	for i, tr := range *list {
		ctx, ends[i] = tr.t.Begin(ctx, p)
	}
	return ctx, func(err error) {
		for i := len(ends) - 1; i >= 0; i-- {
			ends[i](err)
		}
	}
}

// noEnd is the end of a phase that no tracer was told of.
func noEnd(error) {}
