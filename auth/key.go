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
	// State is the account's state: [AccountActive], [AccountSuspended] or
	// [AccountClosed]. It is AccountActive on creation; stores answer the empty state of
	// a record written before states existed as AccountActive. StateChangedAt is when
	// it last changed (zero if never).
	State          AccountState
	StateChangedAt time.Time
	// BillingAnchor is the instant the account's credit periods are counted from
	// (billing.PeriodAt): each period begins on the anchor's day and time of day,
	// monthly or yearly as its plan renews. The zero anchor counts calendar months in
	// UTC, as accounts created before anchors existed do.
	BillingAnchor time.Time
	// PendingPlan, when set, is the plan the account moves to at PendingPlanAt (a
	// renewal): until then Plan applies, from then on PendingPlan does, whether or not
	// the record has been rewritten since (see [Account.PlanAt]).
	PendingPlan   string
	PendingPlanAt time.Time
	// Revision counts the changes made to the account's record since it was created
	// ([KeyStore.UpdateAccount] increases it). A key check (billing/driver's KeyCheck)
	// carries the revision its record was read at, so that a suspension, a closure or
	// a plan change is noticed on the very next call on any instance, key cache or not.
	// Stores set it; it is ignored on creation (a new account has revision 0).
	Revision int64
}

// PlanAt returns the plan that applies to the account at t: PendingPlan from
// PendingPlanAt on, else Plan.
func (a *Account) PlanAt(t time.Time) string {
	if a.PendingPlan != "" && !t.Before(a.PendingPlanAt) {
		return a.PendingPlan
	}
	return a.Plan
}

// An AccountState is the state of an account.
type AccountState string

// The states of an account.
const (
	// AccountActive: the account's keys call as their plan allows.
	AccountActive AccountState = "active"
	// AccountSuspended: every call of the account is refused (403, code
	// account_suspended) until an operator reactivates it; its keys, balance and
	// history are kept, and its holder may still sign in and read them.
	AccountSuspended AccountState = "suspended"
	// AccountClosed: the account's keys are revoked and answer as revoked keys do; its
	// records are kept for a retention, then may be deleted. A closed account is never
	// reopened.
	AccountClosed AccountState = "closed"
)

// Valid reports whether s is one of the states.
func (s AccountState) Valid() bool {
	return s == AccountActive || s == AccountSuspended || s == AccountClosed
}

// An AccountUpdate replaces the mutable fields of an account's record, for
// [KeyStore.UpdateAccount]: the caller reads the account, changes what it decides to
// change, and writes every field back with the revision it read.
type AccountUpdate struct {
	// ID is the account's id; Revision the revision of the record the change was
	// decided on.
	ID       string
	Revision int64
	// The fields that replace the account's.
	Plan           string
	Restrictions   Restrictions
	State          AccountState
	StateChangedAt time.Time
	BillingAnchor  time.Time
	PendingPlan    string
	PendingPlanAt  time.Time
}

// Update returns the update that writes a back as it is, to be changed and passed to
// [KeyStore.UpdateAccount].
func (a *Account) Update() AccountUpdate {
	return AccountUpdate{ID: a.ID, Revision: a.Revision, Plan: a.Plan, Restrictions: a.Restrictions,
		State: a.State, StateChangedAt: a.StateChangedAt, BillingAnchor: a.BillingAnchor,
		PendingPlan: a.PendingPlan, PendingPlanAt: a.PendingPlanAt}
}

// An AccountQuery selects a page of accounts for [KeyStore.Accounts], in the order of
// their ids (byte-wise). Every filter set must hold; a zero filter selects every account.
type AccountQuery struct {
	// Plan, if set, selects the accounts whose Plan field is this plan.
	Plan string
	// State, if set, selects the accounts in this state.
	State AccountState
	// CreatedFrom and CreatedBefore, if set, select the accounts created at or after
	// CreatedFrom and before CreatedBefore.
	CreatedFrom, CreatedBefore time.Time
	// IDPrefix, if set, selects the accounts whose id begins with it.
	IDPrefix string
	// After continues a listing: the [AccountPage.Next] of the page before. Empty
	// starts with the first id.
	After string
	// Limit is the most accounts a page holds: 0 means [DefaultAccountPage]; less than 0
	// or more than [MaxAccountPage] is invalid.
	Limit int
}

// Bounds of [AccountQuery.Limit].
const (
	DefaultAccountPage = 50
	MaxAccountPage     = 200
)

// An AccountPage is one page of accounts, in the order of their ids.
type AccountPage struct {
	Accounts []Account
	// Next is the cursor of the next page, for [AccountQuery.After]; empty when no
	// account follows. A page may hold fewer than the limit, even none, while Next is
	// set: a store bounds the records one page examines, and a listing goes on until
	// Next is empty.
	Next string
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
