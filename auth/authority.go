package auth

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tollgate-dev/tollgate/store"
)

// An Authority verifies credentials and manages accounts and keys over a [KeyStore]. It
// holds the policy (hashing, key generation, restriction checks); the store only keeps
// records.
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
	// Ended, if set, remembers the sessions that were ended ([Authority.EndSession]);
	// every session token with an id is checked against it. If nil, sessions cannot be
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
// so that its next authentication reads the store: for a key changed by another
// authority over the same store.
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

// EndSession ends the session that c describes, at now, on every instance that shares
// the authority's [SessionStore]: its token is refused from the next request on. It
// needs a SessionStore ([AuthorityOptions.Ended]) and a session with an id.
func (a *Authority) EndSession(ctx context.Context, c SessionClaims, now time.Time) error {
	switch {
	case a.ended == nil:
		return errors.New("auth: sessions cannot be ended: the authority has no SessionStore")
	case c.ID == "":
		return invalidSession("it has no session id, so it cannot be ended; it lasts until it expires")
	}
	return a.ended.EndSession(ctx, c.ID, c.Expires, now)
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

var accountIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// NewAccount describes an account to create.
type NewAccount struct {
	// ID is the account's id; if empty, one is generated.
	ID string
	// Plan names the account's plan. The caller checks that it exists.
	Plan string
	// Restrictions apply to every key of the account.
	Restrictions Restrictions
	// KeyValue, if set, is the primary key's value (a UUID), for loading fixtures. If
	// empty, a random value is generated. Either way it is stored only as a hash.
	KeyValue string
}

// CreateAccount creates an account with its primary key and returns them with the key's
// value, which is not stored and cannot be read again.
func (a *Authority) CreateAccount(ctx context.Context, spec NewAccount, now time.Time) (Account, Key, string, error) {
	if spec.ID == "" {
		spec.ID = "acct_" + randomHex(8)
	}
	if !accountIDPattern.MatchString(spec.ID) {
		return Account{}, Key{}, "", invalidf("account id %q: use 1 to 64 letters, digits, _ and -", spec.ID)
	}
	if spec.Plan == "" {
		return Account{}, Key{}, "", invalidf("an account needs a plan")
	}
	value, err := keyValue(spec.KeyValue)
	if err != nil {
		return Account{}, Key{}, "", err
	}
	acct := Account{ID: spec.ID, Plan: spec.Plan, Restrictions: spec.Restrictions, CreatedAt: now}
	key := Key{ID: newKeyID(), AccountID: acct.ID, Name: "primary", Primary: true, Hash: HashKey(value), CreatedAt: now}
	if err := a.keys.CreateAccount(ctx, acct, key); err != nil {
		return Account{}, Key{}, "", err
	}
	return acct, key, value, nil
}

// NewKey describes a sub-key to create.
type NewKey struct {
	// Name labels the key; it is required.
	Name string
	// Restrictions narrow the key within its account's restrictions.
	Restrictions Restrictions
	// Value, if set, is the key's value (for loading fixtures); else one is generated.
	Value string
}

// CreateKey creates a sub-key of an account, if limit lets the account hold it (see
// [KeyStore.CreateKey]), and returns it with its value. The key's restrictions must be
// within the account's (see [Restrictions.Within]); otherwise the error wraps
// [ErrWidens]. A key the limit refuses is an error wrapping [ErrTooManyKeys].
func (a *Authority) CreateKey(ctx context.Context, accountID string, spec NewKey, limit KeyLimit, now time.Time) (Key, string, error) {
	name := strings.TrimSpace(spec.Name)
	if name == "" || utf8.RuneCountInString(name) > 64 {
		return Key{}, "", invalidf("a key needs a name of 1 to 64 characters")
	}
	acct, err := a.keys.Account(ctx, accountID)
	if err != nil {
		return Key{}, "", err
	}
	if err := spec.Restrictions.Within(acct.Restrictions); err != nil {
		return Key{}, "", err
	}
	if spec.Restrictions.Expired(now) {
		return Key{}, "", invalidf("expires_at is in the past")
	}
	value, err := keyValue(spec.Value)
	if err != nil {
		return Key{}, "", err
	}
	key := Key{ID: newKeyID(), AccountID: accountID, Name: name, Hash: HashKey(value),
		Restrictions: spec.Restrictions, CreatedAt: now}
	if err := a.keys.CreateKey(ctx, key, limit); err != nil {
		return Key{}, "", err
	}
	return key, value, nil
}

// ErrChangeConflict reports a rotation or revocation conditioned on a revision of the key
// ([Authority.RotateKey], [Authority.RevokeKey]) that was refused because the key
// changed since that revision was read: read it again, decide again, and retry. It
// wraps store.ErrConflict.
var ErrChangeConflict = fmt.Errorf("auth: the key changed since it was read: %w", store.ErrConflict)

// RotateKey gives a key a new random value and returns it. The old value stops working
// at once; the key keeps its id, name and restrictions. Unless rev is [AnyRevision], the
// key is rotated only if it still has the revision rev (the one a decision to rotate it
// was made on); otherwise nothing changes, no value is returned, and the error wraps
// [ErrChangeConflict].
func (a *Authority) RotateKey(ctx context.Context, keyID string, rev int64, now time.Time) (Key, string, error) {
	value := NewKeyValue()
	key, err := a.keys.RotateKey(ctx, keyID, rev, HashKey(value), now)
	if a.cache != nil {
		a.cache.forget(keyID)
	}
	if err != nil {
		return Key{}, "", a.changed(ctx, keyID, rev, err)
	}
	return key, value, nil
}

// RevokeKey revokes a key; it is refused from the next call on. Unless rev is
// [AnyRevision], the key is revoked only if it still has the revision rev; otherwise
// nothing changes and the error wraps [ErrChangeConflict].
func (a *Authority) RevokeKey(ctx context.Context, keyID string, rev int64, now time.Time) (Key, error) {
	if a.cache != nil {
		defer a.cache.forget(keyID)
	}
	key, err := a.keys.RevokeKey(ctx, keyID, rev, now)
	if err != nil {
		return Key{}, a.changed(ctx, keyID, rev, err)
	}
	return key, nil
}

// changed returns err, wrapped with [ErrChangeConflict] if it is the conflict of a change
// conditioned on revision rev of a key that no longer has it. (The key is read again
// to tell that conflict from the others, a revoked key or a taken hash; revisions only
// rise, so a key read at another revision did not have rev when the change was tried.)
func (a *Authority) changed(ctx context.Context, keyID string, rev int64, err error) error {
	if rev == AnyRevision || !errors.Is(err, store.ErrConflict) {
		return err
	}
	if k, kerr := a.keys.Key(ctx, keyID); kerr == nil && k.Revision != rev {
		return fmt.Errorf("%w: %w", ErrChangeConflict, err)
	}
	return err
}

// KeyChange describes a change of a key's name or restrictions, for
// [Authority.UpdateKey]. A nil field is left as it is.
type KeyChange struct {
	// Name, if set, replaces the key's name.
	Name *string
	// Restrictions, if set, replace the key's restrictions; they must be within the
	// account's.
	Restrictions *Restrictions
}

// updateAttempts is how many times [Authority.UpdateKey] reads a key and updates it
// before it gives up on a key that keeps changing.
const updateAttempts = 8

// Errors of [Authority.UpdateKey] that wrap store.ErrConflict.
var (
	// ErrUpdateConflict reports a key that other updates kept changing while it was being
	// updated, on every attempt: read it again and retry.
	ErrUpdateConflict = fmt.Errorf("auth: the key changed while it was being updated: %w", store.ErrConflict)
	// ErrRevokedKeyChange reports a change of a revoked key, which cannot be changed.
	ErrRevokedKeyChange = fmt.Errorf("auth: a revoked key cannot be changed: %w", store.ErrConflict)
)

// UpdateKey changes the name or the restrictions of a key and returns the key before
// and after the change. check, if not nil, is given the key as it is and as it would be,
// and may refuse the change (a policy of the caller's: that it only narrows, say); its
// error is returned as it is. The new restrictions must be within the account's
// (otherwise the error wraps [ErrWidens]). A key that changed between its reading and
// the update is read again and the change decided anew, a few times; a revoked key is
// refused with store.ErrConflict.
func (a *Authority) UpdateKey(ctx context.Context, keyID string, c KeyChange, now time.Time, check func(old, updated Key) error) (before, after Key, err error) {
	if c.Name != nil {
		name := strings.TrimSpace(*c.Name)
		if name == "" || utf8.RuneCountInString(name) > 64 {
			return Key{}, Key{}, invalidf("a key needs a name of 1 to 64 characters")
		}
		c.Name = &name
	}
	if a.cache != nil {
		defer a.cache.forget(keyID)
	}
	for attempt := 0; ; attempt++ {
		old, err := a.keys.Key(ctx, keyID)
		if err != nil {
			return Key{}, Key{}, err
		}
		if old.Revoked() {
			return Key{}, Key{}, fmt.Errorf("auth: key %q is revoked and cannot be changed: %w", keyID, ErrRevokedKeyChange)
		}
		updated := old
		if c.Name != nil {
			updated.Name = *c.Name
		}
		if c.Restrictions != nil {
			acct, err := a.keys.Account(ctx, old.AccountID)
			if err != nil {
				return Key{}, Key{}, err
			}
			if err := c.Restrictions.Within(acct.Restrictions); err != nil {
				return Key{}, Key{}, err
			}
			if c.Restrictions.Expired(now) {
				return Key{}, Key{}, invalidf("expires_at is in the past")
			}
			updated.Restrictions = *c.Restrictions
		}
		if check != nil {
			if err := check(old, updated); err != nil {
				return Key{}, Key{}, err
			}
		}
		after, err := a.keys.UpdateKey(ctx, KeyUpdate{ID: keyID, Name: updated.Name, Restrictions: updated.Restrictions, Revision: old.Revision})
		if err == nil {
			return old, after, nil
		}
		if !errors.Is(err, store.ErrConflict) {
			return Key{}, Key{}, err
		}
		// The key changed since it was read (or was revoked, which the next read
		// tells): another update of it was stored, so every attempt lost to one that
		// made progress. Read it again, a few times.
		if attempt == updateAttempts-1 {
			return Key{}, Key{}, fmt.Errorf("%w: %w", ErrUpdateConflict, err)
		}
	}
}

func keyValue(given string) (string, error) {
	if given == "" {
		return NewKeyValue(), nil
	}
	v, ok := ParseKey(given)
	if !ok {
		return "", invalidf("a key value must be a UUID (8-4-4-4-12 hexadecimal digits)")
	}
	return v, nil
}

func newKeyID() string { return KeyIDPrefix + randomHex(10) }

// KeyIDPrefix begins the id of every key.
const KeyIDPrefix = "key_"

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
