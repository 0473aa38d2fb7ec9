package accounts_test

import (
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// cycleManager returns a manager on ledger with monthly basic and pro plans (100 and
// 1000 credits) and a yearly team plan (12000), its clock, and an account "acct" on basic created at
// 2030-01-15 12:00 (its periods begin on the 15th at noon).
func cycleManager(t *testing.T, ledger driver.Ledger) (*accounts.Manager, *testenv.Clock) {
	t.Helper()
	clock := testenv.NewClock(time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC))
	mgr, _ := plansManagerOn(t, memory.NewKeyStore(), ledger, clock, billing.Plan{Name: "team", Credits: 12000, Renews: billing.Yearly})
	return mgr, clock
}

// TestChangePlanCycleAfterLedgerRenewed: a change now to a plan of another cycle, on an
// instance whose clock is a second behind that of an instance which has already renewed
// the balance into the next period (or made a moment before the renewal, while a call
// renewed it), begins the new plan's period after the one the ledger holds: the ledger
// renews to the new plan's allowance, rather than keep the old plan's allowance for
// the whole of the new plan's first year.
func TestChangePlanCycleAfterLedgerRenewed(t *testing.T) {
	ledger := memory.NewLedger(nil)
	mgr, clock := cycleManager(t, ledger)
	renewal := time.Date(2030, 2, 15, 12, 0, 0, 0, time.UTC)
	next := driver.Period{Start: renewal, End: renewal.AddDate(0, 1, 0)}
	if _, err := ledger.Balance(t.Context(), "acct", renewal, next, 100); err != nil {
		t.Fatal(err)
	}
	clock.Set(renewal.Add(-time.Second))
	c, err := mgr.ChangePlan(t.Context(), "acct", "team", accounts.EffectiveNow)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Account.BillingAnchor.After(renewal) {
		t.Errorf("the new billing anchor is %s, not after the start of the period the ledger holds, %s", c.Account.BillingAnchor, renewal)
	}
	clock.Set(renewal.Add(time.Hour))
	info, err := mgr.Account(t.Context(), "acct")
	if err != nil {
		t.Fatal(err)
	}
	want := billing.PeriodAt(c.Account.BillingAnchor, billing.Yearly, clock.Now())
	if info.Balance.Remaining != 12000 || info.Balance.Period != want {
		t.Errorf("an hour later, on team: %d credits in %v, want team's 12000 in %v", info.Balance.Remaining, info.Balance.Period, want)
	}
}

// TestChangePlanAtRenewalAfterLedgerRenewed: a change at the renewal, on an instance
// whose clock is a second behind that of an instance which has already renewed the
// balance into the next period on the old plan, gives the new plan's allowance from the
// renewal on: to the period the ledger holds, for a plan of the same cycle; for one of
// another cycle, by a renewal into the new plan's first period, which begins a second
// later.
func TestChangePlanAtRenewalAfterLedgerRenewed(t *testing.T) {
	for _, c := range []struct {
		plan    string
		credits int64
		renews  billing.Cycle
	}{{"pro", 1000, billing.Monthly}, {"team", 12000, billing.Yearly}} {
		t.Run(c.plan, func(t *testing.T) {
			ledger := memory.NewLedger(nil)
			mgr, clock := cycleManager(t, ledger)
			renewal := time.Date(2030, 2, 15, 12, 0, 0, 0, time.UTC)
			next := driver.Period{Start: renewal, End: renewal.AddDate(0, 1, 0)}
			if _, err := ledger.Reserve(t.Context(), driver.Reservation{Account: "acct", Request: driver.RequestID{1}, Amount: 30,
				Period: next, Allowance: 100, Now: renewal, Expires: renewal.Add(time.Minute)}); err != nil {
				t.Fatal(err)
			}
			if _, err := ledger.Settle(t.Context(), driver.Settlement{Account: "acct", Request: driver.RequestID{1}, Period: next,
				Allowance: 100, Now: renewal}); err != nil {
				t.Fatal(err)
			}
			clock.Set(renewal.Add(-time.Second))
			if _, err := mgr.ChangePlan(t.Context(), "acct", c.plan, accounts.EffectiveRenewal); err != nil {
				t.Fatal(err)
			}
			// The same change again changes nothing, and adds nothing.
			if again, err := mgr.ChangePlan(t.Context(), "acct", c.plan, accounts.EffectiveRenewal); err != nil || again.Changed {
				t.Errorf("the same change again: changed %v, %v; want nothing changed", again.Changed, err)
			}
			for _, at := range []time.Time{renewal.Add(time.Hour), renewal.AddDate(0, 1, 0).Add(time.Hour)} {
				clock.Set(at)
				info, err := mgr.Account(t.Context(), "acct")
				if err != nil {
					t.Fatal(err)
				}
				want := c.credits
				if c.renews == billing.Monthly && at.Before(next.End) {
					want -= 30 // spent in the period the ledger held, on basic
				}
				if info.Plan.Name != c.plan || info.Balance.Remaining != want {
					t.Errorf("at %s: %s with %d credits, want %s with %d", at, info.Plan.Name, info.Balance.Remaining, c.plan, want)
				}
				if c.renews == billing.Yearly && !info.Balance.Period.Start.Equal(renewal.Add(time.Second)) {
					t.Errorf("at %s: the period is %v, want the year from %s", at, info.Balance.Period, renewal.Add(time.Second))
				}
			}
		})
	}
}

// TestChangePlanCycleRenewsAtOnce: a change of cycle renews the balance into the new
// plan's first period at once, even when that period begins a moment after the
// manager's clock (its start must follow the start of the period the ledger holds):
// so a change made right after, between plans of the same cycle, adds the difference
// to the new plan's allowance, not to what was left of the old one's.
func TestChangePlanCycleRenewsAtOnce(t *testing.T) {
	ledger := memory.NewLedger(nil)
	mgr, clock := cycleManager(t, ledger)
	now := clock.Now()
	info, err := mgr.Account(t.Context(), "acct")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ledger.Reserve(t.Context(), driver.Reservation{Account: "acct", Request: driver.RequestID{1}, Amount: 10,
		Period: info.Balance.Period, Allowance: 100, Now: now, Expires: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		plan      string
		remaining int64
	}{
		{"pro", 990},    // 90 left of basic, and the difference
		{"team", 12000}, // a new period, the creation's second: it begins a second later
		{"basic", 100},  // a new period again, a second later still
		{"pro", 1000},   // the difference added to basic's 100
	} {
		ch, err := mgr.ChangePlan(t.Context(), "acct", c.plan, accounts.EffectiveNow)
		if err != nil {
			t.Fatal(err)
		}
		if ch.Balance.Remaining != c.remaining {
			t.Errorf("after the change to %s: %d credits, want %d", c.plan, ch.Balance.Remaining, c.remaining)
		}
	}
}
