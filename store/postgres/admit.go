package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate/billing/driver"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Admit performs the parts of an admission step in one call of the database function
// tollgate_admit: one round trip and one transaction, in the order key, rate, slot,
// credits. Every part is checked before anything is written, so a denied step changes
// nothing; a step replayed with the same request after it was admitted takes nothing
// again (see [driver.Admitter]).
//
// The rate limit and the slot are kept under s.Account; the key check names its own
// account (KeyCheck.Account) and the reservation its own (Reservation.Account). A
// reservation whose account has no balance is an error wrapping store.ErrNotFound, and
// nothing is taken.
//
// With [Options.Batch], concurrent steps of one account share one call (see the package
// documentation, "Hot accounts"). Steps that check a key and nothing else are decided
// by one statement that reads the keys, with no transaction of writes.
func (s *Store) Admit(ctx context.Context, st driver.Step) (driver.StepResult, error) {
	if err := ctx.Err(); err != nil {
		return driver.StepResult{}, wrapErr(ctx, err, "admission %s of account %q", st.Request, st.Account)
	}
	p, err := newAdmitParams(&st)
	if err != nil {
		return driver.StepResult{}, err
	}
	var row admitRow
	if s.admits != nil && (st.Credits == nil || st.Credits.Account == st.Account) {
		row, err = s.admits.Do(ctx, st.Account, p)
	} else {
		row, err = s.admitOne(ctx, st.Account, p)
	}
	if err != nil {
		return driver.StepResult{}, wrapErr(ctx, err, "admission %s of account %q", st.Request, st.Account)
	}
	return row.result(&st)
}

// admitParams are the arguments of tollgate_admit for one step, NULL (nil) for the
// parts the step does not have.
type admitParams struct {
	request           pgtype.UUID
	now               int64
	keyAccount, keyID *string
	keyHash           []byte
	rateE, rateWindow *int64
	ceiling           *int32
	lease             *int64
	creditAccount     *string
	amount, allowance *int64
	apis              []string
	start, end        *time.Time
	expires           *int64
}

func newAdmitParams(st *driver.Step) (*admitParams, error) {
	p := &admitParams{request: uuidArg(st.Request), now: st.Now.UnixNano()}
	if k := st.Key; k != nil {
		p.keyAccount, p.keyID, p.keyHash = &k.Account, &k.KeyID, checkHash(k)
	}
	if st.Rate != nil {
		e, w, err := eventsParams(*st.Rate, st.EventCount())
		if err != nil {
			return nil, fmt.Errorf("postgres: admission %s of account %q: %w", st.Request, st.Account, err)
		}
		p.rateE, p.rateWindow = &e, &w
	}
	if sl := st.Slot; sl != nil {
		c, l := int32(sl.Ceiling), int64(sl.Lease)
		p.ceiling, p.lease = &c, &l
	}
	if c := st.Credits; c != nil {
		if err := checkReservation(c); err != nil {
			return nil, err
		}
		expires := c.Expires.UnixNano()
		p.creditAccount, p.amount, p.allowance, p.apis = &c.Account, &c.Amount, &c.Allowance, c.APIs
		p.start, p.end, p.expires = &c.Period.Start, &c.Period.End, &expires
	}
	return p, nil
}

// admitRow receives the result of one step from tollgate_admit or tollgate_admit_batch.
type admitRow struct {
	denied, status int
	keyState       *int
	tat            *int64
	acquired       *bool
	inUse          *int
	b              balanceRow
	charge         chargeRow
}

func (r *admitRow) dest() []any {
	return append(append([]any{&r.denied, &r.status, &r.keyState, &r.tat, &r.acquired, &r.inUse}, r.b.dest()...), r.charge.dest()...)
}

// admitColumns are the result columns of the admission functions, as admitRow reads them.
const admitColumns = `o_denied, o_status, o_key_state, o_rate_tat, o_slot_acquired, o_slot_in_use, ` +
	balanceColumns + `, ` + chargeColumns

func (r *admitRow) result(st *driver.Step) (driver.StepResult, error) {
	if r.status == statusNoBalance {
		return driver.StepResult{}, noBalance(st.Credits.Account)
	}
	res := driver.StepResult{Denied: driver.Denial(r.denied)}
	if r.keyState != nil {
		res.Key = driver.KeyState(*r.keyState)
	}
	if st.Rate != nil && r.tat != nil {
		res.Rate, _ = driver.GCRAN(*st.Rate, st.EventCount(), *r.tat, st.Now.UnixNano())
	}
	if r.acquired != nil {
		res.Slot.Acquired = *r.acquired
	}
	if r.inUse != nil {
		res.Slot.InUse = *r.inUse
	}
	if st.Credits != nil {
		res.Balance = r.b.balance()
		if r.denied == int(driver.NotDenied) {
			res.Balance.Charge = r.charge.parts()
		}
	}
	return res, nil
}

// keyOnly reports whether p checks a key and nothing else: the step of a call whose
// credits come from a credit block and whose limits are kept in another store.
func (p *admitParams) keyOnly() bool {
	return p.keyAccount != nil && p.rateE == nil && p.ceiling == nil && p.creditAccount == nil
}

// keyOnly reports whether every step of ps checks a key and nothing else.
func keyOnly(ps []*admitParams) bool {
	for _, p := range ps {
		if !p.keyOnly() {
			return false
		}
	}
	return true
}

// checkKeys decides steps that check a key and nothing else (see keyOnly) as
// tollgate_admit does, in one statement that reads the keys and writes nothing: no
// transaction of the admission functions, whose locks, subtransaction and arrays cost
// the database many times the lookups. A key of another account than the step's is
// unknown. Identical checks (a busy account's calls, most with the same key) are sent
// once: the statement reads one snapshot, so each would get the same answer.
func (s *Store) checkKeys(ctx context.Context, account string, ps []*admitParams) ([]admitRow, error) {
	out := make([]admitRow, len(ps))
	var (
		at     []int // the steps of account's keys, by their place in ps
		of     []int // the check each of those steps is, by its place in ids
		ids    []string
		hashes [][]byte
		seen   map[string]int // the place in ids of each check sent, by key id and hash
	)
	for i, p := range ps {
		if *p.keyAccount != account {
			out[i].setKeyState(int(driver.KeyUnknown))
			continue
		}
		j := len(ids)
		if len(ps) > 1 {
			if seen == nil {
				seen = make(map[string]int, len(ps))
			}
			// The hash has a fixed length (checkHash), so the id after it is unambiguous.
			k := string(p.keyHash) + *p.keyID
			if c, ok := seen[k]; ok {
				j = c
			} else {
				seen[k] = j
			}
		}
		if j == len(ids) {
			ids, hashes = append(ids, *p.keyID), append(hashes, p.keyHash)
		}
		at, of = append(at, i), append(of, j)
	}
	if len(at) == 0 {
		return out, nil
	}
	states, err := s.keyStates(ctx, account, ids, hashes)
	if err != nil {
		return nil, err
	}
	for n, i := range at {
		out[i].setKeyState(states[of[n]])
	}
	return out, nil
}

// setKeyState makes r the answer of tollgate_admit to a step that checks a key with
// the given state and does nothing else: denied for the key unless the key is valid.
func (r *admitRow) setKeyState(state int) {
	r.keyState = &state
	if state != int(driver.KeyLive) {
		r.denied = int(driver.DeniedKey)
	}
}

// admitOne performs one step: one call of tollgate_admit.
func (s *Store) admitOne(ctx context.Context, account string, p *admitParams) (admitRow, error) {
	if p.keyOnly() {
		rows, err := s.checkKeys(ctx, account, []*admitParams{p})
		if err != nil {
			return admitRow{}, err
		}
		return rows[0], nil
	}
	var r admitRow
	err := s.db.QueryRow(ctx, `SELECT `+admitColumns+`
		FROM tollgate_admit($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`,
		account, p.request, p.now,
		p.keyAccount, p.keyID, p.keyHash,
		p.rateE, p.rateWindow,
		p.ceiling, p.lease,
		p.creditAccount, p.amount, p.apis, p.start, p.end, p.allowance, p.expires).Scan(r.dest()...)
	return r, err
}

// admitBatch performs the steps of one account: one call of tollgate_admit_batch, which
// takes them from the Store's home shard when the account has several (see the package
// documentation, "Hot accounts").
func (s *Store) admitBatch(ctx context.Context, account string, ps []*admitParams) ([]admitRow, error) {
	if len(ps) == 1 {
		r, err := s.admitOne(ctx, account, ps[0])
		return []admitRow{r}, err
	}
	if keyOnly(ps) {
		return s.checkKeys(ctx, account, ps)
	}
	n := len(ps)
	var (
		request                   = make([]pgtype.UUID, n)
		now                       = make([]int64, n)
		keyAccount, keyID, credit = make([]*string, n), make([]*string, n), make([]*string, n)
		keyHash                   = make([][]byte, n)
		rateE, rateWindow, lease  = make([]*int64, n), make([]*int64, n), make([]*int64, n)
		amount, allowance         = make([]*int64, n), make([]*int64, n)
		expires                   = make([]*int64, n)
		ceiling                   = make([]*int32, n)
		apis                      []string
		apiCounts                 = make([]int32, n)
		start, end                = make([]*time.Time, n), make([]*time.Time, n)
	)
	for i, p := range ps {
		request[i], now[i] = p.request, p.now
		keyAccount[i], keyID[i], keyHash[i] = p.keyAccount, p.keyID, p.keyHash
		rateE[i], rateWindow[i] = p.rateE, p.rateWindow
		ceiling[i], lease[i] = p.ceiling, p.lease
		credit[i], amount[i], allowance[i] = p.creditAccount, p.amount, p.allowance
		apis = append(apis, p.apis...)
		apiCounts[i] = int32(len(p.apis))
		start[i], end[i], expires[i] = p.start, p.end, p.expires
	}
	rows, err := s.db.Query(ctx, `SELECT `+admitColumns+`
		FROM tollgate_admit_batch($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19::int)`,
		account, request, now,
		keyAccount, keyID, keyHash,
		rateE, rateWindow,
		ceiling, lease,
		credit, amount, apis, apiCounts, start, end, allowance, expires, s.home)
	if err != nil {
		return nil, err
	}
	return scanRows(rows, n, func(r *admitRow) []any { return r.dest() })
}

// scanRows reads the n rows of a batch, one per step, into values of T through dest.
func scanRows[T any](rows pgx.Rows, n int, dest func(*T) []any) ([]T, error) {
	defer rows.Close()
	out := make([]T, 0, n)
	for rows.Next() {
		var v T
		if err := rows.Scan(dest(&v)...); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out) != n {
		return nil, fmt.Errorf("the batch answered %d rows for %d steps", len(out), n)
	}
	return out, nil
}

// Close settles the reservation of an admitted call and frees its slot, in one call of
// the database function tollgate_close: one round trip and one transaction. A
// reservation is settled at most once and freeing a free slot is not an error. The slot
// is freed even when the settlement reports an error (an unknown reservation, a refund
// above the reserved amount); a negative refund is refused before anything is done. A
// Closing with nothing to do makes no call.
//
// With [Options.Batch], concurrent closings of one account share one call.
func (s *Store) Close(ctx context.Context, c driver.Closing) (driver.Balance, error) {
	if err := ctx.Err(); err != nil {
		return driver.Balance{}, wrapErr(ctx, err, "closing %s of account %q", c.Request, c.Account)
	}
	if !c.ReleaseSlot && c.Settlement == nil {
		return driver.Balance{}, nil
	}
	if c.Settlement != nil {
		if err := checkRefund(c.Settlement); err != nil {
			return driver.Balance{}, err
		}
	}
	p := newCloseParams(&c)
	var (
		row closeRow
		err error
	)
	if s.closes != nil && (c.Settlement == nil || c.Settlement.Account == c.Account) {
		row, err = s.closes.Do(ctx, c.Account, p)
	} else {
		row, err = s.closeOne(ctx, c.Account, p)
	}
	if err != nil {
		return driver.Balance{}, wrapErr(ctx, err, "closing %s of account %q", c.Request, c.Account)
	}
	if c.Settlement == nil {
		return driver.Balance{}, nil
	}
	return row.balance(), settleErr(row.status, c.Settlement.Account, c.Request, c.Settlement.Refund, row.reserved)
}

// closeParams are the arguments of tollgate_close for one closing.
type closeParams struct {
	request       pgtype.UUID
	release       bool
	settleAccount *string
	refund        *int64
	uncount       []string
	start, end    *time.Time
	allowance     *int64
	now           *int64
}

func newCloseParams(c *driver.Closing) *closeParams {
	p := &closeParams{request: uuidArg(c.Request), release: c.ReleaseSlot}
	if st := c.Settlement; st != nil {
		p.settleAccount, p.refund, p.uncount, p.allowance = &st.Account, &st.Refund, st.Uncount, &st.Allowance
		p.start, p.end, p.now = &st.Period.Start, &st.Period.End, nanos(st.Now)
	}
	return p
}

// closeRow receives the result of one closing.
type closeRow struct {
	status   int
	b        balanceRow
	reserved *int64
	charge   chargeRow
}

func (r *closeRow) dest() []any {
	return append(append(append([]any{&r.status}, r.b.dest()...), &r.reserved), r.charge.dest()...)
}

// balance returns the balance the closing reports, with the charge it kept.
func (r *closeRow) balance() driver.Balance {
	b := r.b.balance()
	b.Charge = r.charge.parts()
	return b
}

const closeColumns = `o_status, ` + balanceColumns + `, o_reserved, ` + chargeColumns

// closeOne performs one closing: one call of tollgate_close.
func (s *Store) closeOne(ctx context.Context, account string, p *closeParams) (closeRow, error) {
	var r closeRow
	err := s.db.QueryRow(ctx, `SELECT `+closeColumns+` FROM tollgate_close($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		account, p.request, p.release, p.settleAccount, p.refund, p.uncount, p.start, p.end, p.allowance, p.now).Scan(r.dest()...)
	return r, err
}

// closeBatch performs the closings of one account: one call of tollgate_close_batch.
func (s *Store) closeBatch(ctx context.Context, account string, ps []*closeParams) ([]closeRow, error) {
	if len(ps) == 1 {
		r, err := s.closeOne(ctx, account, ps[0])
		return []closeRow{r}, err
	}
	n := len(ps)
	var (
		request       = make([]pgtype.UUID, n)
		release       = make([]bool, n)
		settle        = make([]*string, n)
		refund, allow = make([]*int64, n), make([]*int64, n)
		uncount       []string
		counts        = make([]int32, n)
		start, end    = make([]*time.Time, n), make([]*time.Time, n)
		now           = make([]*int64, n)
	)
	for i, p := range ps {
		request[i], release[i], now[i] = p.request, p.release, p.now
		settle[i], refund[i], allow[i] = p.settleAccount, p.refund, p.allowance
		uncount = append(uncount, p.uncount...)
		counts[i] = int32(len(p.uncount))
		start[i], end[i] = p.start, p.end
	}
	rows, err := s.db.Query(ctx, `SELECT `+closeColumns+`
		FROM tollgate_close_batch($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		account, request, release, settle, refund, uncount, counts, start, end, allow, now)
	if err != nil {
		return nil, err
	}
	return scanRows(rows, n, func(r *closeRow) []any { return r.dest() })
}
