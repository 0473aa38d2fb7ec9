package multiinstance_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store/postgres"
	"github.com/tollgate-dev/tollgate/store/redis"
)

// pgCounter counts the statements a pool sends (each one round trip once the statement
// is prepared).
type pgCounter struct{ n atomic.Int64 }

func (c *pgCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *pgCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// redisCounter counts the commands a client sends (a pipeline counts once).
type redisCounter struct{ n atomic.Int64 }

func (c *redisCounter) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (c *redisCounter) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *redisCounter) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmds)
	}
}

// TestRoundTripsPerPaidCall counts the store round trips of paid REST calls on a warm
// instance (its key cache filled, its statements prepared, its scripts loaded): exactly
// one to admit and one to settle on each store that holds a part of the call.
func TestRoundTripsPerPaidCall(t *testing.T) {
	tests := []struct {
		name            string
		pg, rd          bool
		wantPG, wantRed int64 // round trips per call
	}{
		{"postgres", true, false, 2, 0},
		{"redis+postgres", true, true, 2, 2},
		{"redis", false, true, 0, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pgc, rdc := &pgCounter{}, &redisCounter{}
			var stores tollgate.Stores
			if tt.pg {
				dsn := testenv.Var(t, testenv.Postgres)
				schema := testenv.PostgresSchema(t, dsn)
				pool := testenv.PostgresPool(t, dsn, schema, 4, func(c *pgxpool.Config) { c.ConnConfig.Tracer = pgc })
				if err := postgres.Migrate(t.Context(), pool); err != nil {
					t.Fatal(err)
				}
				pg, err := postgres.New(pool, nil)
				if err != nil {
					t.Fatal(err)
				}
				stores = tollgate.Stores{Keys: pg, Ledger: pg, Rates: pg, Slots: pg}
			}
			if tt.rd {
				addr := testenv.Var(t, testenv.Redis)
				client := testenv.RedisClient(t, addr)
				client.AddHook(rdc)
				rd, err := redis.New(client, &redis.Options{Prefix: testenv.RedisPrefix(t, client)})
				if err != nil {
					t.Fatal(err)
				}
				stores.Rates, stores.Slots = rd, rd
				if !tt.pg {
					stores.Keys, stores.Ledger = rd, rd
				}
			}
			d := deployment{name: tt.name, stores: func(*testing.T) tollgate.Stores { return stores }}
			c := start(t, d, 1)
			_, _, key := c.account(t, "tight", 1000)
			for range 3 { // warm the key cache, the prepared statements and the scripts
				if r := c.call(t, 0, "/v1/hash?text=x", key); r.status != http.StatusOK {
					t.Fatalf("warming: %d %s", r.status, r.code)
				}
			}
			const calls = 20
			pg0, rd0 := pgc.n.Load(), rdc.n.Load()
			for range calls {
				if r := c.call(t, 0, "/v1/hash?text=x", key); r.status != http.StatusOK {
					t.Fatalf("%d %s", r.status, r.code)
				}
			}
			gotPG, gotRd := pgc.n.Load()-pg0, rdc.n.Load()-rd0
			if gotPG != tt.wantPG*calls || gotRd != tt.wantRed*calls {
				t.Errorf("%d calls took %d PostgreSQL and %d Redis round trips; want %d and %d per call",
					calls, gotPG, gotRd, tt.wantPG, tt.wantRed)
			}
		})
	}
}
