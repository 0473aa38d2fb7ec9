package event

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
)

// An Observer is told of the events of the kinds it subscribed to, after the fact: the
// change is stored, the call answered or about to be. It runs on the goroutine of the
// change, so it returns promptly and never blocks on I/O that may hang: one that writes
// to a store queues the write, or bounds it (the audit log makes one bounded attempt,
// then queues). It cannot fail the change or the call; a panic is recovered and logged.
// One that keeps changes in a store and queued a [*Change] rather than store it before
// returning calls [Change.Defer], so that a change kept in a journal is published
// again later (see package journal).
//
// A [*Change] may be told more than once, under the same ID: when it is made, and
// again by the relay of a journal on any instance, after its instance died or was
// slower to publish it than the relay's grace, or after an observer deferred it. An
// observer that must act once per change skips the IDs it has seen ([Change.ID]); the
// service's own store a change once by its ID (the audit log, the webhook outbox) or
// act so that twice is once (the key cache forgets a key). Calls, refusals and sweeps
// are told once: no journal keeps them.
//
// ctx carries the request's values; it is canceled when the request ends, so work that
// outlives Observe detaches from it (context.WithoutCancel). The event and its slices
// belong to the service once Observe returns: copy what you keep.
type Observer interface {
	Observe(ctx context.Context, e Event)
}

// ObserverFunc is a function that is an [Observer].
type ObserverFunc func(ctx context.Context, e Event)

// Observe calls f.
func (f ObserverFunc) Observe(ctx context.Context, e Event) { f(ctx, e) }

// A Bus hands events to the observers subscribed to their kinds. Publishing reads the
// subscriptions without a lock, so a kind nobody wants costs one atomic load, and
// [Bus.Wants] lets a publisher skip building such an event. It also holds the tracers
// told of the phases of the work ([Bus.Trace], [Bus.Begin], [Bus.BeginCall]). The zero
// Bus is ready to use and logs a panicking observer or tracer to slog.Default; a Bus is
// safe for concurrent use.
type Bus struct {
	// Logger receives the panics of observers and of tracers. Nil is slog.Default().
	Logger *slog.Logger

	mu      sync.Mutex // serializes changes of subs and tracers
	subs    atomic.Pointer[table]
	tracers atomic.Pointer[tracerList] // nil: none (see Trace)
}

// table holds the observers of each kind. It is never changed once published: a change
// of subscriptions publishes a new table.
type table [numKinds][]*subscription

type subscription struct{ o Observer }

// Subscribe has o told of the events of the given kinds (of every kind, if none is
// given), in the order of subscription among the observers of a kind, until cancel is
// called. Subscribing the same observer twice tells it twice.
func (b *Bus) Subscribe(o Observer, kinds ...Kind) (cancel func()) {
	if len(kinds) == 0 {
		kinds = Kinds()
	}
	sub := &subscription{o: o}
	b.update(func(t *table) {
		for _, k := range kinds {
			if k > 0 && k < numKinds && !slices.Contains(t[k], sub) {
				t[k] = append(slices.Clip(t[k]), sub)
			}
		}
	})
	var once sync.Once
	return func() {
		once.Do(func() {
			b.update(func(t *table) {
				for k := range t {
					t[k] = slices.DeleteFunc(slices.Clone(t[k]), func(s *subscription) bool { return s == sub })
				}
			})
		})
	}
}

// update publishes a copy of the subscriptions that change has changed.
func (b *Bus) update(change func(*table)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var t table
	if old := b.subs.Load(); old != nil {
		t = *old
	}
	change(&t)
	b.subs.Store(&t)
}

// Wants reports whether any observer is subscribed to kind k, so that a publisher may
// skip building an event that nobody would be told of.
func (b *Bus) Wants(k Kind) bool {
	t := b.subs.Load()
	return t != nil && k < numKinds && len(t[k]) > 0
}

// Publish tells e to the observers of its kind, one after the other, and returns when
// they have all returned.
func (b *Bus) Publish(ctx context.Context, e Event) {
	t := b.subs.Load()
	if t == nil {
		return
	}
	k := e.Kind()
	if k >= numKinds {
		return
	}
	for _, sub := range t[k] {
		b.tell(ctx, sub.o, e)
	}
}

// tell calls o, recovering from its panic.
func (b *Bus) tell(ctx context.Context, o Observer, e Event) {
	defer func() {
		if v := recover(); v != nil {
			b.logger().ErrorContext(ctx, "tollgate: an event observer panicked; the change it observed stands",
				"event", e.Kind().String(), "observer", fmt.Sprintf("%T", o), "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		}
	}()
	o.Observe(ctx, e)
}

// logger returns the Logger, or slog.Default().
func (b *Bus) logger() *slog.Logger {
	if b.Logger != nil {
		return b.Logger
	}
	return slog.Default()
}
