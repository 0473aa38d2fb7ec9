// Package storetest provides conformance suites for implementations of the store
// interfaces: [auth.KeyStore], [driver.KeyChecker], [driver.Ledger] (and
// [driver.Sweeper]), [driver.RateLimiter], [driver.ConcurrencyLimiter], [driver.Admitter],
// [oauthstore.Store], [audit.Store], [usage.Store], [auth.SessionStore],
// [idempotency.Store], [webhook.Store], the journals of changes a key store or a
// ledger may keep ([journal.KeyStore], [journal.Ledger]), and the readiness ping of
// [health.Pinger] that a store may answer besides. Every store in this
// repository runs them, and custom stores should too: the suites are the executable form
// of the interfaces' documented contracts and of the invariants the rest of Tollgate
// relies on (a balance never below zero, no charge lost or taken twice, a refund at most
// once, a concurrency ceiling never exceeded, a revoked or rotated-away key refused by
// the very next call, an authorization code or refresh token used once, an audit entry
// never lost, a request sent with an idempotency key run once, a webhook message enqueued
// once and each of its deliveries attempted by one deliverer at a time, a change of
// management recorded with its write or not at all).
//
// # Hooking in
//
// An implementation runs every suite its interfaces call for with one line per store
// value, giving [Run] a factory that returns an empty store:
//
//	func TestStores(t *testing.T) {
//		storetest.Run(t, func(*testing.T) any { return memory.NewKeyStore() })
//		storetest.Run(t, func(*testing.T) any { return memory.NewLedger(nil) })
//	}
//
// Run learns the store's interfaces and runs the suite of each (a store that is a
// KeyStore and a KeyChecker runs both; an Admitter runs TestAdmitter in every role it
// plays), so that no suite is forgotten. Each suite also runs alone, for a store value
// in fewer roles than its type implements, or with options of its own:
//
//	func TestAdmitterLimits(t *testing.T) {
//		storetest.TestAdmitter(t, func(t *testing.T) storetest.AdmitterStores {
//			s := newStore(t)
//			return storetest.AdmitterStores{Admitter: s, Rates: s, Slots: s}
//		})
//	}
//
// A key store that bounds the accounts one page of its listing examines (see
// auth.KeyStore's Accounts) runs [TestAccountPages] too, with the bound set small, so
// that the listing's rows hold on short pages.
//
// The factory is called once per subtest, with that subtest's t. It must return a store
// with nothing in it, and register any teardown (closing a pool, dropping a schema,
// deleting a key prefix) with t.Cleanup. A store backed by a server typically calls
// t.Skip when no server is configured, and otherwise gives each subtest its own schema or
// key prefix. The subtests call t.Parallel, so the factory must be safe for concurrent
// use.
//
// Each subtest also makes its identifiers (accounts, keys, rate-limit and slot keys) and
// key hashes unique with a random prefix, so a store whose instances share one server,
// or one that does not isolate subtests completely, can run the suites too.
//
// Always run the suites with the race detector:
//
//	go test -race ./store/...
//
// Several checks (concurrent spending, racing creations, concurrent rotations, slot
// grants) drive a store from 64 goroutines at once, and only -race makes a data race in
// the implementation visible when the totals happen to come out right.
//
// # Shape
//
// Each suite is a table of behaviours, one subtest per row, like testing/slogtest. A row
// has a name, a one-sentence explanation of the contract it checks, and the check; when
// the check fails, the explanation is printed after the failure ("contract: Revoking a
// revoked key is not an error and keeps the first RevokedAt."). Well-known conditions are
// checked with errors.Is against the sentinels of package store and
// [driver.ErrInsufficientCredits], never by message, except where the contract is that
// the message names the identifier.
//
// Time is never read from the clock: every check passes fixed instants (January 2030, in
// whole seconds) through the interfaces, and nothing sleeps. Contexts come from t.Context.
// The rate-limiter suite checks every decision against [driver.GCRA] and against
// golang.org/x/time/rate over scripted timelines whose rates and gaps are round numbers,
// so that the floating-point arithmetic of x/time/rate is exact.
//
// # Benchmarks
//
// [BenchmarkLedger], [BenchmarkRateLimiter], [BenchmarkConcurrencyLimiter],
// [BenchmarkKeyStoreResolve] and [BenchmarkKeyStoreLoad] are hooked in the same way,
// with a factory taking *testing.B.
package storetest
