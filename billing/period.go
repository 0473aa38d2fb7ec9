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
	// The calendar arithmetic is done on day numbers (the service computes a period
	// for every call it authenticates).
	a := anchorOf(anchor)
	step := renews.months()
	tsec := t.Unix()
	ty, tm, _ := civil(floorDiv(int(tsec), secondsPerDay))
	n := floorDiv((ty-a.y)*12+(tm-a.m), step) * step
	start := a.plus(n)
	if start > tsec || start == tsec && a.ns > t.Nanosecond() {
		n -= step
		start = a.plus(n)
	}
	return Period{Start: time.Unix(start, int64(a.ns)).UTC(), End: time.Unix(a.plus(n+step), int64(a.ns)).UTC()}
}

const secondsPerDay = 24 * 60 * 60

// An anchorDate is an anchor's date (its month m from 1 to 12) and time of day, in
// UTC.
type anchorDate struct {
	y, m, d int
	sec     int // seconds into the day
	ns      int
}

func anchorOf(t time.Time) anchorDate {
	unix := int(t.Unix())
	day := floorDiv(unix, secondsPerDay)
	a := anchorDate{sec: unix - day*secondsPerDay, ns: t.Nanosecond()}
	a.y, a.m, a.d = civil(day)
	return a
}

// plus returns the anchor moved by n months, in Unix seconds: on its day of the month,
// or on the month's last day if it has fewer days, at its time of day.
func (a anchorDate) plus(n int) int64 {
	months := a.y*12 + (a.m - 1) + n
	y := floorDiv(months, 12)
	m := months - y*12 + 1
	return days(y, m, min(a.d, daysIn(y, time.Month(m))))*secondsPerDay + int64(a.sec)
}

// civil returns the date (proleptic Gregorian, month from 1 to 12) of the day that is
// day days after 1970-01-01; days is its inverse. (The algorithms of Howard Hinnant's
// "chrono-Compatible Low-Level Date Algorithms".)
func civil(day int) (y, m, d int) {
	z := day + 719468
	era := floorDiv(z, 146097)
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = doy - (153*mp+2)/5 + 1
	m = mp + 3
	if m > 12 {
		m -= 12
	}
	y = yoe + era*400
	if m <= 2 {
		y++
	}
	return y, m, d
}

// days returns the number of days from 1970-01-01 to the date y-m-d (month from 1 to
// 12).
func days(y, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := floorDiv(y, 400)
	yoe := y - era*400
	doy := (153*((m+9)%12)+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era*146097 + doe - 719468)
}

// floorDiv returns a/b rounded down, for b > 0.
func floorDiv(a, b int) int {
	if a < 0 {
		return -((-a + b - 1) / b)
	}
	return a / b
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
