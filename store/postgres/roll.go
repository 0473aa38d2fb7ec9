package postgres

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store"
)

var _ driver.Roller = (*Store)(nil)

// statusUsed is tollgate_roll's status for a next reservation whose request id the
// account used before.
const statusUsed = 8

// Roll settles a reservation, counts the calls it paid for and opens the next in its
// place (see [driver.Roller]), in one call of tollgate_roll, one transaction: the
// settlement as Settle makes it, the next reservation as Reserve makes it, shards
// included (see "Rolls" in docs/postgres.md).
func (s *Store) Roll(ctx context.Context, r driver.Roll) (driver.RollResult, error) {
	st := &r.Settlement
	if err := ctx.Err(); err != nil {
		return driver.RollResult{}, wrapErr(ctx, err, "roll of reservation %s of account %q", st.Request, st.Account)
	}
	if err := r.Check(); err != nil {
		return driver.RollResult{}, fmt.Errorf("postgres: %w: %w", err, store.ErrConflict)
	}
	apis := slices.Sorted(maps.Keys(r.Counts))
	calls := make([]int64, len(apis))
	for i, api := range apis {
		if err := store.CheckText("postgres: the API of a roll's count", api); err != nil {
			return driver.RollResult{}, err
		}
		calls[i] = r.Counts[api]
	}
	var (
		next            pgtype.UUID // NULL: no next reservation
		amount, expires *int64
		status          int
		b               balanceRow
		reserved, holds *int64
		c               chargeRow
		replay          bool
	)
	if n := r.Next; n != nil {
		next = uuidArg(n.Request)
		amount = &n.Amount
		e := n.Expires.UnixNano()
		expires = &e
	}
	err := s.db.QueryRow(ctx, `
		SELECT o_status, `+balanceColumns+`, o_reserved, `+chargeColumns+`, o_next, o_replay
		FROM tollgate_roll($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
		st.Account, uuidArg(st.Request), st.Refund, st.Uncount, apis, calls,
		st.Period.Start, st.Period.End, st.Allowance, nanos(st.Now), next, amount, expires).
		Scan(append(append(append([]any{&status}, b.dest()...), &reserved), append(c.dest(), &holds, &replay)...)...)
	if err != nil {
		return driver.RollResult{}, wrapErr(ctx, err, "roll of reservation %s of account %q", st.Request, st.Account)
	}
	out := driver.RollResult{Balance: b.balance(), Replay: replay}
	out.Balance.Charge = c.parts()
	if holds != nil {
		out.Next = *holds
	}
	if status == statusUsed {
		return driver.RollResult{Balance: out.Balance}, fmt.Errorf("postgres: roll of reservation %s of account %q: the next reservation's request id %s was used before: %w",
			st.Request, st.Account, r.Next.Request, store.ErrConflict)
	}
	if err := settleErr(status, st.Account, st.Request, st.Refund, reserved); err != nil {
		return driver.RollResult{Balance: out.Balance}, err
	}
	return out, nil
}
