package tollgate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/idempotency"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// batchCaller is the harness account's caller over the batch channel.
func (h *harness) batchCaller() tollgate.Caller {
	c := h.caller()
	c.Channel = auth.ChannelBatch
	return c
}

// batch sends a batch of items to api, with an idempotency key or none.
func (h *harness) batch(ctx context.Context, api, key string, items ...any) tollgate.BatchReply {
	return h.svc.CallBatch(ctx, h.batchCaller(), tollgate.Batch{API: api, IdempotencyKey: key,
		Items: func(*catalog.API, int) ([]any, error) { return items, nil }})
}

// ns returns one item {"n": n} for each n.
func ns(values ...int) []any {
	items := make([]any, len(values))
	for i, v := range values {
		items[i] = map[string]any{"n": json.Number(strconv.Itoa(v))}
	}
	return items
}

// wantItems checks a batch's items: code success (or the error code) and credits, in
// order.
func wantItems(t *testing.T, got []tollgate.BatchItem, codes []tollgate.Code, credits []int64) {
	t.Helper()
	if len(got) != len(codes) {
		t.Fatalf("%d items, want %d", len(got), len(codes))
	}
	for i, it := range got {
		switch want := codes[i]; {
		case want == success && (it.Err != nil || !json.Valid(it.JSON)):
			t.Errorf("item %d: %+v, want a success with a JSON result", i, it)
		case want != success && (it.Err == nil || it.Err.Code != want || it.JSON != nil):
			t.Errorf("item %d: %+v, want the error %v and no result", i, it, want)
		}
		if it.Credits != credits[i] {
			t.Errorf("item %d: credits %d, want %d", i, it.Credits, credits[i])
		}
	}
}

// TestCallBatch checks a batch of valid and invalid items: each item answered in its
// place, the invalid ones with their own error naming the parameter and never charged,
// the valid ones run, those that failed on the service's side refunded, and the charge
// the sum of what the items kept.
func TestCallBatch(t *testing.T) {
	ledger := memory.NewLedger(nil)
	h := newHarness(t, harnessOptions{ledger: ledger})
	items := append(ns(0, 1), map[string]any{"n": "x"}, ns(2)[0], "not an object", ns(3)[0], map[string]any{}, []any{1})
	reply := h.batch(t.Context(), "mixed", "", items...)
	if reply.Err != nil || reply.Replayed {
		t.Fatalf("batch refused: %v (replayed %v)", reply.Err, reply.Replayed)
	}
	wantItems(t, reply.Items, []tollgate.Code{
		success, tollgate.CodeAPIFailed, tollgate.CodeInvalidInput, tollgate.CodeRejected,
		tollgate.CodeInvalidInput, tollgate.CodeAPIFailed, success, tollgate.CodeInvalidInput,
	}, []int64{2, 0, 0, 2, 0, 0, 2, 0})
	if msg := reply.Items[2].Err.Message; !strings.Contains(msg, `"n"`) {
		t.Errorf("the invalid item's error %q does not name the parameter n", msg)
	}
	if msg := reply.Items[4].Err.Message; !strings.Contains(msg, "JSON object") || !strings.Contains(msg, "a string") {
		t.Errorf("the item that is not an object: %q", msg)
	}
	if msg := reply.Items[7].Err.Message; !strings.Contains(msg, "an array") {
		t.Errorf("the item that is an array: %q", msg)
	}
	if ok, failed := reply.Summary(); ok != 2 || failed != 6 {
		t.Errorf("summary %d ok, %d failed; want 2 and 6", ok, failed)
	}
	rc := reply.Receipt
	if rc.Charged != 6 || rc.Balance.Remaining != 94 || rc.Plan.Name != "p" || !rc.Rate.Allowed {
		t.Errorf("receipt %+v: want 6 charged, 94 remaining, the plan and the rate decision", rc)
	}
	if got := h.remaining(t); got != 94 {
		t.Errorf("balance %d, want 94", got)
	}
	if h.ran.Load() != 5 {
		t.Errorf("%d handlers ran, want the 5 valid items'", h.ran.Load())
	}
	// The ledger counts the items that were charged, one call each.
	info, err := h.mgr.Account(t.Context(), "acct")
	if err != nil {
		t.Fatal(err)
	}
	usage, err := ledger.Usage(t.Context(), "acct", info.Balance.Period)
	if err != nil || usage["mixed"] != 3 {
		t.Errorf("usage %v (%v), want 3 calls of mixed: two successes and a rejection", usage, err)
	}
}

// TestCallBatchAllInvalid checks a batch whose items are all invalid: each answered,
// nothing admitted (no rate event, no charge), and the receipt carries the balance.
func TestCallBatchAllInvalid(t *testing.T) {
	h := newHarness(t, harnessOptions{plan: billing.Plan{Name: "p", Credits: 100, RatePerMinute: 2}})
	for range 3 { // more batches than the rate limit allows calls: none is admitted
		reply := h.batch(t.Context(), "ok", "", map[string]any{"n": "x"}, map[string]any{"m": 1})
		if reply.Err != nil {
			t.Fatal(reply.Err)
		}
		wantItems(t, reply.Items, []tollgate.Code{tollgate.CodeInvalidInput, tollgate.CodeInvalidInput}, []int64{0, 0})
		if rc := reply.Receipt; rc.Charged != 0 || rc.Balance.Remaining != 100 || rc.Rate != (billing.RateDecision{}) {
			t.Errorf("receipt %+v: want nothing charged, the balance, no rate decision", rc)
		}
	}
	if reply := h.batch(t.Context(), "ok", "", ns(1, 2)...); reply.Err != nil {
		t.Errorf("a valid batch after the invalid ones: %v, want it admitted (2 calls a minute)", reply.Err)
	}
}

// TestCallBatchRefusedWhole checks the refusals of a batch as a whole: nothing runs,
// nothing is charged, and the reply carries the balance.
func TestCallBatchRefusedWhole(t *testing.T) {
	tests := []struct {
		name  string
		plan  billing.Plan
		api   string
		first []any // a batch sent first, admitted
		items []any
		want  tollgate.Code
		msg   []string // fragments of the message
	}{
		{"credits short of the valid items", billing.Plan{Name: "c", Credits: 5},
			"mixed", nil, append(ns(0, 0, 0), map[string]any{"n": "x"}), tollgate.CodeCreditsExhausted,
			[]string{"costs 6", "5 remain"}},
		{"rate: the items do not all fit", billing.Plan{Name: "r", Credits: 100, RatePerMinute: 60, Burst: 5},
			"ok", ns(1, 2, 3), ns(4, 5, 6), tollgate.CodeRateLimited, []string{"these 3 calls", "60 calls per minute", "retry in 1s"}},
		{"more items than the plan allows", billing.Plan{Name: "m", Credits: 100, BatchMaxItems: 3},
			"ok", nil, ns(1, 2, 3, 4), tollgate.CodeInvalidInput, []string{"more than 3 items", "the m plan allows at most 3 per batch"}},
		{"more items than the burst", billing.Plan{Name: "b", Credits: 100, RatePerMinute: 60, Burst: 2, BatchMaxItems: 10},
			"ok", nil, ns(1, 2, 3), tollgate.CodeInvalidInput, []string{"at most 2 per batch", "burst is 2"}},
		{"more items than the default", billing.Plan{Name: "d", Credits: 1000},
			"ok", nil, slices.Repeat(ns(1), billing.DefaultBatchMaxItems+1), tollgate.CodeInvalidInput, []string{"at most 100 per batch"}},
		{"no items", billing.Plan{Name: "n", Credits: 100}, "ok", nil, nil, tollgate.CodeInvalidInput, []string{"no items"}},
		{"unknown API", billing.Plan{Name: "u", Credits: 100}, "nope", nil, ns(1), tollgate.CodeNotFound, []string{"nope"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC)
			h := newHarness(t, harnessOptions{plan: tt.plan, opts: tollgate.Options{Now: func() time.Time { return now }}})
			if tt.first != nil {
				if r := h.batch(t.Context(), tt.api, "", tt.first...); r.Err != nil {
					t.Fatalf("first batch: %v", r.Err)
				}
			}
			before, ran := h.remaining(t), h.ran.Load()
			reply := h.batch(t.Context(), tt.api, "", tt.items...)
			var e *tollgate.Error
			if !errors.As(reply.Err, &e) || e.Code != tt.want {
				t.Fatalf("reply %+v, want the refusal %v", reply, tt.want)
			}
			for _, f := range tt.msg {
				if !strings.Contains(e.Message, f) {
					t.Errorf("message %q does not say %q", e.Message, f)
				}
			}
			if tt.want == tollgate.CodeRateLimited && e.RetryAfter != time.Second {
				t.Errorf("RetryAfter %v, want 1s: the time until 3 calls fit", e.RetryAfter)
			}
			if reply.Items != nil || h.ran.Load() != ran || h.remaining(t) != before {
				t.Errorf("the refused batch ran or cost something: items %v, %d runs, balance %d (was %d)",
					reply.Items, h.ran.Load()-ran, h.remaining(t), before)
			}
			if reply.Receipt.Balance.Remaining != before || reply.Receipt.Charged != 0 {
				t.Errorf("receipt %+v, want the balance %d and nothing charged", reply.Receipt, before)
			}
		})
	}
}

// TestCallBatchChannel checks that a batch needs a key whose channels include batch,
// and that a key narrowed to some APIs batches only those.
func TestCallBatchChannel(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	newKey := func(spec auth.RestrictionSpec) tollgate.Caller {
		t.Helper()
		r, err := auth.NewRestrictions(spec)
		if err != nil {
			t.Fatal(err)
		}
		_, value, err := h.mgr.CreateKey(t.Context(), "acct", accounts.NewKey{Name: "sub", Restrictions: r})
		if err != nil {
			t.Fatal(err)
		}
		return tollgate.Caller{Credential: auth.Credential{Kind: auth.APIKeyHeader, Value: value}, Channel: auth.ChannelBatch}
	}
	send := func(c tollgate.Caller, api string) error {
		return h.svc.CallBatch(t.Context(), c, tollgate.Batch{API: api,
			Items: func(*catalog.API, int) ([]any, error) { return ns(1), nil }}).Err
	}
	if err := send(newKey(auth.RestrictionSpec{Channels: []string{"rest"}}), "ok"); tollgate.CodeOf(err) != tollgate.CodeForbidden || !strings.Contains(err.Error(), "batch") {
		t.Errorf("a key limited to rest: %v, want forbidden over batch", err)
	}
	both := newKey(auth.RestrictionSpec{Channels: []string{"rest", "batch"}, APIs: []string{"ok"}})
	if err := send(both, "ok"); err != nil {
		t.Errorf("a key given rest and batch: %v", err)
	}
	if err := send(both, "two"); tollgate.CodeOf(err) != tollgate.CodeForbidden {
		t.Errorf("a key narrowed to ok, batching two: %v, want forbidden", err)
	}
	if h.ran.Load() != 1 {
		t.Errorf("%d handlers ran, want the one allowed batch's", h.ran.Load())
	}
}

// TestCallBatchParallelismAndOrder checks that a batch runs at most
// Options.BatchParallelism items at a time, each under the call timeout, started in
// the order given.
func TestCallBatchParallelismAndOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, harnessOptions{opts: tollgate.Options{BatchParallelism: 3, CallTimeout: 15 * time.Second}})
		start := time.Now()
		reply := h.batch(t.Context(), "sleep", "", append(slices.Repeat(ns(9), 6), ns(2, 12)...)...)
		if reply.Err != nil {
			t.Fatal(reply.Err)
		}
		// Rounds of 3: six items of 9s (two rounds, 18s), then the 2s and 12s items
		// side by side: 30s in all.
		if took := time.Since(start); took != 30*time.Second {
			t.Errorf("took %v, want 30s: rounds of 3 items", took)
		}
		wantItems(t, reply.Items, slices.Repeat([]tollgate.Code{success}, 8), slices.Repeat([]int64{1}, 8))
	})
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, harnessOptions{opts: tollgate.Options{BatchParallelism: 1}})
		if reply := h.batch(t.Context(), "order", "", ns(0, 1, 2, 3, 4, 5, 6, 7, 8, 9)...); reply.Err != nil {
			t.Fatal(reply.Err)
		}
		if want := []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}; !slices.Equal(h.started, want) {
			t.Errorf("items started in the order %v, want %v", h.started, want)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, harnessOptions{})
		done := make(chan tollgate.BatchReply)
		go func() { done <- h.batch(t.Context(), "block", "", slices.Repeat(ns(0), 20)...) }()
		synctest.Wait()
		if n, _ := h.slots.InUse(t.Context(), "acct", time.Now()); n != 1 {
			t.Errorf("%d slots in use while the batch runs, want 1: one slot for the batch", n)
		}
		if got := h.ran.Load(); got != tollgate.DefaultBatchParallelism {
			t.Errorf("%d items running at once, want the default parallelism %d", got, tollgate.DefaultBatchParallelism)
		}
		close(h.release)
		if r := <-done; r.Err != nil || r.Receipt.Charged != 20 {
			t.Errorf("batch: %v, charged %d; want 20", r.Err, r.Receipt.Charged)
		}
	})
}

// TestCallBatchOutlivesOneCall checks that a batch whose items run in several rounds
// keeps its reservation and its concurrency slot for its longest run: neither is voided
// or freed after the span of one call, and the charge is kept in full.
func TestCallBatchOutlivesOneCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// One call's reservation would last 30s+30s and its slot a 60s lease; the
		// batch's three rounds of 25s run 75s.
		h := newHarness(t, harnessOptions{opts: tollgate.Options{BatchParallelism: 2, CallTimeout: 30 * time.Second}})
		done := make(chan tollgate.BatchReply)
		go func() {
			done <- h.batch(context.Background(), "sleep", "", slices.Repeat([]any{map[string]any{"n": json.Number("25")}}, 6)...)
		}()
		time.Sleep(70 * time.Second)
		if got := h.remaining(t); got != 94 {
			t.Errorf("balance at 70s %d, want 94: the batch's reservation still open", got)
		}
		if n, _ := h.slots.InUse(context.Background(), "acct", time.Now()); n != 1 {
			t.Errorf("%d slots in use at 70s, want the batch's, renewed", n)
		}
		r := <-done
		if r.Err != nil || r.Receipt.Charged != 6 {
			t.Fatalf("batch: %v, charged %d; want 6", r.Err, r.Receipt.Charged)
		}
		if got := h.remaining(t); got != 94 {
			t.Errorf("balance %d after the batch, want 94", got)
		}
		if h.slots.renewals.Load() == 0 {
			t.Error("the batch's slot was never renewed")
		}
	})
}

// TestCallBatchIdempotent checks batches sent with an idempotency key: a retry gets the
// first answer without running or charging again; the same key with other items is
// refused; a retry while the first runs is refused; a batch refused as a whole keeps
// nothing; a bad key is refused; and a service given no store keeps answers in memory.
func TestCallBatchIdempotent(t *testing.T) {
	synctest.Test(t, testCallBatchIdempotent)
}

func testCallBatchIdempotent(t *testing.T) {
	h := newHarness(t, harnessOptions{opts: tollgate.Options{
		Idempotency: &tollgate.IdempotencyOptions{Store: memory.NewIdempotencyStore(nil)}}})
	first := h.batch(t.Context(), "mixed", "k1", append(ns(0, 1), map[string]any{"n": "x"})...)
	if first.Err != nil || first.Replayed {
		t.Fatalf("first: %v (replayed %v)", first.Err, first.Replayed)
	}
	again := h.batch(t.Context(), "mixed", "k1", append(ns(0, 1), map[string]any{"n": "x"})...)
	if again.Err != nil || !again.Replayed {
		t.Fatalf("retry: %v, replayed %v; want the first answer", again.Err, again.Replayed)
	}
	wantItems(t, again.Items, []tollgate.Code{success, tollgate.CodeAPIFailed, tollgate.CodeInvalidInput}, []int64{2, 0, 0})
	for i := range first.Items {
		f, a := first.Items[i], again.Items[i]
		if string(f.JSON) != string(a.JSON) || (f.Err == nil) != (a.Err == nil) || f.Err != nil && *f.Err != (tollgate.Error{Code: a.Err.Code, Message: a.Err.Message, Err: f.Err.Err}) {
			t.Errorf("item %d: first %+v, replayed %+v", i, f, a)
		}
	}
	if h.ran.Load() != 2 || h.remaining(t) != 98 || again.Receipt.Charged != 2 || again.Receipt.Balance.Remaining != 98 {
		t.Errorf("after the retry: %d runs, balance %d, receipt %+v; want 2 runs, 98, the first charge of 2",
			h.ran.Load(), h.remaining(t), again.Receipt)
	}
	// The same key with other items, or another API: refused, nothing runs.
	for _, api := range []string{"mixed", "ok"} {
		other := h.batch(t.Context(), api, "k1", ns(0)...)
		if tollgate.CodeOf(other.Err) != tollgate.CodeIdempotencyKeyReused || !strings.Contains(other.Err.Error(), "another request") {
			t.Errorf("the key with another request to %s: %v, want idempotency_key_reused", api, other.Err)
		}
	}
	// The key is the account's: another account's batch with the same key runs.
	_, _, value, err := h.mgr.CreateAccount(t.Context(), accounts.Spec{ID: "other", Plan: "p"})
	if err != nil {
		t.Fatal(err)
	}
	stranger := tollgate.Caller{Credential: auth.Credential{Kind: auth.APIKeyHeader, Value: value}, Channel: auth.ChannelBatch}
	if r := h.svc.CallBatch(t.Context(), stranger, tollgate.Batch{API: "mixed", IdempotencyKey: "k1",
		Items: func(*catalog.API, int) ([]any, error) { return ns(0), nil }}); r.Err != nil || r.Replayed {
		t.Errorf("another account's batch with the same key: %v, replayed %v; want it run", r.Err, r.Replayed)
	}
	// While a batch runs, its retry is refused.
	done := make(chan tollgate.BatchReply)
	go func() { done <- h.batch(context.Background(), "block", "k2", ns(0)...) }()
	synctest.Wait() // the batch is blocked in its handler: its key is claimed
	if r := h.batch(t.Context(), "block", "k2", ns(0)...); tollgate.CodeOf(r.Err) != tollgate.CodeConflict || !strings.Contains(r.Err.Error(), "still running") {
		t.Errorf("a retry while the batch runs: %v, want conflict", r.Err)
	}
	close(h.release)
	if r := <-done; r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := h.batch(t.Context(), "block", "k2", ns(0)...); !r.Replayed {
		t.Errorf("the retry after it ended: %+v, want the kept answer", r)
	}
	if h.ran.Load() != 4 {
		t.Errorf("%d runs, want 4", h.ran.Load())
	}
	// Refused as a whole: nothing is kept, the same key runs the batch once it can.
	big := slices.Repeat(ns(0), 60) // 120 credits, 97 left
	if r := h.batch(t.Context(), "mixed", "k3", big...); tollgate.CodeOf(r.Err) != tollgate.CodeCreditsExhausted {
		t.Fatalf("a batch over the balance: %v", r.Err)
	}
	if _, err := h.mgr.AdjustCredits(t.Context(), "acct", 100, "top-up", nil); err != nil {
		t.Fatal(err)
	}
	if r := h.batch(t.Context(), "mixed", "k3", big...); r.Err != nil || r.Replayed || r.Receipt.Charged != 120 {
		t.Errorf("the same key after a top-up: %v, replayed %v, charged %d; want a run charged 120", r.Err, r.Replayed, r.Receipt.Charged)
	}
	for _, bad := range []string{strings.Repeat("k", 256), "caf\u00e9", "tab\there", "nul\x00"} {
		if r := h.batch(t.Context(), "ok", bad, ns(0)...); tollgate.CodeOf(r.Err) != tollgate.CodeInvalidInput || !strings.Contains(r.Err.Error(), "printable ASCII") {
			t.Errorf("key %q: %v, want invalid_input", bad, r.Err)
		}
	}
	// A service given no store keeps the answers in its memory.
	plain := newHarness(t, harnessOptions{})
	first, again = plain.batch(t.Context(), "ok", "k", ns(0)...), plain.batch(t.Context(), "ok", "k", ns(0)...)
	if first.Err != nil || first.Replayed || again.Err != nil || !again.Replayed {
		t.Errorf("a key on a service given no store: %v then %v (replayed %v), want a run then its answer again", first.Err, again.Err, again.Replayed)
	}
}

// TestCallBatchIdempotentAnswerTooLarge checks that an answer larger than the cap is not
// kept, and that its retry is refused rather than run again.
func TestCallBatchIdempotentAnswerTooLarge(t *testing.T) {
	h := newHarness(t, harnessOptions{opts: tollgate.Options{
		Idempotency: &tollgate.IdempotencyOptions{Store: memory.NewIdempotencyStore(nil), MaxAnswerBytes: 100}}})
	if r := h.batch(t.Context(), "ok", "k", ns(1, 2, 3, 4, 5, 6)...); r.Err != nil || r.Receipt.Charged != 6 {
		t.Fatalf("first: %v, charged %d", r.Err, r.Receipt.Charged)
	}
	r := h.batch(t.Context(), "ok", "k", ns(1, 2, 3, 4, 5, 6)...)
	if tollgate.CodeOf(r.Err) != tollgate.CodeConflict || !strings.Contains(r.Err.Error(), "larger than the 100 bytes") {
		t.Errorf("retry: %v, want conflict saying the answer was too large", r.Err)
	}
	if h.ran.Load() != 6 || h.remaining(t) != 94 {
		t.Errorf("%d runs, balance %d; want 6 and 94", h.ran.Load(), h.remaining(t))
	}
}

// crashingLedger is a ledger that loses its settlements (an instance that dies after
// running a batch, before settling it) when settle is false.
type crashingLedger struct {
	driver.Ledger
	settle bool
}

func (l *crashingLedger) Settle(ctx context.Context, s driver.Settlement) (driver.Balance, error) {
	if !l.settle {
		return driver.Balance{}, errors.New("the instance died")
	}
	return l.Ledger.Settle(ctx, s)
}

// forgetfulStore is an idempotency store that loses the answers (an instance that dies
// before keeping one).
type forgetfulStore struct{ idempotency.Store }

func (forgetfulStore) Complete(context.Context, idempotency.ID, idempotency.Token, []byte) error {
	return errors.New("the instance died")
}

// successor is another instance of h's service, on the same key store, ledger,
// idempotency records and usage store (if h records usage) but limiters of its own,
// with opts: the instance that a client reaches once h's has died. It has a manager of
// its own, and a recorder of its own if h has one.
func (h *harness) successor(t *testing.T, keys auth.KeyStore, ledger driver.Ledger, records idempotency.Store, opts tollgate.Options) *harness {
	t.Helper()
	opts.Idempotency = &tollgate.IdempotencyOptions{Store: records}
	other := &harness{key: h.key, release: make(chan struct{}), slots: h.slots}
	other.start(t, h.svc.Catalog(), tollgate.Stores{Keys: keys, Ledger: ledger,
		Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter()}, h.svc.Plans(), harnessOptions{opts: opts, usage: h.usage})
	return other
}

// TestCallBatchIdempotencyRetentionInMessage checks that the refusal of a key sent with
// another request says for how long the key is kept, in plain units.
func TestCallBatchIdempotencyRetentionInMessage(t *testing.T) {
	for retention, want := range map[time.Duration]string{0: "in the last 24h:", 90 * time.Minute: "in the last 1h30m:", 45 * time.Second: "in the last 45s:"} {
		h := newHarness(t, harnessOptions{opts: tollgate.Options{
			Idempotency: &tollgate.IdempotencyOptions{Store: memory.NewIdempotencyStore(nil), Retention: retention}}})
		h.batch(t.Context(), "ok", "k", ns(1)...)
		if r := h.batch(t.Context(), "ok", "k", ns(2)...); r.Err == nil || !strings.Contains(r.Err.Error(), want) {
			t.Errorf("retention %v: %v, want it to say %q", retention, r.Err, want)
		}
	}
}

// TestCallBatchIdempotentAllInvalidKeepsNothing checks that a batch sent with a key
// whose items are all invalid, which nothing meters (no rate event, no credit), keeps
// no record: such batches cannot fill the store, nor push out the records of batches
// that ran and were charged, whose retries would then run and be charged again.
func TestCallBatchIdempotentAllInvalidKeepsNothing(t *testing.T) {
	records := memory.NewIdempotencyStore(&memory.IdempotencyOptions{MaxRecords: 2})
	h := newHarness(t, harnessOptions{opts: tollgate.Options{
		Idempotency: &tollgate.IdempotencyOptions{Store: records}}})
	if r := h.batch(t.Context(), "ok", "paid", ns(1, 2)...); r.Err != nil || r.Receipt.Charged != 2 {
		t.Fatalf("the paid batch: %v, charged %d", r.Err, r.Receipt.Charged)
	}
	for i := range 5 {
		r := h.batch(t.Context(), "ok", "junk"+strconv.Itoa(i), map[string]any{"n": "x"})
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		wantItems(t, r.Items, []tollgate.Code{tollgate.CodeInvalidInput}, []int64{0})
	}
	retry := h.batch(t.Context(), "ok", "paid", ns(1, 2)...)
	if retry.Err != nil || !retry.Replayed {
		t.Errorf("the paid batch's retry: %v, replayed %v; want the kept answer", retry.Err, retry.Replayed)
	}
	if got := h.remaining(t); got != 98 || h.ran.Load() != 2 {
		t.Errorf("balance %d after %d runs, want 98 after 2: the paid batch charged once", got, h.ran.Load())
	}
	// An invalid batch with a key left nothing behind: the key is free.
	if r := h.batch(t.Context(), "ok", "junk0", ns(3)...); r.Err != nil || r.Replayed {
		t.Errorf("a valid batch with the key of an invalid one: %v, replayed %v; want it run", r.Err, r.Replayed)
	}
}

// TestCallBatchIdempotentAllInvalidKeyReused checks that a key used for one batch, sent
// again with another body none of whose items is valid, is refused as reused (422), as
// any other body is, while the record of the first is kept and replayed; and that a
// key used only for invalid batches is free (they keep nothing).
func TestCallBatchIdempotentAllInvalidKeyReused(t *testing.T) {
	records := memory.NewIdempotencyStore(&memory.IdempotencyOptions{MaxRecords: 1})
	h := newHarness(t, harnessOptions{opts: tollgate.Options{
		Idempotency: &tollgate.IdempotencyOptions{Store: records}}})
	if r := h.batch(t.Context(), "ok", "k", ns(1, 2)...); r.Err != nil || r.Receipt.Charged != 2 {
		t.Fatalf("the first batch: %v, charged %d", r.Err, r.Receipt.Charged)
	}
	for range 3 {
		if r := h.batch(t.Context(), "ok", "k", map[string]any{"n": "x"}); tollgate.CodeOf(r.Err) != tollgate.CodeIdempotencyKeyReused {
			t.Fatalf("the key again with only invalid items: %v, items %v; want idempotency_key_reused", r.Err, r.Items)
		}
	}
	// The refusals made no record and dropped none (the store holds one).
	if r := h.batch(t.Context(), "ok", "k", ns(1, 2)...); r.Err != nil || !r.Replayed {
		t.Errorf("the first batch again: %v, replayed %v; want its kept answer", r.Err, r.Replayed)
	}
	for range 2 {
		r := h.batch(t.Context(), "ok", "fresh", map[string]any{"n": "x"})
		if r.Err != nil {
			t.Fatalf("a fresh key with only invalid items: %v", r.Err)
		}
		wantItems(t, r.Items, []tollgate.Code{tollgate.CodeInvalidInput}, []int64{0})
	}
	if got := h.remaining(t); got != 98 || h.ran.Load() != 2 {
		t.Errorf("balance %d after %d runs, want 98 after 2", got, h.ran.Load())
	}
}

// TestCallBatchIdempotentTakeoverRefused checks a retry that takes over the record of a
// batch whose instance died before marking it (so its run was never charged), and is
// refused as a whole (here by the rate limit): like any batch refused as a whole, it
// keeps nothing, so the retry that follows runs at once, under a run id of its own,
// and is charged once, whatever the ledger remembers of the dead run's voided id.
func TestCallBatchIdempotentTakeoverRefused(t *testing.T) {
	now := time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	ledger := memory.NewLedger(nil)
	keys := memory.NewKeyStore()
	records := memory.NewIdempotencyStore(nil)
	plan := billing.Plan{Name: "p", Credits: 100, RatePerMinute: 3, Concurrency: 10}
	opts := tollgate.Options{Now: clock, SweepInterval: -1, CallTimeout: 30 * time.Second, ReservationGrace: 30 * time.Second}
	dying := opts
	dying.Idempotency = &tollgate.IdempotencyOptions{Store: deadBeforeMarkStore{forgetfulStore{records}}}
	h := newHarness(t, harnessOptions{plan: plan, ledger: ledger, keys: keys, opts: dying})
	h.batch(t.Context(), "ok", "k", ns(1, 2, 3)...) // ran, then died before the mark
	h.svc.Close()

	other := h.successor(t, keys, ledger, records, opts)
	now = now.Add(61 * time.Second) // past the lease and the reservation's expiry
	if r := other.call(t.Context(), []string{"ok"}); r.Err != nil {
		t.Fatal(r.Err) // one of the 3 rate events: the batch's 3 no longer fit
	}
	if r := other.batch(t.Context(), "ok", "k", ns(1, 2, 3)...); tollgate.CodeOf(r.Err) != tollgate.CodeRateLimited {
		t.Fatalf("the takeover: %v, want rate_limited", r.Err)
	}
	now = now.Add(time.Minute) // the rate limit's events are back; the takeover's lease has not ended
	r := other.batch(t.Context(), "ok", "k", ns(1, 2, 3)...)
	if r.Err != nil || r.Replayed || r.Receipt.Charged != 3 {
		t.Fatalf("the retry after the refused takeover: %v (replayed %v), charged %d; want it run and charged 3", r.Err, r.Replayed, r.Receipt.Charged)
	}
	wantItems(t, r.Items, []tollgate.Code{success, success, success}, []int64{1, 1, 1})
	// The dead run's 3 credits came back; the single call's 1 and the retry's 3 are kept.
	if got := other.remaining(t); got != 96 {
		t.Errorf("balance %d, want 96: the call and the batch's retry, each charged once", got)
	}
}

// pngServer serves a file that the harness's file API takes (a PNG signature), each
// answer closing its connection, so that no connection outlives a test's bubble.
func pngServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		w.Write([]byte("\x89PNG\r\n\x1a\n"))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// lookupCounter counts a resolver hook's lookups of each host.
type lookupCounter struct {
	mu      sync.Mutex
	lookups map[string]int
	answer  func(ctx context.Context, host string) ([]netip.Addr, error)
}

func (c *lookupCounter) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	c.mu.Lock()
	if c.lookups == nil {
		c.lookups = make(map[string]int)
	}
	c.lookups[host]++
	c.mu.Unlock()
	return c.answer(ctx, host)
}

func (c *lookupCounter) count(host string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lookups[host]
}

// TestCallBatchFileURLsHang checks a batch of a file API whose items' hosts do not
// answer DNS, more of them than are resolved at once: the batch's checks end within one
// fetch timeout (not one per item, nor one per host), each hanging host is looked up
// once, its items are invalid with an error naming their url and never charged, and the
// valid items still run.
func TestCallBatchFileURLsHang(t *testing.T) {
	srv := pngServer(t)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	synctest.Test(t, func(t *testing.T) {
		dns := &lookupCounter{answer: func(ctx context.Context, host string) ([]netip.Addr, error) {
			if host == "files.test" {
				return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
			}
			<-ctx.Done() // a name server that never answers
			return nil, ctx.Err()
		}}
		const timeout = 10 * time.Second
		h := newHarness(t, harnessOptions{resolve: dns.resolve,
			opts: tollgate.Options{Fetch: tollgate.FetchOptions{AllowPrivate: true, Timeout: timeout}}})
		good := "http://files.test:" + strconv.Itoa(port) + "/a.png"
		// Three items on each of 19 hanging hosts, and three good items among them (the
		// first, so that their host is resolved before the hanging ones take every
		// lookup).
		var (
			items   []any
			codes   []tollgate.Code
			credits []int64
		)
		for i := range 60 {
			if i%20 == 0 {
				items, codes, credits = append(items, map[string]any{"url": good}), append(codes, success), append(credits, 1)
				continue
			}
			u := "http://hang" + strconv.Itoa(i%20) + ".test/" + strconv.Itoa(i) + ".png"
			items, codes, credits = append(items, map[string]any{"url": u}), append(codes, tollgate.CodeInvalidInput), append(credits, 0)
		}
		start := time.Now()
		reply := h.batch(t.Context(), "file", "", items...)
		if took := time.Since(start); took != timeout {
			t.Errorf("the batch took %v, want one fetch timeout, %v", took, timeout)
		}
		if reply.Err != nil {
			t.Fatal(reply.Err)
		}
		wantItems(t, reply.Items, codes, credits)
		for i, it := range reply.Items {
			host, u := "hang"+strconv.Itoa(i%20)+".test", items[i].(map[string]any)["url"].(string)
			want := fmt.Sprintf("url %q: the host %q could not be resolved within 10s; try again later", u, host)
			if it.Err != nil && !strings.HasPrefix(it.Err.Message, want) {
				t.Errorf("item %d: %q, want it to start %q", i, it.Err.Message, want)
			}
		}
		if h.ran.Load() != 3 || reply.Receipt.Charged != 3 || h.remaining(t) != 97 {
			t.Errorf("%d items ran, %d charged, balance %d; want the 3 good items run and charged",
				h.ran.Load(), reply.Receipt.Charged, h.remaining(t))
		}
		for i := 1; i < 20; i++ {
			if host := "hang" + strconv.Itoa(i) + ".test"; dns.count(host) > 1 {
				t.Errorf("%s looked up %d times, want at most once", host, dns.count(host))
			}
		}
	})
}

// TestCallBatchFileURLsOneHost checks that a batch of 100 items on one host resolves it
// once, whether the host is refused (each item answered with the error naming its url,
// nothing charged) or not (the batch, here short of credits, refused whole before any
// fetch).
func TestCallBatchFileURLsOneHost(t *testing.T) {
	items := make([]any, 100)
	for i := range items {
		items[i] = map[string]any{"url": "https://one.test/" + strconv.Itoa(i) + ".png"}
	}
	for _, addr := range []string{"10.0.0.1", "8.8.8.8"} {
		t.Run(addr, func(t *testing.T) {
			dns := &lookupCounter{answer: func(context.Context, string) ([]netip.Addr, error) {
				return []netip.Addr{netip.MustParseAddr(addr)}, nil
			}}
			h := newHarness(t, harnessOptions{resolve: dns.resolve, plan: billing.Plan{Name: "p", Credits: 50},
				opts: tollgate.Options{Logger: slog.New(slog.DiscardHandler)}})
			reply := h.batch(t.Context(), "file", "", items...)
			if n := dns.count("one.test"); n != 1 {
				t.Errorf("one.test looked up %d times, want once", n)
			}
			if h.ran.Load() != 0 || h.remaining(t) != 50 {
				t.Errorf("%d items ran, balance %d; want none run and nothing charged", h.ran.Load(), h.remaining(t))
			}
			if addr == "8.8.8.8" {
				if e := (*tollgate.Error)(nil); !errors.As(reply.Err, &e) || e.Code != tollgate.CodeCreditsExhausted {
					t.Errorf("reply %v, want the batch refused for its 100 credits", reply.Err)
				}
				return
			}
			if reply.Err != nil {
				t.Fatal(reply.Err)
			}
			wantItems(t, reply.Items, slices.Repeat([]tollgate.Code{tollgate.CodeInvalidInput}, 100), make([]int64, 100))
			for i, it := range reply.Items {
				want := `url "https://one.test/` + strconv.Itoa(i) + `.png": the host "one.test" cannot be fetched from`
				if !strings.HasPrefix(it.Err.Message, want) {
					t.Errorf("item %d: %q, want it to start %q", i, it.Err.Message, want)
				}
			}
		})
	}
}
