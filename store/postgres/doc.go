// Package postgres is Tollgate's PostgreSQL store, on pgx v5: accounts and keys, the
// credit ledger, rate limits and concurrency slots, in one database that any number of
// service instances share. One [Store] value implements every store interface
// ([auth.KeyStore], [driver.Ledger], [driver.RateLimiter],
// [driver.ConcurrencyLimiter], [driver.KeyChecker]) and [driver.Admitter], so that a
// paid call costs exactly one round trip to admit and one to settle. It also keeps the
// journal of changes (journal.KeyStore, journal.Ledger): each write of management
// records the entry its context carries in the statement of its change. [OAuthStore]
// keeps the grants of the OAuth authorization server ([oauthstore.Store]) in the same
// database, [AuditStore] the audit log ([audit.Store]), [SessionStore] the sessions
// signed out before their expiry ([auth.SessionStore]), [UsageStore] the usage
// statistics ([usage.Store]), [IdempotencyStore] the answers kept for batches sent
// with an idempotency key ([idempotency.Store]), and [WebhookStore] the webhook
// endpoints and the outbox ([webhook.Store]), from which deliverers on every instance
// claim side by side (FOR UPDATE SKIP LOCKED).
//
//	cfg, err := postgres.PoolConfig(os.Getenv("DATABASE_URL")) // recommended settings
//	if err != nil { ... }
//	cfg.ConnConfig.RuntimeParams["search_path"] = "tollgate"  // a schema of its own, if wanted: it must exist
//	pool, err := pgxpool.NewWithConfig(ctx, cfg)
//	if err != nil { ... }
//	defer pool.Close()
//	if err := postgres.Migrate(ctx, pool); err != nil { ... } // explicit, never on New
//	s, err := postgres.New(pool, nil)
//	if err != nil { ... }
//	svc, err := tollgate.New(registry, tollgate.Stores{Keys: s, Ledger: s, Rates: s, Slots: s}, plans, opts)
//
// Give the one Store to every role, so that the Meter sends all parts of an admission
// in one step. The Store is also a [driver.Sweeper]: the Service voids expired
// reservations through it in the background, from every instance; and a
// [driver.Roller]: a credit block's roll (its settlement, its calls counted and the
// next block reserved) is one call too.
//
// The contract, in short:
//   - [Migrate] applies the embedded migrations the schema lacks, each in a transaction
//     under an advisory lock, so instances starting together apply each once; [New]
//     never calls it. The schema that search_path names is the host's to create
//     beforehand: Migrate creates tables and functions in it, never the schema. Without
//     it, or without USAGE and CREATE on it, Migrate changes nothing and returns an
//     error wrapping [ErrNotSetUp] that says what to run.
//   - Nothing reads the server's clock: instants and periods are the ones the service
//     passes in. Give the reservations a grace (tollgate.Options.ReservationGrace) wider
//     than the clock skew between the instances.
//   - An error that is not a well-known condition (store.ErrNotFound,
//     store.ErrConflict, store.ErrInvalid, driver.ErrInsufficientCredits,
//     driver.ErrTooManyCredits, driver.ErrVoided, ErrNotSetUp) wraps
//     store.ErrUnavailable: the service answers 503 and admits and charges nothing. A
//     value the server cannot hold wraps store.ErrInvalid.
//   - [PoolConfig] returns the pool settings this package recommends. Behind a
//     connection pooler in transaction mode (PgBouncer), build the pool with
//     [PoolerConfig] instead, and give the role its search_path and statement_timeout.
//
// The tests need a server at TOLLGATE_TEST_POSTGRES (they skip without it, or fail when
// CI=true); each works in a schema of its own, which it drops at the end:
//
//	TOLLGATE_TEST_POSTGRES=postgres://postgres@127.0.0.1:5432/test?sslmode=disable go test -race ./store/postgres/
//
// See docs/postgres.md for the design: the wiring and the schema's creation, the
// tables, migrations, one step per admission and per settlement, a reservation's life,
// durability and failure, the pool settings, running behind a pooler, hot accounts and
// the figures measured; the sections this package's comments name ("Pool settings",
// "Behind a pooler", "Hot accounts") are that page's.
package postgres
