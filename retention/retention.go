// Package retention bounds how long a ledger keeps the entries of each call: a
// [Compaction] folds, in rounds that the host runs in the background, the entries of
// periods that ended more than a retention ago into per-account, per-period totals,
// through a store's [Compactor].
package retention

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"
)

// The defaults of [Options].
const (
	// DefaultRetention keeps a period's entries for 90 days after the period ended:
	// through the invoice of a monthly period and the disputes that follow it, and far
	// past any window in which a request id may still be settled or replayed.
	DefaultRetention = 90 * 24 * time.Hour
	DefaultBatch     = 1000
	DefaultRound     = 1_000_000
	// DefaultInterval is how often a host runs a round.
	DefaultInterval = time.Hour
)

// MinRetention is the shortest retention [Options.Check] accepts: longer than any
// window in which a request id may still be replayed (a reservation's life, an
// idempotency record's retention), so that a compaction never forgets a request that
// an answer still needs.
const MinRetention = 7 * 24 * time.Hour

// A Compactor folds a ledger's old entries into totals. Stores whose ledger keeps an
// entry per call for as long as they live implement it.
//
// Compact folds the entries of up to limit requests whose entries all belong to periods
// of their account that ended by before (a later period of the account started by
// then), and returns how many requests it folded: fewer than limit only when no more
// are due. It never folds the entries of a reservation that is open, and it changes no
// balance, usage count or answer of the ledger, except that a request it folded is no
// longer recognised as a replay (the ledger forgets it, as its contract allows after a
// bounded window). Any number of callers, on any instances, may compact at the same
// time as each other and as every other operation: each entry is folded once.
type Compactor interface {
	Compact(ctx context.Context, before time.Time, limit int) (int, error)
}

// Options are a [Compaction]'s optional settings. The zero value is the default.
type Options struct {
	// Retention is how long after its period ended an entry is kept: at least
	// [MinRetention]. Zero is [DefaultRetention].
	Retention time.Duration
	// Batch is the most requests one call of Compact folds. Zero is [DefaultBatch].
	Batch int
	// Round is the most requests one [Compaction.Compact] folds; the next round goes
	// on. Zero is [DefaultRound].
	Round int
	// Now is the clock: the service's. Nil is time.Now.
	Now func() time.Time
}

// Check returns an error that says which option is out of its bounds: none may be
// negative, and Retention, when set, must be at least [MinRetention].
func (o *Options) Check() error {
	switch {
	case o.Retention < 0 || o.Batch < 0 || o.Round < 0:
		return errors.New("retention: the retention, the batch and the round must not be negative")
	case o.Retention != 0 && o.Retention < MinRetention:
		return fmt.Errorf("retention: a retention of %s is shorter than the minimum, %s: entries must outlive every replay of their requests", o.Retention, MinRetention)
	}
	return nil
}

// A Compaction runs rounds of compaction on a store. It is safe for concurrent use,
// and instances that share a store may each run one.
type Compaction struct {
	store     Compactor
	retention time.Duration
	batch     int
	round     int
	now       func() time.Time
}

// New returns a Compaction of store's ledger. opts may be nil.
func New(store Compactor, opts *Options) (*Compaction, error) {
	if store == nil {
		return nil, errors.New("retention: New needs the store to compact")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if err := o.Check(); err != nil {
		return nil, err
	}
	c := &Compaction{store: store, retention: cmp.Or(o.Retention, DefaultRetention),
		batch: cmp.Or(o.Batch, DefaultBatch), round: cmp.Or(o.Round, DefaultRound), now: o.Now}
	if c.now == nil {
		c.now = time.Now
	}
	return c, nil
}

// Compact runs one round: it folds the entries of periods that ended more than the
// retention ago, Batch requests at a time, until none is due or it folded Round, and
// returns how many requests it folded.
func (c *Compaction) Compact(ctx context.Context) (int64, error) {
	before := c.now().Add(-c.retention)
	var total int64
	for total < int64(c.round) {
		limit := min(c.batch, c.round-int(total))
		n, err := c.store.Compact(ctx, before, limit)
		total += int64(n)
		if err != nil {
			return total, err
		}
		if n < limit {
			break
		}
	}
	return total, nil
}
