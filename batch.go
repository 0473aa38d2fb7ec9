package tollgate

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/internal/meter"
)

// DefaultBatchParallelism is the default [Options.BatchParallelism].
const DefaultBatchParallelism = 8

// A Batch is many inputs through one API in one call: see [Service.CallBatch].
type Batch struct {
	// API is the id of the API that every item calls.
	API string
	// Items reads the batch's items once the caller is authenticated and may call the
	// API: each item's parameters as a decoded JSON value (json.Number for numbers),
	// the object that a JSON body of a call to the API would hold, whatever the API's
	// method. An item that is not an object is answered with its own error. max is the
	// most items the caller's plan allows in one batch ([billing.Plan.BatchItems]), for
	// the front door to bound what it reads: it may stop after max+1 items, and
	// CallBatch refuses a batch of more than max itself. An error refuses the batch as
	// a whole; the front door's own errors come back in [BatchReply.Err] as they were
	// returned.
	Items func(api *catalog.API, max int) ([]any, error)
	// IdempotencyKey, when not empty, makes a retried batch run and charge once: a
	// batch sent again by the same account with the same key, to the same API with the
	// same items, gets the first answer back (see [IdempotencyOptions]). It is 1 to 255
	// printable ASCII characters.
	IdempotencyKey string
}

// A BatchReply is everything a front door needs to answer a batch: each item's
// outcome, or why the batch was refused as a whole, and the figures of the credit and
// rate headers.
type BatchReply struct {
	// Items are the outcomes of the items, in their order. Nil when the batch was
	// refused as a whole.
	Items []BatchItem
	// Err is why the batch was refused as a whole, before any item ran: an [*Error], or
	// an error that the front door's Items returned, passed back untouched.
	Err error
	// Receipt is what the batch cost and where it left the account. Receipt.Charged is
	// the sum of the items' Credits.
	Receipt Receipt
	// Replayed reports the answer of an earlier run of the same batch, kept under its
	// idempotency key: nothing ran and nothing was charged this time, and Receipt
	// carries the earlier run's charge with the current balance.
	Replayed bool
}

// Summary counts the items that succeeded and those that failed.
func (r *BatchReply) Summary() (ok, failed int) {
	for i := range r.Items {
		if r.Items[i].Err == nil {
			ok++
		}
	}
	return ok, len(r.Items) - ok
}

// A BatchItem is the outcome of one item of a batch.
type BatchItem struct {
	// JSON is the item's result, a JSON object; nil on failure.
	JSON []byte
	// Err is why the item failed: its input was invalid (CodeInvalidInput, never
	// charged), the API judged it wrong (CodeRejected, charged), or the API failed on
	// the service's side (refunded). Nil on success.
	Err *Error
	// Credits is what the item was charged: its API's cost (or less, when its handler
	// charged less: catalog.Request.Charge) when it succeeded or was
	// rejected, 0 otherwise (and 0 for every item of a batch that is not charged: one
	// whose reservation was voided before it was settled, or one sent with an
	// idempotency key whose record could not be marked once it had run, which is
	// refunded whole, see [IdempotencyOptions]).
	Credits int64
}

// CallBatch runs many inputs through one API as one call, the whole pipeline in one
// step, as [Service.Call] runs one:
//
//   - It authenticates the caller (whose key must allow the batch channel and the
//     API), and asks b.Items for the items: at least one, and at most the plan's
//     [billing.Plan.BatchItems]; more is refused with a message that says the limit.
//   - Every item is validated before anything runs. An invalid item is answered with
//     its own error, which names the parameter, and is never charged; the valid items
//     still run. A file API takes the URL form only: an item gives the file's url.
//     The urls of the items valid otherwise are then checked together, as a single
//     call checks its url before admission: each distinct host is resolved once, a few
//     at a time, and all of them within one [FetchOptions.Timeout], not one per item.
//     An item whose host is refused, or was not resolved within that time, is invalid
//     like any other, with an error that names its url.
//   - The valid items are admitted together: each is one rate-limit event, and a batch
//     whose events do not all fit is refused whole, with the time until they do; the
//     batch holds one concurrency slot; the sum of their costs is reserved at once,
//     and a balance short of it refuses the batch (nothing runs, nothing is charged).
//   - The items run at most [Options.BatchParallelism] at a time, started in the order
//     given, each under the call timeout; the reservation lasts for the longest such
//     run (the items' rounds, each a call timeout, plus [Options.ReservationGrace]),
//     so that no live batch is voided, and the slot is renewed while it runs.
//   - Settlement keeps the charge of the items that succeeded or that the API
//     rejected, and refunds, in one settlement of the reservation, each item that
//     failed on the service's side.
//
// Each item that ran is recorded in the usage statistics (channel batch), and each
// invalid item as refused. With b.IdempotencyKey, a retry of a batch that ran gets the
// first answer (see [IdempotencyOptions]). Refusals are answered as for Call.
func (s *Service) CallBatch(ctx context.Context, c Caller, b Batch) BatchReply {
	ctx, end, within := s.events.BeginCall(ctx, event.Phase{Step: event.StepCall, Channel: callerChannel(&c)})
	r := s.callBatch(ctx, c, b, within)
	end(r.Err)
	return r
}

// callBatch is CallBatch within its phase.
func (s *Service) callBatch(ctx context.Context, c Caller, b Batch, within bool) BatchReply {
	var p Principal
	err := s.authenticate(ctx, c, &p, within)
	if err != nil {
		return BatchReply{Err: err}
	}
	api, err := s.lookup(&p, b.API)
	if err == nil {
		err = s.callable(ctx, &p)
	}
	if err != nil {
		return refusedBatch(s.refuse(ctx, &p, err, Receipt{}, b.API))
	}
	limit := p.Plan.BatchItems()
	var raw []any
	if b.Items != nil {
		raw, err = b.Items(api, limit)
	}
	if err == nil {
		err = s.checkBatch(&p, len(raw), limit)
	}
	if err == nil && b.IdempotencyKey != "" {
		err = s.checkIdempotencyKey(b.IdempotencyKey)
	}
	if err != nil {
		return refusedBatch(s.refuseLate(ctx, &p, err, Receipt{}, slices.Repeat([]string{api.ID}, max(len(raw), 1))...))
	}
	if b.IdempotencyKey == "" {
		return s.runBatch(ctx, &p, api, raw, s.ids.next())
	}
	return s.runIdempotent(ctx, &p, api, raw, b.IdempotencyKey)
}

// refusedBatch is the reply of a batch refused as a whole.
func refusedBatch(r Reply) BatchReply { return BatchReply{Err: r.Err, Receipt: r.Receipt} }

// checkBatch refuses a batch of n items that the plan does not allow: none, or more
// than limit.
func (s *Service) checkBatch(p *Principal, n, limit int) error {
	switch {
	case n == 0:
		return newError(CodeInvalidInput, fmt.Sprintf(
			"the batch has no items: send {\"items\": [...]} with 1 to %d objects of parameters", limit), nil)
	case n <= limit:
		return nil
	}
	why := ""
	if l, ok := p.Plan.RateLimit(); ok && l.Burst == limit && limit < cmp.Or(p.Plan.BatchMaxItems, billing.DefaultBatchMaxItems) {
		why = " (each item is one call of its rate limit, whose burst is " + fmt.Sprint(l.Burst) + ")"
	}
	return newError(CodeInvalidInput, fmt.Sprintf(
		"the batch has more than %d items; the %s plan allows at most %d per batch%s: split it into batches of %d",
		limit, p.Plan.Name, limit, why, limit), nil)
}

// A preparedBatch is a batch whose items were validated: the invalid ones answered in
// items, the valid ones ready to run.
type preparedBatch struct {
	items []BatchItem
	invs  []invocation
	of    []int // the item of each invocation
}

// runBatch validates the items, and runs the valid ones as one call under the request
// id req (see CallBatch).
func (s *Service) runBatch(ctx context.Context, p *Principal, api *catalog.API, raw []any, req billing.RequestID) BatchReply {
	return s.runPrepared(ctx, p, s.prepareBatch(ctx, p, api, raw), req, nil)
}

// prepareBatch validates every item of a batch, and records the invalid ones in the
// usage statistics as refused. The items are validated without the network first; then
// the addresses of the valid items of a file API are checked all together, each host
// resolved once and all within one fetch timeout (safefetch's CheckAll), so that a
// batch holds the resolver no longer than a single call does.
func (s *Service) prepareBatch(ctx context.Context, p *Principal, api *catalog.API, raw []any) preparedBatch {
	invs, errs := make([]invocation, len(raw)), make([]error, len(raw))
	var urls []string
	var urlOf []int // the item of each url
	for i, v := range raw {
		invs[i], errs[i] = prepareBatchItem(api, v)
		if errs[i] == nil && invs[i].FileURL != "" {
			urls, urlOf = append(urls, invs[i].FileURL), append(urlOf, i)
		}
	}
	for j, err := range s.fetcher.CheckAll(ctx, urls) {
		if err != nil {
			errs[urlOf[j]] = fetchError(err)
		}
	}
	pb := preparedBatch{items: make([]BatchItem, len(raw)), invs: make([]invocation, 0, len(raw)), of: make([]int, 0, len(raw))}
	for i, err := range errs {
		if err != nil {
			pb.items[i].Err = asError(err)
			s.refused(ctx, p, []string{api.ID}, err, billing.Balance{})
			continue
		}
		pb.invs, pb.of = append(pb.invs, invs[i]), append(pb.of, i)
	}
	return pb
}

// runPrepared runs the valid items of a batch as one call under the request id req,
// with settling, if not nil, as its batchRun's.
func (s *Service) runPrepared(ctx context.Context, p *Principal, pb preparedBatch, req billing.RequestID, settling func(context.Context) error) BatchReply {
	items := pb.items
	if len(pb.invs) == 0 {
		// Nothing to run: no admission, but the answer is the caller's only once a
		// cached key is checked, and it carries the balance.
		r := s.refuseLate(ctx, p, nil, Receipt{})
		if r.Err != nil {
			return BatchReply{Err: r.Err}
		}
		return BatchReply{Items: items, Receipt: r.Receipt}
	}
	run := &batchRun{request: req, parallel: s.batchParallel, longest: s.batchLongest(len(pb.invs)), settling: settling}
	reply := s.run(ctx, p, pb.invs, run, nil)
	if reply.Err != nil {
		return BatchReply{Err: reply.Err, Receipt: reply.Receipt}
	}
	for j, r := range reply.Results {
		it := &items[pb.of[j]]
		it.JSON, it.Err = r.JSON, r.Err
		// A batch charged nothing (its reservation was voided, or it was refunded
		// because its idempotency record could not be marked) charges no item.
		if reply.Receipt.Charged > 0 && r.kept() {
			it.Credits = r.credits
		}
	}
	return BatchReply{Items: items, Receipt: reply.Receipt}
}

// prepareBatchItem validates one item of a batch without the network (see validate): a
// JSON object of parameters, as a JSON body of a call to api would hold them; a file
// API's file given by its url, whose address prepareBatch checks.
func prepareBatchItem(api *catalog.API, v any) (invocation, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return invocation{}, newError(CodeInvalidInput, "the item must be a JSON object of parameters, not "+catalog.JSONKind(v), nil)
	}
	if url, _ := obj[catalog.URLParam].(string); api.File != nil && url == "" {
		return invocation{}, newError(CodeInvalidInput, fmt.Sprintf(
			"parameter %q: a batch takes the %s API's file by its address: give each item the file's url", catalog.URLParam, api.ID), nil)
	}
	return validate(api, Input{JSON: obj})
}

// batchLongest is the longest that n items of a batch may run: their rounds of
// Options.BatchParallelism items, each round at most a call timeout.
func (s *Service) batchLongest(n int) time.Duration {
	rounds := (n + s.batchParallel - 1) / s.batchParallel
	return time.Duration(rounds) * s.timeout
}

// A batchRun says how run runs the invocations of a batch: each one rate-limit event,
// under the request id request, at most parallel at a time, started in order, for at
// most longest.
type batchRun struct {
	request  billing.RequestID
	parallel int
	longest  time.Duration
	// settling, if not nil, is called once the invocations have run, before the
	// settlement; if it fails, the batch is charged nothing: its reservation is
	// refunded whole and its slot freed (see Service.unsettled). (A batch with an
	// idempotency key marks its record settling there: see runIdempotent.)
	settling func(context.Context) error
}

// executeBatch runs the invocations of a batch: at most b.parallel at a time, started
// in their order, each under the call timeout and all within b.longest. The concurrency
// slot is renewed while they run when they may outlive half a lease.
func (s *Service) executeBatch(parent context.Context, w who, t *meter.Ticket, invs []invocation, b *batchRun) (results []Result, took []time.Duration) {
	ctx, cancel := context.WithTimeout(parent, b.longest)
	defer cancel()
	if every := s.meter.Lease() / 2; b.longest > every && t.HoldsSlot() {
		defer s.keepSlot(ctx, w, t, every)()
	}
	results = make([]Result, len(invs))
	if s.events.Wants(event.CallFinished) {
		took = make([]time.Duration, len(invs))
	}
	var next atomic.Int64
	work := func() {
		for {
			i := int(next.Add(1) - 1)
			if i >= len(invs) {
				return
			}
			cc := newCallContext(ctx, s.timeout)
			s.invokeAt(cc, w, invs, i, results, took, nil)
			cc.release()
		}
	}
	var wg sync.WaitGroup
	for range min(b.parallel, len(invs)) - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
	return results, took
}
