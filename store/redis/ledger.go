package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/journal"
	"github.com/tollgate-dev/tollgate/store"
)

// Credit periods travel as Unix microseconds.
func periodArgs(p driver.Period) (string, string) {
	return strconv.FormatInt(p.Start.UnixMicro(), 10), strconv.FormatInt(p.End.UnixMicro(), 10)
}

// decodeBalance reads the balance fields of a reply from r[i:]: the allowance part
// remaining, used, allowance, the period's start and end, the lots' g, gl and gn (see
// lua/lib_grants.lua), and, when the reply has them, the charge's two parts.
func decodeBalance(r []any, i int) driver.Balance {
	if len(r) < i+8 {
		return driver.Balance{}
	}
	return withParts(driver.Balance{Remaining: asInt(r[i]), Used: asInt(r[i+1]), Allowance: asInt(r[i+2]),
		Period: decodePeriod(r[i+3], r[i+4])}, r[i+5:])
}

// withParts completes b, whose Remaining is the allowance part, from the lots' g, gl and
// gn and the charge's two parts in r (the charge when r has it).
func withParts(b driver.Balance, r []any) driver.Balance {
	b.Granted = asInt(r[0])
	b.Remaining += b.Granted
	if gl := asInt(r[1]); gl != 0 {
		b.GrantsLapse, b.GrantsLapsing = time.UnixMicro(gl).UTC(), asInt(r[2])
	}
	if len(r) >= 5 {
		b.Charge = driver.Parts{Allowance: asInt(r[3]), Grants: asInt(r[4])}
	}
	return b
}

// lotOf returns the lot of a grant: its expiry in Unix microseconds, rounded up so that
// a lot never lapses before it should, or 0 for a grant that never lapses.
func lotOf(a driver.Adjustment) int64 {
	if a.Expires.IsZero() {
		return 0
	}
	return (a.Expires.UnixNano() + 999) / 1000
}

// decodePeriod reads a credit period from a reply's start and end (Unix µs).
func decodePeriod(start, end any) driver.Period {
	return driver.Period{Start: time.UnixMicro(asInt(start)).UTC(), End: time.UnixMicro(asInt(end)).UTC()}
}

func noBalance(account string) error {
	return fmt.Errorf("redis: balance of account %q: %w", account, store.ErrNotFound)
}

// balanceReply decodes the reply of a script that answers a status and a balance.
func balanceReply(reply any, account, what string) (int64, driver.Balance, error) {
	r := asSlice(reply)
	if len(r) == 0 {
		return 0, driver.Balance{}, errReply(what+" of account "+strconv.Quote(account), reply)
	}
	st := asInt(r[0])
	if st == stNotFound {
		return st, driver.Balance{}, noBalance(account)
	}
	return st, decodeBalance(r, 1), nil
}

// Open creates an account's balance.
func (s *Store) Open(ctx context.Context, o driver.Opening) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := store.CheckText("redis: account id", o.Account); err != nil {
		return err
	}
	switch {
	case o.Balance < 0:
		return fmt.Errorf("redis: account %q: a balance cannot be negative: %w", o.Account, store.ErrInvalid)
	case o.Balance > driver.MaxCredits || o.Allowance > driver.MaxCredits:
		return fmt.Errorf("redis: account %q: %w", o.Account, driver.ErrTooManyCredits)
	}
	ps, pe := periodArgs(o.Period)
	reply, err := s.write(ctx, openScript, []string{s.account(o.Account).balance()}, o.Balance, o.Allowance, ps, pe)
	if err != nil {
		return fail(ctx, err, "opening the balance of account %q", o.Account)
	}
	if asInt(reply) == stConflict {
		return fmt.Errorf("redis: balance of account %q: %w", o.Account, store.ErrConflict)
	}
	return nil
}

// checkReservation refuses a reservation the ledger must not take: a negative amount,
// one that expires no later than it is made, or an API whose name holds the byte that
// separates the APIs in the reservation's marker (a control character no API id has).
func checkReservation(r *driver.Reservation) error {
	switch {
	case r.Amount < 0:
		return fmt.Errorf("redis: reservation %s: negative amount: %w", r.Request, store.ErrConflict)
	case !r.Expires.After(r.Now):
		return fmt.Errorf("redis: reservation %s: it expires at %s, not after it is made: %w", r.Request, r.Expires, store.ErrConflict)
	}
	for _, api := range r.APIs {
		if strings.IndexByte(api, apiSeparator) >= 0 || api == "" {
			return fmt.Errorf("redis: reservation %s: API %q: %w", r.Request, api, store.ErrInvalid)
		}
	}
	return nil
}

// apiSeparator separates the APIs in the marker of an open reservation.
const apiSeparator = '\x1f'

// Reserve takes credits for a call, in one script: renewal if due, the void of the
// account's expired reservations, the replay check, the balance check, the debit, the
// usage counts, the reservation's marker and its deadline. A reservation the index of
// expiring accounts would not find is refused, changing nothing, and made again once
// the account is indexed (see [Store.indexFirst]).
func (s *Store) Reserve(ctx context.Context, r driver.Reservation) (driver.Balance, error) {
	if err := ctx.Err(); err != nil {
		return driver.Balance{}, err
	}
	if err := checkReservation(&r); err != nil {
		return driver.Balance{}, err
	}
	a := s.account(r.Account)
	ps, pe := periodArgs(r.Period)
	mode, sec, nsec := s.clock(r.Now)
	claim := ""
	for range indexAttempts {
		args := make([]any, 0, 12+len(r.APIs))
		args = append(args, r.Amount, ps, pe, r.Allowance, s.open, mode, sec, nsec, holdArg(&r), r.Request.String(), a.markers(), claim)
		for _, api := range r.APIs {
			args = append(args, api)
		}
		reply, err := s.write(ctx, reserveScript, []string{a.balance(), a.usage(), a.marker(r.Request), a.open()}, args...)
		if err != nil {
			return driver.Balance{}, fail(ctx, err, "reservation %s of account %q", r.Request, r.Account)
		}
		if rs := asSlice(reply); len(rs) == 3 && asInt(rs[0]) == stIndex {
			if claim, err = s.indexFirst(ctx, r.Account, indexNeed{deadline: asInt(rs[1]), epoch: asString(rs[2])}); err != nil {
				return driver.Balance{}, fail(ctx, err, "reservation %s of account %q: indexing the account", r.Request, r.Account)
			}
			continue
		}
		st, b, err := balanceReply(reply, r.Account, "reserve")
		if err != nil {
			return b, err
		}
		if st == stInsufficient {
			return b, driver.ErrInsufficientCredits
		}
		return b, nil
	}
	return driver.Balance{}, fmt.Errorf("redis: reservation %s of account %q: %w: the index of expiring accounts changed under %d attempts to index it",
		r.Request, r.Account, store.ErrUnavailable, indexAttempts)
}

// indexAttempts bounds the attempts to open a reservation that must wait for its
// account to be indexed in :expiring (see the package documentation, "A reservation's
// life"): an attempt fails only if a sweep moved the account to another epoch in the
// moment between the index write and the reservation. Four were not enough under load
// with sweeps running back to back (TestIndexCoversOpenReservations on a busy machine
// saw a call refused as unavailable); a call must not fail because sweeps run, so the
// bound is high enough that only a store that keeps changing the account fails it.
const indexAttempts = 32

// An indexNeed is a script's refusal of a reservation until its account is indexed:
// by the reservation's deadline (Unix µs), under the account's epoch.
type indexNeed struct {
	deadline int64
	epoch    string
}

// indexFirst writes the entry of the account's epoch in the index of expiring accounts
// at need's deadline (or leaves it if it is lower already), and returns the claim that
// the reservation's script then checks: the epoch and the deadline.
func (s *Store) indexFirst(ctx context.Context, account string, need indexNeed) (string, error) {
	d := strconv.FormatInt(need.deadline, 10)
	if _, err := s.writeCmd(ctx, "zadd", s.expiring(s.shardOf(account)), "lt", need.deadline, indexEntry(account, need.epoch)); err != nil {
		return "", err
	}
	return need.epoch + " " + d, nil
}

// indexEntry returns the entry of an account's epoch in the index of expiring accounts
// (an account id holds no NUL byte).
func indexEntry(account, epoch string) string { return account + "\x00" + epoch }

// parseEntry returns the account and the epoch of an entry of the index of expiring
// accounts; an entry of no epoch is the account's id alone.
func parseEntry(entry string) (account, epoch string) {
	account, epoch, _ = strings.Cut(entry, "\x00")
	return account, epoch
}

// settleResult maps a settlement's status.
func settleResult(st int64, b driver.Balance, s driver.Settlement) (driver.Balance, error) {
	switch st {
	case stUnknown:
		return driver.Balance{}, fmt.Errorf("redis: reservation %s of account %q: %w", s.Request, s.Account, store.ErrNotFound)
	case stConflict:
		return b, fmt.Errorf("redis: reservation %s of account %q: refund %d is more than was reserved: %w", s.Request, s.Account, s.Refund, store.ErrConflict)
	case stOverflow:
		return b, fmt.Errorf("redis: reservation %s of account %q: refund %d would take the remaining credits past 2^63-1; the reservation stays open: %w", s.Request, s.Account, s.Refund, store.ErrConflict)
	case stVoided:
		return b, fmt.Errorf("redis: reservation %s of account %q: %w", s.Request, s.Account, driver.ErrVoided)
	}
	return b, nil
}

// Settle closes a reservation, at most once, in one script: Close's, freeing no slot.
func (s *Store) Settle(ctx context.Context, st driver.Settlement) (driver.Balance, error) {
	if err := ctx.Err(); err != nil {
		return driver.Balance{}, err
	}
	c := driver.Closing{Account: st.Account, Request: st.Request, Settlement: &st}
	call, err := s.closeCall(c)
	if err != nil {
		return driver.Balance{}, err
	}
	reply, err := s.runWrite(ctx, call)
	return closing(ctx, c, reply, err)
}

// Adjust adds credits to, or takes them from, the balance, or sets the period's
// allowance at a revision (see adjust.lua), once per request id, in one script that
// records the journal entry ctx carries (its replay too).
func (s *Store) Adjust(ctx context.Context, adj driver.Adjustment) (driver.Balance, error) {
	if err := ctx.Err(); err != nil {
		return driver.Balance{}, err
	}
	entry, err := journal.From(ctx)
	if err != nil {
		return driver.Balance{}, err
	}
	if err := store.CheckText("redis: the reason of an adjustment", adj.Reason); err != nil {
		return driver.Balance{}, err
	}
	if err := adj.Check(); err != nil {
		return driver.Balance{}, fmt.Errorf("redis: %w: %w", err, store.ErrInvalid)
	}
	a := s.account(adj.Account)
	ps, pe := periodArgs(adj.Period)
	mode, sec, nsec := s.clock(adj.Now)
	// An amount below -MaxCredits is short whatever the balance: it is sent as the
	// first such amount, which Lua's numbers hold exactly. The adjustment is
	// remembered for OpenReservationTTL rather than Retention: an operator's retry of
	// a grant with its idempotency key may come hours later, and adjustments are few.
	reply, err := s.journalWrite(adj.Account, entry).run(ctx, adjustScript, []string{a.balance(), a.usage(), a.marker(adj.Request), a.open()},
		max(adj.Amount, -driver.MaxCredits-1), ps, pe, adj.Allowance, s.open, mode, sec, nsec,
		a.markers(), s.open, int64(driver.MaxCredits), int(adj.Part), lotOf(adj), driver.MaxGrantLots, adj.Revision)
	if err != nil {
		return driver.Balance{}, fail(ctx, err, "adjustment %s of account %q", adj.Request, adj.Account)
	}
	st, b, err := balanceReply(reply, adj.Account, "adjust")
	if err != nil {
		return b, err
	}
	switch st {
	case stInsufficient:
		return b, driver.ErrInsufficientCredits
	case stTooMany:
		return b, fmt.Errorf("redis: adjustment %s of account %q: %w", adj.Request, adj.Account, driver.ErrTooManyCredits)
	case stTooManyLots:
		return b, fmt.Errorf("redis: adjustment %s of account %q: %w", adj.Request, adj.Account, driver.ErrTooManyGrants)
	}
	return b, nil
}

// Balance returns the account's balance at period p, renewing it if due and voiding
// the reservations past their deadline at now (on the server's clock unless
// Options.CallerClock).
func (s *Store) Balance(ctx context.Context, account string, now time.Time, p driver.Period, allowance int64) (driver.Balance, error) {
	if err := ctx.Err(); err != nil {
		return driver.Balance{}, err
	}
	a := s.account(account)
	ps, pe := periodArgs(p)
	mode, sec, nsec := s.clock(now)
	reply, err := s.run(ctx, balanceScript, []string{a.balance(), a.usage(), a.open()}, ps, pe, allowance,
		mode, sec, nsec, a.markers(), s.open)
	if err != nil {
		return driver.Balance{}, fail(ctx, err, "reading the balance of account %q", account)
	}
	_, b, err := balanceReply(reply, account, "balance")
	return b, err
}

// Usage returns the calls per API counted in period p.
func (s *Store) Usage(ctx context.Context, account string, p driver.Period) (map[string]int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	a := s.account(account)
	ps, _ := periodArgs(p)
	reply, err := s.run(ctx, usageScript, []string{a.balance(), a.usage()}, ps)
	if err != nil {
		return nil, fail(ctx, err, "reading the usage of account %q", account)
	}
	r := asSlice(reply)
	if len(r) == 0 || len(r)%2 != 1 {
		return nil, errReply("usage of account "+strconv.Quote(account), reply)
	}
	if asInt(r[0]) == stNotFound {
		return nil, noBalance(account)
	}
	u := make(map[string]int64, len(r)/2)
	for i := 1; i < len(r); i += 2 {
		u[asString(r[i])] = asInt(r[i+1])
	}
	return u, nil
}
