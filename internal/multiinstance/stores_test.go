package multiinstance_test

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/idempotency"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store/postgres"
	"github.com/tollgate-dev/tollgate/store/redis"
)

// The deployments on the real stores. Each test gets a fresh PostgreSQL schema and a
// fresh Redis prefix; each instance its own pool and client.

// onPostgres puts everything in PostgreSQL, reached directly or through a PgBouncer in
// transaction mode. Behind PgBouncer the instances are wired as the package
// documentation of store/postgres says ("Behind a pooler"): postgres.PoolerConfig (no
// startup parameter, pgx's exec mode, or its simple protocol with
// throughPgBouncerSimple), and the schema and the statement timeout in the settings of
// the role they log in as.
func onPostgres(via pgVia) deployment {
	tg := perTest(via, false)
	name := map[pgVia]string{directly: "postgres", throughPgBouncer: "postgres-pgbouncer",
		throughPgBouncerSimple: "postgres-pgbouncer-simple"}[via]
	return deployment{name: name,
		stores: func(t *testing.T) tollgate.Stores {
			s := tg(t).pg.store(t)
			return tollgate.Stores{Keys: s, Ledger: s, Rates: s, Slots: s}
		},
		answers: func(t *testing.T) idempotency.Store { return tg(t).pg.answers(t) },
		pg:      func(t *testing.T) pgTarget { return tg(t).pg }}
}

// onRedisAndPostgres puts keys and money in PostgreSQL and the limits in Redis: the
// composition the Redis store recommends. The answers of idempotent batches are kept
// with the money.
func onRedisAndPostgres() deployment {
	tg := perTest(directly, true)
	return deployment{name: "redis+postgres", serverClock: true,
		stores: func(t *testing.T) tollgate.Stores {
			s, r := tg(t).pg.store(t), tg(t).rd.store(t)
			return tollgate.Stores{Keys: s, Ledger: s, Rates: r, Slots: r}
		},
		answers: func(t *testing.T) idempotency.Store { return tg(t).pg.answers(t) },
		pg:      func(t *testing.T) pgTarget { return tg(t).pg }}
}

// onRedis puts everything in Redis.
func onRedis() deployment {
	tg := perTest(noPostgres, true)
	return deployment{name: "redis", serverClock: true,
		stores: func(t *testing.T) tollgate.Stores {
			r := tg(t).rd.store(t)
			return tollgate.Stores{Keys: r, Ledger: r, Rates: r, Slots: r}
		},
		answers: func(t *testing.T) idempotency.Store { return tg(t).rd.store(t).Idempotency() }}
}

// onRedisCallerClock is onRedis with the Redis store on the time the service passes
// (redis.Options.CallerClock) rather than the Redis server's clock, for the tests that
// move the service's clock past instants the store judges: by default the store judges
// reservation deadlines, and the lapse of grants, on the server's clock, on which a
// lapse scripted in 2030 never comes.
func onRedisCallerClock() deployment {
	tg := perTest(noPostgres, true)
	return deployment{name: "redis-caller-clock",
		stores: func(t *testing.T) tollgate.Stores {
			r := tg(t).rd.storeWith(t, redis.Options{CallerClock: true})
			return tollgate.Stores{Keys: r, Ledger: r, Rates: r, Slots: r}
		},
		answers: func(t *testing.T) idempotency.Store {
			return tg(t).rd.storeWith(t, redis.Options{CallerClock: true}).Idempotency()
		}}
}

// pgTarget is a test's PostgreSQL schema, and, for a deployment behind a pooler, the
// connection string through its PgBouncer of a role whose settings name the schema,
// and the exec mode of the instances' connections (0: PoolerConfig's).
type pgTarget struct {
	dsn, schema, pooled string
	mode                pgx.QueryExecMode
}

// pool returns a pool of its own on the schema, of one instance's.
func (p pgTarget) pool(t *testing.T, maxConns int32) *pgxpool.Pool {
	t.Helper()
	if p.pooled == "" {
		return testenv.PostgresPool(t, p.dsn, p.schema, maxConns)
	}
	cfg, err := postgres.PoolerConfig(p.pooled)
	if err != nil {
		t.Fatal(err)
	}
	if p.mode != 0 {
		cfg.ConnConfig.DefaultQueryExecMode = p.mode
	}
	cfg.MaxConns, cfg.MinConns = maxConns, 0
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// answers returns an idempotency store on the schema, with a pool of its own.
func (p pgTarget) answers(t *testing.T) *postgres.IdempotencyStore {
	t.Helper()
	s, err := postgres.NewIdempotencyStore(p.pool(t, 4))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (p pgTarget) store(t *testing.T) *postgres.Store {
	t.Helper()
	s, err := postgres.New(p.pool(t, 16), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// redisTarget is a test's Redis prefix.
type redisTarget struct{ addr, prefix string }

func (r redisTarget) store(t *testing.T) *redis.Store {
	t.Helper()
	return r.storeWith(t, redis.Options{})
}

// storeWith is store with options o (their Prefix the test's).
func (r redisTarget) storeWith(t *testing.T, o redis.Options) *redis.Store {
	t.Helper()
	o.Prefix = r.prefix
	s, err := redis.New(testenv.RedisClient(t, r.addr), &o)
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

// How a deployment reaches PostgreSQL.
type pgVia int

const (
	noPostgres             pgVia = iota
	directly                     // the schema in the connections' search_path
	throughPgBouncer             // through a PgBouncer of the test's, in transaction mode
	throughPgBouncerSimple       // the same, in pgx's simple protocol
)

// perTest returns the targets of a test, prepared on its first call (per test): the
// instances then open their own connections to them.
func perTest(pg pgVia, useRedis bool) func(*testing.T) targets {
	var mu sync.Mutex
	all := map[*testing.T]targets{}
	return func(t *testing.T) targets {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		tg, ok := all[t]
		if !ok {
			if pg != noPostgres {
				dsn := testenv.Var(t, testenv.Postgres)
				tg.pg = pgTarget{dsn: dsn, schema: testenv.PostgresSchema(t, dsn)}
				if pg == throughPgBouncer || pg == throughPgBouncerSimple {
					role := testenv.PostgresRole(t, dsn, tg.pg.schema, postgres.DefaultStatementTimeout)
					tg.pg.pooled = testenv.StartPgBouncer(t, dsn).DSN(role)
				}
				if pg == throughPgBouncerSimple {
					tg.pg.mode = pgx.QueryExecModeSimpleProtocol
				}
				if err := postgres.Migrate(context.Background(), tg.pg.pool(t, 2)); err != nil {
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
