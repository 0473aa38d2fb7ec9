package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
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
	"github.com/tollgate-dev/tollgate/store"
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

// failingHooks is a webhook store whose Enqueue fails the messages of fail with their
// error; it counts the Enqueue of each message.
type failingHooks struct {
	webhook.Store
	mu       sync.Mutex
	fail     map[string]error
	enqueued map[string]int
}

func (f *failingHooks) Enqueue(ctx context.Context, m webhook.Message, eps []string, now time.Time) (bool, []string, error) {
	f.mu.Lock()
	f.enqueued[m.ID]++
	err := f.fail[m.ID]
	f.mu.Unlock()
	if err != nil {
		return false, nil, err
	}
	return f.Store.Enqueue(ctx, m, eps, now)
}

func (f *failingHooks) set(id string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[id] = err
}

func (f *failingHooks) count(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.enqueued[id]
}

// logBuffer keeps what a logger writes.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

// TestSweepKeyFailures: a key whose key.expired fails stops the sweep of the keys no
// further than it. One the store refuses as not valid is passed over, logged once,
// and never tried again: the keys after it are sent. One that fails otherwise stops
// the sweep there, keeping what was done before it: the next sweep, by another
// instance, goes on from it and enqueues none of the keys before it again, and the
// keys after it are sent once it passes.
func TestSweepKeyFailures(t *testing.T) {
	tests := []struct {
		name  string
		fail  int // the key, 1 to 5, whose key.expired fails
		err   error
		heals bool // the failure passes after two sweeps
		want  string
	}{
		{"refused", 2, fmt.Errorf("webhook: the message's account is too long: %w", store.ErrInvalid), false, ""},
		{"transient", 3, errors.New("the store does not answer"), true, "does not answer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newSweepWorld(t)
			hooks := &failingHooks{Store: w.hooks, fail: map[string]error{}, enqueued: map[string]int{}}
			start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
			var mu sync.Mutex
			now := start
			clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
			advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
			logs := &logBuffer{}
			// Two instances, which remember what each enqueued: the second shows what
			// the store's position, not an instance's memory, kept.
			var ds [2]*webhook.Dispatcher
			for i := range ds {
				var err error
				ds[i], err = webhook.NewDispatcher(hooks, &webhook.DispatcherOptions{Keys: w.keys, Now: clock,
					Logger: slog.New(slog.NewTextHandler(logs, nil))})
				if err != nil {
					t.Fatal(err)
				}
			}
			if _, err := ds[0].Sweep(t.Context()); err != nil {
				t.Fatal(err)
			}
			w.account(t, "acme", "pro", time.Time{})
			ids := []string{""} // the message ids of key.expired of keys 1 to 5
			for i := 1; i <= 5; i++ {
				at := start.Add(time.Duration(i) * time.Hour)
				k := w.key(t, "acme", fmt.Sprintf("key_%d", i), at)
				ids = append(ids, webhook.DerivedID(webhook.KeyExpired, k.ID, at.Format(time.RFC3339)))
			}
			hooks.set(ids[tt.fail], tt.err)
			advance(6 * time.Hour)
			for sweep := range 3 {
				if sweep == 2 && tt.heals {
					hooks.set(ids[tt.fail], nil)
				}
				_, err := ds[sweep%2].Sweep(t.Context())
				if wantErr := tt.want != "" && !(sweep == 2 && tt.heals); wantErr != (err != nil) || err != nil && !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("sweep %d: %v, want an error %v with %q", sweep+1, err, wantErr, tt.want)
				}
				for i := 1; i < tt.fail; i++ {
					if n := hooks.count(ids[i]); n != 1 {
						t.Errorf("sweep %d: key %d, before the failing one, enqueued %d times, want once", sweep+1, i, n)
					}
				}
				if n := hooks.count(ids[tt.fail+1]); tt.heals && sweep < 2 && n != 0 {
					t.Errorf("sweep %d: key %d, after the failing one, enqueued %d times before it passed", sweep+1, tt.fail+1, n)
				}
				advance(time.Minute)
			}
			ms, _ := w.sent(t, webhook.KeyExpired)
			var got []string
			for _, m := range ms {
				d, _ := data[webhook.KeyExpiredData](t, m)
				got = append(got, d.Key)
			}
			want := []string{"key_1", "key_2", "key_3", "key_4", "key_5"}
			if !tt.heals {
				want = slices.Delete(want, tt.fail-1, tt.fail)
			}
			if !slices.Equal(got, want) {
				t.Errorf("key.expired sent: %q, want %q", got, want)
			}
			if n, want := hooks.count(ids[tt.fail]), map[bool]int{false: 1, true: 3}[tt.heals]; n != want {
				t.Errorf("the failing key enqueued %d times, want %d", n, want)
			}
			if n, want := logs.count("passes over"), map[bool]int{false: 1, true: 0}[tt.heals]; n != want {
				t.Errorf("%d logs of a key passed over, want %d:\n%s", n, want, logs.b.String())
			}
		})
	}
}

// refusingLedger is a ledger that refuses to read the balance of one account.
type refusingLedger struct {
	webhook.Balances
	refuse string
}

func (r refusingLedger) Balance(ctx context.Context, account string, now time.Time, p driver.Period, allowance int64) (driver.Balance, error) {
	if account == r.refuse {
		return driver.Balance{}, fmt.Errorf("ledger: the account id is not valid: %w", store.ErrInvalid)
	}
	return r.Balances.Balance(ctx, account, now, p, allowance)
}

// TestSweepRenewalPassesOverRefused: an account whose balance the ledger refuses to
// read as not valid is passed over, logged once: the accounts after it are sent
// period.renewed all the same.
func TestSweepRenewalPassesOverRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newSweepWorld(t)
		start := time.Now()
		logs := &logBuffer{}
		d, err := webhook.NewDispatcher(w.hooks, &webhook.DispatcherOptions{Keys: w.keys, Plans: w.plans,
			Ledger: refusingLedger{Balances: w.ledger, refuse: "acme2"}, SweepInterval: time.Hour,
			Logger: slog.New(slog.NewTextHandler(logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		stop := run(d)
		defer stop()
		for _, a := range []string{"acme1", "acme2", "acme3"} {
			w.account(t, a, "pro", time.Time{})
		}
		renewal := billing.PeriodAt(start, billing.Monthly, start).End
		time.Sleep(time.Until(renewal) + 3*time.Hour)
		synctest.Wait()
		ms, _ := w.sent(t, webhook.PeriodRenewed)
		var got []string
		for _, m := range ms {
			d, _ := data[webhook.PeriodRenewedData](t, m)
			got = append(got, d.Account)
		}
		if want := []string{"acme1", "acme3"}; !slices.Equal(got, want) {
			t.Errorf("period.renewed sent to %q, want %q", got, want)
		}
		if n := logs.count("passes over"); n != 1 {
			t.Errorf("%d logs of an account passed over, want 1:\n%s", n, logs.b.String())
		}
	})
}
