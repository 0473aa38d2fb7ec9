package accounts

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/store"
)

// The policy of keys: how accounts and keys are made, rotated, revoked and changed over
// the key store, which only keeps records. Every change of a key goes through here, and
// from here to an event.

// NewKey describes a sub-key to create.
type NewKey struct {
	// Name labels the key; it is required.
	Name string
	// Restrictions narrow the key within its account's restrictions.
	Restrictions auth.Restrictions
	// Value, if set, is the key's value (for loading fixtures): a UUID. Else one is
	// generated. Either way it is stored only as a hash.
	Value string
}

// KeyChange is a change of a key's name or restrictions: nil fields are left as they
// are.
type KeyChange struct {
	// Name, if set, replaces the key's name.
	Name *string
	// Restrictions, if set, replace the key's restrictions; they must be within the
	// account's.
	Restrictions *auth.Restrictions
}

var accountIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Errors of the key policy, which the management methods turn into codes.
var (
	// errInvalid is matched by the errors of a wrong request (a bad id, a missing
	// name); their messages say what to fix.
	errInvalid = errors.New("accounts: invalid request")
	// errChangeConflict reports a rotation or revocation conditioned on a revision of
	// the key that was refused because the key changed since that revision was read.
	errChangeConflict = fmt.Errorf("accounts: the key changed since it was read: %w", store.ErrConflict)
	// errUpdateConflict reports a key that other updates kept changing while it was
	// being updated, on every attempt.
	errUpdateConflict = fmt.Errorf("accounts: the key changed while it was being updated: %w", store.ErrConflict)
	// errRevokedKeyChange reports a change of a revoked key.
	errRevokedKeyChange = fmt.Errorf("accounts: a revoked key cannot be changed: %w", store.ErrConflict)
)

// invalid is an error matching errInvalid whose message is msg alone.
type invalid string

func (e invalid) Error() string        { return string(e) }
func (e invalid) Is(target error) bool { return target == errInvalid }

// updateAttempts is how many times an update reads a key and updates it before it
// gives up on a key that keeps changing.
const updateAttempts = 8

// keyValue returns given, normalized, if it is a key value (a UUID), or a new random
// value for an empty given.
func keyValue(given string) (string, error) {
	if given == "" {
		return auth.NewKeyValue(), nil
	}
	v, ok := auth.ParseKey(given)
	if !ok {
		return "", invalid("a key value must be a UUID (8-4-4-4-12 hexadecimal digits)")
	}
	return v, nil
}

// randomHex returns n random bytes in hexadecimal.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func newKeyID() string { return auth.KeyIDPrefix + randomHex(10) }

// keyName returns the trimmed name, or the error of a name out of bounds.
func keyName(name string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" || utf8.RuneCountInString(name) > 64 {
		return "", invalid("a key needs a name of 1 to 64 characters")
	}
	return name, nil
}

// storeAccount stores a new account with its primary key, in a write given the
// context that record returns for them (the journal entry of their creation), and
// returns them with the key's value, which is not stored and cannot be read again. An
// empty id is generated; the plan and the billing anchor are the caller's to check.
func (m *Manager) storeAccount(ctx context.Context, spec Spec, anchor, now time.Time, record func(auth.Account, auth.Key) context.Context) (auth.Account, auth.Key, string, error) {
	if spec.ID == "" {
		spec.ID = "acct_" + randomHex(8)
	}
	if !accountIDPattern.MatchString(spec.ID) {
		return auth.Account{}, auth.Key{}, "", invalid(fmt.Sprintf("account id %q: use 1 to 64 letters, digits, _ and -", spec.ID))
	}
	value, err := keyValue(spec.KeyValue)
	if err != nil {
		return auth.Account{}, auth.Key{}, "", err
	}
	acct := auth.Account{ID: spec.ID, Plan: spec.Plan, Restrictions: spec.Restrictions, CreatedAt: now, BillingAnchor: anchor}
	key := auth.Key{ID: newKeyID(), AccountID: acct.ID, Name: "primary", Primary: true, Hash: auth.HashKey(value), CreatedAt: now}
	if err := m.keys.CreateAccount(record(acct, key), acct, key); err != nil {
		return auth.Account{}, auth.Key{}, "", err
	}
	return acct, key, value, nil
}

// storeKey stores a new sub-key of an account, if limit lets the account hold it (see
// [auth.KeyStore.CreateKey]), in a write given the context that record returns for it,
// and returns it with its value. Its restrictions must be within the account's (else the
// error wraps [auth.ErrWidens]); a key the limit refuses is an error wrapping
// [auth.ErrTooManyKeys]. A key created for an account that a closure has reached
// meanwhile is revoked by revoke (see createKey).
func (m *Manager) storeKey(ctx context.Context, accountID string, spec NewKey, limit auth.KeyLimit, now time.Time,
	record func(auth.Key) context.Context, revoke func(auth.Key) error) (auth.Key, string, error) {
	name, err := keyName(spec.Name)
	if err != nil {
		return auth.Key{}, "", err
	}
	acct, err := m.keys.Account(ctx, accountID)
	if err != nil {
		return auth.Key{}, "", err
	}
	if acct.State == auth.AccountClosed {
		return auth.Key{}, "", closedNoKey(accountID)
	}
	if err := spec.Restrictions.Within(acct.Restrictions); err != nil {
		return auth.Key{}, "", err
	}
	if spec.Restrictions.Expired(now) {
		return auth.Key{}, "", invalid("expires_at is in the past")
	}
	value, err := keyValue(spec.Value)
	if err != nil {
		return auth.Key{}, "", err
	}
	key := auth.Key{ID: newKeyID(), AccountID: accountID, Name: name, Hash: auth.HashKey(value),
		Restrictions: spec.Restrictions, CreatedAt: now}
	if err := m.keys.CreateKey(record(key), key, limit); err != nil {
		return auth.Key{}, "", err
	}
	// A closure changes the account's state before it lists the keys to revoke: one
	// that raced with this creation either listed the key, or is seen now, and the key
	// is revoked here. (A key of a closed account is refused as revoked in any case.)
	// An account deleted since (closed, then deleted) took the key with it.
	acct, err = m.keys.Account(ctx, accountID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return auth.Key{}, "", err
	case err == nil && acct.State == auth.AccountClosed:
		if err := revoke(key); err != nil {
			return auth.Key{}, "", err
		}
		return auth.Key{}, "", closedNoKey(accountID)
	}
	return key, value, nil
}

// closedNoKey is the refusal of a new key of a closed account: an *Error, which the
// management methods answer as it is.
func closedNoKey(accountID string) error {
	return newError(tollgate.CodeConflict, fmt.Sprintf("the account %q is closed; a closed account gets no new key", accountID), nil)
}

// storeRotation gives a key a new random value and returns it; the old value stops
// working at once. Unless rev is [auth.AnyRevision], the key is rotated only if it
// still has the revision rev; otherwise nothing changes and the error wraps
// errChangeConflict. ctx may carry the journal entry of the rotation.
func (m *Manager) storeRotation(ctx context.Context, keyID string, rev int64, now time.Time) (auth.Key, string, error) {
	value := auth.NewKeyValue()
	key, err := m.keys.RotateKey(ctx, keyID, rev, auth.HashKey(value), now)
	if err != nil {
		return auth.Key{}, "", m.conditioned(ctx, keyID, rev, err)
	}
	return key, value, nil
}

// storeRevocation revokes a key, under the same condition as storeRotation. ctx may
// carry the journal entry of the revocation.
func (m *Manager) storeRevocation(ctx context.Context, keyID string, rev int64, now time.Time) (auth.Key, error) {
	key, err := m.keys.RevokeKey(ctx, keyID, rev, now)
	if err != nil {
		return auth.Key{}, m.conditioned(ctx, keyID, rev, err)
	}
	return key, nil
}

// conditioned returns err, wrapped with errChangeConflict if it is the conflict of a
// change conditioned on revision rev of a key that no longer has it. (The key is read
// again to tell that conflict from the others, a revoked key or a taken hash;
// revisions only rise, so a key read at another revision did not have rev when the
// change was tried.)
func (m *Manager) conditioned(ctx context.Context, keyID string, rev int64, err error) error {
	if rev == auth.AnyRevision || !errors.Is(err, store.ErrConflict) {
		return err
	}
	if k, kerr := m.keys.Key(ctx, keyID); kerr == nil && k.Revision != rev {
		return fmt.Errorf("%w: %w", errChangeConflict, err)
	}
	return err
}

// storeUpdate changes the name or the restrictions of a key and returns the key before
// and after the change. check, if not nil, is given the key as it is and as it would
// be, and may refuse the change; its error is returned as it is. The new restrictions
// must be within the account's (else the error wraps [auth.ErrWidens]). A key that
// changed between its reading and the update is read again and the change decided
// anew, a few times (then errUpdateConflict); a revoked key is errRevokedKeyChange.
// Each attempt's write is given the context that record returns for the key as it is
// and as it would be (the journal entry of the change).
func (m *Manager) storeUpdate(ctx context.Context, keyID string, c KeyChange, now time.Time, check func(old, updated auth.Key) error,
	record func(old, updated auth.Key) context.Context) (before, after auth.Key, err error) {
	if c.Name != nil {
		name, err := keyName(*c.Name)
		if err != nil {
			return auth.Key{}, auth.Key{}, err
		}
		c.Name = &name
	}
	for attempt := 0; ; attempt++ {
		old, err := m.keys.Key(ctx, keyID)
		if err != nil {
			return auth.Key{}, auth.Key{}, err
		}
		if old.Revoked() {
			return auth.Key{}, auth.Key{}, fmt.Errorf("key %q is revoked and cannot be changed: %w", keyID, errRevokedKeyChange)
		}
		updated := old
		if c.Name != nil {
			updated.Name = *c.Name
		}
		if c.Restrictions != nil {
			acct, err := m.keys.Account(ctx, old.AccountID)
			if err != nil {
				return auth.Key{}, auth.Key{}, err
			}
			if err := c.Restrictions.Within(acct.Restrictions); err != nil {
				return auth.Key{}, auth.Key{}, err
			}
			if c.Restrictions.Expired(now) {
				return auth.Key{}, auth.Key{}, invalid("expires_at is in the past")
			}
			updated.Restrictions = *c.Restrictions
		}
		if check != nil {
			if err := check(old, updated); err != nil {
				return auth.Key{}, auth.Key{}, err
			}
		}
		after, err := m.keys.UpdateKey(record(old, updated), auth.KeyUpdate{ID: keyID, Name: updated.Name, Restrictions: updated.Restrictions, Revision: old.Revision})
		if err == nil {
			return old, after, nil
		}
		if !errors.Is(err, store.ErrConflict) {
			return auth.Key{}, auth.Key{}, err
		}
		// The key changed since it was read (or was revoked, which the next read
		// tells): another update of it was stored, so every attempt lost to one that
		// made progress. Read it again, a few times.
		if attempt == updateAttempts-1 {
			return auth.Key{}, auth.Key{}, fmt.Errorf("%w: %w", errUpdateConflict, err)
		}
	}
}
