package redis

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/store"
)

// Credit periods travel as Unix microseconds.
func periodArgs(p billing.Period) (string, string) {
	return strconv.FormatInt(p.Start.UnixMicro(), 10), strconv.FormatInt(p.End.UnixMicro(), 10)
}

// decodeBalance reads the five balance fields of a reply from r[i:].
func decodeBalance(r []any, i int) billing.Balance {
	if len(r) < i+5 {
		return billing.Balance{}
	}
	return billing.Balance{Remaining: asInt(r[i]), Used: asInt(r[i+1]), Allowance: asInt(r[i+2]),
		Period: decodePeriod(r[i+3], r[i+4])}
}

// decodePeriod reads a credit period from a reply's start and end (Unix µs).
func decodePeriod(start, end any) billing.Period {
	return billing.Period{Start: time.UnixMicro(asInt(start)).UTC(), End: time.UnixMicro(asInt(end)).UTC()}
}

func noBalance(account string) error {
	return fmt.Errorf("redis: balance of account %q: %w", account, store.ErrNotFound)
}

// balanceReply decodes the reply of a script that answers a status and a balance.
func balanceReply(reply any, account, what string) (int64, billing.Balance, error) {
	r := asSlice(reply)
	if len(r) == 0 {
		return 0, billing.Balance{}, errReply(what+" of account "+strconv.Quote(account), reply)
	}
	st := asInt(r[0])
	if st == stNotFound {
		return st, billing.Balance{}, noBalance(account)
	}
	return st, decodeBalance(r, 1), nil
}

// Open creates an account's balance.
func (s *Store) Open(ctx context.Context, o billing.Opening) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if o.Balance < 0 {
		return fmt.Errorf("redis: account %q: a balance cannot be negative", o.Account)
	}
	ps, pe := periodArgs(o.Period)
	reply, err := s.run(ctx, openScript, []string{s.account(o.Account).balance()}, o.Balance, o.Allowance, ps, pe)
	if err != nil {
		return fail(ctx, err, "opening the balance of account %q", o.Account)
	}
	if asInt(reply) == stConflict {
		return fmt.Errorf("redis: balance of account %q: %w", o.Account, store.ErrConflict)
	}
	return nil
}

// Reserve takes credits for a call, in one script: renewal if due, the replay check,
// the balance check, the debit, the usage counts and the reservation's marker.
func (s *Store) Reserve(ctx context.Context, r billing.Reservation) (billing.Balance, error) {
	if err := ctx.Err(); err != nil {
		return billing.Balance{}, err
	}
	if r.Amount < 0 {
		return billing.Balance{}, fmt.Errorf("redis: reservation %s: negative amount: %w", r.Request, store.ErrConflict)
	}
	a := s.account(r.Account)
	ps, pe := periodArgs(r.Period)
	args := make([]any, 0, 6+len(r.APIs))
	args = append(args, r.Amount, -r.Amount, ps, pe, r.Allowance, s.open)
	for _, api := range r.APIs {
		args = append(args, api)
	}
	reply, err := s.run(ctx, reserveScript, []string{a.balance(), a.usage(), a.marker(r.Request)}, args...)
	if err != nil {
		return billing.Balance{}, fail(ctx, err, "reservation %s of account %q", r.Request, r.Account)
	}
	st, b, err := balanceReply(reply, r.Account, "reserve")
	if err != nil {
		return b, err
	}
	if st == stInsufficient {
		return b, billing.ErrInsufficientCredits
	}
	return b, nil
}

// settleArgs returns a step's arguments of closeScript after the member and the release
// flag: refund, -refund, period, allowance, retention, open reservation TTL, then the
// number of APIs to uncount and the APIs.
func (s *Store) settleArgs(st billing.Settlement, args []any) []any {
	ps, pe := periodArgs(st.Period)
	args = append(args, st.Refund, -st.Refund, ps, pe, st.Allowance, s.retention, s.open, len(st.Uncount))
	for _, api := range st.Uncount {
		args = append(args, api)
	}
	return args
}

// settleResult maps a settlement's status.
func settleResult(st int64, b billing.Balance, s billing.Settlement) (billing.Balance, error) {
	switch st {
	case stUnknown:
		return billing.Balance{}, fmt.Errorf("redis: reservation %s of account %q: %w", s.Request, s.Account, store.ErrNotFound)
	case stConflict:
		return b, fmt.Errorf("redis: reservation %s of account %q: refund %d is more than was reserved: %w", s.Request, s.Account, s.Refund, store.ErrConflict)
	case stOverflow:
		return b, fmt.Errorf("redis: reservation %s of account %q: refund %d would take the remaining credits past 2^63-1; the reservation stays open: %w", s.Request, s.Account, s.Refund, store.ErrConflict)
	}
	return b, nil
}

// Settle closes a reservation, at most once, in one script: Close's, freeing no slot.
func (s *Store) Settle(ctx context.Context, st billing.Settlement) (billing.Balance, error) {
	if err := ctx.Err(); err != nil {
		return billing.Balance{}, err
	}
	c := billing.Closing{Account: st.Account, Request: st.Request, Settlement: &st}
	call, err := s.closeCall(c)
	if err != nil {
		return billing.Balance{}, err
	}
	reply, err := s.runCall(ctx, call)
	return closing(ctx, c, reply, err)
}

// Adjust adds credits to, or takes them from, the balance, once per request id.
func (s *Store) Adjust(ctx context.Context, adj billing.Adjustment) (billing.Balance, error) {
	if err := ctx.Err(); err != nil {
		return billing.Balance{}, err
	}
	a := s.account(adj.Account)
	ps, pe := periodArgs(adj.Period)
	reply, err := s.run(ctx, adjustScript, []string{a.balance(), a.usage(), a.marker(adj.Request)},
		adj.Amount, ps, pe, adj.Allowance, s.retention)
	if err != nil {
		return billing.Balance{}, fail(ctx, err, "adjustment %s of account %q", adj.Request, adj.Account)
	}
	st, b, err := balanceReply(reply, adj.Account, "adjust")
	if err != nil {
		return b, err
	}
	if st == stInsufficient {
		return b, billing.ErrInsufficientCredits
	}
	return b, nil
}

// Balance returns the account's balance at period p, renewing it if due.
func (s *Store) Balance(ctx context.Context, account string, p billing.Period, allowance int64) (billing.Balance, error) {
	if err := ctx.Err(); err != nil {
		return billing.Balance{}, err
	}
	a := s.account(account)
	ps, pe := periodArgs(p)
	reply, err := s.run(ctx, balanceScript, []string{a.balance(), a.usage()}, ps, pe, allowance)
	if err != nil {
		return billing.Balance{}, fail(ctx, err, "reading the balance of account %q", account)
	}
	_, b, err := balanceReply(reply, account, "balance")
	return b, err
}

// Usage returns the calls per API counted in period p.
func (s *Store) Usage(ctx context.Context, account string, p billing.Period) (map[string]int64, error) {
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
