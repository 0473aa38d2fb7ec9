package memory

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
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

// ConcurrencyLimiter is the in-memory [driver.ConcurrencyLimiter]: the holders of
// slots with their lease ends, spread over slotShards locks by key. A key with no
// holders takes no memory. Use [NewConcurrencyLimiter] to make one.
type ConcurrencyLimiter struct {
	seed   maphash.Seed
	shards [slotShards]slotShard
}

// slotShards is the number of a ConcurrencyLimiter's locks.
const slotShards = 64

type slotShard struct {
	mu sync.Mutex
	// due is at most the earliest lease end among holders (Unix nanoseconds).
	due     int64
	holders map[slot]int64 // lease end, Unix nanoseconds
	inUse   map[string]int // the number of holders of each key that has some
}

// A slot is a holder's slot of a key.
type slot struct {
	key    string
	holder driver.RequestID
}

// NewConcurrencyLimiter returns an empty ConcurrencyLimiter.
func NewConcurrencyLimiter() *ConcurrencyLimiter {
	c := &ConcurrencyLimiter{seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].holders, c.shards[i].inUse = map[slot]int64{}, map[string]int{}
	}
	return c
}

// Interface guards.
var (
	_ driver.RateLimiter        = (*RateLimiter)(nil)
	_ driver.ConcurrencyLimiter = (*ConcurrencyLimiter)(nil)
)

// lock locks the shard of key, after dropping the ended leases of the shard at now
// (Unix nanoseconds), so that a key's count is of live slots only and a holder whose
// lease has ended competes like a new one.
func (c *ConcurrencyLimiter) lock(ctx context.Context, key string, now int64) (*slotShard, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sh := &c.shards[maphash.String(c.seed, key)%slotShards]
	sh.mu.Lock()
	if now >= sh.due {
		due := int64(math.MaxInt64)
		for s, e := range sh.holders {
			if e <= now {
				sh.drop(s)
			} else {
				due = min(due, e)
			}
		}
		sh.due = due
	}
	return sh, nil
}

// hold gives s, which is held or counted in inUse already, a lease that ends at end.
func (sh *slotShard) hold(s slot, end int64) {
	sh.holders[s] = end
	sh.due = min(sh.due, end)
}

// drop frees s, if it is held. (Each map is visited as few times as it can be: this
// runs on every call.)
func (sh *slotShard) drop(s slot) {
	n := len(sh.holders)
	delete(sh.holders, s)
	if len(sh.holders) == n {
		return // s was not held
	}
	if c := sh.inUse[s.key]; c <= 1 {
		delete(sh.inUse, s.key)
	} else {
		sh.inUse[s.key] = c - 1
	}
}

// Acquire grants holder a slot if fewer than ceiling live slots are held.
func (c *ConcurrencyLimiter) Acquire(ctx context.Context, key string, holder driver.RequestID, ceiling int, lease time.Duration, now time.Time) (driver.SlotDecision, error) {
	sh, err := c.lock(ctx, key, now.UnixNano())
	if err != nil {
		return driver.SlotDecision{}, err
	}
	defer sh.mu.Unlock()
	s := slot{key, holder}
	_, held := sh.holders[s]
	n := sh.inUse[key]
	if !held {
		if n >= ceiling {
			return driver.SlotDecision{InUse: n}, nil
		}
		n++
		sh.inUse[key] = n
	}
	sh.hold(s, now.Add(lease).UnixNano())
	return driver.SlotDecision{Acquired: true, InUse: n}, nil
}

// Release frees holder's slot.
func (c *ConcurrencyLimiter) Release(ctx context.Context, key string, holder driver.RequestID) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	sh := &c.shards[maphash.String(c.seed, key)%slotShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.drop(slot{key, holder})
	return nil
}

// Renew extends holder's lease.
func (c *ConcurrencyLimiter) Renew(ctx context.Context, key string, holder driver.RequestID, lease time.Duration, now time.Time) error {
	sh, err := c.lock(ctx, key, now.UnixNano())
	if err != nil {
		return err
	}
	defer sh.mu.Unlock()
	s := slot{key, holder}
	if _, ok := sh.holders[s]; !ok { // never held, released, or ended (lock dropped it)
		return fmt.Errorf("memory: slot of %s: %w", holder, store.ErrNotFound)
	}
	sh.hold(s, now.Add(lease).UnixNano())
	return nil
}

// InUse returns the number of live slots of key.
func (c *ConcurrencyLimiter) InUse(ctx context.Context, key string, now time.Time) (int, error) {
	sh, err := c.lock(ctx, key, now.UnixNano())
	if err != nil {
		return 0, err
	}
	defer sh.mu.Unlock()
	return sh.inUse[key], nil
}

// lockedMap is a map of per-key state that is created on first use and never removed.
// T must hold no pointers: the states sit in tables, found by [names] indexes, so that
// the collector scans nothing of them however many keys there are. The keys are spread
// over lockedMapShards read-write locks, so that lookups of existing keys (which take
// a read lock) on different cores rarely share one. Its zero value is ready to use.
type lockedMap[T any] struct {
	seedOnce sync.Once
	seed     maphash.Seed
	shards   [lockedMapShards]struct {
		mu     sync.RWMutex
		keys   names
		states table[T]
	}
}

// lockedMapShards is the number of a lockedMap's locks.
const lockedMapShards = 64

func (l *lockedMap[T]) get(key string) *T {
	l.seedOnce.Do(func() { l.seed = maphash.MakeSeed() })
	sh := &l.shards[maphash.String(l.seed, key)%lockedMapShards]
	sh.mu.RLock()
	r, ok := sh.keys.lookup(key)
	if ok {
		t := sh.states.at(r.i)
		sh.mu.RUnlock()
		return t
	}
	sh.mu.RUnlock()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if r, ok := sh.keys.lookup(key); ok {
		return sh.states.at(r.i)
	}
	sh.keys.add(key)
	_, t := sh.states.add()
	return t
}
