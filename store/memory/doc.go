// Package memory keeps all of a Tollgate service's state in the memory of one process:
// accounts and keys ([KeyStore]), credit balances ([Ledger]), rate limits
// ([RateLimiter]), concurrency slots ([ConcurrencyLimiter]), the grants of the OAuth authorization
// server ([OAuthStore]), the audit log ([AuditStore]), the signed-out sessions
// ([SessionStore]), the answers kept for batches sent with an idempotency key
// ([IdempotencyStore]) and the webhook endpoints and outbox ([WebhookStore]). It is
// the reference implementation of every store
// interface, for a service that runs as a single instance, for trying Tollgate out and
// for tests:
//
//	svc, err := tollgate.New(registry, tollgate.Stores{
//		Keys:   memory.NewKeyStore(),
//		Ledger: memory.NewLedger(nil),
//		Rates:  memory.NewRateLimiter(),
//		Slots:  memory.NewConcurrencyLimiter(),
//	}, plans, nil)
//
// Nothing is written anywhere else: the state ends with the process, and two processes
// never see each other's. A deployment of several instances, or one whose balances must
// survive a restart, uses store/postgres and store/redis instead.
//
// # Rules
//
// The stores keep the same rules as every other implementation, and pass the same
// conformance suites (package storetest):
//
//   - They never read the clock: the time of every decision is passed in.
//   - They report a missing record by wrapping store.ErrNotFound, a taken id or key hash,
//     or a change the record's state forbids, by wrapping store.ErrConflict, and text
//     they cannot hold (invalid UTF-8, a NUL byte) by wrapping store.ErrInvalid; the
//     ledger reports a balance that does not cover a reservation with the billing
//     package's sentinel for it. A canceled context is returned as it is.
//   - A change is visible to the very next read: a rotated-away or revoked key is
//     refused from the next call on. Keys are kept only as hashes.
//   - A reservation of credits is either settled or, once past its expiry, voided and its
//     credits given back, exactly once. Expiry is judged on the time passed in, which is
//     the one process's clock.
//   - A replayed reservation, settlement or adjustment (the same request id) is
//     recognised and applied once, within a window of the last [LedgerOptions.Remember]
//     closed request ids of each account; a replay older than that is not recognised.
//   - The KeyStore and the Ledger each keep a journal of changes (journal.KeyStore,
//     journal.Ledger): a write of management records the entry its context carries
//     under the lock of its change. A memory journal ends with its process; it holds
//     the changes an observer deferred until the relay publishes them again.
//
// Every value is safe for concurrent use. Accounts rarely contend with each other: the
// ledger and the concurrency limiter spread accounts (or limiter keys) over 64 locks,
// each held for the few map operations of one call, and the rate limiter locks each
// key on its own. The rate limiter keeps a small record for every key it has seen, for
// the life of the process; the concurrency limiter keeps only the slots held.
//
// # Memory
//
// The key store, the ledger and the rate limiter keep their per-account records
// without pointers (ids and names are strings kept back to back in one byte array,
// each with its length, and referred to by offset; records are pointer-free structs in
// slices; the indexes of ids and key hashes are open-addressing tables of hashes and
// offsets or numbers, the others maps of numbers), so that the garbage collector, which follows
// every pointer of the live heap on each cycle, has nothing to follow in them: a
// million accounts cost memory (about 500 bytes each with a key and a balance) but add
// almost nothing to the time of a collection. Finding an account by its id or its key's
// hash reads one slot of an index and then the record or the id's bytes, so that a call
// in a store larger than the CPU's caches waits on few cache misses. Times are kept to
// the nanosecond and given back in UTC.
package memory
