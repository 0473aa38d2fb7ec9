package billing

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"
)

// Errors of admission. Each is the Reason of a [*LimitError].
var (
	ErrRateLimited        = errors.New("billing: rate limit exceeded")
	ErrConcurrencyLimited = errors.New("billing: concurrency ceiling reached")
)

// A LimitError reports a call refused by the plan: its rate limit, its concurrency
// ceiling or its credits. It matches its Reason with [errors.Is].
type LimitError struct {
	// Reason is ErrRateLimited, ErrConcurrencyLimited or ErrInsufficientCredits.
	Reason error
	// Message tells the caller what happened and what to do.
	Message string
	// RetryAfter is how long to wait before trying again, when that is known.
	RetryAfter time.Duration
}

func (e *LimitError) Error() string { return e.Message }

// Unwrap returns the reason.
func (e *LimitError) Unwrap() error { return e.Reason }

// A Meter admits and settles calls against an account's plan: it is the policy that the
// three stores (ledger, rate limiter, concurrency limiter) carry out. Admission is one
// step (rate, then slot, then credits, undoing the slot if the credits are short) and
// settlement another (keep or refund the charge, then free the slot).
//
// A Meter is safe for concurrent use.
type Meter struct {
	ledger Ledger
	rates  RateLimiter
	slots  ConcurrencyLimiter
	lease  time.Duration
	period atomic.Pointer[Period] // the last period computed, to spare the calendar math
}

// MeterOptions configures a [Meter]. The zero value is the default.
type MeterOptions struct {
	// Lease is how long a concurrency slot lasts without renewal. Calls that run longer
	// renew it (see [Meter.Renew]); a crashed holder's slot is free after at most one
	// lease. The default is 30 seconds.
	Lease time.Duration
}

// DefaultLease is the default [MeterOptions.Lease].
const DefaultLease = 30 * time.Second

// NewMeter returns a Meter over the three stores. opts may be nil.
func NewMeter(ledger Ledger, rates RateLimiter, slots ConcurrencyLimiter, opts *MeterOptions) (*Meter, error) {
	if ledger == nil || rates == nil || slots == nil {
		return nil, errors.New("billing: NewMeter needs a Ledger, a RateLimiter and a ConcurrencyLimiter")
	}
	m := &Meter{ledger: ledger, rates: rates, slots: slots, lease: DefaultLease}
	if opts != nil && opts.Lease > 0 {
		m.lease = opts.Lease
	}
	return m, nil
}

// Lease returns the lease of concurrency slots.
func (m *Meter) Lease() time.Duration { return m.lease }

// Ledger returns the meter's ledger.
func (m *Meter) Ledger() Ledger { return m.ledger }

// An Admission asks to admit one call.
type Admission struct {
	Account string
	Plan    Plan
	Request RequestID
	// APIs are the APIs the call runs (one for REST and MCP; the distinct APIs of a
	// GraphQL query).
	APIs []string
	// Cost is the credits the call takes.
	Cost int64
	Now  time.Time
}

// A Ticket is an admitted call, to be settled exactly once with [Meter.Settle].
type Ticket struct {
	Account string
	Request RequestID
	APIs    []string
	Cost    int64
	Plan    Plan
	Period  Period
	// Balance is the balance after the reservation (or, when the credits were short,
	// the balance that was short).
	Balance Balance
	// Rate is the rate-limit decision, meaningful when the plan has a rate limit.
	Rate RateDecision
	// slot reports whether a concurrency slot is held.
	slot bool
}

// Admit checks the rate limit, takes a concurrency slot and reserves the credits, in that
// order. A refusal is a [*LimitError]; any other error comes from a store, and leaves
// nothing held. The returned Ticket carries what the caller reports in headers, even on
// refusal.
func (m *Meter) Admit(ctx context.Context, a Admission) (Ticket, error) {
	t := Ticket{Account: a.Account, Request: a.Request, APIs: a.APIs, Cost: a.Cost, Plan: a.Plan, Period: m.periodOf(a.Now)}
	if l, ok := a.Plan.RateLimit(); ok {
		d, err := m.rates.Allow(ctx, a.Account, l, a.Now)
		if err != nil {
			return t, err
		}
		t.Rate = d
		if !d.Allowed {
			return t, &LimitError{Reason: ErrRateLimited, RetryAfter: d.RetryAfter, Message: fmt.Sprintf(
				"rate limit exceeded: the %s plan allows %d calls per minute; retry in %s",
				a.Plan.Name, a.Plan.RatePerMinute, roundUp(d.RetryAfter))}
		}
	}
	if a.Plan.Concurrency > 0 {
		d, err := m.slots.Acquire(ctx, a.Account, a.Request, a.Plan.Concurrency, m.lease, a.Now)
		if err != nil {
			return t, err
		}
		if !d.Acquired {
			return t, &LimitError{Reason: ErrConcurrencyLimited, RetryAfter: time.Second, Message: fmt.Sprintf(
				"too many calls at once: the %s plan allows %d concurrent calls; retry when one of them finishes",
				a.Plan.Name, a.Plan.Concurrency)}
		}
		t.slot = true
	}
	b, err := m.ledger.Reserve(ctx, Reservation{
		Account: a.Account, Request: a.Request, APIs: a.APIs, Amount: a.Cost,
		Period: t.Period, Allowance: a.Plan.Credits,
	})
	t.Balance = b
	if err != nil {
		m.release(context.WithoutCancel(ctx), &t)
		if errors.Is(err, ErrInsufficientCredits) {
			return t, &LimitError{Reason: ErrInsufficientCredits, Message: fmt.Sprintf(
				"credits exhausted: this call costs %d and %d remain; the balance renews at %s",
				a.Cost, b.Remaining, b.Period.End.Format(time.RFC3339))}
		}
		return t, err
	}
	return t, nil
}

// An Outcome says how an admitted call ended, for settlement.
type Outcome struct {
	// Refund is the number of credits to give back: the cost of the APIs that failed on
	// the service's side. Zero keeps the whole charge.
	Refund int64
	// Failed lists those APIs, which then do not count in the period's usage.
	Failed []string
	Now    time.Time
}

// Settle closes an admitted call: the ledger keeps the charge or refunds o.Refund, then
// the concurrency slot is freed. It runs even if ctx is canceled (a client that hangs up
// must not leave its call unsettled). It returns the balance after settlement.
func (m *Meter) Settle(ctx context.Context, t *Ticket, o Outcome) (Balance, error) {
	ctx = context.WithoutCancel(ctx)
	b, err := m.ledger.Settle(ctx, Settlement{
		Account: t.Account, Request: t.Request, Refund: o.Refund, Uncount: o.Failed,
		Period: m.periodOf(o.Now), Allowance: t.Plan.Credits,
	})
	if err == nil {
		t.Balance = b
	}
	if rerr := m.release(ctx, t); err == nil {
		err = rerr
	}
	return t.Balance, err
}

// HoldsSlot reports whether the ticket holds a concurrency slot.
func (t *Ticket) HoldsSlot() bool { return t.slot }

// Renew extends the lease of the call's concurrency slot, for calls that run longer
// than half a lease.
func (m *Meter) Renew(ctx context.Context, t *Ticket, now time.Time) error {
	if !t.slot {
		return nil
	}
	return m.slots.Renew(ctx, t.Account, t.Request, m.lease, now)
}

// release frees the ticket's slot, if it holds one. ctx must not be canceled by the
// client (see Settle).
func (m *Meter) release(ctx context.Context, t *Ticket) error {
	if !t.slot {
		return nil
	}
	t.slot = false
	return m.slots.Release(ctx, t.Account, t.Request)
}

// periodOf returns MonthOf(now), from a cache while the month lasts.
func (m *Meter) periodOf(now time.Time) Period {
	if p := m.period.Load(); p != nil && !now.Before(p.Start) && now.Before(p.End) {
		return *p
	}
	p := MonthOf(now)
	m.period.Store(&p)
	return p
}

// Status is what an account's plan allows and what it has used, for the analytics
// endpoint.
type Status struct {
	Balance Balance
	// Usage counts the calls per API in the current period.
	Usage map[string]int64
	// Rate is what the rate limiter would decide now, meaningful when the plan has a
	// rate limit.
	Rate RateDecision
	// SlotsInUse is the number of calls running now, meaningful when the plan has a
	// concurrency ceiling.
	SlotsInUse int
}

// Status reads an account's position without changing anything but a due renewal.
func (m *Meter) Status(ctx context.Context, account string, plan Plan, now time.Time) (Status, error) {
	var s Status
	period := m.periodOf(now)
	b, err := m.ledger.Balance(ctx, account, period, plan.Credits)
	if err != nil {
		return s, err
	}
	s.Balance = b
	if s.Usage, err = m.ledger.Usage(ctx, account, b.Period); err != nil {
		return s, err
	}
	if l, ok := plan.RateLimit(); ok {
		if s.Rate, err = m.rates.Peek(ctx, account, l, now); err != nil {
			return s, err
		}
	}
	if plan.Concurrency > 0 {
		if s.SlotsInUse, err = m.slots.InUse(ctx, account, now); err != nil {
			return s, err
		}
	}
	return s, nil
}

// roundUp rounds d up to whole seconds, at least one.
func roundUp(d time.Duration) time.Duration {
	s := math.Ceil(d.Seconds())
	if s < 1 {
		s = 1
	}
	return time.Duration(s) * time.Second
}
