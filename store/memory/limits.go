package memory

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store"
)

// RateLimiter is the in-memory [driver.RateLimiter]: a GCRA per key, which keeps one
// timestamp (the theoretical arrival time) and decides exactly as a token bucket would.
// Use [NewRateLimiter] to make one.
type RateLimiter struct {
	buckets lockedMap[gcra]
}

type gcra struct {
	mu  sync.Mutex
	tat int64 // theoretical arrival time, Unix nanoseconds
}

// NewRateLimiter returns an empty RateLimiter.
func NewRateLimiter() *RateLimiter {
	return &RateLimiter{}
}

// Allow decides whether one event may go ahead and records it if so.
func (r *RateLimiter) Allow(ctx context.Context, key string, l driver.Limit, now time.Time) (driver.RateDecision, error) {
	return r.decide(ctx, key, l, 1, now, true)
}

// AllowN decides whether n events may go ahead together and records them if so.
func (r *RateLimiter) AllowN(ctx context.Context, key string, l driver.Limit, n int, now time.Time) (driver.RateDecision, error) {
	return r.decide(ctx, key, l, n, now, true)
}

// Peek reports what Allow would decide, without recording anything.
func (r *RateLimiter) Peek(ctx context.Context, key string, l driver.Limit, now time.Time) (driver.RateDecision, error) {
	return r.decide(ctx, key, l, 1, now, false)
}

func (r *RateLimiter) decide(ctx context.Context, key string, l driver.Limit, n int, now time.Time, record bool) (driver.RateDecision, error) {
	if err := ctx.Err(); err != nil {
		return driver.RateDecision{}, err
	}
	if l.Rate <= 0 || l.Per <= 0 || l.Burst <= 0 {
		return driver.RateDecision{}, fmt.Errorf("memory: rate limit %+v: rate, period and burst must be positive", l)
	}
	if err := l.CheckEvents(n); err != nil {
		return driver.RateDecision{}, fmt.Errorf("memory: rate limit of %q: %w", key, err)
	}
	b := r.buckets.get(key)
	b.mu.Lock()
	defer b.mu.Unlock()
	d, tat := driver.GCRAN(l, n, b.tat, now.UnixNano())
	if d.Allowed && record {
		b.tat = tat
	}
	return d, nil
}

// ConcurrencyLimiter is the in-memory [driver.ConcurrencyLimiter]: per key, the set of
// holders with their lease expiries. Use [NewConcurrencyLimiter] to make one.
type ConcurrencyLimiter struct {
	slots lockedMap[slots]
}

type slots struct {
	mu      sync.Mutex
	holders map[driver.RequestID]int64 // lease end, Unix nanoseconds
}

// NewConcurrencyLimiter returns an empty ConcurrencyLimiter.
func NewConcurrencyLimiter() *ConcurrencyLimiter {
	return &ConcurrencyLimiter{}
}

// Interface guards.
var (
	_ driver.RateLimiter        = (*RateLimiter)(nil)
	_ driver.ConcurrencyLimiter = (*ConcurrencyLimiter)(nil)
)

func (c *ConcurrencyLimiter) lock(ctx context.Context, key string) (*slots, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := c.slots.get(key)
	s.mu.Lock()
	if s.holders == nil {
		s.holders = make(map[driver.RequestID]int64)
	}
	return s, nil
}

// Acquire grants holder a slot if fewer than ceiling live slots are held.
func (c *ConcurrencyLimiter) Acquire(ctx context.Context, key string, holder driver.RequestID, ceiling int, lease time.Duration, now time.Time) (driver.SlotDecision, error) {
	s, err := c.lock(ctx, key)
	if err != nil {
		return driver.SlotDecision{}, err
	}
	defer s.mu.Unlock()
	// Drop ended leases first, so that InUse counts live slots only and a holder whose
	// lease has ended competes like a new one.
	t := now.UnixNano()
	for h, e := range s.holders {
		if e <= t {
			delete(s.holders, h)
		}
	}
	if _, held := s.holders[holder]; !held && len(s.holders) >= ceiling {
		return driver.SlotDecision{InUse: len(s.holders)}, nil
	}
	s.holders[holder] = now.Add(lease).UnixNano()
	return driver.SlotDecision{Acquired: true, InUse: len(s.holders)}, nil
}

// Release frees holder's slot.
func (c *ConcurrencyLimiter) Release(ctx context.Context, key string, holder driver.RequestID) error {
	s, err := c.lock(ctx, key)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	delete(s.holders, holder)
	return nil
}

// Renew extends holder's lease.
func (c *ConcurrencyLimiter) Renew(ctx context.Context, key string, holder driver.RequestID, lease time.Duration, now time.Time) error {
	s, err := c.lock(ctx, key)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if e, ok := s.holders[holder]; !ok || e <= now.UnixNano() {
		delete(s.holders, holder)
		return fmt.Errorf("memory: slot of %s: %w", holder, store.ErrNotFound)
	}
	s.holders[holder] = now.Add(lease).UnixNano()
	return nil
}

// InUse returns the number of live slots of key.
func (c *ConcurrencyLimiter) InUse(ctx context.Context, key string, now time.Time) (int, error) {
	s, err := c.lock(ctx, key)
	if err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	n, t := 0, now.UnixNano()
	for _, e := range s.holders {
		if e > t {
			n++
		}
	}
	return n, nil
}

// lockedMap is a map of per-key state that is created on first use and never removed.
// Lookups of existing keys take no lock.
type lockedMap[T any] struct {
	m sync.Map // string -> *T
}

func (l *lockedMap[T]) get(key string) *T {
	if v, ok := l.m.Load(key); ok {
		return v.(*T)
	}
	v, _ := l.m.LoadOrStore(key, new(T))
	return v.(*T)
}
