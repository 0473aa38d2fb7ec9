package tollgate_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/event"
)

// events is an observer that keeps copies of what it is told.
type events struct {
	mu  sync.Mutex
	got []event.Event
}

func (o *events) Observe(_ context.Context, e event.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch e := e.(type) {
	case *event.Call:
		c := *e
		c.APIs = slices.Clone(e.APIs)
		o.got = append(o.got, &c)
	case *event.Refusal:
		r := *e
		r.APIs = slices.Clone(e.APIs)
		o.got = append(o.got, &r)
	case *event.Change:
		c := *e
		o.got = append(o.got, &c)
	default:
		o.got = append(o.got, e)
	}
}

// take returns what the observer was told since the last take.
func (o *events) take() []event.Event {
	o.mu.Lock()
	defer o.mu.Unlock()
	got := o.got
	o.got = nil
	return got
}

// TestChangeEvents checks that every change made through the manager is published on
// the service's events once stored, before the method returns, with its kind, account,
// key and actor, that a change that fails is not, and that canceling a subscription
// stops it, even from inside the observer.
func TestChangeEvents(t *testing.T) {
	ctx := accounts.WithActor(context.Background(), event.Actor{ID: "operator:ann"})
	h := newHarness(t, harnessOptions{})
	obs := &events{}
	cancel := h.svc.Events().Subscribe(obs) // every kind
	info, err := h.mgr.Account(ctx, "acct")
	if err != nil {
		t.Fatal(err)
	}
	primary := info.Keys[0].ID

	sub, _, err := h.mgr.CreateKey(ctx, "acct", accounts.NewKey{Name: "sub"})
	if err != nil {
		t.Fatal(err)
	}
	name := "renamed"
	steps := []struct {
		name string
		do   func() error
		want event.Change // its ID and At are checked apart
	}{
		{"create account", func() error {
			_, _, _, err := h.mgr.CreateAccount(ctx, accounts.Spec{ID: "other", Plan: "p"})
			return err
		}, event.Change{Type: event.AccountCreated, Account: "other", Plan: "p", Credits: 100}},
		{"rotate", func() error { _, _, err := h.mgr.RotateKey(ctx, primary); return err },
			event.Change{Type: event.KeyRotated, Account: "acct", Key: primary}},
		{"update", func() error {
			_, err := h.mgr.UpdateKey(ctx, sub.ID, accounts.KeyChange{Name: &name})
			return err
		}, event.Change{Type: event.KeyUpdated, Account: "acct", Key: sub.ID, OldName: "sub", Name: "renamed"}},
		{"adjust", func() error { _, err := h.mgr.AdjustCredits(ctx, "acct", 5, "goodwill", nil); return err },
			event.Change{Type: event.CreditsAdjusted, Account: "acct", Credits: 5, Reason: "goodwill"}},
		{"revoke", func() error { _, err := h.mgr.RevokeKey(ctx, sub.ID); return err },
			event.Change{Type: event.KeyRevoked, Account: "acct", Key: sub.ID}},
	}
	obs.take() // the key's creation
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		got := obs.take()
		if len(got) != 1 {
			t.Fatalf("%s: published %d events, want 1", st.name, len(got))
		}
		c, ok := got[0].(*event.Change)
		if !ok {
			t.Fatalf("%s: published a %T", st.name, got[0])
		}
		if c.ID == "" || c.At.IsZero() || c.Actor.ID != "operator:ann" {
			t.Errorf("%s: id %q, at %v, actor %q", st.name, c.ID, c.At, c.Actor.ID)
		}
		if st.want.Type == event.AccountCreated {
			st.want.Key = c.Key // generated
		}
		c.ID, c.At, c.Actor = "", st.want.At, st.want.Actor
		if c.Type != st.want.Type || c.Account != st.want.Account || c.Key != st.want.Key || c.Plan != st.want.Plan ||
			c.Credits != st.want.Credits || c.Reason != st.want.Reason || c.OldName != st.want.OldName || c.Name != st.want.Name {
			t.Errorf("%s: published %+v, want %+v", st.name, *c, st.want)
		}
	}

	// Changes that fail publish nothing; revoking a revoked key changes nothing.
	if _, err := h.mgr.RevokeKey(ctx, "key_missing"); tollgate.CodeOf(err) != tollgate.CodeNotFound {
		t.Fatalf("revoking a missing key: %v", err)
	}
	if _, _, err := h.mgr.RotateKey(ctx, "key_missing"); tollgate.CodeOf(err) != tollgate.CodeNotFound {
		t.Fatalf("rotating a missing key: %v", err)
	}
	if _, err := h.mgr.RevokeKey(ctx, sub.ID); err != nil {
		t.Fatal(err)
	}
	if got := obs.take(); len(got) != 0 {
		t.Fatalf("failed or empty changes published %v", got)
	}

	// An observer may cancel its own subscription while it is told.
	var selfCancel func()
	calls := 0
	selfCancel = h.svc.Events().Subscribe(event.ObserverFunc(func(context.Context, event.Event) { calls++; selfCancel() }), event.KeyRotated)
	cancel()
	for range 2 {
		if _, _, err := h.mgr.RotateKey(ctx, primary); err != nil {
			t.Fatal(err)
		}
	}
	if got := obs.take(); len(got) != 0 {
		t.Fatalf("a canceled observer was told %v", got)
	}
	if calls != 1 {
		t.Fatalf("the self-canceling observer ran %d times, want 1", calls)
	}
}

// TestCallEvents checks the events of calls: what ran, with each API's outcome and
// credits and the call's settlement, and what was refused, with its code, naming only
// the catalog's APIs.
func TestCallEvents(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, harnessOptions{})
	obs := &events{}
	h.svc.Events().Subscribe(obs, event.CallFinished, event.CallRefused)

	if r := h.call(ctx, []string{"ok", "fail", "reject"}); r.Err != nil {
		t.Fatal(r.Err)
	}
	got := obs.take()
	if len(got) != 1 {
		t.Fatalf("a call published %d events, want 1", len(got))
	}
	c := got[0].(*event.Call)
	if c.Account != "acct" || c.Key == "" || c.Channel != "rest" || c.Settlement != event.Settled || c.At.IsZero() {
		t.Fatalf("call event %+v", *c)
	}
	want := []event.APIResult{{API: "ok", Credits: 1}, {API: "fail", Code: "api_failed"}, {API: "reject", Code: "rejected", Credits: 4}}
	for i := range c.APIs {
		c.APIs[i].Duration = 0
	}
	if !slices.Equal(c.APIs, want) || c.Charged != 5 || c.Balance.Remaining != 95 {
		t.Fatalf("call event APIs %+v, charged %d, remaining %d; want %+v, 5, 95", c.APIs, c.Charged, c.Balance.Remaining, want)
	}

	// A refusal names the catalog's APIs, not made-up ids.
	r := h.svc.Call(ctx, h.caller(), "no-such-api", nil)
	if tollgate.CodeOf(r.Err) != tollgate.CodeNotFound {
		t.Fatalf("calling a made-up id: %v", r.Err)
	}
	if got := obs.take(); len(got) != 0 {
		t.Fatalf("a made-up id was published: %v", got)
	}
	if _, err := h.mgr.AdjustCredits(ctx, "acct", -94, "test", nil); err != nil {
		t.Fatal(err)
	}
	r = h.call(ctx, []string{"two"})
	if tollgate.CodeOf(r.Err) != tollgate.CodeCreditsExhausted {
		t.Fatalf("a call beyond the credits: %v", r.Err)
	}
	got = obs.take()
	if len(got) != 1 {
		t.Fatalf("a refusal published %d events, want 1", len(got))
	}
	ref := got[0].(*event.Refusal)
	if ref.Code != "credits_exhausted" || !slices.Equal(ref.APIs, []string{"two"}) || ref.Account != "acct" || ref.Channel != "rest" {
		t.Fatalf("refusal event %+v", *ref)
	}
}

// TestCallEventSteps checks the steps of a call of one API on the default clock, whose
// steps are timed on the monotonic clock alone: its run lasts at least as long as its
// handler was held, its API's duration is its run's, and no step is negative.
func TestCallEventSteps(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, harnessOptions{})
	obs := &events{}
	h.svc.Events().Subscribe(obs, event.CallFinished)

	done := make(chan tollgate.Reply)
	go func() { done <- h.svc.Call(ctx, h.caller(), "block", nil) }()
	for h.ran.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	const held = 5 * time.Millisecond
	time.Sleep(held)
	close(h.release)
	if r := <-done; r.Err != nil {
		t.Fatal(r.Err)
	}
	got := obs.take()
	if len(got) != 1 {
		t.Fatalf("a call published %d events, want 1", len(got))
	}
	c := got[0].(*event.Call)
	if c.Run < held || c.Admission < 0 || c.Settle < 0 || len(c.APIs) != 1 || c.APIs[0].Duration != c.Run {
		t.Errorf("admission %v, run %v (the handler held %v), settlement %v; APIs %+v", c.Admission, c.Run, held, c.Settle, c.APIs)
	}
}
