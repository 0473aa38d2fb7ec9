package accounts

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
)

// Billing periods and plans of accounts.

// minAnchor is the earliest billing anchor an account may be given.
var minAnchor = time.Date(1970, time.January, 1, 0, 0, 0, 0, time.UTC)

// billingAnchor returns the billing anchor of an account created at now: anchor, or now
// when anchor is nil, in UTC and to the second (so that every store keeps it exactly,
// and every instance counts the same periods from it). An anchor before 1970 or more
// than a year after now is CodeInvalidInput.
func billingAnchor(anchor *time.Time, now time.Time) (time.Time, error) {
	if anchor == nil {
		return now.UTC().Truncate(time.Second), nil
	}
	a := anchor.UTC().Truncate(time.Second)
	if a.Before(minAnchor) || a.After(now.AddDate(1, 0, 0)) {
		return time.Time{}, newError(tollgate.CodeInvalidInput, fmt.Sprintf(
			"billing_anchor %s is out of range: give an instant from 1970-01-01T00:00:00Z to a year from now, such as the first of a month, or none for the creation time",
			anchor.Format(time.RFC3339)), nil)
	}
	return a, nil
}

// termsOf returns the billing terms that an account's record holds.
func termsOf(a *auth.Account) billing.Terms {
	return billing.Terms{Plan: a.Plan, Anchor: a.BillingAnchor, PendingPlan: a.PendingPlan, PendingAt: a.PendingPlanAt}
}

// current returns the account as it reads at now: with a pending change of plan that
// is due by now applied (its plan the pending plan, nothing pending, and on a change
// of cycle its billing anchor at the change; see [billing.Plans.Current]), as the
// service applies it, whether or not the record was rewritten since.
func (m *Manager) current(a auth.Account, now time.Time) auth.Account {
	tm := m.plans.Current(termsOf(&a), now)
	a.Plan, a.BillingAnchor, a.PendingPlan, a.PendingPlanAt = tm.Plan, tm.Anchor, tm.PendingPlan, tm.PendingAt
	return a
}

// balanceAt reads an account's balance at now, in its period, renewing it if due. Its
// Allowance is the plan's in force, whether or not the ledger has renewed to it yet (a
// plan changed during the period).
func (m *Manager) balanceAt(ctx context.Context, a *auth.Account, now time.Time) (billing.Plan, billing.Balance, error) {
	plan, period := m.planAt(a, now)
	b, err := m.ledger.Balance(ctx, a.ID, now, period, plan.Credits)
	b.Allowance = plan.Credits
	return plan, b, err
}

// planAt returns the plan in force on an account at now and its credit period that
// contains now. A plan that is no longer configured is answered by its name alone,
// with no allowance, renewing monthly.
func (m *Manager) planAt(a *auth.Account, now time.Time) (billing.Plan, billing.Period) {
	tm := m.plans.Current(termsOf(a), now)
	plan, ok := m.plans.Lookup(tm.Plan)
	if !ok {
		plan = billing.Plan{Name: tm.Plan}
	}
	return plan, billing.PeriodAt(tm.Anchor, plan.Renews, now)
}
