package driver

import "context"

// A KeyCheck names the key a call authenticated with, so that the store that admits the
// call verifies, in the same step, that it is still live: that a key with this id
// still has this hash and this revision, and is not revoked. It lets a service cache key
// records and still refuse a rotated or revoked key, or hold a key to its new
// restrictions, on the very next call.
type KeyCheck struct {
	Account string
	// KeyID is the key's id; empty for a session token, when only the account must
	// exist.
	KeyID string
	// Hash is the SHA-256 of the key's value (auth.HashKey).
	Hash [32]byte
	// Revision is the key's revision (auth.Key.Revision) as the caller's record has it:
	// a key whose revision differs has changed since, and is reported KeyUnknown, so
	// that the caller reads it again.
	Revision int64
	// AccountRevision is the account's revision (auth.Account.Revision) as the caller's
	// record has it: an account whose revision differs (it was suspended, closed, or
	// its plan changed) is reported KeyUnknown too, so that the caller reads it again.
	AccountRevision int64
}

// A KeyState is the verdict of a key check.
type KeyState uint8

// The key states.
const (
	// KeyLive: the key has this hash and is not revoked (or, for a session, the
	// account exists).
	KeyLive KeyState = iota
	// KeyUnknown: no key has this id, hash and revision any more (it was rotated or
	// updated, or the account is gone).
	KeyUnknown
	// KeyRevoked: the key was revoked.
	KeyRevoked
)

// A KeyChecker verifies that a key is still live. Key stores offer it so that a service
// may cache key records: the check then runs in the admission step (see [Admitter]) or,
// for a store that is not an Admitter, as a call of its own. It answers as the key
// store it checks knows the keys, on the very next call after a change. Every
// implementation should pass storetest.TestKeyChecker.
type KeyChecker interface {
	// CheckKey returns the state of the key (or account) named by c.
	CheckKey(ctx context.Context, c KeyCheck) (KeyState, error)
}
