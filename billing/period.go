package billing

import (
	"fmt"
	"time"
)

// A Cycle is how often a plan's allowance renews: [Monthly] or [Yearly].
type Cycle string

// The cycles of a plan.
const (
	// Monthly: a period is one month long. A plan that names no cycle renews monthly.
	Monthly Cycle = "monthly"
	// Yearly: a period is one year long.
	Yearly Cycle = "yearly"
)

// months returns the length of a period of the cycle, in months; the empty cycle is
// Monthly.
func (c Cycle) months() int {
	if c == Yearly {
		return 12
	}
	return 1
}

func (c Cycle) check() error {
	switch c {
	case "", Monthly, Yearly:
		return nil
	}
	return fmt.Errorf("renews must be %q or %q (empty means %q), not %q", Monthly, Yearly, Monthly, string(c))
}

// calendar is the anchor of the zero anchor: 1970-01-01T00:00:00Z, from which periods
// are the calendar months (or years) in UTC.
var calendar = time.Unix(0, 0).UTC()

// PeriodAt returns the credit period that contains t, of an account whose periods are
// counted from anchor and renew as renews says ([Monthly] when empty).
//
// Periods begin at anchor + n months (or years) for every whole n, negative too, each
// counted from the anchor itself rather than from the period before, on the anchor's
// day of the month, or the month's last day when the month is shorter (an anchor on
// January 31 begins periods on February 28, or 29, then March 31), at the anchor's
// time of day, in UTC. So periods tile time, before the anchor as after it, without
// gaps or overlaps: the period that follows p begins at p.End.
//
// The zero anchor counts calendar months (or years) in UTC: PeriodAt(time.Time{},
// Monthly, t) is [MonthOf](t), the period of accounts created before anchors existed.
func PeriodAt(anchor time.Time, renews Cycle, t time.Time) Period {
	if anchor.IsZero() {
		anchor = calendar
	}
	a := anchorOf(anchor)
	step := renews.months()
	ty, tm, _ := t.UTC().Date()
	n := floorDiv((ty-a.y)*12+int(tm-a.m), step) * step
	start := a.plus(n)
	if start.After(t) {
		n -= step
		start = a.plus(n)
	}
	return Period{Start: start, End: a.plus(n + step)}
}

// An anchorDate is an anchor's date and time of day, in UTC.
type anchorDate struct {
	y, d, hh, mm, ss, ns int
	m                    time.Month
}

func anchorOf(t time.Time) anchorDate {
	t = t.UTC()
	a := anchorDate{ns: t.Nanosecond()}
	a.y, a.m, a.d = t.Date()
	a.hh, a.mm, a.ss = t.Clock()
	return a
}

// plus returns the anchor moved by n months: on its day of the month, or on the
// month's last day if it has fewer days, at its time of day, in UTC.
func (a anchorDate) plus(n int) time.Time {
	months := a.y*12 + int(a.m-1) + n
	y := floorDiv(months, 12)
	m := time.Month(months - y*12 + 1)
	return time.Date(y, m, min(a.d, daysIn(y, m)), a.hh, a.mm, a.ss, a.ns, time.UTC)
}

// floorDiv returns a/b rounded down, for b > 0.
func floorDiv(a, b int) int {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// daysIn returns the number of days of month m of year y.
func daysIn(y int, m time.Month) int {
	switch m {
	case time.February:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case time.April, time.June, time.September, time.November:
		return 30
	}
	return 31
}

// Terms are what an account's record says of its billing: its plan, the instant its
// periods are counted from (the zero anchor counts calendar months or years in UTC),
// and a change of plan that waits for a renewal: PendingPlan applies from PendingAt
// on. The service and the management read them from the account's record
// (auth.Account's Plan, BillingAnchor, PendingPlan and PendingPlanAt).
type Terms struct {
	Plan        string
	Anchor      time.Time
	PendingPlan string
	PendingAt   time.Time
}

// Current returns the terms in force at t: tm itself, or, once its pending change is
// due (t at or after PendingAt), the terms it changes to: PendingPlan as the plan and
// nothing pending. A pending change that changes the cycle (monthly to yearly, say)
// also moves the anchor to PendingAt, so that the new plan's periods begin at the
// renewal and none moves backwards; one between plans of the same cycle keeps the
// anchor. A plan that is not configured counts as changing the cycle.
func (ps *Plans) Current(tm Terms, t time.Time) Terms {
	if tm.PendingPlan == "" || t.Before(tm.PendingAt) {
		return tm
	}
	oldPlan, okOld := ps.Lookup(tm.Plan)
	newPlan, okNew := ps.Lookup(tm.PendingPlan)
	if !okOld || !okNew || oldPlan.Cycle() != newPlan.Cycle() {
		tm.Anchor = tm.PendingAt
	}
	tm.Plan, tm.PendingPlan, tm.PendingAt = tm.PendingPlan, "", time.Time{}
	return tm
}

// At returns the plan in force under tm at t ([Plans.Current]) and the credit period
// that contains t ([PeriodAt], with the plan's cycle), and false if that plan is not
// one of the plans.
func (ps *Plans) At(tm Terms, t time.Time) (Plan, Period, bool) {
	tm = ps.Current(tm, t)
	p, ok := ps.Lookup(tm.Plan)
	if !ok {
		return p, Period{}, false
	}
	return p, PeriodAt(tm.Anchor, p.Renews, t), true
}
