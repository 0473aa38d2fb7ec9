package redis

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store"
)

// Admit performs the parts of s in one script, one round trip: a replay of an
// admitted request takes nothing; then the key check, the rate limit, the slot and the
// credits are each checked, in that order, and only if all of them allow the call are
// they recorded. A denied step changes nothing (beyond dropping ended leases and
// applying a due credit renewal, which change no observable state). A key check that
// names another account than the step's denies the step with driver.KeyUnknown,
// without a round trip: a key admits calls of its own account only.
func (s *Store) Admit(ctx context.Context, st driver.Step) (driver.StepResult, error) {
	if err := ctx.Err(); err != nil {
		return driver.StepResult{}, err
	}
	c, res, err := s.admitCall(st, "")
	if c.args == nil || err != nil {
		return res, err
	}
	reply, err := s.runBatched(ctx, c)
	return s.admitted(ctx, st, reply, err)
}

// admitted returns the outcome of st's step from the reply of its run (or the error of
// the run). A step refused until its account is indexed is sent again once the account
// is (see [Store.indexFirst]).
func (s *Store) admitted(ctx context.Context, st driver.Step, reply any, runErr error) (driver.StepResult, error) {
	for range indexAttempts {
		res, need, err := admission(ctx, st, reply, runErr)
		if err != nil || need == nil {
			return res, err
		}
		claim, err := s.indexFirst(ctx, st.Account, *need)
		if err != nil {
			return res, fail(ctx, err, "admission %s of account %q: indexing the account", st.Request, st.Account)
		}
		c, _, _ := s.admitCall(st, claim)
		reply, runErr = s.runBatched(ctx, c)
	}
	return driver.StepResult{}, fmt.Errorf("redis: admission %s of account %q: %w: the index of expiring accounts changed under %d attempts to index it",
		st.Request, st.Account, store.ErrUnavailable, indexAttempts)
}

// admitCall returns the call of admitScript that performs st, or, with none (no
// arguments), the result of a step decided without a round trip, or an error. claim is
// the step's claim to an indexed account (see [Store.indexFirst]), or empty.
//
// A step's arguments are two: its member (the request id) and its parameters, one
// string (see lua/admit.lua), which the calls of one account nearly always share: the
// script reads a step's parameters only when they differ from the step's before, and
// Redis and the client pass two arguments a step instead of twenty.
func (s *Store) admitCall(st driver.Step, claim string) (scriptCall, driver.StepResult, error) {
	var res driver.StepResult
	var buf [256]byte
	p := buf[:0]
	p = s.appendClock(p, st.Now)

	keyID := ""
	switch {
	case st.Key == nil:
		p = append(p, fieldSep, fieldSep)
	case st.Key.Account != st.Account:
		// A key admits calls of its own account only, and its record lives in its
		// account's slot, which one script over the step's account cannot read.
		res.Denied, res.Key = driver.DeniedKey, driver.KeyUnknown
		return scriptCall{}, res, nil
	case st.Key.KeyID == "":
		p = append(p, 's', fieldSep)
		p = strconv.AppendInt(p, st.Key.AccountRevision, 10)
		p = append(p, fieldSep)
	default:
		keyID = st.Key.KeyID
		p = append(p, 'k', fieldSep)
		p = hex.AppendEncode(p, st.Key.Hash[:])
		p = append(p, '/')
		p = strconv.AppendInt(p, st.Key.Revision, 10)
		p = append(p, '/')
		p = strconv.AppendInt(p, st.Key.AccountRevision, 10)
		p = append(p, fieldSep)
	}

	if st.Rate != nil {
		e, window, err := rateArgs(*st.Rate, st.EventCount())
		if err != nil {
			return scriptCall{}, res, err
		}
		p = appendFields(p, e, window)
	} else {
		p = append(p, fieldSep, fieldSep)
	}

	if st.Slot != nil {
		us, ttl := leaseArgs(st.Slot.Lease)
		p = appendFields(p, int64(st.Slot.Ceiling), us, ttl)
	} else {
		p = append(p, fieldSep, fieldSep, fieldSep)
	}

	var apis []string
	if c := st.Credits; c != nil {
		switch {
		case c.Account != st.Account || c.Request != st.Request:
			return scriptCall{}, res, fmt.Errorf("redis: admission %s of account %q reserves for %s of account %q", st.Request, st.Account, c.Request, c.Account)
		}
		if err := checkReservation(c); err != nil {
			return scriptCall{}, res, err
		}
		// The marker of an open reservation lives until it is settled or voided.
		p = appendFields(p, c.Amount, c.Period.Start.UnixMicro(), c.Period.End.UnixMicro(), c.Allowance)
		p = append(p, s.open...)
		p = append(p, fieldSep)
		p = appendFields(p, c.Expires.Sub(c.Now).Microseconds())
		apis = c.APIs
	} else {
		p = append(p, fieldSep, fieldSep, fieldSep, fieldSep)
		p = append(p, s.retention...)
		p = append(p, fieldSep, fieldSep)
	}
	p = append(p, claim...)
	p = append(p, fieldSep)
	p = strconv.AppendInt(p, int64(len(keyID)), 10)
	p = append(p, fieldSep)
	p = append(p, keyID...)
	p = appendList(p, apis)

	keys := s.account(st.Account).callKeys(st.Request,
		kindRecord, kindKeys, kindTat, kindLeases, kindBalance, kindUsage, kindOpen)
	return scriptCall{admitScript, keys, []any{memberOf(keys[len(keys)-1]), string(p)}, 7}, res, nil
}

// admission returns the outcome of st's step of admitScript from the step's reply, or
// from the error of its run; or, for a step refused until its account is indexed, what
// to index it by.
func admission(ctx context.Context, st driver.Step, reply any, err error) (driver.StepResult, *indexNeed, error) {
	res, err := decodeAdmission(ctx, st, reply, err)
	if err == errIndexFirst {
		r := asSlice(reply)
		return res, &indexNeed{deadline: asInt(r[9]), epoch: asString(r[10])}, nil
	}
	return res, nil, err
}

// errIndexFirst is decodeAdmission's report of a step refused until its account is
// indexed.
var errIndexFirst = errors.New("redis: the account must be indexed first")

func decodeAdmission(ctx context.Context, st driver.Step, reply any, err error) (driver.StepResult, error) {
	var res driver.StepResult
	if err != nil {
		return res, fail(ctx, err, "admission %s of account %q", st.Request, st.Account)
	}
	r := asSlice(reply)
	if len(r) != 21 {
		return res, errReply("admission of account "+st.Account, reply)
	}
	if asInt(r[0]) == stNotFound {
		return res, noBalance(st.Account)
	}
	switch asInt(r[1]) {
	case 0:
		res.Denied = driver.NotDenied
	case 1:
		res.Denied = driver.DeniedKey
	case 2:
		res.Denied = driver.DeniedRate
	case 3:
		res.Denied = driver.DeniedSlot
	case 4:
		res.Denied = driver.DeniedCredits
	case 5:
		return res, errIndexFirst
	default:
		return res, errReply("admission of account "+st.Account, reply)
	}
	if st.Key != nil {
		res.Key = keyState(asInt(r[2]))
	}
	if st.Rate != nil {
		res.Rate = decodeRate(r, 3, *st.Rate, st.EventCount())
	}
	if st.Slot != nil {
		res.Slot = driver.SlotDecision{Acquired: asInt(r[7]) == 1, InUse: int(asInt(r[8]))}
	}
	if st.Credits != nil && (res.Denied == driver.NotDenied || res.Denied == driver.DeniedCredits) {
		res.Balance = withParts(driver.Balance{Remaining: pair(r[9], r[10]), Used: pair(r[11], r[12]),
			Allowance: asInt(r[13]), Period: decodePeriod(r[14], r[15])}, r[16:])
		if res.Denied != driver.NotDenied {
			res.Balance.Charge = driver.Parts{}
		}
	}
	return res, nil
}

// pair returns the number hi * 10^9 + lo of a reply's two integers.
func pair(hi, lo any) int64 {
	return asInt(hi)*1_000_000_000 + asInt(lo)
}

// Close frees the slot and settles the reservation of an admitted call in one script,
// one round trip; freeing the slot alone is one ZREM. The slot is freed even if the
// settlement is refused (an unknown reservation, a refund above the amount reserved),
// since the call has ended either way. Settling again refunds nothing more; freeing a
// free slot is not an error.
func (s *Store) Close(ctx context.Context, c driver.Closing) (driver.Balance, error) {
	if err := ctx.Err(); err != nil {
		return driver.Balance{}, err
	}
	call, err := s.closeCall(c)
	if call.args == nil || err != nil {
		return driver.Balance{}, err
	}
	reply, err := s.runBatched(ctx, call)
	return closing(ctx, c, reply, err)
}

// closeCall returns the call that performs c: closeScript's, or a plain ZREM when it
// frees a slot alone; none (no arguments) when there is nothing to do.
func (s *Store) closeCall(c driver.Closing) (scriptCall, error) {
	a := s.account(c.Account)
	st := c.Settlement
	if st == nil {
		if !c.ReleaseSlot {
			return scriptCall{}, nil
		}
		// A plain command costs Redis a fraction of a script.
		return scriptCall{args: []any{"zrem", a.leases(), c.Request.String()}}, nil
	}
	switch {
	case st.Account != c.Account || st.Request != c.Request:
		return scriptCall{}, fmt.Errorf("redis: closing %s of account %q settles %s of account %q", c.Request, c.Account, st.Request, st.Account)
	case st.Refund < 0:
		return scriptCall{}, fmt.Errorf("redis: reservation %s: negative refund: %w", st.Request, store.ErrConflict)
	}
	for _, api := range st.Uncount {
		if strings.IndexByte(api, apiSeparator) >= 0 {
			return scriptCall{}, fmt.Errorf("redis: reservation %s: API %q: %w", st.Request, api, store.ErrInvalid)
		}
	}
	var buf [160]byte
	p := buf[:0]
	if c.ReleaseSlot {
		p = append(p, '1')
	}
	p = append(p, fieldSep)
	p = appendFields(p, st.Refund, -st.Refund, st.Period.Start.UnixMicro(), st.Period.End.UnixMicro(), st.Allowance)
	p = append(p, s.retention...)
	p = append(p, fieldSep)
	p = append(p, s.open...)
	p = append(p, fieldSep)
	if !s.serverClock && !st.Now.IsZero() {
		p = strconv.AppendInt(p, st.Now.UnixMicro(), 10)
	}
	p = append(p, fieldSep)
	p = appendList(p, st.Uncount)
	keys := a.callKeys(c.Request, kindLeases, kindBalance, kindUsage, kindOpen)
	return scriptCall{closeScript, keys, []any{memberOf(keys[len(keys)-1]), string(p)}, 4}, nil
}

// closing returns the outcome of c from its call's reply, or from the error of its run.
func closing(ctx context.Context, c driver.Closing, reply any, err error) (driver.Balance, error) {
	switch {
	case err != nil:
		return driver.Balance{}, fail(ctx, err, "closing %s of account %q", c.Request, c.Account)
	case c.Settlement == nil:
		return driver.Balance{}, nil
	}
	code, b, err := balanceReply(reply, c.Account, "close")
	if err != nil {
		return b, err
	}
	return settleResult(code, b, *c.Settlement)
}
