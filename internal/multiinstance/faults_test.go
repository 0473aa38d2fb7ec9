package multiinstance_test

import (
	"context"
	"net/http"
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
					if in.svc.PendingSettlements() > 0 {
						return context.DeadlineExceeded
					}
				}
				return nil
			})
			if err != nil {
				t.Fatalf("settlements still pending: %v", err)
			}
			b := c.balance(t, 0, acct)
			if b.Remaining != credits-served.Load() || b.Used != served.Load() {
				t.Errorf("served %d calls (refused %d); balance %+v, want remaining %d and used %d",
					served.Load(), refused.Load(), b, credits-served.Load(), served.Load())
			}
			t.Logf("served %d, refused %d with 503", served.Load(), refused.Load())
		})
	}
}
