package billing_test

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/driver"
)

func TestNewPlansRejects(t *testing.T) {
	ok := billing.Plan{Name: "pro", Credits: 10_000, RatePerMinute: 600, Concurrency: 10, GraphQLMaxAPIs: 10}
	with := func(f func(*billing.Plan)) billing.Plan {
		p := ok
		f(&p)
		return p
	}
	tests := []struct {
		name    string
		plans   []billing.Plan
		wantErr string // a substring of the error
	}{
		{"empty name", []billing.Plan{with(func(p *billing.Plan) { p.Name = "" })}, "a plan needs a name"},
		{"name too long", []billing.Plan{with(func(p *billing.Plan) { p.Name = strings.Repeat("x", 65) })}, "a plan needs a name"},
		{"negative credits", []billing.Plan{with(func(p *billing.Plan) { p.Credits = -1 })}, `plan "pro": credits cannot be negative`},
		{"negative rate", []billing.Plan{with(func(p *billing.Plan) { p.RatePerMinute = -1 })}, `plan "pro": limits cannot be negative`},
		{"negative burst", []billing.Plan{with(func(p *billing.Plan) { p.Burst = -1 })}, `plan "pro": limits cannot be negative`},
		{"negative concurrency", []billing.Plan{with(func(p *billing.Plan) { p.Concurrency = -1 })}, `plan "pro": limits cannot be negative`},
		{"negative GraphQL cap", []billing.Plan{with(func(p *billing.Plan) { p.GraphQLMaxAPIs = -1 })}, `plan "pro": limits cannot be negative`},
		{"negative batch size", []billing.Plan{with(func(p *billing.Plan) { p.BatchMaxItems = -1 })}, `plan "pro": batch_max_items must be between 1 and 1000 (0 means 100)`},
		{"batch size above the maximum", []billing.Plan{with(func(p *billing.Plan) { p.BatchMaxItems = 1001 })}, `plan "pro": batch_max_items must be between 1 and 1000`},
		// A rate above one call per nanosecond has no emission interval, and a bucket
		// whose refill time overflows int64 would deny every call.
		{"rate above one per nanosecond", []billing.Plan{with(func(p *billing.Plan) { p.RatePerMinute = math.MaxInt })}, `plan "pro": rate limit out of range`},
		{"burst whose refill overflows", []billing.Plan{with(func(p *billing.Plan) { p.RatePerMinute, p.Burst = 1, math.MaxInt32 })}, `plan "pro": rate limit out of range`},
		{"duplicate", []billing.Plan{ok, {Name: "free"}, ok}, `plan "pro" is defined twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps, err := billing.NewPlans(tt.plans...)
			if err == nil {
				t.Fatalf("NewPlans(%+v) = %v, nil; want an error", tt.plans, ps)
			}
			if ps != nil {
				t.Errorf("NewPlans returned plans %v with its error", ps)
			}
			if !strings.HasPrefix(err.Error(), "billing: ") || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q: want the prefix %q and %q", err, "billing: ", tt.wantErr)
			}
		})
	}
}

func TestNewPlansAccepts(t *testing.T) {
	tests := []struct {
		name string
		plan billing.Plan
	}{
		{"zero limits mean unlimited", billing.Plan{Name: "free"}},
		{"64-character name", billing.Plan{Name: strings.Repeat("p", 64)}},
		{"one call per nanosecond", billing.Plan{Name: "fast", RatePerMinute: int(time.Minute / time.Nanosecond)}},
		{"large burst at a slow rate", billing.Plan{Name: "slow", RatePerMinute: 1, Burst: 1_000_000}},
		{"burst without a rate is ignored", billing.Plan{Name: "b", Burst: 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps, err := billing.NewPlans(tt.plan)
			if err != nil {
				t.Fatalf("NewPlans(%+v): %v", tt.plan, err)
			}
			if got, ok := ps.Lookup(tt.plan.Name); !ok || got != tt.plan {
				t.Errorf("Lookup(%q) = %+v, %v; want %+v, true", tt.plan.Name, got, ok, tt.plan)
			}
			// An accepted rate limit works: a fresh key gets its first call and the
			// rest of its burst.
			if l, ok := tt.plan.RateLimit(); ok {
				d, _ := driver.GCRA(l, 0, t0.UnixNano())
				if !d.Allowed || d.Remaining != l.Burst-1 {
					t.Errorf("GCRA(%+v) on a fresh key = %+v, want allowed with %d remaining", l, d, l.Burst-1)
				}
			}
		})
	}
}

func TestPlansLookupAndNames(t *testing.T) {
	pro := billing.Plan{Name: "pro", Credits: 10_000, RatePerMinute: 600, Concurrency: 10, GraphQLMaxAPIs: 10}
	free := billing.Plan{Name: "free", Credits: 100, RatePerMinute: 10, Concurrency: 1, GraphQLMaxAPIs: 1}
	ent := billing.Plan{Name: "enterprise", Credits: 1_000_000}
	ps, err := billing.NewPlans(pro, free, ent)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []billing.Plan{pro, free, ent} {
		if got, ok := ps.Lookup(want.Name); !ok || got != want {
			t.Errorf("Lookup(%q) = %+v, %v; want %+v, true", want.Name, got, ok, want)
		}
	}
	for _, name := range []string{"", "Pro", "team"} {
		if got, ok := ps.Lookup(name); ok || got != (billing.Plan{}) {
			t.Errorf("Lookup(%q) = %+v, %v; want the zero plan, false", name, got, ok)
		}
	}
	if got, want := ps.Names(), []string{"enterprise", "free", "pro"}; !slices.Equal(got, want) {
		t.Errorf("Names() = %q, want %q", got, want)
	}

	empty, err := billing.NewPlans()
	if err != nil {
		t.Fatal(err)
	}
	if got := empty.Names(); len(got) != 0 {
		t.Errorf("Names() of no plans = %q", got)
	}
}

func TestPlanRateLimit(t *testing.T) {
	tests := []struct {
		name   string
		plan   billing.Plan
		want   billing.Limit
		wantOK bool
	}{
		{"no rate limit", billing.Plan{Name: "p"}, billing.Limit{}, false},
		{"burst without a rate", billing.Plan{Name: "p", Burst: 7}, billing.Limit{}, false},
		{"burst defaults to the rate", billing.Plan{Name: "p", RatePerMinute: 60},
			billing.Limit{Rate: 60, Per: time.Minute, Burst: 60}, true},
		{"explicit burst", billing.Plan{Name: "p", RatePerMinute: 600, Burst: 50},
			billing.Limit{Rate: 600, Per: time.Minute, Burst: 50}, true},
		{"burst above the rate", billing.Plan{Name: "p", RatePerMinute: 1, Burst: 5},
			billing.Limit{Rate: 1, Per: time.Minute, Burst: 5}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.plan.RateLimit()
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("RateLimit() = %+v, %v; want %+v, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestPlanBatchItems(t *testing.T) {
	tests := []struct {
		name string
		plan billing.Plan
		want int
	}{
		{"default", billing.Plan{Name: "p"}, billing.DefaultBatchMaxItems},
		{"set", billing.Plan{Name: "p", BatchMaxItems: 10}, 10},
		{"the maximum", billing.Plan{Name: "p", BatchMaxItems: billing.MaxBatchItems}, billing.MaxBatchItems},
		{"within the burst", billing.Plan{Name: "p", BatchMaxItems: 100, RatePerMinute: 600}, 100},
		{"held to the burst", billing.Plan{Name: "p", BatchMaxItems: 10, RatePerMinute: 5}, 5},
		{"default held to an explicit burst", billing.Plan{Name: "p", RatePerMinute: 6000, Burst: 20}, 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.plan.BatchItems(); got != tt.want {
				t.Errorf("BatchItems() = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestMonthOf(t *testing.T) {
	utc := func(y int, m time.Month, d, h, min, s, ns int) time.Time {
		return time.Date(y, m, d, h, min, s, ns, time.UTC)
	}
	month := func(y int, m time.Month) billing.Period {
		return billing.Period{Start: utc(y, m, 1, 0, 0, 0, 0), End: utc(y, m+1, 1, 0, 0, 0, 0)}
	}
	plus2 := time.FixedZone("UTC+2", 2*60*60)
	minus5 := time.FixedZone("UTC-5", -5*60*60)
	tests := []struct {
		name string
		t    time.Time
		want billing.Period
	}{
		{"mid-month", utc(2025, time.March, 14, 15, 9, 26, 535), month(2025, time.March)},
		{"first instant of a month", utc(2025, time.March, 1, 0, 0, 0, 0), month(2025, time.March)},
		{"last nanosecond of a month", utc(2025, time.March, 31, 23, 59, 59, 999_999_999), month(2025, time.March)},
		{"December ends in January", utc(2024, time.December, 31, 23, 59, 59, 0),
			billing.Period{Start: utc(2024, time.December, 1, 0, 0, 0, 0), End: utc(2025, time.January, 1, 0, 0, 0, 0)}},
		{"leap February", utc(2024, time.February, 29, 12, 0, 0, 0),
			billing.Period{Start: utc(2024, time.February, 1, 0, 0, 0, 0), End: utc(2024, time.March, 1, 0, 0, 0, 0)}},
		// 1 March 00:30 at UTC+2 is still 28 February in UTC.
		{"east of UTC, local month already turned", time.Date(2025, time.March, 1, 0, 30, 0, 0, plus2), month(2025, time.February)},
		// 31 March 20:00 at UTC-5 is already 1 April in UTC.
		{"west of UTC, UTC month already turned", time.Date(2025, time.March, 31, 20, 0, 0, 0, minus5), month(2025, time.April)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := monthOfChecked(t, tt.t)
			if !got.Start.Equal(tt.want.Start) || !got.End.Equal(tt.want.End) {
				t.Errorf("MonthOf(%s) = [%s, %s), want [%s, %s)", tt.t, got.Start, got.End, tt.want.Start, tt.want.End)
			}
		})
	}
}

// monthOfChecked calls MonthOf and checks what holds for every instant: the period is
// in UTC and contains t.
func monthOfChecked(t *testing.T, at time.Time) billing.Period {
	t.Helper()
	p := billing.MonthOf(at)
	if p.Start.Location() != time.UTC || p.End.Location() != time.UTC {
		t.Errorf("MonthOf(%s) is not in UTC: [%s, %s)", at, p.Start, p.End)
	}
	if at.Before(p.Start) || !at.Before(p.End) {
		t.Errorf("MonthOf(%s) = [%s, %s) does not contain it", at, p.Start, p.End)
	}
	return p
}
