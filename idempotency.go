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
// validated, and before anything runs (see package idempotency). The first batch runs
// and its answer is kept for Retention; a retry of the same batch gets that answer
// without running or charging anything ([BatchReply.Replayed]); a retry while the first
// still runs, or of a batch that ran but whose answer was not kept (larger than
// MaxAnswerBytes, or lost with an instance that died after marking its record), is
// refused with CodeConflict; the same key with another request is refused with
// CodeIdempotencyKeyReused. A batch refused as a whole, or none of whose items is
// valid, keeps nothing. A batch whose record cannot be marked before it is charged is
// not charged. A record holds hashes, a request id and the answer, never a key value.
//
// See docs/idempotency.md for the lease of a record, what a retry gets when an instance
// dies at each step, what happens when the mark fails, and how long records are kept.
type IdempotencyOptions struct {
	// Store keeps the records: memory.NewIdempotencyStore for one instance,
	// postgres.NewIdempotencyStore or a redis.Store's Idempotency for a deployment of
	// several. It is required.
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

// idempotencyConfig is Options.Idempotency with its defaults; store is nil without it.
type idempotencyConfig struct {
	store     idempotency.Store
	retention time.Duration
	maxAnswer int
}

func newIdempotencyConfig(o *IdempotencyOptions) (idempotencyConfig, error) {
	if o == nil {
		return idempotencyConfig{}, nil
	}
	if o.Store == nil {
		return idempotencyConfig{}, errors.New("tollgate: Options.Idempotency needs a Store (memory.NewIdempotencyStore, postgres.NewIdempotencyStore, a redis.Store's Idempotency)")
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
// 255 printable ASCII characters, or any key when the service keeps no answers.
func (s *Service) checkIdempotencyKey(key string) error {
	if s.idem.store == nil {
		return newError(CodeInvalidInput, "this service keeps no answers for idempotency keys: send the batch without an Idempotency-Key", nil)
	}
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
		return s.replay(ctx, p, rec.Answer, api.ID)
	case idempotency.Running:
		return refusedBatch(s.refuseLate(ctx, p, newError(CodeConflict,
			"a batch sent with this Idempotency-Key is still running: retry once it has ended", nil), Receipt{}))
	case idempotency.Mismatch:
		return refusedBatch(s.refuseLate(ctx, p, newError(CodeIdempotencyKeyReused, fmt.Sprintf(
			"this Idempotency-Key was used for another request (another API or other items) in the last %s: send a new key with a new request",
			shortDuration(s.idem.retention)), nil), Receipt{}))
	case idempotency.AnswerLost:
		return refusedBatch(s.refuseLate(ctx, p, newError(CodeConflict,
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
// a cached key is checked, a suspended account is refused (CodeAccountSuspended, as
// CallBatch refuses it before the claim on an instance whose record is current), and
// the receipt has the current balance.
func (s *Service) replay(ctx context.Context, p *Principal, answer []byte, api string) BatchReply {
	var k keptAnswer
	if err := json.Unmarshal(answer, &k); err != nil {
		return refusedBatch(s.refuse(ctx, p, s.internal("idempotency answer", err), Receipt{}))
	}
	if k.TooLarge > 0 {
		return refusedBatch(s.refuseLate(ctx, p, newError(CodeConflict, fmt.Sprintf(
			"the batch sent with this Idempotency-Key ran, but its answer (%d bytes) was larger than the %d bytes kept for retries; it will not run again under this key: send it with a new key to run it again",
			k.TooLarge, s.idem.maxAnswer), nil), Receipt{}))
	}
	r := s.refuseLate(ctx, p, nil, Receipt{Charged: k.Charged}, api)
	if r.Err != nil {
		r.Receipt.Charged = 0 // this answer charged nothing
		return refusedBatch(r)
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
