package multiinstance_test

import (
	"context"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store/postgres"
	"github.com/tollgate-dev/tollgate/store/redis"
)

// TestStoreOutages runs paid calls on three instances while the test stops and
// restarts the servers under them (private servers the test started, never the shared
// ones): during an outage calls are answered 503 and nothing is charged; afterwards the
// instances serve again without a restart; and in the end the balance is exactly the
// starting balance minus the calls that were served, with no lost and no double charge.
func TestStoreOutages(t *testing.T) {
	testenv.SkipUnlessFull(t, "stops and restarts private database servers under load")
	tests := []struct {
		name  string
		redis bool // limits in Redis, keys and money in PostgreSQL
	}{{"postgres", false}, {"redis+postgres", true}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pgServer := testenv.StartPostgres(t)
			pool := testenv.PostgresPool(t, pgServer.DSN, "public", 2)
			if err := postgres.Migrate(t.Context(), pool); err != nil {
				t.Fatal(err)
			}
			var redisServer *testenv.Server
			if tt.redis {
				redisServer = testenv.StartRedis(t)
			}
			d := deployment{name: tt.name, serverClock: tt.redis, stores: func(t *testing.T) tollgate.Stores {
				pg, err := postgres.New(testenv.PostgresPool(t, pgServer.DSN, "public", 8), nil)
				if err != nil {
					t.Fatal(err)
				}
				s := tollgate.Stores{Keys: pg, Ledger: pg, Rates: pg, Slots: pg}
				if tt.redis {
					rd, err := redis.New(testenv.RedisClient(t, redisServer.Addr), nil)
					if err != nil {
						t.Fatal(err)
					}
					s.Rates, s.Slots = rd, rd
				}
				return s
			}}
			c := start(t, d, 3)
			const credits = 1_000_000
			acct, _, key := c.account(t, "busy", credits)

			// Load: workers call the instances in turn until told to stop.
			var served, refused atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for w := range 6 {
				wg.Go(func() {
					for i := w; ; i += 6 {
						select {
						case <-stop:
							return
						default:
						}
						switch r := c.call(t, i, "/v1/hash?text=x", key); r.status {
						case http.StatusOK:
							served.Add(1)
						case http.StatusServiceUnavailable:
							refused.Add(1)
						default:
							t.Errorf("call %d: %d %s %v, want 200 or 503", i, r.status, r.code, r.body)
						}
					}
				})
			}
			// waitServed waits until n more calls have been served.
			waitServed := func(what string, n int64) {
				t.Helper()
				ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
				defer cancel()
				target := served.Load() + n
				if err := testenv.Wait(ctx, func() error {
					if served.Load() < target {
						return context.DeadlineExceeded
					}
					return nil
				}); err != nil {
					t.Fatalf("%s: calls are not served again: %v", what, err)
				}
			}
			// waitRefused waits until n more calls have been refused with 503.
			waitRefused := func(what string, n int64) {
				t.Helper()
				ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
				defer cancel()
				target := refused.Load() + n
				if err := testenv.Wait(ctx, func() error {
					if refused.Load() < target {
						return context.DeadlineExceeded
					}
					return nil
				}); err != nil {
					t.Fatalf("%s: calls are not refused: %v", what, err)
				}
			}

			waitServed("before any outage", 200)
			if tt.redis {
				redisServer.Stop()
				waitRefused("Redis down", 50)
				redisServer.Start()
				waitServed("after Redis came back", 200)
			}
			pgServer.Stop()
			waitRefused("PostgreSQL down", 50)
			pgServer.Start()
			waitServed("after PostgreSQL came back", 200)
			close(stop)
			wg.Wait()

			// Settlements the stores could not take during the outages are retried in
			// the background; wait for them, then check the balance is exact.
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			err := testenv.Wait(ctx, func() error {
				for _, in := range c.instances {
					if in.svc.Stats().PendingSettlements > 0 {
						return context.DeadlineExceeded
					}
				}
				return nil
			})
			if err != nil {
				t.Fatalf("settlements still pending: %v", err)
			}
			// An admission whose answer was lost (the server went down between taking it
			// and answering, and the client was told 503) holds its credits until its
			// reservation expires: let the reservations' time pass.
			c.clock.Advance(time.Hour)
			b := c.balance(t, 0, acct)
			if b.Remaining != credits-served.Load() || b.Used != served.Load() {
				t.Errorf("served %d calls (refused %d); balance %+v, want remaining %d and used %d",
					served.Load(), refused.Load(), b, credits-served.Load(), served.Load())
			}
			t.Logf("served %d, refused %d with 503", served.Load(), refused.Load())
		})
	}
}

// TestOutageBounded runs 100 clients against three instances on a private PostgreSQL
// that holds every store, stops the server for 30 seconds, and starts it again. During
// the outage the instances answer 503 and keep no work per refused call: their
// goroutines and heap stay under a ceiling, and the ledger gets no entry for a refused
// call. Once the server is back, every client is served again (the test waits for it
// however slow the machine, and times nothing), and of the calls made from then on at
// least nine in ten succeed: there is no backlog to drain. In the end the balance is
// exactly the starting one less what the answered calls were charged.
func TestOutageBounded(t *testing.T) {
	testenv.SkipUnlessFull(t, "a 30-second outage of a private PostgreSQL under 100 clients")
	const (
		clients = 100
		outage  = 30 * time.Second
		credits = 10_000_000
	)
	pgServer := testenv.StartPostgres(t)
	if err := postgres.Migrate(t.Context(), testenv.PostgresPool(t, pgServer.DSN, "public", 2)); err != nil {
		t.Fatal(err)
	}
	d := deployment{name: "postgres", stores: func(t *testing.T) tollgate.Stores {
		pg, err := postgres.New(testenv.PostgresPool(t, pgServer.DSN, "public", 16), nil)
		if err != nil {
			t.Fatal(err)
		}
		return tollgate.Stores{Keys: pg, Ledger: pg, Rates: pg, Slots: pg}
	}}
	c := start(t, d, 3)
	acct, _, key := c.account(t, "busy", credits)

	// Each client keeps its answers: when, and the status; and when it was last served,
	// for the test to read while it runs.
	type answer struct {
		at     time.Time
		status int
	}
	answers := make([][]answer, clients)
	lastServed := make([]atomic.Int64, clients) // UnixNano
	var served, charged atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range clients {
		wg.Go(func() {
			for i := w; ; i += clients {
				select {
				case <-stop:
					return
				default:
				}
				r := c.call(t, i, "/v1/hash?text=x", key)
				now := time.Now()
				answers[w] = append(answers[w], answer{now, r.status})
				switch r.status {
				case http.StatusOK:
					lastServed[w].Store(now.UnixNano())
					served.Add(1)
					charged.Add(1)
				case http.StatusServiceUnavailable:
				default:
					t.Errorf("call %d: %d %s %v, want 200 or 503", i, r.status, r.code, r.body)
					return
				}
			}
		})
	}
	waitFor := func(what string, limit time.Duration, done func() bool) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), limit)
		defer cancel()
		if err := testenv.Wait(ctx, func() error {
			if !done() {
				return context.DeadlineExceeded
			}
			return nil
		}); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	waitFor("warming up", time.Minute, func() bool { return served.Load() >= 2000 })

	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	goroutines := runtime.NumGoroutine()
	pgServer.Stop()
	down := time.Now()
	maxGoroutines, maxHeap := 0, uint64(0)
	for tick := time.NewTicker(250 * time.Millisecond); time.Since(down) < outage; <-tick.C {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		maxGoroutines, maxHeap = max(maxGoroutines, runtime.NumGoroutine()), max(maxHeap, m.HeapInuse)
	}
	pgServer.Start()
	back := time.Now()
	// Every client is served again: none is stuck behind work kept from the outage.
	waitFor("after PostgreSQL came back, every client served again", 2*time.Minute, func() bool {
		for i := range lastServed {
			if lastServed[i].Load() <= back.UnixNano() {
				return false
			}
		}
		return true
	})
	recovered := time.Now()
	servedBack := served.Load()
	waitFor("after every client was served again", 2*time.Minute, func() bool { return served.Load() >= servedBack+2000 })
	close(stop)
	wg.Wait()

	// The calls made once every client was served again: nine in ten at least were
	// answered 200.
	refused, after, afterOK := 0, 0, 0
	for _, as := range answers {
		for _, a := range as {
			if a.status == http.StatusServiceUnavailable {
				refused++
			}
			if a.at.After(recovered) {
				after++
				if a.status == http.StatusOK {
					afterOK++
				}
			}
		}
	}
	t.Logf("%d clients, %v outage: %d calls refused with 503; goroutines %d before, at most %d during; heap in use %d MiB before, at most %d MiB during; every client served again %v after the server's return, and then %d of %d calls answered 200",
		clients, outage, refused, goroutines, maxGoroutines, before.HeapInuse>>20, maxHeap>>20, recovered.Sub(back).Round(time.Millisecond), afterOK, after)
	if refused < 1000 {
		t.Errorf("only %d calls were refused during the outage: the test did not load the instances", refused)
	}
	// What an outage may add, whatever the number of refused calls: the pools' dials in
	// progress (two goroutines each, at most 16 per instance), one retry worker per
	// instance, and the clients' connections, which come and go (two goroutines on
	// each side). A goroutine per refused call would be thousands.
	if limit := goroutines + 3*(2*16+1) + 4*clients; maxGoroutines > limit {
		t.Errorf("goroutines grew from %d to %d during the outage, past %d: work is kept per refused call", goroutines, maxGoroutines, limit)
	}
	if maxHeap > before.HeapInuse+64<<20 {
		t.Errorf("heap in use grew from %d MiB to %d MiB during the outage", before.HeapInuse>>20, maxHeap>>20)
	}
	if afterOK*10 < after*9 {
		t.Errorf("once every client was served again, %d of %d calls were answered 200, want nine in ten at least: calls still drain a backlog", afterOK, after)
	}

	// No entry for a refused call; every settlement taken; the balance exact.
	waitFor("settlements retried", time.Minute, func() bool {
		for _, in := range c.instances {
			if in.svc.Stats().PendingSettlements > 0 {
				return false
			}
		}
		return true
	})
	var voids int
	if err := testenv.PostgresPool(t, pgServer.DSN, "public", 1).QueryRow(t.Context(),
		`SELECT count(*) FROM tollgate_ledger WHERE kind = 'void'`).Scan(&voids); err != nil {
		t.Fatal(err)
	}
	if voids != 0 {
		t.Errorf("the ledger has %d void entries: refused calls left work behind", voids)
	}
	// An admission whose answer was lost (the server went down between taking it and
	// answering, and the client was told 503) holds its credits until its reservation
	// expires: let the reservations' time pass.
	c.clock.Advance(time.Hour)
	b := c.balance(t, 0, acct)
	if b.Remaining != credits-charged.Load() || b.Used != charged.Load() {
		t.Errorf("served %d calls; balance %+v, want remaining %d and used %d", served.Load(), b, credits-charged.Load(), charged.Load())
	}
}
