package webhook

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// The event types, by their names on the wire. The names are stable: an endpoint
// subscribes to them ([Endpoint.Types]) and a receiver switches on them. The data of
// each is the type named after it (KeyCreated's is [KeyCreatedData]); docs/webhooks.md
// shows each body.
const (
	KeyCreated         = "key.created"
	KeyUpdated         = "key.updated"
	KeyRotated         = "key.rotated"
	KeyRevoked         = "key.revoked"
	KeyExpired         = "key.expired"
	CreditsGranted     = "credits.granted"
	CreditsLow         = "credits.low"
	CreditsExhausted   = "credits.exhausted"
	PeriodRenewed      = "period.renewed"
	PlanChanged        = "plan.changed"
	RateLimitExceeded  = "rate_limit.exceeded"
	AccountSuspended   = "account.suspended"
	AccountReactivated = "account.reactivated"
	AccountClosed      = "account.closed"
	EndpointDisabled   = "endpoint.disabled"
)

var types = [...]string{
	KeyCreated, KeyUpdated, KeyRotated, KeyRevoked, KeyExpired,
	CreditsGranted, CreditsLow, CreditsExhausted, PeriodRenewed, PlanChanged, RateLimitExceeded,
	AccountSuspended, AccountReactivated, AccountClosed,
	EndpointDisabled,
}

// Types returns the name of every event type: keys, then credits and plans, then
// accounts, then endpoints.
func Types() []string { return slices.Clone(types[:]) }

// The bounds of the strings of an event's data, in bytes: a longer string is cut, at a
// character, and ends with "…". With them, every body is well under [MaxBody].
const (
	// MaxIDField bounds ids: of accounts, keys, endpoints, plans, and the actor.
	MaxIDField = 256
	// MaxNameField bounds names (of keys).
	MaxNameField = 128
	// MaxReasonField bounds reasons.
	MaxReasonField = 512
	// MaxURLField bounds an endpoint's URL.
	MaxURLField = 2048
)

// Data is the data of an event: one of the types named after the event types
// ([KeyCreatedData], ...). Its JSON form is the body's "data".
type Data interface {
	// Type returns the name of the event type the data is of.
	Type() string
	// bounded returns the data with its strings bounded and its times in UTC.
	bounded() Data
	common() Common
}

// Common holds the members the data of every event type begins with.
type Common struct {
	// ID is the message's id: the webhook-id header's value.
	ID string `json:"id"`
	// Account is the account the event is about; left out for none.
	Account string `json:"account,omitempty"`
	// Actor is who made the change, for an event someone made: the id of the key
	// that authenticated it (an account holder's), "operator" or "operator:" and a
	// name (through the admin API), "host" (the host's own code), "session:" and a
	// session's id (a session that names no key), or "service" (the service itself: the
	// deliverer that disabled an endpoint). Left out for an event no one made.
	Actor string `json:"actor,omitempty"`
}

func (c Common) common() Common { return c }

func (c Common) bound() Common {
	return Common{ID: c.ID, Account: clip(c.Account, MaxIDField), Actor: clip(c.Actor, MaxIDField)}
}

// KeyCreatedData is the data of key.created: a key was created, a sub-key or an
// account's primary key (with the account).
type KeyCreatedData struct {
	Common
	// Key is the key's id.
	Key string `json:"key"`
	// Name is the key's name; left out for none.
	Name string `json:"name,omitempty"`
	// Primary is true for the primary key of an account that was just created.
	Primary bool `json:"primary"`
	// ExpiresAt is when the key stops working by its restrictions (for a primary
	// key, the account's); left out for never.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

// KeyUpdatedData is the data of key.updated: a key's name or restrictions changed.
type KeyUpdatedData struct {
	Common
	Key string `json:"key"`
	// Name is the key's name after the change; left out for none.
	Name string `json:"name,omitempty"`
	// PreviousName is the name before the change, when the change renamed the key.
	PreviousName string `json:"previous_name,omitempty"`
	// Changed lists what changed: "name", "restrictions", or both.
	Changed []string `json:"changed"`
	// ExpiresAt is when the key stops working by its restrictions after the change;
	// left out for never.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

// KeyRotatedData is the data of key.rotated: a key got a new value; the old one no
// longer works.
type KeyRotatedData struct {
	Common
	Key string `json:"key"`
}

// KeyRevokedData is the data of key.revoked: a key was revoked, by its holder, the
// operator, or the closure of its account.
type KeyRevokedData struct {
	Common
	Key string `json:"key"`
}

// KeyExpiredData is the data of key.expired: a key reached the expiry of its
// restrictions (a primary key, the earlier of its own and its account's: see
// auth.KeyExpiries) and no longer works. It is sent once per key and expiry, by the
// [Dispatcher]'s sweep of the keys, whether or not the key is used; a key revoked at
// or before its expiry gets none. The message's timestamp is the expiry.
type KeyExpiredData struct {
	Common
	Key  string `json:"key"`
	Name string `json:"name,omitempty"`
	// ExpiredAt is the expiry the key reached, to the microsecond.
	ExpiredAt time.Time `json:"expired_at"`
}

// CreditsGrantedData is the data of credits.granted: credits were granted to the
// account (bought or given); they carry over from period to period until spent or
// until ExpiresAt.
type CreditsGrantedData struct {
	Common
	// Credits is the number of credits granted, more than 0.
	Credits int64 `json:"credits"`
	// Reason is the reason given for the grant.
	Reason string `json:"reason,omitempty"`
	// ExpiresAt is when what is left of the grant lapses; left out for never.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

// CreditsLowData is the data of credits.low: the credits used in the period reached a
// threshold of the plan's allowance, 80, 90 or 100 percent; sent once per period and
// threshold.
type CreditsLowData struct {
	Common
	// Threshold is the percentage of the allowance reached: 80, 90 or 100.
	Threshold int `json:"threshold"`
	// Allowance is the plan's allowance for the period, Used what the period's calls
	// used, and Remaining what the account has left (the allowance's rest and the
	// grants).
	Allowance int64 `json:"allowance"`
	Used      int64 `json:"used"`
	Remaining int64 `json:"remaining"`
	// PeriodEnd is when the period ends and the allowance renews.
	PeriodEnd time.Time `json:"period_end"`
}

// CreditsExhaustedData is the data of credits.exhausted: a call was refused because
// the account's credits do not cover it (credits_exhausted); sent once per period.
type CreditsExhaustedData struct {
	Common
	// Remaining is what the account has left.
	Remaining int64 `json:"remaining"`
	// PeriodEnd is when the period ends and the allowance renews.
	PeriodEnd time.Time `json:"period_end"`
}

// PeriodRenewedData is the data of period.renewed: a new billing period began and the
// allowance renewed. It is sent once per account and period (not for the account's
// first period, nor for a closed account): by the [Dispatcher]'s sweep of the
// accounts, whether or not the account makes calls, or, without the sweep, at the
// account's first call of the period (see [Dispatcher]). The message's timestamp is
// the period's start.
type PeriodRenewedData struct {
	Common
	// Plan is the plan in force in the new period.
	Plan string `json:"plan"`
	// Allowance is the new period's allowance, Remaining what the account had at the
	// renewal (the allowance and the grants that carried over): what its balance
	// holds when the event is made plus what the period's calls used by then.
	Allowance int64 `json:"allowance"`
	Remaining int64 `json:"remaining"`
	// PeriodStart and PeriodEnd bound the new period.
	PeriodStart time.Time `json:"period_start"`
	PeriodEnd   time.Time `json:"period_end"`
}

// PlanChangedData is the data of plan.changed: the account's plan changed, now or
// from its next renewal, or a change that waited for the renewal was canceled.
type PlanChangedData struct {
	Common
	// Plan is the new plan, PreviousPlan the one in force before. They are the same
	// when a pending change was canceled (Reason says which).
	Plan         string `json:"plan"`
	PreviousPlan string `json:"previous_plan"`
	// EffectiveAt is when the new plan takes effect: the change's moment, or the
	// renewal it waits for.
	EffectiveAt time.Time `json:"effective_at"`
	// Scheduled is true for a change that waits for the renewal at EffectiveAt.
	Scheduled bool `json:"scheduled"`
	// Reason says which pending change a cancellation dropped; left out otherwise.
	Reason string `json:"reason,omitempty"`
}

// RateLimitExceededData is the data of rate_limit.exceeded: calls of the account were
// refused by its plan's rate limit; sent at most once per cooldown.
type RateLimitExceededData struct {
	Common
	// Key is the key whose call was refused first.
	Key string `json:"key,omitempty"`
	// Plan is the account's plan, RatePerMinute its rate limit.
	Plan          string `json:"plan"`
	RatePerMinute int    `json:"rate_per_minute"`
}

// AccountSuspendedData is the data of account.suspended: the operator suspended the
// account; its calls are refused until it is reactivated.
type AccountSuspendedData struct {
	Common
	// Reason is the reason the operator gave.
	Reason string `json:"reason,omitempty"`
}

// AccountReactivatedData is the data of account.reactivated: a suspended account is
// active again.
type AccountReactivatedData struct {
	Common
	Reason string `json:"reason,omitempty"`
}

// AccountClosedData is the data of account.closed: the account was closed; its keys
// are revoked (each revocation is a key.revoked of its own).
type AccountClosedData struct {
	Common
	Reason string `json:"reason,omitempty"`
}

// EndpointDisabledData is the data of endpoint.disabled: an endpoint was disabled and
// is sent nothing more until it is enabled again. An account's endpoint's is sent to
// the account's other endpoints and to the operator's (which receive every account's
// events), with the account, so that the operator may act on it; an operator's
// endpoint's is sent to the operator's other endpoints only, without an account. It
// tells of that one endpoint only: nothing of another account.
type EndpointDisabledData struct {
	Common
	// Endpoint is the endpoint's id, URL its URL.
	Endpoint string `json:"endpoint"`
	URL      string `json:"url"`
	// Reason says why: its owner disabled it, or its deliveries failed for the whole
	// retry schedule.
	Reason string `json:"reason"`
	// Cause says what disabled it: [DisabledByAccount] ("account": the account's
	// holder), [DisabledByOperator] ("operator": the operator, who alone enables it
	// again), "gone" (it answered 410 Gone: [DisabledGone]) or "failing" (its
	// deliveries failed for the whole retry schedule: [DisabledFailing]). Left out
	// when the event that made it did not say.
	Cause string `json:"cause,omitempty"`
}

func (KeyCreatedData) Type() string         { return KeyCreated }
func (KeyUpdatedData) Type() string         { return KeyUpdated }
func (KeyRotatedData) Type() string         { return KeyRotated }
func (KeyRevokedData) Type() string         { return KeyRevoked }
func (KeyExpiredData) Type() string         { return KeyExpired }
func (CreditsGrantedData) Type() string     { return CreditsGranted }
func (CreditsLowData) Type() string         { return CreditsLow }
func (CreditsExhaustedData) Type() string   { return CreditsExhausted }
func (PeriodRenewedData) Type() string      { return PeriodRenewed }
func (PlanChangedData) Type() string        { return PlanChanged }
func (RateLimitExceededData) Type() string  { return RateLimitExceeded }
func (AccountSuspendedData) Type() string   { return AccountSuspended }
func (AccountReactivatedData) Type() string { return AccountReactivated }
func (AccountClosedData) Type() string      { return AccountClosed }
func (EndpointDisabledData) Type() string   { return EndpointDisabled }

func (d KeyCreatedData) bounded() Data {
	d.Common, d.Key, d.Name, d.ExpiresAt = d.Common.bound(), clip(d.Key, MaxIDField), clip(d.Name, MaxNameField), utc(d.ExpiresAt)
	return d
}

func (d KeyUpdatedData) bounded() Data {
	d.Common, d.Key, d.ExpiresAt = d.Common.bound(), clip(d.Key, MaxIDField), utc(d.ExpiresAt)
	d.Name, d.PreviousName = clip(d.Name, MaxNameField), clip(d.PreviousName, MaxNameField)
	var changed []string // only the two names it may hold, once each
	for _, c := range []string{"name", "restrictions"} {
		if slices.Contains(d.Changed, c) {
			changed = append(changed, c)
		}
	}
	d.Changed = changed
	if d.Changed == nil {
		d.Changed = []string{}
	}
	return d
}

func (d KeyRotatedData) bounded() Data {
	d.Common, d.Key = d.Common.bound(), clip(d.Key, MaxIDField)
	return d
}

func (d KeyRevokedData) bounded() Data {
	d.Common, d.Key = d.Common.bound(), clip(d.Key, MaxIDField)
	return d
}

func (d KeyExpiredData) bounded() Data {
	d.Common, d.Key, d.Name, d.ExpiredAt = d.Common.bound(), clip(d.Key, MaxIDField), clip(d.Name, MaxNameField), utc(d.ExpiredAt)
	return d
}

func (d CreditsGrantedData) bounded() Data {
	d.Common, d.Reason, d.ExpiresAt = d.Common.bound(), clip(d.Reason, MaxReasonField), utc(d.ExpiresAt)
	return d
}

func (d CreditsLowData) bounded() Data {
	d.Common, d.PeriodEnd = d.Common.bound(), utc(d.PeriodEnd)
	return d
}

func (d CreditsExhaustedData) bounded() Data {
	d.Common, d.PeriodEnd = d.Common.bound(), utc(d.PeriodEnd)
	return d
}

func (d PeriodRenewedData) bounded() Data {
	d.Common, d.Plan = d.Common.bound(), clip(d.Plan, MaxIDField)
	d.PeriodStart, d.PeriodEnd = utc(d.PeriodStart), utc(d.PeriodEnd)
	return d
}

func (d PlanChangedData) bounded() Data {
	d.Common, d.Plan, d.PreviousPlan = d.Common.bound(), clip(d.Plan, MaxIDField), clip(d.PreviousPlan, MaxIDField)
	d.EffectiveAt, d.Reason = utc(d.EffectiveAt), clip(d.Reason, MaxReasonField)
	return d
}

func (d RateLimitExceededData) bounded() Data {
	d.Common, d.Key, d.Plan = d.Common.bound(), clip(d.Key, MaxIDField), clip(d.Plan, MaxIDField)
	return d
}

func (d AccountSuspendedData) bounded() Data {
	d.Common, d.Reason = d.Common.bound(), clip(d.Reason, MaxReasonField)
	return d
}

func (d AccountReactivatedData) bounded() Data {
	d.Common, d.Reason = d.Common.bound(), clip(d.Reason, MaxReasonField)
	return d
}

func (d AccountClosedData) bounded() Data {
	d.Common, d.Reason = d.Common.bound(), clip(d.Reason, MaxReasonField)
	return d
}

func (d EndpointDisabledData) bounded() Data {
	d.Common, d.Endpoint, d.Cause = d.Common.bound(), clip(d.Endpoint, MaxIDField), clip(d.Cause, MaxIDField)
	d.URL, d.Reason = clip(d.URL, MaxURLField), clip(d.Reason, MaxReasonField)
	return d
}

// NewMessage returns the message of an event that happened at at, with data d: its
// body is {"type": d.Type(), "timestamp": at in RFC 3339, "data": d}, with d's strings
// bounded (see [MaxIDField]) and its times in UTC; its ID and Account are d's, and its
// Keep is keep (see [Message.Keep]). d's ID must be a message id ([NewID],
// [DerivedID]); it fails otherwise.
func NewMessage(at time.Time, d Data, keep time.Time) (Message, error) {
	// The message is routed by the whole account id; the data's copy is bounded.
	account := d.common().Account
	d = d.bounded()
	c := d.common()
	if !IsID(c.ID) {
		return Message{}, fmt.Errorf("webhook: the data's id %q is not a message id: make one with NewID or DerivedID", clip(c.ID, MaxIDField))
	}
	at = at.UTC()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(struct {
		Type      string    `json:"type"`
		Timestamp time.Time `json:"timestamp"`
		Data      Data      `json:"data"`
	}{d.Type(), at, d})
	if err != nil {
		return Message{}, fmt.Errorf("webhook: encoding the body of %s: %w", d.Type(), err)
	}
	body := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if len(body) > MaxBody {
		// The bounds of the strings keep every body under MaxBody: this does not happen.
		return Message{}, fmt.Errorf("webhook: the body of %s is %d bytes, more than %d", d.Type(), len(body), MaxBody)
	}
	return Message{ID: c.ID, Type: d.Type(), Account: account, At: at, Body: body, Keep: keep}, nil
}

// idPrefix begins every message id.
const idPrefix = "msg_"

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewID returns a random message id: "msg_" and 26 characters of lower-case base32
// (128 random bits).
func NewID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return idPrefix + idEncoding.EncodeToString(b[:])
}

// DerivedID returns the message id of an event that must be sent once for its cause:
// the same for the same type and cause, whichever instance makes it, and unlike any
// other ("msg_" and 26 characters of lower-case base32 of a SHA-256 of them). A store
// enqueues a message of an id it remembers once (see [Message.Keep]). A threshold
// reached once per period is named by its account, period and threshold:
//
//	DerivedID(CreditsLow, account, period.Start.UTC().Format(time.RFC3339), "80")
func DerivedID(typ string, cause ...string) string {
	h := sha256.New()
	for _, s := range append([]string{typ}, cause...) {
		h.Write(binary.AppendUvarint(nil, uint64(len(s))))
		h.Write([]byte(s))
	}
	return idPrefix + idEncoding.EncodeToString(h.Sum(nil)[:16])
}

// IsID reports whether s is a message id: "msg_" and 26 characters of lower-case
// base32.
func IsID(s string) bool {
	rest, ok := strings.CutPrefix(s, idPrefix)
	if !ok || len(rest) != 26 {
		return false
	}
	b, err := idEncoding.DecodeString(rest)
	return err == nil && len(b) == 16 && idEncoding.EncodeToString(b) == rest
}

// clip returns s as valid UTF-8 without control characters (each made a space, each
// invalid byte U+FFFD), cut to at most max bytes at a character and then ending with
// "…".
func clip(s string, max int) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) {
			clean = false
			break
		}
	}
	if !clean {
		s = strings.Map(func(r rune) rune {
			if unicode.IsControl(r) {
				return ' '
			}
			return r
		}, strings.ToValidUTF8(s, "\uFFFD"))
	}
	if len(s) <= max {
		return s
	}
	const ellipsis = "…"
	cut := max - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}

// utc returns t in UTC, without its monotonic reading; the zero time stays zero.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Round(0)
}
