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
func GCRA(l Limit, tat, now int64) (RateDecision, int64) {
	e := int64(l.Interval())
	window := e * int64(l.Burst)
	if tat < now {
		tat = now
	}
	next := tat + e
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
