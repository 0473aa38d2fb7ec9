package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store"
)

var _ driver.Roller = (*Store)(nil)

// stSeen is the status of a roll whose next reservation's request id was used before
// (see lua/roll.lua).
const stSeen = 11

// Roll settles a reservation and opens the next in its place in one script, one round
// trip (see [driver.Roller] and lua/roll.lua). It runs on the clock of the
// Settlement's Now (else the next reservation's; the server's with a zero Now or
// without Options.CallerClock); the next reservation is held for its Expires-Now
// from that clock, as Reserve holds one. Like Reserve, a next reservation the index
// of expiring accounts would not find is refused, changing nothing, and the roll
// made again once the account is indexed (see [Store.indexFirst]).
func (s *Store) Roll(ctx context.Context, r driver.Roll) (driver.RollResult, error) {
	if err := ctx.Err(); err != nil {
		return driver.RollResult{}, err
	}
	st := &r.Settlement
	if err := r.Check(); err != nil {
		return driver.RollResult{}, fmt.Errorf("redis: %w: %w", err, store.ErrConflict)
	}
	for api := range r.Counts {
		if err := checkAPI("redis: the API of a roll's count", api); err != nil {
			return driver.RollResult{}, err
		}
	}
	for _, api := range st.Uncount {
		if err := checkAPI("redis: an API a roll uncounts", api); err != nil {
			return driver.RollResult{}, err
		}
	}
	a := s.account(st.Account)
	keys := []string{a.balance(), a.usage(), a.open(), a.marker(st.Request)}
	args := s.rollArgs(&r, a)
	if r.Next != nil {
		keys = append(keys, a.marker(r.Next.Request))
	}
	for range indexAttempts {
		reply, err := s.write(ctx, rollScript, keys, args...)
		if err != nil {
			return driver.RollResult{}, fail(ctx, err, "roll of %s of account %q", st.Request, st.Account)
		}
		if rs := asSlice(reply); len(rs) == 3 && asInt(rs[0]) == stIndex {
			claim, err := s.indexFirst(ctx, st.Account, indexNeed{deadline: asInt(rs[1]), epoch: asString(rs[2])})
			if err != nil {
				return driver.RollResult{}, fail(ctx, err, "roll of %s of account %q: indexing the account", st.Request, st.Account)
			}
			args[rollClaim] = claim
			continue
		}
		return rollResult(reply, &r)
	}
	return driver.RollResult{}, fmt.Errorf("redis: roll of %s of account %q: %w: the index of expiring accounts changed under %d attempts to index it",
		st.Request, st.Account, store.ErrUnavailable, indexAttempts)
}

// checkAPI refuses an API the store cannot hold: text no store holds (store.CheckText),
// or one holding apiSeparator, which the markers and close.lua's parameters use.
func checkAPI(what, api string) error {
	if err := store.CheckText(what, api); err != nil {
		return err
	}
	if strings.IndexByte(api, apiSeparator) >= 0 {
		return fmt.Errorf("%s, %q, holds byte 0x1f: %w", what, api, store.ErrInvalid)
	}
	return nil
}

// rollClaim is the index of the claim in a roll's arguments (ARGV 16 of roll.lua).
const rollClaim = 15

// rollArgs returns the arguments of roll.lua for r (see its header).
func (s *Store) rollArgs(r *driver.Roll, a acctKeys) []any {
	st := r.Settlement
	ps, pe := periodArgs(st.Period)
	now := st.Now
	if now.IsZero() && r.Next != nil {
		now = r.Next.Now
	}
	mode, sec, nsec := "s", int64(0), int64(0)
	if !now.IsZero() {
		mode, sec, nsec = s.clock(now)
	}
	var next, hold, nextMember string
	if n := r.Next; n != nil {
		next, hold, nextMember = strconv.FormatInt(n.Amount, 10), holdArg(n), n.Request.String()
	}
	args := make([]any, 0, 16+2*len(r.Counts))
	args = append(args, ps, pe, st.Allowance, mode, sec, nsec, a.markers(), s.open, s.retention,
		st.Refund, st.Request.String(), string(appendList(nil, st.Uncount)), next, hold, nextMember, "")
	for api, n := range r.Counts {
		args = append(args, api, n)
	}
	return args
}

// rollResult decodes the reply of roll.lua.
func rollResult(reply any, r *driver.Roll) (driver.RollResult, error) {
	st := &r.Settlement
	code, b, err := balanceReply(reply, st.Account, "roll")
	if err != nil {
		return driver.RollResult{}, err
	}
	switch code {
	case stSeen:
		return driver.RollResult{Balance: b}, fmt.Errorf("redis: roll of %s of account %q: the next reservation %s was made before: %w",
			st.Request, st.Account, r.Next.Request, store.ErrConflict)
	case stOverflow:
		return driver.RollResult{Balance: b}, fmt.Errorf("redis: roll of %s of account %q: a count or the remaining credits would pass 2^63-1; the reservation stays open: %w",
			st.Request, st.Account, store.ErrConflict)
	case stOK:
	default:
		b, err = settleResult(code, b, *st)
		return driver.RollResult{Balance: b}, err
	}
	rs := asSlice(reply)
	if len(rs) != 13 {
		return driver.RollResult{}, errReply("roll of account "+strconv.Quote(st.Account), reply)
	}
	return driver.RollResult{Balance: b, Next: asInt(rs[11]), Replay: asInt(rs[12]) == 1}, nil
}
