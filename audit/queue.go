package audit

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/store"
)

// Bounds of the audit queue's work.
const (
	// appendBound bounds one append to the audit store. An append that times out may
	// still have landed; the entry's ID makes its retry store nothing then.
	appendBound = 2 * time.Second
	// closeBound bounds the last attempt that Close makes for queued entries.
	closeBound = 5 * time.Second
	// appendBatch is the most queued entries one append carries.
	appendBatch = 100
	// The worker waits retryFirst after a failure, doubling up to retryMax.
	retryFirst = time.Second
	retryMax   = 30 * time.Second
)

// A queue appends a [Log]'s entries to the audit store, and keeps those
// the store cannot take (it is down, or slow) to retry them in the background until it
// takes them. The management call whose change an entry records never waits for more
// than one attempt, and never fails for its entry: the change is already stored.
//
// It is bounded: it holds at most size entries, and one that finds it full is dropped,
// counted and logged at WARN with everything it held (an entry holds no key value), so
// that the log keeps what the audit store lost. It has at most one goroutine, started
// when an entry is queued and gone when the queue is empty. While entries are queued,
// new ones join the queue behind them rather than try the store first: the call does not
// wait on a store that is known to be down, and entries reach the store in the order
// they were recorded. Every entry carries an ID, so an append retried after an attempt
// whose outcome is unknown stores it once.
type queue struct {
	store Store
	log   *slog.Logger
	size  int
	// first and max bound the worker's wait between failed rounds.
	first, max time.Duration

	ctx    context.Context // cancelled by close: stops the worker and its append
	cancel context.CancelFunc

	mu      sync.Mutex
	items   []Entry
	dropped int64
	running bool          // a worker runs
	done    chan struct{} // closed when the running worker exits
	closed  bool
}

func newQueue(s Store, log *slog.Logger, size int) *queue {
	ctx, cancel := context.WithCancel(context.Background())
	return &queue{store: s, log: log, size: size, first: retryFirst, max: retryMax, ctx: ctx, cancel: cancel}
}

// add stores e, or queues it if the store cannot take it now, and reports whether it
// did not store it for a reason a later attempt may not have: it queued e, or dropped
// it because the queue was full or closed (an entry the store refuses as invalid is
// not one). ctx carries the request's values (for the logger) but not its end: a
// change that is stored is recorded even if its client has gone.
func (q *queue) add(ctx context.Context, e Entry) (deferred bool) {
	ctx = context.WithoutCancel(ctx)
	if err := e.Validate(); err != nil {
		q.countDrop()
		q.lose(ctx, slog.LevelError, "audit: the audit log cannot hold an entry; the change itself is stored", e, err)
		return false
	}
	q.mu.Lock()
	if len(q.items) > 0 && !q.closed {
		q.queueLocked(ctx, e, nil)
		q.mu.Unlock()
		return true
	}
	q.mu.Unlock()
	actx, cancel := context.WithTimeout(ctx, appendBound)
	err := q.store.Append(actx, e)
	cancel()
	switch {
	case err == nil:
		return false
	case errors.Is(err, store.ErrInvalid):
		q.countDrop()
		q.lose(ctx, slog.LevelError, "audit: the audit log refused an entry as invalid; the change itself is stored", e, err)
		return false
	}
	q.mu.Lock()
	q.queueLocked(ctx, e, err)
	q.mu.Unlock()
	return true
}

// queueLocked queues e, behind the entries queued before it, and starts the worker;
// or drops e when the queue is full or closed. cause is the store's error, if the
// store refused e itself. q.mu is held.
func (q *queue) queueLocked(ctx context.Context, e Entry, cause error) {
	switch {
	case q.closed:
		q.dropped++
		q.lose(ctx, slog.LevelWarn, "audit: the audit log did not take an entry after it was closed; it is dropped, the change itself is stored", e, cause)
		return
	case len(q.items) >= q.size:
		q.dropped++
		q.lose(ctx, slog.LevelWarn, "audit: the audit queue is full while the audit log is unavailable; an entry is dropped, the change itself is stored (raise audit.LogOptions.Queue to keep more)", e, cause,
			"queued", len(q.items))
		return
	}
	if len(q.items) == 0 {
		q.log.WarnContext(ctx, "audit: the audit log is unavailable; its entries are queued and retried in the background until it takes them",
			"error", cause, "capacity", q.size)
	}
	q.items = append(q.items, e)
	if !q.running {
		q.running = true
		q.done = make(chan struct{})
		go q.work(q.done)
	}
}

// lose logs an entry that the audit log will not hold, with every field it has, at
// level; the caller has counted it if it must be.
func (q *queue) lose(ctx context.Context, level slog.Level, msg string, e Entry, cause error, attrs ...any) {
	var addr string
	if e.Addr.IsValid() {
		addr = e.Addr.String()
	}
	attrs = append(attrs, "id", e.ID, "at", e.At, "actor", e.Actor, "action", string(e.Action), "account", e.Account,
		"target", e.Target, "before", string(e.Before), "after", string(e.After), "credits", e.Credits,
		"address", addr, "reason", e.Reason)
	if cause != nil {
		attrs = append(attrs, "error", cause)
	}
	q.log.Log(ctx, level, msg, attrs...)
}

// work retries the queued entries until the queue is empty or closed, waiting between
// failed rounds from q.first, doubling up to q.max.
func (q *queue) work(done chan struct{}) {
	defer close(done)
	wait := q.first
	for {
		timer := time.NewTimer(wait)
		select {
		case <-q.ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		progressed, err := q.drain(q.ctx, true)
		if err == nil {
			return
		}
		if progressed {
			wait = q.first
		} else {
			wait = min(2*wait, q.max)
		}
	}
}

// drain appends the queued entries, oldest first and appendBatch at a time, until the
// queue is empty (nil) or the store fails (its error). It drops an entry the store
// refuses as invalid, which no retry fixes. With worker set, finding the queue empty
// ends the worker, under the same lock, so that the next queued entry starts another.
func (q *queue) drain(ctx context.Context, worker bool) (progressed bool, err error) {
	batch, took := appendBatch, 0
	for {
		q.mu.Lock()
		if len(q.items) == 0 {
			if worker {
				q.running = false
			}
			q.mu.Unlock()
			if took > 0 {
				q.log.Info("audit: the audit log is back and took the queued entries", "count", took)
			}
			return progressed, nil
		}
		n := min(len(q.items), batch)
		entries := slices.Clone(q.items[:n])
		q.mu.Unlock()

		actx, cancel := context.WithTimeout(ctx, appendBound)
		err := q.store.Append(actx, entries...)
		cancel()
		switch {
		case errors.Is(err, store.ErrInvalid) && n > 1:
			batch = 1 // find the entry it refuses: one at a time, for the rest of the round
			continue
		case errors.Is(err, store.ErrInvalid):
			q.countDrop()
			q.lose(ctx, slog.LevelError, "audit: the audit log refused a queued entry as invalid; it is dropped, the change itself is stored", entries[0], err)
		case err != nil:
			return progressed, err
		default:
			took += n
		}
		// Only drain removes entries, and add appends behind them: the first n are
		// still the ones appended.
		q.mu.Lock()
		q.items = q.items[n:]
		q.mu.Unlock()
		progressed = true
	}
}

// countDrop counts an entry that the audit log will never hold.
func (q *queue) countDrop() {
	q.mu.Lock()
	q.dropped++
	q.mu.Unlock()
}

// pending returns the number of queued entries.
func (q *queue) pending() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

// droppedCount returns the number of entries the audit log will never hold.
func (q *queue) droppedCount() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.dropped
}

// close stops the worker, then makes a last attempt, bounded by closeBound, to
// append the queued entries; those left are dropped, counted and logged. Entries
// recorded after close are still appended, but not queued.
func (q *queue) close() {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	q.closed = true
	done := q.done
	q.mu.Unlock()
	q.cancel()
	if done != nil {
		<-done
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeBound)
	defer cancel()
	_, err := q.drain(ctx, false)
	if err == nil {
		return
	}
	q.mu.Lock()
	left := q.items
	q.items = nil
	q.dropped += int64(len(left))
	q.mu.Unlock()
	for _, e := range left {
		q.lose(ctx, slog.LevelWarn, "audit: the audit log did not take a queued entry before it closed; it is dropped, the change itself is stored", e, err)
	}
}
