// Package audit defines the audit log of Tollgate: one [Entry] for every change made to
// an account, its keys, credits, sessions or webhook endpoints, saying who made it,
// what it was, when, and from which address, and the [Store] that keeps the entries.
//
// An entry never holds a key value nor a webhook endpoint's secret: a key is named by
// its id, and restrictions are recorded in their plain JSON form
// (auth.RestrictionSpec), which holds no secret.
//
// Stores never read the clock: an entry carries the instant it records, and retention
// ([Store.Prune]) is given the instant before which entries go. Implementations are in
// store/memory and store/postgres; every implementation runs storetest.TestAuditStore.
package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/store"
)

// Action names a kind of change. The actions Tollgate records are the constants below;
// a host may record actions of its own, named the same way (noun.verb).
type Action string

// The actions Tollgate records.
const (
	// AccountCreate: an account was created, with its primary key (Target).
	AccountCreate Action = "account.create"
	// KeyCreate: a key (Target) was created, with the restrictions in After.
	KeyCreate Action = "key.create"
	// KeyRotate: a key (Target) was given a new value; the old one no longer works.
	KeyRotate Action = "key.rotate"
	// KeyRevoke: a key (Target) was revoked.
	KeyRevoke Action = "key.revoke"
	// KeyUpdate: a key's (Target) name or restrictions were changed: the restrictions
	// before and after the change in Before and After, a change of name in Reason
	// ("name: <old> -> <new>").
	KeyUpdate Action = "key.update"
	// CreditsAdjust: the account's credits were changed by Credits, for Reason.
	CreditsAdjust Action = "credits.adjust"
	// PlanChange: the account's plan was changed: Before is {"plan": the plan before},
	// After {"plan": the new plan, "effective_at": when it takes effect (the change's
	// instant, or the renewal it waits for)}. Reason says when a change waiting for the
	// renewal was dropped (a change back to the plan in force).
	PlanChange Action = "plan.change"
	// SessionStart: a session (Target, its id) was started. Actor is the key it acts
	// as; Reason is "login" for a session started through the host's login, empty for
	// one started with the key itself.
	SessionStart Action = "session.start"
	// SessionEnd: a session (Target, its id) was ended (signed out) before its expiry.
	// Actor is the key it acted as.
	SessionEnd Action = "session.end"
	// AccountSuspend: the account was suspended, for Reason: its calls are refused
	// until it is reactivated.
	AccountSuspend Action = "account.suspend"
	// AccountReactivate: the suspended account was made active again, for Reason if
	// one was given.
	AccountReactivate Action = "account.reactivate"
	// AccountClose: the account was closed, for Reason. The revocations of its keys
	// that the closure made are recorded as [KeyRevoke] entries of their own.
	AccountClose Action = "account.close"
	// AccountDelete: the closed account and its keys were deleted, once the closure's
	// retention had passed. The account's entries, this one included, are kept as long
	// as the log's own retention keeps them.
	AccountDelete Action = "account.delete"
	// EndpointCreate: a webhook endpoint (Target) was created, with its settings in
	// After: {"url", "events"} (events empty for every type). Its secret is never
	// recorded.
	EndpointCreate Action = "endpoint.create"
	// EndpointUpdate: a webhook endpoint's (Target) URL or event types changed: its
	// settings before and after in Before and After.
	EndpointUpdate Action = "endpoint.update"
	// EndpointRotate: a webhook endpoint (Target) was given a new signing secret; After
	// is {"previous_secret_until"}, when the secret it replaced stops signing.
	EndpointRotate Action = "endpoint.rotate"
	// EndpointDisable: a webhook endpoint (Target) was disabled, for Reason: by its
	// owner, an operator, or the service ([Service]) after its deliveries failed for
	// the whole retry schedule.
	EndpointDisable Action = "endpoint.disable"
	// EndpointEnable: a disabled webhook endpoint (Target) was enabled again.
	EndpointEnable Action = "endpoint.enable"
	// EndpointDelete: a webhook endpoint (Target) was deleted, with its deliveries; its
	// settings were Before.
	EndpointDelete Action = "endpoint.delete"
)

// Actors that are not a key id.
const (
	// Operator is the Actor of a change made through the operators' admin API.
	Operator = "operator"
	// Host is the Actor of a change made by the host's own code, which named no actor
	// (for example accounts seeded at start-up).
	Host = "host"
	// Session is the Actor of a change made by an account holder through a session
	// token that names no key and has no id (one issued before sessions had ids);
	// such a session with an id is named by [SessionActor].
	Session = "session"
	// Service is the Actor of a change the service made by itself, which no one asked
	// for: a webhook endpoint disabled after its deliveries failed for the whole retry
	// schedule.
	Service = "service"
)

// SessionActor is the Actor of a change made through the session with the given id
// when the session names no key (a session that acts as a key is named by the key's
// id): "session:" followed by the id, the same in the session's own start and end
// entries, so that the log tells which session made each change.
func SessionActor(id string) string { return Session + ":" + id }

// Entry is one change, as recorded.
type Entry struct {
	// Seq is the store's sequence number of the entry, assigned by Append: unique in
	// the store and increasing in the order entries were appended. It is ignored on
	// Append.
	Seq int64
	// At is when the change was made. It is required.
	At time.Time
	// Actor is who made the change: the id of the key that authenticated it, for an
	// account holder, [Operator] (or "operator:" followed by a name the host gives)
	// for a change made through the admin API, [Host], or [Service]. It is required.
	Actor string
	// Action is what was done. It is required.
	Action Action
	// Account is the account the change is about. It is required.
	Account string
	// Target is the id of the key (or session, or webhook endpoint) the change is
	// about, if any.
	Target string
	// Before and After are the target's restrictions before and after the change, in
	// their plain JSON form (auth.Restrictions' MarshalJSON), or what [PlanChange]
	// says; nil where there are none to record. They must be valid JSON when set.
	Before, After json.RawMessage
	// Credits is the change of the account's credits, for [CreditsAdjust].
	Credits int64
	// Addr is the address the change was requested from; the zero Addr if unknown.
	// Stores keep the address without its IPv6 zone.
	Addr netip.Addr
	// Reason is the reason the actor gave, if any.
	Reason string
	// ID, if set, names the entry so that appending it again stores nothing: a store
	// keeps at most one entry with a given ID (until [Store.Prune] deletes it). It is
	// the idempotency token of an entry whose Append may be retried after an attempt
	// whose outcome is unknown (a timeout after the store committed). Tollgate gives
	// every entry it records a random ID; empty (a host's own entries, say) is never
	// deduplicated. At most [MaxIDLength] bytes.
	ID string
}

// MaxIDLength is the longest [Entry.ID] a store accepts.
const MaxIDLength = 128

// Validate returns an error wrapping store.ErrInvalid that says what to fix, unless e
// can be stored: At, Actor, Action and Account set, every text valid UTF-8 without NUL
// bytes (store.CheckText), ID at most [MaxIDLength] bytes, and Before and After valid
// JSON when set.
func (e Entry) Validate() error {
	switch {
	case e.At.IsZero():
		return fmt.Errorf("audit: entry has no time (At): %w", store.ErrInvalid)
	case e.Actor == "":
		return fmt.Errorf("audit: entry has no actor: %w", store.ErrInvalid)
	case e.Action == "":
		return fmt.Errorf("audit: entry has no action: %w", store.ErrInvalid)
	case e.Account == "":
		return fmt.Errorf("audit: entry has no account: %w", store.ErrInvalid)
	case len(e.ID) > MaxIDLength:
		return fmt.Errorf("audit: entry's id is %d bytes long; give at most %d: %w", len(e.ID), MaxIDLength, store.ErrInvalid)
	}
	for _, f := range []struct{ what, s string }{
		{"actor", e.Actor}, {"action", string(e.Action)}, {"account", e.Account},
		{"target", e.Target}, {"reason", e.Reason}, {"id", e.ID}, {"before", string(e.Before)}, {"after", string(e.After)},
	} {
		if err := store.CheckText("audit: entry's "+f.what, f.s); err != nil {
			return err
		}
	}
	if e.Before != nil && !json.Valid(e.Before) {
		return fmt.Errorf("audit: entry's before is not valid JSON: %w", store.ErrInvalid)
	}
	if e.After != nil && !json.Valid(e.After) {
		return fmt.Errorf("audit: entry's after is not valid JSON: %w", store.ErrInvalid)
	}
	return nil
}

// Query selects entries for [Store.List].
type Query struct {
	// Account selects one account's entries; empty selects every account's.
	Account string
	// From and To bound the entries' At: From <= At < To. A zero bound is no bound.
	From, To time.Time
	// Limit is the most entries one page holds: 0 means [DefaultLimit]; more than
	// [MaxLimit] is invalid.
	Limit int
	// Cursor continues a listing: the Next of the page before. Empty starts at the
	// newest entry.
	Cursor string
}

// Bounds of [Query.Limit].
const (
	DefaultLimit = 50
	MaxLimit     = 1000
)

// Page is one page of a listing, newest entry first.
type Page struct {
	Entries []Entry
	// Next is the cursor of the next page; empty when this page is the last.
	Next string
}

// Store keeps the audit log. Implementations are safe for concurrent use and never
// read the clock.
type Store interface {
	// Append stores entries, each with a new Seq, all or none: if one entry is invalid
	// (see [Entry.Validate]), it stores nothing and returns an error wrapping
	// store.ErrInvalid. An entry whose ID is set and already stored (by this Append or
	// an earlier one) is skipped, without an error: appending the same entries again
	// stores each once.
	Append(ctx context.Context, entries ...Entry) error
	// List returns the entries that q selects, newest first (by At, then by Seq),
	// a page at a time. A Limit out of bounds or a cursor that is not one List
	// returned gives an error wrapping store.ErrInvalid.
	List(ctx context.Context, q Query) (Page, error)
	// Prune deletes every entry whose At is before before, and returns how many it
	// deleted. It is the host's retention: entries at or after before are kept.
	Prune(ctx context.Context, before time.Time) (int64, error)
}

// ErrBadCursor reports a cursor that no listing returned. It wraps store.ErrInvalid.
var ErrBadCursor = fmt.Errorf("audit: the cursor is not one a listing returned: %w", store.ErrInvalid)

// Position is where a listing stands: the At and Seq of the last entry returned. The
// next page holds the entries after it in the listing's order (older At, or the same At
// and a lower Seq).
type Position struct {
	At  time.Time
	Seq int64
}

// Cursor encodes p for [Page.Next].
func (p Position) Cursor() string {
	return strconv.FormatInt(p.At.UnixNano(), 36) + "." + strconv.FormatInt(p.Seq, 36)
}

// Before reports whether an entry at at with sequence number seq comes after p in a
// listing, newest first.
func (p Position) Before(at time.Time, seq int64) bool {
	return at.Before(p.At) || at.Equal(p.At) && seq < p.Seq
}

// ParseQuery checks q's Limit and Cursor, as every store does first: it returns the
// limit to use and the position the cursor names (ok false for none), or an error
// wrapping store.ErrInvalid.
func ParseQuery(q Query) (limit int, pos Position, ok bool, err error) {
	switch {
	case q.Limit < 0 || q.Limit > MaxLimit:
		return 0, Position{}, false, fmt.Errorf("audit: limit %d is out of bounds: give 1 to %d, or 0 for %d: %w",
			q.Limit, MaxLimit, DefaultLimit, store.ErrInvalid)
	case q.Limit == 0:
		limit = DefaultLimit
	default:
		limit = q.Limit
	}
	if err := store.CheckText("audit: account", q.Account); err != nil {
		return 0, Position{}, false, err
	}
	if q.Cursor == "" {
		return limit, Position{}, false, nil
	}
	a, b, found := strings.Cut(q.Cursor, ".")
	at, err1 := strconv.ParseInt(a, 36, 64)
	seq, err2 := strconv.ParseInt(b, 36, 64)
	if !found || errors.Join(err1, err2) != nil || seq < 0 {
		return 0, Position{}, false, ErrBadCursor
	}
	return limit, Position{At: time.Unix(0, at).UTC(), Seq: seq}, true, nil
}
