package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/google/uuid"
)

// A Hash is the SHA-256 digest of a key's canonical (lowercase) value. It is the only
// form in which keys are stored: the value itself is shown once, when the key is created
// or rotated, and never kept.
type Hash [sha256.Size]byte

// HashKey returns the hash of a key value. The value is canonicalized first, so the
// upper- and lowercase spellings of one UUID are the same key. The value should have
// passed [ParseKey].
func HashKey(value string) Hash {
	var buf [36]byte
	if len(value) == len(buf) {
		for i := 0; i < len(buf); i++ {
			c := value[i]
			if 'A' <= c && c <= 'F' {
				c += 'a' - 'A'
			}
			buf[i] = c
		}
		return sha256.Sum256(buf[:])
	}
	return sha256.Sum256([]byte(value))
}

// String returns the hash in hexadecimal.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// ParseKey reports whether s has the shape of an API key, a UUID written as 8-4-4-4-12
// hexadecimal digits, and returns it in lowercase. It is the edge check: a value of any
// other shape (a truncated key, a placeholder, the text "undefined") is refused before
// any lookup.
func ParseKey(s string) (string, bool) {
	if len(s) != 36 {
		return "", false
	}
	if s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return "", false
	}
	var kinds byte // the union of the kinds of the hex digits
	for _, span := range [...]string{s[:8], s[9:13], s[14:18], s[19:23], s[24:]} {
		for i := 0; i < len(span); i++ {
			k := hexKind[span[i]]
			if k == 0 {
				return "", false
			}
			kinds |= k
		}
	}
	if kinds&upperHex == 0 {
		return s, true
	}
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'F' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b), true
}

// The kinds of the bytes of a key's hex digits, in hexKind; 0 is not a hex digit.
const (
	lowerHex = 1 << iota // 0-9, a-f
	upperHex             // A-F
)

// hexKind is the kind of each byte (a table, since every call parses its key).
var hexKind = func() (t [256]byte) {
	for c := '0'; c <= '9'; c++ {
		t[c] = lowerHex
	}
	for c := 'a'; c <= 'f'; c++ {
		t[c] = lowerHex
		t[c-'a'+'A'] = upperHex
	}
	return t
}()

// NewKeyValue returns a new random key value: a version 4 UUID from crypto/rand.
func NewKeyValue() string { return uuid.NewString() }

// An Account is the party on whose behalf calls are made. Its plan fixes the credits,
// rate limit and concurrency shared by all its keys.
type Account struct {
	// ID identifies the account: 1 to 64 letters, digits, underscores and hyphens.
	ID string
	// Plan names the account's billing plan.
	Plan string
	// Restrictions apply to every key of the account. Sub-keys can only narrow them.
	Restrictions Restrictions
	// CreatedAt is when the account was created.
	CreatedAt time.Time
}

// KeyIDPrefix begins the id of every key.
const KeyIDPrefix = "key_"

// A Key is the stored record of an API key: everything but its value.
type Key struct {
	// ID identifies the key; it does not change when the key is rotated.
	ID string
	// AccountID is the account the key belongs to.
	AccountID string
	// Name is a label chosen by the account ("primary", "ci", "staging").
	Name string
	// Primary marks the key the account was created with. An account has one.
	Primary bool
	// Hash is the hash of the key's current value (see [HashKey]).
	Hash Hash
	// Restrictions narrow what the key may do, within its account's restrictions.
	Restrictions Restrictions
	// CreatedAt is when the key was created; RotatedAt when its value last changed
	// (zero if never); RevokedAt when it was revoked (zero while it is live).
	CreatedAt, RotatedAt, RevokedAt time.Time
	// Revision counts the changes made to the key's record since it was created: every
	// rotation, revocation and update ([KeyStore.UpdateKey]) increases it. A key check
	// (billing/driver's KeyCheck) carries the revision its record was read at, so that a record cached
	// before a change (a narrowing of its restrictions, say) is noticed on the very next
	// call, on any instance. Stores set it; it is ignored on creation (a new key has
	// revision 0).
	Revision int64
}

// Revoked reports whether the key has been revoked.
func (k Key) Revoked() bool { return !k.RevokedAt.IsZero() }
