package tollgate

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/idempotency"
)

// IdempotencyOptions configures how the service keeps the answers of batches sent with
// an idempotency key ([Batch.IdempotencyKey]), so that a client that retries a batch
// (after a timeout, a dropped connection) does not run and pay for it twice, whichever
// instance the retry reaches.
//
// A batch sent with a key claims the key's record in Store once its items are
// validated, and before anything runs (see package idempotency):
//   - the first batch runs, and its answer is kept for Retention;
//   - a retry of the same batch (the same account, key, API and items, judged on a hash
//     of the items as decoded) gets that answer back without running or charging
//     anything ([BatchReply.Replayed]);
//   - a retry while the first still runs is refused with CodeConflict: retry once it
//     has ended;
//   - the same key sent with another request is refused with CodeIdempotencyKeyReused;
//   - a batch refused as a whole (credits, rate limit, concurrency) keeps nothing, and
//     may be sent again with the same key;
//   - a batch none of whose items is valid keeps nothing either (nothing ran, nothing
//     was charged, and nothing meters it): its retry is validated again, and gets the
//     same answer, not marked as replayed. Its key is still checked against the record
//     without claiming it ([idempotency.Store.Preview]): a key used for another
//     request is refused with CodeIdempotencyKeyReused, one whose batch runs with
//     CodeConflict, and one whose batch ran gets that batch's answer.
//
// A batch with a key runs to its end even if its client hangs up, so that the retry
// finds its answer. An answer larger than MaxAnswerBytes is not kept: a retry of its
// batch is refused with CodeConflict (it ran, and will not run again under that key).
//
// A batch's record is held for a lease (the batch's longest run plus
// Options.ReservationGrace, which its credit reservation lasts too); its run's
// reservation and concurrency slot are taken under the run id of its claim; and once
// its items have run, the record is marked settling before the run is charged:
//
//	claim --> reserve --> run the items --> mark settling --> settle --> keep the answer
//
// A record still running when its lease ends was left by an instance that died (or was
// cut off from its stores). Where it died decides what its retries get:
//
//	died                            its run                   a retry after the lease
//	before the mark                 not charged: the          takes the record over and runs the
//	                                reservation is voided     batch again as a run of its own (a new
//	                                at its expiry             run id): admitted with a concurrency
//	                                                          slot and a reservation, charged for
//	                                                          the items it runs
//	after the mark, before the      not charged: voided       refused with CodeConflict: it ran, and
//	settlement                      at its expiry             will not run again under that key
//	after the settlement, before    charged once              refused with CodeConflict, as above
//	keeping the answer
//	after keeping the answer        charged once              the kept answer
//
// A marked record is never taken over: its run may have been charged, and would be
// charged again. Its retries are refused until the record expires, and the batch may
// be sent with a new key. A retry before the lease ends is refused as running,
// whichever the case. The APIs' handlers of a batch taken over do run again, as for
// any retried call. A run taken over never shares its run id with the run before it:
// the earlier run's reservation may have been voided (and a ledger remembers a voided
// id for a while), so a run under the same id would be admitted as a replay of it,
// with no slot and nothing reserved, and charged nothing.
//
// If the mark fails, the run is not charged, so that what each answer says is what the
// ledger does: its reservation is refunded at once, whole, and its concurrency slot
// freed (a refund the ledger cannot take now is retried in the background until the
// reservation expires, when it is voided instead). The statistics count its items with
// no credits; a WARN is logged:
//
//	the mark fails because          the batch's answer         a retry after the lease
//	Store is unavailable            its items, charged 0,      takes the record over and runs the
//	                                every item's Credits 0     batch as a run of its own, charged
//	                                                           for the items it runs
//	the run outlived its lease:     CodeConflict: it ran,      gets the taker's answer (or is refused
//	a retry took the record over    another run took over,     as running while the taker runs); or,
//	(ErrNotHeld), or it expired     this run is not charged    the record expired, runs the batch
//	                                                           once under a new record
//
// The answer of a run whose mark failed for an unavailable Store is kept if Store takes
// it (its retries then get "charged 0", as the refund of its reservation says).
//
// A record is kept for Retention, and at least for Options.ReservationGrace after the
// lease of the claim that last held it ends (a takeover keeps it for its own lease
// too): a run marked (and charged) just before its lease ended is refused or replayed
// for that grace, rather than run again under a new record once the record is
// forgotten; and a run that marks its record after the record expired fails its mark
// (ErrNotHeld, above) and is not charged.
//
// A retry that takes a record over and is refused as a whole (its credits, the rate
// limit, the concurrency ceiling) keeps nothing, as any batch refused as a whole: the
// batch may be sent again at once with its key.
//
// A record is found by a hash of the account and the key, and holds the hash of the
// request, its request id and the answer: never a key value or any other credential.
type IdempotencyOptions struct {
	// Store keeps the records: memory.NewIdempotencyStore for one instance,
	// postgres.NewIdempotencyStore or a redis.Store for a deployment of several. It is
	// required.
	Store idempotency.Store
	// Retention is how long an answer is kept: a record is kept for Retention, and at
	// least until Options.ReservationGrace after its batch's lease ends. The default
	// is [DefaultIdempotencyRetention].
	Retention time.Duration
	// MaxAnswerBytes caps the size of an answer kept (its items' results, as JSON).
	// The default is [DefaultIdempotencyMaxAnswer].
	MaxAnswerBytes int
}

// DefaultIdempotencyRetention is the default [IdempotencyOptions.Retention].
const DefaultIdempotencyRetention = 24 * time.Hour

// DefaultIdempotencyMaxAnswer is the default [IdempotencyOptions.MaxAnswerBytes].
const DefaultIdempotencyMaxAnswer = 1 << 20

// MaxIdempotencyKeyLength is the longest idempotency key a batch may carry.
const MaxIdempotencyKeyLength = 255

// idempotencyConfig is Options.Idempotency with its defaults.
type idempotencyConfig struct {
	store     idempotency.Store
	retention time.Duration
	maxAnswer int
}

func newIdempotencyConfig(o *IdempotencyOptions) (idempotencyConfig, error) {
	if o.Store == nil {
		return idempotencyConfig{}, errors.New("tollgate: Options.Idempotency needs a Store (memory.NewIdempotencyStore, postgres.NewIdempotencyStore, a redis.Store)")
	}
	c := idempotencyConfig{store: o.Store, retention: o.Retention, maxAnswer: o.MaxAnswerBytes}
	if c.retention <= 0 {
		c.retention = DefaultIdempotencyRetention
	}
	if c.maxAnswer <= 0 {
		c.maxAnswer = DefaultIdempotencyMaxAnswer
	}
	return c, nil
}

// checkIdempotencyKey refuses a key the service does not take: one that is not 1 to
// 255 printable ASCII characters.
func (s *Service) checkIdempotencyKey(key string) error {
	ok := len(key) <= MaxIdempotencyKeyLength
	for i := 0; ok && i < len(key); i++ {
		ok = key[i] >= 0x20 && key[i] <= 0x7e
	}
	if !ok {
		return newError(CodeInvalidInput, fmt.Sprintf("the Idempotency-Key must be 1 to %d printable ASCII characters", MaxIdempotencyKeyLength), nil)
	}
	return nil
}

// runIdempotent runs a batch sent with an idempotency key: validated, then claimed, then
// run and kept, or answered from the record (see IdempotencyOptions).
func (s *Service) runIdempotent(ctx context.Context, p *Principal, api *catalog.API, raw []any, key string) BatchReply {
	pb := s.prepareBatch(ctx, p, api, raw)
	fp, err := fingerprint(api.ID, raw)
	if err != nil {
		return refusedBatch(s.refuse(ctx, p, s.internal("idempotency fingerprint", err), Receipt{}))
	}
	c := idempotency.Claim{ID: idempotency.NewID(p.Account.ID, key), Fingerprint: fp, Now: s.now()}
	c.Lease = c.Now.Add(s.batchLongest(len(pb.invs)) + s.grace)
	// The record outlives the lease by a grace at least, so that a run marked just
	// before its lease ended (and charged) is refused for that grace rather than run
	// again under a new run id when a short Retention would forget it at the lease.
	c.Expires = c.Now.Add(max(s.idem.retention, c.Lease.Sub(c.Now)+s.grace))
	c.Run = idempotency.Run(s.ids.next())
	rand.Read(c.Token[:]) // never fails (crypto/rand)
	claim := s.idem.store.Claim
	nothingToRun := len(pb.invs) == 0
	if nothingToRun {
		// Nothing would run or be charged, and nothing meters such a batch: it makes
		// no record (which would fill the store, and push out the records of batches
		// that were charged), and a retry gets the same answer by validating again.
		// Its key is still checked: one used for another request is refused.
		claim = s.idem.store.Preview
	}
	rec, err := claim(ctx, c)
	if err != nil {
		return refusedBatch(s.refuse(ctx, p, s.unavailable(ctx, "idempotency", err), Receipt{}))
	}
	switch rec.State {
	case idempotency.Done:
		return s.replay(ctx, p, rec.Answer)
	case idempotency.Running:
		return refusedBatch(s.refuse(ctx, p, newError(CodeConflict,
			"a batch sent with this Idempotency-Key is still running: retry once it has ended", nil), Receipt{}))
	case idempotency.Mismatch:
		return refusedBatch(s.refuse(ctx, p, newError(CodeIdempotencyKeyReused, fmt.Sprintf(
			"this Idempotency-Key was used for another request (another API or other items) in the last %s: send a new key with a new request",
			shortDuration(s.idem.retention)), nil), Receipt{}))
	case idempotency.AnswerLost:
		return refusedBatch(s.refuse(ctx, p, newError(CodeConflict,
			"the batch sent with this Idempotency-Key ran, but its answer was not kept before its lease ended (the instance running it stopped, stalled, or lost its store); it will not run again under this key: retry later with this key in case its answer is still kept, and check your usage for what it was charged before you send it with a new key", nil), Receipt{}))
	case idempotency.Claimed:
	default:
		return refusedBatch(s.refuse(ctx, p, s.internal("idempotency claim", fmt.Errorf("unknown state %d", rec.State)), Receipt{}))
	}
	if nothingToRun {
		return s.runPrepared(ctx, p, pb, billing.RequestID{}, nil)
	}
	// Claimed: run to the end even if the client hangs up, so that a retry finds the
	// answer; under this claim's own run id, new or taking the record over from a
	// claimant that stopped before its mark. A run taken over gets a reservation and a
	// concurrency slot of its own, and is charged for what it runs: the earlier run's
	// reservation (never settled, since it was not marked) is voided at its expiry, and
	// reusing its id would have the ledger admit this run as a replay of it, taking
	// nothing. The record is marked settling before the run is charged: from then on it
	// is never taken over, so a run that may have been charged never runs again.
	ctx = context.WithoutCancel(ctx)
	marked, lost := false, false
	reply := s.runPrepared(ctx, p, pb, billing.RequestID(c.Run), func(ctx context.Context) error {
		err := s.idem.store.MarkSettling(ctx, c.ID, c.Token, s.now())
		marked, lost = err == nil, errors.Is(err, idempotency.ErrNotHeld)
		return err
	})
	if lost {
		// It ran, but outlived its lease: the record is another run's now (or expired),
		// and this run was refunded (see Service.unsettled).
		return reply
	}
	if reply.Err != nil {
		if err := s.idem.store.Abandon(ctx, c.ID, c.Token); err != nil {
			s.log.WarnContext(ctx, "tollgate: cannot abandon the idempotency record of a refused batch; it is refused as running until its lease ends",
				"account", p.Account.ID, "error", err)
		}
		return reply
	}
	answer, err := keep(&reply, s.idem.maxAnswer)
	if err == nil {
		err = s.idem.store.Complete(ctx, c.ID, c.Token, answer)
	}
	if err != nil {
		next := "a retry after its lease is refused: it ran, and will not run again under its key"
		if !marked {
			next = "a retry after its lease runs it again, and is charged for it (this run was charged nothing)"
		}
		s.log.WarnContext(ctx, "tollgate: cannot keep the answer of a batch sent with an idempotency key; "+next,
			"account", p.Account.ID, "request", billing.RequestID(c.Run).String(), "error", err)
	}
	return reply
}

// shortDuration writes d without its trailing zero units: 24h, 1h30m, 45s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// fingerprint is the hash of a batch's request: its API and its items as decoded (JSON
// objects with their keys sorted).
func fingerprint(api string, raw []any) (idempotency.Fingerprint, error) {
	b, err := json.Marshal(raw)
	if err != nil {
		return idempotency.Fingerprint{}, err
	}
	h := sha256.New()
	h.Write([]byte(api))
	h.Write([]byte{0})
	h.Write(b)
	var fp idempotency.Fingerprint
	h.Sum(fp[:0])
	return fp, nil
}

// A keptAnswer is a batch's answer as its idempotency record keeps it.
type keptAnswer struct {
	Items   []keptItem `json:"items,omitempty"`
	Charged int64      `json:"charged"`
	// TooLarge, when not zero, is the size of an answer that was not kept.
	TooLarge int `json:"too_large,omitempty"`
}

type keptItem struct {
	Data    json.RawMessage `json:"data,omitempty"`
	Code    string          `json:"code,omitempty"`
	Message string          `json:"message,omitempty"`
	Credits int64           `json:"credits,omitempty"`
}

// keep encodes a batch's answer for its record, or the note that it was larger than
// limit.
func keep(r *BatchReply, limit int) ([]byte, error) {
	k := keptAnswer{Items: make([]keptItem, len(r.Items)), Charged: r.Receipt.Charged}
	for i, it := range r.Items {
		k.Items[i] = keptItem{Data: it.JSON, Credits: it.Credits}
		if it.Err != nil {
			k.Items[i].Code, k.Items[i].Message = it.Err.Code.String(), it.Err.Message
		}
	}
	b, err := json.Marshal(k)
	if err != nil || len(b) <= limit {
		return b, err
	}
	return json.Marshal(keptAnswer{Charged: k.Charged, TooLarge: len(b)})
}

// replay answers a batch from its kept answer: nothing runs and nothing is charged, but
// a cached key is checked, and the receipt has the current balance.
func (s *Service) replay(ctx context.Context, p *Principal, answer []byte) BatchReply {
	var k keptAnswer
	if err := json.Unmarshal(answer, &k); err != nil {
		return refusedBatch(s.refuse(ctx, p, s.internal("idempotency answer", err), Receipt{}))
	}
	if k.TooLarge > 0 {
		return refusedBatch(s.refuse(ctx, p, newError(CodeConflict, fmt.Sprintf(
			"the batch sent with this Idempotency-Key ran, but its answer (%d bytes) was larger than the %d bytes kept for retries; it will not run again under this key: send it with a new key to run it again",
			k.TooLarge, s.idem.maxAnswer), nil), Receipt{}))
	}
	r := s.refuse(ctx, p, nil, Receipt{Charged: k.Charged})
	if r.Err != nil {
		return BatchReply{Err: r.Err}
	}
	items := make([]BatchItem, len(k.Items))
	for i, it := range k.Items {
		items[i] = BatchItem{Credits: it.Credits}
		if it.Code == "" {
			items[i].JSON = it.Data
			continue
		}
		code, _ := codeNamed(it.Code)
		items[i].Err = &Error{Code: code, Message: it.Message}
	}
	return BatchReply{Items: items, Receipt: r.Receipt, Replayed: true}
}
