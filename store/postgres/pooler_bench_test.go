package postgres_test

import (
	"context"
	"runtime"
	"slices"
	"strconv"
	"sync"
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
// statements are two that the store sends on rate-limited calls, on keys spread so
// that no row is hot: write, tollgate_rate_allow (Allow: an update, committed
// durably), and read, the select of Peek (no commit to flush), where the cost of the
// round trips shows alone. Each is sent three ways:
//
//   - session: the statement alone, its timeout the session's.
//   - set-local: in a transaction of its own, BEGIN, SET LOCAL statement_timeout, the
//     statement, COMMIT: four round trips, as a store that set the timeout per call
//     behind a pooler would need.
//   - pipelined: the same four statements sent together (a pgx batch), in one round
//     trip.
//
// Each iteration makes one call each way, in turns (the first way rotating), so that a
// busy machine's noise falls on the three alike; the benchmark reports each way's
// median latency (session-µs, set-local-µs, pipelined-µs), and ns/op is the three
// calls'. It runs directly (PoolConfig) and through a PgBouncer in transaction mode
// (PoolerConfig, exec mode), one iteration at a time (serial) and from 32 goroutines
// over a pool of 32 connections (parallel). Run it with TOLLGATE_TEST_POSTGRES set:
//
//	go test -run='^$' -bench=StatementTimeout -benchtime=3s ./store/postgres/
func BenchmarkStatementTimeout(b *testing.B) {
	const setLocal = "SET LOCAL statement_timeout = '5s'"
	statements := []struct {
		name, sql string
		args      func(key string, now int64) []any
	}{
		{"write", "SELECT tollgate_rate_allow($1, $2, $3, $4)", func(key string, now int64) []any { return []any{key, now, 1, 1e9} }},
		{"read", "SELECT coalesce((SELECT r.tat FROM tollgate_rate_limits r WHERE r.key = $1), 0)", func(key string, _ int64) []any { return []any{key} }},
	}
	ways := []struct {
		name string
		call func(ctx context.Context, pool *pgxpool.Pool, sql string, args []any) error
	}{
		{"session", func(ctx context.Context, pool *pgxpool.Pool, sql string, args []any) error {
			var tat int64
			return pool.QueryRow(ctx, sql, args...).Scan(&tat)
		}},
		{"set-local", func(ctx context.Context, pool *pgxpool.Pool, sql string, args []any) error {
			return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, setLocal); err != nil {
					return err
				}
				var tat int64
				return tx.QueryRow(ctx, sql, args...).Scan(&tat)
			})
		}},
		{"pipelined", func(ctx context.Context, pool *pgxpool.Pool, sql string, args []any) error {
			batch := &pgx.Batch{}
			batch.Queue("BEGIN")
			batch.Queue(setLocal)
			batch.Queue(sql, args...)
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
			for _, st := range statements {
				for _, parallel := range []bool{false, true} {
					mode := map[bool]string{false: "serial", true: "parallel"}[parallel]
					b.Run(st.name+"/"+mode, func(b *testing.B) {
						ctx := context.Background()
						var next atomic.Int64
						now := time.Now().UnixNano()
						var mu sync.Mutex
						took := make([][]time.Duration, len(ways)) // per way
						// run makes calls until more says stop, one each way per
						// iteration, and adds their latencies to took.
						run := func(more func() bool) {
							mine := make([][]time.Duration, len(ways))
							for i := 0; more(); i++ {
								for j := range ways {
									w := (i + j) % len(ways)
									n := next.Add(1)
									args := st.args("k"+strconv.FormatInt(n%4096, 10), now+n)
									start := time.Now()
									if err := ways[w].call(ctx, pool, st.sql, args); err != nil {
										b.Error(err) // not Fatal: RunParallel's goroutines may not stop the benchmark
									}
									mine[w] = append(mine[w], time.Since(start))
								}
							}
							mu.Lock()
							for w := range ways {
								took[w] = append(took[w], mine[w]...)
							}
							mu.Unlock()
						}
						if parallel {
							b.SetParallelism(max(1, 32/runtime.GOMAXPROCS(0))) // 32 goroutines
							b.RunParallel(func(pb *testing.PB) { run(pb.Next) })
						} else {
							run(b.Loop)
						}
						for w, way := range ways {
							if len(took[w]) > 0 {
								slices.Sort(took[w])
								b.ReportMetric(float64(took[w][len(took[w])/2])/1e3, way.name+"-µs")
							}
						}
					})
				}
			}
		})
	}
}
