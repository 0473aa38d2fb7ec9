package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
	exec := func(sql string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
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
