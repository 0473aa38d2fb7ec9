package audit

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/internal/every"
)

// DefaultQueue is the default [LogOptions.Queue].
const DefaultQueue = 10_000

// DefaultPruneInterval is the longest default [LogOptions.PruneInterval].
const DefaultPruneInterval = time.Hour

// LogOptions configures a [Log]. The zero value is the default.
type LogOptions struct {
	// Queue is the most entries kept in memory while the store cannot take them (it is
	// down), to be retried in the background until it does. An entry recorded while
	// the queue is full is dropped: counted ([Log.Dropped]) and logged at WARN with
	// what it held. The default is [DefaultQueue].
	Queue int
	// Retention is how long the store keeps an entry: the log prunes the entries older
	// than that every PruneInterval. Zero (the default) keeps every entry.
	Retention time.Duration
	// PruneInterval is how often the log prunes the store, with Retention set: once at
	// NewLog, then at this interval, so an entry outlives the retention by at most one
	// interval. Any number of instances may prune the same store. The default is a
	// tenth of Retention, at least a second and at most [DefaultPruneInterval]; a
	// negative value turns the schedule off (call [Log.Prune] yourself then).
	// [Log.Close] stops it.
	PruneInterval time.Duration
	// Now returns the current time, for the prune. The default is time.Now.
	Now func() time.Time
	// Logger receives the entries the store lost and the failures of prunes. The
	// default is slog.Default().
	Logger *slog.Logger
}

// A Log is the audit log of a service: an [event.Observer] that appends an [Entry] to
// its store for every change of an account, a key, credits, a session or an account's
// webhook endpoint ([Log.Kinds]), once the change is stored. (The changes of an
// operator's webhook endpoints, which are no account's, are not recorded.) The change's goroutine waits for one attempt of at most
// two seconds; an entry the store cannot take is queued (see [LogOptions.Queue]) and
// retried in the background with backoff, and [Log.Close] makes a last attempt. Each
// entry has the change's ID, so a retry after an append whose outcome is unknown stores
// it once, and so does a replayed idempotent change. An entry is never lost while its
// queue has room; one that is lost is logged with everything it held, which is never a
// key value. A change whose entry was queued rather than stored is deferred
// ([event.Change.Defer]): where the service keeps a journal of its changes (package
// journal), it is published again later, so that an instance that dies with entries
// in its queue loses none of them.
//
// Subscribe it to a service's events:
//
//	log := audit.NewLog(store, nil)
//	svc.Events().Subscribe(log, log.Kinds()...)
type Log struct {
	store     Store
	q         *queue
	log       *slog.Logger
	now       func() time.Time
	retention time.Duration
	stopPrune func()
	closeOnce sync.Once
}

// NewLog returns a Log that appends to store. opts may be nil.
func NewLog(store Store, opts *LogOptions) *Log {
	if opts == nil {
		opts = &LogOptions{}
	}
	l := &Log{store: store, log: opts.Logger, now: opts.Now, retention: max(opts.Retention, 0)}
	if l.log == nil {
		l.log = slog.Default()
	}
	if l.now == nil {
		l.now = time.Now
	}
	size := opts.Queue
	if size <= 0 {
		size = DefaultQueue
	}
	l.q = newQueue(store, l.log, size)
	if interval := opts.PruneInterval; l.retention > 0 && interval >= 0 {
		if interval == 0 {
			interval = every.TenthOf(l.retention, DefaultPruneInterval)
		}
		l.stopPrune = every.StartNow(interval, every.Chore{Do: l.Prune,
			Failed: "audit: cannot prune the audit log; the next prune tries again",
			Done:   "audit: pruned the audit log's entries older than the retention",
			Attrs:  []any{"retention", l.retention.String()},
		}.Run(l.log))
	}
	return l
}

// Kinds returns the kinds of events the log records.
func (l *Log) Kinds() []event.Kind {
	return []event.Kind{event.AccountCreated, event.KeyCreated, event.KeyRotated, event.KeyUpdated,
		event.KeyRevoked, event.CreditsAdjusted, event.SessionStarted, event.SessionEnded,
		event.AccountSuspended, event.AccountReactivated, event.AccountClosed, event.AccountDeleted, event.PlanChanged,
		event.EndpointCreated, event.EndpointUpdated, event.EndpointRotated, event.EndpointDisabled, event.EndpointEnabled,
		event.EndpointDeleted}
}

// Observe records e, if it is a change the log records (see [Log.Kinds]).
func (l *Log) Observe(ctx context.Context, e event.Event) {
	c, ok := e.(*event.Change)
	if !ok {
		return
	}
	entry, ok := entryOf(c)
	if ok && l.q.add(ctx, entry) {
		// Queued, not stored: a journal that keeps the change keeps it until it is
		// published again, and stored once by its ID.
		c.Defer()
	}
}

// entryOf returns the entry that records c, and false for a change the log does not
// record: one of a kind it does not know, or a change of an operator's webhook
// endpoint, which is no account's (an entry is an account's).
func entryOf(c *event.Change) (Entry, bool) {
	if c.Account == "" {
		return Entry{}, false
	}
	e := Entry{ID: c.ID, At: c.At, Actor: c.Actor.ID, Addr: c.Actor.Addr, Account: c.Account, Target: c.Key}
	if e.Actor == "" {
		e.Actor = Host
	}
	if e.ID == "" {
		e.ID = rand.Text()
	}
	switch c.Type {
	case event.AccountCreated:
		e.Action, e.After, e.Credits = AccountCreate, c.After, c.Credits
	case event.KeyCreated:
		e.Action, e.After = KeyCreate, c.After
	case event.KeyRotated:
		e.Action = KeyRotate
	case event.KeyRevoked:
		e.Action = KeyRevoke
	case event.KeyUpdated:
		e.Action, e.Before, e.After = KeyUpdate, c.Before, c.After
		if c.OldName != c.Name {
			e.Reason = fmt.Sprintf("name: %s -> %s", c.OldName, c.Name)
		}
	case event.CreditsAdjusted:
		e.Action, e.Credits, e.Reason = CreditsAdjust, c.Credits, c.Reason
	case event.SessionStarted:
		e.Action, e.Target, e.Reason = SessionStart, c.Session, c.Reason
	case event.SessionEnded:
		e.Action, e.Target = SessionEnd, c.Session
	case event.AccountSuspended:
		e.Action, e.Reason = AccountSuspend, c.Reason
	case event.AccountReactivated:
		e.Action, e.Reason = AccountReactivate, c.Reason
	case event.AccountClosed:
		e.Action, e.Reason = AccountClose, c.Reason
	case event.AccountDeleted:
		e.Action = AccountDelete
	case event.PlanChanged:
		e.Action, e.Reason = PlanChange, c.Reason
		e.Before, _ = json.Marshal(map[string]string{"plan": c.OldPlan})
		e.After, _ = json.Marshal(map[string]any{"plan": c.Plan, "effective_at": c.Effective.UTC()})
	case event.EndpointCreated:
		e.Action, e.Target, e.After = EndpointCreate, c.Endpoint, c.After
	case event.EndpointUpdated:
		e.Action, e.Target, e.Before, e.After = EndpointUpdate, c.Endpoint, c.Before, c.After
	case event.EndpointRotated:
		e.Action, e.Target = EndpointRotate, c.Endpoint
		e.After, _ = json.Marshal(map[string]any{"previous_secret_until": c.Effective.UTC()})
	case event.EndpointDisabled:
		e.Action, e.Target, e.Reason = EndpointDisable, c.Endpoint, c.Reason
	case event.EndpointEnabled:
		e.Action, e.Target = EndpointEnable, c.Endpoint
	case event.EndpointDeleted:
		e.Action, e.Target, e.Before = EndpointDelete, c.Endpoint, c.Before
	default:
		return Entry{}, false
	}
	return e, true
}

// Store returns the store the log appends to.
func (l *Log) Store() Store { return l.store }

// Pending returns the number of entries that the store could not take when they were
// recorded and that the log is still retrying in the background. It is at most
// [LogOptions.Queue].
func (l *Log) Pending() int { return l.q.pending() }

// Dropped returns the number of entries that the store will never hold: recorded while
// [LogOptions.Queue] entries were already waiting for it, still waiting when
// [Log.Close] made its last attempt, or refused by it as invalid. Each was logged (at
// WARN, or at ERROR for an invalid one) with everything it held. The changes they
// record are stored all the same.
func (l *Log) Dropped() int64 { return l.q.droppedCount() }

// Prune deletes the entries older than [LogOptions.Retention] now, and returns how
// many it deleted. It does nothing without a retention. Its error is the store's
// (store.ErrUnavailable while it is down). Any number of instances may prune the same
// store at once: each deletes what the others have not.
func (l *Log) Prune(ctx context.Context) (int64, error) {
	if l.retention <= 0 {
		return 0, nil
	}
	n, err := l.store.Prune(ctx, l.now().Add(-l.retention))
	if err != nil {
		return n, fmt.Errorf("audit: prune the audit log: %w", err)
	}
	return n, nil
}

// Close stops the prune schedule and the background retries, then makes a last attempt
// of a few seconds for the queued entries; those the store still does not take are
// dropped, counted and logged. Entries recorded after Close are still appended, but
// not queued. It does not close the store.
func (l *Log) Close() {
	l.closeOnce.Do(func() {
		if l.stopPrune != nil {
			l.stopPrune()
		}
		l.q.close()
	})
}
