package tollgate_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/idempotency"
)

// The tests of this file are the failing repros of review 19: defects of idempotent
// batches not fixed on this branch (see the review report). Do not merge them before
// their fixes.

// TestReviewMarkFailedThenRetryRemembered: the mark fails (store down), the batch is
// refunded whole; a retry after the lease takes the record over and runs under the same
// run id, which the ledger still remembers as settled: its reservation and settlement
// change nothing, yet its receipt (and the kept answer, and the usage statistics) say
// it was charged.
func TestReviewMarkFailedThenRetryRemembered(t *testing.T) {
	h, other, now := twoInstances(t, 0, func(records idempotency.Store, _ *time.Time) idempotency.Store {
		return downStore{Store: records}
	})
	if r := h.batch(t.Context(), "ok", "k", ns(1, 2, 3)...); r.Err != nil || r.Receipt.Charged != 0 {
		t.Fatalf("first: %v, charged %d", r.Err, r.Receipt.Charged)
	}
	*now = now.Add(2 * time.Minute)
	r := other.batch(t.Context(), "ok", "k", ns(1, 2, 3)...)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	charged := 100 - other.remaining(t)
	if r.Receipt.Charged != charged {
		t.Errorf("the retry's receipt says charged %d, the ledger charged %d", r.Receipt.Charged, charged)
	}
	*now = now.Add(time.Minute)
	if r := other.batch(t.Context(), "ok", "k", ns(1, 2, 3)...); !r.Replayed || r.Receipt.Charged != charged {
		t.Errorf("the replay says charged %d (replayed %v), the ledger charged %d", r.Receipt.Charged, r.Replayed, charged)
	}
}

// slowAndOvertaken is the idempotency store of an instance whose claim takes 5 s (so its
// reservation ends 5 s after the lease), and which is slow enough that a retry on
// another instance takes the record over after the lease and runs the whole batch
// before this instance marks it.
type slowAndOvertaken struct {
	idempotency.Store
	now   *time.Time
	lease time.Time
	retry func()
}

func (s *slowAndOvertaken) Claim(ctx context.Context, c idempotency.Claim) (idempotency.Record, error) {
	s.lease = c.Lease
	rec, err := s.Store.Claim(ctx, c)
	*s.now = s.now.Add(5 * time.Second)
	return rec, err
}

func (s *slowAndOvertaken) MarkSettling(ctx context.Context, id idempotency.ID, token idempotency.Token) error {
	*s.now = s.lease.Add(time.Second)
	s.retry()
	return s.Store.MarkSettling(ctx, id, token)
}

// TestReviewOvertakenWhileReservationOpen: a slow-but-alive first instance is taken
// over after its lease, while its reservation is still open; the taker runs under the
// same request id and settles that reservation (charged 3); the first then fails its
// mark, and answers its client "charged 0".
func TestReviewOvertakenWhileReservationOpen(t *testing.T) {
	var slow *slowAndOvertaken
	h, other, _ := twoInstances(t, 0, func(records idempotency.Store, now *time.Time) idempotency.Store {
		slow = &slowAndOvertaken{Store: records, now: now}
		return slow
	})
	var taker tollgate.BatchReply
	slow.retry = func() { taker = other.batch(t.Context(), "ok", "k", ns(1, 2, 3)...) }
	r := h.batch(t.Context(), "ok", "k", ns(1, 2, 3)...)
	if r.Err != nil || taker.Err != nil {
		t.Fatal(r.Err, taker.Err)
	}
	charged := 100 - h.remaining(t)
	if r.Receipt.Charged != charged || taker.Receipt.Charged != charged {
		t.Errorf("the first instance told its client charged %d (item credits %d), the taker %d; the ledger charged %d",
			r.Receipt.Charged, r.Items[0].Credits, taker.Receipt.Charged, charged)
	}
}

// stallBeforeMark is the idempotency store of an instance that stalls 61 s (past its
// batch's lease of 60 s) before it marks the record.
type stallBeforeMark struct {
	idempotency.Store
	now *time.Time
}

func (s stallBeforeMark) MarkSettling(ctx context.Context, id idempotency.ID, token idempotency.Token) error {
	*s.now = s.now.Add(61 * time.Second)
	return s.Store.MarkSettling(ctx, id, token)
}

// TestReviewMarkAfterExpiry: with a Retention shorter than a batch's lease, the record
// expires when its lease ends. A run that outlives its lease (a stall; nobody claimed
// meanwhile) still marks the expired record and is charged; a retry then finds the
// record expired, makes a new one with a new run id, and is charged again.
func TestReviewMarkAfterExpiry(t *testing.T) {
	h, other, now := twoInstances(t, time.Second, func(records idempotency.Store, now *time.Time) idempotency.Store {
		return stallBeforeMark{Store: records, now: now}
	})
	if r := h.batch(t.Context(), "ok", "k", ns(1, 2, 3)...); r.Err != nil || r.Receipt.Charged != 3 {
		t.Fatalf("first: %v charged %d", r.Err, r.Receipt.Charged)
	}
	*now = now.Add(time.Second)
	r := other.batch(t.Context(), "ok", "k", ns(1, 2, 3)...)
	if got := other.remaining(t); got != 97 {
		t.Errorf("balance %d, want 97: one batch of 3, charged once (the retry: %v, charged %d)", got, r.Err, r.Receipt.Charged)
	}
}
