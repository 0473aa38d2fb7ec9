package driver_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/tollgate-dev/tollgate/billing/driver"
)

// t0 is the fixed instant the tests of this package start from: mid-March 2025, UTC.
var t0 = time.Date(2025, time.March, 14, 15, 9, 26, 0, time.UTC)

// script returns the instants of a sequence of events, as offsets from the start, for a
// limit with emission interval e and burst b. Offsets never decrease.
type script struct {
	name   string
	events func(e time.Duration, b int) []time.Duration
}

var scripts = []script{
	{"burst then drain", func(e time.Duration, b int) []time.Duration {
		// b+3 events at the same instant: b allowed, 3 denied.
		return repeat(0, b+3)
	}},
	{"exact interval boundaries", func(e time.Duration, b int) []time.Duration {
		// Empty the bucket, then one event exactly when each token comes back, and
		// one a millisecond before the next token.
		ev := repeat(0, b)
		for k := 1; k <= b+5; k++ {
			ev = append(ev, time.Duration(k)*e-time.Millisecond, time.Duration(k)*e)
		}
		return ev
	}},
	{"twice the sustained rate", func(e time.Duration, b int) []time.Duration {
		var ev []time.Duration
		for k := range 4*b + 10 {
			ev = append(ev, time.Duration(k)*e/2)
		}
		return ev
	}},
	{"quiet period refills the bucket", func(e time.Duration, b int) []time.Duration {
		ev := repeat(0, b+1)
		quiet := 10 * time.Duration(b) * e
		ev = append(ev, repeat(quiet, b+2)...)
		// Half the bucket back, then a burst.
		half := quiet + time.Duration(b/2+1)*e
		return append(ev, repeat(half, b)...)
	}},
	{"pseudo-random gaps", func(e time.Duration, b int) []time.Duration {
		r := rand.New(rand.NewPCG(1, uint64(b)))
		var ev []time.Duration
		at := time.Duration(0)
		for range 3*b + 200 {
			// Gaps from 0 to 2e in microseconds, with a third of events arriving
			// together with the previous one.
			if r.IntN(3) != 0 {
				at += time.Duration(r.Int64N(int64(2*e/time.Microsecond))) * time.Microsecond
			}
			ev = append(ev, at)
		}
		return ev
	}},
}

func repeat(at time.Duration, n int) []time.Duration {
	ev := make([]time.Duration, n)
	for i := range ev {
		ev[i] = at
	}
	return ev
}

// TestGCRAMatchesTokenBucket runs scripted event sequences through GCRA and through a
// golang.org/x/time/rate.Limiter started at the same instant (with a full bucket, as
// x/time/rate starts), and requires the same decision for every event. It also checks
// each decision's numbers against the limiter's token count.
func TestGCRAMatchesTokenBucket(t *testing.T) {
	limits := []driver.Limit{
		{Rate: 600, Per: time.Minute, Burst: 600},
		{Rate: 5, Per: time.Minute, Burst: 5},
		{Rate: 60, Per: time.Minute, Burst: 1},
		{Rate: 10, Per: time.Second, Burst: 3},
	}
	for _, l := range limits {
		for _, s := range scripts {
			t.Run(fmt.Sprintf("%d per %s burst %d/%s", l.Rate, l.Per, l.Burst, s.name), func(t *testing.T) {
				e := l.Interval()
				lim := rate.NewLimiter(rate.Limit(float64(l.Rate)/l.Per.Seconds()), l.Burst)
				var tat int64
				allowed, denied := 0, 0
				for i, off := range s.events(e, l.Burst) {
					now := t0.Add(off)
					want := lim.AllowN(now, 1)
					d, next := driver.GCRA(l, tat, now.UnixNano())
					if d.Allowed != want {
						t.Fatalf("event %d at +%s: GCRA allowed=%v, x/time/rate allowed=%v (tat +%s)",
							i, off, d.Allowed, want, time.Duration(tat-t0.UnixNano()))
					}
					// After the event (recorded or not), the limiter holds this many tokens.
					tokens := lim.TokensAt(now)
					if d.Allowed {
						allowed++
						if wantTat := max(tat, now.UnixNano()) + int64(e); next != wantTat {
							t.Fatalf("event %d: new tat = %d, want %d", i, next, wantTat)
						}
						if want := int(math.Floor(tokens + 1e-9)); d.Remaining != want {
							t.Fatalf("event %d: Remaining = %d, want %d (%.6f tokens left)", i, d.Remaining, want, tokens)
						}
						if d.RetryAfter != 0 {
							t.Fatalf("event %d: allowed with RetryAfter %s", i, d.RetryAfter)
						}
						// Full again once the missing tokens have come back.
						wantReset := time.Duration((float64(l.Burst) - tokens) * float64(e))
						if diff := (d.ResetAfter - wantReset).Abs(); diff > time.Microsecond {
							t.Fatalf("event %d: ResetAfter = %s, want about %s", i, d.ResetAfter, wantReset)
						}
					} else {
						denied++
						if next != tat {
							t.Fatalf("event %d: denied event moved tat from %d to %d", i, tat, next)
						}
						if d.Remaining != 0 || d.RetryAfter <= 0 {
							t.Fatalf("event %d: denied with Remaining %d, RetryAfter %s", i, d.Remaining, d.RetryAfter)
						}
						// Allowed again once the one missing token has come back.
						wantRetry := time.Duration((1 - tokens) * float64(e))
						if diff := (d.RetryAfter - wantRetry).Abs(); diff > time.Microsecond {
							t.Fatalf("event %d: RetryAfter = %s, want about %s", i, d.RetryAfter, wantRetry)
						}
					}
					tat = next
				}
				// Every script is built to reach both outcomes.
				if allowed == 0 || denied == 0 {
					t.Errorf("allowed %d, denied %d: the script does not exercise both outcomes", allowed, denied)
				}
			})
		}
	}
}

// TestGCRAExact checks hand-computed decisions.
func TestGCRAExact(t *testing.T) {
	n := t0.UnixNano()
	at := func(d time.Duration) int64 { return n + int64(d) }
	perMinute := func(rate, burst int) driver.Limit {
		return driver.Limit{Rate: rate, Per: time.Minute, Burst: burst}
	}
	tests := []struct {
		name    string
		l       driver.Limit
		tat     int64
		now     int64
		want    driver.RateDecision
		wantTat int64
	}{
		{
			name: "60/min burst 1, fresh key",
			l:    perMinute(60, 1), tat: 0, now: n,
			want:    driver.RateDecision{Allowed: true, Remaining: 0, ResetAfter: time.Second},
			wantTat: at(time.Second),
		},
		{
			name: "60/min burst 1, 250ms after an event",
			l:    perMinute(60, 1), tat: at(time.Second), now: at(250 * time.Millisecond),
			want:    driver.RateDecision{Remaining: 0, RetryAfter: 750 * time.Millisecond, ResetAfter: 750 * time.Millisecond},
			wantTat: at(time.Second),
		},
		{
			name: "60/min burst 1, exactly one interval after an event",
			l:    perMinute(60, 1), tat: at(time.Second), now: at(time.Second),
			want:    driver.RateDecision{Allowed: true, Remaining: 0, ResetAfter: time.Second},
			wantTat: at(2 * time.Second),
		},
		{
			name: "5/min burst 5, fresh key",
			l:    perMinute(5, 5), tat: 0, now: n,
			want:    driver.RateDecision{Allowed: true, Remaining: 4, ResetAfter: 12 * time.Second},
			wantTat: at(12 * time.Second),
		},
		{
			name: "5/min burst 5, last token of the burst",
			l:    perMinute(5, 5), tat: at(48 * time.Second), now: n,
			want:    driver.RateDecision{Allowed: true, Remaining: 0, ResetAfter: time.Minute},
			wantTat: at(time.Minute),
		},
		{
			name: "5/min burst 5, bucket empty",
			l:    perMinute(5, 5), tat: at(time.Minute), now: n,
			want:    driver.RateDecision{Remaining: 0, RetryAfter: 12 * time.Second, ResetAfter: time.Minute},
			wantTat: at(time.Minute),
		},
		{
			name: "5/min burst 5, 30s after emptying (2.5 tokens back)",
			l:    perMinute(5, 5), tat: at(time.Minute), now: at(30 * time.Second),
			want:    driver.RateDecision{Allowed: true, Remaining: 1, ResetAfter: 42 * time.Second},
			wantTat: at(72 * time.Second),
		},
		{
			name: "600/min burst 600, fresh key",
			l:    perMinute(600, 600), tat: 0, now: n,
			want:    driver.RateDecision{Allowed: true, Remaining: 599, ResetAfter: 100 * time.Millisecond},
			wantTat: at(100 * time.Millisecond),
		},
		{
			name: "600/min burst 600, stale tat counts as a full bucket",
			l:    perMinute(600, 600), tat: at(-time.Hour), now: n,
			want:    driver.RateDecision{Allowed: true, Remaining: 599, ResetAfter: 100 * time.Millisecond},
			wantTat: at(100 * time.Millisecond),
		},
		{
			name: "10/s burst 3, 50ms into an empty bucket",
			l:    driver.Limit{Rate: 10, Per: time.Second, Burst: 3}, tat: at(300 * time.Millisecond), now: at(50 * time.Millisecond),
			want:    driver.RateDecision{Remaining: 0, RetryAfter: 50 * time.Millisecond, ResetAfter: 250 * time.Millisecond},
			wantTat: at(300 * time.Millisecond),
		},
		{
			name: "10/s burst 3, one token back",
			l:    driver.Limit{Rate: 10, Per: time.Second, Burst: 3}, tat: at(300 * time.Millisecond), now: at(100 * time.Millisecond),
			want:    driver.RateDecision{Allowed: true, Remaining: 0, ResetAfter: 300 * time.Millisecond},
			wantTat: at(400 * time.Millisecond),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, tat := driver.GCRA(tt.l, tt.tat, tt.now)
			if got != tt.want {
				t.Errorf("GCRA = %+v, want %+v", got, tt.want)
			}
			if tat != tt.wantTat {
				t.Errorf("tat = %s after t0, want %s", time.Duration(tat-n), time.Duration(tt.wantTat-n))
			}
		})
	}
}

func TestLimitInterval(t *testing.T) {
	tests := []struct {
		l    driver.Limit
		want time.Duration
	}{
		{driver.Limit{Rate: 600, Per: time.Minute, Burst: 1}, 100 * time.Millisecond},
		{driver.Limit{Rate: 5, Per: time.Minute, Burst: 1}, 12 * time.Second},
		{driver.Limit{Rate: 10, Per: time.Second, Burst: 1}, 100 * time.Millisecond},
		{driver.Limit{Rate: 1_000_000_000, Per: time.Minute, Burst: 1}, 60 * time.Nanosecond},
	}
	for _, tt := range tests {
		if got := tt.l.Interval(); got != tt.want {
			t.Errorf("%+v.Interval() = %s, want %s", tt.l, got, tt.want)
		}
	}
}
