package driver

import (
	"context"
	"fmt"
	"strings"
)

// A Roll settles an open reservation and, in the same atomic step, opens another in
// its place: how a credit block (a reservation that an instance spends locally, call
// by call; see package billing/blocks) makes the charges of the calls it served
// durable without giving up the credits it still holds.
type Roll struct {
	// Settlement closes the reservation, as [Ledger.Settle] does: Refund is what goes
	// back, the rest is kept for good.
	Settlement Settlement
	// Counts adds calls to the usage counts, per API: the calls the kept charge paid
	// for. They count in the settlement's period; if the balance has been renewed
	// since, they are not counted (as a refund after a renewal uncounts nothing). Each
	// count must be positive and each API valid text.
	Counts map[string]int64
	// Next, when set, is reserved right after the settlement, in the same step, as
	// [Ledger.Reserve] reserves: the allowance first, then the grants. Its Account and
	// Period are the Settlement's, it lists no APIs, and its Amount is at most the
	// Settlement's Refund, so that what the settlement gives back covers it; when it
	// does not (what the reservation took from a grant lot that has lapsed since is
	// lost, and so is what it took from an allowance renewed since), Next takes what
	// the balance holds, down to zero, and [RollResult.Next] says how much.
	Next *Reservation
}

// A RollResult is the outcome of a [Roll].
type RollResult struct {
	// Balance is the account's balance after the step. Its Charge is the charge the
	// settlement kept (zero for a replay).
	Balance Balance
	// Next is the number of credits Next holds: its Amount, or fewer when the balance
	// could not cover it. For a replayed roll it is what Next holds if it is still
	// open, else 0; 0 when there is no Next.
	Next int64
	// Replay reports that the settlement had already been made (by this roll, sent
	// before): nothing changed.
	Replay bool
}

// A Roller settles a reservation and opens the next in one atomic step. It is an
// optional capability of a [Ledger].
//
// Roll answers by the settled reservation's state first, as Settle does: a roll
// whose reservation was settled before is a replay (see [RollResult]); one voided at
// its expiry returns ErrVoided and opens nothing; a reservation never reserved returns
// store.ErrNotFound. Before anything changes it checks the roll ([Roll.Check]) and
// that Next's request id is new, and returns store.ErrConflict (or store.ErrInvalid
// for text the store cannot hold) otherwise, changing nothing. Every implementation
// should pass storetest.TestRoller.
type Roller interface {
	Roll(ctx context.Context, r Roll) (RollResult, error)
}

// Check returns an error unless r is well formed: a non-negative Refund; positive
// counts of non-empty APIs; Next, if any, of the Settlement's account and period,
// without APIs, with a request id other than the Settlement's and an Amount from 0 to
// the Refund, expiring after its Now.
func (r *Roll) Check() error {
	s := &r.Settlement
	if s.Refund < 0 {
		return fmt.Errorf("roll of %s: negative refund %d", s.Request, s.Refund)
	}
	for api, n := range r.Counts {
		if api == "" || n <= 0 {
			return fmt.Errorf("roll of %s: count %d of API %q: counts are positive, of named APIs", s.Request, n, api)
		}
	}
	n := r.Next
	if n == nil {
		return nil
	}
	switch {
	case n.Account != s.Account:
		return fmt.Errorf("roll of %s: the next reservation is of account %q, not %q", s.Request, n.Account, s.Account)
	case !n.Period.Start.Equal(s.Period.Start) || !n.Period.End.Equal(s.Period.End):
		return fmt.Errorf("roll of %s: the next reservation is of another period", s.Request)
	case len(n.APIs) != 0:
		return fmt.Errorf("roll of %s: the next reservation lists APIs (%s); a roll counts calls with Counts", s.Request, strings.Join(n.APIs, ", "))
	case n.Request == s.Request:
		return fmt.Errorf("roll of %s: the next reservation has the same request id", s.Request)
	case n.Amount < 0 || n.Amount > s.Refund:
		return fmt.Errorf("roll of %s: the next reservation's amount %d is not between 0 and the refund, %d", s.Request, n.Amount, s.Refund)
	case !n.Expires.After(n.Now):
		return fmt.Errorf("roll of %s: the next reservation expires at %s, not after it is made", s.Request, n.Expires)
	}
	return nil
}
