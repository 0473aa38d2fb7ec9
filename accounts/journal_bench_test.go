package accounts_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/store/postgres"
	"github.com/tollgate-dev/tollgate/store/redis"
)

// noJournalKeys and noJournalLedger hide the journal of the store they wrap: they
// embed the interface, not the store's type, so they are no journal.Store.
type (
	noJournalKeys   struct{ auth.KeyStore }
	noJournalLedger struct{ driver.Ledger }
)

// benchRotate measures an operator's rotation of a key, with the audit log subscribed
// (so that the change is journaled when the store keeps a journal).
func benchRotate(b *testing.B, keys auth.KeyStore, ledger driver.Ledger) {
	plans, err := billing.NewPlans(billing.Plan{Name: "p", Credits: 100})
	if err != nil {
		b.Fatal(err)
	}
	svc, err := tollgate.New(&catalog.Registry{}, tollgate.Stores{Keys: keys, Ledger: ledger, Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter()}, plans, &tollgate.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer svc.Close()
	log := audit.NewLog(memory.NewAuditStore(), nil)
	svc.Events().Subscribe(log, log.Kinds()...)
	mgr, err := accounts.New(svc, &accounts.Options{RelayInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer mgr.Close()
	ctx := context.Background()
	_, k, _, err := mgr.CreateAccount(ctx, accounts.Spec{Plan: "p"})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, _, err := mgr.RotateKey(ctx, k.ID); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRotateJournal compares a key's rotation with and without the journal of
// changes, on memory, on Redis and on PostgreSQL: the journal adds the entry's insert to
// the rotation's statement (PostgreSQL) or script (Redis, which also indexes the
// account's journal when a claim found it empty), a read of the key (for its account)
// before it and the entry's removal after it.
//
//	TOLLGATE_TEST_REDIS=... TOLLGATE_TEST_POSTGRES=... go test -run '^$' -bench RotateJournal -benchtime 2000x ./accounts/
func BenchmarkRotateJournal(b *testing.B) {
	b.Run("memory/journal", func(b *testing.B) { benchRotate(b, memory.NewKeyStore(), memory.NewLedger(nil)) })
	b.Run("memory/none", func(b *testing.B) {
		benchRotate(b, noJournalKeys{memory.NewKeyStore()}, noJournalLedger{memory.NewLedger(nil)})
	})
	onRedis := func(b *testing.B) *redis.Store {
		c := testenv.RedisClient(b, testenv.Var(b, testenv.Redis))
		s, err := redis.New(c, &redis.Options{Prefix: testenv.RedisPrefix(b, c)})
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	b.Run("redis/journal", func(b *testing.B) { s := onRedis(b); benchRotate(b, s, s) })
	b.Run("redis/none", func(b *testing.B) { s := onRedis(b); benchRotate(b, noJournalKeys{s}, noJournalLedger{s}) })
	dsn := testenv.Var(b, testenv.Postgres)
	schema := testenv.PostgresSchema(b, dsn)
	pool := testenv.PostgresPool(b, dsn, schema, 8)
	if err := postgres.Migrate(context.Background(), pool); err != nil {
		b.Fatal(err)
	}
	s, err := postgres.New(pool, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("postgres/journal", func(b *testing.B) { benchRotate(b, s, s) })
	b.Run("postgres/none", func(b *testing.B) { benchRotate(b, noJournalKeys{s}, noJournalLedger{s}) })
}
