package storetest

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing/driver"
)

// BenchmarkLedger measures a call's ledger traffic, a Reserve followed by a Settle, from
// parallel goroutines: on one account (all contending) and spread over 64 accounts.
// Run it with -race as well, to look for races under load.
func BenchmarkLedger(b *testing.B, newLedger func(b *testing.B) driver.Ledger) {
	for _, accounts := range []int{1, 64} {
		b.Run(fmt.Sprintf("accounts=%d", accounts), func(b *testing.B) {
			l, n, ctx := newLedger(b), newIDs(), b.Context()
			names := make([]string, accounts)
			for i := range names {
				names[i] = n.id(fmt.Sprintf("a%d", i))
				err := l.Open(ctx, driver.Opening{Account: names[i], Balance: driver.MaxCredits / 2, Allowance: driver.MaxCredits / 2, Period: p0})
				if err != nil {
					b.Fatal(err)
				}
			}
			var next atomic.Int64
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					acct := names[int(next.Add(1))%accounts]
					id := newRequest()
					r := driver.Reservation{Account: acct, Request: id, APIs: []string{"hash"}, Amount: 1, Period: p0, Allowance: driver.MaxCredits,
						Now: nowIn(p0), Expires: nowIn(p0).Add(hold)}
					if _, err := l.Reserve(ctx, r); err != nil {
						b.Error(err)
						return
					}
					if _, err := l.Settle(ctx, driver.Settlement{Account: acct, Request: id, Period: p0, Allowance: driver.MaxCredits, Now: nowIn(p0)}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkRateLimiter measures Allow from parallel goroutines over 64 keys.
func BenchmarkRateLimiter(b *testing.B, newLimiter func(b *testing.B) driver.RateLimiter) {
	r, n, ctx := newLimiter(b), newIDs(), b.Context()
	keys := make([]string, 64)
	for i := range keys {
		keys[i] = n.id(fmt.Sprintf("k%d", i))
	}
	l := driver.Limit{Rate: 600, Per: time.Minute, Burst: 100}
	var next atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1)
			if _, err := r.Allow(ctx, keys[i%int64(len(keys))], l, t0.Add(time.Duration(i)*time.Millisecond)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkConcurrencyLimiter measures an Acquire followed by a Release from parallel
// goroutines over 64 keys.
func BenchmarkConcurrencyLimiter(b *testing.B, newLimiter func(b *testing.B) driver.ConcurrencyLimiter) {
	c, n, ctx := newLimiter(b), newIDs(), b.Context()
	keys := make([]string, 64)
	for i := range keys {
		keys[i] = n.id(fmt.Sprintf("k%d", i))
	}
	var next atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			key, h := keys[next.Add(1)%int64(len(keys))], newRequest()
			if _, err := c.Acquire(ctx, key, h, 1000, lease, t0); err != nil {
				b.Error(err)
				return
			}
			if err := c.Release(ctx, key, h); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// loadFixtures returns n accounts, each with its primary key.
func loadFixtures(n int) ([]auth.Account, []auth.Key) {
	names := newIDs()
	accts, keys := make([]auth.Account, n), make([]auth.Key, n)
	for i := range n {
		accts[i], keys[i] = plainAccount(names, fmt.Sprintf("a%07d", i))
	}
	return accts, keys
}

// BenchmarkKeyStoreResolve measures Resolve in a store holding the given number of keys
// (one account with a primary key each), looking up the first visit of them (all of
// them if visit is 0 or larger than keys) in a scattered order. The store is filled
// before the timer starts, so results at different sizes compare lookup cost alone.
//
// With a fixed visit set (the keys in use at a time) the results show how lookup cost
// depends on the store's size; visiting every key adds what the memory hierarchy costs
// once the working set no longer fits in the CPU caches.
func BenchmarkKeyStoreResolve(b *testing.B, newStore func(b *testing.B) auth.KeyStore, keys, visit int) {
	s, ctx := newStore(b), b.Context()
	accts, primaries := loadFixtures(keys)
	for i := range accts {
		if err := s.CreateAccount(ctx, accts[i], primaries[i]); err != nil {
			b.Fatal(err)
		}
	}
	// Collect the garbage of the load now, so that the collector does not run during
	// the measurement and skew the results of the larger sizes.
	runtime.GC()
	if visit <= 0 || visit > keys {
		visit = keys
	}
	// Spread the visited keys over the whole store, and visit them out of order.
	step := keys / visit
	const stride = 7919 // a prime: i*stride mod visit is a scattered order
	i := 0
	for b.Loop() {
		if _, _, err := s.Resolve(ctx, primaries[((i*stride)%visit)*step].Hash); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkKeyStoreLoad measures filling an empty store with the given number of
// accounts, each with its primary key. Every iteration fills a fresh store; the fixtures
// are built before the timer starts. Besides ns/op (one whole load) it reports ns/key.
func BenchmarkKeyStoreLoad(b *testing.B, newStore func(b *testing.B) auth.KeyStore, keys int) {
	accts, primaries := loadFixtures(keys)
	ctx := b.Context()
	for b.Loop() {
		s := newStore(b)
		for i := range accts {
			if err := s.CreateAccount(ctx, accts[i], primaries[i]); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(keys), "ns/key")
}

// BenchmarkSweep measures the time a [driver.Sweeper] takes to void reservations left
// open past their expiry: each iteration opens accounts accounts, makes reservations
// reservations spread over them (from 16 goroutines, not timed), and then sweeps, in
// batches of 1,000, until nothing is left; ns/op is the time of the sweeps. It checks
// that every reservation was voided once and every balance is whole again.
func BenchmarkSweep(b *testing.B, newLedger func(b *testing.B) driver.Ledger, accounts, reservations int) {
	for range b.N {
		b.StopTimer()
		l, n, ctx := newLedger(b), newIDs(), b.Context()
		sw, ok := l.(driver.Sweeper)
		if !ok {
			b.Fatalf("%T is not a driver.Sweeper", l)
		}
		names := make([]string, accounts)
		for i := range names {
			names[i] = n.id(fmt.Sprintf("a%d", i))
			if err := l.Open(ctx, driver.Opening{Account: names[i], Balance: int64(reservations), Allowance: int64(reservations), Period: p0}); err != nil {
				b.Fatal(err)
			}
		}
		now := nowIn(p0)
		var next atomic.Int64
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for i := next.Add(1) - 1; i < int64(reservations); i = next.Add(1) - 1 {
					r := driver.Reservation{Account: names[i%int64(accounts)], Request: newRequest(), APIs: []string{"hash"}, Amount: 1,
						Period: p0, Allowance: int64(reservations), Now: now, Expires: now.Add(time.Minute)}
					if _, err := l.Reserve(ctx, r); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		later := now.Add(time.Hour)
		b.StartTimer()
		voided := 0
		for {
			v, err := sw.Sweep(ctx, later, 1000)
			if err != nil {
				b.Fatal(err)
			}
			if v == 0 {
				break
			}
			voided += v
		}
		b.StopTimer()
		if voided != reservations {
			b.Fatalf("the sweeps voided %d reservations, want %d", voided, reservations)
		}
		for _, acct := range names[:min(accounts, 10)] {
			bal, err := l.Balance(ctx, acct, later, p0, int64(reservations))
			if err != nil || bal.Used != 0 || bal.Remaining != int64(reservations) {
				b.Fatalf("account %s after the sweeps: %+v, %v", acct, bal, err)
			}
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(reservations), "ns/reservation")
}

// BenchmarkSweepIdle measures a sweep that finds nothing due, with accounts accounts
// active since the last sweeps: each has a reservation settled before its expiry (which
// has passed) and one open that expires in an hour, all made through the first of
// s.Ledgers (not timed). It reports the round trips of the first sweep after that
// activity (first-trips, where a store may tidy what the activity left), and then times
// sweeps that find nothing due: ns/op and, with s.RoundTrips, trips/op.
func BenchmarkSweepIdle(b *testing.B, s SweepInstances, accounts int) {
	l, n, ctx := s.Ledgers[0], newIDs(), b.Context()
	sw := l.(driver.Sweeper)
	now := nowIn(p0)
	inParallel(b, accounts, func(i int) error {
		acct := n.id(fmt.Sprintf("a%d", i))
		r := driver.Reservation{Account: acct, Request: newRequest(), APIs: []string{"hash"}, Amount: 1,
			Period: p0, Allowance: 100, Now: now, Expires: now.Add(time.Minute)}
		err := l.Open(ctx, driver.Opening{Account: acct, Balance: 100, Allowance: 100, Period: p0})
		if err == nil {
			_, err = l.Reserve(ctx, r)
		}
		if err == nil {
			_, err = l.Settle(ctx, driver.Settlement{Account: acct, Request: r.Request, Period: p0, Allowance: 100, Now: now.Add(time.Second)})
		}
		if err == nil {
			r.Request, r.Expires = newRequest(), now.Add(time.Hour)
			_, err = l.Reserve(ctx, r)
		}
		return err
	})
	at := now.Add(2 * time.Minute)
	sweep := func() {
		if v, err := sw.Sweep(ctx, at, 1000); err != nil || v != 0 {
			b.Fatalf("a sweep with nothing due: %d voided (%v)", v, err)
		}
	}
	start := time.Now()
	first := s.roundTrips(sweep)
	b.ReportMetric(float64(time.Since(start).Microseconds()), "first-µs")
	b.ResetTimer()
	trips := s.roundTrips(func() {
		for range b.N {
			sweep()
		}
	})
	b.StopTimer()
	if s.RoundTrips != nil {
		b.ReportMetric(float64(first), "first-trips")
		b.ReportMetric(float64(trips)/float64(b.N), "trips/op")
	}
}

// BenchmarkSweepers measures the sweeps of s.Ledgers together, each sweeping as the
// Service does (limit 1,000, until a sweep voids fewer), of one expired reservation of
// each of accounts accounts made before (not timed): one op is the whole backlog. It
// reports, besides ns/op, the round trips of all the sweepers together (trips/op, with
// s.RoundTrips) and checks that they voided every reservation once.
func BenchmarkSweepers(b *testing.B, s SweepInstances, accounts int) {
	ctx := b.Context()
	now := nowIn(p0)
	var trips int64
	for range b.N {
		b.StopTimer()
		l, n := s.Ledgers[0], newIDs()
		inParallel(b, accounts, func(i int) error {
			acct := n.id(fmt.Sprintf("a%d", i))
			err := l.Open(ctx, driver.Opening{Account: acct, Balance: 100, Allowance: 100, Period: p0})
			if err == nil {
				_, err = l.Reserve(ctx, driver.Reservation{Account: acct, Request: newRequest(), APIs: []string{"hash"}, Amount: 1,
					Period: p0, Allowance: 100, Now: now, Expires: now.Add(time.Minute)})
			}
			return err
		})
		later := now.Add(time.Hour)
		var voided atomic.Int64
		var wg sync.WaitGroup
		b.StartTimer()
		trips += s.roundTrips(func() {
			for _, l := range s.Ledgers {
				wg.Go(func() {
					for {
						v, err := l.(driver.Sweeper).Sweep(ctx, later, 1000)
						if err != nil {
							b.Error(err)
							return
						}
						voided.Add(int64(v))
						if v < 1000 {
							return
						}
					}
				})
			}
			wg.Wait()
		})
		b.StopTimer()
		if v, err := l.(driver.Sweeper).Sweep(ctx, later, 1000); err != nil || v != 0 || voided.Load() != int64(accounts) {
			b.Fatalf("the sweepers voided %d reservations of %d, and a sweep after them %d (%v)", voided.Load(), accounts, v, err)
		}
		b.StartTimer()
	}
	if s.RoundTrips != nil {
		b.ReportMetric(float64(trips)/float64(b.N), "trips/op")
	}
}

// inParallel runs f for 0 to n-1 from 16 goroutines, and stops the benchmark at the
// first error.
func inParallel(b *testing.B, n int, f func(i int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				if err := f(int(i)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
}
