package authn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/store"
)

// An Authority verifies credentials over an [auth.KeyStore]: keys (by value or by id)
// and session tokens, with a cache of key records if it is given one. Accounts and keys
// are made and changed elsewhere (package accounts); the store only keeps records.
//
// An Authority is safe for concurrent use.
type Authority struct {
	keys     auth.KeyStore
	sessions *auth.Sessions
	ended    auth.SessionStore
	cache    *KeyCache
}

// Options configures an [Authority]. The zero value is the default.
type Options struct {
	// Sessions verifies session tokens (x-jwt). If nil, session tokens are refused
	// with auth.ErrSessionsDisabled.
	Sessions *auth.Sessions
	// Ended, if set, remembers the sessions that were ended; every session token with
	// an id is checked against it. If nil, sessions cannot be
	// ended before their expiry.
	Ended auth.SessionStore
	// Cache, if set, keeps key records between calls; principals authenticated from it
	// are marked Cached, and the caller must check their key (see [KeyCache]).
	Cache *KeyCache
}

// New returns an Authority over keys. opts may be nil.
func New(keys auth.KeyStore, opts *Options) (*Authority, error) {
	if keys == nil {
		return nil, errors.New("auth: authn.New needs a KeyStore")
	}
	a := &Authority{keys: keys}
	if opts != nil {
		a.sessions, a.ended, a.cache = opts.Sessions, opts.Ended, opts.Cache
	}
	return a, nil
}

// Forget drops the key with the given id from the authority's cache, if it has one,
// so that its next authentication reads the store: call it when the key was rotated,
// revoked or changed (the Service does, on the key events of its bus).
func (a *Authority) Forget(keyID string) {
	if a.cache != nil {
		a.cache.forget(keyID)
	}
}

// ForgetAccount drops the keys of the account with the given id, and the account's own
// record, from the authority's cache, if it has one: call it when the account changed
// (suspended, reactivated, closed, or put on another plan; the Service does, on the
// account events of its bus).
func (a *Authority) ForgetAccount(id string) {
	if a.cache != nil {
		a.cache.forgetAccountKeys(id)
	}
}

// Store returns the authority's key store.
func (a *Authority) Store() auth.KeyStore { return a.keys }

// Authenticate resolves a credential (see [auth.CredentialFrom]) to a principal.
// Without a cache it reads the key from the store on every call; with one
// ([Options.Cache]) it may return a cached record, marked [auth.Principal.Cached],
// whose key the caller must check before it serves the call. A key that matches nothing
// gives [auth.ErrUnknownKey]; a revoked or expired key a [*auth.DeniedError]. Store
// failures are returned as they are.
func (a *Authority) Authenticate(ctx context.Context, cred auth.Credential, now time.Time) (auth.Principal, error) {
	if cred.Kind == auth.SessionHeader {
		return a.authenticateSession(ctx, cred.Value, now)
	}
	h := auth.HashKey(cred.Value)
	if a.cache != nil {
		if key, acct, ok := a.cache.get(h, now); ok {
			return checked(&auth.Principal{Account: acct, Key: key, Cached: true}, now)
		}
	}
	return a.resolve(ctx, h, now)
}

// resolve reads the key with hash h from the store, and caches it if it is live.
func (a *Authority) resolve(ctx context.Context, h auth.Hash, now time.Time) (auth.Principal, error) {
	key, acct, err := a.keys.Resolve(ctx, h)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return auth.Principal{}, auth.ErrUnknownKey
		}
		return auth.Principal{}, err
	}
	p, err := checked(&auth.Principal{Account: acct, Key: key}, now)
	if err == nil && a.cache != nil {
		a.cache.put(key, acct, now)
	}
	return p, err
}

// AuthenticateKeyID resolves the key with the given id to a principal, for credentials
// bound to a key's stable id rather than to its value, such as OAuth access tokens: they
// keep working when the key is rotated and stop when it is revoked or expires. An id
// that matches no key gives [auth.ErrUnknownKey]; a revoked or expired key a
// [*auth.DeniedError].
// With a cache, the record may come from it, marked Cached like any other.
func (a *Authority) AuthenticateKeyID(ctx context.Context, id string, now time.Time) (auth.Principal, error) {
	if a.cache != nil {
		if key, acct, ok := a.cache.getByID(id, now); ok {
			return checked(&auth.Principal{Account: acct, Key: key, Cached: true, ByID: true}, now)
		}
	}
	return a.resolveID(ctx, id, now)
}

// resolveID reads the key with the given id and its account from the store, and caches
// the key if it is live.
func (a *Authority) resolveID(ctx context.Context, id string, now time.Time) (auth.Principal, error) {
	key, err := a.keys.Key(ctx, id)
	if err == nil {
		var acct auth.Account
		if acct, err = a.keys.Account(ctx, key.AccountID); err == nil {
			p, err := checked(&auth.Principal{Account: acct, Key: key, ByID: true}, now)
			if err == nil && a.cache != nil {
				a.cache.put(key, acct, now)
			}
			return p, err
		}
	}
	if errors.Is(err, store.ErrNotFound) {
		return auth.Principal{}, auth.ErrUnknownKey
	}
	return auth.Principal{}, err
}

// Refresh authenticates p again against the store, bypassing the cache: it returns the
// principal as the store has it now, or the error the key now deserves
// (auth.ErrUnknownKey for a rotated-away value, a *auth.DeniedError for a revoked one).
// Call it when a cached principal's key check fails.
func (a *Authority) Refresh(ctx context.Context, p auth.Principal, now time.Time) (auth.Principal, error) {
	if p.Key.ID == "" {
		if a.cache != nil {
			a.cache.forgetAccount(p.Account.ID)
		}
		fresh, err := a.resolveAccount(ctx, p.Account.ID, now)
		if err != nil {
			return auth.Principal{}, err
		}
		fresh.SessionID = p.SessionID
		return fresh, nil
	}
	if a.cache != nil {
		a.cache.forget(p.Key.ID)
	}
	var (
		fresh auth.Principal
		err   error
	)
	if p.ByID {
		fresh, err = a.resolveID(ctx, p.Key.ID, now)
	} else {
		fresh, err = a.resolve(ctx, p.Key.Hash, now)
	}
	if p.SessionID != "" {
		if err != nil {
			return auth.Principal{}, sessionKeyError(err)
		}
		fresh.SessionID, fresh.ByID = p.SessionID, p.ByID
	}
	return fresh, err
}

// checked returns *p if its key and account may call, else the refusal. (p is a
// pointer, and the key and account are read in place: a Principal is a few hundred
// bytes, copied on every call.)
func checked(p *auth.Principal, now time.Time) (auth.Principal, error) {
	key, acct := &p.Key, &p.Account
	switch {
	case key.Revoked():
		return auth.Principal{}, denied(auth.ErrKeyRevoked, msgKeyRevoked)
	case key.Restrictions.Expired(now):
		return auth.Principal{}, denied(auth.ErrKeyExpired, "the API key expired at "+key.Restrictions.ExpiresAt().Format(time.RFC3339))
	case acct.Restrictions.Expired(now):
		return auth.Principal{}, denied(auth.ErrKeyExpired, "the account's access expired at "+acct.Restrictions.ExpiresAt().Format(time.RFC3339))
	case acct.State == auth.AccountClosed:
		// A closed account's keys are revoked with it; one the closure has not reached
		// yet is answered as they are.
		return auth.Principal{}, denied(auth.ErrKeyRevoked, msgKeyRevoked)
	}
	return *p, nil
}

// msgKeyRevoked is what the caller of a revoked key, or of a key of a closed account,
// is told.
const msgKeyRevoked = "the API key has been revoked; use another key of the account"

func (a *Authority) authenticateSession(ctx context.Context, token string, now time.Time) (auth.Principal, error) {
	if a.sessions == nil {
		return auth.Principal{}, auth.ErrSessionsDisabled
	}
	c, err := a.sessions.Parse(token, now)
	if err != nil {
		return auth.Principal{}, err
	}
	if c.ID != "" && a.ended != nil {
		ended, err := a.ended.SessionEnded(ctx, c.ID)
		if err != nil {
			return auth.Principal{}, err
		}
		if ended {
			return auth.Principal{}, invalidSession("it was signed out; start a new session")
		}
	}
	if c.KeyID == "" {
		p, err := a.accountSession(ctx, c.Account, now)
		if err != nil {
			return auth.Principal{}, err
		}
		p.SessionID = c.ID
		return p, nil
	}
	p, err := a.AuthenticateKeyID(ctx, c.KeyID, now)
	if err == nil && p.Account.ID == c.Account && !a.sessions.BoundTo(c, p.Key.Hash) && p.Cached {
		// The cached record may predate a rotation that the session started after.
		p, err = a.Refresh(ctx, p, now)
	}
	switch {
	case err != nil:
		return auth.Principal{}, sessionKeyError(err)
	case p.Account.ID != c.Account:
		return auth.Principal{}, invalidSession("its key belongs to another account")
	case !a.sessions.BoundTo(c, p.Key.Hash):
		return auth.Principal{}, invalidSession("the key that started it was rotated; start a new session with the key's new value")
	}
	// A bound session is refreshed by its key's hash, so that a rotation ends it.
	p.SessionID, p.ByID = c.ID, !c.KeyBound
	return p, nil
}

// accountSession authenticates a session that acts for the whole account.
func (a *Authority) accountSession(ctx context.Context, id string, now time.Time) (auth.Principal, error) {
	if a.cache != nil {
		if acct, ok := a.cache.account(id, now); ok {
			return checkSession(auth.Principal{Account: acct, Cached: true}, now)
		}
	}
	return a.resolveAccount(ctx, id, now)
}

// sessionKeyError turns the verdict on the key a session acts as into the verdict on
// the session: it is no longer valid. Other errors are returned as they are.
func sessionKeyError(err error) error {
	switch {
	case errors.Is(err, auth.ErrUnknownKey):
		return invalidSession("the key that started it was rotated or deleted; start a new session")
	case errors.Is(err, auth.ErrKeyRevoked):
		return invalidSession("the key it acts as has been revoked; start a new session with another key")
	case errors.Is(err, auth.ErrKeyExpired):
		return invalidSession("the key it acts as, or its account, has expired")
	}
	return err
}

// resolveAccount reads the account of a session from the store, and caches it.
func (a *Authority) resolveAccount(ctx context.Context, id string, now time.Time) (auth.Principal, error) {
	acct, err := a.keys.Account(ctx, id)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return auth.Principal{}, invalidSession("its account does not exist")
		}
		return auth.Principal{}, err
	}
	if a.cache != nil {
		a.cache.putAccount(acct, now)
	}
	return checkSession(auth.Principal{Account: acct}, now)
}

// checkSession refuses a session whose account's access has expired, or whose account
// is closed.
func checkSession(p auth.Principal, now time.Time) (auth.Principal, error) {
	switch {
	case p.Account.Restrictions.Expired(now):
		return auth.Principal{}, denied(auth.ErrKeyExpired, "the account's access expired at "+p.Account.Restrictions.ExpiresAt().Format(time.RFC3339))
	case p.Account.State == auth.AccountClosed:
		return auth.Principal{}, invalidSession("its account is closed")
	}
	return p, nil
}

// denied returns the refusal of a valid credential for reason.
func denied(reason error, msg string) error { return &auth.DeniedError{Reason: reason, Message: msg} }

// invalidSession returns the refusal of a session token, saying why.
func invalidSession(why string) error {
	return fmt.Errorf("%w: %s", auth.ErrInvalidSession, why)
}
