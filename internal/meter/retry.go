package meter

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/store"
)

// A retryQueue retries, in the background and one at a time, the closings that a store
// could not take when they were due: keeping or refunding a call's charge, freeing its
// slot. Nothing depends on it for correctness. A reservation that is never settled is
// voided at its expiry, which gives its credits back, and a slot that is never freed
// comes back when its lease ends; the queue only makes the outcome come sooner and
// keeps the charge of a call that succeeded while the store blinked.
//
// It is bounded: it holds at most size closings, and a closing that finds it full is
// left to expiry. It has at most one goroutine, started when a closing is queued and
// gone when the queue is empty, so an outage adds no goroutine per request. Its worker
// tries the closings in the order they came, waits while the store still fails (from
// first, doubling up to max), and drops a closing whose reservation has expired, since
// the store voids it then.
type retryQueue struct {
	log        *slog.Logger
	now        func() time.Time
	size       int
	first, max time.Duration

	mu      sync.Mutex
	items   []retry
	running bool
	closed  bool
	full    bool // the last closing added found the queue full
	stop    chan struct{}
	done    chan struct{} // closed when the running worker exits
}

// A retry is one closing to try again.
type retry struct {
	what    string
	expires time.Time // when the store voids the reservation; the retry is moot after it
	op      func(context.Context) error
}

func newRetryQueue(log *slog.Logger, now func() time.Time, size int) *retryQueue {
	return &retryQueue{log: log, now: now, size: size, first: time.Second, max: 15 * time.Second,
		stop: make(chan struct{})}
}

// add queues r, or leaves it to expiry if the queue is full or closed.
func (q *retryQueue) add(r retry) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || len(q.items) >= q.size {
		// Logged when the queue fills up, not for every closing after that.
		if !q.full && !q.closed {
			q.log.Warn("billing: the retries of closings are full; the closings that do not fit are left to expiry: the reservations are voided (their credits given back) when they expire, the slots freed when their leases end",
				"queued", len(q.items))
		}
		q.full = true
		return
	}
	q.full = false
	q.items = append(q.items, r)
	if !q.running {
		q.running = true
		q.done = make(chan struct{})
		go q.work(q.done)
	}
}

// work runs rounds until the queue is empty or closed.
func (q *retryQueue) work(done chan struct{}) {
	defer close(done)
	wait := q.first
	for {
		timer := time.NewTimer(wait)
		select {
		case <-q.stop:
			timer.Stop()
			return
		case <-timer.C:
		}
		progressed, empty := q.round()
		if empty {
			return
		}
		if progressed {
			wait = q.first
		} else {
			wait = min(2*wait, q.max)
		}
	}
}

// round tries the queued closings in order until the queue is empty (then the worker
// is no longer running) or one fails because the store is still unavailable.
func (q *retryQueue) round() (progressed, empty bool) {
	for {
		q.mu.Lock()
		if len(q.items) == 0 || q.closed {
			q.running = false
			q.mu.Unlock()
			return progressed, true
		}
		r := q.items[0]
		q.mu.Unlock()
		if !q.now().Before(r.expires) {
			q.log.Info("billing: a closing was not taken before its reservation expired: the store voids it", "operation", r.what)
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := r.op(ctx)
			cancel()
			if err != nil && !final(err) {
				return progressed, false
			}
		}
		q.mu.Lock()
		q.items = q.items[1:]
		q.mu.Unlock()
		progressed = true
	}
}

// final reports whether a closing's error is one a retry would meet again: done
// before, moot, or refused for good.
func final(err error) bool {
	return errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrConflict) ||
		errors.Is(err, billing.ErrVoided) || errors.Is(err, store.ErrInvalid)
}

// pending returns the number of queued closings.
func (q *retryQueue) pending() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

// close stops the worker and drops what is queued (left to expiry).
func (q *retryQueue) close() {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	q.closed = true
	close(q.stop)
	done := q.done
	q.mu.Unlock()
	if done != nil {
		<-done
	}
}

// Pending returns the number of closings (keeping or refunding a charge, freeing a
// slot) the Meter is still retrying in the background because a store could not take
// them when they were due. It is at most [Options.Retries].
func (m *Meter) Pending() int { return m.retry.pending() }

// Close stops the Meter's background retries. What they still held is left to expiry:
// the reservations are voided when they expire and the slots come back when their
// leases end. The Meter must not be used after Close.
func (m *Meter) Close() {
	if m.blocks != nil {
		// Give back what the blocks hold unspent, and record what their calls kept.
		ctx, cancel := context.WithTimeout(context.Background(), closeBlocksTimeout)
		if err := m.blocks.Close(ctx); err != nil {
			m.log.Warn("billing: the credit blocks were not all given back; the ledger voids them at their expiry", "error", err)
		}
		cancel()
	}
	m.retry.close()
}

// closeBlocksTimeout bounds how long Close waits for the credit blocks' last rolls.
const closeBlocksTimeout = 10 * time.Second
