// Package driver is the contract between the service's meter (the policy that admits
// and settles calls against the plans of package billing, internal to the service:
// internal/meter) and the stores that keep its state, as database/sql/driver is
// database/sql's: the interfaces a store implements and the values they exchange. Users
// of billing never import it; a store author needs nothing else, and checks an
// implementation with the suites of store/storetest.
//
// A store implements some of:
//
//   - [Ledger]: an account's balance, its reservations and their settlement, usage;
//   - [RateLimiter]: a rate limit per key, by the generic cell rate algorithm ([GCRA]);
//   - [ConcurrencyLimiter]: leased concurrency slots per key;
//   - [Sweeper]: voids the expired reservations of every account, for a ledger that
//     several instances share;
//   - [KeyChecker]: verifies that a key ([KeyCheck]) is still live, for a key store whose
//     records a service caches;
//   - [Admitter]: performs the parts of an admission it holds (key check, rate, slot,
//     credits) in one atomic step and closes them in another.
//
// # Decorating a store
//
// A decorator (metrics, tracing, a circuit breaker) wraps the whole store in one value
// that plays every role the store plays, forwards every method, [Admitter] and
// [Sweeper] included, and says what it wraps ([Wrapper]). Passed in every role, it keeps
// the store's admission in one round trip: the Meter sends the parts that one value
// holds in one step. Embedding the store's type forwards every method; the decorator
// overrides those it observes:
//
//	type metered struct {
//		*postgres.Store
//		admits atomic.Int64
//	}
//
//	func (m *metered) Admit(ctx context.Context, s driver.Step) (driver.StepResult, error) {
//		m.admits.Add(1)
//		return m.Store.Admit(ctx, s)
//	}
//
//	func (m *metered) Unwrap() any { return m.Store }
//
//	s := &metered{Store: pg}
//	stores := tollgate.Stores{Keys: s, Ledger: s, Rates: s, Slots: s}
//
// A wrapper per role (one value around the store's Ledger, another around its
// RateLimiter) still works, but hides that the roles are one store: the Meter performs
// each part in a step of its own, one round trip each, and, when the wrappers say what
// they wrap, logs a warning when it is made.
//
// # Rules every store keeps
//
//   - Stores never read the clock: every method that depends on time is given now.
//   - A reservation ends exactly once, settled or voided at its expiry, whichever comes
//     first; the other then changes nothing ([ErrVoided] for a late settlement).
//   - Every ledger operation on an account voids its expired reservations first.
//   - Remaining plus used credits never pass [MaxCredits]; a grant that would is refused
//     with [ErrTooManyCredits].
//   - A denied event (a rate limit reached, no slot free, credits short) changes nothing.
//   - Errors wrap the sentinels of package store (store.ErrNotFound, store.ErrInvalid);
//     any other error means the store is unavailable, and the call is refused without
//     being charged.
package driver
