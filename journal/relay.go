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
	// stores, and must stay shorter than the time the audit log and the webhook outbox
	// remember an ID (webhook.ReplayWindow, 7 days), so that a change published that late
	// is not stored twice. Zero is [DefaultMaxAge].
	MaxAge time.Duration
	// Page is the most entries the relay claims at once, 1 to [MaxClaim]. Zero is
	// [DefaultPage].
	Page int
	// Round is the most entries one [Relay.Relay] publishes from each journal; the next
	// round goes on. Zero is [DefaultRound].
	Round int
	// Now is the clock: the service's. Nil is time.Now.
	Now func() time.Time
	// Logger receives the entries removed unpublished. Nil is slog.Default().
	Logger *slog.Logger
}

// RelayStats counts what a Relay did since it was made.
type RelayStats struct {
	// Published counts the entries published and removed; Deferred the entries
	// published that an observer deferred (left in the journal, published again once
	// their claim ends).
	Published, Deferred int64
	// Dropped counts the entries removed unpublished: older than MaxAge, or not
	// readable. Each was logged at ERROR.
	Dropped int64
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

	// mu serializes the rounds, and guards quiet (no round publishes before it) and
	// backoff (the wait after the last round that an observer deferred).
	mu      sync.Mutex
	quiet   time.Time
	backoff time.Duration

	published, deferred, dropped atomic.Int64
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
	if o.Grace < 0 || o.Lease < 0 || o.MaxAge < 0 || o.Page < 0 || o.Round < 0 {
		return nil, errors.New("journal: RelayOptions: Grace, Lease, MaxAge, Page and Round must not be negative")
	}
	r := &Relay{bus: bus, journals: slices.Clone(journals),
		grace: cmp.Or(o.Grace, DefaultGrace), lease: cmp.Or(o.Lease, DefaultLease), maxAge: cmp.Or(o.MaxAge, DefaultMaxAge),
		page: cmp.Or(o.Page, DefaultPage), round: cmp.Or(o.Round, DefaultRound), now: o.Now, log: o.Logger}
	if r.page > MaxClaim {
		return nil, fmt.Errorf("journal: RelayOptions.Page is %d; give 1 to %d", r.page, MaxClaim)
	}
	if r.maxAge <= r.grace {
		return nil, fmt.Errorf("journal: RelayOptions.MaxAge (%s) must be longer than Grace (%s)", r.maxAge, r.grace)
	}
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
// IDs of those to remove (published or dropped), how many of them it published, and
// whether it stopped at a deferred one.
func (r *Relay) publish(ctx context.Context, es []Entry, now time.Time) (done []string, published int64, stopped bool) {
	slices.SortFunc(es, func(a, b Entry) int { return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.ID, b.ID)) })
	for _, e := range es {
		c, err := Decode(e)
		switch {
		case err != nil:
			r.drop(ctx, e, nil, err)
		case e.At.Before(now.Add(-r.maxAge)):
			r.drop(ctx, e, c, nil)
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

// drop counts and logs an entry removed unpublished: c is what it holds, nil when it
// could not be read (err says why).
func (r *Relay) drop(ctx context.Context, e Entry, c *event.Change, err error) {
	r.dropped.Add(1)
	if c == nil {
		r.log.ErrorContext(ctx, "tollgate: a journal entry cannot be read; it is removed unpublished",
			"id", e.ID, "at", e.At, "error", err)
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
	return RelayStats{Published: r.published.Load(), Deferred: r.deferred.Load(), Dropped: r.dropped.Load()}
}
