package redis_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store/redis"
)

// Instants the caller passes in the server-clock tests: far apart, and far from the
// server's time, so that a decision that used them would differ.
var (
	past   = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	future = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
)

// TestServerClockRate checks that by default the rate limit runs on the Redis
// server's clock: two instances passing times a century apart share one bucket, a
// burst is allowed and the next event denied with the whole emission interval to wait,
// and moving the caller's clock does not refill the bucket.
func TestServerClockRate(t *testing.T) {
	ctx := t.Context()
	a, prefix := newStorePrefix(t, client(t), &redis.Options{})
	b := openStore(t, client(t), prefix, &redis.Options{}) // another instance
	l := driver.Limit{Rate: 1, Per: time.Hour, Burst: 2}

	d, err := a.Allow(ctx, "acct", l, past)
	must(t, err)
	if !d.Allowed || d.Remaining != 1 {
		t.Fatalf("first event: %+v, want allowed with 1 remaining", d)
	}
	d, err = b.Allow(ctx, "acct", l, future)
	must(t, err)
	if !d.Allowed || d.Remaining != 0 {
		t.Fatalf("second event, on another instance whose clock is a century ahead: %+v, want allowed with 0 remaining", d)
	}
	d, err = a.Allow(ctx, "acct", l, future.Add(24*time.Hour))
	must(t, err)
	// The server's clock has moved by the test's run time at most: the wait is the
	// emission interval less that.
	if d.Allowed || d.RetryAfter <= 59*time.Minute || d.RetryAfter > time.Hour || d.ResetAfter <= time.Hour {
		t.Fatalf("third event: %+v, want denied with RetryAfter just under 1h and ResetAfter just under 2h", d)
	}
	p, err := b.Peek(ctx, "acct", l, time.Time{})
	must(t, err)
	if p.Allowed || p.RetryAfter > d.RetryAfter {
		t.Errorf("Peek after the denial: %+v, want denied, with no longer a wait than %v", p, d.RetryAfter)
	}

	// The same through an admission step.
	step := func() driver.Step {
		return driver.Step{Account: "other", Request: newRequest(), Now: future, Rate: &l}
	}
	for i := range 2 {
		r, err := a.Admit(ctx, step())
		must(t, err)
		if r.Denied != driver.NotDenied || r.Rate.Remaining != 1-i {
			t.Fatalf("admission %d: %+v, want admitted with %d remaining", i, r, 1-i)
		}
	}
	r, err := b.Admit(ctx, driver.Step{Account: "other", Request: newRequest(), Now: past, Rate: &l})
	must(t, err)
	if r.Denied != driver.DeniedRate || r.Rate.RetryAfter <= 59*time.Minute {
		t.Errorf("third admission: %+v, want denied for its rate with RetryAfter just under 1h", r)
	}
}

// TestServerClockLease checks that by default leases run on the Redis server's clock:
// a lease of a minute ends a minute after the server's TIME whatever the caller passes,
// counts as in use at any caller time, can be renewed with any caller time, and, for a
// holder that never comes back, ends on its own.
func TestServerClockLease(t *testing.T) {
	ctx, c := t.Context(), client(t)
	s, prefix := newStorePrefix(t, c, &redis.Options{})
	h := newRequest()
	leaseEnd := func(account string, holder driver.RequestID) time.Time {
		t.Helper()
		us, err := c.ZScore(ctx, prefix+":{"+account+"}:lease", holder.String()).Result()
		must(t, err)
		return time.UnixMicro(int64(us))
	}

	d, err := s.Acquire(ctx, "acct", h, 1, time.Minute, past)
	must(t, err)
	if !d.Acquired || d.InUse != 1 {
		t.Fatalf("Acquire: %+v, want granted with 1 in use", d)
	}
	// The lease ends a minute after the server's time, in microseconds.
	now, err := c.Time(ctx).Result()
	must(t, err)
	if left := leaseEnd("acct", h).Sub(now); left <= 0 || left > time.Minute {
		t.Fatalf("the lease ends %v after the server's time, want within (0, 1m]", left)
	}
	n, err := s.InUse(ctx, "acct", future)
	must(t, err)
	if n != 1 {
		t.Errorf("InUse with a caller time a century later = %d, want 1", n)
	}
	if d, err := s.Acquire(ctx, "acct", newRequest(), 1, time.Minute, future); err != nil || d.Acquired {
		t.Errorf("Acquire by another holder with a caller time a century later: %+v, %v; want refused", d, err)
	}
	must(t, s.Renew(ctx, "acct", h, time.Minute, past))

	// A holder that crashed: its short lease ends on the server's clock, without any
	// caller moving time. Another holder asks for the slot until it gets it (the lease
	// passes for real); the server's own records then tell when it got it: a minute
	// before its lease's end, which is no earlier than the crashed lease's end, however
	// long the machine took to ask.
	crashed, next := newRequest(), newRequest()
	_, err = s.Acquire(ctx, "short", crashed, 1, 50*time.Millisecond, past)
	must(t, err)
	crashedEnd := leaseEnd("short", crashed)
	wait, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err = testenv.Wait(wait, func() error {
		d, err := s.Acquire(ctx, "short", next, 1, time.Minute, past)
		if err == nil && !d.Acquired {
			err = errors.New("the slot is still held")
		}
		return err
	})
	if err != nil {
		t.Fatalf("the crashed holder's lease never ended: %v", err)
	}
	if granted := leaseEnd("short", next).Add(-time.Minute); granted.Before(crashedEnd) {
		t.Errorf("the slot was granted at %v on the server's clock, %v before the crashed holder's lease ended",
			granted.Format(time.RFC3339Nano), crashedEnd.Sub(granted))
	}
	if err := c.ZScore(ctx, prefix+":{short}:lease", crashed.String()).Err(); !errors.Is(err, goredis.Nil) {
		t.Errorf("the crashed holder's ended lease is still recorded (%v)", err)
	}
}

// TestCallerClock checks the option the suites run with: leases and rate limits then
// follow the caller's time, and the stored rate timestamp is the caller's.
func TestCallerClock(t *testing.T) {
	ctx, c := t.Context(), client(t)
	s, prefix := newStorePrefix(t, c, &redis.Options{CallerClock: true})
	t0 := time.Date(2030, 1, 15, 12, 0, 0, 123456789, time.UTC)
	l := driver.Limit{Rate: 60, Per: time.Minute, Burst: 1}
	_, err := s.Allow(ctx, "acct", l, t0)
	must(t, err)
	tat, err := c.Get(ctx, prefix+":{acct}:tat").Result()
	must(t, err)
	if want := strconv.FormatInt(t0.Add(time.Second).Unix(), 10) + " 123456789"; tat != want {
		t.Errorf("stored timestamp %q, want %q (t0 + 1s, to the nanosecond)", tat, want)
	}
	_, err = s.Acquire(ctx, "acct", newRequest(), 1, time.Second, t0)
	must(t, err)
	for _, tc := range []struct {
		at   time.Time
		want int
	}{{t0, 1}, {t0.Add(time.Second - time.Microsecond), 1}, {t0.Add(time.Second), 0}} {
		n, err := s.InUse(ctx, "acct", tc.at)
		must(t, err)
		if n != tc.want {
			t.Errorf("InUse at t0+%v = %d, want %d", tc.at.Sub(t0), n, tc.want)
		}
	}
}
