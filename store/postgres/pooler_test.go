package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/store/postgres"
	"github.com/tollgate-dev/tollgate/store/storetest"
)

// poolerModes are the exec modes the store must work in behind a transaction-mode
// pooler: exec (PoolerConfig's) and simple_protocol, which need no prepared statement,
// and pgx's default, cache_statement (named prepared statements), where the pooler
// keeps them across transactions (PgBouncer 1.21 and later, with
// max_prepared_statements).
func poolerModes(t *testing.T, pgb *testenv.PgBouncer) []pgx.QueryExecMode {
	modes := []pgx.QueryExecMode{pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol}
	if pgb.PreparedStatements() {
		return append(modes, pgx.QueryExecModeCacheStatement)
	}
	t.Logf("PgBouncer %d.%d.%d keeps no named prepared statements in transaction mode (%d.%d and later do): "+
		"pgx's default exec mode, cache_statement, is not run through it", pgb.Version[0], pgb.Version[1], pgb.Version[2],
		testenv.PreparedStatementsSince[0], testenv.PreparedStatementsSince[1])
	return modes
}

// pooledPool returns a function that makes a pool on a fresh, migrated schema through
// pgb, in exec mode mode, as a role of the test's own whose settings (not startup
// parameters) give its sessions the schema and the statement timeout.
func pooledPool(pgb *testenv.PgBouncer, mode pgx.QueryExecMode) func(t *testing.T, maxConns int32) *pgxpool.Pool {
	return func(t *testing.T, maxConns int32) *pgxpool.Pool {
		t.Helper()
		role := testenv.PostgresRole(t, dsn(t), newSchema(t), postgres.DefaultStatementTimeout)
		cfg, err := postgres.PoolerConfig(pgb.DSN(role))
		if err != nil {
			t.Fatal(err)
		}
		cfg.ConnConfig.DefaultQueryExecMode = mode
		cfg.MaxConns, cfg.MinConns = maxConns, 0
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close) // runs before the role and the schema are dropped
		if err := postgres.Migrate(context.Background(), pool); err != nil {
			t.Fatalf("Migrate: %v", err)
		}
		return pool
	}
}

// TestBehindPgBouncer runs every conformance suite through a real PgBouncer in
// transaction mode, with no startup parameter, in each exec mode a pooler allows: the
// store must keep every contract there as on a direct connection. It runs in the full
// suite (testenv.Full).
func TestBehindPgBouncer(t *testing.T) {
	testenv.SkipUnlessFull(t, "every conformance suite again behind PgBouncer, in each exec mode; TestStores runs them directly")
	pgb := testenv.StartPgBouncer(t, dsn(t))
	for _, mode := range poolerModes(t, pgb) {
		t.Run(mode.String(), func(t *testing.T) { poolerSuites(t, pooledPool(pgb, mode)) })
	}
}

// poolerSuites runs the conformance suites on the pools newPool makes.
func poolerSuites(t *testing.T, newPool func(t *testing.T, maxConns int32) *pgxpool.Pool) {
	runStores(t, newPool)
	t.Run("AdmitterUnbatched", func(t *testing.T) {
		storetest.TestAdmitter(t, func(t *testing.T) storetest.AdmitterStores {
			s, err := postgres.New(newPool(t, 16), &postgres.Options{Batch: 1})
			if err != nil {
				t.Fatal(err)
			}
			return allRoles(s)
		})
	})
}

// TestPoolerConfig checks what a pooler gets from PoolerConfig: no startup parameter
// but the connection string's own, the exec mode unless the string names one, and
// PoolConfig's pool settings.
func TestPoolerConfig(t *testing.T) {
	cfg, err := postgres.PoolerConfig("postgres://app@127.0.0.1:6432/db?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.ConnConfig.RuntimeParams; len(p) != 0 {
		t.Errorf("startup parameters %v; want none", p)
	}
	if m := cfg.ConnConfig.DefaultQueryExecMode; m != pgx.QueryExecModeExec {
		t.Errorf("exec mode %v; want exec", m)
	}
	if cfg.MaxConns != postgres.DefaultMaxConns || cfg.ConnConfig.ConnectTimeout != postgres.DefaultConnectTimeout ||
		cfg.ConnConfig.BuildContextWatcherHandler == nil {
		t.Errorf("MaxConns %d, ConnectTimeout %s, cancel requests %t; want PoolConfig's", cfg.MaxConns,
			cfg.ConnConfig.ConnectTimeout, cfg.ConnConfig.BuildContextWatcherHandler != nil)
	}
	cfg, err = postgres.PoolerConfig("postgres://app@127.0.0.1:6432/db?default_query_exec_mode=cache_statement&application_name=x")
	if err != nil {
		t.Fatal(err)
	}
	if m, p := cfg.ConnConfig.DefaultQueryExecMode, cfg.ConnConfig.RuntimeParams; m != pgx.QueryExecModeCacheStatement || len(p) != 1 || p["application_name"] != "x" {
		t.Errorf("exec mode %v, startup parameters %v; want the string's: cache_statement, application_name x", m, p)
	}
}

// TestBoundsBehindPgBouncer checks the bounds on the store's statements through a real
// PgBouncer in transaction mode, on a pool of PoolerConfig's, which sends no startup
// parameter: the statement timeout comes from the role's settings (ALTER ROLE ... SET
// statement_timeout, here 200ms), which the server applies to every session it opens
// for the role, so that it holds on whichever server session the pooler gives a
// transaction.
//
//   - Migrate, whose transaction lifts the timeout (SET LOCAL), applies a step longer
//     than it through the pooler, and the sessions keep the timeout afterwards.
//   - Every statement has the timeout, in a transaction and out of one, on every
//     connection of the pool: a slow statement is cut by the server (query_canceled),
//     and a store call that waits for a lock fails with store.ErrUnavailable.
//   - A statement whose context ends is canceled on the server: the cancel request
//     goes through the pooler to the session running it.
func TestBoundsBehindPgBouncer(t *testing.T) {
	const timeout = 200 * time.Millisecond
	pgb := testenv.StartPgBouncer(t, dsn(t))
	schema := newSchema(t)
	role := testenv.PostgresRole(t, dsn(t), schema, timeout)
	cfg, err := postgres.PoolerConfig(pgb.DSN(role))
	if err != nil {
		t.Fatal(err)
	}
	const conns = 4
	cfg.MaxConns, cfg.MinConns = conns, 0
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := postgres.MigrateWithSlowStep(ctx, pool, 3*timeout); err != nil {
		t.Fatalf("Migrate through the pooler, with a step of %s and the role's timeout of %s: %v", 3*timeout, timeout, err)
	}
	isCode := func(err error, code, message string) bool {
		var pgErr *pgconn.PgError
		return errors.As(err, &pgErr) && pgErr.Code == code && strings.Contains(pgErr.Message, message)
	}

	t.Run("StatementTimeout", func(t *testing.T) {
		held := make([]*pgxpool.Conn, 0, conns)
		release := func() {
			for _, c := range held {
				c.Release()
			}
			held = nil
		}
		defer release()
		for range conns {
			c, err := pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, c)
		}
		var wg sync.WaitGroup
		for i, c := range held {
			wg.Go(func() {
				var out, in string
				if err := c.QueryRow(ctx, "SHOW statement_timeout").Scan(&out); err != nil {
					t.Errorf("connection %d: %v", i, err)
				}
				if err := pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
					return tx.QueryRow(ctx, "SHOW statement_timeout").Scan(&in)
				}); err != nil {
					t.Errorf("connection %d: %v", i, err)
				}
				if out != "200ms" || in != "200ms" {
					t.Errorf("connection %d: statement_timeout %q, in a transaction %q; want the role's, 200ms", i, out, in)
				}
			})
		}
		wg.Wait()
		release()

		if _, err := pool.Exec(ctx, "SELECT pg_sleep(60)"); !isCode(err, "57014", "statement timeout") {
			t.Errorf("pg_sleep(60) returned %v; want the server's statement timeout (57014)", err)
		}

		s, err := postgres.New(pool, nil)
		if err != nil {
			t.Fatal(err)
		}
		limit := driver.Limit{Rate: 1000, Per: time.Second, Burst: 1000}
		if _, err := s.Allow(ctx, "k", limit, t0); err != nil {
			t.Fatal(err)
		}
		locker, err := pgx.Connect(ctx, dsn(t))
		if err != nil {
			t.Fatal(err)
		}
		defer locker.Close(context.Background())
		if err := pgx.BeginFunc(ctx, locker, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "LOCK TABLE "+pgx.Identifier{schema, "tollgate_rate_limits"}.Sanitize()); err != nil {
				return err
			}
			_, err := s.Allow(ctx, "k", limit, t0.Add(time.Second))
			if !errors.Is(err, store.ErrUnavailable) || !isCode(err, "57014", "statement timeout") {
				t.Errorf("Allow on a locked table returned %v; want store.ErrUnavailable, from the statement timeout", err)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("ContextDeadline", func(t *testing.T) {
		watch, err := pgx.Connect(ctx, dsn(t))
		if err != nil {
			t.Fatal(err)
		}
		defer watch.Close(context.Background())
		stmtCtx, stmtCancel := context.WithCancel(ctx)
		defer stmtCancel()
		returned := make(chan error, 1)
		go func() {
			returned <- pgx.BeginFunc(stmtCtx, pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(stmtCtx, "SET LOCAL statement_timeout = 0"); err != nil {
					return err
				}
				_, err := tx.Exec(stmtCtx, "SELECT pg_sleep(60)")
				return err
			})
		}()
		// Canceled once it runs on the server.
		if err := testenv.Wait(ctx, func() error {
			var running bool
			if err := watch.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity
				WHERE usename = $1 AND state = 'active' AND query = 'SELECT pg_sleep(60)')`, role).Scan(&running); err != nil || !running {
				return fmt.Errorf("pg_sleep(60) is not running: %v", err)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		stmtCancel()
		select {
		case err := <-returned:
			if !isCode(err, "57014", "user request") {
				t.Errorf("pg_sleep(60) whose context ended returned %v; want the server's cancel (57014)", err)
			}
		case <-ctx.Done():
			t.Fatal("pg_sleep(60) whose context ended did not return")
		}
	})
}
