package tollgate

import (
	"context"
	"errors"
	"time"

	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/idempotency"
	"github.com/tollgate-dev/tollgate/internal/meter"
)

// A Result is the outcome of one invocation that was admitted and run.
type Result struct {
	// Data is what the handler returned; nil on failure.
	Data any
	// JSON is Data encoded as a JSON object. The result is encoded while the call runs,
	// so that one that cannot be encoded (a NaN, a channel) or is not an object is a
	// failure on the service's side, refunded, rather than an error after the charge was
	// kept.
	JSON []byte
	// Err is nil on success. Its code says whether the call was charged
	// ([Code.Charged]).
	Err *Error
	// credits is what the API is charged if its result is kept (a success or a
	// rejection): its cost, or less if the handler charged less (catalog.Request.Charge).
	credits int64
}

// kept reports whether r keeps its charge: a success, or a rejection.
func (r *Result) kept() bool { return r.Err == nil || r.Err.Code.Charged() }

// failure returns r's error as an error: nil on success.
func (r *Result) failure() error {
	if r.Err == nil {
		return nil
	}
	return r.Err
}

// run admits the invocations as one call (one rate-limit event, one concurrency slot, the
// sum of their costs reserved at once), runs them in parallel, and settles: the cost of
// an API that failed on the service's side is refunded. The invocations name distinct
// APIs (Call has one; CallAll runs an API named twice once), so a call pays for each
// API once; a batch (batch not nil) runs each of its items, one rate-limit event each, as
// b says. Results are in the order of invs. A call the plan refused (rate,
// concurrency or credits) or that a store could not admit is answered through refuse.
// one, when not nil, holds the call's single invocation (invs is one.inv[:]) and is
// where the call keeps what it would otherwise allocate piece by piece.
func (s *Service) run(ctx context.Context, p *Principal, invs []invocation, batch *batchRun, one *single) Reply {
	var rc Receipt
	var (
		apis []string
		cost int64
	)
	if one != nil {
		one.api[0] = invs[0].API.ID
		apis, cost = one.api[:], invs[0].API.Cost
	} else {
		apis, cost = callCost(invs)
	}
	// One instant for admission and settlement: a refund lands in the period of its
	// reservation, even for a call that straddles the end of a period.
	now := s.now()
	var st steps
	st.begin(s, now)
	plan, period := s.terms(p, now)
	a := meter.Admission{
		Account: p.Account.ID, Plan: plan, Period: period,
		APIs: apis, Cost: cost, Now: now,
	}
	if batch == nil {
		a.Request = s.ids.next()
	} else {
		a.Request, a.Events, a.Hold = batch.request, len(invs), batch.longest+s.grace
	}
	if p.Cached {
		a.Key = p.keyCheck()
	}
	var t meter.Ticket
	actx, endAdmit := s.begin(ctx, p.untraced, event.Phase{Step: event.StepAdmit})
	refused, ok := s.admit(actx, p, invs, apis, &a, &t, &rc)
	endAdmit(refused.Err)
	if !ok {
		return refused
	}
	st.mark(&st.admitted)
	var (
		results []Result
		took    []time.Duration
	)
	if batch == nil {
		results, took = s.execute(ctx, who{p.Account.ID, p.Key.ID, p.untraced}, &t, invs, one)
	} else {
		results, took = s.executeBatch(ctx, who{p.Account.ID, p.Key.ID, p.untraced}, &t, invs, batch)
	}
	st.mark(&st.ran)
	if one != nil && took != nil {
		// The call's run is its API's: the instants it read serve, rather than two more.
		took[0] = st.ran - st.admitted
	}
	// An API that failed on the service's side is refunded, and one that charged less
	// than its cost is refunded the rest.
	out := meter.Outcome{Now: now}
	for i := range results {
		if !results[i].kept() {
			out.Refund += invs[i].API.Cost
			out.Failed = append(out.Failed, apis[i])
		} else {
			out.Refund += invs[i].API.Cost - results[i].credits
		}
	}
	sctx, endSettle := s.begin(ctx, p.untraced, event.Phase{Step: event.StepSettle})
	if batch != nil && batch.settling != nil {
		if err := batch.settling(sctx); err != nil {
			r := s.unsettled(sctx, p, now, invs, results, took, &st, &t, rc, err)
			endSettle(err)
			return r
		}
	}
	b, err := s.meter.Settle(sctx, &t, out)
	endSettle(err)
	st.mark(&st.settled)
	rc.Plan, rc.Charged, rc.Balance = p.Plan, cost-out.Refund, b
	how := event.Settled
	switch {
	case errors.Is(err, billing.ErrVoided):
		how = event.Voided
		// The call outlived its reservation, which was voided: it is not charged.
		s.log.WarnContext(ctx, "tollgate: a call ended after its reservation expired; it is not charged (raise Options.ReservationGrace if calls often outlive CallTimeout)",
			"account", p.Account.ID, "request", t.Request.String())
		rc.Charged = 0
	case err != nil:
		how = event.Deferred
		// The call ran; its answer stands. The Meter retries the settlement in the
		// background while the reservation lasts (settling is idempotent, so nothing
		// is charged twice); if the store does not take it by then, the expiry voids
		// the reservation and the call is not charged.
		s.log.WarnContext(ctx, "tollgate: settlement deferred; retrying in the background until the reservation expires",
			"account", p.Account.ID, "request", t.Request.String(), "error", err)
	}
	s.finished(ctx, p, now, invs, results, took, &st, how, b, one)
	return Reply{Results: results, Receipt: rc}
}

// admit admits the call of invs (named apis) as a says, into *t, and sets the rate
// decision of *rc; or answers its refusal, ok false. A stale cached key is read again,
// and the call judged and admitted once more with the fresh record.
func (s *Service) admit(ctx context.Context, p *Principal, invs []invocation, apis []string, a *meter.Admission, t *meter.Ticket, rc *Receipt) (refused Reply, ok bool) {
	var err error
	*t, err = s.meter.Admit(ctx, *a)
	if errors.Is(err, meter.ErrKeyChanged) {
		// The cached record is stale. Read the key again; if it still may call (its
		// restrictions or its account's plan changed, or a caller by key id saw a
		// rotation), admit once more with the fresh record. Its restrictions may have been narrowed: the APIs are
		// checked again.
		if err = s.refresh(ctx, p); err != nil {
			return Reply{Err: err}, false
		}
		for i := range invs {
			if err := p.CheckAPI(invs[i].API.ID); err != nil {
				return s.refuse(ctx, p, newError(CodeForbidden, err.Error(), err), *rc), false
			}
		}
		if err := s.callable(ctx, p); err != nil {
			return s.refuse(ctx, p, err, *rc, apis...), false
		}
		// The account's record may have changed too (its plan).
		a.Key = nil
		a.Plan, a.Period = s.terms(p, a.Now)
		*t, err = s.meter.Admit(ctx, *a)
	}
	if err != nil {
		var le *meter.LimitError
		if !errors.As(err, &le) {
			return s.refuse(ctx, p, s.unavailable(ctx, "admission", err), *rc, apis...), false
		}
		// A key the admission found live before the limits refused the call needs no
		// check of its own; else refuse checks it, so that a stale key's holder is
		// refused as such, and never shown the account's rate or credits.
		if le.KeyLive {
			p.Cached = false
		}
		if p.Plan.RatePerMinute > 0 && !errors.Is(err, meter.ErrConcurrencyLimited) {
			rc.Rate = t.Rate
		}
		if errors.Is(err, billing.ErrInsufficientCredits) {
			rc.Balance = t.Balance
		}
		return s.refuse(ctx, p, &Error{Code: limitCode(le), Message: le.Message, RetryAfter: le.RetryAfter, Err: err}, *rc, apis...), false
	}
	if p.Plan.RatePerMinute > 0 {
		rc.Rate = t.Rate
	}
	return Reply{}, true
}

// unsettled answers a batch that ran but whose settling hook failed with err (its
// idempotency record could not be marked): its run is not charged, since a retry may
// run the batch again (under a request id of its own) and be charged for it. Its
// reservation is refunded at once, whole, and its slot freed; a refund the ledger
// cannot take now is retried in the background until the reservation expires, when it
// is voided instead. The items ran, and are recorded so in the statistics, with no
// credits.
//
// A record taken over by a retry, or expired (ErrNotHeld: the batch outlived its
// lease), answers the batch as a whole with CodeConflict: another run of its key
// answers for it. A store that could not be reached answers the items, charged
// nothing.
func (s *Service) unsettled(ctx context.Context, p *Principal, now time.Time, invs []invocation, results []Result, took []time.Duration,
	st *steps, t *meter.Ticket, rc Receipt, err error) Reply {
	b, rerr := s.meter.Settle(ctx, t, meter.Outcome{Refund: t.Cost, Failed: t.APIs, Now: now})
	if rerr != nil && !errors.Is(rerr, billing.ErrVoided) {
		s.log.WarnContext(ctx, "tollgate: cannot refund a batch that is not charged now; retrying in the background until its reservation expires, when it is voided",
			"account", p.Account.ID, "request", t.Request.String(), "error", rerr)
	}
	st.mark(&st.settled)
	s.finished(ctx, p, now, invs, results, took, st, event.Unsettled, b, nil)
	rc.Plan, rc.Balance = p.Plan, b
	if errors.Is(err, idempotency.ErrNotHeld) {
		s.log.WarnContext(ctx, "tollgate: a batch sent with an idempotency key ran, but outlived its lease: its idempotency record was taken over by a retry, or expired; it is not charged (its reservation is refunded)",
			"account", p.Account.ID, "request", t.Request.String())
		return Reply{Err: newError(CodeConflict,
			"the batch sent with this Idempotency-Key ran, but outlived its lease, and another run of the same key took over (or its record expired): this run is not charged; retry with the same Idempotency-Key for the answer", err), Receipt: rc}
	}
	s.log.WarnContext(ctx, "tollgate: a batch sent with an idempotency key ran, but its idempotency record cannot be marked (the store is unavailable); it is not charged (its reservation is refunded), and a retry after its lease runs it again",
		"account", p.Account.ID, "request", t.Request.String(), "error", err)
	return Reply{Results: results, Receipt: rc}
}

// callCost returns the APIs of a call's invocations and what the call costs: the sum
// of their costs, which its admission reserves.
func callCost(invs []invocation) (apis []string, cost int64) {
	apis = make([]string, len(invs))
	for i := range invs {
		apis[i] = invs[i].API.ID
		cost += invs[i].API.Cost
	}
	return apis, cost
}

func limitCode(le *meter.LimitError) Code {
	switch {
	case errors.Is(le, meter.ErrRateLimited):
		return CodeRateLimited
	case errors.Is(le, meter.ErrConcurrencyLimited):
		return CodeConcurrencyLimited
	}
	return CodeCreditsExhausted
}
