package auth

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/store"
)

// A KeyStore persists accounts and their keys. Keys are stored by hash only.
//
// Implementations must be safe for concurrent use, must not keep or change the values
// passed in, and must make every change visible to the very next read on any instance
// sharing the store: a rotated-away or revoked key must never be served from a cache.
// Every change to a key (rotation, revocation, update) increases its [Key.Revision],
// and every change to an account ([KeyStore.UpdateAccount]) its [Account.Revision]:
// a key check (billing/driver's KeyChecker) compares both.
// Errors that report well-known conditions wrap the sentinels of package store
// (store.ErrNotFound, store.ErrConflict); any other error means the store is unavailable.
// Every implementation should pass storetest.TestKeyStore.
type KeyStore interface {
	// CreateAccount stores a new account together with its primary key, atomically.
	// The account's State (the empty state is stored as [AccountActive]),
	// StateChangedAt, BillingAnchor, PendingPlan and PendingPlanAt are stored as
	// given; its Revision is 0, whatever the account says. It returns an error
	// wrapping store.ErrConflict if the account id, the key id or the key hash is
	// taken, and store.ErrInvalid for a state that is neither empty nor valid.
	CreateAccount(ctx context.Context, account Account, primary Key) error

	// Account returns the account with the given id, or an error wrapping
	// store.ErrNotFound. Every method that returns an account returns every field of
	// it; an account stored before states existed is active, at revision 0, with a
	// zero BillingAnchor and no PendingPlan.
	Account(ctx context.Context, id string) (Account, error)

	// UpdateAccount replaces the mutable fields of an account (Plan, Restrictions,
	// State, StateChangedAt, BillingAnchor, PendingPlan, PendingPlanAt) with those of
	// u, if the account still has the revision u.Revision (so that a change decided on
	// a record that changed since is not applied), increases its revision and returns
	// the account as stored. Of updates decided on one revision, one is applied. It
	// returns an error wrapping store.ErrNotFound (no such account),
	// [ErrAccountClosed] (the account is closed: closure is final),
	// [ErrAccountChanged] (its revision is not u.Revision: read it again), both of
	// which wrap store.ErrConflict, or store.ErrInvalid (text the store cannot hold,
	// or a State that is not [AccountState.Valid]); a refused update changes nothing.
	UpdateAccount(ctx context.Context, u AccountUpdate) (Account, error)

	// Accounts returns a page of the accounts that q selects, in the order of their
	// ids (byte-wise), after the id q.After (which need not name an account): at most
	// q.Limit of them, and the cursor of the next page, the id of the page's last
	// account, when more may follow. A store may bound the accounts one page
	// examines: its page then holds fewer than q.Limit accounts, even none, with Next
	// set (the last id examined); a listing goes on until Next is empty. Every account
	// that exists throughout a listing is listed once; one created or deleted during
	// it may or may not be. It returns an error wrapping [ErrBadAccountQuery] (which
	// wraps store.ErrInvalid) for a limit out of bounds or a state filter that is not
	// valid (see [AccountQuery.PageSize]).
	Accounts(ctx context.Context, q AccountQuery) (AccountPage, error)

	// DeleteAccount deletes a closed account with all its keys: afterwards Account,
	// Key, Keys, Resolve and Accounts find neither, and a key check of them answers
	// unknown. The account's id, and its keys' ids and hashes, are free again: an
	// account with that id may be created afterwards, with none of the deleted one's
	// keys. It deletes the key store's records only: what other stores keep under the
	// account's id (a ledger's balance) is theirs to delete. It returns an error
	// wrapping store.ErrNotFound if there is no such account, and
	// [ErrAccountNotClosed] (which wraps store.ErrConflict) if it is not closed.
	DeleteAccount(ctx context.Context, id string) error

	// CreateKey stores a new key of an existing account, unless limit refuses it: with
	// limit.Max set, the account must hold fewer than limit.Max keys that count (see
	// [KeyLimit]), judged and stored in one atomic step, so that creations that race
	// never pass the limit together. It returns an error wrapping store.ErrNotFound if
	// the account does not exist, [ErrTooManyKeys] (which wraps store.ErrConflict) if
	// the limit refuses the key, and store.ErrConflict if the key id or hash is taken.
	CreateKey(ctx context.Context, key Key, limit KeyLimit) error

	// Key returns the key with the given id, or an error wrapping store.ErrNotFound.
	Key(ctx context.Context, id string) (Key, error)

	// Keys returns a page of the keys of account q.Account, in the order they were
	// created (the primary key, created with its account, first): at most q.Limit keys
	// (see [KeyQuery]), after the key q.After names. It returns an error wrapping
	// store.ErrNotFound if the account does not exist, and [ErrBadKeyQuery] (which wraps
	// store.ErrInvalid) for a limit out of bounds or an After that names no key of the
	// account (a key pruned since, say).
	Keys(ctx context.Context, q KeyQuery) (KeyPage, error)

	// PruneKeys deletes every key that was revoked before before, but primary keys,
	// and returns how many it deleted: afterwards Key, Keys and Resolve find them no
	// more, as if they had never existed. Any number of callers may prune at once, and
	// at the same time as every other operation.
	PruneKeys(ctx context.Context, before time.Time) (int64, error)

	// Resolve returns the key whose current hash is h, with its account. A revoked key
	// is returned (the caller refuses it); the old hash of a rotated key matches nothing.
	// It returns an error wrapping store.ErrNotFound when no key has the hash.
	Resolve(ctx context.Context, h Hash) (Key, Account, error)

	// RotateKey replaces the hash of a key with h, so that the old value stops working
	// immediately, and records the moment. Unless rev is [AnyRevision], the key is
	// rotated only if it still has the revision rev (so that a rotation decided on a
	// record that changed since is not applied). It returns the updated key, or an
	// error wrapping store.ErrNotFound (no such key) or store.ErrConflict (the key is
	// revoked, its revision is not rev, or h is taken); a refused rotation changes
	// nothing.
	RotateKey(ctx context.Context, id string, rev int64, h Hash, at time.Time) (Key, error)

	// RevokeKey marks a key revoked at the given moment and returns it. Unless rev is
	// [AnyRevision], the key is revoked only if it still has the revision rev; a key
	// with another revision, revoked or not, is refused with an error wrapping
	// store.ErrConflict and left as it is. Revoking a revoked key that has the revision
	// asked for (or with AnyRevision) changes nothing and is not an error. It returns an
	// error wrapping store.ErrNotFound if there is no such key.
	RevokeKey(ctx context.Context, id string, rev int64, at time.Time) (Key, error)

	// UpdateKey replaces the name and the restrictions of a key, if the key still has
	// the revision u names (so that a change decided on a record that changed since is
	// not applied), increases its revision and returns it. The key's hash, and so its
	// value, is kept. It returns an error wrapping store.ErrNotFound (no such key),
	// store.ErrConflict (the key is revoked, or its revision is not u.Revision: read it
	// again) or store.ErrInvalid (a name the store cannot hold).
	UpdateKey(ctx context.Context, u KeyUpdate) (Key, error)
}

// A KeyLimit bounds the keys an account may hold for [KeyStore.CreateKey] to add one.
// Its zero value sets no bound.
type KeyLimit struct {
	// Max is the most keys that count that the account may hold with the new one:
	// the new key is refused when the account already holds Max of them. Zero (or
	// less) sets no bound.
	Max int
	// RevokedSince says which revoked keys count: those revoked at or after it. A
	// live key always counts; a key revoked before RevokedSince does not (it is kept
	// until [KeyStore.PruneKeys] deletes it). The zero time counts every revoked key.
	RevokedSince time.Time
}

// A KeyQuery selects a page of an account's keys for [KeyStore.Keys].
type KeyQuery struct {
	// Account is the account whose keys are listed.
	Account string
	// After continues a listing: the id of the last key of the page before (its
	// [KeyPage.Next]). Empty starts with the oldest key.
	After string
	// Limit is the most keys a page holds: 0 means [DefaultKeyPage]; less than 0 or
	// more than [MaxKeyPage] is invalid.
	Limit int
}

// Bounds of [KeyQuery.Limit].
const (
	DefaultKeyPage = 50
	MaxKeyPage     = 200
)

// PageSize returns the number of keys a page of q holds: q.Limit, or [DefaultKeyPage]
// for 0. It returns an error wrapping [ErrBadKeyQuery] for a limit out of bounds.
func (q KeyQuery) PageSize() (int, error) {
	switch {
	case q.Limit == 0:
		return DefaultKeyPage, nil
	case q.Limit < 0 || q.Limit > MaxKeyPage:
		return 0, fmt.Errorf("%w: a page holds 1 to %d keys, not %d", ErrBadKeyQuery, MaxKeyPage, q.Limit)
	}
	return q.Limit, nil
}

// A KeyPage is one page of an account's keys, oldest first.
type KeyPage struct {
	Keys []Key
	// Next is the cursor of the next page (the id of the page's last key, for
	// [KeyQuery.After]); empty when no key follows.
	Next string
}

// PageSize returns the number of accounts a page of q holds: q.Limit, or
// [DefaultAccountPage] for 0. It returns an error wrapping [ErrBadAccountQuery] for a
// limit out of bounds or a State filter that is neither empty nor valid.
func (q AccountQuery) PageSize() (int, error) {
	if q.State != "" && !q.State.Valid() {
		return 0, fmt.Errorf("%w: %q is not an account state (active, suspended or closed)", ErrBadAccountQuery, q.State)
	}
	switch {
	case q.Limit == 0:
		return DefaultAccountPage, nil
	case q.Limit < 0 || q.Limit > MaxAccountPage:
		return 0, fmt.Errorf("%w: a page holds 1 to %d accounts, not %d", ErrBadAccountQuery, MaxAccountPage, q.Limit)
	}
	return q.Limit, nil
}

// Selects reports whether q's filters (all but After and Limit) select a.
func (q *AccountQuery) Selects(a *Account) bool {
	switch {
	case q.Plan != "" && a.Plan != q.Plan:
		return false
	case q.State != "" && a.State.OrActive() != q.State:
		return false
	case !q.CreatedFrom.IsZero() && a.CreatedAt.Before(q.CreatedFrom):
		return false
	case !q.CreatedBefore.IsZero() && !a.CreatedAt.Before(q.CreatedBefore):
		return false
	}
	return strings.HasPrefix(a.ID, q.IDPrefix)
}

// OrActive returns s, or [AccountActive] for the empty state (of a record written before
// states existed).
func (s AccountState) OrActive() AccountState {
	if s == "" {
		return AccountActive
	}
	return s
}

// Errors of the account lifecycle, for [KeyStore.UpdateAccount] and
// [KeyStore.DeleteAccount]. Each wraps store.ErrConflict.
var (
	// ErrAccountChanged reports an update decided on a revision the account no longer
	// has: read it again.
	ErrAccountChanged = fmt.Errorf("auth: the account changed since it was read: %w", store.ErrConflict)
	// ErrAccountClosed reports a change of a closed account: closure is final.
	ErrAccountClosed = fmt.Errorf("auth: the account is closed: %w", store.ErrConflict)
	// ErrAccountNotClosed reports the deletion of an account that is not closed.
	ErrAccountNotClosed = fmt.Errorf("auth: only a closed account can be deleted: %w", store.ErrConflict)
)

// ErrBadAccountQuery reports an [AccountQuery] that is not valid: a limit below 0 or
// above [MaxAccountPage], or a State filter that is not a state. It wraps
// store.ErrInvalid.
var ErrBadAccountQuery = fmt.Errorf("auth: the account listing's query is not valid: %w", store.ErrInvalid)

// ErrTooManyKeys reports a key that [KeyStore.CreateKey] refused because its account
// holds as many keys as the [KeyLimit] allows. It wraps store.ErrConflict.
var ErrTooManyKeys = fmt.Errorf("auth: the account holds as many keys as it may: %w", store.ErrConflict)

// ErrBadKeyQuery reports a [KeyQuery] out of bounds: a limit below 0 or above
// [MaxKeyPage], or an After that names no key of the account. It wraps
// store.ErrInvalid.
var ErrBadKeyQuery = fmt.Errorf("auth: the key listing's query is not valid: %w", store.ErrInvalid)

// AnyRevision, as the revision given to [KeyStore.RotateKey] or [KeyStore.RevokeKey],
// applies the change whatever the key's revision is. Revisions are never negative.
const AnyRevision int64 = -1

// A KeyUpdate is a change of a key's name and restrictions, for [KeyStore.UpdateKey].
// The caller checks the restrictions (an update that widens a key is the caller's
// policy to refuse, see [Restrictions.Within]).
type KeyUpdate struct {
	// ID is the key's id.
	ID string
	// Name and Restrictions replace the key's.
	Name         string
	Restrictions Restrictions
	// Revision is the revision of the record the change was decided on.
	Revision int64
}
