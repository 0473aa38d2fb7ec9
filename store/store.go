// Package store holds the vocabulary shared by every storage implementation in Tollgate:
// the sentinel errors that store methods wrap to report well-known conditions.
//
// # The store interfaces
//
// The store interfaces live next to their consumers. A store implements those of the
// state it keeps; these are all of them:
//
//   - auth.KeyStore: accounts and their keys, by hash, paged listings, a bound on an
//     account's keys, the prune of revoked keys (PruneKeys), and the account
//     lifecycle: an account's state and revision, its update at the revision it was
//     read at (UpdateAccount), the listing of accounts (Accounts) and the deletion of
//     a closed account (DeleteAccount);
//   - auth.KeyExpiries: the listing of the keys that expire, in the order of their
//     expiry, which the webhooks' sweep reads to send key.expired;
//   - auth.SessionStore: the sessions signed out before their expiry;
//   - driver.KeyChecker (billing/driver): whether a cached key is still live, for a
//     key store whose records a service caches;
//   - driver.Ledger: balances, reservations and their settlement, usage counts;
//   - driver.Sweeper: voids the expired reservations of every account, for a ledger
//     that several instances share;
//   - driver.Roller: settles a reservation and opens the next in one atomic step, for
//     the credit blocks of package billing/blocks;
//   - driver.RateLimiter: rate limits, by the generic cell rate algorithm;
//   - driver.ConcurrencyLimiter: leased concurrency slots;
//   - driver.Admitter: the parts of an admission a store holds (key check, rate,
//     slot, credits) in one round trip, and their closing in another;
//   - audit.Store: the audit log, pruned by the host's retention (Prune);
//   - usage.Store: usage statistics by minute, hour and day, pruned per resolution
//     (Prune);
//   - idempotency.Store: the records that make a request sent with an idempotency key
//     run once;
//   - oauthstore.Store (oauth/oauthstore): the OAuth authorization server's
//     clients, approvals, codes and tokens;
//   - webhook.Store: the webhook endpoints (a bound per account) and the outbox: the
//     messages, each enqueued once by its ID, and their deliveries, claimed by one
//     deliverer at a time under a lease, with their attempts, listed, resent and
//     pruned (Prune);
//   - journal.Store (as journal.KeyStore and journal.Ledger): the journal of changes
//     of management, each recorded by the write that makes it, from the entry its
//     context carries, and claimed and removed by the relays of every instance.
//
// Besides, every store of this repository answers health.Pinger (Ping), which the
// readiness check of package health calls: it is no part of the interfaces above, and
// a store without it is only left out of the check.
//
// A decorator of a store (metrics, tracing) implements driver.Wrapper as well, and
// forwards every interface of the store it wraps: see the package documentation of
// billing/driver.
//
// Implementations are in store/memory (the in-process reference), store/postgres and
// store/redis. Every implementation runs the conformance suites of store/storetest;
// storetest.Run runs each suite a store value's interfaces call for.
//
// # Error contract
//
// A store method reports a well-known condition by returning an error that wraps one of
// the sentinels below, so callers test it with [errors.Is]. The message names the
// identifier involved, for example:
//
//	fmt.Errorf("memory: key %q: %w", id, store.ErrNotFound)
//
// Any other error means the store could not do its job (a lost connection, a timeout,
// a full disk). Tollgate treats such errors as "store unavailable": the call is answered
// with 503, nothing is admitted and nothing is charged. A value the store cannot hold
// is not an outage: it wraps [ErrInvalid], and Tollgate answers 400.
package store

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

var (
	// ErrNotFound reports that the record asked for does not exist.
	ErrNotFound = errors.New("store: not found")

	// ErrConflict reports that a record with the same identity already exists, or that
	// the change conflicts with the record's current state.
	ErrConflict = errors.New("store: conflict")

	// ErrUnavailable reports that the store cannot be reached or cannot answer in time.
	// Implementations should wrap connection and timeout failures with it, although
	// Tollgate treats every unrecognised store error the same way.
	ErrUnavailable = errors.New("store: unavailable")

	// ErrInvalid reports a value the store cannot hold: text that is not valid UTF-8 or
	// contains a NUL byte (see [CheckText]), or a number outside the store's range. It
	// is the caller's mistake, never an outage. Tollgate checks what clients send
	// before it reaches a store, so a store returns it only to a caller that skipped
	// those checks.
	ErrInvalid = errors.New("store: invalid value")
)

// CheckText returns an error wrapping [ErrInvalid], naming what, unless s is text that
// every store can hold: valid UTF-8 without NUL bytes. PostgreSQL refuses anything
// else; the other stores refuse it too, so that every store behaves alike.
func CheckText(what, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%s is not valid UTF-8: %w", what, ErrInvalid)
	}
	if strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("%s contains a NUL byte: %w", what, ErrInvalid)
	}
	return nil
}

// MaxSessionID is the longest session id a session store holds, in bytes.
const MaxSessionID = 128

// CheckSessionID returns an error wrapping [ErrInvalid] unless id can be a session
// store's key: text ([CheckText]) of 1 to [MaxSessionID] bytes. Every session store
// checks it first, so that all refuse the same ids.
func CheckSessionID(id string) error {
	if id == "" || len(id) > MaxSessionID {
		return fmt.Errorf("session id: give 1 to %d bytes, got %d: %w", MaxSessionID, len(id), ErrInvalid)
	}
	return CheckText("session id", id)
}

// PrefixEnd returns the first string, in byte-wise order, after every string that
// begins with p, so that a store selects the ids with a prefix as the range from p up
// to it: p with its last character replaced by the next one (the byte-wise order of
// UTF-8 is that of the code points), or, if that is the last code point, the same of p
// without it. ok is false when there is no such string: p is empty, made of the last
// code point only, or not UTF-8.
func PrefixEnd(p string) (string, bool) {
	for p != "" {
		r, n := utf8.DecodeLastRuneInString(p)
		p = p[:len(p)-n]
		if r == utf8.RuneError && n == 1 {
			// Not UTF-8: no character follows.
			return "", false
		}
		switch next := r + 1; {
		case next > utf8.MaxRune:
			continue
		case next >= 0xD800 && next <= 0xDFFF: // surrogates are not characters
			return p + string(rune(0xE000)), true
		default:
			return p + string(next), true
		}
	}
	return "", false
}
