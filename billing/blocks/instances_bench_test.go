package blocks_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/blocks"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/internal/meter"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store/postgres"
	"github.com/tollgate-dev/tollgate/store/redis"
)

// BenchmarkHotInstances drives one hot account's paid calls (an admission with a key
// check and a 1-credit charge, then its settlement keeping the charge) through one
// instance and through three, alternating in 5 rounds of equal calls, 64 goroutines,
// on PostgreSQL and on Redis (each holding keys and credits), with and without credit
// blocks. An instance is a meter on stores of its own (its own pool or client); the
// three share the calls, goroutine g through instance g mod 3. It reports each side's
// calls per second and the ratio three / one of each round (median, min, max), and
// then checks the ledger: every call charged one credit, once.
//
//	TOLLGATE_TEST_POSTGRES=... TOLLGATE_TEST_REDIS=... go test -run='^$' \
//	    -bench=BenchmarkHotInstances -benchtime=60000x ./billing/blocks/
func BenchmarkHotInstances(b *testing.B) {
	for _, st := range []string{"postgres", "redis"} {
		for _, on := range []bool{false, true} {
			b.Run(fmt.Sprintf("store=%s/blocks=%v", st, on), func(b *testing.B) { benchHot(b, st, on) })
		}
	}
}

// hotStore is what a hot instance needs of its store.
type hotStore interface {
	driver.Ledger
	driver.RateLimiter
	driver.ConcurrencyLimiter
	driver.KeyChecker
	CreateAccount(ctx context.Context, a auth.Account, primary auth.Key) error
}

func benchHot(b *testing.B, kind string, withBlocks bool) {
	const (
		rounds     = 5
		goroutines = 64
		credits    = 1 << 50
		account    = "hot"
	)
	ctx := context.Background()
	var newStore func(conns int32) hotStore
	switch kind {
	case "postgres":
		dsn := testenv.Var(b, testenv.Postgres)
		schema := testenv.PostgresSchema(b, dsn)
		first := testenv.PostgresPool(b, dsn, schema, 4)
		if err := postgres.Migrate(ctx, first); err != nil {
			b.Fatal(err)
		}
		newStore = func(conns int32) hotStore {
			s, err := postgres.New(testenv.PostgresPool(b, dsn, schema, conns), nil)
			if err != nil {
				b.Fatal(err)
			}
			return s
		}
	case "redis":
		addr := testenv.Var(b, testenv.Redis)
		prefix := testenv.RedisPrefix(b, testenv.RedisClient(b, addr))
		newStore = func(int32) hotStore {
			s, err := redis.New(testenv.RedisClient(b, addr), &redis.Options{Prefix: prefix})
			if err != nil {
				b.Fatal(err)
			}
			return s
		}
	}
	type inst struct {
		m *meter.Meter
		s hotStore
	}
	newInst := func(conns int32) inst {
		s := newStore(conns)
		opts := &meter.Options{Keys: s}
		if withBlocks {
			bl, err := blocks.New(s, nil)
			if err != nil {
				b.Fatal(err)
			}
			opts.Blocks = bl
		}
		m, err := meter.New(s, s, s, opts)
		if err != nil {
			b.Fatal(err)
		}
		return inst{m, s}
	}
	single := []inst{newInst(33)}
	three := []inst{newInst(11), newInst(11), newInst(11)}
	now := time.Now()
	period := billing.MonthOf(now)
	key := auth.Key{ID: "hot-key", AccountID: account, Name: "primary", Primary: true, Hash: auth.HashKey(auth.NewKeyValue()), CreatedAt: now}
	if err := single[0].s.CreateAccount(ctx, auth.Account{ID: account, Plan: "pro", CreatedAt: now}, key); err != nil {
		b.Fatal(err)
	}
	if err := single[0].s.Open(ctx, driver.Opening{Account: account, Balance: credits, Allowance: credits, Period: period}); err != nil {
		b.Fatal(err)
	}
	plan := billing.Plan{Name: "pro", Credits: credits}
	check := &billing.KeyCheck{Account: account, KeyID: key.ID, Hash: key.Hash}
	var answered atomic.Int64
	call := func(in inst) error {
		t, err := in.m.Admit(ctx, meter.Admission{Account: account, Plan: plan, Period: period, Request: newRequest(),
			APIs: []string{"hash"}, Cost: 1, Now: time.Now(), Key: check})
		if err != nil {
			return err
		}
		if _, err := in.m.Settle(ctx, &t, meter.Outcome{Now: time.Now()}); err != nil {
			return err
		}
		answered.Add(1)
		return nil
	}
	server := map[string]string{"postgres": "postgres", "redis": "redis-server"}[kind]
	// drive makes n calls from the goroutines and returns the calls per second, and the
	// CPU time per call of this process and of the store's server processes.
	drive := func(ins []inst, n int) (rate float64, cpu time.Duration) {
		var left atomic.Int64
		var wg sync.WaitGroup
		left.Store(int64(n))
		cpu0 := processCPU(server)
		start := time.Now()
		for g := range goroutines {
			in := ins[g%len(ins)]
			wg.Go(func() {
				for left.Add(-1) >= 0 {
					if err := call(in); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		rate = float64(n) / time.Since(start).Seconds()
		return rate, (processCPU(server) - cpu0) / time.Duration(n)
	}

	per := b.N / (2 * rounds)
	var ones, threes, ratios, cpuRatios []float64
	var cpuOne, cpuThree []time.Duration
	b.ResetTimer()
	for range rounds {
		if per == 0 {
			break
		}
		o, co := drive(single, per)
		t, ct := drive(three, per)
		ones, threes, ratios = append(ones, o), append(threes, t), append(ratios, t/o)
		cpuOne, cpuThree = append(cpuOne, co), append(cpuThree, ct)
		cpuRatios = append(cpuRatios, float64(ct)/float64(co))
	}
	b.StopTimer()
	for _, in := range append(single, three...) {
		in.m.Close() // gives the blocks back
	}
	if b.Failed() || len(ratios) == 0 {
		return
	}
	b.ReportMetric(median(ones), "one-calls/s")
	b.ReportMetric(median(threes), "three-calls/s")
	b.ReportMetric(median(ratios), "three/one-median")
	b.ReportMetric(slices.Min(ratios), "three/one-min")
	b.ReportMetric(slices.Max(ratios), "three/one-max")
	b.ReportMetric(median(cpuRatios), "cpu-three/one-median")
	b.Logf("rounds, calls/s one | three | ratio: %.0f | %.0f | %.2f", ones, threes, ratios)
	b.Logf("rounds, CPU per call (this process and %s) one | three | ratio: %v | %v | %.2f", server, cpuOne, cpuThree, cpuRatios)

	// The ledger is exact: every call answered charged one credit, once.
	calls := answered.Load()
	bal, err := single[0].s.Balance(ctx, account, time.Now(), period, credits)
	if err != nil {
		b.Fatal(err)
	}
	usage, err := single[0].s.Usage(ctx, account, period)
	if err != nil {
		b.Fatal(err)
	}
	if bal.Remaining != credits-calls || bal.Used != calls || usage["hash"] != calls {
		b.Fatalf("after %d calls: %d remaining, %d used, %d counted", calls, bal.Remaining, bal.Used, usage["hash"])
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

// processCPU returns the CPU time this process and the processes named server have
// used so far (from /proc: the store's server on this machine).
func processCPU(server string) time.Duration {
	var total time.Duration
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		total += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		if d.Name()[0] < '0' || d.Name()[0] > '9' {
			continue
		}
		stat, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ... utime stime: fields 14 and 15.
		open, end := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
		if open < 0 || end < open || !strings.HasPrefix(string(stat[open+1:end]), server) {
			continue
		}
		f := strings.Fields(string(stat[end+2:]))
		if len(f) < 13 {
			continue
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		total += time.Duration(ut+st) * time.Second / clockTicks
	}
	return total
}

// clockTicks is the kernel's USER_HZ, the unit of /proc's CPU times.
const clockTicks = 100
