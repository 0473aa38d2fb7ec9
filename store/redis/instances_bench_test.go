package redis_test

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store/redis"
)

// BenchmarkHotInstances measures one hot account's paid calls (an Admit with key check
// and a 1-credit reservation, then a Close keeping the charge, on the server's clock)
// sent by one Store, against the same calls sent by three Store values on three clients
// of the same Redis (three instances of a deployment), with the same 64 goroutines and
// 33 connections in all (one client of 33, or three of 11). It alternates the two in
// rounds, so that a change of the machine's load affects both alike: b.N calls in all,
// shared evenly among the rounds, each round giving half of its calls to each side.
//
// It reports the calls per second of each side (the median over the rounds), and the
// median, min and max of the rounds' ratios of three instances to one
// (three/one-median, -min, -max), and the Redis server's CPU time a call cost each
// side, and this process's (the medians over the rounds: the work, which other clients
// of the server disturb, but the machine's load far less than the rates). At the end it checks that the balance is exact: every
// call reserved and settled one credit. Fix the number of calls, as the set-up is made
// once per run:
//
//	go test -run='^$' -bench=BenchmarkHotInstances -benchtime=200000x ./store/redis/
func BenchmarkHotInstances(b *testing.B) {
	const (
		rounds     = 5
		goroutines = 64
		credits    = 1 << 50
	)
	ctx := b.Context()
	a := addr(b)
	prefix := newPrefix(b, client(b))
	store := func(conns int) *redis.Store {
		c := newClient(a, func(o *goredis.Options) { o.PoolSize = conns })
		b.Cleanup(func() { c.Close() })
		return openStore(b, c, prefix, &redis.Options{})
	}
	single := []*redis.Store{store(33)}
	three := []*redis.Store{store(11), store(11), store(11)}

	const account = "hot"
	period := driver.MonthOf(time.Now())
	key := auth.Key{ID: "hot-key", AccountID: account, Name: "primary", Primary: true, Hash: newHash()}
	must(b, single[0].CreateAccount(ctx, auth.Account{ID: account, Plan: "pro"}, key))
	must(b, single[0].Open(ctx, driver.Opening{Account: account, Balance: credits, Allowance: credits, Period: period}))
	call := func(s *redis.Store) error {
		req := newRequest()
		now := time.Now()
		r, err := s.Admit(ctx, driver.Step{
			Account: account, Request: req, Now: now,
			Key:     &driver.KeyCheck{Account: account, KeyID: key.ID, Hash: key.Hash},
			Credits: &driver.Reservation{Account: account, Request: req, APIs: []string{"hash"}, Amount: 1, Period: period, Allowance: credits, Now: now, Expires: now.Add(time.Hour)},
		})
		if err != nil {
			return err
		}
		if r.Denied != driver.NotDenied {
			return fmt.Errorf("admission denied: %+v", r)
		}
		_, err = s.Close(ctx, driver.Closing{Account: account, Request: req,
			Settlement: &driver.Settlement{Account: account, Request: req, Period: period, Allowance: credits}})
		return err
	}
	// drive makes n calls from the goroutines, goroutine g through stores[g%len(stores)],
	// and returns the calls per second and the CPU time per call of the Redis server and
	// of this process.
	drive := func(stores []*redis.Store, n int) (rate, cpu, self float64) {
		cpu0, self0 := serverCPU(b, client(b)), processCPU(b)
		var (
			left atomic.Int64
			wg   sync.WaitGroup
		)
		left.Store(int64(n))
		start := time.Now()
		for g := range goroutines {
			s := stores[g%len(stores)]
			wg.Go(func() {
				for left.Add(-1) >= 0 {
					if err := call(s); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		rate = float64(n) / time.Since(start).Seconds()
		perCall := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(n) }
		return rate, perCall(serverCPU(b, client(b)) - cpu0), perCall(processCPU(b) - self0)
	}

	per := b.N / (2 * rounds)
	var ones, threes, ratios, cpuOnes, cpuThrees, goOnes, goThrees []float64
	b.ResetTimer()
	for range rounds {
		if per == 0 {
			break
		}
		o, co, gOne := drive(single, per)
		t, ct, gThree := drive(three, per)
		ones, threes, ratios = append(ones, o), append(threes, t), append(ratios, t/o)
		cpuOnes, cpuThrees = append(cpuOnes, co), append(cpuThrees, ct)
		goOnes, goThrees = append(goOnes, gOne), append(goThrees, gThree)
	}
	b.StopTimer()
	if b.Failed() || len(ratios) == 0 {
		return
	}
	calls := int64(2 * rounds * per)
	b.ReportMetric(median(ones), "one-calls/s")
	b.ReportMetric(median(threes), "three-calls/s")
	b.ReportMetric(median(ratios), "three/one-median")
	b.ReportMetric(slices.Min(ratios), "three/one-min")
	b.ReportMetric(slices.Max(ratios), "three/one-max")
	b.ReportMetric(median(cpuOnes), "one-redis-µs/call")
	b.ReportMetric(median(cpuThrees), "three-redis-µs/call")
	b.ReportMetric(median(goOnes), "one-go-µs/call")
	b.ReportMetric(median(goThrees), "three-go-µs/call")
	b.Logf("rounds, calls/s one | three | ratio: %.0f | %.0f | %.2f; µs a call, Redis one | three: %.1f | %.1f, Go one | three: %.1f | %.1f",
		ones, threes, ratios, cpuOnes, cpuThrees, goOnes, goThrees)

	bal, err := single[0].Balance(ctx, account, time.Now(), period, credits)
	if err != nil {
		b.Fatal(err)
	}
	if bal.Remaining != credits-calls || bal.Used != calls {
		b.Fatalf("after %d calls: %d remaining, %d used", calls, bal.Remaining, bal.Used)
	}
}

// median returns the median of xs (the mean of the middle two for an even count).
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
