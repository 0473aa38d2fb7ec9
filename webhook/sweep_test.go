package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/webhook"
)

// The sweeps run in a synctest bubble, on the bubble's clock, on memory stores shared by
// two dispatchers (two instances): each event is sent once, within a sweep interval of
// its cause. store/storetest.TestWebhookSweeps checks the same on PostgreSQL and
// Redis, sweep by sweep.

// sweepWorld is what the sweep tests build on: a key store, a ledger and a webhook
// store shared by the instances, with an operator's endpoint that takes every event.
type sweepWorld struct {
	keys   *memory.KeyStore
	ledger *memory.Ledger
	hooks  *memory.WebhookStore
	plans  *billing.Plans
	ep     webhook.Endpoint

	mu   sync.Mutex
	told []webhook.Message // what the dispatchers' subscribers were told
}

func newSweepWorld(t *testing.T) *sweepWorld {
	t.Helper()
	plans, err := billing.NewPlans(billing.Plan{Name: "pro", Credits: 1000, RatePerMinute: 60},
		billing.Plan{Name: "max", Credits: 5000, RatePerMinute: 600, Renews: billing.Yearly})
	if err != nil {
		t.Fatal(err)
	}
	w := &sweepWorld{keys: memory.NewKeyStore(), ledger: memory.NewLedger(nil), hooks: memory.NewWebhookStore(), plans: plans}
	w.ep, err = w.hooks.CreateEndpoint(t.Context(), webhook.Endpoint{ID: "ep_operator", URL: "https://hooks.example.com/",
		Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", Created: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// instance returns a Dispatcher of the world, sweeping every interval, with ledger
// for the renewals unless nil.
func (w *sweepWorld) instance(t *testing.T, interval time.Duration, ledger webhook.Balances) *webhook.Dispatcher {
	t.Helper()
	d, err := webhook.NewDispatcher(w.hooks, &webhook.DispatcherOptions{Keys: w.keys, Ledger: ledger, Plans: w.plans,
		SweepInterval: interval, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	d.Subscribe(func(_ context.Context, m webhook.Message) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.told = append(w.told, m)
	})
	return d
}

// run runs ds until the returned function is called, which waits for them to stop.
func run(ds ...*webhook.Dispatcher) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, d := range ds {
		wg.Go(func() { d.Run(ctx) })
	}
	return func() {
		cancel()
		wg.Wait()
	}
}

// account stores an account created now, whose restrictions expire at acctExp (never
// for zero), with its primary key, and opens its balance in its first period.
func (w *sweepWorld) account(t *testing.T, id, plan string, acctExp time.Time) auth.Key {
	t.Helper()
	now := time.Now()
	a := auth.Account{ID: id, Plan: plan, CreatedAt: now, BillingAnchor: now}
	if !acctExp.IsZero() {
		a.Restrictions = expiresAt(t, acctExp)
	}
	k := auth.Key{ID: "key_" + id, AccountID: id, Name: "primary", Primary: true, Hash: auth.HashKey(auth.NewKeyValue()), CreatedAt: now}
	if err := w.keys.CreateAccount(t.Context(), a, k); err != nil {
		t.Fatal(err)
	}
	p, _ := w.plans.Lookup(plan)
	if err := w.ledger.Open(t.Context(), driver.Opening{Account: id, Balance: p.Credits, Allowance: p.Credits,
		Period: billing.PeriodAt(now, p.Renews, now)}); err != nil {
		t.Fatal(err)
	}
	return k
}

// key stores a sub-key of account created now that expires at e.
func (w *sweepWorld) key(t *testing.T, account, id string, e time.Time) auth.Key {
	t.Helper()
	k := auth.Key{ID: id, AccountID: account, Name: "name of " + id, Hash: auth.HashKey(auth.NewKeyValue()),
		Restrictions: expiresAt(t, e), CreatedAt: time.Now()}
	if err := w.keys.CreateKey(t.Context(), k, auth.KeyLimit{}); err != nil {
		t.Fatal(err)
	}
	return k
}

func expiresAt(t *testing.T, e time.Time) auth.Restrictions {
	t.Helper()
	r, err := auth.NewRestrictions(auth.RestrictionSpec{ExpiresAt: &e})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// sent returns the messages of type typ in the outbox, oldest first, with when each
// was enqueued (its delivery's first due time).
func (w *sweepWorld) sent(t *testing.T, typ string) (ms []webhook.Message, enqueued []time.Time) {
	t.Helper()
	page, err := w.hooks.Deliveries(t.Context(), w.ep.ID, webhook.Query{Limit: webhook.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range slices.Backward(page.Deliveries) {
		if d.Message.Type == typ {
			ms = append(ms, d.Message)
			enqueued = append(enqueued, d.Due)
		}
	}
	return ms, enqueued
}

// told returns how many messages of type typ the subscribers were told of.
func (w *sweepWorld) toldOf(typ string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, m := range w.told {
		if m.Type == typ {
			n++
		}
	}
	return n
}

// data returns a message's data.
func data[D any](t *testing.T, m webhook.Message) (D, time.Time) {
	t.Helper()
	var body struct {
		Timestamp time.Time `json:"timestamp"`
		Data      D         `json:"data"`
	}
	if err := json.Unmarshal(m.Body, &body); err != nil {
		t.Fatal(err)
	}
	return body.Data, body.Timestamp
}

// TestSweepKeyExpired: a key that expires unused is sent key.expired once, by one of
// two instances, within a sweep interval of its expiry; a key revoked before its
// expiry is sent none; a key whose expiry moved is sent one, at the new expiry; a
// primary key expires with its account.
func TestSweepKeyExpired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newSweepWorld(t)
		start := time.Now()
		h := func(d float64) time.Time { return start.Add(time.Duration(d * float64(time.Hour))) }
		const interval = 30 * time.Second
		stop := run(w.instance(t, interval, nil), w.instance(t, interval, nil))
		defer stop()

		w.account(t, "acme", "pro", time.Time{})
		unused := w.key(t, "acme", "key_unused", h(1))
		revoked := w.key(t, "acme", "key_revoked", h(1))
		moved := w.key(t, "acme", "key_moved", h(2))
		w.account(t, "trial", "pro", h(1.5)) // its primary key, key_trial, expires with it
		time.Sleep(30 * time.Minute)
		if _, err := w.keys.RevokeKey(t.Context(), revoked.ID, auth.AnyRevision, time.Now()); err != nil {
			t.Fatal(err)
		}
		if _, err := w.keys.UpdateKey(t.Context(), auth.KeyUpdate{ID: moved.ID, Name: moved.Name,
			Restrictions: expiresAt(t, h(3)), Revision: moved.Revision}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(4 * time.Hour)
		synctest.Wait()

		ms, enqueued := w.sent(t, webhook.KeyExpired)
		var got []string
		for i, m := range ms {
			d, ts := data[webhook.KeyExpiredData](t, m)
			got = append(got, fmt.Sprintf("%s %s@%s", d.Account, d.Key, d.ExpiredAt.Sub(start)))
			if !ts.Equal(d.ExpiredAt) || !m.At.Equal(d.ExpiredAt) {
				t.Errorf("%s: timestamp %v, message at %v, want the expiry %v", d.Key, ts, m.At, d.ExpiredAt)
			}
			if late := enqueued[i].Sub(d.ExpiredAt); late < 0 || late > interval {
				t.Errorf("%s: enqueued %v after its expiry, want within the sweep interval %v", d.Key, late, interval)
			}
			if d.Key == unused.ID && (d.Name != unused.Name || d.Actor != "" || m.ID != webhook.DerivedID(webhook.KeyExpired, unused.ID, h(1).Format(time.RFC3339))) {
				t.Errorf("the data of %s: %+v, message id %s", unused.ID, d, m.ID)
			}
		}
		want := []string{"acme key_unused@1h0m0s", "trial key_trial@1h30m0s", "acme key_moved@3h0m0s"}
		if !slices.Equal(got, want) {
			t.Errorf("key.expired sent: %q, want %q", got, want)
		}
		if n := w.toldOf(webhook.KeyExpired); n != len(want) {
			t.Errorf("the instances' subscribers were told of %d key.expired, want %d (once across the instances)", n, len(want))
		}
	})
}

// TestSweepKeyExpiredAfterOutage: a key that expires while no instance runs is sent
// key.expired when one runs again: the sweep goes on from where the last one stopped.
func TestSweepKeyExpiredAfterOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newSweepWorld(t)
		start := time.Now()
		stop := run(w.instance(t, time.Minute, nil))
		w.account(t, "acme", "pro", time.Time{})
		k := w.key(t, "acme", "key_ci", start.Add(2*time.Hour))
		time.Sleep(time.Hour)
		stop()
		time.Sleep(5 * time.Hour)
		if ms, _ := w.sent(t, webhook.KeyExpired); len(ms) != 0 {
			t.Fatalf("%d key.expired while no instance ran", len(ms))
		}
		stop = run(w.instance(t, time.Minute, nil))
		time.Sleep(time.Second)
		synctest.Wait()
		stop()
		ms, _ := w.sent(t, webhook.KeyExpired)
		if len(ms) != 1 {
			t.Fatalf("%d key.expired after the outage, want 1", len(ms))
		}
		if d, _ := data[webhook.KeyExpiredData](t, ms[0]); d.Key != k.ID || !d.ExpiredAt.Equal(start.Add(2*time.Hour)) {
			t.Errorf("key.expired after the outage: %+v", d)
		}
	})
}

// TestSweepPeriodRenewed: with the ledger, an account's renewal is sent
// period.renewed once, by one of two instances, within a sweep interval of it (the
// accounts fit one sweep), also for an account that makes no call; the account's
// first period and a closed account are sent none; the calls of the new period send
// no other.
func TestSweepPeriodRenewed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newSweepWorld(t)
		start := time.Now()
		const interval = time.Hour
		d1, d2 := w.instance(t, interval, w.ledger), w.instance(t, interval, w.ledger)
		stop := run(d1, d2)
		defer stop()

		w.account(t, "acme", "pro", time.Time{})
		w.account(t, "yearly", "max", time.Time{})
		w.account(t, "gone", "pro", time.Time{})
		g, err := w.keys.Account(t.Context(), "gone")
		if err != nil {
			t.Fatal(err)
		}
		u := g.Update()
		u.State = auth.AccountClosed
		if _, err := w.keys.UpdateAccount(t.Context(), u); err != nil {
			t.Fatal(err)
		}
		grant := driver.Adjustment{Account: "acme", Request: driver.RequestID{1}, Part: driver.PartGrants, Amount: 250,
			Now: start, Period: billing.PeriodAt(start, billing.Monthly, start), Allowance: 1000}
		if _, err := w.ledger.Adjust(t.Context(), grant); err != nil {
			t.Fatal(err)
		}
		renewal := billing.PeriodAt(start, billing.Monthly, start).End
		first, next := billing.PeriodAt(start, billing.Monthly, start), billing.PeriodAt(start, billing.Monthly, renewal)
		// Calls of the first period and of the next, which an instance without the
		// sweep would send period.renewed for (with their balance), send nothing.
		time.Sleep(time.Hour)
		d1.Observe(t.Context(), &event.Call{At: time.Now(), Account: "acme", Plan: "pro", Settlement: event.Settled,
			Balance: event.Balance{Remaining: 1200, Used: 50, Allowance: 1000, PeriodStart: first.Start, PeriodEnd: first.End}})
		time.Sleep(time.Until(renewal) - time.Second)
		d1.Observe(t.Context(), &event.Call{At: time.Now(), Account: "acme", Plan: "pro", Settlement: event.Settled,
			Balance: event.Balance{Remaining: 7, Allowance: 1000, PeriodStart: next.Start, PeriodEnd: next.End}})
		time.Sleep(2 * interval)
		synctest.Wait()

		ms, enqueued := w.sent(t, webhook.PeriodRenewed)
		if len(ms) != 1 {
			t.Fatalf("%d period.renewed, want 1 (acme's)", len(ms))
		}
		d, ts := data[webhook.PeriodRenewedData](t, ms[0])
		want := webhook.PeriodRenewedData{Common: webhook.Common{ID: webhook.DerivedID(webhook.PeriodRenewed, "acme", renewal.Format(time.RFC3339)),
			Account: "acme"}, Plan: "pro", Allowance: 1000, Remaining: 1250, PeriodStart: next.Start, PeriodEnd: next.End}
		if !d.PeriodStart.Equal(want.PeriodStart) || !d.PeriodEnd.Equal(want.PeriodEnd) {
			t.Errorf("period.renewed of %v to %v, want %v to %v", d.PeriodStart, d.PeriodEnd, want.PeriodStart, want.PeriodEnd)
		}
		d.PeriodStart, d.PeriodEnd, want.PeriodStart, want.PeriodEnd = time.Time{}, time.Time{}, time.Time{}, time.Time{}
		if d != want {
			t.Errorf("period.renewed: %+v, want %+v", d, want)
		}
		if !ts.Equal(renewal) {
			t.Errorf("period.renewed's timestamp %v, want the renewal %v", ts, renewal)
		}
		if late := enqueued[0].Sub(renewal); late < 0 || late > interval {
			t.Errorf("period.renewed enqueued %v after the renewal, want within the sweep interval %v", late, interval)
		}
		if n := w.toldOf(webhook.PeriodRenewed); n != 1 {
			t.Errorf("the instances' subscribers were told of %d period.renewed, want 1", n)
		}
	})
}

// TestSweepOptions: the sweeps' options that NewDispatcher refuses.
func TestSweepOptions(t *testing.T) {
	s := memory.NewWebhookStore()
	plans, _ := billing.NewPlans(billing.Plan{Name: "pro", Credits: 1})
	tests := []struct {
		name string
		opts webhook.DispatcherOptions
		want string
	}{
		{"a key store that lists no expiries", webhook.DispatcherOptions{Keys: noExpiries{memory.NewKeyStore()}}, "auth.KeyExpiries"},
		{"a ledger without keys", webhook.DispatcherOptions{Ledger: memory.NewLedger(nil), Plans: plans}, "without Keys"},
		{"a ledger without plans", webhook.DispatcherOptions{Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil)}, "without Plans"},
		{"a negative interval", webhook.DispatcherOptions{SweepInterval: -time.Second}, "negative"},
		{"a negative batch", webhook.DispatcherOptions{RenewalBatch: -1}, "negative"},
	}
	for _, tt := range tests {
		_, err := webhook.NewDispatcher(s, &tt.opts)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: NewDispatcher: %v, want an error that says %q", tt.name, err, tt.want)
		}
	}
}

// noExpiries is a key store that does not list the keys that expire.
type noExpiries struct{ auth.KeyStore }

// failingExpiries is a key store whose listing of expiries fails while failing is set.
type failingExpiries struct {
	*memory.KeyStore
	mu      sync.Mutex
	failing bool
}

func (f *failingExpiries) ExpiringKeys(ctx context.Context, q auth.ExpiryQuery) (auth.ExpiryPage, error) {
	f.mu.Lock()
	failing := f.failing
	f.mu.Unlock()
	if failing {
		return auth.ExpiryPage{}, fmt.Errorf("the key store does not answer")
	}
	return f.KeyStore.ExpiringKeys(ctx, q)
}

// TestSweepFailureRetried: a sweep that fails records nothing and gives its claim
// back: the next sweep, at once, does its work again.
func TestSweepFailureRetried(t *testing.T) {
	w := newSweepWorld(t)
	keys := &failingExpiries{KeyStore: w.keys}
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	now := start
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	d, err := webhook.NewDispatcher(w.hooks, &webhook.DispatcherOptions{Keys: keys, Now: clock,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	w.account(t, "acme", "pro", time.Time{})
	w.key(t, "acme", "key_ci", start.Add(time.Hour))
	mu.Lock()
	now = start.Add(2 * time.Hour)
	mu.Unlock()
	keys.failing = true
	if _, err := d.Sweep(t.Context()); err == nil || !strings.Contains(err.Error(), "does not answer") {
		t.Fatalf("Sweep with a failing key store: %v", err)
	}
	keys.failing = false
	if n, err := d.Sweep(t.Context()); err != nil || n != 1 {
		t.Fatalf("Sweep after the failure: %d, %v; want the key.expired sent", n, err)
	}
	if ms, _ := w.sent(t, webhook.KeyExpired); len(ms) != 1 {
		t.Errorf("%d key.expired, want 1", len(ms))
	}
}
