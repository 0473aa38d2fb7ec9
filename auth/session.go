package auth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sessions issues and verifies session tokens, the x-jwt credential: JWTs signed with
// HS256. Their claims are sub (the account id), sid (the session's id), iat and exp,
// and, for a session that acts as a key, kid (the key's id) and kbd (a binding to the
// key's current value, see [SessionClaims.KeyBound]).
//
// A session without a key acts for the whole account, within the account's
// restrictions; one with a key acts as that key, within the key's restrictions. Its
// account, and its key if it has one, are looked up for every call (with a key cache,
// checked as a cached key is), so a deleted account's sessions stop working at once, and
// so do the sessions of a revoked key, or of a rotated key they are bound to. A session
// that was ended is refused on every instance that shares the [SessionStore] that
// recorded its end.
//
// A Sessions is safe for concurrent use.
type Sessions struct {
	secret []byte
}

// MinSessionSecret is the shortest secret [NewSessions] accepts, in bytes.
const MinSessionSecret = 32

// NewSessions returns a Sessions that signs with secret, which must be at least
// [MinSessionSecret] bytes of high-entropy data.
func NewSessions(secret []byte) (*Sessions, error) {
	if len(secret) < MinSessionSecret {
		return nil, fmt.Errorf("auth: a session secret needs at least %d bytes, got %d", MinSessionSecret, len(secret))
	}
	return &Sessions{secret: append([]byte(nil), secret...)}, nil
}

var jwtHeader = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))

// SessionClaims is what a session token says.
type SessionClaims struct {
	// ID identifies the session: "ses_" and 32 hexadecimal digits (128 random bits).
	// Tokens issued before sessions had ids have none, and cannot be ended.
	ID string
	// Account is the id of the account the session acts for (the sub claim).
	Account string
	// KeyID is the id of the key the session acts as; empty for a session that acts
	// for the whole account.
	KeyID string
	// KeyBound reports that the session is bound to the value its key had when the
	// session started: rotating the key ends the session. Sessions started with a key
	// are bound; those started through a login act as the account's primary key by its
	// id, and survive its rotation.
	KeyBound bool
	// IssuedAt and Expires are the token's iat and exp, in whole seconds.
	IssuedAt, Expires time.Time

	binding string // kbd: see Sessions.binding
}

// wireClaims is the JSON form of the claims.
type wireClaims struct {
	Sub string `json:"sub"`
	Sid string `json:"sid,omitempty"`
	Kid string `json:"kid,omitempty"`
	Kbd string `json:"kbd,omitempty"`
	Iat int64  `json:"iat"`
	Exp int64  `json:"exp"`
}

// clockSkew is how far in the future an iat may be before the token is refused.
const clockSkew = time.Minute

// NewSessionID returns a new random session id: "ses_" and 128 random bits in
// hexadecimal.
func NewSessionID() string {
	var b [16]byte
	rand.Read(b[:])
	return "ses_" + hex.EncodeToString(b[:])
}

// validSessionID reports whether id has the form of [NewSessionID].
func validSessionID(id string) bool {
	rest, ok := strings.CutPrefix(id, "ses_")
	if !ok || len(rest) != 32 {
		return false
	}
	_, err := hex.DecodeString(rest)
	return err == nil && strings.ToLower(rest) == rest
}

// Issue returns a token for a session that acts for the whole account, valid from now
// for ttl. The token has a session id of its own, so it can be ended.
func (s *Sessions) Issue(accountID string, now time.Time, ttl time.Duration) (string, error) {
	if ttl <= 0 {
		return "", errors.New("auth: a session needs an account and a positive lifetime")
	}
	tok, _, err := s.IssueClaims(SessionClaims{Account: accountID, IssuedAt: now, Expires: now.Add(ttl)}, nil)
	return tok, err
}

// IssueClaims returns a token that says c, and c as the token says it (with a new ID
// if c had none, and its times truncated to seconds). keyHash, for a session with a
// key, is the hash of the key's current value: the session is then bound to it
// ([SessionClaims.KeyBound]); nil issues a session that acts as the key by its id
// alone. It needs an account, a key for a binding, and an expiry after IssuedAt.
func (s *Sessions) IssueClaims(c SessionClaims, keyHash *Hash) (string, SessionClaims, error) {
	c.IssuedAt, c.Expires = c.IssuedAt.Truncate(time.Second), c.Expires.Truncate(time.Second)
	switch {
	case c.Account == "":
		return "", SessionClaims{}, errors.New("auth: a session needs an account")
	case !c.Expires.After(c.IssuedAt):
		return "", SessionClaims{}, errors.New("auth: a session needs a positive lifetime")
	case keyHash != nil && c.KeyID == "":
		return "", SessionClaims{}, errors.New("auth: a session bound to a key needs the key's id")
	case c.ID != "" && !validSessionID(c.ID):
		return "", SessionClaims{}, fmt.Errorf("auth: %q is not a session id (see NewSessionID)", c.ID)
	}
	if c.ID == "" {
		c.ID = NewSessionID()
	}
	c.KeyBound, c.binding = keyHash != nil, ""
	if keyHash != nil {
		c.binding = s.binding(*keyHash)
	}
	payload, err := json.Marshal(wireClaims{Sub: c.Account, Sid: c.ID, Kid: c.KeyID, Kbd: c.binding,
		Iat: c.IssuedAt.Unix(), Exp: c.Expires.Unix()})
	if err != nil {
		return "", SessionClaims{}, err
	}
	signing := jwtHeader + "." + base64.RawURLEncoding.EncodeToString(payload)
	return signing + "." + base64.RawURLEncoding.EncodeToString(s.mac("jwt", signing)), c, nil
}

// mac returns the HMAC-SHA256, under the secret, of msg in the given domain, so that
// the signature of a token, a key binding and a CSRF token can never stand for each
// other.
func (s *Sessions) mac(domain, msg string) []byte {
	m := hmac.New(sha256.New, s.secret)
	if domain != "jwt" { // tokens signed before domains existed stay valid
		m.Write([]byte("tollgate " + domain + "\x00"))
	}
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// binding returns the kbd claim for a key whose value has hash h: 128 bits of an HMAC
// of the hash. It tells whether the key still has that value, and says nothing about
// the value to whoever reads the token.
func (s *Sessions) binding(h Hash) string {
	return base64.RawURLEncoding.EncodeToString(s.mac("key binding", string(h[:]))[:16])
}

// BoundTo reports whether the key whose current value has hash h is the one a bound
// session started with. It reports true for a session that is not bound.
func (s *Sessions) BoundTo(c SessionClaims, h Hash) bool {
	if !c.KeyBound {
		return true
	}
	return hmac.Equal([]byte(c.binding), []byte(s.binding(h)))
}

// CSRFToken returns the CSRF token of the session with the given id: an HMAC of the
// id under the secret, which a page reads when the session starts and sends back with
// every state-changing request it makes with the session's cookie. Only the holder of
// the secret can compute it, and it is worth nothing for another session.
func (s *Sessions) CSRFToken(sessionID string) string {
	return base64.RawURLEncoding.EncodeToString(s.mac("csrf", sessionID))
}

// CheckCSRF reports whether token is the CSRF token of the session with the given id,
// in constant time.
func (s *Sessions) CheckCSRF(sessionID, token string) bool {
	return sessionID != "" && hmac.Equal([]byte(token), []byte(s.CSRFToken(sessionID)))
}

// Verify checks a token's signature and lifetime at now and returns the account id it
// names. Every failure wraps [ErrInvalidSession]. Only HS256 is accepted, whatever the
// token's header claims. It does not look at stores: the service's authentication also
// refuses an ended session and a changed key.
func (s *Sessions) Verify(token string, now time.Time) (string, error) {
	c, err := s.Parse(token, now)
	return c.Account, err
}

// Parse checks a token's signature and lifetime at now, as [Sessions.Verify] does, and
// returns its claims.
func (s *Sessions) Parse(token string, now time.Time) (SessionClaims, error) {
	if len(token) > maxSessionToken {
		return SessionClaims{}, invalidSession("it is too long")
	}
	head, rest, ok1 := strings.Cut(token, ".")
	body, sig, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 {
		return SessionClaims{}, invalidSession("it is not a JWT")
	}
	var h struct {
		Alg string `json:"alg"`
	}
	if err := decodeSegment(head, &h); err != nil || h.Alg != "HS256" {
		return SessionClaims{}, invalidSession("it is not signed with HS256")
	}
	// Compare the encoded form: decoding would accept other spellings of the same bytes
	// (nonzero padding bits, embedded CR/LF), making tokens malleable.
	want := base64.RawURLEncoding.EncodeToString(s.mac("jwt", token[:len(head)+1+len(body)]))
	if !hmac.Equal([]byte(sig), []byte(want)) {
		return SessionClaims{}, invalidSession("its signature does not match")
	}
	var c wireClaims
	if err := decodeSegment(body, &c); err != nil {
		return SessionClaims{}, invalidSession("its claims cannot be read")
	}
	switch {
	case c.Sub == "":
		return SessionClaims{}, invalidSession("it names no account")
	case c.Exp == 0:
		return SessionClaims{}, invalidSession("it has no expiry")
	case now.Unix() >= c.Exp:
		return SessionClaims{}, ErrSessionExpired
	case c.Iat > now.Add(clockSkew).Unix():
		return SessionClaims{}, invalidSession("it was issued in the future")
	case c.Sid != "" && !validSessionID(c.Sid):
		return SessionClaims{}, invalidSession("its session id is malformed")
	case c.Kbd != "" && c.Kid == "":
		return SessionClaims{}, invalidSession("it is bound to no key")
	}
	return SessionClaims{ID: c.Sid, Account: c.Sub, KeyID: c.Kid, KeyBound: c.Kbd != "", binding: c.Kbd,
		IssuedAt: time.Unix(c.Iat, 0).UTC(), Expires: time.Unix(c.Exp, 0).UTC()}, nil
}

func decodeSegment(seg string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func invalidSession(why string) error {
	return fmt.Errorf("%w: %s", ErrInvalidSession, why)
}

// A SessionStore remembers the sessions that were ended before their expiry (signed
// out), so that every instance sharing it refuses their tokens. It holds session ids
// only, each until the expiry of its token, after which the token is refused anyway.
//
// Implementations are safe for concurrent use and never read the clock: the current
// time is passed in. Errors that report a value the store cannot hold wrap
// store.ErrInvalid; any other error means the store is unavailable, and a session
// cannot be verified then (fail closed). Implementations are in store/memory,
// store/postgres and store/redis; every implementation runs storetest.TestSessionStore.
type SessionStore interface {
	// EndSession records, at now, that the session with the given id is ended until
	// expires. Ending an ended session is not an error. A session whose expiry is not
	// after now needs no record, and gets none. The store may forget the records whose
	// expiry is not after now; it keeps every other.
	EndSession(ctx context.Context, id string, expires, now time.Time) error
	// SessionEnded reports whether the session with the given id was ended (and its
	// record not yet forgotten after its expiry).
	SessionEnded(ctx context.Context, id string) (bool, error)
}
