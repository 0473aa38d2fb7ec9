package billing_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/billing"
)

func utc(y int, m time.Month, d, h, min, s int) time.Time {
	return time.Date(y, m, d, h, min, s, 0, time.UTC)
}

func TestPeriodAt(t *testing.T) {
	jan31 := utc(2026, time.January, 31, 9, 30, 0)
	leap := utc(2024, time.February, 29, 12, 0, 0)
	plus2 := time.FixedZone("UTC+2", 2*60*60)
	tests := []struct {
		name       string
		anchor     time.Time
		renews     billing.Cycle
		t          time.Time
		start, end time.Time
	}{
		// The zero anchor: calendar months and years, in UTC.
		{"zero anchor, monthly", time.Time{}, billing.Monthly, utc(2026, time.March, 14, 15, 9, 26),
			utc(2026, time.March, 1, 0, 0, 0), utc(2026, time.April, 1, 0, 0, 0)},
		{"zero anchor, empty cycle is monthly", time.Time{}, "", utc(2026, time.March, 14, 15, 9, 26),
			utc(2026, time.March, 1, 0, 0, 0), utc(2026, time.April, 1, 0, 0, 0)},
		{"zero anchor, yearly", time.Time{}, billing.Yearly, utc(2026, time.March, 14, 15, 9, 26),
			utc(2026, time.January, 1, 0, 0, 0), utc(2027, time.January, 1, 0, 0, 0)},
		{"zero anchor, yearly, last instant", time.Time{}, billing.Yearly, utc(2026, time.December, 31, 23, 59, 59),
			utc(2026, time.January, 1, 0, 0, 0), utc(2027, time.January, 1, 0, 0, 0)},
		// An anchor on the 31st: the periods of shorter months begin on their last day,
		// each counted from the anchor (March 31, not March 28).
		{"on the anchor", jan31, billing.Monthly, jan31, jan31, utc(2026, time.February, 28, 9, 30, 0)},
		{"February is clamped", jan31, billing.Monthly, utc(2026, time.March, 1, 0, 0, 0),
			utc(2026, time.February, 28, 9, 30, 0), utc(2026, time.March, 31, 9, 30, 0)},
		{"March is not", jan31, billing.Monthly, utc(2026, time.April, 2, 0, 0, 0),
			utc(2026, time.March, 31, 9, 30, 0), utc(2026, time.April, 30, 9, 30, 0)},
		{"April is clamped", jan31, billing.Monthly, utc(2026, time.May, 30, 9, 29, 59),
			utc(2026, time.April, 30, 9, 30, 0), utc(2026, time.May, 31, 9, 30, 0)},
		{"a leap February", utc(2024, time.January, 31, 9, 30, 0), billing.Monthly, utc(2024, time.March, 1, 0, 0, 0),
			utc(2024, time.February, 29, 9, 30, 0), utc(2024, time.March, 31, 9, 30, 0)},
		{"the day before the anchor's day, before its time of day", jan31, billing.Monthly, utc(2026, time.March, 31, 9, 29, 59),
			utc(2026, time.February, 28, 9, 30, 0), utc(2026, time.March, 31, 9, 30, 0)},
		{"the anchor's time of day begins the period", jan31, billing.Monthly, utc(2026, time.March, 31, 9, 30, 0),
			utc(2026, time.March, 31, 9, 30, 0), utc(2026, time.April, 30, 9, 30, 0)},
		{"across a year", jan31, billing.Monthly, utc(2027, time.January, 5, 0, 0, 0),
			utc(2026, time.December, 31, 9, 30, 0), utc(2027, time.January, 31, 9, 30, 0)},
		// Before the anchor, periods are counted back from it.
		{"before the anchor", jan31, billing.Monthly, utc(2026, time.January, 31, 9, 29, 59),
			utc(2025, time.December, 31, 9, 30, 0), jan31},
		{"months before the anchor", jan31, billing.Monthly, utc(2025, time.November, 30, 10, 0, 0),
			utc(2025, time.November, 30, 9, 30, 0), utc(2025, time.December, 31, 9, 30, 0)},
		{"an anchor set ahead, on the 1st", utc(2026, time.February, 1, 0, 0, 0), billing.Monthly, utc(2026, time.January, 20, 8, 0, 0),
			utc(2026, time.January, 1, 0, 0, 0), utc(2026, time.February, 1, 0, 0, 0)},
		// Yearly: on the anchor's day, February 29 on February 28 of common years.
		{"yearly", jan31, billing.Yearly, utc(2026, time.June, 1, 0, 0, 0), jan31, utc(2027, time.January, 31, 9, 30, 0)},
		{"yearly, before the anchor's day", jan31, billing.Yearly, utc(2027, time.January, 30, 0, 0, 0),
			jan31, utc(2027, time.January, 31, 9, 30, 0)},
		{"yearly, before the anchor", jan31, billing.Yearly, utc(2025, time.June, 1, 0, 0, 0),
			utc(2025, time.January, 31, 9, 30, 0), jan31},
		{"yearly from a leap day", leap, billing.Yearly, utc(2025, time.March, 1, 0, 0, 0),
			utc(2025, time.February, 28, 12, 0, 0), utc(2026, time.February, 28, 12, 0, 0)},
		{"yearly from a leap day, the next leap year", leap, billing.Yearly, utc(2028, time.February, 29, 12, 0, 0),
			utc(2028, time.February, 29, 12, 0, 0), utc(2029, time.February, 28, 12, 0, 0)},
		// Any time zone: the instants count, in UTC.
		{"an anchor and an instant given in another zone", time.Date(2026, time.January, 31, 11, 30, 0, 0, plus2), billing.Monthly,
			time.Date(2026, time.March, 31, 11, 30, 0, 0, plus2), utc(2026, time.March, 31, 9, 30, 0), utc(2026, time.April, 30, 9, 30, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := billing.PeriodAt(tt.anchor, tt.renews, tt.t)
			if !got.Start.Equal(tt.start) || !got.End.Equal(tt.end) {
				t.Errorf("PeriodAt(%s, %q, %s) = [%s, %s), want [%s, %s)", tt.anchor, tt.renews, tt.t, got.Start, got.End, tt.start, tt.end)
			}
			if got.Start.Location() != time.UTC || got.End.Location() != time.UTC {
				t.Errorf("PeriodAt(...) = [%s, %s), want UTC instants", got.Start, got.End)
			}
		})
	}
}

// TestPeriodAtWalk follows an account anchored on January 31 through its first periods:
// each begins where the one before ends.
func TestPeriodAtWalk(t *testing.T) {
	anchor := utc(2026, time.January, 31, 0, 0, 0)
	want := []time.Time{anchor, utc(2026, time.February, 28, 0, 0, 0), utc(2026, time.March, 31, 0, 0, 0),
		utc(2026, time.April, 30, 0, 0, 0), utc(2026, time.May, 31, 0, 0, 0), utc(2026, time.June, 30, 0, 0, 0)}
	at := anchor
	for i, start := range want {
		p := billing.PeriodAt(anchor, billing.Monthly, at)
		if !p.Start.Equal(start) {
			t.Fatalf("period %d starts at %s, want %s", i, p.Start, start)
		}
		at = p.End
	}
}

// FuzzPeriodAt checks that periods tile time: the period of t holds t, the period of
// its end begins there, the period of the instant before its start ends there, and
// every period begins at the anchor's time of day; the zero monthly anchor is MonthOf.
func FuzzPeriodAt(f *testing.F) {
	f.Add(int64(0), int64(0), false)
	f.Add(utc(2026, time.January, 31, 9, 30, 0).Unix(), utc(2026, time.March, 1, 0, 0, 0).UnixNano(), false)
	f.Add(utc(2024, time.February, 29, 12, 0, 0).Unix(), utc(2023, time.March, 1, 0, 0, 0).UnixNano(), true)
	f.Add(utc(2199, time.December, 31, 23, 59, 59).Unix(), int64(-1), false)
	f.Fuzz(func(t *testing.T, anchorSec, tNano int64, yearly bool) {
		// Anchors within their bounds (1970 to 2200), at whole seconds; instants any
		// time int64 nanoseconds reach.
		const span = 230 * 366 * 24 * 60 * 60
		var anchor time.Time
		if anchorSec != 0 {
			anchor = time.Unix((anchorSec%span+span)%span, 0)
		}
		renews := billing.Monthly
		if yearly {
			renews = billing.Yearly
		}
		at := time.Unix(0, tNano)
		p := billing.PeriodAt(anchor, renews, at)
		if at.Before(p.Start) || !at.Before(p.End) {
			t.Fatalf("PeriodAt(%s, %s, %s) = [%s, %s), which does not hold the instant", anchor, renews, at, p.Start, p.End)
		}
		if next := billing.PeriodAt(anchor, renews, p.End); !next.Start.Equal(p.End) {
			t.Fatalf("the period after [%s, %s) begins at %s", p.Start, p.End, next.Start)
		}
		if prev := billing.PeriodAt(anchor, renews, p.Start.Add(-time.Nanosecond)); !prev.End.Equal(p.Start) {
			t.Fatalf("the period before [%s, %s) ends at %s", p.Start, p.End, prev.End)
		}
		if same := billing.PeriodAt(anchor, renews, p.Start); same != p {
			t.Fatalf("the period of %s is [%s, %s), not [%s, %s)", p.Start, same.Start, same.End, p.Start, p.End)
		}
		a := anchor
		if a.IsZero() {
			a = time.Unix(0, 0)
		}
		ah, am, as := a.UTC().Clock()
		if h, m, s := p.Start.Clock(); h != ah || m != am || s != as {
			t.Fatalf("[%s, %s) does not begin at the anchor's time of day, %s", p.Start, p.End, a.UTC().Format(time.TimeOnly))
		}
		if months := monthsBetween(p.Start, p.End); renews == billing.Monthly && months != 1 || renews == billing.Yearly && months != 12 {
			t.Fatalf("[%s, %s) is %d months long", p.Start, p.End, months)
		}
		if anchor.IsZero() && renews == billing.Monthly && p != billing.MonthOf(at) {
			t.Fatalf("PeriodAt(zero, monthly, %s) = [%s, %s), not MonthOf", at, p.Start, p.End)
		}
	})
}

func monthsBetween(a, b time.Time) int {
	return (b.Year()-a.Year())*12 + int(b.Month()-a.Month())
}

func TestPlansAt(t *testing.T) {
	ps, err := billing.NewPlans(
		billing.Plan{Name: "free", Credits: 100},
		billing.Plan{Name: "pro", Credits: 10_000},
		billing.Plan{Name: "pro-yearly", Credits: 120_000, Renews: billing.Yearly},
	)
	if err != nil {
		t.Fatal(err)
	}
	anchor := utc(2026, time.January, 31, 0, 0, 0)
	may31 := utc(2026, time.May, 31, 0, 0, 0)
	tests := []struct {
		name       string
		terms      billing.Terms
		at         time.Time
		plan       string
		start, end time.Time
	}{
		{"no change", billing.Terms{Plan: "pro", Anchor: anchor}, utc(2026, time.May, 1, 0, 0, 0), "pro",
			utc(2026, time.April, 30, 0, 0, 0), may31},
		{"a pending change before it is due", billing.Terms{Plan: "pro", Anchor: anchor, PendingPlan: "free", PendingAt: may31},
			may31.Add(-time.Nanosecond), "pro", utc(2026, time.April, 30, 0, 0, 0), may31},
		{"a pending change at its instant", billing.Terms{Plan: "pro", Anchor: anchor, PendingPlan: "free", PendingAt: may31},
			may31, "free", may31, utc(2026, time.June, 30, 0, 0, 0)},
		{"the same cycle keeps the anchor", billing.Terms{Plan: "pro", Anchor: anchor, PendingPlan: "free", PendingAt: may31},
			utc(2026, time.July, 30, 12, 0, 0), "free", utc(2026, time.June, 30, 0, 0, 0), utc(2026, time.July, 31, 0, 0, 0)},
		{"a new cycle is anchored at the change", billing.Terms{Plan: "pro", Anchor: anchor, PendingPlan: "pro-yearly", PendingAt: may31},
			utc(2027, time.January, 31, 0, 0, 0), "pro-yearly", may31, utc(2027, time.May, 31, 0, 0, 0)},
		{"back to monthly", billing.Terms{Plan: "pro-yearly", Anchor: anchor, PendingPlan: "pro", PendingAt: utc(2027, time.January, 31, 0, 0, 0)},
			utc(2027, time.March, 1, 0, 0, 0), "pro", utc(2027, time.February, 28, 0, 0, 0), utc(2027, time.March, 31, 0, 0, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, p, ok := ps.At(tt.terms, tt.at)
			if !ok || plan.Name != tt.plan || !p.Start.Equal(tt.start) || !p.End.Equal(tt.end) {
				t.Errorf("At(%+v, %s) = %s, [%s, %s), %v; want %s, [%s, %s), true", tt.terms, tt.at, plan.Name, p.Start, p.End, ok, tt.plan, tt.start, tt.end)
			}
		})
	}
	if _, _, ok := ps.At(billing.Terms{Plan: "team"}, anchor); ok {
		t.Error("At of a plan that is not configured: ok")
	}
}

// FuzzPlansAtNeverBackwards checks that a change of plan at a renewal, of cycle or
// not, never moves an account's period backwards: along time, the periods' starts
// never decrease, and the period in force at the change begins at it.
func FuzzPlansAtNeverBackwards(f *testing.F) {
	f.Add(utc(2026, time.January, 31, 0, 0, 0).Unix(), int64(3), uint8(0), uint8(2))
	f.Add(utc(2024, time.February, 29, 6, 0, 0).Unix(), int64(1), uint8(2), uint8(0))
	f.Fuzz(func(t *testing.T, anchorSec, periods int64, from, to uint8) {
		ps, err := billing.NewPlans(billing.Plan{Name: "a"}, billing.Plan{Name: "b", Renews: billing.Monthly},
			billing.Plan{Name: "y", Renews: billing.Yearly})
		if err != nil {
			t.Fatal(err)
		}
		names := ps.Names()
		const span = 200 * 366 * 24 * 60 * 60
		anchor := time.Unix((anchorSec%span+span)%span, 0)
		old, _ := ps.Lookup(names[int(from)%len(names)])
		// The change is recorded some periods after the anchor, for the end of the
		// period it is recorded in.
		recorded := anchor
		for range periods%30 + 1 {
			recorded = billing.PeriodAt(anchor, old.Renews, recorded).End
		}
		recorded = recorded.Add(-time.Hour)
		due := billing.PeriodAt(anchor, old.Renews, recorded).End
		tm := billing.Terms{Plan: old.Name, Anchor: anchor, PendingPlan: names[int(to)%len(names)], PendingAt: due}
		var last billing.Period
		for at := recorded; at.Before(due.AddDate(3, 0, 0)); at = at.Add(97 * time.Hour) {
			_, p, ok := ps.At(tm, at)
			if !ok {
				t.Fatal("a configured plan is not found")
			}
			if p.Start.Before(last.Start) {
				t.Fatalf("%+v: the period at %s, [%s, %s), begins before the period before it, [%s, %s)", tm, at, p.Start, p.End, last.Start, last.End)
			}
			last = p
		}
		if _, p, _ := ps.At(tm, due); !p.Start.Equal(due) {
			t.Fatalf("%+v: the period at the change is [%s, %s)", tm, p.Start, p.End)
		}
		if _, p, _ := ps.At(tm, due.Add(-time.Nanosecond)); !p.End.Equal(due) {
			t.Fatalf("%+v: the period before the change is [%s, %s)", tm, p.Start, p.End)
		}
	})
}

func TestNewPlansRenews(t *testing.T) {
	for _, c := range []billing.Cycle{"", billing.Monthly, billing.Yearly} {
		if _, err := billing.NewPlans(billing.Plan{Name: "p", Renews: c}); err != nil {
			t.Errorf("NewPlans with renews %q: %v", c, err)
		}
	}
	_, err := billing.NewPlans(billing.Plan{Name: "p", Renews: "weekly"})
	if err == nil || !strings.Contains(err.Error(), `plan "p": renews must be "monthly" or "yearly"`) {
		t.Errorf("NewPlans with renews weekly: %v", err)
	}
	if got := (billing.Plan{}).Cycle(); got != billing.Monthly {
		t.Errorf("the cycle of a plan that names none is %q", got)
	}
}
