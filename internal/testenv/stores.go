package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"
)

// PostgresSchema creates a schema with a random name on the server at dsn, and drops it
// with everything in it when the test ends.
func PostgresSchema(t testing.TB, dsn string) string {
	t.Helper()
	var b [8]byte
	rand.Read(b[:])
	schema := "tollgate_test_" + hex.EncodeToString(b[:])
	exec := func(sql string) error { return postgresExec(dsn, sql) }
	if err := exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatalf("creating schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		if err := exec("DROP SCHEMA " + schema + " CASCADE"); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	return schema
}

// PostgresRole creates a login role named after schema on the server at dsn, whose
// sessions work in schema and have a statement timeout: the role's settings (ALTER ROLE
// ... SET search_path, statement_timeout), which reach a session through a pooler where
// startup parameters do not. The role may use and create in the schema. When the test
// ends it ends the role's sessions (a pooler's idle server connections included), drops
// what it owns and drops it: call it after PostgresSchema, and open the test's pools
// after it, so that they are closed first.
func PostgresRole(t testing.TB, dsn, schema string, statementTimeout time.Duration) string {
	t.Helper()
	role := pgx.Identifier{schema}.Sanitize()
	exec := func(sqls ...string) error { return postgresExec(dsn, sqls...) }
	if err := exec("CREATE ROLE "+role+" LOGIN",
		"ALTER ROLE "+role+" SET search_path = "+role,
		fmt.Sprintf("ALTER ROLE %s SET statement_timeout = %d", role, statementTimeout.Milliseconds()),
		"GRANT USAGE, CREATE ON SCHEMA "+role+" TO "+role); err != nil {
		t.Fatalf("creating role %s: %v", schema, err)
	}
	t.Cleanup(func() {
		if err := exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = "+quoteLiteral(schema),
			"DROP OWNED BY "+role, "DROP ROLE "+role); err != nil {
			t.Errorf("dropping role %s: %v", schema, err)
		}
	})
	return schema
}

// postgresExec runs the statements on a connection of its own to dsn, in order, and
// stops at the first error.
func postgresExec(dsn string, sqls ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for _, sql := range sqls {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("%s: %w", sql, err)
		}
	}
	return nil
}

// quoteLiteral returns s as an SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// PostgresPool opens a pool on dsn whose connections work in schema, with timeouts that
// make a stopped server fail fast. It is closed when the test ends (before a schema
// made by PostgresSchema earlier is dropped).
// adjust, if given, may change the configuration last.
func PostgresPool(t testing.TB, dsn, schema string, maxConns int32, adjust ...func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.ConnConfig.ConnectTimeout = 2 * time.Second
	cfg.MaxConns = maxConns
	for _, f := range adjust {
		f(cfg)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// RedisClient returns a client on addr with the fail-fast settings store/redis
// recommends. It is closed when the test ends.
func RedisClient(t testing.TB, addr string) *goredis.Client {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{
		Addr: addr, PoolSize: 32, DialTimeout: time.Second, DialerRetries: 1, ReadTimeout: 2 * time.Second,
		WriteTimeout: 2 * time.Second, PoolTimeout: 3 * time.Second, ContextTimeoutEnabled: true,
		MaxRetries: 1, Protocol: 2,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// RedisPrefix returns a random key prefix, and deletes every key under it (through c)
// when the test ends.
func RedisPrefix(t testing.TB, c *goredis.Client) string {
	t.Helper()
	var b [8]byte
	rand.Read(b[:])
	prefix := "tgtest-" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		it := c.Scan(ctx, 0, prefix+":*", 1000).Iterator()
		for it.Next(ctx) {
			c.Unlink(ctx, it.Val())
		}
	})
	return prefix
}

// QuietRedis silences go-redis's own log (a line per failed dial), for tests that stop
// Redis on purpose. It changes a global of go-redis: call it from TestMain.
func QuietRedis() { goredis.SetLogger(quietLogger{}) }

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}
