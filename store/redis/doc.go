// Package redis keeps Tollgate's state in Redis (go-redis v9): rate limits, concurrency
// leases, and, if the host wants, accounts, keys and credit balances. One [*Store]
// implements every store interface ([auth.KeyStore], [driver.KeyChecker],
// [driver.Ledger], [driver.RateLimiter], [driver.ConcurrencyLimiter]), the
// [driver.Admitter], so that a paid call costs exactly one round trip to admit and one
// to settle, the [driver.Roller], which rolls a credit block over in one, and the
// [driver.Sweeper], through which every instance voids expired reservations. Its key store and ledger keep a journal of the changes of management
// they store ([journal.KeyStore], [journal.Ledger]; see docs/redis.md, "The journal of
// changes"). It is also an [auth.SessionStore]; [Store.Idempotency] returns its
// [idempotency.Store], a value of its own over the Store.
// [WebhookStore], a value of its own over the same client and prefix, keeps the webhook
// endpoints and the outbox ([webhook.Store]), all on one Cluster slot (see
// docs/redis.md, "Webhooks").
//
// Give the one Store the roles it should play:
//
//	rs, err := redis.New(client, nil)
//	// Limits in Redis; keys and money in PostgreSQL (the safe configuration):
//	stores := tollgate.Stores{Keys: pg, Ledger: pg, Rates: rs, Slots: rs}
//	// Everything in Redis (read "Durability" in docs/redis.md first):
//	stores = tollgate.Stores{Keys: rs, Ledger: rs, Rates: rs, Slots: rs}
//
// The contract, in short:
//   - The Store needs Redis 7.0 or later. Every key begins with Options.Prefix and a
//     colon, and the keys of one account share a hash tag, so the Store runs on a
//     Redis Cluster too: build its client from [ClusterOptions].
//   - The host builds and owns the client. Configure it to fail fast (short dial, read
//     and pool timeouts, few retries), so that a Redis that is down or stuck fails a
//     call within a fraction of a second: the service then answers 503, admits nothing
//     and charges nothing. docs/redis.md ("Connection pool and timeouts") gives the
//     settings; [ClusterOptions] sets them for a Cluster.
//   - Rate limits, leases, reservation deadlines and the lapse of grants run on the
//     Redis server's clock, unless Options.CallerClock; every instance sharing a
//     prefix must use the same clock. Credit periods come from the caller's clock.
//   - Redis acknowledges a write in memory, and replicates it asynchronously: a crash or
//     a failover may lose the last writes (a free call, a retried request charged
//     again, a revoked or rotated key back to life, a limit loosened for a moment).
//     Keep keys and money in PostgreSQL where that is not acceptable, or set
//     Options.Replicas, which makes every write of money and keys wait until replicas
//     have it (see "Waiting for replicas").
//   - Upgrading a key store from a release before the account lifecycle: its accounts
//     read as active, but the listing of accounts ([Store.Accounts], and with it
//     GET /admin/v1/accounts) does not hold them until [Store.IndexAccounts] has run
//     once, after every instance runs this release. Run it at that upgrade; it is safe
//     to run again.
//   - Upgrading a ledger from a release before grant lots: a balance keeps its
//     remaining credits, all of them in the allowance part, so credits granted before
//     the upgrade lapse at the account's next renewal, as they did then; only grants
//     made since carry over. A reservation open at the upgrade took from that
//     allowance part and gives back to it (in its period: not after a renewal), so
//     what it gives back lapses with the rest. (PostgreSQL's upgrade makes what the
//     allowance does not explain a grant that never lapses, and gives back the
//     reservations open then as that split would.) Grant again what should carry over.
//
// The tests need a Redis at TOLLGATE_TEST_REDIS (they skip without it, or fail when
// CI=true):
//
//	TOLLGATE_TEST_REDIS=127.0.0.1:6379 go test -race ./store/redis/
//
// See docs/redis.md for the design: the key layout, the scripts, a reservation's life,
// the pipelines, the clocks, durability, memory, the connection pool and timeouts, Redis
// Cluster (failover, resharding) and the figures measured; the sections this package's
// comments name ("Durability", "Redis Cluster", ...) are that page's.
package redis
