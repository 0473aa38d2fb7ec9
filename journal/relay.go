package journal

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-dev/tollgate/event"
)

// The defaults of [RelayOptions].
const (
	DefaultGrace  = time.Minute
	DefaultLease  = time.Minute
	DefaultMaxAge = 72 * time.Hour
	DefaultPage   = 100
	DefaultRound  = 1000
)

// MaxBackoff is the longest a Relay waits, after a round whose entry an observer
// deferred, before it publishes again.
const MaxBackoff = 15 * time.Minute

// DedupWindow is how long, at the least, the observers that store a change once by its
// ID remember the ID: the webhook outbox keeps the message of a change under an ID
// derived from the change's for webhook.ReplayWindow (7 days). A change published again
// later than that after it was made could be enqueued, and delivered, twice; so a
// relay's MaxAge must be shorter ([RelayOptions.Check]). (The audit log remembers an
// entry's ID as long as its retention keeps the entry: give it a retention longer than
// MaxAge, or none.) The bound is a constant of this package, which does not import
// package webhook (the outbox is one observer of the bus among others, and not this
// package's concern); a test of this package checks that webhook.ReplayWindow is not
// shorter.
const DedupWindow = 7 * 24 * time.Hour

// unreadableMemory bounds the IDs of unreadable entries a Relay remembers having
// logged, so that each is logged once rather than at each claim.
const unreadableMemory = 1024

// RelayOptions are a [Relay]'s optional settings. The zero value is the default.
type RelayOptions struct {
	// Grace is how old an entry must be before the relay publishes it: longer than the
	// instance that made the change takes to publish it and remove it (its observers'
	// bounded attempts, a few seconds), plus the skew between the instances' clocks, so
	// that a change is not published again while it is being published. Zero is
	// [DefaultGrace].
	Grace time.Duration
	// Lease is how long a claim holds the entries the relay took, against the relays of
	// other instances: longer than a round takes to publish them. An entry that an
	// observer deferred is published again once it ends. Zero is [DefaultLease].
	Lease time.Duration
	// MaxAge bounds how long an entry is kept: one older than that when it is claimed
	// is removed without being published, and logged at ERROR with what it held (never
	// a key's value). It is the journal's bound, for entries that no observer ever
	// stores and for those that no relay of this release can read. It must be longer
	// than Grace and shorter than [DedupWindow], the time the webhook outbox remembers
	// an ID, so that a change published that late is not delivered twice. Zero is
	// [DefaultMaxAge].
	MaxAge time.Duration
	// Page is the most entries the relay claims at once, 1 to [MaxClaim]. Zero is
	// [DefaultPage].
	Page int
	// Round is the most entries one [Relay.Relay] publishes from each journal; the next
	// round goes on. Zero is [DefaultRound].
	Round int
	// Now is the clock: the service's. Nil is time.Now.
	Now func() time.Time
	// Logger receives the entries removed unpublished, and those left unread. Nil is
	// slog.Default().
	Logger *slog.Logger
}

// Check returns an error that says which option is out of its bounds: none may be
// negative, Page is at most [MaxClaim], and MaxAge (with its default) must be longer
// than Grace and shorter than [DedupWindow]. [NewRelay] checks its options with it.
func (o *RelayOptions) Check() error {
	if o.Grace < 0 || o.Lease < 0 || o.MaxAge < 0 || o.Page < 0 || o.Round < 0 {
		return errors.New("journal: RelayOptions: Grace, Lease, MaxAge, Page and Round must not be negative")
	}
	grace, maxAge := cmp.Or(o.Grace, DefaultGrace), cmp.Or(o.MaxAge, DefaultMaxAge)
	switch {
	case o.Page > MaxClaim:
		return fmt.Errorf("journal: RelayOptions.Page is %d; give 1 to %d", o.Page, MaxClaim)
	case maxAge <= grace:
		return fmt.Errorf("journal: RelayOptions.MaxAge (%s) must be longer than Grace (%s)", maxAge, grace)
	case maxAge >= DedupWindow:
		return fmt.Errorf("journal: RelayOptions.MaxAge (%s) must be shorter than %s, the time the webhook outbox remembers a change's ID (journal.DedupWindow): a change published later could be delivered twice", maxAge, DedupWindow)
	}
	return nil
}

// RelayStats counts what a Relay did since it was made.
type RelayStats struct {
	// Published counts the entries published and removed; Deferred the entries
	// published that an observer deferred (left in the journal, published again once
	// their claim ends).
	Published, Deferred int64
	// Dropped counts the entries removed unpublished, older than MaxAge (readable or
	// not). Each was logged at ERROR.
	Dropped int64
	// Unreadable counts the entries this release could not read ([ErrUnreadable]: a
	// later release wrote them, during a rolling upgrade) and left in the journal, for
	// the relay of a release that reads them to publish, once per claim: an entry left
	// is claimed again once its lease ends. Each was logged at WARN, once.
	Unreadable int64
}

// A Relay publishes again the changes that journals kept: those that the instance that
// made them did not publish and remove (it died, or an observer deferred them). Run
// one on every instance, at an interval (accounts.Manager does): each round claims the
// entries older than the grace that no other relay holds, publishes each on the bus
// with its own ID, and removes those that no observer deferred. The audit log and the
// webhook outbox store a change once by its ID, so a change published again is
// recorded once and sent once; other observers (the host's own) may be told of a
// change twice, and tell the repeats by [event.Change.ID].
//
// An entry that this release cannot read ([ErrUnreadable]: a later release wrote it,
// during a rolling upgrade) is left in the journal, unpublished, for the relays of the
// instances of that release; it is removed only once it is older than MaxAge, like an
// entry that is never stored.
//
// A round publishes a journal's entries oldest first and stops at the first that an
// observer deferred (its store fails: the rest would be deferred too). The rounds that
// follow a deferred entry do nothing for a while that doubles with each such round,
// from the lease up to [MaxBackoff], so that an observer whose store is down is not
// handed the same changes again and again while it holds them; a round that defers
// nothing ends the backoff. A Relay is safe for concurrent use.
type Relay struct {
	bus      *event.Bus
	journals []Store
	grace    time.Duration
	lease    time.Duration
	maxAge   time.Duration
	page     int
	round    int
	now      func() time.Time
	log      *slog.Logger

	// mu serializes the rounds, and guards quiet (no round publishes before it),
	// backoff (the wait after the last round that an observer deferred) and unread (the
	// IDs of the unreadable entries logged, at most unreadableMemory).
	mu      sync.Mutex
	quiet   time.Time
	backoff time.Duration
	unread  map[string]struct{}

	published, deferred, dropped, unreadable atomic.Int64
}

// NewRelay returns a Relay that publishes on bus the entries of journals. opts may be
// nil.
func NewRelay(bus *event.Bus, journals []Store, opts *RelayOptions) (*Relay, error) {
	if bus == nil {
		return nil, errors.New("journal: NewRelay needs the bus to publish on")
	}
	var o RelayOptions
	if opts != nil {
		o = *opts
	}
	if err := o.Check(); err != nil {
		return nil, err
	}
	r := &Relay{bus: bus, journals: slices.Clone(journals),
		grace: cmp.Or(o.Grace, DefaultGrace), lease: cmp.Or(o.Lease, DefaultLease), maxAge: cmp.Or(o.MaxAge, DefaultMaxAge),
		page: cmp.Or(o.Page, DefaultPage), round: cmp.Or(o.Round, DefaultRound), now: o.Now, log: o.Logger,
		unread: map[string]struct{}{}}
	if r.now == nil {
		r.now = time.Now
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	return r, nil
}

// Relay runs one round: it publishes the entries of each journal older than the grace,
// at most Round of each, and returns how many it published. Its error is the first
// journal's that failed; the others are still relayed. After a round whose entry an
// observer deferred, it does nothing until the backoff has passed (see [Relay]).
func (r *Relay) Relay(ctx context.Context) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.now().Before(r.quiet) {
		return 0, nil
	}
	var n int64
	var first error
	stopped := false
	for _, j := range r.journals {
		done, stop, err := r.relay(ctx, j)
		n += done
		stopped = stopped || stop
		if err != nil && first == nil {
			first = err
		}
	}
	if stopped {
		r.backoff = min(max(2*r.backoff, r.lease), MaxBackoff)
		r.quiet = r.now().Add(r.backoff)
	} else if first == nil {
		r.backoff = 0
	}
	return n, first
}

// relay runs a round on one journal, and returns how many entries it published and
// whether it stopped at one an observer deferred.
func (r *Relay) relay(ctx context.Context, j Store) (n int64, stopped bool, err error) {
	for taken := 0; taken < r.round; {
		now := r.now()
		limit := min(r.page, r.round-taken)
		es, err := j.Claim(ctx, now.Add(-r.grace), now, r.lease, limit)
		if err != nil {
			return n, false, fmt.Errorf("journal: claim entries: %w", err)
		}
		taken += len(es)
		done, published, stop := r.publish(ctx, es, now)
		n += published
		if len(done) > 0 {
			if err := j.Remove(ctx, done...); err != nil {
				// Published: they are published again once their claim ends, and stored
				// once by their ID.
				return n, stop, fmt.Errorf("journal: remove %d entries relayed: %w", len(done), err)
			}
		}
		if stop || len(es) < limit {
			return n, stop, nil
		}
	}
	return n, false, nil
}

// publish publishes es, oldest first, until an observer defers one, and returns the
// IDs of those to remove (published, or dropped for their age), how many of them it
// published, and whether it stopped at a deferred one. An entry it cannot read is left.
func (r *Relay) publish(ctx context.Context, es []Entry, now time.Time) (done []string, published int64, stopped bool) {
	slices.SortFunc(es, func(a, b Entry) int { return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.ID, b.ID)) })
	for _, e := range es {
		c, err := Decode(e)
		switch {
		case e.At.Before(now.Add(-r.maxAge)):
			r.drop(ctx, e, c, err)
		case err != nil:
			r.leave(ctx, e, err)
			continue
		default:
			r.bus.Publish(ctx, c)
			if c.Deferred() {
				r.deferred.Add(1)
				return done, published, true
			}
			r.published.Add(1)
			published++
		}
		done = append(done, e.ID)
	}
	return done, published, false
}

// leave counts an entry this release cannot read (err says why), left in the journal,
// and logs it unless it logged it already.
func (r *Relay) leave(ctx context.Context, e Entry, err error) {
	r.unreadable.Add(1)
	if _, ok := r.unread[e.ID]; ok {
		return
	}
	if len(r.unread) >= unreadableMemory {
		clear(r.unread)
	}
	r.unread[e.ID] = struct{}{}
	r.log.WarnContext(ctx, "tollgate: a journal entry cannot be read by this release (a later one wrote it?); it is left in the journal for a relay of a release that reads it",
		"id", e.ID, "at", e.At, "removed_after", e.At.Add(r.maxAge), "error", err)
}

// drop counts and logs an entry removed unpublished for its age: c is what it holds,
// nil when it could not be read (err says why).
func (r *Relay) drop(ctx context.Context, e Entry, c *event.Change, err error) {
	r.dropped.Add(1)
	delete(r.unread, e.ID)
	if c == nil {
		r.log.ErrorContext(ctx, "tollgate: a journal entry that this release cannot read was kept longer than its maximum age; it is removed unpublished",
			"max_age", r.maxAge.String(), "id", e.ID, "at", e.At, "error", err)
		return
	}
	var addr string
	if c.Actor.Addr.IsValid() {
		addr = c.Actor.Addr.String()
	}
	r.log.ErrorContext(ctx, "tollgate: a change kept in the journal longer than its maximum age was never published; it is removed unpublished",
		"max_age", r.maxAge.String(), "id", c.ID, "type", c.Type.String(), "at", c.At, "actor", c.Actor.ID, "address", addr,
		"account", c.Account, "key", c.Key, "plan", c.Plan, "old_plan", c.OldPlan, "credits", c.Credits, "reason", c.Reason,
		"before", string(c.Before), "after", string(c.After))
}

// Stats returns what the Relay did so far.
func (r *Relay) Stats() RelayStats {
	return RelayStats{Published: r.published.Load(), Deferred: r.deferred.Load(), Dropped: r.dropped.Load(),
		Unreadable: r.unreadable.Load()}
}
