package accounts_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// hookLedger runs first once, before it passes the first change of the allowance on
// to its ledger: what another instance does while a change of plan is on its way to
// the ledger.
type hookLedger struct {
	driver.Ledger
	done  atomic.Bool
	first func(a driver.Adjustment)
}

func (l *hookLedger) Adjust(ctx context.Context, a driver.Adjustment) (driver.Balance, error) {
	if a.Part == driver.PartAllowance && l.done.CompareAndSwap(false, true) {
		l.first(a)
	}
	return l.Ledger.Adjust(ctx, a)
}

// TestChangePlanRacesRenewal: a change now made a second before the renewal, whose
// change of the allowance reaches the ledger after a call renewed the balance into the
// next period, leaves that period with the new plan's allowance, once: whether the
// call renewed it on the new plan (its record read after the change) or on the old one
// (read before).
func TestChangePlanRacesRenewal(t *testing.T) {
	renewal := time.Date(2030, 2, 15, 12, 0, 0, 0, time.UTC)
	next := driver.Period{Start: renewal, End: renewal.AddDate(0, 1, 0)}
	for _, c := range []struct {
		name    string
		renewed int64 // the allowance the call renews to
	}{{"renewed on the new plan", 1000}, {"renewed on the old plan", 100}} {
		t.Run(c.name, func(t *testing.T) {
			ledger := &hookLedger{Ledger: memory.NewLedger(nil)}
			clock := testenv.NewClock(time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC))
			mgr, _ := plansManagerOn(t, memory.NewKeyStore(), ledger, clock)
			ledger.first = func(driver.Adjustment) {
				if _, err := ledger.Balance(context.Background(), "acct", renewal, next, c.renewed); err != nil {
					t.Error(err)
				}
			}
			clock.Set(renewal.Add(-time.Second))
			if _, err := mgr.ChangePlan(t.Context(), "acct", "pro", accounts.EffectiveNow); err != nil {
				t.Fatal(err)
			}
			clock.Set(renewal.Add(time.Hour))
			info, err := mgr.Account(t.Context(), "acct")
			if err != nil {
				t.Fatal(err)
			}
			if info.Plan.Name != "pro" || info.Balance.Remaining != 1000 || info.Balance.Period != next {
				t.Errorf("in the next period: %s with %d credits in %v, want pro's 1000 in %v", info.Plan.Name, info.Balance.Remaining, info.Balance.Period, next)
			}
		})
	}
}

// TestChangePlansCommute: an upgrade and the downgrade that undoes it, made at once,
// whose changes of the allowance reach the ledger in the reverse order, leave the
// account with what the plan its record names explains: basic's allowance less what it
// spent, not pro's extra credits.
func TestChangePlansCommute(t *testing.T) {
	ledger := &hookLedger{Ledger: memory.NewLedger(nil)}
	mgr, _ := plansManager(t, memory.NewKeyStore(), ledger)
	info, err := mgr.Account(t.Context(), "acct")
	if err != nil {
		t.Fatal(err)
	}
	now := info.Balance.Period.Start.Add(time.Hour)
	spend := driver.Reservation{Account: "acct", Request: driver.RequestID{1}, Amount: 50, Period: info.Balance.Period, Allowance: 100,
		Now: now, Expires: now.Add(time.Hour)}
	if _, err := ledger.Reserve(t.Context(), spend); err != nil {
		t.Fatal(err)
	}
	if _, err := ledger.Settle(t.Context(), driver.Settlement{Account: "acct", Request: spend.Request, Period: spend.Period, Allowance: 100, Now: now}); err != nil {
		t.Fatal(err)
	}

	held, release := make(chan struct{}), make(chan struct{})
	ledger.first = func(driver.Adjustment) {
		close(held)
		<-release
	}
	upgraded := make(chan error, 1)
	go func() {
		_, err := mgr.ChangePlan(context.Background(), "acct", "pro", accounts.EffectiveNow)
		upgraded <- err
	}()
	<-held // the upgrade is stored; its change of the allowance waits
	if _, err := mgr.ChangePlan(t.Context(), "acct", "basic", accounts.EffectiveNow); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-upgraded; err != nil {
		t.Fatal(err)
	}

	info, err = mgr.Account(t.Context(), "acct")
	if err != nil {
		t.Fatal(err)
	}
	if info.Account.Plan != "basic" || info.Balance.Remaining != 50 || info.Balance.Used != 50 {
		t.Errorf("after the two changes: %s with %d credits, %d used; want basic with 50 (100 less the 50 spent), 50 used",
			info.Account.Plan, info.Balance.Remaining, info.Balance.Used)
	}
}
