// Package phasetest records the phases a tracer is told of (event.Tracer), for the
// tests of the hooks that begin them.
package phasetest

import (
	"context"
	"sync"

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
