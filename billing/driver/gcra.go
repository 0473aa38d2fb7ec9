package driver

import "time"

// GCRA decides one event under limit l at now, given the stored theoretical arrival
// time tat (both Unix nanoseconds; tat is 0 for a key never seen). It returns the
// decision and the new tat to store if the event is allowed. It is exported for store
// implementations that keep the timestamp themselves; its arithmetic is the reference
// that storetest.TestRateLimiter checks every implementation against.
//
// The generic cell rate algorithm is a token bucket kept as one number: with emission
// interval e = Per/Rate, an event is allowed when max(tat, now) + e - now <= Burst*e.
// It decides as golang.org/x/time/rate does for a bucket of size Burst that starts full.
func GCRA(l Limit, tat, now int64) (RateDecision, int64) { return GCRAN(l, 1, tat, now) }

// GCRAN decides n events that arrive together under limit l at now, as GCRA decides
// one: they are allowed, all of them, when max(tat, now) + n*e - now <= Burst*e, and
// the new tat is then n emission intervals later. To the algorithm, n events at once are
// one event n times as long, so a store that keeps the timestamp decides them as one
// event with an emission interval of n*e; only Remaining, which counts events of one
// interval each, tells them apart. The caller keeps n between 1 and l.Burst (see
// [Limit.CheckEvents]); more could never be allowed.
func GCRAN(l Limit, n int, tat, now int64) (RateDecision, int64) {
	e := int64(l.Interval())
	window := e * int64(l.Burst)
	if tat < now {
		tat = now
	}
	next := tat + e*int64(n)
	if next-now > window {
		return RateDecision{
			Remaining:  0,
			RetryAfter: time.Duration(next - now - window),
			ResetAfter: time.Duration(tat - now),
		}, tat
	}
	return RateDecision{
		Allowed:    true,
		Remaining:  int((window - (next - now)) / e),
		ResetAfter: time.Duration(next - now),
	}, next
}
