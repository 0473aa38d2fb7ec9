// Package multiinstance holds the tests that run several Tollgate service instances at
// once against shared stores, as a deployment of several processes does: every instance
// has its own Service, its own HTTP server and its own connections (pools, clients), and
// they share only the PostgreSQL database and the Redis server. The tests prove the rules
// that only show across instances: an exact balance under thousands of concurrent paid
// calls, each of its parts too (the plan's allowance and the grant lots, spent in their
// order, across a renewal, the lapse of lots and a kill -9), a concurrency ceiling held
// across instances, a rotation or revocation on one
// instance (or the suspension or closure of its account) refused by the very next call
// on every other, a crashed holder's slot
// returning after its lease, and failing closed while a store is down, then resuming.
// Each runs on every deployment: memory stores shared in one process, PostgreSQL, the
// same through a PgBouncer in transaction mode (the wiring of store/postgres's "Behind a
// pooler"; the exact balance also in pgx's simple protocol, with the ledger's rows
// checked), PostgreSQL with the limits in Redis, and Redis. Webhooks too: an instance
// killed with kill -9 while it delivers loses no event, and sends none under two ids
// (TestWebhooksKilledInstance, on PostgreSQL and Redis).
//
// The slowest tests run only in the full suite (testenv.Full: CI, scripts/test.sh, or
// TOLLGATE_TEST_FULL=1): those that run instances as processes and kill one with
// kill -9, put thousands of calls on them, or stop and restart private database
// servers under load. A plain go test runs the others.
package multiinstance
