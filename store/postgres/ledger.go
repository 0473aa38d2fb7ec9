package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/journal"
	"github.com/tollgate-dev/tollgate/store"
)

// Statuses of the ledger functions (see the migrations).
const (
	statusOK           = 0
	statusNoBalance    = 1
	statusNoRequest    = 2
	statusRefundRange  = 3
	statusInsufficient = 4
	statusVoided       = 5
	statusTooMany      = 6
	statusTooManyLots  = 7
)

// balanceRow receives a balance from the ledger functions' o_remaining, o_used,
// o_allowance, o_period_start and o_period_end, and the lots' o_granted, o_lapse and
// o_lapsing (see [balanceColumns]).
type balanceRow struct {
	remaining, used, allowance *int64
	start, end                 *time.Time
	granted, lapse, lapsing    *int64
}

// balanceColumns are the result columns of the ledger functions, as balanceRow reads
// them.
const balanceColumns = `o_remaining, o_used, o_allowance, o_period_start, o_period_end, o_granted, o_lapse, o_lapsing`

func (r *balanceRow) dest() []any {
	return []any{&r.remaining, &r.used, &r.allowance, &r.start, &r.end, &r.granted, &r.lapse, &r.lapsing}
}

// chargeRow receives the o_charge_allowance and o_charge_grants of a reservation or a
// settlement (NULL when it took or kept nothing).
type chargeRow struct{ allowance, grants *int64 }

// chargeColumns are the result columns chargeRow reads.
const chargeColumns = `o_charge_allowance, o_charge_grants`

func (c *chargeRow) dest() []any { return []any{&c.allowance, &c.grants} }

func (c *chargeRow) parts() driver.Parts {
	var p driver.Parts
	if c.allowance != nil {
		p.Allowance = *c.allowance
	}
	if c.grants != nil {
		p.Grants = *c.grants
	}
	return p
}

func (r *balanceRow) balance() driver.Balance {
	var b driver.Balance
	if r.remaining != nil {
		b.Remaining = *r.remaining
	}
	if r.used != nil {
		b.Used = *r.used
	}
	if r.allowance != nil {
		b.Allowance = *r.allowance
	}
	if r.start != nil {
		b.Period.Start = r.start.UTC()
	}
	if r.end != nil {
		b.Period.End = r.end.UTC()
	}
	if r.granted != nil {
		b.Granted = *r.granted
	}
	if r.lapse != nil && r.lapsing != nil {
		b.GrantsLapse, b.GrantsLapsing = time.Unix(0, *r.lapse).UTC(), *r.lapsing
	}
	return b
}

// noBalance is the error for an account that has no balance.
func noBalance(account string) error {
	return fmt.Errorf("postgres: balance of account %q: %w", account, store.ErrNotFound)
}

// Open creates an account's balance, split into Options.Shards sub-balances, and records
// the opening in the ledger, in one call.
func (s *Store) Open(ctx context.Context, o driver.Opening) error {
	if err := ctx.Err(); err != nil {
		return wrapErr(ctx, err, "balance of account %q", o.Account)
	}
	switch {
	case o.Balance < 0:
		return fmt.Errorf("postgres: balance of account %q: a balance cannot be negative: %w", o.Account, store.ErrInvalid)
	case o.Balance > driver.MaxCredits || o.Allowance > driver.MaxCredits:
		return fmt.Errorf("postgres: balance of account %q: %w", o.Account, driver.ErrTooManyCredits)
	}
	_, err := s.db.Exec(ctx, `SELECT tollgate_open($1, $2, $3, $4, $5, $6)`,
		o.Account, o.Balance, o.Allowance, o.Period.Start, o.Period.End, s.shards)
	if err != nil {
		return wrapErr(ctx, err, "balance of account %q", o.Account)
	}
	return nil
}

// Reserve takes credits for a call, idempotently by request id, in one call.
func (s *Store) Reserve(ctx context.Context, r driver.Reservation) (driver.Balance, error) {
	if err := ctx.Err(); err != nil {
		return driver.Balance{}, wrapErr(ctx, err, "reservation %s of account %q", r.Request, r.Account)
	}
	if err := checkReservation(&r); err != nil {
		return driver.Balance{}, err
	}
	var (
		status int
		b      balanceRow
		c      chargeRow
	)
	err := s.db.QueryRow(ctx, `
		SELECT o_status, `+balanceColumns+`, `+chargeColumns+`
		FROM tollgate_reserve($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		r.Account, uuidArg(r.Request), r.Amount, r.APIs, r.Period.Start, r.Period.End, r.Allowance,
		nanos(r.Now), r.Expires.UnixNano()).
		Scan(append(append([]any{&status}, b.dest()...), c.dest()...)...)
	if err != nil {
		return driver.Balance{}, wrapErr(ctx, err, "reservation %s of account %q", r.Request, r.Account)
	}
	switch status {
	case statusNoBalance:
		return driver.Balance{}, noBalance(r.Account)
	case statusInsufficient:
		return b.balance(), driver.ErrInsufficientCredits
	}
	out := b.balance()
	out.Charge = c.parts()
	return out, nil
}

// nanos returns t in Unix nanoseconds, or nil (SQL NULL, which voids nothing) for the
// zero time.
func nanos(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	n := t.UnixNano()
	return &n
}

// checkReservation refuses a reservation the ledger must not take: a negative amount, or
// one that expires no later than it is made.
func checkReservation(r *driver.Reservation) error {
	switch {
	case r.Amount < 0:
		return fmt.Errorf("postgres: reservation %s of account %q: negative amount %d: %w", r.Request, r.Account, r.Amount, store.ErrConflict)
	case !r.Expires.After(r.Now):
		return fmt.Errorf("postgres: reservation %s of account %q: it expires at %s, not after it is made: %w", r.Request, r.Account, r.Expires, store.ErrConflict)
	}
	return nil
}

// Settle closes a reservation, giving back Refund credits at most once, in one call.
func (s *Store) Settle(ctx context.Context, st driver.Settlement) (driver.Balance, error) {
	if err := ctx.Err(); err != nil {
		return driver.Balance{}, wrapErr(ctx, err, "reservation %s of account %q", st.Request, st.Account)
	}
	if err := checkRefund(&st); err != nil {
		return driver.Balance{}, err
	}
	var (
		status   int
		b        balanceRow
		reserved *int64
		c        chargeRow
	)
	err := s.db.QueryRow(ctx, `
		SELECT o_status, `+balanceColumns+`, o_reserved, `+chargeColumns+`
		FROM tollgate_settle($1, $2, $3, $4, $5, $6, $7, $8)`,
		st.Account, uuidArg(st.Request), st.Refund, st.Uncount, st.Period.Start, st.Period.End, st.Allowance,
		nanos(st.Now)).
		Scan(append(append(append([]any{&status}, b.dest()...), &reserved), c.dest()...)...)
	if err != nil {
		return driver.Balance{}, wrapErr(ctx, err, "reservation %s of account %q", st.Request, st.Account)
	}
	out := b.balance()
	out.Charge = c.parts()
	return out, settleErr(status, st.Account, st.Request, st.Refund, reserved)
}

// checkRefund refuses a settlement with a negative refund, whatever the reservation's
// state, before anything is read.
func checkRefund(st *driver.Settlement) error {
	if st.Refund < 0 {
		return fmt.Errorf("postgres: reservation %s of account %q: negative refund %d: %w", st.Request, st.Account, st.Refund, store.ErrConflict)
	}
	return nil
}

// settleErr returns the error that a settlement status reports.
func settleErr(status int, account string, req driver.RequestID, refund int64, reserved *int64) error {
	switch status {
	case statusNoBalance:
		return noBalance(account)
	case statusNoRequest:
		return fmt.Errorf("postgres: reservation %s of account %q: %w", req, account, store.ErrNotFound)
	case statusRefundRange:
		var max int64
		if reserved != nil {
			max = *reserved
		}
		return fmt.Errorf("postgres: reservation %s of account %q: refund %d is more than the %d reserved: %w", req, account, refund, max, store.ErrConflict)
	case statusVoided:
		return fmt.Errorf("postgres: reservation %s of account %q: %w", req, account, driver.ErrVoided)
	}
	return nil
}

// Adjust adds credits to, or takes them from, the balance, or sets the period's
// allowance at a revision, idempotently by request id, in one call, with the journal
// entry ctx carries when the adjustment is made (or replayed).
func (s *Store) Adjust(ctx context.Context, a driver.Adjustment) (driver.Balance, error) {
	if err := ctx.Err(); err != nil {
		return driver.Balance{}, wrapErr(ctx, err, "adjustment %s of account %q", a.Request, a.Account)
	}
	if err := a.Check(); err != nil {
		return driver.Balance{}, fmt.Errorf("postgres: %w: %w", err, store.ErrInvalid)
	}
	rec, err := journal.From(ctx)
	if err != nil {
		return driver.Balance{}, err
	}
	var (
		status int
		b      balanceRow
	)
	err = s.db.QueryRow(ctx, `
		WITH r AS (SELECT * FROM tollgate_adjust($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)),
		`+journalWith(14, "r", "r.o_status = 0")+`
		SELECT o_status, `+balanceColumns+` FROM r`,
		append([]any{a.Account, uuidArg(a.Request), max(a.Amount, -driver.MaxCredits-1), int(a.Part), a.Lot(), a.Reason,
			a.Period.Start, a.Period.End, a.Allowance, nanos(a.Now), int64(driver.MaxCredits), driver.MaxGrantLots, a.Revision},
			journalArgs(rec)...)...).
		Scan(append([]any{&status}, b.dest()...)...)
	if err != nil {
		return driver.Balance{}, wrapErr(ctx, err, "adjustment %s of account %q", a.Request, a.Account)
	}
	switch status {
	case statusNoBalance:
		return driver.Balance{}, noBalance(a.Account)
	case statusInsufficient:
		return b.balance(), driver.ErrInsufficientCredits
	case statusTooMany:
		return b.balance(), fmt.Errorf("postgres: adjustment %s of account %q: %w", a.Request, a.Account, driver.ErrTooManyCredits)
	case statusTooManyLots:
		return b.balance(), fmt.Errorf("postgres: adjustment %s of account %q: %w", a.Request, a.Account, driver.ErrTooManyGrants)
	}
	return b.balance(), nil
}

// Balance returns the account's balance at period p, renewing it if due and voiding its
// reservations expired at now, in one call.
func (s *Store) Balance(ctx context.Context, account string, now time.Time, p driver.Period, allowance int64) (driver.Balance, error) {
	if err := ctx.Err(); err != nil {
		return driver.Balance{}, wrapErr(ctx, err, "balance of account %q", account)
	}
	var (
		status int
		b      balanceRow
	)
	err := s.db.QueryRow(ctx, `
		SELECT o_status, `+balanceColumns+`
		FROM tollgate_balance($1, $2, $3, $4, $5)`, account, p.Start, p.End, allowance, nanos(now)).
		Scan(append([]any{&status}, b.dest()...)...)
	if err != nil {
		return driver.Balance{}, wrapErr(ctx, err, "balance of account %q", account)
	}
	if status == statusNoBalance {
		return driver.Balance{}, noBalance(account)
	}
	return b.balance(), nil
}

// Usage returns the calls per API counted in period p (empty if p is not the stored
// period), summed over the account's sub-balances, in one statement. It does not renew.
func (s *Store) Usage(ctx context.Context, account string, p driver.Period) (map[string]int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, wrapErr(ctx, err, "usage of account %q", account)
	}
	rows, err := s.db.Query(ctx, `
		SELECT b.period_start = $2, u.api, u.calls
		FROM tollgate_balances b
		LEFT JOIN LATERAL (
			SELECT e.key AS api, sum(e.value::bigint)::bigint AS calls
			FROM tollgate_balance_shards s, jsonb_each_text(s.usage) e
			WHERE s.account_id = b.account_id
			GROUP BY e.key) u ON b.period_start = $2
		WHERE b.account_id = $1`, account, p.Start)
	if err != nil {
		return nil, wrapErr(ctx, err, "usage of account %q", account)
	}
	defer rows.Close()
	usage := make(map[string]int64)
	found := false
	for rows.Next() {
		var (
			current bool
			api     *string
			calls   *int64
		)
		if err := rows.Scan(&current, &api, &calls); err != nil {
			return nil, wrapErr(ctx, err, "usage of account %q", account)
		}
		found = true
		if current && api != nil && calls != nil {
			usage[*api] = *calls
		}
	}
	if err := rows.Err(); err != nil {
		return nil, wrapErr(ctx, err, "usage of account %q", account)
	}
	if !found {
		return nil, noBalance(account)
	}
	return usage, nil
}

// Compact folds into tollgate_ledger_totals the entries of up to limit requests whose
// entries all belong to periods that ended by before, never those of an open
// reservation, and returns how many requests it folded (see retention.Compactor). Each
// call of tollgate_compact is one transaction; concurrent compactions, on any
// instances, take the accounts in turn (a tried advisory lock), so that each entry is
// folded once.
func (s *Store) Compact(ctx context.Context, before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	var n int
	if err := s.db.QueryRow(ctx, `SELECT tollgate_compact($1, $2)`, before, limit).Scan(&n); err != nil {
		return 0, wrapErr(ctx, err, "compaction of the ledger")
	}
	return n, nil
}

// Sweep voids up to limit reservations of any accounts that are open past their expiry
// at now, and returns how many it voided; it voids fewer than limit only when it found
// no more but those of accounts another transaction holds (another instance's sweep, or
// an operation voiding its account's own). Each call of tollgate_sweep is one
// transaction over at most 32 accounts, so that no account's rows stay locked for long;
// Sweep calls it until it has voided limit reservations or a call finds none. A sweep
// finds the due reservations through an index on their expiries (with nothing due, one
// statement and one probe of the index) and takes an account only if its balance row is
// free (FOR UPDATE SKIP LOCKED), so that concurrent sweeps divide the accounts and never
// wait for each other. They never void a reservation twice and never one that a
// settlement is closing: the reservation rows are taken with FOR UPDATE SKIP LOCKED too.
func (s *Store) Sweep(ctx context.Context, now time.Time, limit int) (int, error) {
	total := 0
	for total < limit {
		if err := ctx.Err(); err != nil {
			return total, wrapErr(ctx, err, "sweep of expired reservations")
		}
		var n int
		if err := s.db.QueryRow(ctx, `SELECT tollgate_sweep($1, $2)`, now.UnixNano(), limit-total).Scan(&n); err != nil {
			return total, wrapErr(ctx, err, "sweep of expired reservations")
		}
		if n == 0 {
			break
		}
		total += n
	}
	return total, nil
}
