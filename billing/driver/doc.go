// Package driver is the contract between billing.Meter and the stores that keep its
// state, as database/sql/driver is database/sql's: the interfaces a store implements and
// the values they exchange. Users of billing never import it; a store author needs
// nothing else, and checks an implementation with the suites of store/storetest.
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
