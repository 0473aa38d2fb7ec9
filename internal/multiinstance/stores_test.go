package multiinstance_test

import (
	"context"
	"sync"
	"testing"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store/postgres"
	"github.com/tollgate-dev/tollgate/store/redis"
)

// The deployments on the real stores. Each test gets a fresh PostgreSQL schema and a
// fresh Redis prefix; each instance its own pool and client.

// onPostgres puts everything in PostgreSQL.
func onPostgres() deployment {
	return deployment{name: "postgres", stores: perTest(func(t *testing.T, pg pgTarget, _ redisTarget) tollgate.Stores {
		s := pg.store(t)
		return tollgate.Stores{Keys: s, Ledger: s, Rates: s, Slots: s}
	}, true, false)}
}

// onRedisAndPostgres puts keys and money in PostgreSQL and the limits in Redis: the
// composition the Redis store recommends.
func onRedisAndPostgres() deployment {
	return deployment{name: "redis+postgres", serverClock: true, stores: perTest(func(t *testing.T, pg pgTarget, rd redisTarget) tollgate.Stores {
		s, r := pg.store(t), rd.store(t)
		return tollgate.Stores{Keys: s, Ledger: s, Rates: r, Slots: r}
	}, true, true)}
}

// onRedis puts everything in Redis.
func onRedis() deployment {
	return deployment{name: "redis", serverClock: true, stores: perTest(func(t *testing.T, _ pgTarget, rd redisTarget) tollgate.Stores {
		r := rd.store(t)
		return tollgate.Stores{Keys: r, Ledger: r, Rates: r, Slots: r}
	}, false, true)}
}

// pgTarget is a test's PostgreSQL schema.
type pgTarget struct{ dsn, schema string }

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

// perTest returns an instance factory that prepares the test's schema and prefix on its
// first call (per test), then gives every instance its own connections.
func perTest(build func(*testing.T, pgTarget, redisTarget) tollgate.Stores, usePG, useRedis bool) func(*testing.T) tollgate.Stores {
	var mu sync.Mutex
	targets := map[*testing.T]struct {
		pg pgTarget
		rd redisTarget
	}{}
	return func(t *testing.T) tollgate.Stores {
		t.Helper()
		mu.Lock()
		tg, ok := targets[t]
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
			targets[t] = tg
		}
		mu.Unlock()
		return build(t, tg.pg, tg.rd)
	}
}
