package auth

import (
	"context"
	"time"
)

// A KeyStore persists accounts and their keys. Keys are stored by hash only.
//
// Implementations must be safe for concurrent use, must not keep or change the values
// passed in, and must make every change visible to the very next read on any instance
// sharing the store: a rotated-away or revoked key must never be served from a cache.
// Every change to a key (rotation, revocation, update) increases its [Key.Revision],
// which a [KeyChecker] compares.
// Errors that report well-known conditions wrap the sentinels of package store
// (store.ErrNotFound, store.ErrConflict); any other error means the store is unavailable.
// Every implementation should pass storetest.TestKeyStore.
type KeyStore interface {
	// CreateAccount stores a new account together with its primary key, atomically.
	// It returns an error wrapping store.ErrConflict if the account id, the key id or
	// the key hash is taken.
	CreateAccount(ctx context.Context, account Account, primary Key) error

	// Account returns the account with the given id, or an error wrapping
	// store.ErrNotFound.
	Account(ctx context.Context, id string) (Account, error)

	// CreateKey stores a new key of an existing account. It returns an error wrapping
	// store.ErrNotFound if the account does not exist, and store.ErrConflict if the key
	// id or hash is taken.
	CreateKey(ctx context.Context, key Key) error

	// Key returns the key with the given id, or an error wrapping store.ErrNotFound.
	Key(ctx context.Context, id string) (Key, error)

	// Keys returns the keys of an account in the order they were created, the primary
	// key first. It returns an error wrapping store.ErrNotFound if the account does not
	// exist.
	Keys(ctx context.Context, accountID string) ([]Key, error)

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
