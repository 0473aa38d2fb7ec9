package auth

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate/store"
)

// KeyExpiries is the listing of the keys that expire, which a [KeyStore] may offer
// beside its interface (every key store of this module does): what the service's
// webhooks sweep to send key.expired, for the keys nobody uses too.
//
// A key's expiry is the expiry of its restrictions; a primary key's is the earlier
// of its own and its account's (the account's restrictions are the primary key's,
// see [Key.Restrictions]). A sub-key's restrictions are within its account's, so it
// expires with its account at the latest. Expiries are kept, compared and returned to
// the microsecond: an expiry's nanoseconds beyond it are dropped (truncated).
type KeyExpiries interface {
	// ExpiringKeys returns a page of the expiries that q selects (see [ExpiryQuery]):
	// of the keys whose expiry is after q.From and at or before q.To, and that were
	// not revoked at or before it (a key revoked after its expiry is listed: it
	// expired first). They are in the order of their expiry, then of their key ids
	// (byte-wise), after q.After. A store may bound what one page examines: a page
	// then holds fewer than the limit, even none, with Next set; a listing goes on
	// until Next is zero. Every expiry in the window that holds throughout a listing
	// is listed once; one that a change makes or unmakes during it (a key created,
	// updated or revoked) may or may not be. It returns an error wrapping
	// [ErrBadExpiryQuery] for a query that is not valid.
	ExpiringKeys(ctx context.Context, q ExpiryQuery) (ExpiryPage, error)
}

// An ExpiryQuery selects a page of the expiries of keys, for
// [KeyExpiries.ExpiringKeys].
type ExpiryQuery struct {
	// From and To bound the window: the expiries after From and at or before To,
	// both to the microsecond. To must be set, and not before From; a zero From
	// starts with the earliest expiry.
	From, To time.Time
	// After continues a listing: the [ExpiryPage.Next] of the page before. The zero
	// cursor starts at From.
	After ExpiryCursor
	// Limit is the most expiries a page holds: 0 means [DefaultExpiryPage]; less
	// than 0 or more than [MaxExpiryPage] is invalid.
	Limit int
}

// Bounds of [ExpiryQuery.Limit].
const (
	DefaultExpiryPage = 100
	MaxExpiryPage     = 500
)

// An ExpiryCursor names a place in a listing of expiries: the expiries after it are
// those of a later instant, or of the same instant and a key id after Key.
type ExpiryCursor struct {
	At  time.Time
	Key string
}

// IsZero reports whether c is the zero cursor: the start of a listing.
func (c ExpiryCursor) IsZero() bool { return c.At.IsZero() && c.Key == "" }

// Before reports whether an expiry of key at at comes before c, or is c: whether a
// listing after c leaves it out.
func (c ExpiryCursor) Before(at time.Time, key string) bool {
	return at.Before(c.At) || at.Equal(c.At) && key <= c.Key
}

// An Expiry is a key that expires, and when.
type Expiry struct {
	// Key is the key as it is stored.
	Key Key
	// At is its expiry, to the microsecond (see [KeyExpiries]).
	At time.Time
}

// An ExpiryPage is one page of expiries, in the order of their instants then of
// their key ids.
type ExpiryPage struct {
	Expiries []Expiry
	// Next is the cursor of the next page, for [ExpiryQuery.After]; the zero cursor
	// when no expiry follows in the window. A page may hold fewer than the limit,
	// even none, while Next is set.
	Next ExpiryCursor
}

// ErrBadExpiryQuery reports an [ExpiryQuery] that is not valid: no To, a To before
// From, or a limit below 0 or above [MaxExpiryPage]. It wraps store.ErrInvalid.
var ErrBadExpiryQuery = fmt.Errorf("auth: the expiry listing's query is not valid: %w", store.ErrInvalid)

// Check returns q with its instants to the microsecond, in UTC, and its page size:
// its Limit, or [DefaultExpiryPage] for 0. It returns an error wrapping
// [ErrBadExpiryQuery] for a query that is not valid.
func (q ExpiryQuery) Check() (ExpiryQuery, int, error) {
	switch {
	case q.To.IsZero():
		return q, 0, fmt.Errorf("%w: give the end of the window (To)", ErrBadExpiryQuery)
	case q.To.Before(q.From):
		return q, 0, fmt.Errorf("%w: the window ends (%s) before it begins (%s)", ErrBadExpiryQuery,
			q.To.UTC().Format(time.RFC3339Nano), q.From.UTC().Format(time.RFC3339Nano))
	case q.Limit < 0 || q.Limit > MaxExpiryPage:
		return q, 0, fmt.Errorf("%w: a page holds 1 to %d expiries, not %d", ErrBadExpiryQuery, MaxExpiryPage, q.Limit)
	}
	size := q.Limit
	if size == 0 {
		size = DefaultExpiryPage
	}
	q.From, q.To, q.After.At = Micro(q.From), Micro(q.To), Micro(q.After.At)
	return q, size, nil
}

// Micro returns t truncated to the microsecond, in UTC; the zero time stays zero.
func Micro(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Microsecond)
}

// ExpiryOf returns the expiry of a key whose restrictions are key's and whose
// account's are account's, to the microsecond (see [KeyExpiries]); zero for none.
func ExpiryOf(k *Key, account Restrictions) time.Time {
	own := k.Restrictions.ExpiresAt()
	if k.Primary {
		if a := account.ExpiresAt(); !a.IsZero() && (own.IsZero() || a.Before(own)) {
			own = a
		}
	}
	return Micro(own)
}

// Expires reports whether a key whose expiry is at (zero for none), revoked at
// revoked (zero for live), is listed in q's window: its expiry is in the window,
// after q's cursor, and it was not revoked at or before it (both to the
// microsecond). at must be to the microsecond, and q checked
// ([ExpiryQuery.Check]).
func (q *ExpiryQuery) Expires(key string, at, revoked time.Time) bool {
	switch {
	case at.IsZero() || !at.After(q.From) || at.After(q.To):
		return false
	case !revoked.IsZero() && !Micro(revoked).After(at):
		return false
	}
	return q.After.IsZero() || !q.After.Before(at, key)
}
