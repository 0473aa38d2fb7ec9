package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/webhook"
)

// SweepStores are the stores of the webhooks' sweeps (webhook.Dispatcher.Sweep),
// which every instance shares: the key store, which must list the keys that expire
// (auth.KeyExpiries), the ledger, and the webhook store.
type SweepStores struct {
	Keys     auth.KeyStore
	Ledger   driver.Ledger
	Webhooks webhook.Store
}

// TestWebhookSweeps checks that the webhooks' sweeps, run by two instances on the
// stores newStores returns (empty, as every suite's), send key.expired and
// period.renewed once for each cause, as package webhook documents: the stores' claims
// of the sweeps, their listing of expiries and their ledger together.
func TestWebhookSweeps(t *testing.T, newStores func(t *testing.T) SweepStores) {
	t.Helper()
	run(t, newStores, webhookSweepRows)
}

var webhookSweepRows = []behaviour[SweepStores]{
	{"KeyExpiredOnce",
		"A key that expires unused is sent key.expired once, at its expiry, by one of two instances that sweep at once; a key revoked before its expiry is sent none; a key whose expiry moved is sent one, at the new expiry; a primary key expires with its account.",
		swKeyExpiredOnce},
	{"PeriodRenewedOnce",
		"An account whose period renews, without a call, is sent period.renewed once, by one of two instances that sweep at once, with the new period's allowance and what carried over; a closed account and an account in its first period are sent none.",
		swPeriodRenewedOnce},
}

// sweepClock is the instances' clock, which the test moves.
type sweepClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *sweepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *sweepClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// sweepPlans are the plans of the rows.
func sweepPlans(t *testing.T) *billing.Plans {
	t.Helper()
	plans, err := billing.NewPlans(billing.Plan{Name: "pro", Credits: 1000, RatePerMinute: 60},
		billing.Plan{Name: "max", Credits: 5000, RatePerMinute: 600, Renews: billing.Yearly})
	must(t, "billing.NewPlans", err)
	return plans
}

// sweepers returns two instances' dispatchers of s, on clock, and the operator's
// endpoint, which takes every event.
func sweepers(t *testing.T, s SweepStores, clock *sweepClock, renewals bool) ([2]*webhook.Dispatcher, webhook.Endpoint) {
	t.Helper()
	ep, err := s.Webhooks.CreateEndpoint(t.Context(), webhook.Endpoint{ID: "ep_" + newIDs().prefix, URL: "https://hooks.example.com/",
		Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", Created: t0})
	must(t, "CreateEndpoint", err)
	var ds [2]*webhook.Dispatcher
	for i := range ds {
		o := webhook.DispatcherOptions{Keys: s.Keys, Plans: sweepPlans(t), Now: clock.Now}
		if renewals {
			o.Ledger = s.Ledger
		}
		ds[i], err = webhook.NewDispatcher(s.Webhooks, &o)
		must(t, "NewDispatcher", err)
	}
	return ds, ep
}

// sweepAll sweeps with every dispatcher at once, at the clock's instant.
func sweepAll(t *testing.T, ds [2]*webhook.Dispatcher) {
	t.Helper()
	var wg sync.WaitGroup
	for _, d := range ds {
		wg.Go(func() {
			if _, err := d.Sweep(t.Context()); err != nil {
				t.Errorf("Sweep: %v", err)
			}
		})
	}
	wg.Wait()
	// And once more each, one after the other: nothing new.
	for _, d := range ds {
		if _, err := d.Sweep(t.Context()); err != nil {
			t.Errorf("Sweep: %v", err)
		}
	}
}

// swept returns the messages of type typ in the outbox for ep, oldest first.
func swept(t *testing.T, s webhook.Store, ep webhook.Endpoint, typ string) []webhook.Message {
	t.Helper()
	page, err := s.Deliveries(t.Context(), ep.ID, webhook.Query{Limit: webhook.MaxLimit})
	must(t, "Deliveries", err)
	var ms []webhook.Message
	for _, d := range slices.Backward(page.Deliveries) {
		if d.Message.Type == typ {
			ms = append(ms, d.Message)
		}
	}
	return ms
}

// bodyData returns a message's data and timestamp.
func bodyData[D any](t *testing.T, m webhook.Message) (D, time.Time) {
	t.Helper()
	var body struct {
		Timestamp time.Time `json:"timestamp"`
		Data      D         `json:"data"`
	}
	must(t, "decoding the body", json.Unmarshal(m.Body, &body))
	return body.Data, body.Timestamp
}

// enqueuedAnew returns how many messages the dispatchers enqueued anew.
func enqueuedAnew(ds [2]*webhook.Dispatcher) int64 {
	return ds[0].Stats().Enqueued + ds[1].Stats().Enqueued
}

func swKeyExpiredOnce(t *testing.T, s SweepStores) {
	n, ctx, clock := newIDs(), t.Context(), &sweepClock{now: t0}
	h := func(d float64) time.Time { return t0.Add(time.Duration(d * float64(time.Hour))) }
	ds, ep := sweepers(t, s, clock, false)
	sweepAll(t, ds) // the first sweeps start from t0

	a, _ := expiringAccount(t, s.Keys, n, "a", time.Time{}, time.Time{})
	unused := expiringKey(t, s.Keys, n, a, "unused", h(1))
	revoked := expiringKey(t, s.Keys, n, a, "revoked", h(1))
	moved := expiringKey(t, s.Keys, n, a, "moved", h(2))
	_, trial := expiringAccount(t, s.Keys, n, "trial", h(1.5), time.Time{})
	clock.set(h(0.5))
	sweepAll(t, ds)
	_, err := s.Keys.RevokeKey(ctx, revoked.ID, auth.AnyRevision, h(0.5))
	must(t, "RevokeKey", err)
	_, err = s.Keys.UpdateKey(ctx, auth.KeyUpdate{ID: moved.ID, Name: moved.Name, Restrictions: expiringIn(t, h(3)), Revision: moved.Revision})
	must(t, "UpdateKey", err)
	var want []string
	for _, step := range []struct {
		at   time.Time
		sent []string
	}{
		{h(1), []string{unused.ID + "@1h0m0s"}},
		{h(1.75), []string{trial.ID + "@1h30m0s"}},
		{h(2.5), nil},
		{h(4), []string{moved.ID + "@3h0m0s"}},
		{h(8), nil},
	} {
		clock.set(step.at)
		sweepAll(t, ds)
		want = append(want, step.sent...)
		var got []string
		for _, m := range swept(t, s.Webhooks, ep, webhook.KeyExpired) {
			d, ts := bodyData[webhook.KeyExpiredData](t, m)
			got = append(got, fmt.Sprintf("%s@%s", d.Key, d.ExpiredAt.Sub(t0)))
			if !ts.Equal(d.ExpiredAt) || d.Account == "" {
				t.Errorf("key.expired of %s: timestamp %v, account %q; want the expiry %v and the key's account", d.Key, ts, d.Account, d.ExpiredAt)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("at %v: key.expired sent %q, want %q", step.at.Sub(t0), got, want)
		}
	}
	if got := enqueuedAnew(ds); got != int64(len(want)) {
		t.Errorf("the two instances enqueued %d messages anew, want %d: each once across them", got, len(want))
	}
}

func swPeriodRenewedOnce(t *testing.T, s SweepStores) {
	n, ctx, clock := newIDs(), t.Context(), &sweepClock{now: t0}
	ds, ep := sweepers(t, s, clock, true)
	sweepAll(t, ds)
	open := func(label, plan string) auth.Account {
		a, _ := plainAccount(n, label)
		a.Plan, a.BillingAnchor = plan, t0
		k := auth.Key{ID: n.id(label + "-primary"), AccountID: a.ID, Name: "primary", Primary: true, Hash: newHash(), CreatedAt: t0}
		must(t, "CreateAccount", s.Keys.CreateAccount(ctx, a, k))
		p, _ := sweepPlans(t).Lookup(plan)
		must(t, "Open", s.Ledger.Open(ctx, driver.Opening{Account: a.ID, Balance: p.Credits, Allowance: p.Credits,
			Period: billing.PeriodAt(t0, p.Renews, t0)}))
		return a
	}
	acme := open("acme", "pro")
	open("yearly", "max")
	gone := open("gone", "pro")
	g, err := s.Keys.Account(ctx, gone.ID)
	must(t, "Account", err)
	u := g.Update()
	u.State = auth.AccountClosed
	_, err = s.Keys.UpdateAccount(ctx, u)
	must(t, "UpdateAccount", err)
	first := billing.PeriodAt(t0, billing.Monthly, t0)
	_, err = s.Ledger.Adjust(ctx, driver.Adjustment{Account: acme.ID, Request: newRequest(), Part: driver.PartGrants,
		Amount: 250, Now: at(time.Hour), Period: first, Allowance: 1000})
	must(t, "Adjust", err)
	clock.set(first.End.Add(-time.Minute))
	sweepAll(t, ds)
	if ms := swept(t, s.Webhooks, ep, webhook.PeriodRenewed); len(ms) != 0 {
		t.Fatalf("%d period.renewed before the renewal, want none", len(ms))
	}
	next := billing.PeriodAt(t0, billing.Monthly, first.End)
	for _, step := range []time.Time{first.End.Add(10 * time.Second), first.End.Add(time.Hour), next.End.Add(-time.Hour)} {
		clock.set(step)
		sweepAll(t, ds)
	}
	ms := swept(t, s.Webhooks, ep, webhook.PeriodRenewed)
	if len(ms) != 1 {
		t.Fatalf("%d period.renewed, want 1 (of %s)", len(ms), acme.ID)
	}
	d, ts := bodyData[webhook.PeriodRenewedData](t, ms[0])
	if d.Account != acme.ID || d.Plan != "pro" || d.Allowance != 1000 || d.Remaining != 1250 ||
		!d.PeriodStart.Equal(next.Start) || !d.PeriodEnd.Equal(next.End) || !ts.Equal(next.Start) ||
		d.ID != webhook.DerivedID(webhook.PeriodRenewed, acme.ID, next.Start.UTC().Format(time.RFC3339)) {
		t.Errorf("period.renewed: %+v at %v; want %s's, pro, 1000 renewed and 1250 in all, from %v to %v", d, ts, acme.ID, next.Start, next.End)
	}
	if got := enqueuedAnew(ds); got != 1 {
		t.Errorf("the two instances enqueued %d messages anew, want 1", got)
	}
}
