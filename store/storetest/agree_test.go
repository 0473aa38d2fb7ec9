package storetest_test

import (
	"testing"

	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/store/postgres"
	"github.com/tollgate-dev/tollgate/store/redis"
	"github.com/tollgate-dev/tollgate/store/storetest"
)

// TestLedgersAgree runs the same random sequences of operations on the memory ledger,
// PostgreSQL (one sub-balance per account, and several) and Redis, and compares every
// answer.
func TestLedgersAgree(t *testing.T) {
	dsn := testenv.Var(t, testenv.Postgres)
	addr := testenv.Var(t, testenv.Redis)
	pg := func(shards int) *postgres.Store {
		pool := testenv.PostgresPool(t, dsn, testenv.PostgresSchema(t, dsn), 4)
		if err := postgres.Migrate(t.Context(), pool); err != nil {
			t.Fatal(err)
		}
		s, err := postgres.New(pool, &postgres.Options{Shards: shards})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	c := testenv.RedisClient(t, addr)
	rs, err := redis.New(c, &redis.Options{Prefix: testenv.RedisPrefix(t, c), CallerClock: true})
	if err != nil {
		t.Fatal(err)
	}
	seeds := 12
	if testenv.Full() {
		seeds = 120
	}
	storetest.LedgersAgree(t, []storetest.NamedLedger{
		{Name: "memory", Ledger: memory.NewLedger(nil)},
		{Name: "postgres", Ledger: pg(1)},
		{Name: "postgres/3", Ledger: pg(3)},
		{Name: "redis", Ledger: rs},
	}, seeds, 200)
}
