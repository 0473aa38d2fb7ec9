package storetest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store"
)

// TestConcurrencyLimiter checks that a [driver.ConcurrencyLimiter] never grants more
// than the ceiling, frees slots on release and at the end of their lease (so a crashed
// holder cannot leak a slot), renews leases, and counts only live ones.
//
// newLimiter is called once per subtest and must return an empty limiter; it registers
// any teardown with t.Cleanup. The subtests run in parallel. Run the suite with -race.
func TestConcurrencyLimiter(t *testing.T, newLimiter func(t *testing.T) driver.ConcurrencyLimiter) {
	t.Helper()
	run(t, newLimiter, concurrencyLimiterRows)
}

var concurrencyLimiterRows = []behaviour[driver.ConcurrencyLimiter]{
	{"AcquireUpToCeiling",
		"Acquire grants slots up to the ceiling; the next is refused with InUse equal to the ceiling.",
		clAcquireUpToCeiling},
	{"ReleaseFreesSlot",
		"Release frees the holder's slot for another holder at once.",
		clReleaseFreesSlot},
	{"ReleaseUnknown",
		"Releasing a slot that is not held, or releasing twice, is not an error and frees nothing else.",
		clReleaseUnknown},
	{"ReacquireCountsOnce",
		"A holder acquiring again holds one slot, is granted even at the ceiling, and has its lease renewed.",
		clReacquireCountsOnce},
	{"CrashedHolderExpires",
		"A holder that never releases loses its slot when its lease ends: an Acquire at now+lease succeeds.",
		clCrashedHolderExpires},
	{"RenewExtends",
		"Renew extends the lease to now+lease, so the slot does not expire at the old end.",
		clRenewExtends},
	{"RenewExpiredOrUnknown",
		"Renew of a holder whose lease has ended, that released, or that never held a slot returns store.ErrNotFound.",
		clRenewExpiredOrUnknown},
	{"InUseCountsLiveLeases",
		"InUse, and the InUse of a decision, count only leases that have not ended.",
		clInUseCountsLiveLeases},
	{"KeysIndependent",
		"Slots of one key do not count against another key, even for the same holder.",
		clKeysIndependent},
	{"CanceledContext",
		"Every method given a canceled context returns an error matching context.Canceled and changes nothing.",
		clCanceledContext},
	{"ConcurrentAcquire",
		"Of many goroutines acquiring at once, exactly ceiling are granted.",
		clConcurrentAcquire},
	{"ConcurrentAcquireRelease",
		"Under concurrent acquires and releases the number of holders never exceeds the ceiling, and every slot is freed at the end.",
		clConcurrentAcquireRelease},
}

const lease = 30 * time.Second

func acquire(t *testing.T, c driver.ConcurrencyLimiter, key string, holder driver.RequestID, ceiling int, lease time.Duration, now time.Time) driver.SlotDecision {
	t.Helper()
	d, err := c.Acquire(t.Context(), key, holder, ceiling, lease, now)
	must(t, "Acquire", err)
	return d
}

func wantSlot(t *testing.T, op string, got driver.SlotDecision, acquired bool, inUse int) {
	t.Helper()
	if got.Acquired != acquired || got.InUse != inUse {
		t.Errorf("%s = {Acquired %v, InUse %d}, want {Acquired %v, InUse %d}", op, got.Acquired, got.InUse, acquired, inUse)
	}
}

func wantInUse(t *testing.T, c driver.ConcurrencyLimiter, key string, now time.Time, want int) {
	t.Helper()
	n, err := c.InUse(t.Context(), key, now)
	must(t, "InUse", err)
	if n != want {
		t.Errorf("InUse at +%v = %d, want %d", now.Sub(t0), n, want)
	}
}

func holders(n int) []driver.RequestID {
	hs := make([]driver.RequestID, n)
	for i := range hs {
		hs[i] = newRequest()
	}
	return hs
}

func clAcquireUpToCeiling(t *testing.T, c driver.ConcurrencyLimiter) {
	key, h := newIDs().id("k"), holders(4)
	for i := range 3 {
		wantSlot(t, "Acquire", acquire(t, c, key, h[i], 3, lease, t0), true, i+1)
	}
	wantSlot(t, "Acquire beyond the ceiling", acquire(t, c, key, h[3], 3, lease, t0), false, 3)
	wantInUse(t, c, key, t0, 3)
}

func clReleaseFreesSlot(t *testing.T, c driver.ConcurrencyLimiter) {
	key, h := newIDs().id("k"), holders(3)
	acquire(t, c, key, h[0], 2, lease, t0)
	acquire(t, c, key, h[1], 2, lease, t0)
	wantSlot(t, "Acquire at the ceiling", acquire(t, c, key, h[2], 2, lease, t0), false, 2)
	must(t, "Release", c.Release(t.Context(), key, h[0]))
	wantInUse(t, c, key, t0, 1)
	wantSlot(t, "Acquire after a Release", acquire(t, c, key, h[2], 2, lease, t0), true, 2)
}

func clReleaseUnknown(t *testing.T, c driver.ConcurrencyLimiter) {
	ctx, n := t.Context(), newIDs()
	key, h := n.id("k"), holders(2)
	if err := c.Release(ctx, n.id("never-used"), h[0]); err != nil {
		t.Errorf("Release on a key never used: %v, want nil", err)
	}
	acquire(t, c, key, h[0], 2, lease, t0)
	if err := c.Release(ctx, key, h[1]); err != nil {
		t.Errorf("Release of a holder without a slot: %v, want nil", err)
	}
	wantInUse(t, c, key, t0, 1)
	must(t, "Release", c.Release(ctx, key, h[0]))
	if err := c.Release(ctx, key, h[0]); err != nil {
		t.Errorf("second Release: %v, want nil", err)
	}
	wantInUse(t, c, key, t0, 0)
}

func clReacquireCountsOnce(t *testing.T, c driver.ConcurrencyLimiter) {
	key, h := newIDs().id("k"), holders(2)
	const lease = 10 * time.Second
	wantSlot(t, "Acquire", acquire(t, c, key, h[0], 1, lease, t0), true, 1)
	wantSlot(t, "Acquire again by the holder, at the ceiling", acquire(t, c, key, h[0], 1, lease, at(5*time.Second)), true, 1)
	wantInUse(t, c, key, at(5*time.Second), 1)
	wantSlot(t, "Acquire by another holder after the first lease would have ended",
		acquire(t, c, key, h[1], 1, lease, at(12*time.Second)), false, 1)
	wantSlot(t, "Acquire by another holder when the renewed lease ends",
		acquire(t, c, key, h[1], 1, lease, at(15*time.Second)), true, 1)
}

func clCrashedHolderExpires(t *testing.T, c driver.ConcurrencyLimiter) {
	ctx, key, h := t.Context(), newIDs().id("k"), holders(2)
	acquire(t, c, key, h[0], 1, lease, t0)
	wantSlot(t, "Acquire just before the lease ends", acquire(t, c, key, h[1], 1, lease, at(lease-time.Second)), false, 1)
	wantInUse(t, c, key, at(lease), 0)
	wantSlot(t, "Acquire when the crashed holder's lease ends", acquire(t, c, key, h[1], 1, lease, at(lease)), true, 1)

	// The crashed holder comes back: it cannot renew, and its Release frees nothing.
	wantErr(t, "Renew by the holder whose lease ended", c.Renew(ctx, key, h[0], lease, at(lease+time.Second)), store.ErrNotFound)
	must(t, "Release", c.Release(ctx, key, h[0]))
	wantInUse(t, c, key, at(lease+time.Second), 1)
}

func clRenewExtends(t *testing.T, c driver.ConcurrencyLimiter) {
	key, h := newIDs().id("k"), holders(2)
	const lease = 10 * time.Second
	acquire(t, c, key, h[0], 1, lease, t0)
	must(t, "Renew", c.Renew(t.Context(), key, h[0], lease, at(5*time.Second)))
	wantSlot(t, "Acquire after the old lease end", acquire(t, c, key, h[1], 1, lease, at(12*time.Second)), false, 1)
	wantInUse(t, c, key, at(14*time.Second), 1)
	wantInUse(t, c, key, at(15*time.Second), 0)
	wantSlot(t, "Acquire at the renewed lease end", acquire(t, c, key, h[1], 1, lease, at(15*time.Second)), true, 1)
}

func clRenewExpiredOrUnknown(t *testing.T, c driver.ConcurrencyLimiter) {
	ctx, n := t.Context(), newIDs()
	key, h := n.id("k"), holders(3)
	const lease = 10 * time.Second
	wantErr(t, "Renew on a key never used", c.Renew(ctx, n.id("never-used"), h[0], lease, t0), store.ErrNotFound)
	acquire(t, c, key, h[0], 2, lease, t0)
	wantErr(t, "Renew of a holder without a slot", c.Renew(ctx, key, h[1], lease, t0), store.ErrNotFound)
	wantErr(t, "Renew when the lease has ended", c.Renew(ctx, key, h[0], lease, at(lease)), store.ErrNotFound)
	wantInUse(t, c, key, at(lease), 0)

	acquire(t, c, key, h[2], 2, lease, at(time.Minute))
	must(t, "Release", c.Release(ctx, key, h[2]))
	wantErr(t, "Renew after Release", c.Renew(ctx, key, h[2], lease, at(time.Minute)), store.ErrNotFound)
	wantInUse(t, c, key, at(time.Minute), 0)
}

func clInUseCountsLiveLeases(t *testing.T, c driver.ConcurrencyLimiter) {
	key, h := newIDs().id("k"), holders(4)
	const s = time.Second
	acquire(t, c, key, h[0], 5, 10*s, t0)
	acquire(t, c, key, h[1], 5, 20*s, t0)
	acquire(t, c, key, h[2], 5, 30*s, t0)
	wantInUse(t, c, key, t0, 3)
	wantInUse(t, c, key, at(10*s), 2)
	wantSlot(t, "Acquire while one of three leases has ended", acquire(t, c, key, h[3], 5, 30*s, at(15*s)), true, 3)
	wantInUse(t, c, key, at(25*s), 2)
	wantInUse(t, c, key, at(30*s), 1)
	wantInUse(t, c, key, at(45*s), 0)
}

func clKeysIndependent(t *testing.T, c driver.ConcurrencyLimiter) {
	n := newIDs()
	a, b, h := n.id("a"), n.id("b"), holders(2)
	acquire(t, c, a, h[0], 1, lease, t0)
	wantSlot(t, "Acquire on full key a", acquire(t, c, a, h[1], 1, lease, t0), false, 1)
	wantSlot(t, "Acquire on key b", acquire(t, c, b, h[1], 1, lease, t0), true, 1)
	wantSlot(t, "Acquire on key b by a's holder", acquire(t, c, b, h[0], 2, lease, t0), true, 2)
	must(t, "Release", c.Release(t.Context(), b, h[0]))
	wantInUse(t, c, a, t0, 1)
	wantInUse(t, c, b, t0, 1)
}

func clCanceledContext(t *testing.T, c driver.ConcurrencyLimiter) {
	ctx, key, h := canceled(t), newIDs().id("k"), holders(2)
	acquire(t, c, key, h[0], 2, lease, t0)
	_, err := c.Acquire(ctx, key, h[1], 2, lease, t0)
	wantErr(t, "Acquire", err, context.Canceled)
	wantErr(t, "Release", c.Release(ctx, key, h[0]), context.Canceled)
	wantErr(t, "Renew", c.Renew(ctx, key, h[0], time.Hour, t0), context.Canceled)
	_, err = c.InUse(ctx, key, t0)
	wantErr(t, "InUse", err, context.Canceled)
	wantInUse(t, c, key, t0, 1)
	wantInUse(t, c, key, at(lease), 0)
}

func clConcurrentAcquire(t *testing.T, c driver.ConcurrencyLimiter) {
	ctx, key, h := t.Context(), newIDs().id("k"), holders(workers)
	const ceiling = 7
	var granted atomic.Int64
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			d, err := c.Acquire(ctx, key, h[i], ceiling, lease, t0)
			switch {
			case err != nil:
				t.Errorf("Acquire: %v", err)
			case d.Acquired:
				granted.Add(1)
				if d.InUse < 1 || d.InUse > ceiling {
					t.Errorf("granted Acquire reported InUse %d, want 1..%d", d.InUse, ceiling)
				}
			case d.InUse != ceiling:
				t.Errorf("refused Acquire reported InUse %d, want the ceiling %d", d.InUse, ceiling)
			}
		})
	}
	wg.Wait()
	if g := granted.Load(); g != ceiling {
		t.Errorf("%d of %d concurrent Acquires granted with ceiling %d", g, workers, ceiling)
	}
	wantInUse(t, c, key, t0, ceiling)
}

func clConcurrentAcquireRelease(t *testing.T, c driver.ConcurrencyLimiter) {
	ctx, key := t.Context(), newIDs().id("k")
	const ceiling, rounds = 4, 40
	var held, peak, grants atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range rounds {
				h := newRequest()
				d, err := c.Acquire(ctx, key, h, ceiling, lease, t0)
				if err != nil {
					t.Errorf("Acquire: %v", err)
					return
				}
				if !d.Acquired {
					continue
				}
				grants.Add(1)
				n := held.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				held.Add(-1)
				if err := c.Release(ctx, key, h); err != nil {
					t.Errorf("Release: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if p := peak.Load(); p > ceiling {
		t.Errorf("%d holders at once with ceiling %d", p, ceiling)
	}
	if grants.Load() < ceiling {
		t.Errorf("only %d slots granted in %d attempts", grants.Load(), workers*rounds)
	}
	wantInUse(t, c, key, t0, 0)
}
