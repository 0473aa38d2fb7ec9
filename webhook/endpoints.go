package webhook

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/webhook/signature"
)

// DefaultSecretGrace is the default [EndpointsOptions.SecretGrace]: how long the secret
// a rotation replaced still signs deliveries.
const DefaultSecretGrace = 24 * time.Hour

// MaxReason is the longest reason for disabling an endpoint, in characters.
const MaxReason = 500

// endpointIDPrefix begins every endpoint id.
const endpointIDPrefix = "ep_"

// EndpointsOptions configures [Endpoints]. The zero value is the default; every field
// is optional.
type EndpointsOptions struct {
	// AllowPrivate lets endpoints have URLs whose host is a loopback, private,
	// link-local or otherwise non-public IP address, or the name localhost. By default
	// they are refused (see [Endpoints.Create]). It is for local development and tests
	// (the example server's -allow-private-fetch flag sets it); the deliverer's own
	// check, made when it connects, must be relaxed with it.
	AllowPrivate bool
	// SecretGrace is how long the secret that [Endpoints.RotateSecret] replaced still
	// signs deliveries, beside the new one, so that a receiver may move to the new
	// secret without refusing a delivery. The default is [DefaultSecretGrace]; a
	// negative value stops the replaced secret at once.
	SecretGrace time.Duration
	// Now returns the current time. The default is time.Now; give the service's clock
	// (tollgate.Service.Now) so that the endpoints and the events agree with it.
	Now func() time.Time
	// Logger receives the failures of the store (logged once, at the level
	// internal/outage gives). The default is slog.Default(). Secrets are never logged.
	Logger *slog.Logger
}

// Endpoints manages webhook endpoints for their owners: an account's holder, for the
// account's endpoints (which receive that account's events), and the operator, for the
// operator's endpoints (of no account: Account "", which receive every account's
// events). Every method takes the account whose endpoints it works on ("" for the
// operator's), and an endpoint of another account is answered as one that does not
// exist. The front doors decide who the owner is: package selfservice for account
// holders, package admin for operators.
//
// An endpoint's secret is returned in full twice only: by [Endpoints.Create] and by
// [Endpoints.RotateSecret]. Every other method returns endpoints with their secrets
// masked ([MaskSecret]), so that a listing never shows one.
//
// Every change is published on the service's events once it is stored, with the actor
// the caller names: [event.EndpointCreated], [event.EndpointUpdated],
// [event.EndpointRotated], [event.EndpointDisabled], [event.EndpointEnabled] and
// [event.EndpointDeleted], which the audit log records (for an account's endpoints)
// and observers may hear. No event holds a secret.
//
// Errors are [*Error] values that say what to fix; errors.Is tells their kind
// (store.ErrInvalid, store.ErrNotFound, store.ErrConflict, store.ErrUnavailable). It is
// safe for concurrent use.
type Endpoints struct {
	store        Store
	bus          *event.Bus
	allowPrivate bool
	grace        time.Duration // negative: none
	now          func() time.Time
	log          *slog.Logger
	// enqueued, if set, is called after a test message or a resend was stored, so
	// that a deliverer makes its attempt at once ([New] sets it to Deliverer.Wake).
	enqueued func()
}

// NewEndpoints returns the manager of the endpoints that st keeps, which publishes its
// changes on bus (nil: on none). opts may be nil.
func NewEndpoints(st Store, bus *event.Bus, opts *EndpointsOptions) *Endpoints {
	if opts == nil {
		opts = &EndpointsOptions{}
	}
	m := &Endpoints{
		store: st, bus: bus, allowPrivate: opts.AllowPrivate,
		grace: cmp.Or(opts.SecretGrace, DefaultSecretGrace),
		now:   opts.Now,
		log:   cmp.Or(opts.Logger, slog.Default()),
	}
	if m.now == nil {
		m.now = time.Now
	}
	return m
}

// Create creates an endpoint of account ("" for the operator) that receives the events
// of the given types at url, with a new secret, and returns it with the secret in full:
// the only time, besides a rotation, that the secret is returned. It is enabled.
//
// url must be an absolute http or https URL of at most [MaxURLLength] bytes, with a
// host, and without a user name, password or fragment; unless
// [EndpointsOptions.AllowPrivate] is set, its host may not be the name localhost (or a
// name under .localhost), nor an IP address that is not a public internet address
// (loopback, private, link-local, ...). A name that resolves to such an address is
// refused by the deliverer when it connects: this check refuses only what is refused
// whatever the DNS says. events are names of [Types] (at most [MaxTypes], repeats
// ignored), or none for every type.
//
// An account (or the operator) holds at most [MaxEndpoints] endpoints: one more is a
// store.ErrConflict whose message says to delete one.
func (m *Endpoints) Create(ctx context.Context, actor event.Actor, account, url string, events []string) (Endpoint, error) {
	if err := checkOwner(account); err != nil {
		return Endpoint{}, err
	}
	if err := checkURL(url, m.allowPrivate); err != nil {
		return Endpoint{}, err
	}
	types, err := checkEvents(events)
	if err != nil {
		return Endpoint{}, err
	}
	secret, err := signature.NewSecret()
	if err != nil {
		return Endpoint{}, &Error{Kind: store.ErrUnavailable, Message: "the service cannot make a secret now; try again shortly", Err: err}
	}
	now := m.now()
	e, err := m.store.CreateEndpoint(ctx, Endpoint{ID: newEndpointID(), Account: account, URL: url, Types: types, Secret: secret, Created: now})
	switch {
	case errors.Is(err, ErrTooManyEndpoints):
		return Endpoint{}, &Error{Kind: store.ErrConflict, Err: err, Message: fmt.Sprintf(
			"%s the most webhook endpoints it may have (%d): delete one before you create another", owner(account), MaxEndpoints)}
	case err != nil:
		return Endpoint{}, m.storeError(ctx, "creating a webhook endpoint", err)
	}
	m.publish(ctx, actor, event.Change{Type: event.EndpointCreated, After: settings(e)}, e)
	return e, nil
}

// owner names the owner of account's endpoints, as the subject of "has".
func owner(account string) string {
	if account == "" {
		return "the operator has"
	}
	return "the account has"
}

// List returns the endpoints of account ("" for the operator's), oldest first, with
// their secrets masked.
func (m *Endpoints) List(ctx context.Context, account string) ([]Endpoint, error) {
	if err := checkOwner(account); err != nil {
		return nil, err
	}
	es, err := m.store.Endpoints(ctx, account)
	if err != nil {
		return nil, m.storeError(ctx, "listing webhook endpoints", err)
	}
	now := m.now()
	for i := range es {
		es[i] = masked(es[i], now)
	}
	return es, nil
}

// Get returns the endpoint of account with the given id, its secrets masked.
func (m *Endpoints) Get(ctx context.Context, account, id string) (Endpoint, error) {
	e, err := m.endpoint(ctx, account, id)
	if err != nil {
		return Endpoint{}, err
	}
	return masked(e, m.now()), nil
}

// An EndpointChange is what [Endpoints.Update] changes of an endpoint: each field set
// replaces the endpoint's; a nil field leaves it as it is.
type EndpointChange struct {
	// URL is the endpoint's new URL, checked as [Endpoints.Create] checks it.
	URL *string
	// Events are the event types the endpoint receives from now on (none: every
	// type), checked as [Endpoints.Create] checks them.
	Events *[]string
	// Disabled disables the endpoint (true) or enables it again (false). A disabled
	// endpoint is given no new deliveries; enabling it does not send again what it
	// missed meanwhile.
	Disabled *bool
	// Reason says why the endpoint is disabled, with Disabled true: at most
	// [MaxReason] characters of printable text, shown to the endpoint's owner as
	// Endpoint.DisabledReason and recorded in the audit log. Empty is "disabled on
	// request".
	Reason string
	// ByOperator says that the operator makes the change (through the admin API), not
	// the account's holder: a front door sets it from who authenticated the request,
	// never from what the request says. It matters for an account's endpoints only
	// (the operator's own are always changed by the operator): the operator's
	// disabling is recorded as [DisabledByOperator], which the holder cannot undo, and
	// the operator may enable an endpoint whoever disabled it.
	ByOperator bool
}

// Check returns the refusal of the values of c that [Endpoints.Update] (or, with URL
// and Events, [Endpoints.Create]) would refuse, before anything is read: a front door
// checks a request with it before it spends anything on it.
func (m *Endpoints) Check(c EndpointChange) error {
	if c.URL != nil {
		if err := checkURL(*c.URL, m.allowPrivate); err != nil {
			return err
		}
	}
	if c.Events != nil {
		if _, err := checkEvents(*c.Events); err != nil {
			return err
		}
	}
	if c.Disabled != nil && *c.Disabled && c.Reason != "" {
		return checkReason(c.Reason)
	}
	return nil
}

// Update changes the endpoint of account with the given id as c says, and returns it,
// its secrets masked. A change that leaves the endpoint as it is changes nothing and
// publishes nothing. A change of the URL or the types publishes
// [event.EndpointUpdated]; disabling, [event.EndpointDisabled] (its Cause who disabled
// it: [DisabledByAccount] or [DisabledByOperator]); enabling, [event.EndpointEnabled].
// A change made while the endpoint changes otherwise (the deliverer disables it) is
// applied to the endpoint as it then is.
//
// Who disabled an endpoint is kept ([Endpoint.DisabledBy]), and decides who enables it:
//
//   - the account's holder disables an enabled endpoint (DisabledByAccount), and
//     enables one that the holder or the deliverer disabled (or one disabled before
//     stores kept who did); disabling a disabled endpoint keeps its reason;
//   - the operator (c.ByOperator, or any change of an operator's own endpoint)
//     disables an enabled endpoint, and takes over the disabling of one that the
//     holder or the deliverer disabled: it is then DisabledByOperator, with the
//     operator's reason, and published again; the operator enables an endpoint
//     whoever disabled it;
//   - an account's endpoint DisabledByOperator stays disabled for its holder: the
//     holder's enabling is refused with a store.ErrConflict whose message says that
//     only the operator enables it again, and nothing of the change is stored. (The
//     holder still changes its URL and types, rotates its secret or deletes it.)
func (m *Endpoints) Update(ctx context.Context, actor event.Actor, account, id string, c EndpointChange) (Endpoint, error) {
	if c.URL == nil && c.Events == nil && c.Disabled == nil {
		return Endpoint{}, invalid("give url, events or disabled: the change changes nothing")
	}
	if err := m.Check(c); err != nil {
		return Endpoint{}, err
	}
	var types []string
	if c.Events != nil {
		types, _ = checkEvents(*c.Events)
	}
	reason := "disabled on request"
	if c.Disabled != nil && *c.Disabled && c.Reason != "" {
		reason = c.Reason
	}
	byOperator := c.ByOperator || account == ""
	by := DisabledByAccount
	if byOperator {
		by = DisabledByOperator
	}
	return m.change(ctx, actor, account, id, func(e *Endpoint, now time.Time) ([]event.Change, error) {
		before := *e
		if c.URL != nil {
			e.URL = *c.URL
		}
		if c.Events != nil {
			e.Types = types
		}
		var out []event.Change
		if e.URL != before.URL || !slices.Equal(e.Types, before.Types) {
			out = append(out, event.Change{Type: event.EndpointUpdated, Before: settings(before), After: settings(*e)})
		}
		switch {
		case c.Disabled == nil:
		case *c.Disabled && (e.Disabled.IsZero() || byOperator && e.DisabledBy != DisabledByOperator):
			e.Disabled, e.DisabledReason, e.DisabledBy = now, reason, by
			out = append(out, event.Change{Type: event.EndpointDisabled, Reason: reason, Cause: by})
		case !*c.Disabled && !e.Disabled.IsZero():
			if e.DisabledBy == DisabledByOperator && !byOperator {
				return nil, &Error{Kind: store.ErrConflict, Message: fmt.Sprintf(
					"the webhook endpoint %q was disabled by the operator (%s): only the operator can enable it again; ask the service's operator",
					e.ID, e.DisabledReason)}
			}
			e.Disabled, e.DisabledReason, e.DisabledBy = time.Time{}, "", ""
			out = append(out, event.Change{Type: event.EndpointEnabled})
		}
		return out, nil
	})
}

// RotateSecret gives the endpoint of account with the given id a new secret, and
// returns it with the new secret in full (its PreviousSecret masked): the only time,
// besides its creation, that a secret is returned. The secret it replaces signs
// deliveries beside the new one until PreviousUntil, [EndpointsOptions.SecretGrace]
// from now; a secret that an earlier rotation replaced stops at once.
func (m *Endpoints) RotateSecret(ctx context.Context, actor event.Actor, account, id string) (Endpoint, error) {
	secret, err := signature.NewSecret()
	if err != nil {
		return Endpoint{}, &Error{Kind: store.ErrUnavailable, Message: "the service cannot make a secret now; try again shortly", Err: err}
	}
	e, err := m.change(ctx, actor, account, id, func(e *Endpoint, now time.Time) ([]event.Change, error) {
		e.PreviousSecret, e.PreviousUntil = "", time.Time{}
		if m.grace > 0 {
			e.PreviousSecret, e.PreviousUntil = e.Secret, now.Add(m.grace)
		}
		e.Secret = secret
		return []event.Change{{Type: event.EndpointRotated, Effective: e.PreviousUntil}}, nil
	})
	if err != nil {
		return Endpoint{}, err
	}
	e.Secret = secret
	return e, nil
}

// Delete deletes the endpoint of account with the given id, and its deliveries,
// pending or not.
func (m *Endpoints) Delete(ctx context.Context, actor event.Actor, account, id string) error {
	e, err := m.endpoint(ctx, account, id)
	if err != nil {
		return err
	}
	if err := m.store.DeleteEndpoint(ctx, e.ID); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return notFound(account, id, err)
		}
		return m.storeError(ctx, "deleting a webhook endpoint", err)
	}
	m.publish(ctx, actor, event.Change{Type: event.EndpointDeleted, Before: settings(e)}, e)
	return nil
}

// Disabled tells that the service disabled an endpoint by itself, as d says: it
// answered 410 Gone, or its deliveries failed for the whole retry schedule. It
// publishes [event.EndpointDisabled] with the actor [audit.Service], d's reason, and
// the cause d.Cause names ("gone" or "failing"), for the audit log and the endpoint's
// owner (and the operator's endpoints: see [EndpointDisabledData]); it does not change
// the endpoint, which the deliverer has disabled in the store ([DisabledByDelivery]).
// Give it to the deliverer as the callback of the endpoints it disables ([New] does).
func (m *Endpoints) Disabled(ctx context.Context, d DisabledEndpoint) {
	m.publish(ctx, event.Actor{ID: audit.Service}, event.Change{Type: event.EndpointDisabled, Reason: d.Reason, Cause: d.Cause.String()},
		Endpoint{ID: d.Endpoint, Account: d.Account, URL: d.URL})
}

// change reads the endpoint of account with the given id, applies apply to it (which
// returns the changes it made, to publish, or none, or the refusal of the change),
// stores it and publishes the changes, made by actor. The update is conditioned on the
// revision read: when the endpoint changed meanwhile, it is read and changed again, a
// few times.
func (m *Endpoints) change(ctx context.Context, actor event.Actor, account, id string,
	apply func(e *Endpoint, now time.Time) ([]event.Change, error)) (Endpoint, error) {
	const attempts = 4
	for range attempts {
		e, err := m.endpoint(ctx, account, id)
		if err != nil {
			return Endpoint{}, err
		}
		now := m.now()
		changes, err := apply(&e, now)
		if err != nil {
			return Endpoint{}, err
		}
		if len(changes) == 0 {
			return masked(e, now), nil
		}
		stored, err := m.store.UpdateEndpoint(ctx, e)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return Endpoint{}, notFound(account, id, err)
		case errors.Is(err, store.ErrConflict):
			continue // it changed since it was read
		case err != nil:
			return Endpoint{}, m.storeError(ctx, "changing a webhook endpoint", err)
		}
		for _, c := range changes {
			m.publish(ctx, actor, c, stored)
		}
		return masked(stored, now), nil
	}
	return Endpoint{}, &Error{Kind: store.ErrConflict,
		Message: fmt.Sprintf("the webhook endpoint %q kept changing while it was being changed; read it again and retry", id)}
}

// endpoint returns the endpoint with the given id if it is account's, unmasked.
func (m *Endpoints) endpoint(ctx context.Context, account, id string) (Endpoint, error) {
	if err := checkOwner(account); err != nil {
		return Endpoint{}, err
	}
	if err := checkID("id", id); err != nil {
		return Endpoint{}, err
	}
	e, err := m.store.Endpoint(ctx, id)
	switch {
	case err == nil && e.Account == account:
		return e, nil
	case err == nil || errors.Is(err, store.ErrNotFound):
		return Endpoint{}, notFound(account, id, err)
	}
	return Endpoint{}, m.storeError(ctx, "reading a webhook endpoint", err)
}

// notFound is the refusal of an id that names no endpoint of account.
func notFound(account, id string, cause error) *Error {
	if account == "" {
		return &Error{Kind: store.ErrNotFound, Err: cause, Message: fmt.Sprintf("the operator has no webhook endpoint with the id %q", id)}
	}
	return &Error{Kind: store.ErrNotFound, Err: cause, Message: fmt.Sprintf("the account has no webhook endpoint with the id %q", id)}
}

// publish publishes c, a change of e made by actor, with the endpoint's account, id
// and URL, a random ID and the current time.
func (m *Endpoints) publish(ctx context.Context, actor event.Actor, c event.Change, e Endpoint) {
	if m.bus == nil || !m.bus.Wants(c.Type) {
		return
	}
	c.ID, c.At, c.Actor = rand.Text(), m.now(), actor
	c.Account, c.Endpoint, c.URL = e.Account, e.ID, e.URL
	m.bus.Publish(ctx, &c)
}

// settings is the plain JSON form of an endpoint's settings in an event: {"url",
// "events"}, events empty for every type. It never holds a secret.
func settings(e Endpoint) json.RawMessage {
	b, err := json.Marshal(struct {
		URL    string   `json:"url"`
		Events []string `json:"events"`
	}{e.URL, orEmpty(e.Types)})
	if err != nil {
		return nil // strings only: this does not happen
	}
	return b
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// MaskSecret returns a secret as listings show it: "whsec_", the first four characters
// after it, and "…"; "…" alone for a value that is not a secret, and "" for none.
func MaskSecret(secret string) string {
	const shown = len(signature.SecretPrefix) + 4
	switch {
	case secret == "":
		return ""
	case strings.HasPrefix(secret, signature.SecretPrefix) && len(secret) > shown:
		return secret[:shown] + "…"
	}
	return "…"
}

// masked returns e as the owner sees it at now: its secrets masked, and no previous
// secret once it has stopped signing.
func masked(e Endpoint, now time.Time) Endpoint {
	if !now.Before(e.PreviousUntil) {
		e.PreviousSecret, e.PreviousUntil = "", time.Time{}
	}
	e.Secret, e.PreviousSecret = MaskSecret(e.Secret), MaskSecret(e.PreviousSecret)
	return e
}

// newEndpointID returns a new endpoint id: "ep_" and 26 characters of lower-case
// base32 (128 random bits).
func newEndpointID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return endpointIDPrefix + idEncoding.EncodeToString(b[:])
}

// checkOwner refuses an account that no store holds ([CheckAccount]), with a message
// for people.
func checkOwner(account string) error {
	if CheckAccount(account) != nil {
		return invalid(fmt.Sprintf("account: give the id of an account, at most %d bytes of text", MaxID))
	}
	return nil
}

// checkID refuses an id (of an endpoint, of a message), named what, that no store
// holds ([CheckID]) or that has control characters, with a message for people.
func checkID(what, id string) error {
	if CheckID(what, id) != nil || strings.ContainsFunc(id, isControl) {
		return invalid(fmt.Sprintf("%s: give an id that a listing returned (at most %d bytes)", what, MaxID))
	}
	return nil
}

// checkReason refuses a reason for disabling that is too long or not printable text.
func checkReason(reason string) error {
	switch {
	case !utf8.ValidString(reason) || strings.ContainsFunc(reason, isControl):
		return invalid("reason: use printable text, without control characters (line breaks, NUL, ...)")
	case utf8.RuneCountInString(reason) > MaxReason:
		return invalid(fmt.Sprintf("reason: give at most %d characters", MaxReason))
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 }
