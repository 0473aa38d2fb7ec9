package tollgate

import (
	"context"
	"errors"
	"slices"

	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/internal/meter"
)

// A Quote is what a call would cost and whether the service would admit it, judged
// without running it: see [Service.QuoteAll].
type Quote struct {
	// APIs are the distinct APIs the call names, in the order they are first named,
	// each with its cost. Empty when the caller could not be authenticated or the call
	// names none.
	APIs []QuotedAPI
	// Cost is the sum of the costs of APIs: what the call would reserve, and keep if
	// every API succeeds.
	Cost int64
	// Plan is the caller's plan; zero when the caller could not be authenticated.
	Plan billing.Plan
	// Balance is the account's balance now; zero when it could not be read.
	Balance billing.Balance
	// Err is why the call would be refused before it runs, as [Service.CallAll] would
	// refuse it: an [*Error] (the caller's credential, a suspended account, a key's
	// restrictions, more APIs than the plan allows per call, an input the catalog
	// refuses, an API named with different parameters, a balance short of the cost),
	// or an error that the front door's items function returned, untouched. Nil when
	// the call would be admitted as far as can be known beforehand: the plan's rate
	// limit and concurrency ceiling depend on the moment the call is sent, and are
	// judged then.
	Err error
}

// A QuotedAPI is one API of a [Quote].
type QuotedAPI struct {
	ID   string
	Cost int64
}

// QuoteAll judges a call to several APIs as [Service.CallAll] would, without running
// it, charging it, counting it against the rate limit or recording it in the usage
// statistics: it authenticates the caller (a key that came from the key cache is
// checked against the key store), asks items what the call would run, holds the call
// to the same rules (the plan's APIs per call, the key's restrictions, the catalog's
// validation of each input, an API named twice with different parameters), sums the
// costs of its distinct APIs as the admission does, and reads the balance to say
// whether it covers them. It is for a front door that shows what a call will cost
// before it is sent: its figures come from the code that admits and charges the call,
// so that they cannot drift from it.
func (s *Service) QuoteAll(ctx context.Context, c Caller, items func() ([]Item, error)) Quote {
	c.Verify = true
	p, err := s.Authenticate(ctx, c)
	if err != nil {
		return Quote{Err: err}
	}
	q := Quote{Plan: p.Plan}
	q.Balance, err = s.balance(ctx, &p)
	if err != nil {
		return Quote{Plan: p.Plan, Err: err}
	}
	list, err := items()
	if err != nil || len(list) == 0 {
		q.Err = err
		return q
	}
	for _, it := range list {
		if slices.ContainsFunc(q.APIs, func(a QuotedAPI) bool { return a.ID == it.API }) {
			continue
		}
		a := QuotedAPI{ID: it.API}
		if api, ok := s.registry.Lookup(it.API); ok {
			a.Cost = api.Cost
		}
		q.APIs = append(q.APIs, a)
	}
	var invs []invocation
	if err = s.callable(ctx, &p); err == nil {
		invs, _, _, err = s.invocations(ctx, &p, list)
	}
	if err != nil {
		for _, a := range q.APIs {
			q.Cost += a.Cost
		}
		q.Err = err
		return q
	}
	_, q.Cost = callCost(invs)
	if err := meter.CheckCredits(q.Cost, q.Balance); err != nil {
		le := (*meter.LimitError)(nil)
		errors.As(err, &le)
		q.Err = &Error{Code: CodeCreditsExhausted, Message: le.Message, Err: err}
	}
	return q
}
