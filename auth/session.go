package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sessions issues and verifies session tokens, the x-jwt credential: JWTs signed with
// HS256 whose claims are sub (the account id), iat and exp. A session acts for the whole
// account, within the account's restrictions; its account is looked up for every call
// (with a [KeyCache], checked as a cached key is), so a deleted account's sessions stop
// working at once.
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

type claims struct {
	Sub string `json:"sub"`
	Iat int64  `json:"iat"`
	Exp int64  `json:"exp"`
}

// clockSkew is how far in the future an iat may be before the token is refused.
const clockSkew = time.Minute

// Issue returns a token for the account, valid from now for ttl.
func (s *Sessions) Issue(accountID string, now time.Time, ttl time.Duration) (string, error) {
	if accountID == "" || ttl <= 0 {
		return "", errors.New("auth: a session needs an account and a positive lifetime")
	}
	payload, err := json.Marshal(claims{Sub: accountID, Iat: now.Unix(), Exp: now.Add(ttl).Unix()})
	if err != nil {
		return "", err
	}
	signing := jwtHeader + "." + base64.RawURLEncoding.EncodeToString(payload)
	return signing + "." + base64.RawURLEncoding.EncodeToString(s.sign(signing)), nil
}

func (s *Sessions) sign(signing string) []byte {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte(signing))
	return m.Sum(nil)
}

// Verify checks a token's signature and lifetime at now and returns the account id it
// names. Every failure wraps [ErrInvalidSession]. Only HS256 is accepted, whatever the
// token's header claims.
func (s *Sessions) Verify(token string, now time.Time) (string, error) {
	if len(token) > maxSessionToken {
		return "", invalidSession("it is too long")
	}
	head, rest, ok1 := strings.Cut(token, ".")
	body, sig, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 {
		return "", invalidSession("it is not a JWT")
	}
	var h struct {
		Alg string `json:"alg"`
	}
	if err := decodeSegment(head, &h); err != nil || h.Alg != "HS256" {
		return "", invalidSession("it is not signed with HS256")
	}
	// Compare the encoded form: decoding would accept other spellings of the same bytes
	// (nonzero padding bits, embedded CR/LF), making tokens malleable.
	want := base64.RawURLEncoding.EncodeToString(s.sign(token[:len(head)+1+len(body)]))
	if !hmac.Equal([]byte(sig), []byte(want)) {
		return "", invalidSession("its signature does not match")
	}
	var c claims
	if err := decodeSegment(body, &c); err != nil {
		return "", invalidSession("its claims cannot be read")
	}
	switch {
	case c.Sub == "":
		return "", invalidSession("it names no account")
	case c.Exp == 0:
		return "", invalidSession("it has no expiry")
	case now.Unix() >= c.Exp:
		return "", invalidSession("it has expired; sign in again")
	case c.Iat > now.Add(clockSkew).Unix():
		return "", invalidSession("it was issued in the future")
	}
	return c.Sub, nil
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
