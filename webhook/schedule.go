package webhook

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// A Schedule is when a delivery's attempts are made: the first as soon as the message
// is enqueued, then one after each wait of the Schedule, counted from the attempt
// before, as long as the attempts fail. A Schedule of n waits makes at most n+1
// attempts. The waits are moved at random by the deliverer's jitter and may be
// lengthened by the receiver's Retry-After (see [Deliverer]).
type Schedule []time.Duration

// MaxScheduleSteps is the most waits a [Schedule] may have.
const MaxScheduleSteps = 50

// MaxScheduleLength is the longest a [Schedule] may be, all its waits together.
const MaxScheduleLength = 30 * 24 * time.Hour

// DefaultSchedule returns the schedule a [Deliverer] uses unless told otherwise: an
// attempt at once, then retries after 5 seconds, 5 minutes, 30 minutes, 2 hours,
// 5 hours, 10 hours, 10 hours, 24 hours and 24 hours: ten attempts over about three
// days (75 h 35 min 5 s, before jitter), the first retry within seconds, so that a
// receiver that blinked gets the message at once and one that is down for a weekend
// still gets it.
func DefaultSchedule() Schedule {
	return Schedule{
		5 * time.Second,
		5 * time.Minute,
		30 * time.Minute,
		2 * time.Hour,
		5 * time.Hour,
		10 * time.Hour,
		10 * time.Hour,
		24 * time.Hour,
		24 * time.Hour,
	}
}

// Attempts returns the most attempts a delivery is given: one more than the waits.
func (s Schedule) Attempts() int { return len(s) + 1 }

// Length returns the sum of the waits: how long after its first attempt a delivery
// that keeps failing makes its last, before jitter and Retry-After.
func (s Schedule) Length() time.Duration {
	var total time.Duration
	for _, w := range s {
		total += w
	}
	return total
}

// Wait returns the wait after a delivery's attempts-th attempt failed, before jitter
// and Retry-After, and false if that attempt was the schedule's last.
func (s Schedule) Wait(attempts int) (time.Duration, bool) {
	if attempts < 1 || attempts > len(s) {
		return 0, false
	}
	return s[attempts-1], true
}

// Check reports what is wrong with s, or nil: every wait must be positive, there may
// be at most MaxScheduleSteps of them, and at most MaxScheduleLength in all. An empty
// Schedule (one attempt, no retry) is valid.
func (s Schedule) Check() error {
	if len(s) > MaxScheduleSteps {
		return fmt.Errorf("webhook: the schedule has %d waits, over the limit of %d; use fewer, longer waits", len(s), MaxScheduleSteps)
	}
	for i, w := range s {
		if w <= 0 {
			return fmt.Errorf("webhook: the schedule's wait %d is %s; every wait must be positive", i+1, w)
		}
	}
	if n := s.Length(); n > MaxScheduleLength {
		return fmt.Errorf("webhook: the schedule is %s long, over the limit of %s; use shorter waits", n, MaxScheduleLength)
	}
	return nil
}

// String returns the waits, such as "[5s 5m0s 30m0s]".
func (s Schedule) String() string {
	parts := make([]string, len(s))
	for i, w := range s {
		parts[i] = w.String()
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// DefaultJitter is the default [DelivererOptions.Jitter]: each wait is moved by up to
// 20% of it, up or down.
const DefaultJitter = 0.2

// DefaultMaxRetryAfter is the default [DelivererOptions.MaxRetryAfter].
const DefaultMaxRetryAfter = 24 * time.Hour

// errJitter is the error of a jitter out of range.
var errJitter = errors.New("webhook: the jitter must be less than 1 (it is a fraction of each wait; 0.2 moves a wait by up to 20%)")

// jittered returns wait moved by jitter (a fraction below 1) times r, a number in
// [0, 1): r = 0.5 leaves it as it is, 0 shortens it by the whole fraction, and r near
// 1 lengthens it by nearly as much. It is never below a millisecond.
func jittered(wait time.Duration, jitter, r float64) time.Duration {
	if jitter <= 0 {
		return wait
	}
	moved := time.Duration(float64(wait) * (1 + jitter*(2*r-1)))
	return max(moved, time.Millisecond)
}

// retryAfter returns the wait a Retry-After header asks for, as an attempt made at at
// read it: a number of seconds, or an HTTP date. It returns false for a value that is
// neither, or a date that has passed.
func retryAfter(value string, at time.Time) (time.Duration, bool) {
	value = strings.TrimSpace(value)
	if value == "" {
		return 0, false
	}
	if n, err := strconv.ParseUint(value, 10, 63); err == nil {
		if n > uint64(MaxScheduleLength/time.Second) {
			return MaxScheduleLength, true
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(value)
	if err != nil || !t.After(at) {
		return 0, false
	}
	return min(t.Sub(at), MaxScheduleLength), true
}

// nextWait returns the wait before the retry of an attempt answered with status and
// the Retry-After header ra, made at at, whose schedule's wait is wait (already
// jittered): the schedule's, unless the answer is a 429 or a 503 whose Retry-After asks
// for longer, then what it asks for, at most maxRA. A Retry-After never makes the
// retry sooner than the schedule's, nor adds an attempt.
func nextWait(wait time.Duration, status int, ra string, at time.Time, maxRA time.Duration) time.Duration {
	if status != http.StatusTooManyRequests && status != http.StatusServiceUnavailable {
		return wait
	}
	asked, ok := retryAfter(ra, at)
	if !ok {
		return wait
	}
	return max(wait, min(asked, maxRA))
}
