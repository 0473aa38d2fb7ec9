package multiinstance_test

import (
	"context"
	"sync"
	"testing"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/idempotency"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store/postgres"
	"github.com/tollgate-dev/tollgate/store/redis"
)

// The deployments on the real stores. Each test gets a fresh PostgreSQL schema and a
// fresh Redis prefix; each instance its own pool and client.

// onPostgres puts everything in PostgreSQL.
func onPostgres() deployment {
	tg := perTest(true, false)
	return deployment{name: "postgres",
		stores: func(t *testing.T) tollgate.Stores {
			s := tg(t).pg.store(t)
			return tollgate.Stores{Keys: s, Ledger: s, Rates: s, Slots: s}
		},
		answers: func(t *testing.T) idempotency.Store { return tg(t).pg.answers(t) }}
}

// onRedisAndPostgres puts keys and money in PostgreSQL and the limits in Redis: the
// composition the Redis store recommends. The answers of idempotent batches are kept
// with the money.
func onRedisAndPostgres() deployment {
	tg := perTest(true, true)
	return deployment{name: "redis+postgres", serverClock: true,
		stores: func(t *testing.T) tollgate.Stores {
			s, r := tg(t).pg.store(t), tg(t).rd.store(t)
			return tollgate.Stores{Keys: s, Ledger: s, Rates: r, Slots: r}
		},
		answers: func(t *testing.T) idempotency.Store { return tg(t).pg.answers(t) }}
}

// onRedis puts everything in Redis.
func onRedis() deployment {
	tg := perTest(false, true)
	return deployment{name: "redis", serverClock: true,
		stores: func(t *testing.T) tollgate.Stores {
			r := tg(t).rd.store(t)
			return tollgate.Stores{Keys: r, Ledger: r, Rates: r, Slots: r}
		},
		answers: func(t *testing.T) idempotency.Store { return tg(t).rd.store(t) }}
}

// pgTarget is a test's PostgreSQL schema.
type pgTarget struct{ dsn, schema string }

// answers returns an idempotency store on the schema, with a pool of its own.
func (p pgTarget) answers(t *testing.T) *postgres.IdempotencyStore {
	t.Helper()
	s, err := postgres.NewIdempotencyStore(testenv.PostgresPool(t, p.dsn, p.schema, 4))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (p pgTarget) store(t *testing.T) *postgres.Store {
	t.Helper()
	s, err := postgres.New(testenv.PostgresPool(t, p.dsn, p.schema, 16), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// redisTarget is a test's Redis prefix.
type redisTarget struct{ addr, prefix string }

func (r redisTarget) store(t *testing.T) *redis.Store {
	t.Helper()
	s, err := redis.New(testenv.RedisClient(t, r.addr), &redis.Options{Prefix: r.prefix})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// targets are a test's schema and prefix.
type targets struct {
	pg pgTarget
	rd redisTarget
}

// perTest returns the targets of a test, prepared on its first call (per test): the
// instances then open their own connections to them.
func perTest(usePG, useRedis bool) func(*testing.T) targets {
	var mu sync.Mutex
	all := map[*testing.T]targets{}
	return func(t *testing.T) targets {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		tg, ok := all[t]
		if !ok {
			if usePG {
				dsn := testenv.Var(t, testenv.Postgres)
				tg.pg = pgTarget{dsn: dsn, schema: testenv.PostgresSchema(t, dsn)}
				if err := postgres.Migrate(context.Background(), testenv.PostgresPool(t, dsn, tg.pg.schema, 2)); err != nil {
					t.Fatal(err)
				}
			}
			if useRedis {
				addr := testenv.Var(t, testenv.Redis)
				tg.rd = redisTarget{addr: addr, prefix: testenv.RedisPrefix(t, testenv.RedisClient(t, addr))}
			}
			all[t] = tg
		}
		return tg
	}
}
