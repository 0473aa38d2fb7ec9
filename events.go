package tollgate

import (
	"context"
	"errors"
	"time"

	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/event"
)

// Events returns the service's seam: the bus on which it publishes what happens (see
// package event). Subscribe an observer to it to hear of calls that ran or were
// refused and of sweeps, which the service publishes, and of the changes made to
// accounts, keys, credits and sessions, which package accounts publishes here:
//
//	svc.Events().Subscribe(observer, event.KeyRevoked, event.SessionEnded)
//
// Each event is published on the goroutine of what it tells of, after the change is
// stored and before the method that made it returns; an event of a kind nobody
// subscribed to is not built. Changes made by other instances on the same stores are
// published on those instances.
func (s *Service) Events() *event.Bus { return &s.events }

// channelName returns the name of p's channel for an event.
func channelName(p *Principal) event.Channel {
	if p.Channel == 0 {
		return "other"
	}
	return p.Channel.String()
}

// callerChannel returns the name of c's channel for a phase: that of the principal it
// carries, if any.
func callerChannel(c *Caller) event.Channel {
	ch := c.Channel
	if c.As != nil {
		ch = c.As.Channel
	}
	if ch == 0 {
		return "other"
	}
	return ch.String()
}

// steps are the instant at which a call began and the times since then at which it
// was admitted, ran and was settled, taken on the service's clock only when an
// observer wants the call (now is nil otherwise). On the default clock (mono), a step
// reads the monotonic clock alone (time.Since), which is what time.Now's Sub of the
// start reads of it, without the wall clock.
type steps struct {
	now                    func() time.Time
	mono                   bool
	start                  time.Time
	admitted, ran, settled time.Duration
}

// begin takes now, read as the call's admission began, for its start, if an observer
// wants calls.
func (st *steps) begin(s *Service, now time.Time) {
	if s.events.Wants(event.CallFinished) {
		st.now, st.mono = s.now, s.monotonic
		st.start = now
	}
}

// mark sets *at to the time since the call began, if the call is measured.
func (st *steps) mark(at *time.Duration) {
	switch {
	case st.now == nil:
	case st.mono:
		*at = time.Since(st.start)
	default:
		*at = st.now().Sub(st.start)
	}
}

// finished publishes the call of invs that ran at now with results, each of which took
// what took says. A call whose settlement is not Settled or Deferred is charged
// nothing whatever its results. one, when not nil, holds the event, so that a call of
// one API allocates nothing more for it.
func (s *Service) finished(ctx context.Context, p *Principal, now time.Time, invs []invocation, results []Result, took []time.Duration,
	st *steps, how event.Settlement, b billing.Balance, one *single) {
	if st.now == nil {
		return
	}
	var e *event.Call
	if one != nil {
		e = &one.event
		e.APIs = one.eventAPIs[:0]
	} else {
		e = &event.Call{APIs: make([]event.APIResult, 0, len(invs))}
	}
	e.At, e.Account, e.Key, e.Channel, e.Plan = now, p.Account.ID, p.Key.ID, channelName(p), p.Plan.Name
	e.Settlement, e.Balance = how, eventBalance(b)
	e.Admission, e.Run, e.Settle = st.admitted, st.ran-st.admitted, st.settled-st.ran
	charges := how == event.Settled || how == event.Deferred
	for i := range invs {
		a := event.APIResult{API: invs[i].API.ID}
		if took != nil { // nil when the observer subscribed while the call ran
			a.Duration = took[i]
		}
		if err := results[i].Err; err != nil {
			a.Code = err.Code.String()
		}
		if charges && results[i].kept() {
			a.Credits = results[i].credits
		}
		e.Charged += a.Credits
		e.APIs = append(e.APIs, a)
	}
	s.events.Publish(ctx, e)
}

// refused publishes a call of p refused with err, for each of apis that the catalog
// has (an API listed n times, the items of a batch, is listed n times), with the
// balance b the refusal found.
func (s *Service) refused(ctx context.Context, p *Principal, apis []string, err error, b billing.Balance) {
	if len(apis) == 0 || !s.events.Wants(event.CallRefused) {
		return
	}
	code := CodeInvalidInput // what a front door's own input errors are about
	if e := (*Error)(nil); errors.As(err, &e) {
		code = e.Code
	}
	known := make([]string, 0, len(apis))
	for _, id := range apis {
		if _, ok := s.registry.Lookup(id); ok {
			known = append(known, id)
		}
	}
	if len(known) == 0 {
		return
	}
	s.events.Publish(ctx, &event.Refusal{At: s.now(), Account: p.Account.ID, Key: p.Key.ID,
		Channel: channelName(p), Plan: p.Plan.Name, APIs: known, Code: code.String(), Balance: eventBalance(b)})
}

// eventBalance returns b as an event tells it.
func eventBalance(b billing.Balance) event.Balance {
	return event.Balance{Remaining: b.Remaining, Granted: b.Granted, Used: b.Used, Allowance: b.Allowance,
		PeriodStart: b.Period.Start, PeriodEnd: b.Period.End}
}
