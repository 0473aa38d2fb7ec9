package driver

import (
	"context"
	"time"
)

// EventCount returns the number of rate-limit events of the step: Events, or 1 when it
// is 0.
func (s *Step) EventCount() int { return max(s.Events, 1) }

// A SlotClaim asks for a concurrency slot.
type SlotClaim struct {
	Ceiling int
	Lease   time.Duration
}

// A Step is the part of an admission that one Admitter performs. A nil field is a part
// this store does not perform.
type Step struct {
	Account string
	Request RequestID
	Now     time.Time
	// Key, when set, is verified first; a key that is not live denies the step. Its
	// Account is the step's Account; a check naming another account denies the step
	// with KeyUnknown.
	Key *KeyCheck
	// Rate, when set, is the rate limit that must allow the step's events for Account.
	Rate *Limit
	// Events is the number of rate-limit events the step counts, allowed or refused
	// together as [RateLimiter.AllowN] decides them (a batch of calls counts one per
	// call); 0 means 1. With Rate set it must be at most Rate.Burst.
	Events int
	// Slot, when set, asks for a concurrency slot of Account held by Request.
	Slot *SlotClaim
	// Credits, when set, is the reservation to make.
	Credits *Reservation
}

// A Denial says which part of a step refused the call.
type Denial uint8

// The denials.
const (
	NotDenied Denial = iota
	DeniedKey
	DeniedRate
	DeniedSlot
	DeniedCredits
)

// A StepResult is the outcome of a step.
type StepResult struct {
	// Denied is NotDenied when every part of the step was performed, else the part
	// that refused; a denied step changes nothing.
	Denied Denial
	// Key is the key's state, when the step checked a key.
	Key KeyState
	// Rate is the rate decision, when the step had a rate limit (also on a later
	// part's denial, as the decision that would have been recorded).
	Rate RateDecision
	// Slot is the slot decision, when the step asked for a slot.
	Slot SlotDecision
	// Balance is the balance after the reservation, or the balance that was short,
	// when the step had credits.
	Balance Balance
}

// A Closing closes what an admission step took: the reservation is settled and the
// slot released, in one atomic step.
type Closing struct {
	Account string
	Request RequestID
	// ReleaseSlot frees Request's slot of Account.
	ReleaseSlot bool
	// Settlement, when set, settles the reservation.
	Settlement *Settlement
}

// An Admitter performs the parts of an admission it holds in one atomic step, and
// closes them in another. It is an optional capability of stores. A store that holds
// several parts of an admission (the key check, the rate limit, the concurrency slot,
// the credits) and can perform them in one atomic step, one round trip, offers it by
// implementing Admitter. The Meter detects it: the parts held by the same
// Admitter are sent to it together, so that a deployment on one PostgreSQL database, or
// one Redis, admits a call in one round trip and settles it in another. Parts held by
// stores that are not Admitters are performed one by one through the plain interfaces,
// as the memory stores are.
//
// Admit performs the parts of s in the order key, rate, slot, credits; the first that
// refuses denies the step and nothing at all changes. A step replayed with the same
// Request after it was admitted is admitted again without taking anything twice, within
// a window the implementation documents (as long as the reservation is open, and for
// a bounded time after it is settled). Admit voids the account's expired reservations
// before it reserves, as [Ledger.Reserve] does. Close settles as [Ledger.Settle] does
// and is idempotent: a reservation is settled at most once and releasing a free slot is
// not an error; it frees the slot even when the settlement is refused (with ErrVoided
// for a reservation voided at its expiry), but for a negative Refund, refused before
// anything is done. Errors are as for the plain interfaces (store.ErrNotFound for an account
// without a balance; anything else means the store is unavailable). Every
// implementation should pass storetest.TestAdmitter.
type Admitter interface {
	Admit(ctx context.Context, s Step) (StepResult, error)
	Close(ctx context.Context, c Closing) (Balance, error)
}
