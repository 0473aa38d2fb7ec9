// Package phasetest records the phases a tracer is told of (event.Tracer), for the
// tests of the hooks that begin them.
package phasetest

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/tollgate-dev/tollgate/event"
)

// A Phase is a phase a [Recorder] was told of: its description, the context value of
// [Key] it began under, and the error it ended with.
type Phase struct {
	event.Phase
	Under any
	Ended bool
	Err   error
}

// Key is the key of a context value that a Recorder notes for each phase.
type Key struct{}

// A Recorder is an event.Tracer that records the phases it is told of.
type Recorder struct {
	mu     sync.Mutex
	phases []*Phase
}

// Begin records p.
func (r *Recorder) Begin(ctx context.Context, p event.Phase) (context.Context, func(error)) {
	ph := &Phase{Phase: p, Under: ctx.Value(Key{})}
	r.mu.Lock()
	r.phases = append(r.phases, ph)
	r.mu.Unlock()
	return ctx, func(err error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		ph.Ended, ph.Err = true, err
	}
}

// Take returns the phases recorded, in the order they began, and forgets them.
func (r *Recorder) Take() []Phase {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Phase, len(r.phases))
	for i, p := range r.phases {
		out[i] = *p
	}
	r.phases = nil
	return out
}

// How a [Failing] tracer fails.
const (
	NilEnd       = "nil end"        // Begin returns a nil context and a nil end
	PanicInBegin = "panic in Begin" // Begin panics
	PanicInEnd   = "panic in end"   // the end panics
)

// Failing is an event.Tracer that fails as How says ([NilEnd], [PanicInBegin],
// [PanicInEnd]) in every phase, and counts the phases it was told of.
type Failing struct {
	How   string
	begun atomic.Int64
}

// Begin fails as f.How says.
func (f *Failing) Begin(ctx context.Context, _ event.Phase) (context.Context, func(error)) {
	f.begun.Add(1)
	switch f.How {
	case NilEnd:
		return nil, nil
	case PanicInBegin:
		panic("the tracer fails: " + f.How)
	}
	return ctx, func(error) { panic("the tracer fails: " + f.How) }
}

// Begun returns how many phases f was told of.
func (f *Failing) Begun() int64 { return f.begun.Load() }

// Failures are the ways a [Failing] tracer fails.
var Failures = []string{NilEnd, PanicInBegin, PanicInEnd}
