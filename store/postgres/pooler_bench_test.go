package postgres_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store/postgres"
)

// BenchmarkStatementTimeout measures what a statement timeout set per transaction
// would cost, against the pool's way of setting it once per session (a startup
// parameter, or behind a pooler the role's setting), which costs nothing per call. The
// statement is one the store sends on every rate-limited call (tollgate_rate_allow, on
// keys spread so that no row is hot):
//
//   - session: the statement alone, its timeout the session's.
//   - set-local: a transaction of its own, BEGIN, SET LOCAL statement_timeout, the
//     statement, COMMIT: four round trips, as a store that set the timeout per call
//     behind a pooler would need.
//   - set-local-pipelined: the same four statements sent together (a pgx batch), in one
//     round trip.
//
// Each runs directly (PoolConfig) and through a PgBouncer in transaction mode
// (PoolerConfig, exec mode), one call at a time (serial) and from 32 goroutines over a
// pool of 32 connections (parallel). Run it with TOLLGATE_TEST_POSTGRES set:
//
//	go test -run='^$' -bench=StatementTimeout -benchtime=3s ./store/postgres/
func BenchmarkStatementTimeout(b *testing.B) {
	const setLocal = "SET LOCAL statement_timeout = '5s'"
	const allow = "SELECT tollgate_rate_allow($1, $2, $3, $4)"
	ways := []struct {
		name string
		call func(ctx context.Context, pool *pgxpool.Pool, key string, now int64) error
	}{
		{"session", func(ctx context.Context, pool *pgxpool.Pool, key string, now int64) error {
			var tat int64
			return pool.QueryRow(ctx, allow, key, now, 1, 1e9).Scan(&tat)
		}},
		{"set-local", func(ctx context.Context, pool *pgxpool.Pool, key string, now int64) error {
			return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, setLocal); err != nil {
					return err
				}
				var tat int64
				return tx.QueryRow(ctx, allow, key, now, 1, 1e9).Scan(&tat)
			})
		}},
		{"set-local-pipelined", func(ctx context.Context, pool *pgxpool.Pool, key string, now int64) error {
			batch := &pgx.Batch{}
			batch.Queue("BEGIN")
			batch.Queue(setLocal)
			batch.Queue(allow, key, now, 1, 1e9)
			batch.Queue("COMMIT")
			return pool.SendBatch(ctx, batch).Close()
		}},
	}
	pools := []struct {
		name string
		pool func(b *testing.B) *pgxpool.Pool
	}{
		{"direct", func(b *testing.B) *pgxpool.Pool { return newPool(b, 32) }},
		{"pgbouncer", func(b *testing.B) *pgxpool.Pool {
			pgb := testenv.StartPgBouncer(b, dsn(b))
			role := testenv.PostgresRole(b, dsn(b), newSchema(b), postgres.DefaultStatementTimeout)
			cfg, err := postgres.PoolerConfig(pgb.DSN(role))
			if err != nil {
				b.Fatal(err)
			}
			cfg.MaxConns, cfg.MinConns = 32, 0
			pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(pool.Close)
			if err := postgres.Migrate(context.Background(), pool); err != nil {
				b.Fatal(err)
			}
			return pool
		}},
	}
	for _, p := range pools {
		b.Run(p.name, func(b *testing.B) {
			pool := p.pool(b)
			for _, w := range ways {
				for _, parallel := range []bool{false, true} {
					mode := map[bool]string{false: "serial", true: "parallel"}[parallel]
					b.Run(fmt.Sprintf("%s/%s", w.name, mode), func(b *testing.B) {
						ctx := context.Background()
						var next atomic.Int64
						now := time.Now().UnixNano()
						call := func() {
							n := next.Add(1)
							if err := w.call(ctx, pool, "k"+strconv.FormatInt(n%4096, 10), now+n); err != nil {
								b.Error(err) // not Fatal: RunParallel's goroutines may not stop the benchmark
							}
						}
						if !parallel {
							for b.Loop() {
								call()
							}
							return
						}
						b.SetParallelism(max(1, 32/runtime.GOMAXPROCS(0))) // 32 goroutines
						b.RunParallel(func(pb *testing.PB) {
							for pb.Next() {
								call()
							}
						})
					})
				}
			}
		})
	}
}
