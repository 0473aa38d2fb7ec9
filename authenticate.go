package tollgate

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/event"
)

// A Caller describes how a request arrived: the credential it presented, the channel
// and the client's address. A front door reads it from the request at the HTTP edge
// (package edge).
type Caller struct {
	Credential auth.Credential
	// KeyID, if set, names the caller's key by its stable id instead of Credential: an
	// OAuth access token, say, which the front door verified itself. The key's
	// restrictions apply as for a credential; a rotation of the key's value does not
	// affect the caller, a revocation or an expiry refuses it on its next call.
	KeyID   string
	Channel auth.Channel
	Addr    netip.Addr
	// Verify, with [Options.KeyCache], has [Service.Authenticate] check a key that
	// came from the cache against the key store before it returns, so that the
	// principal is current: for a front door that grants something on the strength of
	// a key (package oauth's consent), or that holds a connection open and checks its
	// caller again (package mcp's streams). Calls need not set it: their admission
	// checks a cached key in the same round trip.
	Verify bool
	// As, if set, is the principal that the front door authenticated itself, with
	// [Service.Authenticate], while serving the same request: a door that must know its
	// caller before it can route a request (an MCP session, bound to the key that
	// opened it) then calls without authenticating the caller a second time. The call
	// works on a copy, which it may refresh from the key store; everything after the
	// authentication is the call's as for any caller (the key's restrictions on the
	// API, the admission's check of a cached key). The other fields are ignored.
	//
	// A principal is good for the request it was authenticated for, and no other: a
	// door that kept one from request to request would miss a revocation, an expiry or
	// a change of the key's restrictions made between them.
	As *Principal
}

// A Principal is an authenticated caller: the account, the key it used, the account's
// plan and how it arrived.
type Principal struct {
	auth.Principal
	// Plan is the account's plan in force when the caller was authenticated
	// ([auth.Account.PlanAt]): a change of plan that waited for a renewal applies from
	// the renewal on, whether or not the account's record was rewritten since.
	Plan    billing.Plan
	Channel auth.Channel
	Addr    netip.Addr
	// period is the account's credit period when the caller was authenticated, in
	// which Plan is in force.
	period billing.Period
	// untraced says that no tracer wants the phases within the call that p makes
	// (see event.CallTracer): the call begins none (see Service.begin).
	untraced bool
}

// Authenticate checks a caller's credential (or key id) and the restrictions that depend
// on how it arrived (channel and address), for a front door that must know its caller
// before it can route a request (an MCP session, say); [Service.Call] and
// [Service.CallAll] authenticate on their own. A zero Channel skips the channel check,
// for endpoints that any valid key may use.
//
// Without [Options.KeyCache] the key store is read on every call. With it, the record
// may come from the cache (the principal is then marked Cached): a call checks such a
// key in its admission, and a refusal checks it before it is answered, so a rotated or
// revoked key is still refused on its very next call; a front door that answers a
// cached principal outside a call sets [Caller.Verify].
func (s *Service) Authenticate(ctx context.Context, c Caller) (Principal, error) {
	var p Principal
	if err := s.authenticate(ctx, c, &p, true); err != nil {
		return Principal{}, err
	}
	if c.Verify {
		if err := s.verify(ctx, &p); err != nil {
			return Principal{}, err
		}
	}
	return p, nil
}

// authenticate is Authenticate into *p, for the calls, which keep their Principal (a
// few hundred bytes) where they made it rather than copy it from call to call. On
// failure p is left unfinished.
// within says whether a tracer wants the phases within the call (see
// [event.Bus.BeginCall]); p keeps it for the call's other phases.
func (s *Service) authenticate(ctx context.Context, c Caller, p *Principal, within bool) error {
	if c.As != nil {
		*p = *c.As
		p.untraced = !within
		return nil
	}
	p.untraced = !within
	ctx, end := s.begin(ctx, p.untraced, event.Phase{Step: event.StepAuthenticate})
	err := s.authenticateCaller(ctx, c, p)
	end(err)
	return err
}

// authenticateCaller is authenticate for a caller that the front door did not
// authenticate, within its phase.
func (s *Service) authenticateCaller(ctx context.Context, c Caller, p *Principal) error {
	var err error
	now := s.now()
	if c.KeyID != "" {
		p.Principal, err = s.authority.AuthenticateKeyID(ctx, c.KeyID, now)
	} else {
		p.Principal, err = s.authority.Authenticate(ctx, c.Credential, now)
	}
	if err != nil {
		return s.authError(ctx, err)
	}
	return s.complete(ctx, p, c, now)
}

// complete completes an authentication at now whose p.Principal is set: the account's
// plan and period at now, and the restrictions that depend on how the caller arrived.
func (s *Service) complete(ctx context.Context, p *Principal, c Caller, now time.Time) error {
	plan, period, ok := s.plans.At(termsOf(&p.Account), now)
	if !ok {
		return s.internal("account plan", fmt.Errorf("account %q has plan %q, which is not configured", p.Account.ID, p.Account.PlanAt(now)))
	}
	p.Plan, p.period, p.Channel, p.Addr = plan, period, c.Channel, c.Addr
	if err := p.CheckAccess(c.Channel, c.Addr); err != nil {
		return s.authError(ctx, err)
	}
	return nil
}

// termsOf returns the billing terms that an account's record holds.
func termsOf(a *auth.Account) billing.Terms {
	return billing.Terms{Plan: a.Plan, Anchor: a.BillingAnchor, PendingPlan: a.PendingPlan, PendingAt: a.PendingPlanAt}
}

// terms returns the principal's plan and credit period at now: those it was
// authenticated with while now is in that period, else (a call that straddles the end
// of a period) those its account's record gives at now, which become the principal's.
func (s *Service) terms(p *Principal, now time.Time) (billing.Plan, billing.Period) {
	if !now.Before(p.period.Start) && now.Before(p.period.End) {
		return p.Plan, p.period
	}
	if plan, period, ok := s.plans.At(termsOf(&p.Account), now); ok {
		p.Plan, p.period = plan, period
		return plan, period
	}
	// The plan is no longer configured: the one the principal was authenticated with.
	return p.Plan, billing.PeriodAt(p.Account.BillingAnchor, p.Plan.Renews, now)
}

func (s *Service) authError(ctx context.Context, err error) *Error {
	switch {
	case errors.Is(err, auth.ErrUnknownKey):
		return newError(CodeUnauthorized, "unauthorized", err)
	case errors.Is(err, auth.ErrInvalidSession), errors.Is(err, auth.ErrSessionsDisabled):
		return newError(CodeUnauthorized, err.Error(), err)
	case errors.Is(err, auth.ErrForbidden):
		return newError(CodeForbidden, err.Error(), err)
	}
	return s.unavailable(ctx, "key store", err)
}

// verify checks, for a principal authenticated from the key cache, that its key is
// still live, and returns the error the key now deserves if it is not. For other
// principals it does nothing. Paid calls need not call it: their admission checks the
// key.
func (s *Service) verify(ctx context.Context, p *Principal) error {
	if !p.Cached {
		return nil
	}
	state, err := s.keys.CheckKey(ctx, *p.keyCheck())
	if err != nil {
		return s.unavailable(ctx, "key store", err)
	}
	if state != driver.KeyLive {
		return s.refresh(ctx, p)
	}
	p.Cached = false
	return nil
}

// keyCheck returns the check of the principal's key (or, for a session, its account)
// as its record has it.
func (p *Principal) keyCheck() *driver.KeyCheck {
	return &driver.KeyCheck{Account: p.Account.ID, KeyID: p.Key.ID, Hash: p.Key.Hash, Revision: p.Key.Revision,
		AccountRevision: p.Account.Revision}
}

// refresh re-reads a cached principal whose key check failed. It returns the error the
// key now deserves, or updates p with the fresh record if the caller still may call.
func (s *Service) refresh(ctx context.Context, p *Principal) error {
	now := s.now()
	ap, err := s.authority.Refresh(ctx, p.Principal, now)
	if err != nil {
		return s.authError(ctx, err)
	}
	fresh := Principal{Principal: ap}
	if err := s.complete(ctx, &fresh, Caller{Channel: p.Channel, Addr: p.Addr}, now); err != nil {
		return err
	}
	fresh.untraced = p.untraced
	*p = fresh
	return nil
}

// begin begins a phase within a call, unless the call is untraced (no tracer wants its
// inner phases): then it returns ctx and an end that does nothing, and costs no call
// to the bus.
func (s *Service) begin(ctx context.Context, untraced bool, ph event.Phase) (context.Context, func(error)) {
	if untraced {
		return ctx, noEnd
	}
	return s.events.Begin(ctx, ph)
}

// noEnd ends a phase that was not begun.
func noEnd(error) {}
