package redis_test

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store/redis"
	"github.com/tollgate-dev/tollgate/store/storetest"
)

// What the scripts cost Redis, measured in instructions of Redis 7.0 with callgrind
// (valgrind --tool=callgrind on redis-server, counting what it spends while
// BenchmarkRuns or BenchmarkAdmitClose runs), and why the hot path's scripts (lua/admit.lua and
// lua/close.lua) are written as they are.
//
// Redis runs a script's whole text on every call, so every function it defines is
// created anew each time, and Lua's conversions between numbers and strings are slow. A
// simple command called from a script costs about 2,900 to run and as much again to
// pass its arguments and reply between Lua and Redis; each key or argument of the
// script, about 650 to pass; a helper function defined and called, about 1,200;
// tonumber, 1,400 to 2,000 (it parses its argument twice); s + 0, 600 to 900;
// string.format with '%d', 2,000, and with '%.0f', 5,000; a number rather than a string
// passed to redis.call, 3,800 more (Redis formats it with '%.17g'); a table in a
// script's reply, about 3,000 beyond its values.
//
// The two scripts of the hot path therefore take the steps of many calls in one run and
// read the account's state once for all of them (see lua/admit.lua), reply a list of
// the steps' own tables (copying them into one flat list cost Lua 8,000 a step, more
// than Redis's conversion of the nested list saves), define few helpers, read numbers
// by arithmetic (s + 0) and format the numbers they send with '%d', which is exact for
// integers below 2^53, negative ones too, on the 64-bit builds Redis runs on. A step
// passes two arguments, its request id and one string of its parameters, which a run
// reads (one string.match) only when they differ from the step's before: the calls of
// one account share them, so a run of 10 passes 20 arguments where it passed 200, and
// parses one set of numbers. A step whose parameters are the step's before passes an
// empty string instead: Redis reads, copies and interns a 200-byte argument for about
// 2,800 instructions even when it is the same string. A new step's marker is written
// with SET NX GET, which is also its replay check (see lua/admit.lua). The other
// scripts include only the helper groups they call (lua/lib_*.lua).
//
// A paid call (an admission and its closing, every part in Redis) costs Redis, in all
// (reading the commands, EVALSHA, writing the replies), about 150,000 instructions in
// runs of 10 steps (125,000 in EVALSHA) and 385,000 in runs of one step, measured with
// BenchmarkRuns: before the parameters were one string and the replay check rode on the
// marker's write, 194,000 (152,000) and 391,000. Counted inside processInputBuffer
// alone (valgrind --toggle-collect=processInputBuffer, which leaves out the server's
// cron, whose share depends on how long the run takes), runs of 10 cost 139,000 a paid
// call since the parameters are sent once a run and the runs answer lists of their
// steps' replies, against 145,000 before. Start a redis-server under valgrind
// --tool=callgrind, zero its counts (callgrind_control -z), run BenchmarkRuns/steps=10
// with -benchtime=30x and then 230x against it, dump the counts after each
// (callgrind_control -d), and divide the difference by 2,000 calls.

// BenchmarkAdmitClose measures a call's Redis traffic, one Admit and one Close (two
// round trips), on the server's clock as in production:
//
//   - step=full: key check, rate limit, slot and credits (everything in Redis);
//   - step=limits: rate limit and slot only (keys and credits in PostgreSQL);
//   - accounts=1: every call on one hot account; accounts=1000: spread over many;
//   - serial: one goroutine, so ns/op is the latency of the pair; parallel:
//     GOMAXPROCS goroutines (b.SetParallelism(16) of them per proc), so ns/op is the
//     inverse of throughput.
//
// The limits never refuse (a rate of a million a second, a ceiling of a million), and
// the balance does not run out.
func BenchmarkAdmitClose(b *testing.B) {
	for _, full := range []bool{true, false} {
		for _, accounts := range []int{1, 1000} {
			name := "step=limits"
			if full {
				name = "step=full"
			}
			b.Run(fmt.Sprintf("%s/accounts=%d", name, accounts), func(b *testing.B) {
				s := newStore(b, &redis.Options{})
				steps := benchAccounts(b, s, accounts, full)
				for _, parallel := range []bool{false, true} {
					mode := "serial"
					if parallel {
						mode = "parallel"
					}
					b.Run(mode, func(b *testing.B) { benchCalls(b, s, steps, parallel) })
				}
			})
		}
	}
}

// benchCalls measures paid calls through s, one Admit and one Close each, on the
// accounts of steps in turn: serial, or with 16 goroutines per proc.
func benchCalls(b *testing.B, s *redis.Store, steps []driver.Step, parallel bool) {
	var next atomic.Uint64
	call := func() {
		n := next.Add(1)
		st := steps[n%uint64(len(steps))]
		binary.BigEndian.PutUint64(st.Request[8:], n)
		if st.Credits != nil {
			c := *st.Credits
			c.Request = st.Request
			st.Credits = &c
		}
		st.Now = time.Now()
		r, err := s.Admit(b.Context(), st)
		if err != nil || r.Denied != driver.NotDenied {
			b.Fatalf("Admit: %+v, %v", r, err)
		}
		c := driver.Closing{Account: st.Account, Request: st.Request, ReleaseSlot: true}
		if st.Credits != nil {
			c.Settlement = &driver.Settlement{Account: st.Account, Request: st.Request,
				Period: st.Credits.Period, Allowance: st.Credits.Allowance}
		}
		if _, err := s.Close(b.Context(), c); err != nil {
			b.Fatalf("Close: %v", err)
		}
	}
	call() // loads the scripts
	b.ResetTimer()
	if parallel {
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				call()
			}
		})
	} else {
		for b.Loop() {
			call()
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}

// benchAccounts creates n accounts and returns a step template for each.
func benchAccounts(b *testing.B, s *redis.Store, n int, full bool) []driver.Step {
	ctx := b.Context()
	period := driver.MonthOf(time.Now())
	rate := driver.Limit{Rate: 1_000_000, Per: time.Second, Burst: 1_000_000}
	var prefix [8]byte
	binary.BigEndian.PutUint64(prefix[:], uint64(time.Now().UnixNano()))
	steps := make([]driver.Step, n)
	for i := range steps {
		acct := fmt.Sprintf("bench-%04d", i)
		st := driver.Step{Account: acct, Rate: &rate, Slot: &driver.SlotClaim{Ceiling: 1_000_000, Lease: time.Minute}}
		copy(st.Request[:8], prefix[:])
		if full {
			key := auth.Key{ID: acct + "-key", AccountID: acct, Name: "primary", Primary: true, Hash: newHash()}
			must(b, s.CreateAccount(ctx, auth.Account{ID: acct, Plan: "pro"}, key))
			must(b, s.Open(ctx, driver.Opening{Account: acct, Balance: 1 << 50, Allowance: 1 << 50, Period: period}))
			st.Key = &driver.KeyCheck{Account: acct, KeyID: key.ID, Hash: key.Hash}
			st.Credits = &driver.Reservation{Account: acct, APIs: []string{"hash"}, Amount: 1, Period: period, Allowance: 1 << 50, Now: testNow, Expires: testNow.Add(time.Hour)}
		}
		steps[i] = st
	}
	return steps
}

// BenchmarkReplicas measures what Options.Replicas costs: paid calls (every part in
// Redis, 1,000 accounts) on a private master with one replica (each a redis-server on
// a port of its own), through a Store that does not wait (replicas=0) and one that
// waits for the replica (replicas=1), on the same accounts, serial (ns/op is the
// latency of a call) and parallel (calls/s is the throughput). Besides, it reports the
// CPU time a call cost the master and the replica together (redis-µs/call, from INFO
// cpu) and this process (go-µs/call), which a busy machine disturbs less than the
// times. It runs them in three rounds that alternate the two Stores, so that a machine
// whose load changes affects both alike (-count repeats each sub-benchmark in a row
// instead):
//
//	go test -run='^$' -bench=BenchmarkReplicas -benchtime=2s ./store/redis/
func BenchmarkReplicas(b *testing.B) {
	addr(b) // the benchmarks run where the tests do
	primary := testenv.StartRedis(b)
	replica := testenv.StartRedisReplica(b, primary)
	c := newClient(primary.Addr, func(o *goredis.Options) { o.PoolSize = 64 })
	rc := newClient(replica.Addr, nil)
	b.Cleanup(func() { c.Close(); rc.Close() })
	s, prefix := newStorePrefix(b, c, &redis.Options{})
	steps := benchAccounts(b, s, 1000, true)
	stores := []*redis.Store{openStore(b, c, prefix, &redis.Options{}), openStore(b, c, prefix, &redis.Options{Replicas: 1})}
	// cpu returns the CPU time the master and the replica have used, and this process.
	cpu := func(b *testing.B) (servers, self time.Duration) {
		servers = serverCPU(b, c) + serverCPU(b, rc)
		return servers, processCPU(b)
	}
	for round := range 3 {
		for _, parallel := range []bool{false, true} {
			mode := "serial"
			if parallel {
				mode = "parallel"
			}
			for n, ws := range stores {
				b.Run(fmt.Sprintf("round=%d/%s/replicas=%d", round+1, mode, n), func(b *testing.B) {
					servers, self := cpu(b)
					benchCalls(b, ws, steps, parallel)
					servers2, self2 := cpu(b)
					perCall := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N+1) }
					b.ReportMetric(perCall(servers2-servers), "redis-µs/call")
					b.ReportMetric(perCall(self2-self), "go-µs/call")
				})
			}
		}
	}
}

// serverCPU returns the CPU time (system and user) the Redis server of c has used.
func serverCPU(b *testing.B, c *goredis.Client) time.Duration {
	info, err := c.Info(b.Context(), "cpu").Result()
	must(b, err)
	var d time.Duration
	for _, f := range []string{"used_cpu_sys:", "used_cpu_user:"} {
		_, v, _ := strings.Cut(info, f)
		v, _, _ = strings.Cut(v, "\r")
		sec, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		must(b, err)
		d += time.Duration(sec * float64(time.Second))
	}
	return d
}

// processCPU returns the CPU time (system and user) this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	must(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// The storetest benchmarks, one line each.

func BenchmarkLedger(b *testing.B) {
	storetest.BenchmarkLedger(b, func(b *testing.B) driver.Ledger { return newStore(b, nil) })
}

func BenchmarkRateLimiter(b *testing.B) {
	storetest.BenchmarkRateLimiter(b, func(b *testing.B) driver.RateLimiter { return newStore(b, nil) })
}

func BenchmarkConcurrencyLimiter(b *testing.B) {
	storetest.BenchmarkConcurrencyLimiter(b, func(b *testing.B) driver.ConcurrencyLimiter { return newStore(b, nil) })
}

func BenchmarkKeyStoreResolve(b *testing.B) {
	storetest.BenchmarkKeyStoreResolve(b, func(b *testing.B) auth.KeyStore { return newStore(b, nil) }, 1000, 0)
}

// BenchmarkSweep measures voiding 100,000 expired reservations of 1,000 accounts.
func BenchmarkSweep(b *testing.B) {
	storetest.BenchmarkSweep(b, func(b *testing.B) driver.Ledger { return newStore(b, nil) }, 1000, 100_000)
}

// BenchmarkRuns measures the calls of one account sent together, as a busy service
// sends them: each op is n admissions with every part in Redis, in one run of the
// admission script, then their n closings, in one run of the closing script (the
// pipelines' runs, made deterministic). Divide by n for a call: what a call costs
// Redis here (counted with callgrind) does not depend on the load, unlike the runs of
// BenchmarkAdmitClose/parallel.
func BenchmarkRuns(b *testing.B) {
	for _, n := range []int{1, 10} {
		b.Run(fmt.Sprintf("steps=%d", n), func(b *testing.B) {
			s := newStore(b, &redis.Options{})
			tmpl := benchAccounts(b, s, 1, true)[0]
			ops := make([]any, n)
			var next uint64
			run := func() {
				now := time.Now()
				for i := range ops {
					next++
					st := tmpl
					binary.BigEndian.PutUint64(st.Request[8:], next)
					c := *st.Credits
					c.Request = st.Request
					st.Credits, st.Now = &c, now
					ops[i] = st
				}
				res, errs, _ := s.Together(b.Context(), ops)
				for i, r := range res {
					if errs[i] != nil || r.(driver.StepResult).Denied != driver.NotDenied {
						b.Fatalf("Admit: %+v, %v", r, errs[i])
					}
					st := ops[i].(driver.Step)
					ops[i] = driver.Closing{Account: st.Account, Request: st.Request, ReleaseSlot: true,
						Settlement: &driver.Settlement{Account: st.Account, Request: st.Request,
							Period: st.Credits.Period, Allowance: st.Credits.Allowance}}
				}
				_, errs, _ = s.Together(b.Context(), ops)
				for _, err := range errs {
					if err != nil {
						b.Fatalf("Close: %v", err)
					}
				}
			}
			run() // loads the scripts
			for b.Loop() {
				run()
			}
		})
	}
}
