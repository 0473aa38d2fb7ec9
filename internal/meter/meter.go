package meter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/blocks"
	"github.com/tollgate-dev/tollgate/billing/driver"
)

// Errors of admission. Each is the Reason of a [*LimitError].
var (
	ErrRateLimited        = errors.New("billing: rate limit exceeded")
	ErrConcurrencyLimited = errors.New("billing: concurrency ceiling reached")
)

// A LimitError reports a call refused by the plan: its rate limit, its concurrency
// ceiling or its credits. It matches its Reason with [errors.Is].
type LimitError struct {
	// Reason is ErrRateLimited, ErrConcurrencyLimited or billing.ErrInsufficientCredits.
	Reason error
	// Message tells the caller what happened and what to do.
	Message string
	// RetryAfter is how long to wait before trying again, when that is known.
	RetryAfter time.Duration
	// KeyLive reports that the admission's key check ([Admission.Key]) found the key
	// live before the refusal. When false the key may be stale: a step to the limits'
	// store refused the call before the key's store answered.
	KeyLive bool
}

func (e *LimitError) Error() string { return e.Message }

// Unwrap returns the reason.
func (e *LimitError) Unwrap() error { return e.Reason }

// ErrKeyChanged is the reason of a [*KeyError]: the key a call authenticated with was
// rotated, revoked or updated since its record was read (from a cache).
var ErrKeyChanged = errors.New("billing: the key is no longer valid")

// A KeyError reports a key check ([Admission.Key]) that failed in admission: read the
// key's record again. It matches [ErrKeyChanged].
type KeyError struct {
	State driver.KeyState
}

func (e *KeyError) Error() string {
	if e.State == driver.KeyRevoked {
		return "billing: the key has been revoked"
	}
	return "billing: the key has been rotated or deleted"
}

// Unwrap returns ErrKeyChanged.
func (e *KeyError) Unwrap() error { return ErrKeyChanged }

// A Meter admits and settles calls against an account's plan: it is the policy that the
// stores (ledger, rate limiter, concurrency limiter, and a key checker when key records
// are cached) carry out. Admission is one step per store: the rate limit, then the slot,
// then the credits (and the key check, which rides with the store that holds keys),
// undoing what earlier stores took if a later one refuses; a step that only checks the
// key (its store's other parts served by a credit block) is sent beside the earlier
// steps, and the answer is still the first refusal in that order. Settlement is one step per
// store that holds something: keep or refund the charge, free the slot. A call whose
// credits came from a credit block frees its slot while its charge waits for the
// block's next roll.
//
// Stores that implement [driver.Admitter] perform all the parts they hold in one round trip;
// the others are called part by part. The Meter knows the parts one store holds by the
// value given in their roles: a decorated store (metrics, tracing) keeps its one round
// trip when one decorator value plays every role (see [driver.Wrapper]); a decorator per
// role costs a round trip per part, and the Meter logs a warning when it is made.
//
// A Meter is safe for concurrent use.
type Meter struct {
	ledger driver.Ledger
	rates  driver.RateLimiter
	slots  driver.ConcurrencyLimiter
	keys   driver.KeyChecker
	lease  time.Duration
	groups []group // the stores in the order admission visits them
	hold   time.Duration
	now    func() time.Time
	log    *slog.Logger
	retry  *retryQueue // closings a store could not take when they were due
	blocks *blocks.Blocks
}

// Options configures a [Meter]. The zero value is the default.
type Options struct {
	// Lease is how long a concurrency slot lasts without renewal. Calls that run longer
	// renew it (see [Meter.Renew]); a crashed holder's slot is free after at most one
	// lease. The default is 30 seconds.
	Lease time.Duration
	// Keys checks the key of admissions that carry one (Admission.Key), for services
	// that cache key records. When it is the same store as one of the others and an
	// Admitter, the check is part of that store's admission step. Nil means admissions
	// carry no key check.
	Keys driver.KeyChecker
	// Hold is how long a reservation may stay open: one still open Hold after its
	// admission is voided, its credits given back. It must be longer than any call
	// runs, plus the time its settlement takes, plus the clock skew between the
	// instances that share the ledger. The default is [DefaultHold].
	Hold time.Duration
	// Now returns the current time, for the retries of closings, which stop when the
	// reservation expires. The default is time.Now.
	Now func() time.Time
	// Retries is the number of closings (keeping or refunding a charge, freeing a slot)
	// that the Meter retries in the background when a store could not take them; a
	// closing that finds the queue full is left to the reservation's expiry and the
	// slot's lease. The default is [DefaultRetries].
	Retries int
	// Logger receives the closings the Meter leaves to expiry, and the warning about a
	// store whose one-step admission its decorators split (see [driver.Wrapper]). The
	// default is slog.Default().
	Logger *slog.Logger
	// Blocks, when set, serves the credits of busy accounts' calls from credit blocks
	// (package billing/blocks) over the same ledger: such a call's admission sends the
	// other parts (key, rate, slot) to their stores, and its settlement waits for the
	// block's roll. The Meter closes it with [Meter.Close].
	Blocks *blocks.Blocks
}

// DefaultLease is the default [Options.Lease].
const DefaultLease = 30 * time.Second

// DefaultHold is the default [Options.Hold].
const DefaultHold = time.Minute

// DefaultRetries is the default [Options.Retries].
const DefaultRetries = 1024

// The parts of an admission.
type part uint8

const (
	partRate part = 1 << iota
	partSlot
	partCredits
	partKey
	partBlock // the credits, taken from a credit block (held only, never a group's)
)

// A group is the parts of an admission held by one store.
type group struct {
	adm   driver.Admitter // nil: the parts are performed one by one through the plain interfaces
	parts part
}

// New returns a Meter over the three stores. opts may be nil.
func New(ledger driver.Ledger, rates driver.RateLimiter, slots driver.ConcurrencyLimiter, opts *Options) (*Meter, error) {
	if ledger == nil || rates == nil || slots == nil {
		return nil, errors.New("billing: meter.New needs a driver.Ledger, a driver.RateLimiter and a driver.ConcurrencyLimiter")
	}
	m := &Meter{ledger: ledger, rates: rates, slots: slots, lease: DefaultLease, hold: DefaultHold,
		now: time.Now, log: slog.Default()}
	retries := DefaultRetries
	if opts != nil {
		if opts.Lease > 0 {
			m.lease = opts.Lease
		}
		if opts.Hold > 0 {
			m.hold = opts.Hold
		}
		if opts.Now != nil {
			m.now = opts.Now
		}
		if opts.Retries > 0 {
			retries = opts.Retries
		}
		m.keys = opts.Keys
		m.blocks = opts.Blocks
		if opts.Logger != nil {
			m.log = opts.Logger
		}
	}
	m.retry = newRetryQueue(m.log, m.now, retries)
	rs := roles(m.rates, m.slots, m.ledger, m.keys)
	m.groups = planGroups(rs)
	m.warnSplits(rs)
	return m, nil
}

// A role is a part of an admission and the value that holds it.
type role struct {
	p part
	s any
}

// roles returns the parts and the values that hold them, in the order rate, slot,
// credits, key.
func roles(rates driver.RateLimiter, slots driver.ConcurrencyLimiter, ledger driver.Ledger, keys driver.KeyChecker) []role {
	rs := []role{{partRate, rates}, {partSlot, slots}, {partCredits, ledger}}
	if keys != nil {
		rs = append(rs, role{partKey, keys})
	}
	return rs
}

// planGroups groups the parts by the store that holds them, in the order rate, slot,
// credits: the parts of one Admitter form one group, visited where its first part
// falls. A key check whose store is no Admitter among the others goes first, so that a
// stale key takes nothing.
func planGroups(rs []role) []group {
	var groups []group
	for _, r := range rs {
		adm, ok := r.s.(driver.Admitter)
		if ok {
			if i := slices.IndexFunc(groups, func(g group) bool { return g.adm != nil && sameStore(g.adm, adm) }); i >= 0 {
				groups[i].parts |= r.p
				continue
			}
		}
		if r.p == partKey {
			// A key store that holds no other part: a plain check, first.
			groups = append([]group{{parts: partKey}}, groups...)
			continue
		}
		groups = append(groups, group{adm: adm, parts: r.p})
	}
	return groups
}

// sameStore reports whether two stores are the same value (comparing values whose type
// cannot be compared would panic).
func sameStore(a, b any) bool {
	ta := reflect.TypeOf(a)
	return ta == reflect.TypeOf(b) && ta.Comparable() && a == b
}

// unwrap returns the store that s decorates, through any number of [driver.Wrapper]s
// (up to a bound, should wrappers form a cycle).
func unwrap(s any) any {
	for range 100 {
		w, ok := s.(driver.Wrapper)
		if !ok {
			break
		}
		inner := w.Unwrap()
		if inner == nil {
			break
		}
		s = inner
	}
	return s
}

// A split is an Admitter whose parts the Meter performs in several steps, because they
// reach it through distinct wrappers, or through a wrapper that is no Admitter.
type split struct {
	parts part
	steps int // the steps (round trips) they take
}

// splits returns the splits of the plan.
func splits(rs []role, groups []group) []split {
	type store struct {
		s      any
		parts  part
		groups []int
	}
	var stores []store
	for _, r := range rs {
		inner := unwrap(r.s)
		if _, ok := inner.(driver.Admitter); !ok {
			continue
		}
		g := slices.IndexFunc(groups, func(g group) bool { return g.parts&r.p != 0 })
		i := slices.IndexFunc(stores, func(st store) bool { return sameStore(st.s, inner) })
		if i < 0 {
			stores = append(stores, store{s: inner})
			i = len(stores) - 1
		}
		stores[i].parts |= r.p
		if !slices.Contains(stores[i].groups, g) {
			stores[i].groups = append(stores[i].groups, g)
		}
	}
	var out []split
	for _, st := range stores {
		if len(st.groups) > 1 {
			out = append(out, split{parts: st.parts, steps: len(st.groups)})
		}
	}
	return out
}

// warnSplits logs, once, each store whose one-step admission is lost to its wrappers.
func (m *Meter) warnSplits(rs []role) {
	for _, sp := range splits(rs, m.groups) {
		m.log.Warn(fmt.Sprintf("billing: %s are one store that admits in one step, but reach the Meter through distinct values "+
			"(a wrapper per role, or a wrapper that is no driver.Admitter): each admission takes %d round trips to it instead of 1. "+
			"Decorate the whole store with one value that forwards Admit and Close, and pass it in every role (see driver.Wrapper)",
			sp.parts, sp.steps), "round_trips", sp.steps)
	}
}

// String names the parts, for messages: "the rate limiter, the ledger and the key checker".
func (p part) String() string {
	var names []string
	for _, n := range []struct {
		p    part
		name string
	}{{partRate, "the rate limiter"}, {partSlot, "the concurrency limiter"}, {partCredits, "the ledger"}, {partKey, "the key checker"}} {
		if p&n.p != 0 {
			names = append(names, n.name)
		}
	}
	switch len(names) {
	case 0:
		return "no part"
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// Lease returns the lease of concurrency slots.
func (m *Meter) Lease() time.Duration { return m.lease }

// Hold returns how long a reservation may stay open before it is voided.
func (m *Meter) Hold() time.Duration { return m.hold }

// Ledger returns the meter's ledger.
func (m *Meter) Ledger() driver.Ledger { return m.ledger }

// An Admission asks to admit one call.
type Admission struct {
	Account string
	Plan    billing.Plan
	// Period is the account's credit period that contains Now (see billing.Plans.At):
	// the ledger renews the allowance to Plan's Credits when it begins later than the
	// period the ledger holds. The zero Period is the calendar month of Now (the period
	// of an account with no billing anchor on a monthly plan).
	Period  billing.Period
	Request billing.RequestID
	// APIs are the APIs the call runs (one for REST and MCP; the distinct APIs of a
	// GraphQL query).
	APIs []string
	// Cost is the credits the call takes.
	Cost int64
	// Events is the number of rate-limit events the call counts, allowed or refused
	// together (a batch of calls counts one per call); 0 means 1. More than the plan's
	// burst could never be allowed, and is an error.
	Events int
	// Hold, when positive, is how long the reservation may stay open instead of the
	// Meter's Hold: for a call that may run longer than one call (a batch whose items
	// run in turn), so that its reservation is not voided while it runs.
	Hold time.Duration
	Now  time.Time
	// Key, when set, is checked as part of the admission (see [billing.KeyCheck]); a
	// key that is no longer live refuses the call with a [*KeyError]. It needs
	// Options.Keys.
	Key *billing.KeyCheck
}

// A Ticket is an admitted call, to be settled exactly once with [Meter.Settle].
type Ticket struct {
	Account string
	Request billing.RequestID
	APIs    []string
	Cost    int64
	Plan    billing.Plan
	Period  billing.Period
	// Expires is when the reservation is voided if it is still open.
	Expires time.Time
	// Balance is the balance after the reservation (or, when the credits were short,
	// the balance that was short). Its Allowance is the Plan's Credits: a plan changed
	// during the period changes the allowance at once, while the ledger may hold the
	// allowance its period was renewed to until the next renewal. With credit blocks,
	// what this instance's blocks hold unspent counts as remaining, not used (see
	// [billing.Balance.WithUnspent]), however the call took its credits.
	Balance billing.Balance
	// Rate is the rate-limit decision, meaningful when the plan has a rate limit.
	Rate billing.RateDecision
	// held records what the admission took: a slot, a reservation.
	held part
}

// HoldsSlot reports whether the ticket holds a concurrency slot.
func (t *Ticket) HoldsSlot() bool { return t.held&partSlot != 0 }

// Admit checks the key (if the admission carries a key check), the rate limit, takes a
// concurrency slot and reserves the credits until the ticket's Expires. A refusal by the
// plan is a [*LimitError]; a stale key a [*KeyError]; any other error comes from a
// store. After any error the caller holds nothing: what earlier stores took is given
// back, and what a store that failed may still have taken (its answer lost) is given
// back by the reservation's expiry and the slot's lease. The returned Ticket carries
// what the caller reports in headers, even on refusal.
func (m *Meter) Admit(ctx context.Context, a Admission) (Ticket, error) {
	hold := m.hold
	if a.Hold > 0 {
		hold = a.Hold
	}
	t := Ticket{Account: a.Account, Request: a.Request, APIs: a.APIs, Cost: a.Cost, Plan: a.Plan,
		Period: periodOr(a.Period, a.Now), Expires: a.Now.Add(hold)}
	need := partCredits
	limit, hasRate := a.Plan.RateLimit()
	if hasRate {
		if err := limit.CheckEvents(a.events()); err != nil {
			return t, fmt.Errorf("billing: the %s plan: %w", a.Plan.Name, err)
		}
		need |= partRate
	}
	if a.Plan.Concurrency > 0 {
		need |= partSlot
	}
	if a.Key != nil {
		if m.keys == nil {
			return t, errors.New("billing: an admission with a key check needs meter.Options.Keys")
		}
		need |= partKey
	}
	if m.blocks != nil {
		bal, ok := m.blocks.Take(ctx, blocks.Take{Account: a.Account, Request: a.Request, Amount: a.Cost, APIs: a.APIs,
			Period: t.Period, Allowance: a.Plan.Credits, Now: a.Now, Expires: t.Expires})
		if ok {
			need &^= partCredits
			t.held |= partBlock
			t.Balance = bal
			t.Balance.Allowance = a.Plan.Credits
		}
	}
	// A step that only checks the key, after steps to other stores (the key's store
	// holds the credits, which a block served), reads and takes nothing: it is sent
	// beside them, and its answer is read where its turn comes, so that the answer is
	// the one the steps in turn would give. After a refusal by the plan's limits its
	// answer only sets LimitError.KeyLive; after an error it is not waited for. It is
	// not canceled with the call (a read canceled midway may cost its store a
	// connection): it ends by itself, or at the call's deadline.
	ahead := m.keyAhead(need)
	var key <-chan outcome
	if ahead >= 0 {
		adm := m.groups[ahead].adm
		kctx, cancel := context.WithoutCancel(ctx), context.CancelFunc(func() {})
		if deadline, ok := ctx.Deadline(); ok {
			kctx, cancel = context.WithDeadline(kctx, deadline)
		}
		key = m.background("check a key", func() error {
			defer cancel()
			var scratch Ticket
			return m.admitStep(kctx, adm, partKey, &a, limit, &scratch)
		})
	}
	keyLive := false
	for i, g := range m.groups {
		parts := g.parts & need
		if parts == 0 {
			continue
		}
		var err error
		if i == ahead {
			select {
			case o := <-key:
				err = o.result()
			case <-ctx.Done():
				err = ctx.Err()
			}
		} else if g.adm != nil {
			err = m.admitStep(ctx, g.adm, parts, &a, limit, &t)
		} else {
			err = m.admitParts(ctx, parts, &a, limit, &t)
		}
		var le *LimitError
		refusal := errors.As(err, &le)
		// A step checks its key before its limits (see driver.Admitter).
		keyLive = keyLive || ((err == nil || refusal) && parts&partKey != 0)
		if refusal {
			if !keyLive && i < ahead {
				// The key check sent beside tells the caller whether the refused
				// call's key is still live, with no round trip of the caller's own.
				select {
				case o := <-key:
					keyLive = o.result() == nil
				case <-ctx.Done():
				}
			}
			le.KeyLive = keyLive
		}
		if err != nil {
			if t.held != 0 {
				m.close(context.WithoutCancel(ctx), &t, &driver.Settlement{Refund: a.Cost, Uncount: a.APIs, Now: a.Now})
			}
			if g.parts&need&partCredits != 0 && m.blocks != nil && !t.Balance.Period.Start.IsZero() {
				m.blocks.Note(a.Account, t.Balance)
			}
			return t, err
		}
	}
	if need&partCredits != 0 && m.blocks != nil {
		m.blocks.Note(a.Account, t.Balance)
		t.Balance = t.Balance.WithUnspent(m.blocks.Unspent(a.Account))
	}
	return t, nil
}

// keyAhead returns the index of the group whose step, for an admission that needs
// need, only checks the key and comes after a step to another store; -1 if none.
func (m *Meter) keyAhead(need part) int {
	if need&partKey == 0 {
		return -1
	}
	before := false
	for i, g := range m.groups {
		parts := g.parts & need
		if parts == partKey && g.adm != nil && before {
			return i
		}
		before = before || parts != 0
	}
	return -1
}

func (m *Meter) reservation(a *Admission, t *Ticket) driver.Reservation {
	return driver.Reservation{Account: a.Account, Request: a.Request, APIs: a.APIs, Amount: a.Cost,
		Period: t.Period, Allowance: a.Plan.Credits, Now: a.Now, Expires: t.Expires}
}

// admitStep sends the parts one Admitter holds in one step.
func (m *Meter) admitStep(ctx context.Context, adm driver.Admitter, parts part, a *Admission, limit billing.Limit, t *Ticket) error {
	s := driver.Step{Account: a.Account, Request: a.Request, Now: a.Now}
	if parts&partKey != 0 {
		s.Key = a.Key
	}
	if parts&partRate != 0 {
		s.Rate, s.Events = &limit, a.Events
	}
	if parts&partSlot != 0 {
		s.Slot = &driver.SlotClaim{Ceiling: a.Plan.Concurrency, Lease: m.lease}
	}
	if parts&partCredits != 0 {
		r := m.reservation(a, t)
		s.Credits = &r
	}
	r, err := adm.Admit(ctx, s)
	if err != nil {
		// The store may have applied the step before the error reached us: what it may
		// have taken comes back by itself, the reservation at its expiry and the slot
		// when its lease ends.
		return err
	}
	if parts&partRate != 0 {
		t.Rate = r.Rate
	}
	if parts&partCredits != 0 {
		t.Balance = r.Balance
		t.Balance.Allowance = a.Plan.Credits
	}
	switch r.Denied {
	case driver.NotDenied:
		t.held |= parts & (partSlot | partCredits)
		return nil
	case driver.DeniedKey:
		return &KeyError{State: r.Key}
	case driver.DeniedRate:
		return rateError(a, r.Rate)
	case driver.DeniedSlot:
		return slotError(a)
	case driver.DeniedCredits:
		return creditsError(a.Cost, r.Balance)
	}
	return fmt.Errorf("billing: the admission step answered an unknown denial %d", r.Denied)
}

// admitParts performs parts one by one through the plain interfaces.
func (m *Meter) admitParts(ctx context.Context, parts part, a *Admission, limit billing.Limit, t *Ticket) error {
	if parts&partKey != 0 {
		state, err := m.keys.CheckKey(ctx, *a.Key)
		if err != nil {
			return err
		}
		if state != driver.KeyLive {
			return &KeyError{State: state}
		}
	}
	if parts&partRate != 0 {
		var (
			d   billing.RateDecision
			err error
		)
		if n := a.events(); n > 1 {
			d, err = m.rates.AllowN(ctx, a.Account, limit, n, a.Now)
		} else {
			d, err = m.rates.Allow(ctx, a.Account, limit, a.Now)
		}
		if err != nil {
			return err
		}
		t.Rate = d
		if !d.Allowed {
			return rateError(a, d)
		}
	}
	if parts&partSlot != 0 {
		d, err := m.slots.Acquire(ctx, a.Account, a.Request, a.Plan.Concurrency, m.lease, a.Now)
		if err != nil {
			return err // a slot taken in doubt comes back when its lease ends
		}
		if !d.Acquired {
			return slotError(a)
		}
		t.held |= partSlot
	}
	if parts&partCredits != 0 {
		b, err := m.ledger.Reserve(ctx, m.reservation(a, t))
		t.Balance = b
		t.Balance.Allowance = a.Plan.Credits
		if errors.Is(err, billing.ErrInsufficientCredits) {
			return creditsError(a.Cost, b)
		}
		if err != nil {
			return err // a reservation made in doubt is voided at its expiry
		}
		t.held |= partCredits
	}
	return nil
}

// events returns the number of rate-limit events of the admission.
func (a *Admission) events() int { return max(a.Events, 1) }

func rateError(a *Admission, d billing.RateDecision) error {
	if n := a.events(); n > 1 {
		return &LimitError{Reason: ErrRateLimited, RetryAfter: d.RetryAfter, Message: fmt.Sprintf(
			"rate limit exceeded: these %d calls would pass the %s plan's %d calls per minute; retry in %s, or send fewer at once",
			n, a.Plan.Name, a.Plan.RatePerMinute, roundUp(d.RetryAfter))}
	}
	return &LimitError{Reason: ErrRateLimited, RetryAfter: d.RetryAfter, Message: fmt.Sprintf(
		"rate limit exceeded: the %s plan allows %d calls per minute; retry in %s",
		a.Plan.Name, a.Plan.RatePerMinute, roundUp(d.RetryAfter))}
}

func slotError(a *Admission) error {
	return &LimitError{Reason: ErrConcurrencyLimited, RetryAfter: time.Second, Message: fmt.Sprintf(
		"too many calls at once: the %s plan allows %d concurrent calls; retry when one of them finishes",
		a.Plan.Name, a.Plan.Concurrency)}
}

// CheckCredits returns the refusal that the admission of a call costing cost would get
// from a ledger whose balance is b (a [*LimitError] for
// [billing.ErrInsufficientCredits], with the admission's own message), or nil if b
// covers the cost: for a quote (Service.QuoteAll) that shows what a call would cost
// before it is sent. The admission itself decides on the balance it reserves from,
// which may have moved since b was read.
func CheckCredits(cost int64, b billing.Balance) error {
	if cost <= b.Remaining {
		return nil
	}
	return creditsError(cost, b)
}

func creditsError(cost int64, b billing.Balance) error {
	return &LimitError{Reason: billing.ErrInsufficientCredits, Message: fmt.Sprintf(
		"credits exhausted: this call costs %d and %d remain; the balance renews at %s",
		cost, b.Remaining, b.Period.End.Format(time.RFC3339))}
}

// An Outcome says how an admitted call ended, for settlement.
type Outcome struct {
	// Refund is the number of credits to give back: the cost of the APIs that failed on
	// the service's side, and what the others did not charge of their cost. Zero keeps
	// the whole charge.
	Refund int64
	// Failed lists those APIs, which then do not count in the period's usage.
	Failed []string
	// Now is when the settlement is made. The settlement applies to the period of the
	// reservation (Ticket.Period), even for a call that straddles the end of a period.
	Now time.Time
}

// Settle closes an admitted call: the ledger keeps the charge or refunds o.Refund, and
// the concurrency slot is freed. It runs even if ctx is canceled (a client that hangs up
// must not leave its call unsettled). It returns the balance after settlement (its
// Allowance the plan's Credits, as [Ticket.Balance]'s).
//
// An error wrapping [billing.ErrVoided] means the reservation had expired and was
// voided: the call was not charged. Any other error means a store could not take the
// closing: the Meter retries it in the background (see [Meter.Pending]) until the
// reservation expires; what it cannot close by then is settled by the expiry itself,
// in the customer's favour (the reservation is voided, the call not charged).
func (m *Meter) Settle(ctx context.Context, t *Ticket, o Outcome) (billing.Balance, error) {
	return m.close(context.WithoutCancel(ctx), t, &driver.Settlement{Refund: o.Refund, Uncount: o.Failed, Now: o.Now})
}

// close settles the reservation with s (whose account, request, allowance and period
// it fills in) and frees the slot, one step per store that holds one of them. ctx must not be
// canceled by the client.
func (m *Meter) close(ctx context.Context, t *Ticket, s *driver.Settlement) (billing.Balance, error) {
	s.Account, s.Request, s.Allowance, s.Period = t.Account, t.Request, t.Plan.Credits, t.Period
	var firstErr error
	keep := func(err error) {
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	var others <-chan outcome
	if t.held&partBlock != 0 && t.held&^partBlock != 0 {
		// The block's charge waits for its next roll; what the stores hold (a slot,
		// never the credits) is given back meanwhile, not after it.
		held := *t
		others = m.background("close a call", func() error {
			_, _, err := m.closeGroups(ctx, &held, s)
			return err
		})
	}
	if t.held&partBlock != 0 {
		b, err := m.blocks.Settle(ctx, *s)
		if err == nil {
			t.Balance = b
			t.Balance.Allowance = t.Plan.Credits
		} else if !final(err) {
			settlement := *s
			m.retry.add(retry{what: "record a call's charge in its credit block", expires: t.Expires, op: func(ctx context.Context) error {
				_, err := m.blocks.Settle(ctx, settlement)
				return err
			}})
		}
		keep(err)
	}
	if others != nil {
		keep((<-others).result())
	} else {
		b, settled, err := m.closeGroups(ctx, t, s)
		if settled {
			t.Balance = b
		}
		keep(err)
	}
	t.held = 0
	return t.Balance, firstErr
}

// closeGroups closes what the stores hold for t (all but its credit block), one step
// per store, and returns the first error, and the balance after the settlement when a
// store settled the call's reservation (settled), which a call that holds a credit
// block has not made.
func (m *Meter) closeGroups(ctx context.Context, t *Ticket, s *driver.Settlement) (balance billing.Balance, settled bool, firstErr error) {
	for _, g := range m.groups {
		held := t.held & g.parts
		if held == 0 {
			continue
		}
		b, err := m.closeGroup(ctx, g.adm, held, t.Account, t.Request, s)
		if err == nil && held&partCredits != 0 {
			balance, settled = b.WithUnspent(m.Unspent(t.Account)), true
			balance.Allowance = t.Plan.Credits
		}
		if err != nil && !final(err) {
			// The store may take the closing later: closing is idempotent.
			account, request, settlement := t.Account, t.Request, *s
			m.retry.add(retry{what: "close a call", expires: t.Expires, op: func(ctx context.Context) error {
				_, err := m.closeGroup(ctx, g.adm, held, account, request, &settlement)
				return err
			}})
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return balance, settled, firstErr
}

// An outcome is what a step run on a goroutine of its own ended with: its error, or
// the panic it raised, which result raises again on the goroutine that reads it.
type outcome struct {
	err      error
	panicked any
	done     bool // the step returned (not runtime.Goexit)
}

func (o outcome) result() error {
	if o.panicked != nil {
		panic(o.panicked)
	}
	if !o.done {
		return errors.New("billing: a store's step ended its goroutine without an answer")
	}
	return o.err
}

// background runs step on a goroutine of its own and delivers its outcome on the
// returned channel (buffered: one that nobody reads is dropped). A panic is logged,
// named by what, and raised again where its outcome is read.
func (m *Meter) background(what string, step func() error) <-chan outcome {
	ch := make(chan outcome, 1)
	go func() {
		var o outcome
		defer func() {
			if r := recover(); r != nil {
				o.panicked = r
				m.log.Error("billing: a store's step panicked", "step", what, "panic", r)
			}
			ch <- o
		}()
		o.err = step()
		o.done = true
	}()
	return ch
}

// closeGroup settles the reservation (if held has credits) and frees the slot (if held
// has a slot) that one store holds: in one step for an Admitter, part by part otherwise.
func (m *Meter) closeGroup(ctx context.Context, adm driver.Admitter, held part, account string, request billing.RequestID, s *driver.Settlement) (billing.Balance, error) {
	if adm != nil {
		c := driver.Closing{Account: account, Request: request, ReleaseSlot: held&partSlot != 0}
		if held&partCredits != 0 {
			// A copy, so that s, which the Admitter may keep, stays on its owner's
			// stack when the ledger is no Admitter.
			settlement := *s
			c.Settlement = &settlement
		}
		return adm.Close(ctx, c)
	}
	var (
		b   billing.Balance
		err error
	)
	if held&partCredits != 0 {
		b, err = m.ledger.Settle(ctx, *s)
	}
	// The slot is freed even when the settlement is refused for good (a voided
	// reservation, say); after an outage, the retry frees it with the settlement.
	if held&partSlot != 0 && (err == nil || final(err)) {
		if rerr := m.slots.Release(ctx, account, request); err == nil {
			err = rerr
		}
	}
	return b, err
}

// Renew extends the lease of the call's concurrency slot, for calls that run longer
// than half a lease.
func (m *Meter) Renew(ctx context.Context, t *Ticket, now time.Time) error {
	if !t.HoldsSlot() {
		return nil
	}
	return m.slots.Renew(ctx, t.Account, t.Request, m.lease, now)
}

// periodOr returns p, or the calendar month of now if p is zero.
func periodOr(p billing.Period, now time.Time) billing.Period {
	if p.Start.IsZero() {
		return billing.MonthOf(now)
	}
	return p
}

// Unspent returns the credits this instance's credit blocks hold unspent for an
// account, which the ledger counts as held: 0 with credit blocks off.
func (m *Meter) Unspent(account string) int64 {
	if m.blocks == nil {
		return 0
	}
	return m.blocks.Unspent(account)
}

// Status reads an account's position without changing anything but a due renewal:
// period is its credit period that contains now, as for [Admission.Period]. The
// balance's Allowance is plan's Credits, as [Ticket.Balance]'s.
func (m *Meter) Status(ctx context.Context, account string, plan billing.Plan, period billing.Period, now time.Time) (billing.Status, error) {
	var s billing.Status
	period = periodOr(period, now)
	b, err := m.ledger.Balance(ctx, account, now, period, plan.Credits)
	if err != nil {
		return s, err
	}
	s.Balance = b.WithUnspent(m.Unspent(account))
	s.Balance.Allowance = plan.Credits
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
