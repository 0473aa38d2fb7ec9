package redis

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store"
)

// maxWindow bounds a rate limit's window (Burst emission intervals) so that the
// script's arithmetic, in doubles, stays exact: 2^52 ns is about 52 days.
const maxWindow = 1 << 52

// rateArgs returns the emission interval of n events at once and the window of a
// limit, in nanoseconds: the scripts decide n events as one event n emission intervals
// long (see driver.GCRAN), so that n = 1 is the plain case and costs nothing more.
func rateArgs(l driver.Limit, n int) (e, window int64, err error) {
	if l.Rate <= 0 || l.Per <= 0 || l.Burst <= 0 {
		return 0, 0, fmt.Errorf("redis: rate limit %+v: rate, period and burst must be positive", l)
	}
	e = int64(l.Interval())
	if e <= 0 || int64(l.Burst) > maxWindow/e {
		return 0, 0, fmt.Errorf("redis: rate limit %+v: the emission interval must be at least 1ns and Burst intervals at most %v", l, time.Duration(maxWindow))
	}
	if err := l.CheckEvents(n); err != nil {
		return 0, 0, fmt.Errorf("redis: %w", err)
	}
	return e * int64(n), e * int64(l.Burst), nil
}

// decodeRate reads a rate decision on n events from r[i:]: allowed, remaining, retry,
// reset. The scripts count the remaining events in units of the events they decided,
// n emission intervals long; for n > 1 they are counted again here in events of one
// interval, from the time until the bucket is full (exact: both are whole
// nanoseconds).
func decodeRate(r []any, i int, l driver.Limit, n int) driver.RateDecision {
	if len(r) < i+4 {
		return driver.RateDecision{}
	}
	d := driver.RateDecision{
		Allowed:    asInt(r[i]) == 1,
		Remaining:  int(asInt(r[i+1])),
		RetryAfter: time.Duration(asInt(r[i+2])),
		ResetAfter: time.Duration(asInt(r[i+3])),
	}
	if n > 1 && d.Allowed {
		e := int64(l.Interval())
		d.Remaining = int(max(0, (e*int64(l.Burst)-int64(d.ResetAfter))/e))
	}
	return d
}

// Allow decides whether one event for key may go ahead and records it if so, by the
// GCRA of [driver.GCRA] in one script, on the Redis server's clock unless
// Options.CallerClock is set.
func (s *Store) Allow(ctx context.Context, key string, l driver.Limit, now time.Time) (driver.RateDecision, error) {
	return s.decide(ctx, key, l, 1, now, "1")
}

// AllowN decides whether n events for key may go ahead together and records them if
// so, by the GCRA of [driver.GCRAN] in one script, as Allow does.
func (s *Store) AllowN(ctx context.Context, key string, l driver.Limit, n int, now time.Time) (driver.RateDecision, error) {
	return s.decide(ctx, key, l, n, now, "1")
}

// Peek reports what Allow would decide, without recording anything.
func (s *Store) Peek(ctx context.Context, key string, l driver.Limit, now time.Time) (driver.RateDecision, error) {
	return s.decide(ctx, key, l, 1, now, "")
}

func (s *Store) decide(ctx context.Context, key string, l driver.Limit, n int, now time.Time, record string) (driver.RateDecision, error) {
	if err := ctx.Err(); err != nil {
		return driver.RateDecision{}, err
	}
	e, window, err := rateArgs(l, n)
	if err != nil {
		return driver.RateDecision{}, err
	}
	mode, sec, nsec := s.clock(now)
	reply, err := s.run(ctx, rateScript, []string{s.account(key).tat()}, mode, sec, nsec, e, window, record)
	if err != nil {
		return driver.RateDecision{}, fail(ctx, err, "rate limit of %q", key)
	}
	r := asSlice(reply)
	if len(r) != 4 {
		return driver.RateDecision{}, errReply("rate limit of "+key, reply)
	}
	return decodeRate(r, 0, l, n), nil
}

// leaseArgs returns a lease in microseconds and the time to live, in milliseconds, of
// a lease set holding it: the lease and a second's margin.
func leaseArgs(lease time.Duration) (us, ttl int64) {
	return lease.Microseconds(), max(ms(lease), 0) + 1000
}

// Acquire grants holder a slot until now+lease if fewer than ceiling live slots are
// held, in one script over the key's lease set (a sorted set of holders scored by the
// end of their lease).
func (s *Store) Acquire(ctx context.Context, key string, holder driver.RequestID, ceiling int, lease time.Duration, now time.Time) (driver.SlotDecision, error) {
	if err := ctx.Err(); err != nil {
		return driver.SlotDecision{}, err
	}
	mode, sec, nsec := s.clock(now)
	us, ttl := leaseArgs(lease)
	reply, err := s.run(ctx, acquireScript, []string{s.account(key).leases()}, mode, sec, nsec, holder.String(), ceiling, us, ttl)
	if err != nil {
		return driver.SlotDecision{}, fail(ctx, err, "slot of %s under %q", holder, key)
	}
	r := asSlice(reply)
	if len(r) != 2 {
		return driver.SlotDecision{}, errReply("acquire", reply)
	}
	return driver.SlotDecision{Acquired: asInt(r[0]) == 1, InUse: int(asInt(r[1]))}, nil
}

// Release frees holder's slot (one ZREM).
func (s *Store) Release(ctx context.Context, key string, holder driver.RequestID) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.c.ZRem(ctx, s.account(key).leases(), holder.String()).Err(); err != nil {
		return fail(ctx, err, "releasing the slot of %s under %q", holder, key)
	}
	return nil
}

// Renew extends holder's lease to now+lease.
func (s *Store) Renew(ctx context.Context, key string, holder driver.RequestID, lease time.Duration, now time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	mode, sec, nsec := s.clock(now)
	us, ttl := leaseArgs(lease)
	reply, err := s.run(ctx, renewScript, []string{s.account(key).leases()}, mode, sec, nsec, holder.String(), us, ttl)
	if err != nil {
		return fail(ctx, err, "renewing the slot of %s under %q", holder, key)
	}
	if asInt(reply) == stNotFound {
		return fmt.Errorf("redis: slot of %s under %q: %w", holder, key, store.ErrNotFound)
	}
	return nil
}

// InUse returns the number of live slots of key.
func (s *Store) InUse(ctx context.Context, key string, now time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	mode, sec, nsec := s.clock(now)
	reply, err := s.run(ctx, inUseScript, []string{s.account(key).leases()}, mode, sec, nsec)
	if err != nil {
		return 0, fail(ctx, err, "slots of %q", key)
	}
	return int(asInt(reply)), nil
}
