package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store"
)

// The rows of TestLedger about the changes of the period's allowance (a plan changed
// during the period): an adjustment to PartAllowance sets the allowance, ordered by the
// revision of the change (see driver.Adjustment).
var allowanceRows = []behaviour[driver.Ledger]{
	{"AllowanceSet",
		"An adjustment to PartAllowance sets the period's allowance: what is left of it changes by the difference from the stored allowance (a decrease takes at most what is left, without an error, and never a grant; an increase past MaxCredits is refused with ErrTooManyCredits and changes nothing), Balance.Allowance reports the allowance set, and a renewal renews to the Allowance it is given.",
		ledAllowanceSet},
	{"AllowanceEarlierPeriod",
		"A change of the allowance for a period earlier than the stored one changes nothing, not even the stored revision, and returns the balance without an error.",
		ledAllowanceEarlierPeriod},
	{"AllowanceReverseOrder",
		"Changes of the allowance applied in reverse revision order end at the allowance of the later revision, as in order: the earlier one, arriving last, changes nothing.",
		ledAllowanceReverseOrder},
	{"AllowanceAfterRenewal",
		"A balance renewed into the next period with the new allowance, then given the change made for the period before, keeps the new allowance: the difference is not added on top.",
		ledAllowanceAfterRenewal},
	{"AllowanceRevisionAcrossRenewal",
		"A renewal keeps the revision of the last change of the allowance applied: in the new period a change with a revision not above it changes nothing, a later one applies.",
		ledAllowanceRevisionAcrossRenewal},
	{"AllowanceRevisionReplayed",
		"A change of the allowance whose revision is not above the last one applied changes nothing, under another request id too; one replayed under its request id is applied once.",
		ledAllowanceRevisionReplayed},
	{"AllowanceLoweredInFlight",
		"A change that lowers the allowance while reservations are open takes the difference from what is left of the allowance at that moment; their refunds and voids give back all they took, as without the change.",
		ledAllowanceLoweredInFlight},
	{"AllowanceRefused",
		"A change of the allowance with an Amount, a Revision not above 0 or a negative Allowance, and a grant with a Revision, are refused with store.ErrInvalid, change nothing, and are not remembered.",
		ledAllowanceRefused},
	{"ConcurrentAllowanceChanges",
		"Changes of the allowance made at once from many goroutines, each replayed, end at the allowance of the latest revision, what is left of it exact.",
		ledConcurrentAllowanceChanges},
}

// allowanceChange sets the allowance of period p to to, at revision rev, at now.
func allowanceChange(acct string, id driver.RequestID, p driver.Period, to, rev int64, now time.Time) driver.Adjustment {
	return driver.Adjustment{Account: acct, Request: id, Part: driver.PartAllowance, Revision: rev, Reason: "storetest",
		Period: p, Allowance: to, Now: now}
}

// setAllowance makes the change of the allowance of p to to, at revision rev, under a
// fresh request id, at the instant of the operations in p.
func setAllowance(t *testing.T, l driver.Ledger, acct string, p driver.Period, to, rev int64) driver.Balance {
	t.Helper()
	b, err := l.Adjust(t.Context(), allowanceChange(acct, newRequest(), p, to, rev, nowIn(p)))
	must(t, fmt.Sprintf("Adjust setting the allowance of %s to %d at revision %d", p.Start.Format("2006-01"), to, rev), err)
	return b
}

// wantAllowance checks what is left of the allowance, Remaining, the allowance and
// the period of a balance.
func wantAllowance(t *testing.T, op string, b driver.Balance, left, remaining, allowance int64, p driver.Period) {
	t.Helper()
	if b.AllowanceLeft() != left || b.Remaining != remaining || b.Allowance != allowance || !samePeriod(b.Period, p) {
		t.Errorf("%s: {allowance left %d, Remaining %d, Allowance %d, Period %s}, want {%d, %d, %d, %s}",
			op, b.AllowanceLeft(), b.Remaining, b.Allowance, b.Period.Start.Format("2006-01"),
			left, remaining, allowance, p.Start.Format("2006-01"))
	}
}

// balanceIn reads the balance at the instant of the operations in p, renewing it to
// the allowance given.
func balanceIn(t *testing.T, l driver.Ledger, acct string, p driver.Period, allowance int64) driver.Balance {
	t.Helper()
	b, err := l.Balance(t.Context(), acct, nowIn(p), p, allowance)
	must(t, "Balance", err)
	return b
}

func ledAllowanceSet(t *testing.T, l driver.Ledger) {
	ctx, n := t.Context(), newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0) // 100 left of an allowance of 500
	now := nowIn(p0)
	grant(t, l, acct, newRequest(), 50, never, now)
	wantAllowance(t, "the allowance raised to 700", setAllowance(t, l, acct, p0, 700, 1), 300, 350, 700, p0)
	wantAllowance(t, "the allowance lowered to 100", setAllowance(t, l, acct, p0, 100, 2), 0, 50, 100, p0)
	wantAllowance(t, "the allowance set to 100 again", setAllowance(t, l, acct, p0, 100, 3), 0, 50, 100, p0)
	wantAllowance(t, "the allowance lowered to 0", setAllowance(t, l, acct, p0, 0, 4), 0, 50, 0, p0)
	b, err := l.Adjust(ctx, allowanceChange(acct, newRequest(), p0, driver.MaxCredits, 5, now))
	wantErr(t, "the allowance raised to MaxCredits, 50 granted", err, driver.ErrTooManyCredits)
	wantAllowance(t, "the refused raise", b, 0, 50, 0, p0)
	// The refused change moved nothing: a change at its revision applies.
	wantAllowance(t, "the allowance raised to 40", setAllowance(t, l, acct, p0, 40, 5), 40, 90, 40, p0)
	wantAllowance(t, "the allowance raised to MaxCredits-50", setAllowance(t, l, acct, p0, driver.MaxCredits-50, 6),
		driver.MaxCredits-50, driver.MaxCredits, driver.MaxCredits-50, p0)
	wantAllowance(t, "the balance renewed", balanceIn(t, l, acct, p1, allowance), allowance, allowance+50, allowance, p1)
}

func ledAllowanceEarlierPeriod(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", allowance, p0)
	wantAllowance(t, "the balance renewed into the next period", balanceIn(t, l, acct, p1, allowance), allowance, allowance, allowance, p1)
	wantAllowance(t, "a change for the period before", setAllowance(t, l, acct, p0, 900, 1), allowance, allowance, allowance, p1)
	// It did not take revision 1: a change at revision 1 for the period held applies.
	wantAllowance(t, "a change at revision 1 for the period held", setAllowance(t, l, acct, p1, 900, 1), 900, 900, 900, p1)
}

func ledAllowanceReverseOrder(t *testing.T, l driver.Ledger) {
	n := newIDs()
	// An account on a plan of 500 spends 450; revision 1 raises its allowance to 5000,
	// revision 2 lowers it back to 500.
	to := map[int64]int64{1: 5000, 2: allowance}
	for _, c := range []struct {
		name      string
		order     []int64 // the revisions, in the order the ledger sees them
		left      []int64 // what is left of the allowance after each
		allowance []int64 // and the allowance
	}{
		{"in-order", []int64{1, 2}, []int64{4550, 50}, []int64{5000, allowance}},
		{"reversed", []int64{2, 1}, []int64{50, 50}, []int64{allowance, allowance}},
	} {
		acct := openAccount(t, l, n, c.name, allowance, p0)
		id := newRequest()
		reserveAt(t, l, acct, id, 450, nowIn(p0), driver.Parts{Allowance: 450})
		settleParts(t, l, acct, id, 0, nowIn(p0), driver.Parts{Allowance: 450})
		for i, rev := range c.order {
			b := setAllowance(t, l, acct, p0, to[rev], rev)
			wantAllowance(t, fmt.Sprintf("%s: revision %d", c.name, rev), b, c.left[i], c.left[i], c.allowance[i], p0)
		}
	}
}

func ledAllowanceAfterRenewal(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", allowance, p0)
	reserveAt(t, l, acct, newRequest(), 100, nowIn(p0), driver.Parts{Allowance: 100})
	// The plan changes from 500 to 5000 a second before the renewal; a call renews the
	// balance into the next period, on the new plan, before the change's adjustment
	// reaches the ledger.
	b, err := l.Balance(t.Context(), acct, p1.Start, p1, 5000)
	must(t, "Balance renewing to the new allowance", err)
	wantAllowance(t, "renewed to the new allowance", b, 5000, 5000, 5000, p1)
	b, err = l.Adjust(t.Context(), allowanceChange(acct, newRequest(), p0, 5000, 1, p1.Start.Add(-time.Second)))
	must(t, "Adjust for the period before", err)
	wantAllowance(t, "the change for the period before", b, 5000, 5000, 5000, p1)
	wantAllowance(t, "a read", balanceIn(t, l, acct, p1, 5000), 5000, 5000, 5000, p1)
}

func ledAllowanceRevisionAcrossRenewal(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", allowance, p0)
	setAllowance(t, l, acct, p0, 800, 3)
	wantAllowance(t, "renewed", balanceIn(t, l, acct, p1, 600), 600, 600, 600, p1)
	wantAllowance(t, "revision 3 again, in the new period", setAllowance(t, l, acct, p1, 900, 3), 600, 600, 600, p1)
	wantAllowance(t, "revision 2, in the new period", setAllowance(t, l, acct, p1, 900, 2), 600, 600, 600, p1)
	wantAllowance(t, "revision 4, in the new period", setAllowance(t, l, acct, p1, 900, 4), 900, 900, 900, p1)
}

func ledAllowanceRevisionReplayed(t *testing.T, l driver.Ledger) {
	ctx, n := t.Context(), newIDs()
	acct := openAccount(t, l, n, "acct", allowance, p0)
	now := nowIn(p0)
	change := allowanceChange(acct, newRequest(), p0, 800, 3, now)
	adjust := func(op string, a driver.Adjustment, left int64) {
		t.Helper()
		b, err := l.Adjust(ctx, a)
		must(t, op, err)
		wantAllowance(t, op, b, left, left, left, p0)
	}
	adjust("revision 3", change, 800)
	adjust("revision 3 replayed", change, 800)
	adjust("revision 3 under another request id", allowanceChange(acct, newRequest(), p0, 100, 3, now), 800)
	adjust("revision 2", allowanceChange(acct, newRequest(), p0, 100, 2, now), 800)
	adjust("revision 4", allowanceChange(acct, newRequest(), p0, 100, 4, now), 100)
	adjust("revision 3 replayed after revision 4", change, 100)
	change.Revision = 5
	adjust("revision 3's request id replayed with revision 5", change, 100)
}

func ledAllowanceLoweredInFlight(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", allowance, p0)
	now := nowIn(p0)
	// Two calls in flight hold 450 of the 500; the plan is lowered to 100.
	settled, voided := newRequest(), newRequest()
	reserveAt(t, l, acct, settled, 300, now, driver.Parts{Allowance: 300})
	b, err := l.Reserve(t.Context(), driver.Reservation{Account: acct, Request: voided, APIs: []string{"hash"}, Amount: 150,
		Period: p0, Allowance: allowance, Now: now, Expires: now.Add(time.Hour)})
	must(t, "Reserve", err)
	wantAllowance(t, "two calls in flight", b, 50, 50, allowance, p0)
	b = setAllowance(t, l, acct, p0, 100, 1)
	wantAllowance(t, "the allowance lowered to 100", b, 0, 0, 100, p0)
	if b.Used != 450 {
		t.Errorf("the allowance lowered to 100: Used %d, want the 450 the calls hold", b.Used)
	}
	// The calls in flight get back all they took.
	b = settleParts(t, l, acct, settled, 300, now, driver.Parts{})
	wantAllowance(t, "the first call refunded", b, 300, 300, 100, p0)
	b, err = l.Balance(t.Context(), acct, now.Add(time.Hour), p0, 100)
	must(t, "Balance at the second call's expiry", err)
	wantAllowance(t, "the second call voided", b, 450, 450, 100, p0)
	if b.Used != 0 {
		t.Errorf("after the refund and the void: Used %d, want 0", b.Used)
	}
}

func ledAllowanceRefused(t *testing.T, l driver.Ledger) {
	ctx, n := t.Context(), newIDs()
	acct := openAccount(t, l, n, "acct", allowance, p0)
	now := nowIn(p0)
	id := newRequest()
	withAmount := allowanceChange(acct, id, p0, 800, 1, now)
	withAmount.Amount = 300
	grantWithRevision := grantAt(acct, id, 5, never, now)
	grantWithRevision.Revision = 1
	for _, c := range []struct {
		name string
		a    driver.Adjustment
	}{
		{"an Amount", withAmount},
		{"revision 0", allowanceChange(acct, id, p0, 800, 0, now)},
		{"revision -1", allowanceChange(acct, id, p0, 800, -1, now)},
		{"a negative allowance", allowanceChange(acct, id, p0, -1, 1, now)},
		{"a grant with a revision", grantWithRevision},
	} {
		_, err := l.Adjust(ctx, c.a)
		wantErr(t, "Adjust with "+c.name, err, store.ErrInvalid)
	}
	wantAllowance(t, "after the refused changes", balanceIn(t, l, acct, p0, allowance), allowance, allowance, allowance, p0)
	// The refused request was not recorded.
	b, err := l.Adjust(ctx, allowanceChange(acct, id, p0, 800, 1, now))
	must(t, "the change made right", err)
	wantAllowance(t, "the change made right", b, 800, 800, 800, p0)
}

func ledConcurrentAllowanceChanges(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", allowance, p0)
	now := nowIn(p0)
	reserveAt(t, l, acct, newRequest(), 450, now, driver.Parts{Allowance: 450})
	// Every allowance covers the 450 held, so that no change is cut at zero: what is
	// left is the last allowance less 450, whatever order the changes take.
	const changes = 32
	to := func(rev int64) int64 { return 500 + rev*37%11*100 }
	var wg sync.WaitGroup
	errs := make(chan error, 2*changes)
	for rev := int64(1); rev <= changes; rev++ {
		a := allowanceChange(acct, newRequest(), p0, to(rev), rev, now)
		for range 2 {
			wg.Go(func() {
				if _, err := l.Adjust(t.Context(), a); err != nil {
					errs <- err
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Adjust: %v", err)
	}
	last := to(changes)
	wantAllowance(t, "after the changes", balanceIn(t, l, acct, p0, allowance), last-450, last-450, last, p0)
}
