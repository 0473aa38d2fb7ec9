package billing

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/tollgate-dev/tollgate/store"
)

// A retrier finishes, in the background, the settlements a store could not take when
// they were due: the slot and the refund of a call that ran while the store was down,
// and the undoing of an admission whose answer was lost (the store may have taken the
// credits and the slot before the connection broke). Each operation is idempotent, so
// retrying until the store answers is safe; an operation whose record does not exist
// (store.ErrNotFound: the admission in doubt never happened) is done, and one the store
// refuses for good (store.ErrConflict) is not retried.
type retrier struct {
	log      *slog.Logger
	first    time.Duration // the wait before the first attempt, so that a write still in flight lands first
	max      time.Duration // the longest wait between attempts
	attempts int
	pending  atomic.Int64
}

// do runs op in the background until it succeeds, is moot, or the attempts run out.
func (r *retrier) do(what string, op func(context.Context) error) {
	r.pending.Add(1)
	go func() {
		defer r.pending.Add(-1)
		wait := r.first
		var err error
		for range r.attempts {
			time.Sleep(wait)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err = op(ctx)
			cancel()
			if err == nil || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrConflict) {
				return // done, moot, or refused for good (a retry would be refused again)
			}
			wait = min(2*wait, r.max)
		}
		r.log.Error("billing: gave up retrying; the slot returns when its lease ends, a refund is lost", "operation", what, "error", err)
	}()
}

// Pending returns the number of settlements the Meter is still retrying in the
// background because a store could not take them when they were due.
func (m *Meter) Pending() int { return int(m.retry.pending.Load()) }
