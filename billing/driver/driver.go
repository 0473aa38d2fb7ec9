package driver

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// ErrInsufficientCredits is returned by [Ledger.Reserve] and [Ledger.Adjust] when the
// balance does not cover the amount. The balance is left unchanged.
var ErrInsufficientCredits = errors.New("billing: insufficient credits")

// ErrVoided is returned by [Ledger.Settle] (and [Admitter.Close]) for a reservation that
// was voided because it was still open at its expiry: its credits were given back and
// its calls uncounted, so the settlement changes nothing. The call it belonged to is
// not charged.
var ErrVoided = errors.New("billing: the reservation expired and was voided")

// MaxCredits is the largest number of credits an account can hold: 2^53-1, the largest
// integer that every JSON client (JavaScript's numbers among them) reads exactly. Every
// ledger keeps an account's remaining credits plus the credits used in its period at
// or below it. The used credits include every open reservation, so that a refund,
// which moves credits from used back to remaining, can never pass it either.
const MaxCredits = 1<<53 - 1

// ErrTooManyCredits is returned by [Ledger.Open] and [Ledger.Adjust] when the balance
// would pass [MaxCredits]. The balance is left unchanged.
var ErrTooManyCredits = errors.New("billing: the balance would pass the maximum of 9007199254740991 (2^53-1) credits")

// A RequestID identifies one admitted call across admission and settlement. It makes
// the ledger idempotent: a replayed reservation or settlement with the same id changes
// nothing.
type RequestID [16]byte

// String returns the id in hexadecimal.
func (id RequestID) String() string { return hex.EncodeToString(id[:]) }

// Balance is an account's credit position in its current period. Its credits are in two
// parts: what is left of the plan's allowance for the period, which renews each
// period, and the grants (credits granted or bought), which carry over from period to
// period until they are spent or lapse. See [Part].
type Balance struct {
	// Remaining is the number of credits left: what is left of the allowance plus
	// Granted.
	Remaining int64
	// Granted is the part of Remaining that live grants hold.
	Granted int64
	// GrantsLapse is the earliest expiry among the grant lots that hold credits, zero
	// when none lapses; GrantsLapsing is the number of credits that lapse then.
	GrantsLapse   time.Time
	GrantsLapsing int64
	// Used is the number of credits spent in the period, from either part, net of
	// refunds.
	Used int64
	// Allowance is the period's allowance: the plan's credits the balance was renewed
	// (or opened) to, or those the last change of plan set since (see [PartAllowance]).
	Allowance int64
	// Period is the current period; Period.End is the renewal date.
	Period Period
	// Charge, when the operation took or kept credits, divides them between the parts:
	// for a Reserve (and an Admit) that took credits, what the reservation took; for a
	// Settle (and a Close) that closed an open reservation, the charge it kept. It is
	// zero for every other result: a refused, replayed or voided operation, an
	// adjustment or a read.
	Charge Parts
}

// AllowanceLeft returns the part of Remaining that is left of the period's allowance.
func (b Balance) AllowanceLeft() int64 { return b.Remaining - b.Granted }

// WithUnspent returns b with n credits that credit blocks hold unspent counted as
// remaining rather than used: the ledger counts a block's credits as held, as it
// counts a call's in flight, until the block rolls or goes back.
func (b Balance) WithUnspent(n int64) Balance {
	if n > 0 {
		b.Remaining += n
		b.Used = max(b.Used-n, 0)
	}
	return b
}

// Parts divides a number of credits between the two parts of a balance.
type Parts struct {
	// Allowance is the number from the period's allowance, Grants from grant lots.
	Allowance, Grants int64
}

// Total returns Allowance + Grants.
func (p Parts) Total() int64 { return p.Allowance + p.Grants }

// Opening creates an account's balance.
type Opening struct {
	Account string
	// Balance is the starting balance, usually the plan's allowance. Up to Allowance
	// it is the period's allowance; the credits above it are a grant that never lapses.
	Balance   int64
	Allowance int64
	Period    Period
}

// A Part names one of the two parts of a balance.
type Part uint8

// The parts of a balance.
//
// The allowance renews each period (lazily: an operation given a later Period resets
// it to the Allowance passed in); grants carry over. Each grant is a lot with its own
// expiry; grants that lapse at the same instant are one lot. From its expiry on (at a
// Now at or after it) what is left of a lot is gone: every operation given a Now first
// drops the lots lapsed at it, as it voids expired reservations, and a lot dropped never
// comes back, not even for an operation whose clock lags. A store may keep expiries to
// the microsecond, never lapsing a lot before its expiry.
//
// Calls spend the allowance first, then the grants, the lot that lapses first first
// (those that never lapse last). A refund, or a reservation voided at its expiry,
// gives back in the reverse order of what the reservation took: to the lots it took
// from (what it took from a lot that has lapsed since is lost, as it would have been),
// then to the allowance (unless the period has been renewed since: see
// [Ledger.Settle]). So the charge a settlement keeps is from the allowance first.
//
// A plan changed during a period sets the period's allowance (an [Adjustment] to
// PartAllowance): each balance keeps, with its allowance, the revision of the last such
// change it applied (0 until one is; a renewal keeps it), so that changes applied in
// any order, or after the balance moved to a later period, end as the latest change
// says, once. What calls in flight hold is theirs: a change that lowers the allowance
// takes the difference from what is left of it at that moment, never from open
// reservations, and a refund or a void gives back what its reservation took, as
// without the change (the allowance left may then exceed the new allowance for the
// rest of the period).
const (
	// PartGrants: credits granted or bought, which carry over from period to period
	// until they are spent or until their grant lapses.
	PartGrants Part = iota
	// PartAllowance: the plan's allowance for the current period, renewed each period.
	PartAllowance
)

// MaxGrantLots is the most grant lots that hold credits a grant may leave an account
// with: lots that lapse at distinct instants. A grant that would start one more is
// refused with [ErrTooManyGrants]. A lot spent to nothing no longer counts, so another
// grant may start a lot in its place; a refund (or a void) that gives back to the spent
// lot restores it all the same, since credits given back are never refused, and may
// leave the account with more lots than MaxGrantLots, one per open reservation at most,
// until they are spent or lapse.
const MaxGrantLots = 64

// ErrTooManyGrants is returned by [Ledger.Adjust] for a grant that would give the
// account more than [MaxGrantLots] lots. The balance is left unchanged.
var ErrTooManyGrants = errors.New("billing: the account holds the most grants that lapse at distinct times (64): grant credits that lapse when an existing grant does, or never")

// A Reservation takes credits for a call before it runs. It is a pending transfer with
// a deadline: it stays open until it is settled, and one still open at Expires is
// voided, exactly once, by whichever operation or sweep gets there first.
//
//	Reserve --> open --+-- Settle (keep or refund) --> settled
//	                   |
//	                   +-- Expires passes ----------> voided: the credits come back,
//	                                                  the calls are uncounted; a
//	                                                  later Settle gets ErrVoided
type Reservation struct {
	Account string
	Request RequestID
	// APIs lists the APIs of the call, counted in the period's usage.
	APIs   []string
	Amount int64
	// Period is the period the call falls in; if the stored balance belongs to an
	// earlier period, it is first renewed to Allowance.
	Period    Period
	Allowance int64
	// Now is when the reservation is made. Expired reservations of the account are
	// voided first.
	Now time.Time
	// Expires is when the reservation is voided if it is still open; it must be after
	// Now. A store with a clock of its own may hold it for Expires-Now from its own
	// clock's Now instead, as long as every instance judges expiry on that clock.
	Expires time.Time
}

// A Settlement closes a reservation after the call: it keeps the charge, or gives part
// or all of it back when the call failed on the service's side.
type Settlement struct {
	Account string
	Request RequestID
	// Refund is the number of credits to give back: from 0 to the reserved amount.
	Refund int64
	// Uncount lists APIs of the reservation whose calls failed and no longer count in
	// the period's usage.
	Uncount   []string
	Period    Period
	Allowance int64
	// Now is when the settlement is made. Expired reservations of the account are
	// voided first, this one too if it has expired (the settlement then returns
	// ErrVoided).
	Now time.Time
}

// An Adjustment changes a balance outside of any call: for operators, it grants
// (positive Amount) or takes away (negative) credits; for a change of plan, it sets the
// period's allowance. Request makes it idempotent.
type Adjustment struct {
	Account string
	Request RequestID
	// Amount is the number of credits granted (positive) or taken (negative), for
	// [PartGrants]. It must be 0 for [PartAllowance].
	Amount int64
	// Part is the part of the balance the adjustment changes. With [PartGrants] (the
	// zero value) a positive Amount is a grant: credits that carry over from period to
	// period until they are spent or until Expires; a negative Amount takes credits in
	// the order calls spend them (the allowance, then the grants).
	//
	// With [PartAllowance] the adjustment sets the allowance of Period to Allowance (a
	// plan changed during the period), ordered by Revision. After the usual renewal (a
	// balance of an earlier period is renewed to Period with Allowance, which leaves
	// nothing to change), if the balance is of Period (the same Start) and Revision is
	// greater than the revision of the last allowance change it applied, what is left
	// of the allowance changes by Allowance minus the stored allowance (a decrease
	// takes at most what is left of it, never an error, never a grant, never what open
	// reservations hold), and the stored allowance and revision become Allowance and
	// Revision. A balance of a later period, or one that applied a revision as great,
	// changes nothing, without an error. So changes applied in any order end at the
	// allowance of the latest, and one made for a period the balance has left never
	// lands on the next.
	Part Part
	// Revision orders the changes of the allowance ([PartAllowance]): the revision of
	// the account's record that the change of plan wrote (see auth.Account.Revision),
	// greater than 0. It must be 0 for [PartGrants].
	Revision int64
	// Expires, for a grant, is when what is left of it lapses; zero for never. It must
	// be after Now. It is ignored for every other adjustment.
	Expires time.Time
	Reason  string
	Period  Period
	// Allowance is the plan's credits per period, which a renewal renews to; for
	// [PartAllowance] also the allowance the adjustment sets, 0 or more.
	Allowance int64
	// Now is when the adjustment is made. Expired reservations of the account are
	// voided and lapsed grants dropped first.
	Now time.Time
}

// Check says why a is not an adjustment a ledger can make: a Part it does not know, a
// grant whose Expires is not after its Now (a zero Now checks no expiry), a change of
// the allowance with an Amount, a Revision not above 0 or a negative Allowance, or a
// Revision for PartGrants. Ledgers return it wrapped with store.ErrInvalid, and change
// nothing.
func (a Adjustment) Check() error {
	switch {
	case a.Part != PartGrants && a.Part != PartAllowance:
		return fmt.Errorf("adjustment %s of account %q: unknown part %d", a.Request, a.Account, a.Part)
	case a.Grant() && !a.Expires.IsZero() && !a.Now.IsZero() && !a.Expires.After(a.Now):
		return fmt.Errorf("adjustment %s of account %q: the grant lapses at %s, not after it is made", a.Request, a.Account, a.Expires.UTC().Format(time.RFC3339))
	case a.Part == PartAllowance && a.Amount != 0:
		return fmt.Errorf("adjustment %s of account %q: a change of the allowance sets it to Allowance: its Amount must be 0, not %d", a.Request, a.Account, a.Amount)
	case a.Part == PartAllowance && a.Revision <= 0:
		return fmt.Errorf("adjustment %s of account %q: a change of the allowance needs the revision of the change, above 0, not %d", a.Request, a.Account, a.Revision)
	case a.Part == PartAllowance && a.Allowance < 0:
		return fmt.Errorf("adjustment %s of account %q: the allowance cannot be set to %d, below 0", a.Request, a.Account, a.Allowance)
	case a.Part == PartGrants && a.Revision != 0:
		return fmt.Errorf("adjustment %s of account %q: a revision orders changes of the allowance only, not grants", a.Request, a.Account)
	}
	return nil
}

// Grant reports whether a is a grant: a positive Amount to [PartGrants].
func (a Adjustment) Grant() bool { return a.Part == PartGrants && a.Amount > 0 }

// Lot returns the lot a grant goes to: its Expires in Unix nanoseconds, or 0 for a
// grant that never lapses.
func (a Adjustment) Lot() int64 {
	if a.Expires.IsZero() {
		return 0
	}
	return a.Expires.UnixNano()
}

// A Ledger keeps each account's credit balance. Every operation is atomic, and the
// balance never goes below zero.
//
// Implementations must be safe for concurrent use and share state across every instance
// that uses the same store. A balance has two parts, the period's allowance and the
// grants (see [Part]). Renewal is lazy: any operation given a Period later than the
// stored one first resets the allowance part to the Allowance (less what the grants
// hold past MaxCredits-Allowance, so that the bound holds), zeroes Used and the usage
// counts, and moves to that period, leaving the grants as they are; an earlier Period
// (a lagging clock) never moves it back. Every operation given a Now also drops the
// grant lots lapsed at it.
//
// Request ids are one namespace for reservations and adjustments. An open reservation is
// remembered until it is settled or voided; a settled or voided reservation or an
// adjustment may be forgotten after a bounded window (the memory store remembers the
// last 4096 per account), after which a replay of it is no longer recognised.
//
// Reservations expire (see [Reservation]). Every operation on an account (Reserve,
// Settle, Adjust, Balance) first voids the account's reservations that are open past
// their expiry at its Now (a zero Now voids nothing), so what it reports never counts
// them; [Sweeper.Sweep] voids those of accounts nobody touches, in their stored period
// (a sweep knows no period). Voiding gives the credits back (unless the period has been
// renewed since, as for a refund) and uncounts the reservation's APIs, once: a voided
// reservation is never settled, and a settled one never voided. Reservations of an
// account voided together are voided in the order of their expiry, then of their
// request ids (what one open across a renewal gets back within MaxCredits depends on
// what those before it got).
//
// Before its own work, an operation given a Now and a Period brings the balance to
// them in this order, which decides what each step gives near MaxCredits:
//
//  1. it drops the grant lots lapsed at Now;
//  2. if Period starts later than the stored period, it voids the reservations
//     expired by Period.Start (and by Now) in the stored period: they give back in
//     full, as a sweep at their expiry would have;
//  3. it renews, the allowance cut by the grants as they are then;
//  4. it voids the reservations expired since, up to Now, after the renewal: what
//     they took from grant lots comes back within the room MaxCredits leaves.
//
// So a lot that has lapsed cuts no renewed allowance (it holds nothing at Now), a
// reservation that expired in the old period gets back what it would have got had it
// been voided then, whether a sweep got there first or not, and one that expired in
// the new period comes second to the renewed allowance, as any refund after a renewal
// does.
//
// Credits are bounded by [MaxCredits]: an account's remaining (both parts) plus used
// credits never pass it.
//
// Errors that report well-known conditions wrap [ErrInsufficientCredits],
// [ErrTooManyCredits], [ErrVoided] or the sentinels of package store (text the store
// cannot hold, such as a NUL byte or invalid UTF-8, wraps store.ErrInvalid); any other
// error means the store is unavailable. Every implementation should pass
// storetest.TestLedger.
type Ledger interface {
	// Open creates an account's balance. It returns an error wrapping
	// store.ErrConflict if the account already has one, ErrTooManyCredits if the
	// balance or the allowance is above MaxCredits, and store.ErrInvalid if the balance
	// is negative; a refused Open opens nothing.
	Open(ctx context.Context, o Opening) error

	// Reserve takes Amount credits if the balance covers them, the allowance first and
	// then the grants (see [Part]), and counts one call to each of the APIs, until the
	// reservation is settled or expires. The result's Charge says what it took. It is idempotent:
	// a reservation whose Request was already reserved returns the current balance and
	// changes nothing. It returns ErrInsufficientCredits, together with the current
	// balance, if the balance is short, store.ErrNotFound if the account has no
	// balance, and store.ErrConflict for a negative amount or an Expires not after Now.
	Reserve(ctx context.Context, r Reservation) (Balance, error)

	// Settle closes an open reservation, giving back Refund credits. The refund is
	// given back in the reverse order of what the reservation took (see [Part]): what
	// it took from grant lots goes back to them, unless they have lapsed since (even
	// after a renewal, up to MaxCredits), and then what it took from the allowance,
	// unless the period has been renewed since (the allowance went with the old
	// period, and the APIs are not uncounted then). The result's Charge divides the
	// charge kept.
	//
	// A settlement is answered by the reservation's state first, whatever its Refund:
	// a reservation settled before is a replay, which returns the current balance and
	// changes nothing (so is a Request that names an adjustment: request ids are one
	// namespace); one voided at its expiry, before or by this settlement (made at or
	// after it), returns ErrVoided with the current balance; a Request never reserved
	// (or forgotten) returns store.ErrNotFound, changes nothing and is not remembered:
	// a reservation or an adjustment made with it later is made as any other. Only an
	// open reservation's Refund is checked: above the reserved amount it returns
	// store.ErrConflict, and the reservation stays open. A negative Refund returns
	// store.ErrConflict whatever the reservation's state, and changes nothing.
	Settle(ctx context.Context, s Settlement) (Balance, error)

	// Adjust changes the part of the balance that Part names, as [Adjustment] says:
	// for PartGrants it adds Amount (which may be negative), for PartAllowance it sets
	// the period's allowance if Revision orders it after the last change applied;
	// idempotently by Request. Used is not changed. It returns ErrInsufficientCredits
	// if a negative amount to PartGrants exceeds the balance (both parts),
	// ErrTooManyCredits if a grant, or a raised allowance, would take the remaining
	// plus used credits past MaxCredits, ErrTooManyGrants if a grant would start a lot
	// past MaxGrantLots, store.ErrInvalid for an adjustment that [Adjustment.Check]
	// refuses, and store.ErrNotFound if the account has no balance. A refused
	// adjustment is not remembered: its Request may be made again.
	Adjust(ctx context.Context, a Adjustment) (Balance, error)

	// Balance returns the account's balance at now, in period p, renewing it if due and
	// voiding its expired reservations. It returns store.ErrNotFound if the account
	// has no balance.
	Balance(ctx context.Context, account string, now time.Time, p Period, allowance int64) (Balance, error)

	// Usage returns the number of calls per API counted in period p (empty if p is not
	// the stored period). An API whose calls were all uncounted may be listed with 0.
	// It returns store.ErrNotFound if the account has no balance.
	Usage(ctx context.Context, account string, p Period) (map[string]int64, error)
}

// A Sweeper voids expired reservations of every account, for ledgers shared by several
// instances: an instance that dies takes the settlements of its calls in flight with
// it, and an account that nobody calls again would keep their credits held. The
// Service runs [Sweeper.Sweep] in the background for ledgers that implement it.
type Sweeper interface {
	// Sweep voids up to limit reservations that are open past their expiry at now,
	// of any accounts, and returns how many it voided: fewer than limit only when it
	// found no more but those another instance's sweep is voiding at that moment (the
	// Service sweeps until then). Any number of callers, on any instances, may sweep at
	// the same time as each other and as every other operation: each reservation is
	// voided once, and never after it was settled. Instances should share the work
	// rather than repeat it (a store may divide the accounts among concurrent sweeps),
	// and a sweep that finds nothing due should cost a bounded number of round trips,
	// whatever the number of accounts.
	Sweep(ctx context.Context, now time.Time, limit int) (int, error)
}

// A Limit is a rate limit: Rate events per Per, with bursts of up to Burst events. It
// has the semantics of a token bucket of size Burst refilled at Rate/Per, as
// golang.org/x/time/rate implements it, computed as a GCRA (one timestamp per key).
type Limit struct {
	Rate  int
	Per   time.Duration
	Burst int
}

// Interval returns the time between two events at the sustained rate.
func (l Limit) Interval() time.Duration { return l.Per / time.Duration(l.Rate) }

// CheckEvents returns an error unless n events may be decided together under l: n must
// be between 1 and l.Burst, the most events the bucket holds at once.
func (l Limit) CheckEvents(n int) error {
	if n < 1 || n > l.Burst {
		return fmt.Errorf("%d rate-limit events at once: the number must be between 1 and the burst, %d", n, l.Burst)
	}
	return nil
}

// A RateDecision is the outcome of a rate-limit check.
type RateDecision struct {
	// Allowed reports whether the event may go ahead.
	Allowed bool
	// Remaining is the number of events that could go ahead now, after this one.
	Remaining int
	// RetryAfter is how long to wait before an event would be allowed; zero if
	// Allowed.
	RetryAfter time.Duration
	// ResetAfter is how long until the bucket is full again.
	ResetAfter time.Duration
}

// A RateLimiter enforces rate limits per key.
//
// Implementations must be safe for concurrent use and share state across every instance
// that uses the same store. A denied event changes nothing. Every implementation should
// pass storetest.TestRateLimiter.
type RateLimiter interface {
	// Allow decides whether one event for key may go ahead at now under limit l, and
	// records it if so. It is AllowN with n = 1.
	Allow(ctx context.Context, key string, l Limit, now time.Time) (RateDecision, error)
	// AllowN decides whether n events for key may go ahead together at now under limit
	// l, as [GCRAN] decides, and records all of them if so; denied, it records none.
	// (A batch of n calls is n events, allowed or refused whole.) n must be between 1
	// and l.Burst: n events that the bucket could never hold at once are an error, not
	// a denial to retry. The decision's Remaining counts the events left after the n.
	AllowN(ctx context.Context, key string, l Limit, n int, now time.Time) (RateDecision, error)
	// Peek reports what Allow would decide, without recording anything.
	Peek(ctx context.Context, key string, l Limit, now time.Time) (RateDecision, error)
}

// A SlotDecision is the outcome of a concurrency-slot request.
type SlotDecision struct {
	// Acquired reports whether a slot was granted.
	Acquired bool
	// InUse is the number of slots held after the request.
	InUse int
}

// A ConcurrencyLimiter caps the number of calls per key running at the same time. Slots
// are leases: a slot whose holder neither renews nor releases it before the lease ends is
// free again, so a crashed instance cannot leak slots. A lease granted at now covers
// [now, now+lease): at now+lease the slot is free.
//
// Implementations must be safe for concurrent use and share state across every instance
// that uses the same store. Every implementation should pass
// storetest.TestConcurrencyLimiter.
type ConcurrencyLimiter interface {
	// Acquire grants holder a slot until now+lease if fewer than ceiling slots are held
	// (expired leases do not count). Acquiring a slot the holder already has renews it.
	Acquire(ctx context.Context, key string, holder RequestID, ceiling int, lease time.Duration, now time.Time) (SlotDecision, error)
	// Release frees holder's slot. Releasing a slot that is not held is not an error.
	Release(ctx context.Context, key string, holder RequestID) error
	// Renew extends holder's lease to now+lease. It returns an error wrapping
	// store.ErrNotFound if the holder has no live slot.
	Renew(ctx context.Context, key string, holder RequestID, lease time.Duration, now time.Time) error
	// InUse returns the number of live slots of key at now.
	InUse(ctx context.Context, key string, now time.Time) (int, error)
}

// A Period is one credit period: from Start (inclusive) to End (exclusive).
type Period struct {
	Start, End time.Time
}

// MonthOf returns the calendar month (UTC) that t falls in: the credit period of an
// account on a monthly plan with no billing anchor (see billing.PeriodAt).
func MonthOf(t time.Time) Period {
	t = t.UTC()
	start := time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	return Period{Start: start, End: start.AddDate(0, 1, 0)}
}
