package tollgate_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/usage"
)

// harness is a service on memory stores with a few test APIs, one account and its key,
// and the manager of its accounts on the same stores.
type harness struct {
	svc *tollgate.Service
	mgr *accounts.Manager
	// rec records the usage statistics of the service's calls, nil unless
	// harnessOptions.usage is set; the test flushes it (see flushUsage).
	rec   *usage.Recorder
	usage usage.Store
	key   string
	slots *countingSlots
	// release unblocks the "block" API.
	release chan struct{}
	ran     atomic.Int32
	// handlerCtx is the context the "ctx" API last ran under.
	handlerCtx atomic.Pointer[context.Context]
	// started lists the n of each call of the "order" API, in the order they started.
	mu      sync.Mutex
	started []int64
}

type harnessOptions struct {
	plan   billing.Plan
	opts   tollgate.Options
	ledger driver.Ledger
	keys   auth.KeyStore // nil: memory.NewKeyStore()
	// accounts configures the manager; its Logger defaults to opts.Logger, its Usage to
	// usage.
	accounts accounts.Options
	// usage, if set, keeps the usage statistics: a recorder subscribed to the service's
	// events writes it, flushed only by flushUsage, and the manager reads it.
	usage usage.Store
	// resolve, if set, resolves the hosts of file urls instead of DNS.
	resolve func(ctx context.Context, host string) ([]netip.Addr, error)
}

func newHarness(t *testing.T, ho harnessOptions) *harness {
	t.Helper()
	h := &harness{release: make(chan struct{})}
	reg := &catalog.Registry{}
	api := func(id string, cost int64, fn func(ctx context.Context, req *catalog.Request) (any, error)) {
		t.Helper()
		err := reg.Register(catalog.API{ID: id, Method: "GET", Cost: cost,
			Params: []catalog.Param{{Name: "n", Type: catalog.Integer, Default: 0}},
			Handler: catalog.HandlerFunc(func(ctx context.Context, req *catalog.Request) (any, error) {
				h.ran.Add(1)
				return fn(ctx, req)
			})})
		if err != nil {
			t.Fatal(err)
		}
	}
	api("ok", 1, func(_ context.Context, req *catalog.Request) (any, error) {
		return map[string]any{"n": req.Params.Int("n")}, nil
	})
	api("two", 2, func(context.Context, *catalog.Request) (any, error) { return map[string]any{}, nil })
	api("ctx", 1, func(ctx context.Context, _ *catalog.Request) (any, error) {
		h.handlerCtx.Store(&ctx)
		return map[string]any{}, nil
	})
	api("fail", 3, func(context.Context, *catalog.Request) (any, error) { return nil, errors.New("upstream down") })
	api("reject", 4, func(context.Context, *catalog.Request) (any, error) { return nil, catalog.Reject("no such thing") })
	api("panic", 5, func(context.Context, *catalog.Request) (any, error) { panic("boom") })
	api("block", 1, func(ctx context.Context, _ *catalog.Request) (any, error) {
		select {
		case <-h.release:
			return map[string]any{}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	// mixed answers by its n: 0 success, 1 a failure, 2 a rejection, 3 a panic.
	api("mixed", 2, func(_ context.Context, req *catalog.Request) (any, error) {
		switch req.Params.Int("n") {
		case 1:
			return nil, errors.New("upstream down")
		case 2:
			return nil, catalog.Reject("no such thing")
		case 3:
			panic("boom")
		}
		return map[string]any{"n": req.Params.Int("n")}, nil
	})
	// metered costs at most 10 and charges n (catalog.Request.Charge), n out of range
	// leaving the charge at 10; a negative n fails after charging.
	api("metered", 10, func(_ context.Context, req *catalog.Request) (any, error) {
		n := req.Params.Int("n")
		err := req.Charge(n)
		if n < 0 {
			return nil, errors.New("upstream down")
		}
		return map[string]any{"charged": err == nil}, nil
	})
	api("order", 1, func(_ context.Context, req *catalog.Request) (any, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.started = append(h.started, req.Params.Int("n"))
		return map[string]any{}, nil
	})
	api("sleep", 1, func(ctx context.Context, req *catalog.Request) (any, error) {
		time.Sleep(time.Duration(req.Params.Int("n")) * time.Second) // fake time under synctest
		return map[string]any{}, nil
	})
	// file takes a PNG file (by its content, as the service detects it: a PNG signature is
	// enough) and answers its size.
	if err := reg.Register(catalog.API{ID: "file", Method: "POST", Cost: 1,
		File: &catalog.FileField{Name: "file", Types: []string{"image/png"}, MaxBytes: 1 << 10},
		Handler: catalog.HandlerFunc(func(_ context.Context, req *catalog.Request) (any, error) {
			h.ran.Add(1)
			return map[string]any{"bytes": len(req.File.Data)}, nil
		})}); err != nil {
		t.Fatal(err)
	}
	plan := ho.plan
	if plan.Name == "" {
		plan = billing.Plan{Name: "p", Credits: 100, RatePerMinute: 600, Concurrency: 10}
	}
	plans, err := billing.NewPlans(plan)
	if err != nil {
		t.Fatal(err)
	}
	ledger := ho.ledger
	if ledger == nil {
		ledger = memory.NewLedger(nil)
	}
	h.slots = &countingSlots{ConcurrencyLimiter: memory.NewConcurrencyLimiter()}
	keys := ho.keys
	if keys == nil {
		keys = memory.NewKeyStore()
	}
	h.start(t, reg, tollgate.Stores{
		Keys: keys, Ledger: ledger, Rates: memory.NewRateLimiter(), Slots: h.slots,
	}, plans, ho)
	if ho.resolve != nil {
		tollgate.SetFetchResolver(h.svc, ho.opts.Fetch, ho.resolve)
	}
	if _, _, h.key, err = h.mgr.CreateAccount(context.Background(), accounts.Spec{ID: "acct", Plan: plan.Name}); err != nil {
		t.Fatal(err)
	}
	return h
}

// start starts h's service on stores with ho's options, the manager of its accounts on
// the same stores and, with ho.usage, the recorder of its usage statistics; the test's
// end stops them.
func (h *harness) start(t *testing.T, reg catalog.APIRegistry, stores tollgate.Stores, plans *billing.Plans, ho harnessOptions) {
	t.Helper()
	var err error
	if h.svc, err = tollgate.New(reg, stores, plans, &ho.opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.svc.Close)
	ao := ho.accounts
	if ao.Logger == nil {
		ao.Logger = ho.opts.Logger
	}
	if ho.usage != nil {
		h.usage = ho.usage
		if ao.Usage == nil {
			ao.Usage = ho.usage
		}
		h.rec, err = usage.NewRecorder(ho.usage, &usage.RecorderOptions{FlushInterval: -1, PruneInterval: -1, Now: ho.opts.Now, Logger: ho.opts.Logger})
		if err != nil {
			t.Fatal(err)
		}
		h.svc.Events().Subscribe(h.rec, h.rec.Kinds()...)
		t.Cleanup(func() {
			if err := h.rec.Close(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	if h.mgr, err = accounts.New(h.svc, &ao); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.mgr.Close)
}

// flushUsage writes the usage statistics that h's recorder holds to its store.
func (h *harness) flushUsage(t *testing.T) {
	t.Helper()
	if h.rec == nil {
		t.Fatal("the harness records no usage statistics (harnessOptions.usage)")
	}
	if err := h.rec.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// countingSlots counts lease renewals.
type countingSlots struct {
	driver.ConcurrencyLimiter
	renewals atomic.Int32
}

func (c *countingSlots) Renew(ctx context.Context, key string, holder billing.RequestID, lease time.Duration, now time.Time) error {
	c.renewals.Add(1)
	return c.ConcurrencyLimiter.Renew(ctx, key, holder, lease, now)
}

// caller is the harness account's caller over REST.
func (h *harness) caller() tollgate.Caller {
	return tollgate.Caller{Credential: auth.Credential{Kind: auth.APIKeyHeader, Value: h.key}, Channel: auth.ChannelREST}
}

// call calls the APIs with the given ids as one call, each with the parameters n of
// ns (in order), or none.
func (h *harness) call(ctx context.Context, ids []string, ns ...int64) tollgate.Reply {
	return h.svc.CallAll(ctx, h.caller(), func() ([]tollgate.Item, error) {
		items := make([]tollgate.Item, len(ids))
		for i, id := range ids {
			items[i] = tollgate.Item{API: id, Input: tollgate.Input{JSON: map[string]any{}}}
			if i < len(ns) {
				items[i].Input.JSON["n"] = json.Number(strconv.FormatInt(ns[i], 10))
			}
		}
		return items, nil
	})
}

func (h *harness) remaining(t *testing.T) int64 {
	t.Helper()
	info, err := h.mgr.Account(context.Background(), "acct")
	if err != nil {
		t.Fatal(err)
	}
	return info.Balance.Remaining
}

// success marks an expected success in tables of codes.
const success = tollgate.Code(255)

func TestRunChargesTheSumAndRefundsFailures(t *testing.T) {
	tests := []struct {
		name      string
		apis      []string
		wantCodes []tollgate.Code // success for success
		charged   int64
	}{
		{"one", []string{"ok"}, []tollgate.Code{success}, 1},
		{"sum of distinct APIs", []string{"ok", "two", "reject"}, []tollgate.Code{success, success, tollgate.CodeRejected}, 7},
		{"a failure is refunded", []string{"ok", "fail"}, []tollgate.Code{success, tollgate.CodeAPIFailed}, 1},
		{"a panic is refunded", []string{"panic", "two"}, []tollgate.Code{tollgate.CodeAPIFailed, success}, 2},
		{"a rejection is charged", []string{"reject"}, []tollgate.Code{tollgate.CodeRejected}, 4},
		{"all failed", []string{"fail", "panic"}, []tollgate.Code{tollgate.CodeAPIFailed, tollgate.CodeAPIFailed}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, harnessOptions{})
			reply := h.call(t.Context(), tt.apis)
			if reply.Err != nil {
				t.Fatal(reply.Err)
			}
			results, rc := reply.Results, reply.Receipt
			if len(results) != len(tt.apis) {
				t.Fatalf("got %d results, want %d", len(results), len(tt.apis))
			}
			for i, want := range tt.wantCodes {
				r := results[i]
				switch {
				case want == success && r.Err != nil:
					t.Errorf("%s: error %v, want success", tt.apis[i], r.Err)
				case want == success && r.Data == nil:
					t.Errorf("%s: no data", tt.apis[i])
				case want != success && (r.Err == nil || r.Err.Code != want):
					t.Errorf("%s: result %+v, want code %v", tt.apis[i], r, want)
				}
			}
			if rc.Charged != tt.charged || rc.Balance == (billing.Balance{}) || rc.Balance.Remaining != 100-tt.charged {
				t.Errorf("receipt %+v, want charged %d and remaining %d", rc, tt.charged, 100-tt.charged)
			}
			if got := h.remaining(t); got != 100-tt.charged {
				t.Errorf("balance %d, want %d", got, 100-tt.charged)
			}
		})
	}
}

// TestRunChargesDistinctAPIsOnce checks the GraphQL cost rule at the pipeline: one API
// named twice with the same input runs once and costs once; named with other inputs, the
// call is refused and costs nothing.
func TestRunChargesDistinctAPIsOnce(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	reply := h.call(t.Context(), []string{"ok", "ok", "two"}, 7, 7)
	if reply.Err != nil {
		t.Fatal(reply.Err)
	}
	results, rc := reply.Results, reply.Receipt
	if len(results) != 3 || results[0].Err != nil || results[1].Err != nil || string(results[1].JSON) != `{"n":7}` || string(results[0].JSON) != `{"n":7}` {
		t.Errorf("results %+v", results)
	}
	if rc.Charged != 3 || h.remaining(t) != 97 || h.ran.Load() != 2 {
		t.Errorf("charged %d, remaining %d, %d runs; want 3 (ok once, two), 97 and 2", rc.Charged, h.remaining(t), h.ran.Load())
	}
	reply = h.call(t.Context(), []string{"ok", "ok"}, 7, 8)
	if tollgate.CodeOf(reply.Err) != tollgate.CodeInvalidInput || reply.Results != nil {
		t.Errorf("other inputs: %+v, want invalid_input", reply)
	}
	if h.remaining(t) != 97 || h.ran.Load() != 2 || reply.Receipt.Balance.Remaining != 97 {
		t.Errorf("the refused call cost something, or ran: remaining %d, %d runs, receipt %+v", h.remaining(t), h.ran.Load(), reply.Receipt)
	}
}

func TestRunRunsInParallel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, harnessOptions{})
		start := time.Now()
		reply := h.call(t.Context(), []string{"sleep", "ok", "two"}, 3)
		if reply.Err != nil {
			t.Fatal(reply.Err)
		}
		for _, r := range reply.Results {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
		// In the bubble, time moves only when every goroutine is blocked: the call
		// takes exactly as long as its slowest API.
		if took := time.Since(start); took != 3*time.Second {
			t.Errorf("took %v, want 3s", took)
		}
	})
}

func TestRunTimeoutIsRefunded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, harnessOptions{opts: tollgate.Options{CallTimeout: 5 * time.Second}})
		reply := h.call(t.Context(), []string{"block", "ok"})
		if reply.Err != nil {
			t.Fatal(reply.Err)
		}
		results, rc := reply.Results, reply.Receipt
		if r := results[0]; r.Err == nil || r.Err.Code != tollgate.CodeTimeout {
			t.Errorf("block: %+v, want a timeout", r)
		}
		if r := results[1]; r.Err != nil {
			t.Errorf("ok: %v", r.Err)
		}
		if rc.Charged != 1 || h.remaining(t) != 99 {
			t.Errorf("charged %d, remaining %d; want 1 and 99", rc.Charged, h.remaining(t))
		}
	})
}

func TestRunCanceledByCallerIsRefunded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, harnessOptions{})
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(time.Second, cancel)
		reply := h.call(ctx, []string{"block"})
		if reply.Err != nil {
			t.Fatal(reply.Err)
		}
		if r := reply.Results[0]; r.Err == nil || r.Err.Code.Charged() {
			t.Errorf("result %+v, want a refunded failure", r)
		}
		if got := h.remaining(t); got != 100 {
			t.Errorf("balance %d, want 100", got)
		}
	})
}

func TestRunRenewsTheSlotOfALongCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, harnessOptions{opts: tollgate.Options{Lease: 10 * time.Second, CallTimeout: time.Minute}})
		reply := h.call(t.Context(), []string{"sleep"}, 32)
		if reply.Err != nil || reply.Results[0].Err != nil {
			t.Fatal(reply.Err, reply.Results)
		}
		// Renewed every half lease: at 5, 10, ..., 30 seconds.
		if got := h.slots.renewals.Load(); got != 6 {
			t.Errorf("%d renewals, want 6", got)
		}
	})
}

// failingLedger is a ledger whose store cannot be reached.
type failingLedger struct{ driver.Ledger }

func (failingLedger) Reserve(context.Context, driver.Reservation) (billing.Balance, error) {
	return billing.Balance{}, errors.New("dial tcp 127.0.0.1:5432: connection refused")
}

func TestRunFailsClosedWhenAStoreIsDown(t *testing.T) {
	h := newHarness(t, harnessOptions{ledger: failingLedger{memory.NewLedger(nil)}})
	err := h.call(t.Context(), []string{"ok"}).Err
	if tollgate.CodeOf(err) != tollgate.CodeUnavailable {
		t.Fatalf("error %v, want code unavailable", err)
	}
	if h.ran.Load() != 0 {
		t.Error("the handler ran although nothing was admitted")
	}
	// The slot taken before the ledger failed is free again.
	if n, _ := h.slots.InUse(t.Context(), "acct", time.Now()); n != 0 {
		t.Errorf("%d slots in use, want 0", n)
	}
}

func TestRunRefusals(t *testing.T) {
	tests := []struct {
		name string
		plan billing.Plan
		runs int
		want tollgate.Code
	}{
		{"rate", billing.Plan{Name: "r", Credits: 100, RatePerMinute: 2}, 3, tollgate.CodeRateLimited},
		{"credits", billing.Plan{Name: "c", Credits: 2}, 3, tollgate.CodeCreditsExhausted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Date(2030, 1, 10, 0, 0, 0, 0, time.UTC)
			h := newHarness(t, harnessOptions{plan: tt.plan, opts: tollgate.Options{Now: func() time.Time { return now }}})
			var err error
			for range tt.runs {
				err = h.call(t.Context(), []string{"ok"}).Err
			}
			var e *tollgate.Error
			if !errors.As(err, &e) || e.Code != tt.want {
				t.Fatalf("error %v, want code %v", err, tt.want)
			}
			if tt.want == tollgate.CodeRateLimited && e.RetryAfter <= 0 {
				t.Errorf("RetryAfter %v, want > 0", e.RetryAfter)
			}
			if h.ran.Load() != int32(tt.runs-1) {
				t.Errorf("handler ran %d times, want %d", h.ran.Load(), tt.runs-1)
			}
		})
	}
}

func TestPrepareNeverCharges(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	err := h.svc.Call(t.Context(), h.caller(), "ok", func(*catalog.API) (tollgate.Input, error) {
		return tollgate.Input{JSON: map[string]any{"n": "x"}}, nil
	}).Err
	if tollgate.CodeOf(err) != tollgate.CodeInvalidInput {
		t.Fatalf("error %v, want invalid_input", err)
	}
	if err := h.svc.Call(t.Context(), h.caller(), "nope", nil).Err; tollgate.CodeOf(err) != tollgate.CodeNotFound {
		t.Errorf("unknown API: %v, want not_found", err)
	}
	if got := h.remaining(t); got != 100 {
		t.Errorf("balance %d, want 100", got)
	}
}

func TestAccountManagement(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	ctx := t.Context()
	if _, _, _, err := h.mgr.CreateAccount(ctx, accounts.Spec{Plan: "nope"}); tollgate.CodeOf(err) != tollgate.CodeInvalidInput {
		t.Errorf("unknown plan: %v, want invalid_input", err)
	}
	// An id that exists: the same definition returns the account, another is a conflict.
	if a, _, _, err := h.mgr.CreateAccount(ctx, accounts.Spec{ID: "acct", Plan: "p"}); err != nil || a.ID != "acct" {
		t.Errorf("the same account again: %+v %v, want it", a, err)
	}
	office, err := auth.NewRestrictions(auth.RestrictionSpec{AllowedIPs: []string{"10.0.0.0/8"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := h.mgr.CreateAccount(ctx, accounts.Spec{ID: "acct", Plan: "p", Restrictions: office}); tollgate.CodeOf(err) != tollgate.CodeConflict {
		t.Errorf("duplicate account with other restrictions: %v, want conflict", err)
	}
	credits := int64(7)
	acct, key, value, err := h.mgr.CreateAccount(ctx, accounts.Spec{Plan: "p", Credits: &credits})
	if err != nil || !key.Primary || value == "" {
		t.Fatalf("CreateAccount: %v %+v %q", err, key, value)
	}
	info, err := h.mgr.Account(ctx, acct.ID)
	if err != nil || info.Balance.Remaining != 7 || len(info.Keys) != 1 {
		t.Fatalf("Account: %v %+v", err, info)
	}

	// A retried grant with the same idempotency key applies once.
	for range 2 {
		b, err := h.mgr.AdjustCredits(ctx, acct.ID, 10, "goodwill", &accounts.CreditOptions{IdempotencyKey: "grant-1"})
		if err != nil || b.Remaining != 17 {
			t.Fatalf("AdjustCredits: %v, remaining %d, want 17", err, b.Remaining)
		}
	}
	if _, err := h.mgr.AdjustCredits(ctx, acct.ID, -100, "too much", nil); tollgate.CodeOf(err) != tollgate.CodeConflict {
		t.Errorf("negative below zero: %v, want conflict", err)
	}
	if _, err := h.mgr.AdjustCredits(ctx, "nobody", 1, "x", nil); tollgate.CodeOf(err) != tollgate.CodeNotFound {
		t.Errorf("unknown account: %v, want not_found", err)
	}
	if _, err := h.mgr.RevokeKey(ctx, "key_nope"); tollgate.CodeOf(err) != tollgate.CodeNotFound || !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown key: %v, want not_found", err)
	}
}

func TestCodes(t *testing.T) {
	if tollgate.CodeOf(errors.New("plain")) != tollgate.CodeInternal {
		t.Error("a plain error is not internal")
	}
	if !tollgate.CodeRejected.Charged() || tollgate.CodeAPIFailed.Charged() {
		t.Error("only rejections are charged")
	}
}

// TestNewNeedsEveryStore checks that a missing store is refused by New, naming the
// field of Stores to set, rather than failing a call later.
func TestNewNeedsEveryStore(t *testing.T) {
	plans, err := billing.NewPlans(billing.Plan{Name: "p", Credits: 1})
	if err != nil {
		t.Fatal(err)
	}
	full := tollgate.Stores{Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
		Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter()}
	for _, tt := range []struct {
		name  string
		strip func(*tollgate.Stores)
	}{
		{"keys", func(s *tollgate.Stores) { s.Keys = nil }},
		{"ledger", func(s *tollgate.Stores) { s.Ledger = nil }},
		{"rates", func(s *tollgate.Stores) { s.Rates = nil }},
		{"slots", func(s *tollgate.Stores) { s.Slots = nil }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			stores := full
			tt.strip(&stores)
			svc, err := tollgate.New(&catalog.Registry{}, stores, plans, nil)
			if err == nil {
				svc.Close()
				t.Fatal("New accepted a missing store")
			}
			if !strings.Contains(err.Error(), "Stores.Keys, Ledger, Rates and Slots") {
				t.Errorf("error %q does not name the Stores fields", err)
			}
		})
	}
}

// TestChargeLess: a handler may charge less than its API's cost
// (catalog.Request.Charge): admission reserves the cost, and the settlement keeps what
// the handler charged and refunds the rest, in the receipt, the balance, the events and
// each item of a batch. A charge out of range changes nothing; a failure is refunded
// whole, whatever the handler charged.
func TestChargeLess(t *testing.T) {
	for _, tt := range []struct {
		name    string
		n       int64
		charged int64
	}{
		{"charges 3 of 10", 3, 3},
		{"charges nothing", 0, 0},
		{"charges the cost", 10, 10},
		{"charges more than the cost: refused, the cost", 11, 10},
		{"fails after charging: refunded", -1, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, harnessOptions{})
			var calls []*event.Call
			var mu sync.Mutex
			h.svc.Events().Subscribe(event.ObserverFunc(func(_ context.Context, e event.Event) {
				mu.Lock()
				defer mu.Unlock()
				c := *e.(*event.Call)
				c.APIs = slices.Clone(c.APIs)
				calls = append(calls, &c)
			}), event.CallFinished)
			reply := h.call(t.Context(), []string{"metered"}, tt.n)
			if reply.Err != nil {
				t.Fatal(reply.Err)
			}
			if rc := reply.Receipt; rc.Charged != tt.charged || rc.Balance.Remaining != 100-tt.charged {
				t.Errorf("receipt charged %d remaining %d, want %d and %d", rc.Charged, rc.Balance.Remaining, tt.charged, 100-tt.charged)
			}
			if got := h.remaining(t); got != 100-tt.charged {
				t.Errorf("balance %d, want %d", got, 100-tt.charged)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(calls) != 1 || calls[0].Charged != tt.charged || calls[0].APIs[0].Credits != tt.charged {
				t.Errorf("events %+v, want one call charged %d", calls, tt.charged)
			}
		})
	}
	// Each item of a batch is charged what its handler charged.
	h := newHarness(t, harnessOptions{})
	reply := h.batch(t.Context(), "metered", "", ns(2, 5, -1)...)
	if reply.Err != nil {
		t.Fatal(reply.Err)
	}
	var got []int64
	for _, it := range reply.Items {
		got = append(got, it.Credits)
	}
	if !slices.Equal(got, []int64{2, 5, 0}) || reply.Receipt.Charged != 7 || h.remaining(t) != 93 {
		t.Errorf("items charged %v, batch %d, balance %d; want [2 5 0], 7 and 93", got, reply.Receipt.Charged, h.remaining(t))
	}
}
