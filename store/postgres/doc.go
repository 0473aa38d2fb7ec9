// Package postgres is Tollgate's PostgreSQL store, on pgx v5: accounts and keys, the
// credit ledger, rate limits and concurrency slots, in one database that any number of
// service instances share. One [Store] value implements every store interface
// ([auth.KeyStore], [driver.Ledger], [driver.RateLimiter],
// [driver.ConcurrencyLimiter], [driver.KeyChecker]) and [driver.Admitter], so that a
// paid call costs exactly one round trip to admit and one to settle. [OAuthStore]
// keeps the grants of the OAuth authorization server ([oauthstore.Store]) in the same
// database, [AuditStore] the audit log ([audit.Store]), [SessionStore] the sessions
// signed out before their expiry ([auth.SessionStore]), [UsageStore] the usage
// statistics ([usage.Store]), and [IdempotencyStore] the answers kept for batches sent
// with an idempotency key ([idempotency.Store]).
//
// # Wiring
//
//	cfg, err := postgres.PoolConfig(os.Getenv("DATABASE_URL")) // recommended settings
//	if err != nil { ... }
//	cfg.ConnConfig.RuntimeParams["search_path"] = "tollgate"  // a schema of its own, if wanted: it must exist
//	                                                           // (behind a pooler: PoolerConfig and the role's settings)
//	pool, err := pgxpool.NewWithConfig(ctx, cfg)
//	if err != nil { ... }
//	defer pool.Close()
//	if err := postgres.Migrate(ctx, pool); err != nil { ... } // explicit, never on New
//	s, err := postgres.New(pool, nil)
//	if err != nil { ... }
//	svc, err := tollgate.New(registry, tollgate.Stores{Keys: s, Ledger: s, Rates: s, Slots: s}, plans, opts)
//
// Give the one Store to every role: the Meter sees that rate limiter, slots, ledger and
// key checker are the same Admitter and sends all parts of an admission in one step. The
// Store is also a [driver.Sweeper]: the Service voids expired reservations through it
// in the background, from every instance.
//
// The schema that search_path names is the host's to create, once, before the first
// Migrate: Migrate creates tables and functions in it, never the schema itself. Create
// it with the database's owner, as part of provisioning the database:
//
//	CREATE SCHEMA IF NOT EXISTS tollgate;
//	GRANT USAGE, CREATE ON SCHEMA tollgate TO app; -- app: the role Migrate runs as, if not the owner
//
// or, when the role the service connects with may create schemas (CREATE on the
// database), at start-up before Migrate, as examples/distributed does:
//
//	_, err := pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{"tollgate"}.Sanitize())
//
// Without search_path, the tables go to the first schema of the server's default,
// "$user", public: public, unless a schema named after the role exists. On PostgreSQL
// 15 and later only the database's owner may create in public.
//
// # Schema
//
// Every object is named tollgate_* and created unqualified, in the first schema of the
// session's search_path; the store's statements are unqualified too, so a deployment
// lives in any schema the host chooses.
//
//   - tollgate_accounts (id, plan, restrictions jsonb, created_at) and tollgate_keys (id,
//     account_id, name, is_primary, hash bytea UNIQUE, restrictions jsonb, created_at,
//     rotated_at, revoked_at, revision; ordered by an identity column). Only the SHA-256 of a key
//     is stored; restrictions are stored as their JSON form (auth.Restrictions'
//     MarshalJSON), NULL for none. A listing reads a page on the index of an account's
//     keys in creation order, after its cursor's key; a creation under a limit
//     (tollgate_create_key) counts and inserts under a transaction-level advisory lock
//     of the account; PruneKeys is one DELETE on a partial index of the revoked keys
//     that are not primary.
//   - tollgate_balances (account_id, allowance, period, number of shards) and
//     tollgate_balance_shards (account_id, shard, balance with CHECK (balance >= 0),
//     used, usage jsonb of calls per API): an account's remaining credits, used credits
//     and call counts are the sums over its shards; with one shard (the default) that is
//     the classic single balance row.
//   - tollgate_ledger: append-only, one entry per change of a balance: 'open',
//     'renewal', 'reserve' (with its APIs and the shard it was counted on), 'settle' or
//     'refund' (with the APIs uncounted), 'expire' (a reservation voided at its expiry,
//     with what it gave back), 'adjust' (with its reason), and 'void' (below). A
//     partial unique index on (account_id, request_id) over reserve, adjust and void
//     entries makes a replayed reservation or adjustment take nothing; another over
//     settle, refund and expire entries makes a reservation end at most once. The
//     entries of a period, from its 'open' or 'renewal' entry on, sum to the remaining
//     balance.
//   - tollgate_reservations (account_id, request_id, expires): the open reservations,
//     each with the instant (Unix nanoseconds) it is voided if still open.
//   - tollgate_rate_limits (key, tat): one GCRA timestamp per key, in Unix nanoseconds,
//     decided with exactly [driver.GCRA]'s integer arithmetic.
//   - tollgate_slots (key, slot, holder, expires): a key's concurrency slots, one row
//     each (as many as the key ever had calls at once), with the holder of a live
//     lease and its expiry in Unix nanoseconds. A call takes a free row and frees it by
//     updating it in place, never by inserting and deleting: these HOT updates leave no
//     dead index entries for the next count to read, so a busy key's admissions cost
//     the same whether or not a vacuum has run (see migration 12).
//   - tollgate_oauth_clients, tollgate_oauth_approvals, tollgate_oauth_codes and
//     tollgate_oauth_tokens: the grants of the OAuth authorization server (oauth),
//     kept by [OAuthStore]. Codes and tokens are stored as the SHA-256 of their values;
//     deleting an approval deletes its codes and tokens.
//   - tollgate_audit (seq, at, actor, action, account_id, target, before and after json,
//     credits, addr inet, reason, id): the audit log, kept by [AuditStore], indexed by
//     (account_id, at, seq) and by (at, seq) for listings newest first, and uniquely by
//     id, the entry's idempotency token (NULL for none). It holds no key value: keys by
//     id, restrictions in their plain JSON form, verbatim.
//   - tollgate_ended_sessions (id, expires): the sessions signed out before their
//     expiry, kept by [SessionStore] until it; each EndSession deletes the rows past it.
//   - tollgate_idempotency (id, fingerprint, run, token, done, lease, expires, answer,
//     settling): the records of [IdempotencyStore], found by the hash of the account
//     and the client's key (never the key itself); each claim deletes a few rows past
//     their expiry.
//   - tollgate_usage_minute, tollgate_usage_hour and tollgate_usage_day (account_id,
//     bucket, key_id, api, channel, outcome, calls, credits, latency bigint[], last_at):
//     the usage buckets, kept by [UsageStore], keyed by the account and the bucket first;
//     tollgate_usage_hour_api, tollgate_usage_day_api, tollgate_usage_hour_key and
//     tollgate_usage_day_key (the same columns): the hour and day sums narrowed to the API
//     or to the key ([usage.RollupBy]), which queries of one dimension read;
//     tollgate_usage_last (account_id, key_id, last_at): the last use of each key.
//   - tollgate_schema_migrations (version, name): the migrations applied.
//
// The logic lives in PL/pgSQL functions created by the migrations (tollgate_admit,
// tollgate_close, tollgate_reserve, tollgate_settle, ...); each method of the Store is
// one statement or one call of one function. Nothing reads the server's clock: instants
// and periods are the ones the service passes in. Record times (creation, rotation,
// revocation, periods) are timestamptz, with microsecond precision.
//
// # Migrations
//
// [Migrate] applies the embedded, versioned migrations (migrations/NNNN_name.sql) that
// the schema lacks, in one transaction, under a transaction-level advisory lock keyed
// by the schema: instances starting together apply each migration once, the others
// wait and find nothing to do. It is idempotent and never called by [New]. It needs a
// DB that can Begin (a pool, a connection, or a transaction, in which it uses a
// savepoint). [SchemaVersion] is the version this package brings a schema to.
//
// Migrate needs the schema to exist (see Wiring) and its role to have USAGE and CREATE
// on it. When search_path selects no schema that exists (PostgreSQL's own error would be
// "no schema has been selected to create in", SQLSTATE 3F000), or the role lacks a
// privilege (42501), Migrate changes nothing and returns an error wrapping [ErrNotSetUp]
// whose message names the search_path, the schema and the role, and says what to run:
// CREATE SCHEMA, or GRANT CREATE ON SCHEMA. It does not wrap store.ErrUnavailable: a
// setup mistake is not an outage, and retrying does not fix it.
//
// # One step per admission, one per settlement
//
// [Store.Admit] is one call of tollgate_admit, one transaction: the key check (the key
// with this id is in the step's account, has this hash and is not revoked; an empty key
// id checks that the account exists), the GCRA rate limit, the concurrency slot (live
// leases counted under a per-key transaction-level advisory lock, so that two sessions
// can never both pass the ceiling), and the reservation (a conditional UPDATE of the
// balance, never below zero, with the 'reserve' entry and the call counts, after a
// lazy renewal when the period has changed). Every part is checked before anything is
// written, and the reservation, the last check, is the first write: a denied step
// changes nothing. A denial that the committed state already decides (a full bucket, a
// full set of slots, a short total) takes no lock at all.
//
// [Store.Close] is one call of tollgate_close: the settlement (at most once; a refund of
// a reservation made in an earlier period is not credited) and the release of the
// slot. A settlement that finds no reservation voids the request id: the Meter sends
// one to undo an admission whose answer was lost, and if that admission is still on its
// way, it arrives as a replay and takes nothing. (The void and the reservation conflict
// on one unique index entry, so whichever commits second sees the first.)
//
// Request ids are idempotent for as long as the ledger keeps their entries, which is
// forever unless the host deletes old periods' entries: a replayed admission, open or
// settled, takes nothing and is admitted again (renewing the holder's live lease).
//
// Each plain method (Reserve, Settle, Allow, Acquire, CreateAccount, RotateKey, ...) is
// one statement or one function call too. The first time a connection runs a statement
// pgx prepares it (one more round trip, once per connection and statement).
//
// # A reservation's life
//
// A reservation is open from its 'reserve' entry until it is settled or voided, and
// whoever deletes its row of tollgate_reservations closes it:
//
//	tollgate_charge --> open: a row with its expiry --+-- tollgate_settle deletes the
//	                                                  |   row: 'settle' or 'refund'
//	                                                  |
//	                                                  +-- expires <= now: tollgate_void
//	                                                      deletes it: 'expire', the
//	                                                      credits and counts given back
//
// A void takes the rows FOR UPDATE SKIP LOCKED, after the account's balance row and
// shards, so it never waits for a settlement in progress; a settlement that finds its
// row gone and an 'expire' entry answers driver.ErrVoided and changes nothing, and one
// made at or after its reservation's expiry voids it. Every function that operates on
// an account (admission, reservation, settlement, adjustment, balance) first voids its
// reservations expired at the call's now, when the balance row's next_expiry (at most
// the earliest expiry of an open reservation, read with the row the call reads anyway)
// says one is due; [Store.Sweep] voids those of any accounts, 32 accounts per
// transaction, and any number of instances may sweep at once.
//
// Every function takes its row locks in one order, so that no two calls deadlock: the
// rate row and the slot's advisory lock; the balance row; the shards (all of an
// account's in shard order, or the one a reservation takes from or a refund goes back
// to); the reservation rows a call waits for (a settlement's own, a batch of closings'
// own in the order of their ids), then those a void takes without waiting; the ledger
// entries of a request; the lease rows. So a settlement decides first whether it voids
// and whether it credits, takes the balance row and the shards or its one shard, and
// only then waits for its reservation's row (migration 5 states the order in full). Keeping the open reservations costs a paid call one more row
// inserted and one deleted: 96 buffers touched and 1,453 bytes of WAL per call, against
// 90 and 1,205 without (measured on a private server, 2,000 paid calls with a key
// check, a rate limit, a slot and credits).
//
// Expiry is judged on the instants the instances pass in, never on the server's clock:
// give the reservations a grace (tollgate.Options.ReservationGrace) wider than the
// clock skew between the instances. Migration 4 marks the reservations that an earlier
// version left open as already expired: the first sweep gives them back.
//
// # Durability and failure
//
// The store never changes synchronous_commit: with the server's default (on) an
// acknowledged admission, settlement or revocation is on disk. Every error that is not a
// well-known condition (store.ErrNotFound, store.ErrConflict, store.ErrInvalid,
// driver.ErrInsufficientCredits, driver.ErrTooManyCredits, driver.ErrVoided, and
// Migrate's [ErrNotSetUp]) wraps store.ErrUnavailable and keeps its cause (a *pgconn.PgError, a network error,
// context.DeadlineExceeded, which errors.Is still matches; a canceled context is
// reported as context.Canceled). Messages start with "postgres: " and name the id. A
// value the server cannot hold or a constraint it breaks (SQLSTATE classes 22 and 23:
// invalid UTF-8, a NUL byte, a number out of range; and 08P01 at statement level, a NUL
// byte in pgx's simple_protocol mode) wraps store.ErrInvalid: the caller's mistake,
// never an outage. With the server unreachable nothing is admitted and nothing
// is charged: the service answers 503. The store holds no state of its own, so once the
// server is back the pool reconnects and service resumes without a restart.
//
// # Pool settings
//
// The Store does not own its DB. [PoolConfig] returns the settings this package
// recommends, and the tests run on them:
//
//   - MaxConns 16 per instance: admissions and settlements are short, so a few
//     connections per core of the database carry the load, and several instances stay
//     below the server's max_connections (100 by default). A caller waiting for a free
//     connection waits within its own context's deadline (pgxpool has no other acquire
//     timeout). Under load, set MinConns to MaxConns and open the connections before
//     serving (acquire them all once; examples/distributed does): a pool that grows on
//     demand connects on the call's path, and a connection that takes longer than
//     ConnectTimeout to open fails the call with 503.
//   - ConnectTimeout 5s, HealthCheckPeriod 10s: an unreachable server fails calls
//     quickly, and connections an outage broke are replaced soon after it ends (pgxpool
//     also pings a connection idle for more than a second before handing it out).
//   - statement_timeout 5s on every session: the server-side bound on any one call,
//     waiting for locks included, so that nothing holds a hot row indefinitely (behind
//     a pooler, the role's setting: see "Behind a pooler").
//   - On a canceled or expired context, a cancel request to the server
//     (pgconn.CancelRequestContextWatcherHandler) rather than pgx's default of only
//     dropping the connection: the server then aborts the statement and rolls it back
//     instead of finishing a call whose caller has gone.
//
// Give every call a context with a deadline (a second or two for Admit and Close): the
// deadline bounds the wait for a connection, for locks and for the network, which is
// what turns an unresponsive store into a prompt 503.
//
// # Behind a pooler
//
// The store works through a connection pooler in transaction mode (PgBouncer's
// pool_mode = transaction, and the managed poolers that work the same way), where each
// transaction may run on another server session: every method is one statement or one
// transaction, and nothing it relies on outlives its transaction on the session (no
// session SET, session advisory lock or temporary table; prepared statements only in
// the exec mode that needs them, below). What changes is the wiring.
//
// Build the pool with [PoolerConfig] rather than [PoolConfig]: it sends no startup
// parameter (a pooler refuses statement_timeout and search_path at connection time,
// PgBouncer with "unsupported startup parameter", or drops them when told to ignore
// them) and runs statements in pgx's exec mode. Give the role the settings instead,
// once, as the database's owner; the server applies them to every session it opens
// for the role, whatever the pooler:
//
//	ALTER ROLE tollgate SET search_path = tollgate;    -- the schema (created beforehand, see Wiring)
//	ALTER ROLE tollgate SET statement_timeout = '5s';  -- DefaultStatementTimeout
//
// ALTER ROLE ... IN DATABASE ... SET limits them to one database. Sessions already open
// keep their old settings: a pooler's server connections take them when they are
// replaced (PgBouncer: RECONNECT, or server_lifetime). Without a schema of its own the
// store works in the role's default search_path ("$user", public), and only the
// timeout is needed. A pooler's own bound (PgBouncer's query_timeout) may be added, not
// substituted: it drops the client's connection rather than rolling back one statement.
//
// The exec modes: exec (PoolerConfig's default: one round trip, an unnamed statement,
// the parameters sent as text and typed by the server) and simple_protocol (the
// arguments quoted into the statement's text) work through any pooler. pgx's
// default, cache_statement (named prepared statements, kept per session), needs a
// pooler that carries them across transactions: PgBouncer 1.21 or later with
// max_prepared_statements above 0 (200, say); set default_query_exec_mode=cache_statement
// in the connection string then.
//
// PgBouncer itself: pool_mode = transaction; default_pool_size (per role and database,
// 20 by default) is the number of server sessions that every instance shares: keep it,
// times the poolers, below the server's max_connections. An instance's MaxConns are
// then client connections, which wait in the pooler's queue while every server session
// is busy (within the call's context deadline).
//
// [Migrate] works through the pooler too (it runs in one transaction, which holds its
// advisory lock), and so does a Store on a pgx.Tx. The tests run every conformance
// suite through a real PgBouncer in transaction mode, in the exec and simple_protocol
// modes, and in cache_statement when the PgBouncer installed keeps prepared statements
// (TestBehindPgBouncer); the multi-instance tests run a deployment through it
// (internal/multiinstance).
//
// # Hot accounts
//
// A reservation holds its account's balance row until its transaction commits, and a
// durable commit waits for the WAL flush, so one account's admissions are serialized:
// its ceiling is about 1/(flush + execution), whatever the number of connections. The
// other parts of a step are per-account serialization points by nature (one GCRA
// timestamp, one slot count), bounded by the plan's own rate and ceiling.
//
// Measured with BenchmarkAdmitClose (a paid call: Admit with key check and a 1-credit
// reservation, then Close keeping the charge; 64 goroutines, 32 connections, durable
// commits; PostgreSQL 15 on the same 2 shared vCPUs as the Go client, other workloads
// running; three rounds, calls/s, and in parentheses the ratio to the hot account's
// single balance row measured in the same round):
//
//	one hot account, one balance row, Batch = 1         659 - 1,161
//	one hot account, Options.Shards = 16, Batch = 1    1,795 - 2,549   (2.2 - 2.7x)
//	one hot account, Options.Batch = 64 (the default)  8,237 - 9,421   (8.1 - 14x)
//	256 accounts, one balance row each, Batch = 1      2,518 - 3,022   (2.6 - 4.5x)
//	one call at a time (serial), any configuration       805 - 1,390
//
// Two mitigations are offered, and the first is on by default; the balance stays exact
// with either (TestHotAccountExact, TestHotAccountMixed, and the conformance suites run
// with each).
//
//   - Options.Batch (per-instance micro-batching, 64 by default; 1 turns it off) lifts a
//     hot account at least 5x here: concurrent Admit calls of one account (and, separately, Close calls) share one
//     function call and one transaction, so the account pays one round trip, one commit
//     and one flush per batch. A call for an account with nothing in flight is sent at
//     once (no added latency, no timer), after letting the goroutines ready to run go
//     first, so that the calls of its account among them go with it; calls arriving
//     meanwhile wait for it and go together, up to Batch per call. Trade-offs: batches are per instance; a call
//     waits for its account's batch in flight (about one call's time) before its own; a
//     batch fails or commits as a whole, so an error (a lost connection, a deadline)
//     fails every call in it, while a denial only denies its own step; a call sent in a
//     batch with others reports the batch's outcome even if its context ends meanwhile
//     (the batch ends at the latest deadline of its calls). A batch is decided as a
//     whole: the rate row, the key's slots and the balance are read once, each step is
//     judged in order against the running figures as single calls would be one after
//     the other, and the outcome is written with one statement per table (one update of
//     the rate row, the slots and the balance, one multi-row insert of the ledger
//     entries and the reservations; for closings, one delete, one insert, one update),
//     so that its cost grows little with its size. A batch that holds a replay or a
//     request id twice, an account split into several shards, a void that is due, a
//     lease that ends within the batch, or, for closings, a refund, runs its steps one
//     after the other instead, with the same answers.
//   - Options.Shards (sub-balances; [Store.SetShards] for an existing account) splits
//     the balance into K rows: a reservation takes from a random shard that covers it
//     and is free (FOR UPDATE SKIP LOCKED), else waits for one; when no single shard
//     covers it, the total decides: short, it is refused without a lock; otherwise every
//     shard is locked in order, the credits are pooled and spread evenly, and the
//     reservation is taken, so a refusal is never a false negative. K reservations of one
//     account then commit in parallel and share WAL flushes, which lifts the ceiling
//     towards that of spread traffic, as far as the database has CPU to spare: 2.2 -
//     2.7x on this machine, where spread traffic itself is only 2.6 - 4.5x the hot
//     account, so sub-balances alone cannot reach 5x here. They need no coordination
//     between instances. Costs: a Balance reads K rows, a reservation near exhaustion
//     takes the slow path, and a refund goes back to the shard that counted the call.
//
// A hot account's admissions must also not slow down as its calls add up. Rows that a
// call inserts and another deletes leave dead index entries until a vacuum removes
// them (autovacuum wakes once a minute at best, and may be off), and a statement that
// reads all of a key's rows reads those too: before migration 12 every admission
// counted its key's concurrency leases that way, and a busy account's admissions grew
// slower by the minute (through the whole REST stack, restbench -compare
// memory,postgres: 393 calls/s in its first round, 153 in its fifth). Rows read on every call are now updated in place
// (the rate row, the balance row and shards, the slot rows), with HOT updates that
// add no index entry and whose old versions are pruned as the page is read; the rows
// that are inserted and deleted (reservations, ledger entries) are only ever read by
// their unique key, except by a void of expired reservations, which runs once per
// reservation lifetime. Old row versions can only be pruned once no transaction that
// could see them is running: a long transaction anywhere in the database (an idle one
// left open, a report) makes every hot row grow for as long as it runs.
//
// Run the figures again with (noisy on shared machines: run several rounds):
//
//	TOLLGATE_TEST_POSTGRES=postgres://postgres@127.0.0.1:5432/test?sslmode=disable \
//	    go test -run='^$' -bench=. -benchtime=3s ./store/postgres/
//
// # Tests
//
// The tests need a server: set TOLLGATE_TEST_POSTGRES to a DSN, for example
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable. Without it they skip (and fail
// under CI=true). Each test creates a schema with a random name, migrates it, and drops
// it at the end; nothing else on the server is touched. The outage test starts a private
// server of its own (internal/testenv.StartPostgres), which it stops and starts.
//
//	TOLLGATE_TEST_POSTGRES=... go test -race ./store/postgres/
package postgres
