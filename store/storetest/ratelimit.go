package storetest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/billing/driver"

	"golang.org/x/time/rate"
)

// TestRateLimiter checks that a [driver.RateLimiter] decides exactly as [driver.GCRA]
// does, and as golang.org/x/time/rate does for a token bucket of the same size and rate,
// over scripted timelines; that a denied event and Peek change nothing; that keys are
// independent; and that concurrent events at one instant admit exactly the burst.
//
// newLimiter is called once per subtest and must return an empty limiter; it registers
// any teardown with t.Cleanup. The subtests run in parallel. Run the suite with -race.
func TestRateLimiter(t *testing.T, newLimiter func(t *testing.T) driver.RateLimiter) {
	t.Helper()
	run(t, newLimiter, rateLimiterRows)
}

var rateLimiterRows = []behaviour[driver.RateLimiter]{
	{"ScriptedMinute",
		"At 60 per minute with a burst of 5, five events at one instant go ahead, the sixth waits 1s, and one more goes ahead 1s later.",
		rlScriptedMinute},
	{"PartialRefill",
		"Between events the bucket refills at Rate/Per: Remaining counts whole events and RetryAfter is the time to the next whole token.",
		rlPartialRefill},
	{"MatchesReferences",
		"Over long timelines, every Peek and Allow decision equals driver.GCRA and agrees with golang.org/x/time/rate.",
		rlMatchesReferences},
	{"DeniedChangesNothing",
		"A denied event records nothing: Peek before and after it agree and the next allowed moment does not move.",
		rlDeniedChangesNothing},
	{"PeekChangesNothing",
		"Peek never records an event: it predicts the next Allow exactly, however often it is called.",
		rlPeekChangesNothing},
	{"KeysIndependent",
		"Events under one key do not count against another key.",
		rlKeysIndependent},
	{"IdleRefill",
		"After an idle spell the bucket is full again: Burst events go ahead at once, then the next is denied.",
		rlIdleRefill},
	{"CanceledContext",
		"Allow and Peek given a canceled context return an error matching context.Canceled and record nothing.",
		rlCanceledContext},
	{"ConcurrentAllowAtOneInstant",
		"Events from many goroutines at one instant admit exactly Burst of them, each seeing a distinct Remaining.",
		rlConcurrentAllow},
	{"AllowNScripted",
		"AllowN decides n events together: all of them go ahead, Remaining counting the events left, or none does, RetryAfter being the time until n fit.",
		rlAllowNScripted},
	{"AllowNMatchesReferences",
		"Over long timelines mixing 1 to Burst events at once, every AllowN decision equals driver.GCRAN and agrees with x/time/rate's AllowN.",
		rlAllowNMatchesReferences},
	{"AllowNDeniedChangesNothing",
		"n events denied together record none of them: a single event still goes ahead at once afterwards.",
		rlAllowNDeniedChangesNothing},
	{"AllowNOutOfRange",
		"AllowN of 0 events, or of more than Burst (which no bucket could ever hold at once), is an error and records nothing.",
		rlAllowNOutOfRange},
	{"ConcurrentAllowN",
		"Groups of events from many goroutines at one instant admit whole groups only, exactly as many as the burst holds.",
		rlConcurrentAllowN},
}

// rateRef is the reference for one key: the GCRA arithmetic of package billing, and a
// golang.org/x/time/rate limiter of the same rate and burst.
type rateRef struct {
	l      driver.Limit
	tat    int64
	x      *rate.Limiter
	perSec float64
}

func newRateRef(l driver.Limit) *rateRef {
	perSec := float64(l.Rate) / l.Per.Seconds()
	return &rateRef{l: l, x: rate.NewLimiter(rate.Limit(perSec), l.Burst), perSec: perSec}
}

// peek returns the GCRA decision at now without recording it.
func (r *rateRef) peek(now time.Time) driver.RateDecision {
	d, _ := driver.GCRA(r.l, r.tat, now.UnixNano())
	return d
}

// allow returns the GCRA decision at now, and what x/time/rate decides for the same
// event; both references record it if it is allowed.
func (r *rateRef) allow(now time.Time) (gcra, xrate driver.RateDecision) {
	return r.allowN(now, 1)
}

// allowN is allow for n events together.
func (r *rateRef) allowN(now time.Time, n int) (gcra, xrate driver.RateDecision) {
	d, tat := driver.GCRAN(r.l, n, r.tat, now.UnixNano())
	if d.Allowed {
		r.tat = tat
	}
	tokens := r.x.TokensAt(now)
	allowed := r.x.AllowN(now, n)
	return d, r.fromTokens(tokens, n, allowed)
}

// fromTokens is the decision on n events that a token bucket holding tokens implies.
func (r *rateRef) fromTokens(tokens float64, n int, allowed bool) driver.RateDecision {
	dur := func(events float64) time.Duration {
		return time.Duration(math.Round(events / r.perSec * float64(time.Second)))
	}
	if allowed {
		after := tokens - float64(n)
		return driver.RateDecision{Allowed: true, Remaining: int(math.Floor(after)), ResetAfter: dur(float64(r.l.Burst) - after)}
	}
	return driver.RateDecision{RetryAfter: dur(float64(n) - tokens), ResetAfter: dur(float64(r.l.Burst) - tokens)}
}

// near reports whether two decisions agree, durations within a microsecond (x/time/rate
// computes in floating point).
func near(a, b driver.RateDecision) bool {
	within := func(x, y time.Duration) bool { return (x - y).Abs() <= time.Microsecond }
	return a.Allowed == b.Allowed && a.Remaining == b.Remaining &&
		within(a.RetryAfter, b.RetryAfter) && within(a.ResetAfter, b.ResetAfter)
}

func fmtDecision(d driver.RateDecision) string {
	return fmt.Sprintf("{Allowed %v, Remaining %d, RetryAfter %v, ResetAfter %v}", d.Allowed, d.Remaining, d.RetryAfter, d.ResetAfter)
}

// allow calls Allow and fails the test on an error.
func allow(t *testing.T, r driver.RateLimiter, key string, l driver.Limit, now time.Time) driver.RateDecision {
	t.Helper()
	d, err := r.Allow(t.Context(), key, l, now)
	must(t, "Allow", err)
	return d
}

// peek calls Peek and fails the test on an error.
func peek(t *testing.T, r driver.RateLimiter, key string, l driver.Limit, now time.Time) driver.RateDecision {
	t.Helper()
	d, err := r.Peek(t.Context(), key, l, now)
	must(t, "Peek", err)
	return d
}

// A rateStep is one event of a script: its instant (after t0), and the decision wanted.
type rateStep struct {
	at   time.Duration
	want driver.RateDecision
}

// runScript plays the steps through Allow, checking each decision against the script
// and the script against both references.
func runScript(t *testing.T, r driver.RateLimiter, key string, l driver.Limit, steps []rateStep) {
	t.Helper()
	ref := newRateRef(l)
	for i, s := range steps {
		now := at(s.at)
		g, x := ref.allow(now)
		if g != s.want || !near(x, s.want) {
			t.Fatalf("suite bug: step %d at +%v: script says %s, GCRA %s, x/time/rate %s", i, s.at, fmtDecision(s.want), fmtDecision(g), fmtDecision(x))
		}
		if got := allow(t, r, key, l, now); got != s.want {
			t.Errorf("step %d: Allow at +%v = %s, want %s", i, s.at, fmtDecision(got), fmtDecision(s.want))
		}
	}
}

func ok(remaining int, reset time.Duration) driver.RateDecision {
	return driver.RateDecision{Allowed: true, Remaining: remaining, ResetAfter: reset}
}

func denied(retry, reset time.Duration) driver.RateDecision {
	return driver.RateDecision{RetryAfter: retry, ResetAfter: reset}
}

var perMinute5 = driver.Limit{Rate: 60, Per: time.Minute, Burst: 5}

func rlScriptedMinute(t *testing.T, r driver.RateLimiter) {
	const s = time.Second
	runScript(t, r, newIDs().id("k"), perMinute5, []rateStep{
		{0, ok(4, 1*s)},
		{0, ok(3, 2*s)},
		{0, ok(2, 3*s)},
		{0, ok(1, 4*s)},
		{0, ok(0, 5*s)},
		{0, denied(1*s, 5*s)},
		{500 * time.Millisecond, denied(500*time.Millisecond, 4500*time.Millisecond)},
		{1 * s, ok(0, 5*s)},
		{1 * s, denied(1*s, 5*s)},
	})
}

func rlPartialRefill(t *testing.T, r driver.RateLimiter) {
	const s, ms = time.Second, time.Millisecond
	runScript(t, r, newIDs().id("k"), perMinute5, []rateStep{
		{0, ok(4, 1*s)},
		{0, ok(3, 2*s)},
		{0, ok(2, 3*s)},
		{0, ok(1, 4*s)},
		{0, ok(0, 5*s)},
		{2500 * ms, ok(1, 3500*ms)},
		{2500 * ms, ok(0, 4500*ms)},
		{2500 * ms, denied(500*ms, 4500*ms)},
		{3 * s, ok(0, 5*s)},
		{6 * s, ok(2, 3*s)},
	})
}

func rlMatchesReferences(t *testing.T, r driver.RateLimiter) {
	// Rates are powers of two per second and gaps multiples of 1/8 s, so that the
	// floating-point arithmetic of x/time/rate is exact.
	limits := []driver.Limit{
		{Rate: 60, Per: time.Minute, Burst: 5},
		{Rate: 120, Per: time.Minute, Burst: 1},
		{Rate: 30, Per: time.Minute, Burst: 3},
		{Rate: 240, Per: time.Minute, Burst: 10},
		{Rate: 480, Per: time.Minute, Burst: 2},
		{Rate: 3600, Per: time.Hour, Burst: 4},
		{Rate: 1, Per: time.Second, Burst: 1},
	}
	const ms = time.Millisecond
	gaps := []time.Duration{0, 0, 0, 0, 125 * ms, 250 * ms, 500 * ms, 750 * ms, time.Second, 1875 * ms, 5 * time.Second, time.Minute}
	n := newIDs()
	for li, l := range limits {
		key := n.id(fmt.Sprintf("limit%d", li))
		ref := newRateRef(l)
		rng := rand.New(rand.NewPCG(uint64(li), 2030))
		now := t0
		for i := range 400 {
			now = now.Add(gaps[rng.IntN(len(gaps))])
			step := fmt.Sprintf("limit %d/%v burst %d, event %d at +%v", l.Rate, l.Per, l.Burst, i, now.Sub(t0))
			wantPeek := ref.peek(now)
			if got := peek(t, r, key, l, now); got != wantPeek {
				t.Errorf("%s: Peek = %s, GCRA says %s", step, fmtDecision(got), fmtDecision(wantPeek))
				break
			}
			g, x := ref.allow(now)
			if !near(g, x) {
				t.Fatalf("suite bug: %s: GCRA says %s but x/time/rate %s", step, fmtDecision(g), fmtDecision(x))
			}
			got := allow(t, r, key, l, now)
			if got != g {
				t.Errorf("%s: Allow = %s, GCRA says %s", step, fmtDecision(got), fmtDecision(g))
				break
			}
			if !near(got, x) {
				t.Errorf("%s: Allow = %s, x/time/rate says %s", step, fmtDecision(got), fmtDecision(x))
				break
			}
		}
	}
}

func rlDeniedChangesNothing(t *testing.T, r driver.RateLimiter) {
	key := newIDs().id("k")
	l := driver.Limit{Rate: 60, Per: time.Minute, Burst: 3}
	for range 3 {
		allow(t, r, key, l, t0)
	}
	now := at(500 * time.Millisecond)
	before := peek(t, r, key, l, now)
	for i := range 10 {
		if d := allow(t, r, key, l, now); d.Allowed || d != before {
			t.Fatalf("denied Allow #%d = %s, want %s as Peek predicted", i, fmtDecision(d), fmtDecision(before))
		}
	}
	if after := peek(t, r, key, l, now); after != before {
		t.Errorf("Peek after denied events = %s, before them %s", fmtDecision(after), fmtDecision(before))
	}
	if d := allow(t, r, key, l, at(time.Second)); d != ok(0, 3*time.Second) {
		t.Errorf("Allow at +1s after denied events = %s, want %s", fmtDecision(d), fmtDecision(ok(0, 3*time.Second)))
	}
}

func rlPeekChangesNothing(t *testing.T, r driver.RateLimiter) {
	key := newIDs().id("k")
	for i := range 20 {
		if d := peek(t, r, key, perMinute5, t0); d != ok(4, time.Second) {
			t.Fatalf("Peek #%d of a fresh key = %s, want %s", i, fmtDecision(d), fmtDecision(ok(4, time.Second)))
		}
	}
	for i := range 7 {
		now := at(time.Duration(i) * 250 * time.Millisecond)
		p1 := peek(t, r, key, perMinute5, now)
		p2 := peek(t, r, key, perMinute5, now)
		a := allow(t, r, key, perMinute5, now)
		if p1 != p2 || p1 != a {
			t.Errorf("event %d: Peek %s, Peek again %s, then Allow %s; want all three equal", i, fmtDecision(p1), fmtDecision(p2), fmtDecision(a))
		}
	}
}

func rlKeysIndependent(t *testing.T, r driver.RateLimiter) {
	n := newIDs()
	a, b := n.id("a"), n.id("b")
	l := driver.Limit{Rate: 60, Per: time.Minute, Burst: 2}
	allow(t, r, a, l, t0)
	allow(t, r, a, l, t0)
	if d := allow(t, r, a, l, t0); d.Allowed {
		t.Fatalf("third event of key a at one instant allowed with burst 2: %s", fmtDecision(d))
	}
	if d := allow(t, r, b, l, t0); d != ok(1, time.Second) {
		t.Errorf("first event of key b = %s, want %s (key a is full, b is not)", fmtDecision(d), fmtDecision(ok(1, time.Second)))
	}
}

func rlIdleRefill(t *testing.T, r driver.RateLimiter) {
	key := newIDs().id("k")
	for range 5 {
		allow(t, r, key, perMinute5, t0)
	}
	if d := peek(t, r, key, perMinute5, at(5*time.Second)); d != ok(4, time.Second) {
		t.Errorf("Peek at +5s, one burst after the last event = %s, want a full bucket %s", fmtDecision(d), fmtDecision(ok(4, time.Second)))
	}
	idle := time.Hour
	steps := make([]rateStep, 0, 6)
	for i := range 5 {
		steps = append(steps, rateStep{idle, ok(4-i, time.Duration(i+1)*time.Second)})
	}
	for i, s := range append(steps, rateStep{idle, denied(time.Second, 5*time.Second)}) {
		if d := allow(t, r, key, perMinute5, at(s.at)); d != s.want {
			t.Errorf("event %d after an hour idle = %s, want %s", i, fmtDecision(d), fmtDecision(s.want))
		}
	}
}

func rlCanceledContext(t *testing.T, r driver.RateLimiter) {
	ctx, key := canceled(t), newIDs().id("k")
	allow(t, r, key, perMinute5, t0)
	_, err := r.Allow(ctx, key, perMinute5, t0)
	wantErr(t, "Allow", err, context.Canceled)
	_, err = r.Peek(ctx, key, perMinute5, t0)
	wantErr(t, "Peek", err, context.Canceled)
	if d := peek(t, r, key, perMinute5, t0); d != ok(3, 2*time.Second) {
		t.Errorf("Peek after a canceled Allow = %s, want %s (one event recorded)", fmtDecision(d), fmtDecision(ok(3, 2*time.Second)))
	}
}

func rlConcurrentAllow(t *testing.T, r driver.RateLimiter) {
	const burst = 10
	l := driver.Limit{Rate: 60, Per: time.Minute, Burst: burst}
	remaining := concurrentEvents(t, l, 4, func(ctx context.Context, key string) (driver.RateDecision, error) {
		return r.Allow(ctx, key, l, t0)
	}, denied(time.Second, burst*time.Second))
	if want := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}; !slices.Equal(remaining, want) {
		t.Errorf("%d of %d concurrent events allowed with Remaining %v; want exactly %d, with Remaining %v",
			len(remaining), workers*4, remaining, burst, want)
	}
}

// concurrentEvents runs perWorker decisions by call from each of many goroutines at
// once, on one key, checks that each denial is wantDenied, and returns the Remaining of
// the allowed decisions, sorted.
func concurrentEvents(t *testing.T, l driver.Limit, perWorker int, call func(ctx context.Context, key string) (driver.RateDecision, error), wantDenied driver.RateDecision) []int {
	ctx, key := t.Context(), newIDs().id("k")
	var (
		mu        sync.Mutex
		remaining []int
		wg        sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for range perWorker {
				d, err := call(ctx, key)
				switch {
				case err != nil:
					t.Errorf("%v", err)
					return
				case d.Allowed:
					mu.Lock()
					remaining = append(remaining, d.Remaining)
					mu.Unlock()
				case d != wantDenied:
					t.Errorf("denied decision %s, want %s", fmtDecision(d), fmtDecision(wantDenied))
				}
			}
		})
	}
	wg.Wait()
	slices.Sort(remaining)
	return remaining
}

// allowN calls AllowN and fails the test on an error.
func allowN(t *testing.T, r driver.RateLimiter, key string, l driver.Limit, n int, now time.Time) driver.RateDecision {
	t.Helper()
	d, err := r.AllowN(t.Context(), key, l, n, now)
	must(t, "AllowN", err)
	return d
}

func rlAllowNScripted(t *testing.T, r driver.RateLimiter) {
	const s, ms = time.Second, time.Millisecond
	key := newIDs().id("k")
	steps := []struct {
		at   time.Duration
		n    int
		want driver.RateDecision
	}{
		{0, 3, ok(2, 3*s)},
		{0, 3, denied(1*s, 3*s)},
		{0, 2, ok(0, 5*s)},
		{0, 1, denied(1*s, 5*s)},
		{1500 * ms, 2, denied(500*ms, 3500*ms)},
		{2 * s, 2, ok(0, 5*s)},
		{10 * s, 5, ok(0, 5*s)},
		{time.Minute, 1, ok(4, 1*s)},
	}
	ref := newRateRef(perMinute5)
	for i, st := range steps {
		now := at(st.at)
		if g, x := ref.allowN(now, st.n); g != st.want || !near(x, st.want) {
			t.Fatalf("suite bug: step %d: script says %s, GCRAN %s, x/time/rate %s", i, fmtDecision(st.want), fmtDecision(g), fmtDecision(x))
		}
		if got := allowN(t, r, key, perMinute5, st.n, now); got != st.want {
			t.Errorf("step %d: AllowN(%d) at +%v = %s, want %s", i, st.n, st.at, fmtDecision(got), fmtDecision(st.want))
		}
	}
}

func rlAllowNMatchesReferences(t *testing.T, r driver.RateLimiter) {
	// As in MatchesReferences: exact binary fractions for x/time/rate.
	limits := []driver.Limit{
		{Rate: 60, Per: time.Minute, Burst: 5},
		{Rate: 240, Per: time.Minute, Burst: 10},
		{Rate: 30, Per: time.Minute, Burst: 3},
		{Rate: 3600, Per: time.Hour, Burst: 4},
	}
	const ms = time.Millisecond
	gaps := []time.Duration{0, 0, 0, 125 * ms, 500 * ms, time.Second, 1875 * ms, 5 * time.Second, time.Minute}
	ids := newIDs()
	for li, l := range limits {
		key := ids.id(fmt.Sprintf("limit%d", li))
		ref := newRateRef(l)
		rng := rand.New(rand.NewPCG(uint64(li), 2031))
		now := t0
		for i := range 300 {
			now = now.Add(gaps[rng.IntN(len(gaps))])
			n := 1 + rng.IntN(l.Burst)
			step := fmt.Sprintf("limit %d/%v burst %d, %d events (#%d) at +%v", l.Rate, l.Per, l.Burst, n, i, now.Sub(t0))
			g, x := ref.allowN(now, n)
			if !near(g, x) {
				t.Fatalf("suite bug: %s: GCRAN says %s but x/time/rate %s", step, fmtDecision(g), fmtDecision(x))
			}
			if got := allowN(t, r, key, l, n, now); got != g {
				t.Errorf("%s: AllowN = %s, GCRAN says %s", step, fmtDecision(got), fmtDecision(g))
				break
			}
			if want := ref.peek(now); peek(t, r, key, l, now) != want {
				t.Errorf("%s: Peek afterwards disagrees with GCRA's %s", step, fmtDecision(want))
				break
			}
		}
	}
}

func rlAllowNDeniedChangesNothing(t *testing.T, r driver.RateLimiter) {
	key := newIDs().id("k")
	allowN(t, r, key, perMinute5, 3, t0)
	before := peek(t, r, key, perMinute5, t0)
	for i := range 5 {
		if d := allowN(t, r, key, perMinute5, 3, t0); d.Allowed {
			t.Fatalf("AllowN(3) #%d with 2 events left = %s, want denied", i, fmtDecision(d))
		}
	}
	if after := peek(t, r, key, perMinute5, t0); after != before {
		t.Errorf("Peek after denied groups = %s, before them %s", fmtDecision(after), fmtDecision(before))
	}
	if d := allowN(t, r, key, perMinute5, 2, t0); d != ok(0, 5*time.Second) {
		t.Errorf("AllowN(2) with 2 events left = %s, want %s", fmtDecision(d), fmtDecision(ok(0, 5*time.Second)))
	}
}

func rlAllowNOutOfRange(t *testing.T, r driver.RateLimiter) {
	key := newIDs().id("k")
	for _, n := range []int{0, -1, perMinute5.Burst + 1, 1000} {
		if d, err := r.AllowN(t.Context(), key, perMinute5, n, t0); err == nil {
			t.Errorf("AllowN(%d) with a burst of %d = %s, want an error", n, perMinute5.Burst, fmtDecision(d))
		}
	}
	if d := peek(t, r, key, perMinute5, t0); d != ok(4, time.Second) {
		t.Errorf("Peek after refused AllowN calls = %s, want a full bucket %s", fmtDecision(d), fmtDecision(ok(4, time.Second)))
	}
}

func rlConcurrentAllowN(t *testing.T, r driver.RateLimiter) {
	const group, burst = 3, 10
	l := driver.Limit{Rate: 60, Per: time.Minute, Burst: burst}
	// Three groups fill 9 of the 10 events: the next group waits 2s for its third.
	remaining := concurrentEvents(t, l, 2, func(ctx context.Context, key string) (driver.RateDecision, error) {
		return r.AllowN(ctx, key, l, group, t0)
	}, denied(2*time.Second, 9*time.Second))
	if want := []int{1, 4, 7}; !slices.Equal(remaining, want) {
		t.Errorf("groups of %d allowed with Remaining %v; want exactly %d groups, with Remaining %v", group, remaining, burst/group, want)
	}
}
