package tollgate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/event"
)

// A Reply is everything a front door needs to answer a call: the results of the APIs
// that ran, or why the call was refused, and the figures of the credit and rate
// headers.
type Reply struct {
	// Results are the results of the call's items, in their order ([Service.Call] has
	// one). Nil when the call was refused before it ran.
	Results []Result
	// Err is why the call was refused before it ran: an [*Error], or an error that the
	// front door's own function returned (see [Service.Call]), passed back untouched.
	// Nil when the call ran; each Result then says how its API did.
	Err error
	// Receipt is what the call cost and where it left the account.
	Receipt Receipt
}

// A Receipt is what a call cost and where it left the account: the figures of the
// credit and rate headers. Its zero value stands for a caller that was never
// authenticated, and each zero field for a figure the call did not produce.
type Receipt struct {
	// Plan is the caller's plan; zero when the caller was not authenticated.
	Plan billing.Plan
	// Charged is the number of credits the call kept.
	Charged int64
	// Balance is the account's balance after the call. It is zero when it is not
	// known: the caller was not authenticated, or the ledger could not be read. (A
	// balance the ledger reports always has its period.)
	Balance billing.Balance
	// Rate is the rate limiter's decision on the call. It is zero when there was none:
	// the plan has no rate limit, or the call was refused before it reached the rate
	// limiter or by its concurrency ceiling. (A decision the limiter makes either
	// allows the call or says when to retry.)
	Rate billing.RateDecision
}

// An Item is one API call within a call that runs several (see [Service.CallAll]).
type Item struct {
	// API is the id of the API to call.
	API string
	// Input is the call's raw input.
	Input Input
	// Name is how the request named the API (a GraphQL field), to begin the messages of
	// its refusals with; empty for none.
	Name string
}

// Call runs one call to the API with the given id, the whole pipeline in one step:
// it authenticates the caller, checks that the caller may call the API, reads the call's
// input with input (which the front door gives the API, so that it can read the request
// as the API takes it), validates it, admits the call against the plan, runs the API and
// settles its credits. input may be nil for an API without parameters. A call of a
// suspended account is refused with CodeAccountSuspended before its input is read (see
// suspend.go).
//
// Whatever refuses the call after the caller is authenticated (a validation, the plan,
// an error input returns), the reply carries the balance for the credit headers, and a
// key that came from the key cache is checked first, so that a rotated or revoked key is
// answered as such rather than with the refusal. A refusal because a store is
// unavailable (CodeUnavailable) does neither: it asks the stores nothing more. input's
// errors come back in [Reply.Err] as they were returned: a front door that returns
// errors of its own types recognises them there.
//
// The call is one [event.StepCall] phase for the tracers set on [Service.Events], its
// steps phases within it, unless no tracer wants them ([event.CallTracer]).
func (s *Service) Call(ctx context.Context, c Caller, id string, input func(*catalog.API) (Input, error)) Reply {
	ctx, end, within := s.events.BeginCall(ctx, event.Phase{Step: event.StepCall, Channel: callerChannel(&c)})
	var (
		p Principal
		r Reply
	)
	if err := s.authenticate(ctx, c, &p, within); err != nil {
		r = Reply{Err: err}
	} else {
		r = s.call(ctx, &p, id, input)
	}
	end(r.Err)
	return r
}

// call runs a call to the API with the given id for an authenticated principal (see
// [Service.Call]).
func (s *Service) call(ctx context.Context, p *Principal, id string, input func(*catalog.API) (Input, error)) Reply {
	api, err := s.lookup(p, id)
	if err == nil {
		err = s.callable(ctx, p)
	}
	if err != nil {
		return s.refuse(ctx, p, err, Receipt{}, id)
	}
	var in Input
	if input != nil {
		if in, err = input(api); err != nil {
			return s.refuseLate(ctx, p, err, Receipt{}, id)
		}
	}
	one := new(single)
	if one.inv[0], err = s.prepare(ctx, api, in); err != nil {
		return s.refuseLate(ctx, p, err, Receipt{}, id)
	}
	return s.run(ctx, p, one.inv[:], nil, one)
}

// single is what a call of one API keeps while it runs, in one allocation rather than
// one for each piece: its invocation, its API's id for the admission, its result and
// how long it took, the context its handler runs under and the request the handler
// gets. The reply's Results refer to it, and a handler may keep its context and its
// request, so it is never reused.
type single struct {
	inv    [1]invocation
	api    [1]string
	result [1]Result
	took   [1]time.Duration
	ctx    callContext
	req    catalog.Request
	// event and eventAPIs are the call's event, for its observers (see Service.finished).
	event     event.Call
	eventAPIs [1]event.APIResult
}

// CallAll runs a call to several APIs as one call, as a GraphQL query does: once the
// caller is authenticated, items says what to call. The call is one rate-limit event,
// takes one concurrency slot and costs the sum of the costs of its distinct APIs; the
// APIs run in parallel, and the cost of an API that failed on the service's side is
// refunded.
//
// The items' APIs must be distinct in number within the plan's
// [billing.Plan.GraphQLMaxAPIs]. An API named by several items runs once when they all
// give it the same parameters (judged on what the catalog makes of them, defaults
// applied), and the call is refused when they do not: a call cannot run one API several
// times for the price of one. Results are in the order of the items, an API's result
// repeated for each item that names it.
//
// items returning no items and no error is a call with nothing to run (a request for
// the schema, say): the reply then has no results, and its receipt the balance. Refusals
// are answered as for [Service.Call]; items' error is such a refusal, so a front door
// that refuses a request itself once it knows the caller (a path that names no API)
// answers it through CallAll with items that return its error: the caller's key is
// then judged first (a rotated or revoked key gets its own answer), and the receipt
// carries the balance.
func (s *Service) CallAll(ctx context.Context, c Caller, items func() ([]Item, error)) Reply {
	ctx, end, within := s.events.BeginCall(ctx, event.Phase{Step: event.StepCall, Channel: callerChannel(&c)})
	r := s.callAll(ctx, c, items, within)
	end(r.Err)
	return r
}

// callAll is CallAll within its phase.
func (s *Service) callAll(ctx context.Context, c Caller, items func() ([]Item, error), within bool) Reply {
	var p Principal
	if err := s.authenticate(ctx, c, &p, within); err != nil {
		return Reply{Err: err}
	}
	list, err := items()
	if err != nil || len(list) == 0 {
		return s.refuse(ctx, &p, err, Receipt{})
	}
	if err := s.callable(ctx, &p); err != nil {
		return s.refuse(ctx, &p, err, Receipt{}, itemAPIs(list)...)
	}
	invs, of, apis, err := s.invocations(ctx, &p, list)
	if err != nil {
		return s.refuseLate(ctx, &p, err, Receipt{}, apis...)
	}
	reply := s.run(ctx, &p, invs, nil, nil)
	if reply.Results == nil || len(invs) == len(list) {
		return reply // each item has an invocation of its own, in order
	}
	results := make([]Result, len(list))
	for i, j := range of {
		results[i] = reply.Results[j]
	}
	reply.Results = results
	return reply
}

// invocations turns the items of a call into the invocations to run, one per distinct
// API, and the invocation of each item: it holds the call to the plan's APIs per
// query, checks that the caller may call each API and validates its input, and
// refuses an API named with different parameters. On a refusal it also returns the
// APIs to record it for in the usage statistics.
func (s *Service) invocations(ctx context.Context, p *Principal, list []Item) (invs []invocation, of []int, apis []string, err error) {
	ids := itemAPIs(list)
	if limit := p.Plan.GraphQLMaxAPIs; limit > 0 && len(ids) > limit {
		return nil, nil, nil, newError(CodePlanLimitExceeded, fmt.Sprintf(
			"the query names %d APIs; the %s plan allows %d per query", len(ids), p.Plan.Name, limit), nil)
	}
	invs = make([]invocation, 0, len(ids))
	params := make([]string, 0, len(ids)) // the canonical parameters of each invocation
	of = make([]int, len(list))           // the invocation of each item
	for i, it := range list {
		inv, err := s.prepareItem(ctx, p, it)
		if err != nil {
			return nil, nil, []string{it.API}, err
		}
		canonical, err := json.Marshal(inv.Params) // map keys sorted, values as the catalog typed them
		if err != nil {
			return nil, nil, nil, s.internal("parameters", err)
		}
		j := slices.IndexFunc(invs, func(prev invocation) bool { return prev.API.ID == inv.API.ID })
		switch {
		case j < 0:
			of[i] = len(invs)
			invs, params = append(invs, inv), append(params, string(canonical))
		case params[j] == string(canonical):
			of[i] = j
		default:
			return nil, nil, []string{it.API}, newError(CodeInvalidInput, fmt.Sprintf(
				"the query names %s several times with different arguments; name each API once per query (aliases of one API must pass the same arguments), and send one query per input",
				label(it)), nil)
		}
	}
	return invs, of, nil, nil
}

// prepareItem looks up and validates one item of CallAll, prefixing its refusals with
// the item's name.
func (s *Service) prepareItem(ctx context.Context, p *Principal, it Item) (invocation, error) {
	api, err := s.lookup(p, it.API)
	if err != nil {
		return invocation{}, err
	}
	inv, err := s.prepare(ctx, api, it.Input)
	var e *Error
	if err != nil && it.Name != "" && errors.As(err, &e) {
		e.Message = it.Name + ": " + e.Message
	}
	return inv, err
}

// itemAPIs returns the distinct APIs that list names, in the order they are first named.
func itemAPIs(list []Item) []string {
	var ids []string
	for _, it := range list {
		if !slices.Contains(ids, it.API) {
			ids = append(ids, it.API)
		}
	}
	return ids
}

func label(it Item) string {
	if it.Name != "" {
		return it.Name
	}
	return it.API
}
