package accounts

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/store"
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

// balanceAt reads an account's balance at now, in its period, renewing it if due, with
// what this instance's credit blocks (Options.CreditBlocks) hold unspent counted as
// remaining (as the service's Status counts it). Its Allowance is the plan's in force, whether or not
// the ledger has renewed to it yet (a plan changed during the period).
func (m *Manager) balanceAt(ctx context.Context, a *auth.Account, now time.Time) (billing.Plan, billing.Balance, error) {
	plan, period := m.planAt(a, now)
	b, err := m.ledger.Balance(ctx, a.ID, now, period, plan.Credits)
	if err == nil && m.blocks != nil {
		b = b.WithUnspent(m.blocks.Unspent(a.ID))
	}
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

// Effective says when a change of plan takes effect (see [Manager.ChangePlan]).
type Effective string

// When a change of plan takes effect.
const (
	// EffectiveNow: at once, for the rest of the current period.
	EffectiveNow Effective = "now"
	// EffectiveRenewal: at the end of the current period, when the allowance renews.
	EffectiveRenewal Effective = "renewal"
)

// A PlanChange is what [Manager.ChangePlan] did.
type PlanChange struct {
	// Account is the account's record after the change, as it reads now (see
	// [Info].Account): for a change at the renewal, its PendingPlan and PendingPlanAt.
	Account auth.Account
	// Plan is the plan in force now, and Balance the balance now.
	Plan    billing.Plan
	Balance billing.Balance
	// Changed is false when there was nothing to change: the account is on the plan
	// with nothing pending, or the same change already waits for the renewal.
	Changed bool
	// EffectiveAt is when the new plan takes effect: now, or the renewal. It is zero
	// when nothing changed.
	EffectiveAt time.Time
}

// maxPlanChangeAttempts bounds the attempts of a change of plan whose account changes
// under it (each attempt reads the account again).
const maxPlanChangeAttempts = 8

// ChangePlan moves an account to another plan, now or at the renewal (the end of its
// current period), and publishes the change ([event.PlanChanged]) once it is stored.
// An empty effective means [EffectiveNow] for an upgrade (a plan whose Credits are
// higher than the current plan's) and [EffectiveRenewal] otherwise.
//
// Now: the account is on the new plan from its next call, on every instance, key
// cache or not (its rate limit, concurrency and allowance), and any change that waited
// for the renewal is dropped. The current period's allowance becomes the new plan's, so
// what is left of it changes by the difference of the allowances: an upgrade adds it
// for the rest of the period; a downgrade takes it from what is left of the allowance
// at that moment, never below zero, never from granted credits, and never from what
// calls in flight hold (a call that fails after the downgrade gets back all it took,
// as without the change). Between plans that renew on different cycles (monthly and
// yearly), a new period begins now instead (the account's billing anchor moves to now,
// or just after the start of the period the ledger holds if a call renewed the balance
// into the next period first): its allowance is the new plan's, what was left of the old period's lapses, as at any
// renewal, and granted credits carry over.
//
// Renewal: nothing changes until the current period ends; from then on the new plan
// is in force (its allowance is the next period's, its limits apply), whether or not
// the account's record is rewritten since (see [auth.Account.PlanAt]). The account's
// PendingPlan and PendingPlanAt say so until then. A later change replaces a pending
// one; a change to the plan the account is on drops it. A new plan that renews on
// another cycle counts its periods from the renewal. If the ledger has already renewed
// the balance into the next period on the old plan (a call on an instance whose clock
// is ahead), that period's allowance becomes the new plan's, as for a change made now,
// or, on a change of cycle, the new plan's periods begin a second after its start.
//
// An unknown plan or effective is CodeInvalidInput (the message lists the plans), a
// closed account CodeConflict, an unknown one CodeNotFound. A change to the plan the
// account is on, with nothing pending, or to the change that already waits, changes
// nothing and publishes nothing (Changed is false).
//
// A change made now sets the allowance once, whatever the retries (its id is the
// account's, its new revision's and the period's), and the ledger orders the changes
// by the record's revision: of two changes made at once, the balance ends at the
// allowance of the one stored last, whichever reaches the ledger first; a change that
// reaches the ledger after a call renewed the balance into the next period leaves that
// period with the new plan's allowance, never the difference added to it. If the
// ledger cannot take it, the plan has changed but the allowance has not: the error
// says so, and the difference may be granted or taken with [Manager.AdjustCredits]. A
// plan that is no longer configured counts as an upgrade: the change is made now, and
// what is left of the allowance is kept as it is.
func (m *Manager) ChangePlan(ctx context.Context, accountID, plan string, effective Effective) (PlanChange, error) {
	if err := checkText("account_id", accountID, maxIDLength); err != nil {
		return PlanChange{}, err
	}
	switch effective {
	case "", EffectiveNow, EffectiveRenewal:
	default:
		return PlanChange{}, newError(tollgate.CodeInvalidInput, fmt.Sprintf(
			"effective must be %q or %q (or none: now for an upgrade, at the renewal otherwise), not %q", EffectiveNow, EffectiveRenewal, string(effective)), nil)
	}
	next, ok := m.plans.Lookup(plan)
	if !ok {
		return PlanChange{}, newError(tollgate.CodeInvalidInput,
			fmt.Sprintf("plan %q does not exist; the plans are %v", plan, m.plans.Names()), nil)
	}
	for attempt := 1; ; attempt++ {
		c, err := m.changePlan(ctx, accountID, next, effective)
		if !errors.Is(err, auth.ErrAccountChanged) {
			return c, err
		}
		if attempt == maxPlanChangeAttempts {
			return PlanChange{}, newError(tollgate.CodeConflict,
				fmt.Sprintf("account %q kept changing while its plan was being changed; retry", accountID), err)
		}
	}
}

// changePlan is one attempt of ChangePlan, on the account as it reads now. It returns
// an error wrapping auth.ErrAccountChanged when the account changed since it was read.
func (m *Manager) changePlan(ctx context.Context, accountID string, next billing.Plan, effective Effective) (PlanChange, error) {
	acct, err := m.keys.Account(ctx, accountID)
	if err != nil {
		return PlanChange{}, m.manageError(ctx, "account", accountID, err)
	}
	if acct.State == auth.AccountClosed {
		return PlanChange{}, newError(tollgate.CodeConflict, fmt.Sprintf("account %q is closed; a closed account's plan cannot change", accountID), auth.ErrAccountClosed)
	}
	now := m.now()
	cur := m.current(acct, now)
	old, period := m.planAt(&acct, now)
	_, known := m.plans.Lookup(cur.Plan)
	if effective == "" {
		effective = EffectiveRenewal
		if !known || next.Credits > old.Credits {
			effective = EffectiveNow
		}
	}
	// The update writes the record as it reads now (a pending change that is due
	// applied), then the change.
	u := cur.Update()
	u.Revision = acct.Revision
	c := m.newChange(ctx, now, event.Change{Type: event.PlanChanged, Account: accountID, OldPlan: cur.Plan, Plan: next.Name, Effective: now})
	var adjustAt time.Time // an instant of the period whose allowance the change sets, if any
	newCycle := false      // whether the new plan's first period begins now
	switch {
	case next.Name == cur.Plan && cur.PendingPlan == "":
		return m.planUnchanged(ctx, &acct, now)
	case next.Name == cur.Plan:
		c.Reason = fmt.Sprintf("the change to %s at %s is canceled", cur.PendingPlan, cur.PendingPlanAt.UTC().Format(time.RFC3339))
		u.PendingPlan, u.PendingPlanAt = "", time.Time{}
	case effective == EffectiveRenewal:
		at := period.End
		// The ledger may hold the next period already: a call on an instance whose
		// clock is ahead renewed the balance, on the old plan's allowance, and the
		// ledger does not renew into the same period again. Between plans of the same
		// cycle, that period's allowance is set to the new plan's, as for a change
		// made now; on a change of cycle, the new plan's period begins a second
		// after the one the ledger holds, so that the ledger renews to it.
		b, err := m.ledger.Balance(ctx, accountID, now, period, old.Credits)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return PlanChange{}, m.manageError(ctx, "balance of account", accountID, err)
		}
		renewed := err == nil && known && !b.Period.Start.Before(period.End)
		if renewed && old.Cycle() != next.Cycle() {
			at = b.Period.Start.Add(time.Second).Truncate(time.Second)
		}
		if cur.PendingPlan == next.Name && cur.PendingPlanAt.Equal(at) {
			return m.planUnchanged(ctx, &acct, now)
		}
		if renewed && old.Cycle() == next.Cycle() {
			adjustAt = period.End
		}
		u.PendingPlan, u.PendingPlanAt = next.Name, at
		c.Effective = at
	case known && old.Cycle() != next.Cycle():
		// A new period begins now, on the new cycle: later than the start of the
		// period the ledger holds, to the second, so that the ledger renews to the new
		// allowance. That period may be later than the one that contains now: a call
		// on an instance whose clock is ahead, or one made since now, may have renewed
		// the balance into the next period already; a new period that began before
		// that one's start would never be renewed to, and the old plan's allowance
		// would stand for the whole of the new plan's period.
		b, err := m.ledger.Balance(ctx, accountID, now, period, old.Credits)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return PlanChange{}, m.manageError(ctx, "balance of account", accountID, err)
		}
		held := period.Start
		if err == nil && b.Period.Start.After(held) {
			held = b.Period.Start
		}
		u.Plan, u.PendingPlan, u.PendingPlanAt = next.Name, "", time.Time{}
		u.BillingAnchor = now.UTC().Truncate(time.Second)
		if !u.BillingAnchor.After(held) {
			u.BillingAnchor = held.Add(time.Second).Truncate(time.Second)
		}
		newCycle = true
	default:
		u.Plan, u.PendingPlan, u.PendingPlanAt = next.Name, "", time.Time{}
		if known { // an unknown plan's: the allowance left is kept as it is
			// The current period's allowance is set to the new plan's once the record
			// names it. Whoever renews the balance into the period first, this change
			// or a call, on either plan, the ledger ends at the new plan's allowance
			// (see adjustAllowance): nothing needs renewing before.
			adjustAt = now
		}
	}
	updated, err := m.keys.UpdateAccount(m.journaled(ctx, c), u)
	switch {
	case errors.Is(err, auth.ErrAccountChanged):
		return PlanChange{}, err
	case errors.Is(err, auth.ErrAccountClosed):
		return PlanChange{}, newError(tollgate.CodeConflict, fmt.Sprintf("account %q is closed; a closed account's plan cannot change", accountID), err)
	case err != nil:
		return PlanChange{}, m.manageError(ctx, "account", accountID, err)
	}
	m.publish(ctx, c)
	res := PlanChange{Account: m.current(updated, now), Changed: true, EffectiveAt: c.Effective}
	if newCycle {
		// The new plan's first period may begin a moment after now (after the start
		// of the period the ledger holds): the ledger renews into it at once, so that
		// what is left of the old plan's allowance stands for no call, and no change
		// made meanwhile. No Now: nothing is voided or lapsed ahead of time.
		first := billing.PeriodAt(updated.BillingAnchor, next.Renews, updated.BillingAnchor)
		if _, err := m.ledger.Balance(ctx, accountID, time.Time{}, first, next.Credits); err != nil && !errors.Is(err, store.ErrNotFound) {
			return res, m.manageError(ctx, "balance of account", accountID, err)
		}
	}
	if !adjustAt.IsZero() {
		if err := m.adjustAllowance(ctx, &updated, old.Credits, adjustAt, now); err != nil {
			return res, err
		}
	}
	res.Plan, res.Balance, err = m.balanceAt(ctx, &updated, now)
	if err != nil {
		return res, m.manageError(ctx, "balance of account", accountID, err)
	}
	return res, nil
}

// planUnchanged answers a change of plan that changes nothing.
func (m *Manager) planUnchanged(ctx context.Context, acct *auth.Account, now time.Time) (PlanChange, error) {
	plan, b, err := m.balanceAt(ctx, acct, now)
	if err != nil {
		return PlanChange{}, m.manageError(ctx, "balance of account", acct.ID, err)
	}
	return PlanChange{Account: m.current(*acct, now), Plan: plan, Balance: b}, nil
}

// adjustAttempts is the most times adjustAllowance asks the ledger.
const adjustAttempts = 3

// retryable reports whether an operation on a ledger that failed with err may succeed
// if it is tried again: an error that is none of the ledger's verdicts (the store
// could not be reached, or its answer was lost).
func retryable(err error) bool {
	for _, verdict := range []error{store.ErrNotFound, store.ErrConflict, store.ErrInvalid, billing.ErrTooManyCredits, billing.ErrInsufficientCredits} {
		if errors.Is(err, verdict) {
			return false
		}
	}
	return err != nil
}

// adjustAllowance sets the allowance of the period that holds at of an account whose
// plan just changed, from credits to the allowance of the plan its record (at revision
// acct.Revision) names then, at now, once: the ledger orders the changes by the
// record's revision, so that changes made at once end as the latest says, whatever
// order they reach it in, and it changes nothing for a period it has left. The
// adjustment's id is the account's, the revision's and the period's, whatever the
// retries.
//
// If the ledger holds a later period (a call renewed the balance into it before the
// change reached the ledger), that period's allowance is set too: the call may have
// read the record before the change, and renewed on the old plan's allowance. Set to
// the new plan's either way, it is never added twice.
func (m *Manager) adjustAllowance(ctx context.Context, acct *auth.Account, from int64, at, now time.Time) error {
	plan, period := m.planAt(acct, at)
	b, err := m.setAllowance(ctx, acct, plan, period, now)
	if err == nil && b.Period.Start.After(period.Start) {
		if p, held := m.planAt(acct, b.Period.Start); held.Start.Equal(b.Period.Start) {
			plan = p
			_, err = m.setAllowance(ctx, acct, plan, held, now)
		}
	}
	if err == nil || errors.Is(err, store.ErrNotFound) {
		// No balance (its creation was cut short): the creation, made again, opens
		// it on the new plan.
		return nil
	}
	if errors.Is(err, billing.ErrTooManyCredits) {
		return newError(tollgate.CodeInvalidInput, fmt.Sprintf(
			"the plan of account %q changed to %s, but the allowance of its current period could not grow from %d to %d credits: the balance would pass the maximum of %d",
			acct.ID, plan.Name, from, plan.Credits, int64(billing.MaxCredits)), err)
	}
	cause := m.manageError(ctx, "balance of account", acct.ID, err)
	return newError(tollgate.CodeOf(cause), fmt.Sprintf(
		"the plan of account %q changed to %s, but the allowance of its current period could not be changed from %d to %d credits (%s): grant or take the difference, %+d credits, with a credit adjustment",
		acct.ID, plan.Name, from, plan.Credits, cause.Error(), plan.Credits-from), err)
}

// setAllowance sets the allowance of the account's period to the plan's, at the
// account's revision, trying again while the ledger cannot be reached.
func (m *Manager) setAllowance(ctx context.Context, acct *auth.Account, plan billing.Plan, period billing.Period, now time.Time) (billing.Balance, error) {
	sum := sha256.Sum256(fmt.Appendf(nil, "plan\x00%s\x00%d\x00%d", acct.ID, acct.Revision, period.Start.UnixNano()))
	var id billing.RequestID
	copy(id[:], sum[:])
	adj := driver.Adjustment{Account: acct.ID, Request: id, Part: driver.PartAllowance, Revision: acct.Revision,
		Reason: "plan changed to " + plan.Name, Period: period, Allowance: plan.Credits, Now: now}
	// The change of plan is stored: the adjustment is made even if the client goes,
	// and tried again, under the same id, if the ledger's answer is lost.
	ctx = context.WithoutCancel(ctx)
	var (
		b   billing.Balance
		err error
	)
	for range adjustAttempts {
		if b, err = m.ledger.Adjust(ctx, adj); !retryable(err) {
			break
		}
	}
	return b, err
}
