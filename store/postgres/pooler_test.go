package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate-dev/tollgate/internal/testenv"
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
