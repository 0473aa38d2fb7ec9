package postgres_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store/postgres"
	"github.com/tollgate-dev/tollgate/store/storetest"
	"github.com/tollgate-dev/tollgate/webhook"
)

// t0 is the instant the adapter's tests start from (whole seconds), and period its
// credit period.
var (
	t0     = time.Date(2030, time.January, 15, 12, 0, 0, 0, time.UTC)
	period = driver.MonthOf(t0)
)

// dsn returns the test server's DSN from TOLLGATE_TEST_POSTGRES, or skips the test (and
// fails it in CI) when it is not set.
func dsn(t testing.TB) string {
	t.Helper()
	return testenv.Var(t, testenv.Postgres)
}

// envCount returns the positive count that the environment variable name sets, or def.
func envCount(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// newSchema creates a schema with a random name on the test server, and drops it (with
// everything in it) when the test ends. It returns the schema's name.
func newSchema(t testing.TB) string {
	t.Helper()
	return testenv.PostgresSchema(t, dsn(t))
}

// poolConfig returns the recommended pool configuration (postgres.PoolConfig) with
// connections that work in schema (their search_path) and carry it as their
// application_name.
func poolConfig(t testing.TB, schema string, maxConns int32) *pgxpool.Config {
	t.Helper()
	cfg, err := postgres.PoolConfig(dsn(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.ConnConfig.RuntimeParams["application_name"] = schema
	cfg.MaxConns = maxConns
	cfg.MinConns = 0
	// The tests are about what a statement does, not how long it may wait: on a busy
	// machine a statement queued behind a hot account's row lock may wait longer than
	// the store's default bound (TestMigrateOutlastsStatementTimeout and the pooler tests
	// check the bound itself).
	cfg.ConnConfig.RuntimeParams["statement_timeout"] = "60s"
	return cfg
}

// newPool returns a pool on a fresh, migrated schema. The pool is closed and the schema
// dropped when the test ends. adjust, if given, may change the configuration first.
func newPool(t testing.TB, maxConns int32, adjust ...func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	schema := newSchema(t)
	cfg := poolConfig(t, schema, maxConns)
	for _, f := range adjust {
		f(cfg)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close) // runs before the schema is dropped (cleanups run last first)
	if err := postgres.Migrate(context.Background(), pool); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return pool
}

// newStore returns a Store on a fresh schema.
func newStore(t testing.TB, opts *postgres.Options) *postgres.Store {
	t.Helper()
	s, err := postgres.New(newPool(t, 16), opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestStores runs the conformance suites on every store of the package, each on a
// fresh schema per subtest, the Store in every role it plays (see storetest.Run).
func TestStores(t *testing.T) {
	runStores(t, func(t *testing.T, maxConns int32) *pgxpool.Pool { return newPool(t, maxConns) })
}

// runStores runs storetest.Run on every store of the package, on pools from newPool.
func runStores(t *testing.T, newPool func(t *testing.T, maxConns int32) *pgxpool.Pool) {
	storetest.Run(t, on(newPool, 16, func(db postgres.DB) (*postgres.Store, error) { return postgres.New(db, nil) }))
	storetest.Run(t, on(newPool, 16, postgres.NewOAuthStore))
	storetest.Run(t, on(newPool, 16, postgres.NewAuditStore))
	storetest.Run(t, on(newPool, 8, postgres.NewSessionStore))
	storetest.Run(t, on(newPool, 16, postgres.NewUsageStore))
	storetest.Run(t, on(newPool, 8, postgres.NewIdempotencyStore))
	// The webhook store with the lowest bound on an endpoint's pending deliveries the
	// suite takes, which it fills in few writes (TestWebhooksMaxPending checks the
	// default).
	storetest.Run(t, on(newPool, 16, func(db postgres.DB) (*postgres.WebhookStore, error) {
		return postgres.NewWebhookStore(db, &postgres.WebhookOptions{MaxPending: storetest.MinPendingBound})
	}))
}

// TestWebhookSweeps runs the sweeps of the webhooks by two instances on a Store and a
// WebhookStore of one pool.
func TestWebhookSweeps(t *testing.T) {
	storetest.TestWebhookSweeps(t, func(t *testing.T) storetest.SweepStores {
		pool := newPool(t, 16)
		s, err := postgres.New(pool, nil)
		if err != nil {
			t.Fatal(err)
		}
		hooks, err := postgres.NewWebhookStore(pool, nil)
		if err != nil {
			t.Fatal(err)
		}
		return storetest.SweepStores{Keys: s, Ledger: s, Webhooks: hooks}
	})
}

// on returns a function that makes a store with newStore on a pool of maxConns
// connections from newPool.
func on[S any](newPool func(t *testing.T, maxConns int32) *pgxpool.Pool, maxConns int32, newStore func(postgres.DB) (S, error)) func(*testing.T) any {
	return func(t *testing.T) any {
		s, err := newStore(newPool(t, maxConns))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}

// The ledger and admission suites again with every account split into sub-balances, the
// hot-account mitigation: the contracts hold just the same. These repetitions run in
// the full suite (testenv.Full); the hot-account tests run each option in every run.

func TestLedgerSharded(t *testing.T) {
	testenv.SkipUnlessFull(t, "the ledger suite again, on sharded balances")
	storetest.TestLedger(t, func(t *testing.T) driver.Ledger { return newStore(t, &postgres.Options{Shards: 8}) })
}

func TestAdmitterSharded(t *testing.T) {
	testenv.SkipUnlessFull(t, "the admission suite again, on sharded balances")
	storetest.TestAdmitter(t, func(t *testing.T) storetest.AdmitterStores {
		return allRoles(newStore(t, &postgres.Options{Shards: 8}))
	})
}

// And without batching (the default batches: concurrent steps and closings of one
// account share calls): every step and closing on its own.

func TestAdmitterUnbatched(t *testing.T) {
	testenv.SkipUnlessFull(t, "the admission suite again, unbatched")
	storetest.TestAdmitter(t, func(t *testing.T) storetest.AdmitterStores {
		return allRoles(newStore(t, &postgres.Options{Batch: 1}))
	})
}

func allRoles(s *postgres.Store) storetest.AdmitterStores {
	return storetest.AdmitterStores{Admitter: s, Keys: s, Ledger: s, Rates: s, Slots: s}
}

// TestWebhooksMaxPending runs the webhook suite at the default bound on an endpoint's
// pending deliveries, webhook.MaxPending, which its rows of the bound fill with 10,000
// writes (TestStores runs it at storetest.MinPendingBound).
func TestWebhooksMaxPending(t *testing.T) {
	testenv.SkipUnlessFull(t, "the webhook suite again, at the default bound of pending deliveries")
	storetest.TestWebhooks(t, func(t *testing.T) webhook.Store {
		s, err := postgres.NewWebhookStore(newPool(t, 16), nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
