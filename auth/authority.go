package auth

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/store"
)

// An Authority verifies credentials over a [KeyStore]: keys (by value or by id) and
// session tokens, with a cache of key records if it is given one. Accounts and keys are
// made and changed elsewhere (package accounts); the store only keeps records.
//
// An Authority is safe for concurrent use.
type Authority struct {
	keys     KeyStore
	sessions *Sessions
	ended    SessionStore
	cache    *KeyCache
}

// AuthorityOptions configures an [Authority]. The zero value is the default.
type AuthorityOptions struct {
	// Sessions verifies session tokens (x-jwt). If nil, session tokens are refused
	// with ErrSessionsDisabled.
	Sessions *Sessions
	// Ended, if set, remembers the sessions that were ended; every session token with
	// an id is checked against it. If nil, sessions cannot be
	// ended before their expiry.
	Ended SessionStore
	// Cache, if set, keeps key records between calls; principals authenticated from it
	// are marked Cached, and the caller must check their key (see [KeyCache]).
	Cache *KeyCache
}

// NewAuthority returns an Authority over keys. opts may be nil.
func NewAuthority(keys KeyStore, opts *AuthorityOptions) (*Authority, error) {
	if keys == nil {
		return nil, errors.New("auth: NewAuthority needs a KeyStore")
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

// Store returns the authority's key store.
func (a *Authority) Store() KeyStore { return a.keys }

// A Principal is who a request acts for: an account, and the key it presented or its
// session acts as (the zero Key for a session that acts for the whole account).
type Principal struct {
	Account Account
	Key     Key
	// SessionID is the id of the session the request authenticated with; empty for an
	// API key, and for a session token issued without an id.
	SessionID string
	// Cached reports that the key's record came from the authority's cache, so the key
	// may have been rotated or revoked since: check it (a key check, see billing/driver's KeyChecker) before
	// serving the call, or call [Authority.Refresh].
	Cached bool
	// ByID reports that the caller was authenticated by the key's stable id rather than
	// its value (see [Authority.AuthenticateKeyID]): a rotation of the value does not
	// affect it, a revocation does.
	ByID bool
}

// Session reports whether the principal authenticated with a session token.
func (p *Principal) Session() bool { return p.Key.ID == "" || p.SessionID != "" }

// WholeAccount reports whether the principal acts for its whole account: the primary
// key, a session that acts as it, or a session that names no key (a token the host
// issued for the whole account). It sees and manages every key of the account; any
// other principal acts as a sub-key, with that key's rights and never more.
func (p *Principal) WholeAccount() bool { return p.Key.Primary || p.Key.ID == "" }

// Authenticate resolves a credential (see [CredentialFrom]) to a principal. Without a
// cache it reads the key from the store on every call; with one
// ([AuthorityOptions.Cache]) it may return a cached record, marked [Principal.Cached],
// whose key the caller must check before it serves the call. A key that matches nothing
// gives [ErrUnknownKey]; a revoked or expired key a [*DeniedError]. Store failures are
// returned as they are.
func (a *Authority) Authenticate(ctx context.Context, cred Credential, now time.Time) (Principal, error) {
	if cred.Kind == SessionHeader {
		return a.authenticateSession(ctx, cred.Value, now)
	}
	h := HashKey(cred.Value)
	if a.cache != nil {
		if key, acct, ok := a.cache.get(h, now); ok {
			return checked(&Principal{Account: acct, Key: key, Cached: true}, now)
		}
	}
	return a.resolve(ctx, h, now)
}

// resolve reads the key with hash h from the store, and caches it if it is live.
func (a *Authority) resolve(ctx context.Context, h Hash, now time.Time) (Principal, error) {
	key, acct, err := a.keys.Resolve(ctx, h)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return Principal{}, ErrUnknownKey
		}
		return Principal{}, err
	}
	p, err := checked(&Principal{Account: acct, Key: key}, now)
	if err == nil && a.cache != nil {
		a.cache.put(key, acct, now)
	}
	return p, err
}

// AuthenticateKeyID resolves the key with the given id to a principal, for credentials
// bound to a key's stable id rather than to its value, such as OAuth access tokens: they
// keep working when the key is rotated and stop when it is revoked or expires. An id
// that matches no key gives [ErrUnknownKey]; a revoked or expired key a [*DeniedError].
// With a cache, the record may come from it, marked Cached like any other.
func (a *Authority) AuthenticateKeyID(ctx context.Context, id string, now time.Time) (Principal, error) {
	if a.cache != nil {
		if key, acct, ok := a.cache.getByID(id, now); ok {
			return checked(&Principal{Account: acct, Key: key, Cached: true, ByID: true}, now)
		}
	}
	return a.resolveID(ctx, id, now)
}

// resolveID reads the key with the given id and its account from the store, and caches
// the key if it is live.
func (a *Authority) resolveID(ctx context.Context, id string, now time.Time) (Principal, error) {
	key, err := a.keys.Key(ctx, id)
	if err == nil {
		var acct Account
		if acct, err = a.keys.Account(ctx, key.AccountID); err == nil {
			p, err := checked(&Principal{Account: acct, Key: key, ByID: true}, now)
			if err == nil && a.cache != nil {
				a.cache.put(key, acct, now)
			}
			return p, err
		}
	}
	if errors.Is(err, store.ErrNotFound) {
		return Principal{}, ErrUnknownKey
	}
	return Principal{}, err
}

// Refresh authenticates p again against the store, bypassing the cache: it returns the
// principal as the store has it now, or the error the key now deserves
// (ErrUnknownKey for a rotated-away value, a *DeniedError for a revoked one). Call it
// when a cached principal's key check fails.
func (a *Authority) Refresh(ctx context.Context, p Principal, now time.Time) (Principal, error) {
	if p.Key.ID == "" {
		if a.cache != nil {
			a.cache.forgetAccount(p.Account.ID)
		}
		fresh, err := a.resolveAccount(ctx, p.Account.ID, now)
		if err != nil {
			return Principal{}, err
		}
		fresh.SessionID = p.SessionID
		return fresh, nil
	}
	if a.cache != nil {
		a.cache.forget(p.Key.ID)
	}
	var (
		fresh Principal
		err   error
	)
	if p.ByID {
		fresh, err = a.resolveID(ctx, p.Key.ID, now)
	} else {
		fresh, err = a.resolve(ctx, p.Key.Hash, now)
	}
	if p.SessionID != "" {
		if err != nil {
			return Principal{}, sessionKeyError(err)
		}
		fresh.SessionID, fresh.ByID = p.SessionID, p.ByID
	}
	return fresh, err
}

// checked returns *p if its key and account may call, else the refusal. (p is a
// pointer, and the key and account are read in place: a Principal is a few hundred
// bytes, copied on every call.)
func checked(p *Principal, now time.Time) (Principal, error) {
	key, acct := &p.Key, &p.Account
	switch {
	case key.Revoked():
		return Principal{}, denied(ErrKeyRevoked, "the API key has been revoked; use another key of the account")
	case key.Restrictions.Expired(now):
		return Principal{}, denied(ErrKeyExpired, "the API key expired at "+key.Restrictions.ExpiresAt().Format(time.RFC3339))
	case acct.Restrictions.Expired(now):
		return Principal{}, denied(ErrKeyExpired, "the account's access expired at "+acct.Restrictions.ExpiresAt().Format(time.RFC3339))
	}
	return *p, nil
}

func (a *Authority) authenticateSession(ctx context.Context, token string, now time.Time) (Principal, error) {
	if a.sessions == nil {
		return Principal{}, ErrSessionsDisabled
	}
	c, err := a.sessions.Parse(token, now)
	if err != nil {
		return Principal{}, err
	}
	if c.ID != "" && a.ended != nil {
		ended, err := a.ended.SessionEnded(ctx, c.ID)
		if err != nil {
			return Principal{}, err
		}
		if ended {
			return Principal{}, invalidSession("it was signed out; start a new session")
		}
	}
	if c.KeyID == "" {
		p, err := a.accountSession(ctx, c.Account, now)
		if err != nil {
			return Principal{}, err
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
		return Principal{}, sessionKeyError(err)
	case p.Account.ID != c.Account:
		return Principal{}, invalidSession("its key belongs to another account")
	case !a.sessions.BoundTo(c, p.Key.Hash):
		return Principal{}, invalidSession("the key that started it was rotated; start a new session with the key's new value")
	}
	// A bound session is refreshed by its key's hash, so that a rotation ends it.
	p.SessionID, p.ByID = c.ID, !c.KeyBound
	return p, nil
}

// accountSession authenticates a session that acts for the whole account.
func (a *Authority) accountSession(ctx context.Context, id string, now time.Time) (Principal, error) {
	if a.cache != nil {
		if acct, ok := a.cache.account(id, now); ok {
			return checkSession(Principal{Account: acct, Cached: true}, now)
		}
	}
	return a.resolveAccount(ctx, id, now)
}

// sessionKeyError turns the verdict on the key a session acts as into the verdict on
// the session: it is no longer valid. Other errors are returned as they are.
func sessionKeyError(err error) error {
	switch {
	case errors.Is(err, ErrUnknownKey):
		return invalidSession("the key that started it was rotated or deleted; start a new session")
	case errors.Is(err, ErrKeyRevoked):
		return invalidSession("the key it acts as has been revoked; start a new session with another key")
	case errors.Is(err, ErrKeyExpired):
		return invalidSession("the key it acts as, or its account, has expired")
	}
	return err
}

// resolveAccount reads the account of a session from the store, and caches it.
func (a *Authority) resolveAccount(ctx context.Context, id string, now time.Time) (Principal, error) {
	acct, err := a.keys.Account(ctx, id)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return Principal{}, invalidSession("its account does not exist")
		}
		return Principal{}, err
	}
	if a.cache != nil {
		a.cache.putAccount(acct, now)
	}
	return checkSession(Principal{Account: acct}, now)
}

// checkSession refuses a session whose account's access has expired.
func checkSession(p Principal, now time.Time) (Principal, error) {
	if p.Account.Restrictions.Expired(now) {
		return Principal{}, denied(ErrKeyExpired, "the account's access expired at "+p.Account.Restrictions.ExpiresAt().Format(time.RFC3339))
	}
	return p, nil
}

// CheckAccess checks the restrictions of the account and the key that depend on how a
// request arrives: its channel and its address. A zero ch skips the channel check (for
// endpoints any valid key may use).
func (p *Principal) CheckAccess(ch Channel, addr netip.Addr) error {
	for _, r := range []Restrictions{p.Account.Restrictions, p.Key.Restrictions} {
		if ch != 0 && !r.AllowsChannel(ch) {
			return denied(ErrChannelNotAllowed, fmt.Sprintf("the API key may not be used over %s; its channels are %s",
				ch, strings.Join(r.Spec().Channels, ", ")))
		}
		if !r.AllowsAddr(addr) {
			shown := "an unknown address"
			if addr.IsValid() {
				shown = addr.String()
			}
			return denied(ErrIPNotAllowed, fmt.Sprintf("the API key may not be used from %s; it is limited to %s",
				shown, strings.Join(r.Spec().AllowedIPs, ", ")))
		}
	}
	return nil
}

// CheckAPI checks that the account and the key may call the API with the given id.
func (p *Principal) CheckAPI(id string) error {
	for _, r := range []Restrictions{p.Account.Restrictions, p.Key.Restrictions} {
		if !r.AllowsAPI(id) {
			return denied(ErrAPINotAllowed, fmt.Sprintf("the API key may not call %s; it is limited to %s",
				id, strings.Join(r.Spec().APIs, ", ")))
		}
	}
	return nil
}

// KeyIDPrefix begins the id of every key.
const KeyIDPrefix = "key_"
