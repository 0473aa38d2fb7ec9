package tollgate_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/idempotency"
	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/usage"
)

// TestCallBatchIdempotentChargedThenForgotten checks a batch whose instance died after
// settling it, before keeping its answer, retried once the ledger has forgotten its
// request id (here a memory ledger that remembers one id, pushed out by one call; a
// Redis ledger forgets after its retention): the retry is refused, not run again under
// that id, which the ledger would have charged a second time.
func TestCallBatchIdempotentChargedThenForgotten(t *testing.T) {
	now := time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	ledger := memory.NewLedger(&memory.LedgerOptions{Remember: 1})
	keys := memory.NewKeyStore()
	records := memory.NewIdempotencyStore(nil)
	opts := tollgate.Options{Now: clock, SweepInterval: -1, CallTimeout: 30 * time.Second, ReservationGrace: 30 * time.Second}
	dying := opts
	dying.Idempotency = &tollgate.IdempotencyOptions{Store: forgetfulStore{records}}
	h := newHarness(t, harnessOptions{ledger: ledger, keys: keys, opts: dying})
	if r := h.batch(t.Context(), "ok", "k", ns(1, 2, 3)...); r.Err != nil || r.Receipt.Charged != 3 {
		t.Fatalf("first: %v, charged %d", r.Err, r.Receipt.Charged)
	}
	h.svc.Close() // settled, then died before keeping the answer

	other := h.successor(t, keys, ledger, records, opts)
	now = now.Add(time.Minute)
	if r := other.call(t.Context(), []string{"ok"}); r.Err != nil {
		t.Fatal(r.Err) // its settlement pushes the batch's id out of the ledger's memory
	}
	now = now.Add(15 * time.Minute)
	r := other.batch(t.Context(), "ok", "k", ns(1, 2, 3)...)
	if tollgate.CodeOf(r.Err) != tollgate.CodeConflict || !strings.Contains(r.Err.Error(), "will not run again") {
		t.Errorf("the retry: %v (charged %d), want conflict: the batch ran, and must not run again", r.Err, r.Receipt.Charged)
	}
	if got := other.remaining(t); got != 96 {
		t.Errorf("balance %d, want 96: the batch's 3 credits once, and the call's 1", got)
	}
}

// errDied is what the stores of an instance that died answer: its requests never
// reach them.
var errDied = errors.New("the instance died")

// deadBeforeMarkStore is the idempotency store of an instance that dies once a batch
// has run, before it marks the record settling: neither the mark nor the answer
// reaches the store.
type deadBeforeMarkStore struct{ forgetfulStore }

func (deadBeforeMarkStore) MarkSettling(context.Context, idempotency.ID, idempotency.Token, time.Time) error {
	return errDied
}

// downStore is an idempotency store that cannot be reached to mark a record, and,
// unless up, to keep an answer either.
type downStore struct {
	idempotency.Store
	up bool
}

func (downStore) MarkSettling(context.Context, idempotency.ID, idempotency.Token, time.Time) error {
	return fmt.Errorf("dial tcp 10.0.0.7:5432: connection refused: %w", store.ErrUnavailable)
}

func (d downStore) Complete(ctx context.Context, id idempotency.ID, token idempotency.Token, answer []byte) error {
	if !d.up {
		return fmt.Errorf("dial tcp 10.0.0.7:5432: connection refused: %w", store.ErrUnavailable)
	}
	return d.Store.Complete(ctx, id, token, answer)
}

// overtakenStore is an idempotency store in which a retry, on another instance, takes
// the record over just before the batch marks it (the batch outlived its lease).
type overtakenStore struct {
	idempotency.Store
	last idempotency.Claim
}

func (o *overtakenStore) Claim(ctx context.Context, c idempotency.Claim) (idempotency.Record, error) {
	o.last = c
	return o.Store.Claim(ctx, c)
}

func (o *overtakenStore) MarkSettling(ctx context.Context, id idempotency.ID, token idempotency.Token, now time.Time) error {
	c := o.last
	c.Now, c.Lease = c.Lease, c.Lease.Add(c.Lease.Sub(c.Now))
	rand.Read(c.Token[:])
	if rec, err := o.Store.Claim(ctx, c); err != nil || rec.State != idempotency.Claimed {
		return fmt.Errorf("the retry's takeover: %+v, %v", rec, err)
	}
	return o.Store.MarkSettling(ctx, id, token, now)
}

// TestCallBatchIdempotentCrashPoints checks, for each point where the instance running
// a batch sent with an idempotency key may die, and for a mark of its record that
// fails, what the batch is charged and what its retries get, on a ledger that forgets
// the batch's request id as soon as it can (it remembers one id; one call pushes the
// batch's out). The batch, 3 items of 1 credit, runs at t0; its lease and its
// reservation end at t0+60s; a retry comes at t0+10s, one call at t0+70s, a retry
// at t0+16m10s and another after it. A run is charged at most once, and never run
// again once it may have been charged.
func TestCallBatchIdempotentCrashPoints(t *testing.T) {
	type outcome string
	const (
		running  outcome = "still running"
		replayed outcome = "replayed"
		ran      outcome = "ran"
		refused  outcome = "will not run again"
	)
	for _, tc := range []struct {
		name string
		// records is the first instance's idempotency store on the records; settles
		// whether its settlement reaches the ledger; dies whether it is gone after the
		// batch.
		records func(idempotency.Store) idempotency.Store
		settles bool
		dies    bool
		// warn is what the first instance logs at WARN, if it lives; conflict whether
		// it answers the batch as a whole with CodeConflict (its record was taken
		// over), rather than with its items.
		warn     string
		conflict bool
		// soon is what the retry within the lease gets, later what the retry after the
		// call gets, then what the try after it gets.
		soon, later, last outcome
		// balance is the balance at the end (100 credits, the call's 1 taken).
		balance int64
	}{
		{name: "dies before marking the record",
			records: func(r idempotency.Store) idempotency.Store { return deadBeforeMarkStore{forgetfulStore{r}} },
			dies:    true, soon: running, later: ran, last: replayed,
			balance: 96}, // voided at its expiry; the retry, under its own id, charged once
		{name: "dies after marking, before settling",
			records: func(r idempotency.Store) idempotency.Store { return forgetfulStore{r} },
			dies:    true, soon: running, later: refused, last: refused,
			balance: 99}, // voided at its expiry, never run again
		{name: "dies after settling, before keeping the answer",
			records: func(r idempotency.Store) idempotency.Store { return forgetfulStore{r} },
			settles: true, dies: true, soon: running, later: refused, last: refused,
			balance: 96}, // charged once, never run again
		{name: "the mark fails, the store down until the lease ends",
			records: func(r idempotency.Store) idempotency.Store { return downStore{Store: r} },
			settles: true, warn: "cannot be marked", soon: running, later: ran, last: replayed,
			balance: 96}, // refunded at once; the retry, under its own id, charged once
		{name: "the mark fails, the store back to keep the answer",
			records: func(r idempotency.Store) idempotency.Store { return downStore{Store: r, up: true} },
			settles: true, warn: "cannot be marked", soon: replayed, later: replayed, last: replayed,
			balance: 99}, // refunded at once, and answered so
		{name: "the mark is refused, a retry took the record over",
			records: func(r idempotency.Store) idempotency.Store { return &overtakenStore{Store: r} },
			settles: true, warn: "taken over", conflict: true, soon: running, later: ran, last: replayed,
			balance: 96}, // refunded at once; the retry after the taker's lease, charged once
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC)
			clock := func() time.Time { return now }
			ledger := memory.NewLedger(&memory.LedgerOptions{Remember: 1})
			keys := memory.NewKeyStore()
			records := memory.NewIdempotencyStore(nil)
			var logs bytes.Buffer
			opts := tollgate.Options{Now: clock, SweepInterval: -1, CallTimeout: 30 * time.Second, ReservationGrace: 30 * time.Second,
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))}
			first := opts
			first.Idempotency = &tollgate.IdempotencyOptions{Store: tc.records(records)}
			h := newHarness(t, harnessOptions{ledger: &crashingLedger{Ledger: ledger, settle: tc.settles}, keys: keys, opts: first,
				usage: memory.NewUsageStore()})
			r := h.batch(t.Context(), "ok", "k", ns(1, 2, 3)...)
			switch {
			case tc.conflict:
				if tollgate.CodeOf(r.Err) != tollgate.CodeConflict || r.Items != nil || r.Receipt.Charged != 0 ||
					!strings.Contains(r.Err.Error(), "not charged") {
					t.Errorf("the first answer: %v, %d items, charged %d; want a conflict saying it is not charged, no items",
						r.Err, len(r.Items), r.Receipt.Charged)
				}
			case r.Err != nil:
				t.Fatal(r.Err)
			}
			if tc.dies {
				h.svc.Close() // the instance is gone: its retries of the settlement with it
			} else {
				// It lived, and answered: charged nothing, as its ledger says (its
				// reservation refunded at once).
				if !tc.conflict {
					wantItems(t, r.Items, []tollgate.Code{success, success, success}, []int64{0, 0, 0})
				}
				if r.Receipt.Charged != 0 {
					t.Errorf("the first answer: charged %d, want 0", r.Receipt.Charged)
				}
				if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), tc.warn) {
					t.Errorf("the first instance logged %q, want a WARN saying %q", logs.String(), tc.warn)
				}
				h.flushUsage(t)
				res, err := h.mgr.Usage(t.Context(), usage.Query{Account: "acct", From: now, To: now.Add(time.Hour), Interval: usage.Hour})
				if err != nil || len(res.Series) != 1 || len(res.Series[0].Points) != 1 ||
					res.Series[0].Points[0].Calls != 3 || res.Series[0].Points[0].Credits != 0 {
					t.Errorf("the usage statistics: %+v, %v; want 3 calls, 0 credits", res.Series, err)
				}
			}
			other := h.successor(t, keys, ledger, records, opts)
			retry := func(when string, want outcome) {
				t.Helper()
				r := other.batch(t.Context(), "ok", "k", ns(1, 2, 3)...)
				var got outcome
				switch {
				case r.Err == nil && r.Replayed:
					got = replayed
				case r.Err == nil:
					got = ran
				case tollgate.CodeOf(r.Err) == tollgate.CodeConflict && strings.Contains(r.Err.Error(), string(running)):
					got = running
				case tollgate.CodeOf(r.Err) == tollgate.CodeConflict && strings.Contains(r.Err.Error(), string(refused)):
					got = refused
				default:
					t.Fatalf("the retry %s: %v", when, r.Err)
				}
				if got != want {
					t.Errorf("the retry %s: %s (%v), want %s", when, got, r.Err, want)
				}
				if got == ran && r.Receipt.Charged != 3 {
					t.Errorf("the retry %s ran, charged %d, want 3", when, r.Receipt.Charged)
				}
			}
			now = now.Add(10 * time.Second)
			retry("within the lease", tc.soon)
			now = now.Add(time.Minute)
			if r := other.call(t.Context(), []string{"ok"}); r.Err != nil {
				t.Fatal(r.Err) // it voids what has expired, and its settlement pushes the batch's id out
			}
			now = now.Add(15 * time.Minute)
			retry("after the lease", tc.later)
			retry("after that", tc.last)
			if got := other.remaining(t); got != tc.balance {
				t.Errorf("balance %d, want %d", got, tc.balance)
			}
		})
	}
}

// futureStore is an idempotency store that answers claims with a state this release
// does not know.
type futureStore struct{ idempotency.Store }

func (futureStore) Claim(context.Context, idempotency.Claim) (idempotency.Record, error) {
	return idempotency.Record{State: idempotency.AnswerLost + 1}, nil
}

// TestCallBatchIdempotentUnknownState checks that a claim answered with a state the
// service does not know refuses the batch rather than run it: it may be one that must
// not run again.
func TestCallBatchIdempotentUnknownState(t *testing.T) {
	h := newHarness(t, harnessOptions{opts: tollgate.Options{Logger: slog.New(slog.DiscardHandler),
		Idempotency: &tollgate.IdempotencyOptions{Store: futureStore{memory.NewIdempotencyStore(nil)}}}})
	if r := h.batch(t.Context(), "ok", "k", ns(1, 2, 3)...); tollgate.CodeOf(r.Err) != tollgate.CodeInternal {
		t.Errorf("the batch: %v, want internal", r.Err)
	}
	if h.ran.Load() != 0 || h.remaining(t) != 100 {
		t.Errorf("%d runs, balance %d; want none and 100", h.ran.Load(), h.remaining(t))
	}
}

// slowComplete is the idempotency store of an instance that is alive but slow between
// the mark and keeping the answer (its ledger was slow to settle, say): a retry after
// the lease comes before it keeps the answer.
type slowComplete struct {
	idempotency.Store
	before func()
}

func (s slowComplete) Complete(ctx context.Context, id idempotency.ID, token idempotency.Token, answer []byte) error {
	s.before()
	return s.Store.Complete(ctx, id, token, answer)
}

// twoInstances starts two instances of a service on one memory ledger, key store and
// idempotency store, at a clock the test moves: the first reaches the records through
// wrap (given the records and the clock), the second directly; both keep answers for
// retention (0: the default), and record usage in one store.
func twoInstances(t *testing.T, retention time.Duration, wrap func(idempotency.Store, *time.Time) idempotency.Store) (first, second *harness, now *time.Time) {
	t.Helper()
	now = new(time.Time)
	*now = time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC)
	ledger := memory.NewLedger(nil)
	keys := memory.NewKeyStore()
	records := memory.NewIdempotencyStore(nil)
	opts := tollgate.Options{Now: func() time.Time { return *now }, SweepInterval: -1, CallTimeout: 30 * time.Second,
		ReservationGrace: 30 * time.Second, Logger: slog.New(slog.DiscardHandler)}
	firstOpts := opts
	firstOpts.Idempotency = &tollgate.IdempotencyOptions{Store: wrap(records, now), Retention: retention}
	first = newHarness(t, harnessOptions{ledger: ledger, keys: keys, opts: firstOpts, usage: memory.NewUsageStore()})
	second = first.successor(t, keys, ledger, records, opts)
	return first, second, now
}

// TestCallBatchIdempotentAnswerLostWhileAlive checks a retry after the lease of a
// marked record whose instance is alive, only slow to keep the answer: it is refused,
// but not told that the answer is gone for good, since the next retry gets it (a
// client told to send the batch with a new key would pay for it twice).
func TestCallBatchIdempotentAnswerLostWhileAlive(t *testing.T) {
	var early tollgate.BatchReply
	var other *harness
	h, other, _ := twoInstances(t, 0, func(records idempotency.Store, now *time.Time) idempotency.Store {
		return slowComplete{Store: records, before: func() {
			*now = now.Add(2 * time.Minute)
			early = other.batch(t.Context(), "ok", "k", ns(1, 2, 3)...)
		}}
	})
	if r := h.batch(t.Context(), "ok", "k", ns(1, 2, 3)...); r.Err != nil {
		t.Fatal(r.Err)
	}
	later := other.batch(t.Context(), "ok", "k", ns(1, 2, 3)...)
	t.Logf("retry during the slow completion: %v", early.Err)
	t.Logf("retry after it: replayed %v, err %v", later.Replayed, later.Err)
	if tollgate.CodeOf(early.Err) != tollgate.CodeConflict || !later.Replayed {
		t.Fatalf("the retries: %v, then replayed %v; want a conflict, then the kept answer", early.Err, later.Replayed)
	}
	// The first retry may not be told the answer is gone for good: it is kept a moment
	// later, and a client that sent the batch with a new key would pay twice.
	if msg := early.Err.Error(); strings.Contains(msg, "was lost") || !strings.Contains(msg, "retry later with this key") {
		t.Errorf("the retry during the slow completion was told %q; want it to say the answer may still be kept", msg)
	}
}

// scriptedStore is the idempotency store of a first instance whose timing a test
// scripts: its claim takes claimTakes (so that its reservation, made after the claim,
// ends that long after its lease); it marks the record markAt after the claim, once
// meanwhile (a retry on another instance, say), if not nil, has run; and, if down, it
// cannot reach the store to mark the record nor to keep the answer.
type scriptedStore struct {
	idempotency.Store
	now                *time.Time
	claimTakes, markAt time.Duration
	meanwhile          func()
	down               bool
	claimed            time.Time
}

func (s *scriptedStore) Claim(ctx context.Context, c idempotency.Claim) (idempotency.Record, error) {
	s.claimed = c.Now
	rec, err := s.Store.Claim(ctx, c)
	*s.now = s.now.Add(s.claimTakes)
	return rec, err
}

func (s *scriptedStore) MarkSettling(ctx context.Context, id idempotency.ID, token idempotency.Token, _ time.Time) error {
	*s.now = s.claimed.Add(s.markAt)
	if s.meanwhile != nil {
		s.meanwhile()
	}
	if s.down {
		return fmt.Errorf("dial tcp 10.0.0.7:5432: connection refused: %w", store.ErrUnavailable)
	}
	return s.Store.MarkSettling(ctx, id, token, *s.now)
}

func (s *scriptedStore) Complete(ctx context.Context, id idempotency.ID, token idempotency.Token, answer []byte) error {
	if s.down {
		return fmt.Errorf("dial tcp 10.0.0.7:5432: connection refused: %w", store.ErrUnavailable)
	}
	return s.Store.Complete(ctx, id, token, answer)
}

// TestCallBatchIdempotentReceiptsMatchLedger checks, for the orderings of a first run
// and a retry of a batch sent with an idempotency key that a failed mark, a slow or
// stalled instance, or a retention shorter than the lease allow, that every answer
// (the first, the retries, a replay of the kept answer) says what the ledger did: an
// answer with items says what it was charged, the sum of its items' credits; one
// refused as a whole says 0; the charges of the runs, and the credits of the usage
// statistics, add up to what the balance lost; and a replay says what the run it
// replays said. The batch is 3 items of 1 credit, on a balance of 100; its lease is
// 60 s (a call timeout of 30 s and a grace of 30 s), its record kept for a grace of
// 30 s after the lease at least.
func TestCallBatchIdempotentReceiptsMatchLedger(t *testing.T) {
	const (
		ran      = "ran"
		replayed = "replayed"
		conflict = "conflict"
	)
	type answer struct {
		who, what string
		charged   int64
	}
	for _, tc := range []struct {
		name      string
		retention time.Duration
		first     scriptedStore // its now and meanwhile are filled in
		// overtakes says whether the retry runs meanwhile (before the first marks);
		// after is when the retries that follow come, each after the previous step.
		overtakes bool
		after     []time.Duration
		want      []answer // the first's, the one meanwhile if any, then the retries'
		balance   int64
	}{
		{name: "the mark fails (store down); a retry after the lease runs, charged",
			first: scriptedStore{down: true},
			after: []time.Duration{2 * time.Minute, time.Minute},
			want:  []answer{{"first", ran, 0}, {"retry", ran, 3}, {"its replay", replayed, 3}},
			// The first run is refunded at once; the retry runs under a request id of
			// its own, and is charged for it.
			balance: 97},
		{name: "the mark fails (store down); a retry takes the record over while the reservation is open",
			first: scriptedStore{down: true, claimTakes: 5 * time.Second, markAt: 61 * time.Second}, overtakes: true,
			after: []time.Duration{time.Minute},
			want:  []answer{{"first", ran, 0}, {"retry meanwhile", ran, 3}, {"its replay", replayed, 3}},
			// The retry reserves and settles under its own request id; the first's
			// reservation is refunded.
			balance: 97},
		{name: "a slow first instance is taken over while its reservation is open",
			first: scriptedStore{claimTakes: 5 * time.Second, markAt: 61 * time.Second}, overtakes: true,
			after:   []time.Duration{time.Minute},
			want:    []answer{{"first", conflict, 0}, {"retry meanwhile", ran, 3}, {"its replay", replayed, 3}},
			balance: 97},
		{name: "a short retention; a run stalled past its lease, before its record's expiry",
			retention: time.Second, first: scriptedStore{markAt: 61 * time.Second},
			after: []time.Duration{time.Second},
			want:  []answer{{"first", ran, 3}, {"retry", replayed, 3}},
			// Nobody took the record over: the run marks it, is charged, and keeps its
			// answer, which the record, kept a grace after the lease, gives the retry.
			balance: 97},
		{name: "a short retention; a run stalled past its record's expiry",
			retention: time.Second, first: scriptedStore{markAt: 91 * time.Second},
			after: []time.Duration{time.Second, time.Second},
			want:  []answer{{"first", conflict, 0}, {"retry", ran, 3}, {"its replay", replayed, 3}},
			// The mark of the expired record fails: the first run is not charged
			// (refunded); the retry makes a new record, charged once.
			balance: 97},
		{name: "a short retention; a slow first instance is taken over: the record is kept until the taker's expiry",
			retention: time.Second, first: scriptedStore{claimTakes: 5 * time.Second, markAt: 61 * time.Second}, overtakes: true,
			after: []time.Duration{time.Minute},
			want:  []answer{{"first", conflict, 0}, {"retry meanwhile", ran, 3}, {"its replay", replayed, 3}},
			// The takeover keeps the record until its own expiry (a grace after its
			// lease), past the first claim's: the taker's answer is replayed a minute
			// after the first claim's record would have been forgotten.
			balance: 97},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var other *harness
			var got []tollgate.BatchReply
			batch := func() tollgate.BatchReply { return other.batch(t.Context(), "ok", "k", ns(1, 2, 3)...) }
			h, other, now := twoInstances(t, tc.retention, func(records idempotency.Store, now *time.Time) idempotency.Store {
				s := tc.first
				s.Store, s.now = records, now
				if tc.overtakes {
					s.meanwhile = func() { got = append(got, batch()) }
				}
				return &s
			})
			got = append([]tollgate.BatchReply{h.batch(t.Context(), "ok", "k", ns(1, 2, 3)...)}, got...)
			for _, d := range tc.after {
				*now = now.Add(d)
				got = append(got, batch())
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d answers, want %d", len(got), len(tc.want))
			}
			var charged, lastRun int64
			for i, r := range got {
				w := tc.want[i]
				what := ran
				switch {
				case r.Err != nil:
					what = conflict
					if tollgate.CodeOf(r.Err) != tollgate.CodeConflict {
						t.Errorf("%s: %v, want a conflict", w.who, r.Err)
					}
					if r.Items != nil {
						t.Errorf("%s: refused as a whole with %d items", w.who, len(r.Items))
					}
				case r.Replayed:
					what = replayed
					if r.Receipt.Charged != lastRun {
						t.Errorf("%s says charged %d; the run it replays said %d", w.who, r.Receipt.Charged, lastRun)
					}
				default:
					charged += r.Receipt.Charged
					lastRun = r.Receipt.Charged
				}
				var items int64
				for _, it := range r.Items {
					items += it.Credits
				}
				if what != w.what || r.Receipt.Charged != w.charged || items != r.Receipt.Charged {
					t.Errorf("%s: %s (%v), charged %d, its items %d; want %s, charged %d",
						w.who, what, r.Err, r.Receipt.Charged, items, w.what, w.charged)
				}
			}
			// Any expired reservation is voided by the next admission: one call, on
			// another account's behalf, would do, but a call of this account, charged
			// 1, settles the books.
			*now = now.Add(2 * time.Minute)
			if r := other.call(t.Context(), []string{"ok"}); r.Err != nil {
				t.Fatal(r.Err)
			}
			if lost := 100 - 1 - other.remaining(t); lost != charged || other.remaining(t) != tc.balance-1 {
				t.Errorf("the balance lost %d (balance %d), the receipts said %d; want balance %d", lost, other.remaining(t), charged, tc.balance-1)
			}
			var credits int64
			for _, in := range []*harness{h, other} {
				in.flushUsage(t)
			}
			res, err := other.mgr.Usage(t.Context(), usage.Query{Account: "acct", From: now.Add(-time.Hour), To: now.Add(time.Hour), Interval: usage.Hour})
			if err != nil {
				t.Fatal(err)
			}
			for _, ser := range res.Series {
				for _, pt := range ser.Points {
					credits += pt.Credits
				}
			}
			if credits != charged+1 {
				t.Errorf("the usage statistics count %d credits, the receipts %d (and the call's 1)", credits, charged)
			}
		})
	}
}

// TestIdempotencyDefault: a service given no idempotency store keeps the answers of
// batches in its memory when its ledger is this process's (seen through decorators);
// on another ledger, where a retry that reached another instance would run again, it
// keeps none, refuses keys, and says so when it starts.
func TestIdempotencyDefault(t *testing.T) {
	for _, tt := range []struct {
		name   string
		ledger driver.Ledger
		warn   bool
	}{
		{"memory", memory.NewLedger(nil), false},
		{"memory, decorated", wrappedLedger{memory.NewLedger(nil)}, false},
		{"another ledger", struct{ driver.Ledger }{memory.NewLedger(nil)}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			plans, _ := billing.NewPlans(billing.Plan{Name: "p", Credits: 100})
			var logs bytes.Buffer
			svc, err := tollgate.New(&catalog.Registry{}, tollgate.Stores{Keys: memory.NewKeyStore(), Ledger: tt.ledger,
				Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter()}, plans,
				&tollgate.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), SweepInterval: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer svc.Close()
			if got := strings.Contains(logs.String(), "Options.Idempotency is not set"); got != tt.warn {
				t.Errorf("warned %v, want %v: %s", got, tt.warn, logs.String())
			}
			h := newHarness(t, harnessOptions{ledger: tt.ledger})
			first, again := h.batch(t.Context(), "ok", "k", ns(0)...), h.batch(t.Context(), "ok", "k", ns(0)...)
			switch {
			case tt.warn && (tollgate.CodeOf(first.Err) != tollgate.CodeInvalidInput || !strings.Contains(first.Err.Error(), "without an Idempotency-Key")):
				t.Errorf("a key on a shared ledger: %v, want it refused", first.Err)
			case !tt.warn && (first.Err != nil || again.Err != nil || !again.Replayed):
				t.Errorf("a key in memory: %v then %v (replayed %v), want a run then its answer again", first.Err, again.Err, again.Replayed)
			}
		})
	}
}

// wrappedLedger decorates a ledger, as a host's metrics wrapper would.
type wrappedLedger struct{ driver.Ledger }

func (w wrappedLedger) Unwrap() any { return w.Ledger }
