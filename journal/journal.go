// Package journal keeps the changes that management makes (accounts, keys, plans,
// credits) until their events are published, so that an instance killed between
// storing a change and publishing it loses no event: not its webhook, not its audit
// entry.
//
// A change is stored, then published on the service's bus (package event), where the
// audit log and the webhook dispatcher store what they keep of it. Without a journal,
// an instance that dies in between (kill -9, a crash, a lost machine) leaves the change
// stored and its event lost. With one, the store that makes the change records the
// change in its journal in the same atomic step: the same statement (PostgreSQL), the
// same script (Redis), under the same lock (memory). The instance then publishes it
// and, once every observer stored what it keeps of it (none deferred it, see
// [event.Change.Defer]), removes it from the journal. What is left in a journal, on any instance, is published again by a
// [Relay], under the change's own ID, which the audit log and the webhook outbox store
// once. Observers may thus be told of a change twice (see [event.Observer]).
//
// A journal is emptied by what publishes it: the instance that made a change removes it
// once published, and the relays remove what is left. Without a relay, what an instance
// did not publish (it died, or an observer deferred it) stays: a PostgreSQL journal
// grows without bound. accounts.Manager runs a relay on every instance whose stores
// keep a journal, unless told not to (it logs a warning then).
//
// A store keeps a journal by implementing [Store] beside the key store or the ledger
// ([KeyStore], [Ledger]): each of its writes that makes a change of management records
// the entry that its context carries ([With]). accounts.Manager finds the journals by
// type assertion, gives each write the entry of its change, and runs the Relay. An
// entry is the change encoded by [Encode]: the store keeps its bytes as they are, and
// never decodes them. No entry holds a key's value: an [event.Change] never does.
//
// # Why the entry travels in the context
//
// The entry must reach the store through whatever decorates it: a decorator (metrics,
// tracing, the fault injection of tests) usually embeds the store's type and overrides
// some methods. A parameter of new methods, or a view of the store bound to the entry,
// would be promoted from the embedded store and bypass the decorator's overrides,
// silently. Every store method takes the context first and every decorator passes it
// on, so an entry in the context reaches the write the decorator makes, and only that
// write: the caller scopes it to one call (store.RotateKey(journal.With(ctx, e), ...)).
// A write that fails records nothing, so a decorator that refuses a write records
// nothing either. A decorator that makes writes of its own passes them a context
// without the entry.
package journal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/store"
)

// An Entry is a change kept in a journal.
type Entry struct {
	// ID is the change's ID ([event.Change.ID]): a journal keeps at most one entry with
	// an ID, so that recording it again (the retry of an idempotent change) changes
	// nothing while it is kept. 1 to [MaxIDLength] bytes of text.
	ID string
	// At is when the change was made, on the service's clock: a [Relay] publishes an
	// entry once it is older than its grace.
	At time.Time
	// Change is the change, as [Encode] made it: 1 to [MaxChange] bytes, kept as they
	// are.
	Change []byte
}

// Bounds of an [Entry].
const (
	MaxIDLength = 128
	MaxChange   = 64 << 10
)

// Check returns an error wrapping store.ErrInvalid that says what is wrong, unless e can
// be recorded: an ID of 1 to [MaxIDLength] bytes of text (see store.CheckText), At set,
// and a Change of 1 to [MaxChange] bytes. Every store checks it first.
func (e *Entry) Check() error {
	switch {
	case e.ID == "" || len(e.ID) > MaxIDLength:
		return fmt.Errorf("journal: an entry's id has %d bytes; give 1 to %d: %w", len(e.ID), MaxIDLength, store.ErrInvalid)
	case e.At.IsZero():
		return fmt.Errorf("journal: entry %q has no time: %w", e.ID, store.ErrInvalid)
	case len(e.Change) == 0 || len(e.Change) > MaxChange:
		return fmt.Errorf("journal: entry %q holds %d bytes; give 1 to %d: %w", e.ID, len(e.Change), MaxChange, store.ErrInvalid)
	}
	return store.CheckText("journal: an entry's id", e.ID)
}

// MaxClaim is the most entries one [Store.Claim] returns.
const MaxClaim = 1000

// Store is a journal, as a [Relay] reads it. Implementations are safe for concurrent
// use, never read the clock, and keep an entry until it is removed.
type Store interface {
	// Claim returns up to limit entries made before before (their At) that no claim
	// holds at now, oldest first (by At, then ID), and holds them until now+lease: a
	// Claim before then skips them, so that the relays of several instances publish
	// different entries. An entry claimed and not removed (its relay died, or an
	// observer deferred it) is claimed again once the lease ends. limit is 1 to
	// [MaxClaim] and lease positive; others are store.ErrInvalid.
	Claim(ctx context.Context, before, now time.Time, lease time.Duration, limit int) ([]Entry, error)
	// Remove deletes the entries with the given IDs, claimed or not. An ID no entry has
	// is skipped.
	Remove(ctx context.Context, ids ...string) error
}

// KeyStore is a key store that keeps a journal of its changes: each of its writes
// CreateAccount, UpdateAccount, DeleteAccount, CreateKey, RotateKey, RevokeKey and
// UpdateKey, made with a context that carries an entry ([With]), records the entry in
// the same atomic step as its change when it succeeds (a revocation of a revoked key
// included), and records nothing when it fails. A write whose context carries an
// invalid entry (see [Entry.Check]) fails with an error wrapping store.ErrInvalid and
// changes nothing. Its other methods ignore the entry.
type KeyStore interface {
	auth.KeyStore
	Store
}

// Ledger is a ledger that keeps a journal of its changes: its Adjust, made with a
// context that carries an entry ([With]), records the entry in the same atomic step as
// the adjustment when it succeeds (a replay of the adjustment included), and records
// nothing when it fails. An Adjust whose context carries an invalid entry (see
// [Entry.Check]) fails with an error wrapping store.ErrInvalid and changes nothing. Its
// other methods ignore the entry.
type Ledger interface {
	driver.Ledger
	Store
}

// entryKey is the key of the entry a context carries.
type entryKey struct{}

// With returns a copy of ctx that carries e, for one write of a store that keeps a
// journal ([KeyStore], [Ledger]) to record with its change. Give it to that write
// only: every write made with it records e (once: a journal keeps one entry per ID).
func With(ctx context.Context, e Entry) context.Context {
	return context.WithValue(ctx, entryKey{}, &e)
}

// From returns the entry ctx carries ([With]), for a store's write to record; nil for
// none. An entry that cannot be recorded (see [Entry.Check]) is an error wrapping
// store.ErrInvalid, which the write returns without changing anything.
func From(ctx context.Context) (*Entry, error) {
	e, _ := ctx.Value(entryKey{}).(*Entry)
	if e == nil {
		return nil, nil
	}
	if err := e.Check(); err != nil {
		return nil, err
	}
	c := *e
	return &c, nil
}

// CheckClaim returns an error wrapping store.ErrInvalid unless lease and limit are
// within the bounds of [Store.Claim]. Every store checks them first.
func CheckClaim(lease time.Duration, limit int) error {
	switch {
	case limit < 1 || limit > MaxClaim:
		return fmt.Errorf("journal: a claim takes 1 to %d entries, not %d: %w", MaxClaim, limit, store.ErrInvalid)
	case lease <= 0:
		return fmt.Errorf("journal: a claim's lease must be positive, not %s: %w", lease, store.ErrInvalid)
	}
	return nil
}

// record is the form of a change in an entry: the change's fields, its kind by its
// stable name, and the version of the form.
type record struct {
	V         int             `json:"v"`
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	At        time.Time       `json:"at"`
	Actor     string          `json:"actor,omitempty"`
	Addr      netip.Addr      `json:"addr,omitzero"`
	Account   string          `json:"account,omitempty"`
	Key       string          `json:"key,omitempty"`
	Session   string          `json:"session,omitempty"`
	Endpoint  string          `json:"endpoint,omitempty"`
	URL       string          `json:"url,omitempty"`
	Plan      string          `json:"plan,omitempty"`
	OldPlan   string          `json:"old_plan,omitempty"`
	Effective time.Time       `json:"effective,omitzero"`
	Credits   int64           `json:"credits,omitempty"`
	Expires   time.Time       `json:"expires,omitzero"`
	Reason    string          `json:"reason,omitempty"`
	Before    json.RawMessage `json:"before,omitempty"`
	After     json.RawMessage `json:"after,omitempty"`
	OldName   string          `json:"old_name,omitempty"`
	Name      string          `json:"name,omitempty"`
}

// version is the version of the form Encode writes.
const version = 1

// kinds maps the stable names of the kinds of changes (every kind but calls, refusals
// and sweeps, whose events are not changes) to their kinds.
var kinds = func() map[string]event.Kind {
	m := make(map[string]event.Kind)
	for _, k := range event.Kinds() {
		switch k {
		case event.CallFinished, event.CallRefused, event.ReservationsVoided:
		default:
			m[k.String()] = k
		}
	}
	return m
}()

// Encode returns the entry that records c: its ID, its time, and c in a form that
// [Decode] reads in this release and later ones. c must have an ID and a time, and be
// at most [MaxChange] bytes encoded; an error wrapping store.ErrInvalid says which it
// lacks.
func Encode(c *event.Change) (Entry, error) {
	r := record{V: version, Type: c.Type.String(), ID: c.ID, At: c.At, Actor: c.Actor.ID, Addr: c.Actor.Addr,
		Account: c.Account, Key: c.Key, Session: c.Session, Endpoint: c.Endpoint, URL: c.URL, Plan: c.Plan,
		OldPlan: c.OldPlan, Effective: c.Effective, Credits: c.Credits, Expires: c.Expires, Reason: c.Reason,
		Before: c.Before, After: c.After, OldName: c.OldName, Name: c.Name}
	if _, ok := kinds[r.Type]; !ok {
		return Entry{}, fmt.Errorf("journal: change %q is of no kind of change (%d): %w", c.ID, c.Type, store.ErrInvalid)
	}
	b, err := json.Marshal(&r)
	if err != nil {
		return Entry{}, fmt.Errorf("journal: change %q: %w: %w", c.ID, err, store.ErrInvalid)
	}
	e := Entry{ID: c.ID, At: c.At, Change: b}
	if err := e.Check(); err != nil {
		return Entry{}, err
	}
	return e, nil
}

// ErrUnreadable reports an entry that [Decode] cannot read: not one that Encode made,
// or made by a later release in a form this one does not know. A [Relay] leaves such
// an entry in the journal, for a relay of a release that reads it.
var ErrUnreadable = errors.New("journal: the entry is not a change this release can read")

// Decode returns the change e records. An entry it cannot read is an error wrapping
// [ErrUnreadable].
func Decode(e Entry) (*event.Change, error) {
	var r record
	if err := json.Unmarshal(e.Change, &r); err != nil {
		return nil, fmt.Errorf("%w: entry %q: %w", ErrUnreadable, e.ID, err)
	}
	k, ok := kinds[r.Type]
	switch {
	case r.V != version:
		return nil, fmt.Errorf("%w: entry %q is of version %d, this release reads %d", ErrUnreadable, e.ID, r.V, version)
	case !ok:
		return nil, fmt.Errorf("%w: entry %q is of the unknown kind %q", ErrUnreadable, e.ID, r.Type)
	case r.ID != e.ID:
		return nil, fmt.Errorf("%w: entry %q holds change %q", ErrUnreadable, e.ID, r.ID)
	}
	return &event.Change{Type: k, ID: r.ID, At: r.At, Actor: event.Actor{ID: r.Actor, Addr: r.Addr},
		Account: r.Account, Key: r.Key, Session: r.Session, Endpoint: r.Endpoint, URL: r.URL, Plan: r.Plan,
		OldPlan: r.OldPlan, Effective: r.Effective, Credits: r.Credits, Expires: r.Expires, Reason: r.Reason,
		Before: r.Before, After: r.After, OldName: r.OldName, Name: r.Name}, nil
}
