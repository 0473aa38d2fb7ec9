package accounts_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/event"
)

// TestCreditsAdjustedCarriesExpiry: the event of a grant says when it lapses, so that
// an observer (the webhooks' credits.granted) need not read the ledger.
func TestCreditsAdjustedCarriesExpiry(t *testing.T) {
	l := newLifecycle(t, accounts.Options{})
	var mu sync.Mutex
	var got []event.Change
	l.svc.Events().Subscribe(event.ObserverFunc(func(_ context.Context, e event.Event) {
		mu.Lock()
		got = append(got, *e.(*event.Change))
		mu.Unlock()
	}), event.CreditsAdjusted)

	lapses := lifecycleT0.Add(30 * 24 * time.Hour)
	for _, tc := range []struct {
		amount  int64
		opts    *accounts.CreditOptions
		expires time.Time
	}{
		{50, &accounts.CreditOptions{ExpiresAt: lapses}, lapses},
		{50, nil, time.Time{}},
		{-10, nil, time.Time{}},
	} {
		if _, err := l.mgr.AdjustCredits(t.Context(), "acct", tc.amount, "test", tc.opts); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		last := got[len(got)-1]
		mu.Unlock()
		if last.Credits != tc.amount || !last.Expires.Equal(tc.expires) {
			t.Errorf("AdjustCredits(%d, %+v) published %d credits expiring at %v, want %v", tc.amount, tc.opts, last.Credits, last.Expires, tc.expires)
		}
	}
}
