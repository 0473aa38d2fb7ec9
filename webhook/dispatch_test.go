package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/webhook"
	"github.com/tollgate-dev/tollgate/wire"
)

var (
	d0             = time.Date(2030, time.March, 1, 9, 0, 0, 0, time.UTC)
	march          = event.Balance{Allowance: 100, PeriodStart: d0, PeriodEnd: d0.AddDate(0, 1, 0)}
	april          = event.Balance{Allowance: 100, PeriodStart: d0.AddDate(0, 1, 0), PeriodEnd: d0.AddDate(0, 2, 0)}
	dispatchSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
)

// rig is a store with endpoints and the dispatchers of n instances on it.
type rig struct {
	store       *memory.WebhookStore
	dispatchers []*webhook.Dispatcher
	mu          sync.Mutex
	told        []string // the types the subscribers of every instance were told of
}

func newRig(t *testing.T, n int, opts *webhook.DispatcherOptions) *rig {
	t.Helper()
	r := &rig{store: memory.NewWebhookStore()}
	for range n {
		o := webhook.DispatcherOptions{Now: func() time.Time { return d0 }}
		if opts != nil {
			o = *opts
			o.Now = func() time.Time { return d0 }
		}
		d, err := webhook.NewDispatcher(r.store, &o)
		if err != nil {
			t.Fatal(err)
		}
		d.Subscribe(func(_ context.Context, m webhook.Message) {
			r.mu.Lock()
			r.told = append(r.told, m.Type)
			r.mu.Unlock()
		})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); d.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		r.dispatchers = append(r.dispatchers, d)
	}
	return r
}

// endpoint creates an endpoint of account for types.
func (r *rig) endpoint(t *testing.T, id, account string, types ...string) {
	t.Helper()
	e := webhook.Endpoint{ID: id, Account: account, URL: "https://hooks.example.com/" + id, Types: types, Secret: dispatchSecret, Created: d0}
	if _, err := r.store.CreateEndpoint(t.Context(), e); err != nil {
		t.Fatal(err)
	}
}

// delivered waits until the store holds want deliveries in all and returns them, as
// "endpoint type" lines, sorted.
func (r *rig) delivered(t *testing.T, want int) []string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := r.store.Pending(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if n >= int64(want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, d := range r.dispatchers {
		waitQueue(t, d)
	}
	ds, err := r.store.Claim(t.Context(), d0.Add(time.Hour), time.Minute, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range ds {
		got = append(got, d.Endpoint+" "+d.Message.Type)
	}
	slices.Sort(got)
	return got
}

// waitQueue waits until d's queue is empty.
func waitQueue(t *testing.T, d *webhook.Dispatcher) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for d.Stats().Queued > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the queue still holds %d messages", d.Stats().Queued)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func call(account string, b event.Balance, used int64) *event.Call {
	b.Used, b.Remaining = used, b.Allowance-used
	return &event.Call{At: b.PeriodStart.Add(time.Hour), Account: account, Key: "k1", Plan: "basic", Balance: b, Settlement: event.Settled}
}

func TestDispatchChanges(t *testing.T) {
	r := newRig(t, 1, nil)
	r.endpoint(t, "ep_acme_all", "acme")
	r.endpoint(t, "ep_acme_keys", "acme", webhook.KeyRevoked, webhook.KeyRotated)
	r.endpoint(t, "ep_acme_plans", "acme", webhook.PlanChanged)
	r.endpoint(t, "ep_other", "globex")
	r.endpoint(t, "ep_operator", "")
	off := webhook.Endpoint{ID: "ep_off", Account: "acme", URL: "https://hooks.example.com/off", Secret: dispatchSecret, Created: d0}
	off, err := r.store.CreateEndpoint(t.Context(), off)
	if err != nil {
		t.Fatal(err)
	}
	off.Disabled, off.DisabledReason = d0, "disabled by its owner"
	if _, err := r.store.UpdateEndpoint(t.Context(), off); err != nil {
		t.Fatal(err)
	}

	d := r.dispatchers[0]
	rotated := &event.Change{Type: event.KeyRotated, ID: "c1", At: d0, Account: "acme", Key: "k1", Actor: event.Actor{ID: "k1"}}
	d.Observe(t.Context(), rotated)
	d.Observe(t.Context(), rotated) // published again with its ID: enqueued once
	d.Observe(t.Context(), &event.Change{Type: event.SessionStarted, ID: "c2", At: d0, Account: "acme"})
	got := r.delivered(t, 3)
	want := []string{"ep_acme_all key.rotated", "ep_acme_keys key.rotated", "ep_operator key.rotated"}
	if !slices.Equal(got, want) {
		t.Fatalf("deliveries %q, want %q", got, want)
	}
	if s := d.Stats(); s.Enqueued != 1 || s.Duplicates != 1 {
		t.Errorf("stats %+v, want 1 enqueued and 1 duplicate", s)
	}
	if !slices.Equal(r.told, []string{"key.rotated"}) {
		t.Errorf("subscribers told %q", r.told)
	}
}

func TestDispatchCreditsLow(t *testing.T) {
	// Two instances see the calls of one account; each threshold is sent once.
	r := newRig(t, 2, nil)
	r.endpoint(t, "ep_acme", "acme")
	for used := int64(0); used <= 100; used += 5 {
		r.dispatchers[used/5%2].Observe(t.Context(), call("acme", march, used))
	}
	// Both instances see a call past every threshold.
	for _, d := range r.dispatchers {
		d.Observe(t.Context(), call("acme", march, 100))
	}
	got := r.delivered(t, 3)
	if want := []string{"ep_acme credits.low", "ep_acme credits.low", "ep_acme credits.low"}; !slices.Equal(got, want) {
		t.Fatalf("deliveries %q, want %q", got, want)
	}
	ds, err := r.store.Deliveries(t.Context(), "ep_acme", webhook.Query{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var thresholds []int
	for _, d := range ds.Deliveries {
		var body struct {
			Data webhook.CreditsLowData `json:"data"`
		}
		if err := json.Unmarshal(d.Message.Body, &body); err != nil {
			t.Fatal(err)
		}
		thresholds = append(thresholds, body.Data.Threshold)
	}
	slices.Sort(thresholds)
	if !slices.Equal(thresholds, []int{80, 90, 100}) {
		t.Fatalf("thresholds %v, want 80, 90, 100 once each", thresholds)
	}

	// A new period sends them again; a call that jumps past two sends both.
	r.dispatchers[1].Observe(t.Context(), call("acme", april, 95))
	// (The deliveries of March are claimed: those claimed now are April's.)
	got = r.delivered(t, 6)
	if want := []string{"ep_acme credits.low", "ep_acme credits.low", "ep_acme period.renewed"}; !slices.Equal(got, want) {
		t.Fatalf("after April's call past 95%%: deliveries %q, want %q", got, want)
	}
}

func TestDispatchRefusals(t *testing.T) {
	r := newRig(t, 2, &webhook.DispatcherOptions{RateLimitCooldown: time.Minute})
	r.endpoint(t, "ep_acme", "acme", webhook.CreditsExhausted, webhook.RateLimitExceeded)
	exhausted := func(remaining, used int64) *event.Refusal {
		b := march
		b.Remaining, b.Used = remaining, used
		return &event.Refusal{At: d0.Add(time.Hour), Account: "acme", Key: "k1", Code: wire.CodeCreditsExhausted, Balance: b}
	}
	limited := func(key string, at time.Duration) *event.Refusal {
		return &event.Refusal{At: d0.Add(at), Account: "acme", Key: key, Plan: "basic", Code: wire.CodeRateLimited, Balance: march}
	}
	i0, i1 := r.dispatchers[0], r.dispatchers[1]
	i0.Observe(t.Context(), exhausted(0, 100))
	i1.Observe(t.Context(), exhausted(0, 100))
	i0.Observe(t.Context(), exhausted(3, 100)) // 3 granted since: sent again
	i1.Observe(t.Context(), exhausted(3, 100))
	i0.Observe(t.Context(), limited("k1", 10*time.Second))
	i1.Observe(t.Context(), limited("k1", 20*time.Second)) // the same window, on another instance
	i0.Observe(t.Context(), limited("k2", 20*time.Second)) // another key of the account
	i1.Observe(t.Context(), limited("k1", 70*time.Second)) // within a minute of i1's last
	i1.Observe(t.Context(), limited("k2", 90*time.Second)) // past it, in the next window
	i1.Observe(t.Context(), &event.Refusal{At: d0, Account: "acme", Code: "invalid_input", Balance: march})
	got := r.delivered(t, 4)
	want := []string{"ep_acme credits.exhausted", "ep_acme credits.exhausted",
		"ep_acme rate_limit.exceeded", "ep_acme rate_limit.exceeded"}
	if !slices.Equal(got, want) {
		t.Fatalf("deliveries %q, want %q", got, want)
	}
}

func TestDispatchPeriodRenewed(t *testing.T) {
	plans, err := billing.NewPlans(billing.Plan{Name: "basic", Credits: 100, RatePerMinute: 60})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, 2, &webhook.DispatcherOptions{Plans: plans, Thresholds: []int{}})
	r.endpoint(t, "ep_acme", "acme")
	i0, i1 := r.dispatchers[0], r.dispatchers[1]
	i0.Observe(t.Context(), call("acme", march, 1)) // the first period d0 sees: nothing
	i1.Observe(t.Context(), call("acme", april, 1)) // the first period d1 sees: nothing
	i0.Observe(t.Context(), call("acme", april, 2)) // d0 saw March: April renewed
	i1.Observe(t.Context(), call("acme", march, 3)) // a lagging clock: nothing
	i0.Observe(t.Context(), call("acme", april, 4))
	got := r.delivered(t, 1)
	if want := []string{"ep_acme period.renewed"}; !slices.Equal(got, want) {
		t.Fatalf("deliveries %q, want %q", got, want)
	}
}

func TestDispatchQueueFull(t *testing.T) {
	s := memory.NewWebhookStore()
	d, err := webhook.NewDispatcher(s, &webhook.DispatcherOptions{Queue: 1, Now: func() time.Time { return d0 }})
	if err != nil {
		t.Fatal(err)
	}
	// Not running: the queue holds one message, the next two are dropped.
	d.Observe(t.Context(), call("a", march, 80))
	d.Observe(t.Context(), call("b", march, 80))
	d.Observe(t.Context(), call("c", march, 80))
	if st := d.Stats(); st.Queued != 1 || st.Dropped != 2 {
		t.Fatalf("stats %+v, want 1 queued and 2 dropped", st)
	}
	// A dropped threshold is made again by the next call past it.
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	waitQueue(t, d)
	d.Observe(t.Context(), call("b", march, 81))
	waitQueue(t, d)
	cancel()
	<-done
	if st := d.Stats(); st.Enqueued != 2 {
		t.Fatalf("stats %+v, want 2 enqueued (a's, and b's made again)", st)
	}
}

func TestDispatcherOptions(t *testing.T) {
	s := memory.NewWebhookStore()
	for _, o := range []webhook.DispatcherOptions{{Thresholds: []int{0}}, {Thresholds: []int{101}}, {Queue: -1}, {RateLimitCooldown: -time.Second}} {
		if _, err := webhook.NewDispatcher(s, &o); err == nil {
			t.Errorf("NewDispatcher(%+v) took it", o)
		}
	}
	if _, err := webhook.NewDispatcher(nil, nil); err == nil {
		t.Error("NewDispatcher(nil) took it")
	}
}

// stuckStore is a store whose Enqueue waits for its context to end.
type stuckStore struct {
	webhook.Store
	calls atomic.Int32
}

func (s *stuckStore) Enqueue(ctx context.Context, _ webhook.Message, _ []string, _ time.Time) (bool, []string, error) {
	s.calls.Add(1)
	<-ctx.Done()
	return false, nil, ctx.Err()
}

// TestDispatcherFlushBounded: once Run's context ended, what is queued is enqueued
// within FlushTimeout, however slow the store: the messages left when it has passed
// are dropped and counted without an attempt.
func TestDispatcherFlushBounded(t *testing.T) {
	s := &stuckStore{Store: memory.NewWebhookStore()}
	d, err := webhook.NewDispatcher(s, &webhook.DispatcherOptions{
		FlushTimeout: 50 * time.Millisecond, EnqueueTimeout: 200 * time.Millisecond, Now: func() time.Time { return d0 }})
	if err != nil {
		t.Fatal(err)
	}
	for _, account := range []string{"a", "b", "c"} {
		d.Observe(t.Context(), call(account, march, 80))
	}
	if st := d.Stats(); st.Queued != 3 {
		t.Fatalf("stats %+v, want 3 queued", st)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return")
	}
	// One attempt, which the flush's end cut short; the others were not attempted.
	if st, calls := d.Stats(), s.calls.Load(); st.Queued != 0 || st.Dropped != 3 || st.Enqueued != 0 || calls != 1 {
		t.Errorf("stats %+v after %d attempts to enqueue; want 3 dropped, none queued, and 1 attempt", st, calls)
	}
	if _, err := webhook.NewDispatcher(memory.NewWebhookStore(), &webhook.DispatcherOptions{FlushTimeout: -time.Second}); err == nil {
		t.Error("NewDispatcher took a negative FlushTimeout")
	}
}

func TestDispatcherKinds(t *testing.T) {
	d, err := webhook.NewDispatcher(memory.NewWebhookStore(), nil)
	if err != nil {
		t.Fatal(err)
	}
	kinds := d.Kinds()
	for _, k := range []event.Kind{event.CallFinished, event.CallRefused, event.AccountCreated, event.KeyRotated, event.CreditsAdjusted, event.EndpointDisabled} {
		if !slices.Contains(kinds, k) {
			t.Errorf("Kinds() %v lacks %s", kinds, k)
		}
	}
	for _, k := range []event.Kind{event.SessionStarted, event.ReservationsVoided, event.AccountDeleted, event.EndpointCreated} {
		if slices.Contains(kinds, k) {
			t.Errorf("Kinds() %v has %s, which makes no message", kinds, k)
		}
	}
	if !slices.IsSorted(kinds) {
		t.Errorf("Kinds() %v is not sorted", kinds)
	}
}
