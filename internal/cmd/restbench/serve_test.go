package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// TestPostgresServer serves the postgres server directly and through a PgBouncer in
// transaction mode, which refuses startup parameters such as search_path: its role's
// settings name its schema, and a paid call is answered. Its cleanup drops the role
// and the schema.
func TestPostgresServer(t *testing.T) {
	dsn := testenv.Var(t, testenv.Postgres)
	t.Run("direct", func(t *testing.T) { testPostgresServer(t, dsn, dsn) })
	t.Run("pgbouncer", func(t *testing.T) {
		up, err := pgx.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		pgb := testenv.StartPgBouncer(t, dsn)
		testPostgresServer(t, dsn, pgb.DSN(up.User)+"&default_query_exec_mode=exec")
	})
}

// testPostgresServer serves the postgres server on server, whose database is dsn's.
func testPostgresServer(t *testing.T, dsn, server string) {
	ours := func() []string { // the roles and schemas named restbench_*
		conn, err := pgx.Connect(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		rows, _ := conn.Query(t.Context(), `SELECT 'role ' || rolname FROM pg_roles WHERE rolname LIKE 'restbench\_%'
			UNION ALL SELECT 'schema ' || nspname FROM pg_namespace WHERE nspname LIKE 'restbench\_%'`)
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return names
	}
	before := ours()

	h, cleanup, err := postgresServer(server, 1)
	if err != nil {
		t.Fatal(err)
	}
	servePaid(t, h)
	during := ours()
	cleanup()
	if after := ours(); len(during) != len(before)+2 || !slices.Equal(after, before) {
		t.Errorf("roles and schemas named restbench_*: %v before, %v while serving, %v after; want one role and one schema more while serving only",
			before, during, after)
	}
}

// TestObservedServers serves a paid call on each observed server: the metrics and the
// tracer, on each of its providers, leave the call answered.
func TestObservedServers(t *testing.T) {
	for _, kind := range []string{"metrics", "observed", "observed-noop", "observed-sampled", "observed-exported"} {
		t.Run(kind, func(t *testing.T) {
			h, cleanup, err := buildServer(kind, 1, storeConfig{})
			if err != nil {
				t.Fatal(err)
			}
			defer cleanup()
			servePaid(t, h)
		})
	}
}

// servePaid sends a paid call of the first benchmark account to h, which must answer it.
func servePaid(t *testing.T, h http.Handler) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, restPath, nil)
	req.Header.Set("X-Api-Key", benchKey(0))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Errorf("GET %s: %d %s", restPath, rec.Code, rec.Body)
	}
}

// TestPGRedisServers serves a paid call on the servers on PostgreSQL and Redis, with
// and without their observation.
func TestPGRedisServers(t *testing.T) {
	cfg := storeConfig{postgres: testenv.Var(t, testenv.Postgres), redis: testenv.Var(t, testenv.Redis)}
	for _, kind := range []string{"pgredis", "pgredis-observed"} {
		t.Run(kind, func(t *testing.T) {
			h, cleanup, err := buildServer(kind, 1, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer cleanup()
			servePaid(t, h)
		})
	}
}
