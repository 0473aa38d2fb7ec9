// Package event is the seam of a Tollgate service: the typed record of what happened
// (a call ran or was refused, reservations were voided, an account, a key, credits, a
// session or a webhook endpoint changed) and the [Bus] that hands each event to the
// observers subscribed to its kind.
//
// Cross-cutting features hang on the seam rather than in the call: the audit log
// (audit.Log), the usage statistics (usage.Recorder), the front doors that hold
// connections open (package mcp ends a revoked key's streams), and whatever a host
// subscribes. Observers are called after the fact, on the goroutine that made the
// change, and must return promptly: one that does I/O queues it (see [Observer]). A
// kind that no observer wants costs the service one atomic load.
//
// The bus also holds tracers ([Tracer], [Bus.Trace]), for what must wrap the work
// rather than hear of it afterwards: the service tells them of each phase of a call
// (its authentication, admission, each API's run, its settlement) as it begins and
// ends, and the stores' hooks of each round trip; a tracer may give the phase a context
// of its own (package tracing makes OpenTelemetry spans). Without a tracer a phase
// costs one atomic load.
//
// No event and no phase holds a key's value: keys are named by their ids.
package event

import (
	"encoding/json"
	"net/netip"
	"time"
)

// Kind names what happened. Each kind has one concrete event type: [*Call] for
// [CallFinished], [*Refusal] for [CallRefused], [*Sweep] for [ReservationsVoided],
// and [*Change] for the others.
type Kind uint8

// The kinds of events.
const (
	// CallFinished: a call ran and was settled, or its settlement was deferred or
	// voided (see [Call.Settlement]).
	CallFinished Kind = iota + 1
	// CallRefused: a call of an authenticated caller was refused before it ran.
	CallRefused
	// ReservationsVoided: a sweep voided expired reservations, giving their credits
	// back.
	ReservationsVoided
	// AccountCreated: an account was created with its primary key ([Change.Key]).
	AccountCreated
	// KeyCreated: a sub-key was created, with the restrictions in [Change.After].
	KeyCreated
	// KeyRotated: a key got a new value; the old one no longer works.
	KeyRotated
	// KeyUpdated: a key's name or restrictions changed.
	KeyUpdated
	// KeyRevoked: a key was revoked.
	KeyRevoked
	// CreditsAdjusted: an operator or the host added or took credits.
	CreditsAdjusted
	// SessionStarted: a session ([Change.Session]) was started.
	SessionStarted
	// SessionEnded: a session was ended (signed out) before its expiry.
	SessionEnded
	// AccountSuspended: an operator suspended an account: its calls are refused until
	// it is reactivated. [Change.Reason] says why.
	AccountSuspended
	// AccountReactivated: a suspended account was made active again.
	AccountReactivated
	// AccountClosed: an account was closed: its keys are revoked and its data kept for
	// the retention the service documents.
	AccountClosed
	// PlanChanged: an account's plan changed ([Change.OldPlan] to [Change.Plan]), now or
	// from the renewal at [Change.Effective].
	PlanChanged
	// AccountDeleted: a closed account was deleted, with its keys, once its closure's
	// retention had passed.
	AccountDeleted
	// EndpointCreated: a webhook endpoint ([Change.Endpoint], at [Change.URL]) was
	// created, with its settings in [Change.After]. Its Account is the endpoint's, empty
	// for an operator's endpoint (which receives every account's events).
	EndpointCreated
	// EndpointUpdated: a webhook endpoint's URL or event types changed, its settings
	// before and after in [Change.Before] and [Change.After].
	EndpointUpdated
	// EndpointRotated: a webhook endpoint was given a new signing secret; the one it
	// replaced still signs until the grace in [Change.Effective] ends.
	EndpointRotated
	// EndpointDisabled: a webhook endpoint was disabled, for [Change.Reason]: by its
	// owner, by an operator, or by the service ([Change.Actor] "service") after its
	// deliveries failed for the whole retry schedule. It is given no new deliveries.
	EndpointDisabled
	// EndpointEnabled: a disabled webhook endpoint was enabled again.
	EndpointEnabled
	// EndpointDeleted: a webhook endpoint was deleted, with its deliveries; its
	// settings were [Change.Before].
	EndpointDeleted

	numKinds
)

var kindNames = [numKinds]string{
	CallFinished:       "call.finished",
	CallRefused:        "call.refused",
	ReservationsVoided: "reservations.voided",
	AccountCreated:     "account.created",
	KeyCreated:         "key.created",
	KeyRotated:         "key.rotated",
	KeyUpdated:         "key.updated",
	KeyRevoked:         "key.revoked",
	CreditsAdjusted:    "credits.adjusted",
	SessionStarted:     "session.started",
	SessionEnded:       "session.ended",
	AccountSuspended:   "account.suspended",
	AccountReactivated: "account.reactivated",
	AccountClosed:      "account.closed",
	PlanChanged:        "plan.changed",
	AccountDeleted:     "account.deleted",
	EndpointCreated:    "endpoint.created",
	EndpointUpdated:    "endpoint.updated",
	EndpointRotated:    "endpoint.rotated",
	EndpointDisabled:   "endpoint.disabled",
	EndpointEnabled:    "endpoint.enabled",
	EndpointDeleted:    "endpoint.deleted",
}

// String returns the kind's stable name, a noun and a verb in the past ("key.rotated").
func (k Kind) String() string {
	if k < numKinds && kindNames[k] != "" {
		return kindNames[k]
	}
	return "unknown"
}

// Kinds returns every kind, in the order of their constants.
func Kinds() []Kind {
	out := make([]Kind, 0, numKinds-1)
	for k := CallFinished; k < numKinds; k++ {
		out = append(out, k)
	}
	return out
}

// An Event is one of [*Call], [*Refusal], [*Sweep] and [*Change]; its Kind says which
// happened. An observer switches on its type or its kind.
type Event interface {
	Kind() Kind
	// Time is when it happened, on the service's clock.
	Time() time.Time
	event()
}

// Channel names through which door a call came: "rest", "graphql", "mcp", "batch" for
// each item of a batch, "other" for a call made without one.
type Channel = string

// Call is a call that ran: one API for a REST call or an MCP tool call, several for a
// GraphQL query, one item of a batch. An observer that keeps anything of it after
// Observe returns copies it: the service reuses APIs.
type Call struct {
	At      time.Time
	Account string
	// Key is the id of the key that made the call (for a session, the key that
	// started it; empty for a session that named none).
	Key     string
	Channel Channel
	// Plan is the name of the account's plan in force for the call.
	Plan string
	// APIs are the APIs the call ran, each with its outcome.
	APIs []APIResult
	// Charged is what the call was charged in the end: the cost of its APIs less the
	// refunds of those that failed on the service's side, and of what handlers did not
	// charge of their cost (catalog.Request.Charge); zero when Settlement is Voided or
	// Unsettled.
	Charged int64
	// Balance is the account's balance after the settlement; meaningful only when
	// Settlement is Settled.
	Balance Balance
	// Settlement says what became of the call's charge.
	Settlement Settlement
	// Admission is how long the admission took (rate limit, concurrency slot, credit
	// reservation, key check), Run how long the call's APIs ran (the longest, for
	// several), Settle how long its settlement took.
	Admission, Run, Settle time.Duration
}

// APIResult is one API of a [Call].
type APIResult struct {
	API string
	// Code is empty for a success, else the code of its failure ("rejected",
	// "timeout", "api_failed", ...).
	Code string
	// Credits is what this API was charged in the end.
	Credits int64
	// Duration is how long it ran.
	Duration time.Duration
}

// Settlement is what became of a call's charge.
type Settlement uint8

const (
	// Settled: the charge was kept (less refunds) and the store took it.
	Settled Settlement = iota
	// Deferred: the store could not take the settlement; it is retried in the
	// background until the reservation expires, when it is voided (not charged).
	Deferred
	// Voided: the call outlived its reservation, which was voided: not charged.
	Voided
	// Unsettled: the call is not charged because its run could not be recorded (a
	// batch whose idempotency record could not be marked); its reservation is
	// refunded.
	Unsettled
)

var settlementNames = [...]string{Settled: "settled", Deferred: "deferred", Voided: "voided", Unsettled: "unsettled"}

func (s Settlement) String() string {
	if int(s) < len(settlementNames) {
		return settlementNames[s]
	}
	return "unknown"
}

// Refusal is a call of an authenticated caller refused before it ran: by the plan
// (rate, concurrency, credits), for its input, for an API its key may not call, or
// because a store was unavailable. It lists only APIs of the catalog: an id that names
// none is not reported, so that nobody can fill an observer with names of their
// choosing. An observer that keeps APIs after Observe returns copies it.
type Refusal struct {
	At      time.Time
	Account string
	Key     string
	Channel Channel
	// Plan is the name of the account's plan in force for the call.
	Plan string
	// APIs are the catalog's APIs the call named, one entry per item of a batch.
	APIs []string
	// Code is the refusal's code ("rate_limited", "credits_exhausted", ...).
	Code string
	// Balance is the account's balance when the call was refused; zero when the
	// refusal did not read it (an item of a batch refused for its input, or a store
	// that was unavailable).
	Balance Balance
}

// Balance is an account's credit position, as a call left it or found it.
type Balance struct {
	// Remaining is the number of credits left, of which Granted are held by grants
	// (the rest is what is left of the period's allowance).
	Remaining, Granted int64
	// Used is the number of credits spent in the period, net of refunds; Allowance is
	// the plan's credits per period.
	Used, Allowance int64
	// PeriodStart and PeriodEnd bound the period: the renewal is at PeriodEnd.
	PeriodStart, PeriodEnd time.Time
}

// AllowanceUsed returns the number of credits of the period's allowance spent:
// Allowance less what is left of it, never below zero.
func (b Balance) AllowanceUsed() int64 { return max(0, b.Allowance-(b.Remaining-b.Granted)) }

// Sweep is a sweep that voided expired reservations (of instances that died, or of
// settlements the store never took), giving their credits back.
type Sweep struct {
	At     time.Time
	Voided int
}

// Actor is who made a change.
type Actor struct {
	// ID is the id of the key that authenticated the change, "operator" (or
	// "operator:" and a name) for the admin API, "host" for the host's own code, or
	// "session:" and a session's id for a session that names no key.
	ID string
	// Addr is the address the change was requested from; the zero Addr if unknown.
	Addr netip.Addr
}

// Change is a change made to an account, a key, credits, a session or a webhook
// endpoint, once it is stored. Which fields are set depends on its kind.
type Change struct {
	Type Kind
	// ID names the change: random, except that a replay of an idempotent change (a
	// credit adjustment retried with the same idempotency key) has the first one's.
	ID      string
	At      time.Time
	Actor   Actor
	Account string
	// Key is the key the change is about: the created, rotated, updated or revoked
	// key, the primary key of a created account, the key a session acts as.
	Key string
	// Session is the session's id, for SessionStarted and SessionEnded.
	Session string
	// Endpoint is the webhook endpoint's id, and URL where it delivers (after the
	// change), for the endpoint kinds (EndpointCreated, ...). An endpoint's secret is
	// never in an event.
	Endpoint, URL string
	// Plan is the plan of a created account, or the new plan of a PlanChanged;
	// OldPlan the plan it had before.
	Plan, OldPlan string
	// Effective is when a PlanChanged takes effect: its moment for a change made now,
	// or the renewal it waits for. For an EndpointRotated, it is when the replaced
	// secret stops signing deliveries.
	Effective time.Time
	// Credits is the opening balance of a created account, or the amount of a credit
	// adjustment (negative when credits were taken).
	Credits int64
	// Expires is when what is left of a grant lapses (a CreditsAdjusted of a positive
	// amount given an expiry); zero for a grant that never lapses, and for other kinds.
	Expires time.Time
	// Reason is the reason given for a credit adjustment, a suspension or a closure;
	// "login" for a session started through the host's login; for a PlanChanged back
	// to the plan in force, the pending change it dropped; for an EndpointDisabled,
	// why the endpoint was disabled.
	Reason string
	// Cause is, for an EndpointDisabled, what disabled the endpoint, in package
	// webhook's words: "account" (its account's holder), "operator" (the operator, or
	// an operator's endpoint's owner), "gone" (it answered 410 Gone) or "failing" (its
	// deliveries failed for the whole retry schedule); empty for other kinds.
	Cause string
	// Before and After are the key's (or a created account's) restrictions before and
	// after the change, in their plain JSON form; nil where there are none. For the
	// endpoint kinds, they are the endpoint's settings, {"url", "events"} (events
	// empty for every type).
	Before, After json.RawMessage
	// OldName and Name are a key's name before and after a KeyUpdated that renamed it.
	OldName, Name string

	// deferred is set by an observer that could not store the change (see Defer).
	deferred bool
}

// Defer is called by an observer that keeps what it observes in a store of its own
// (the audit log, the webhook outbox) when it could not store this change before
// returning from Observe: its store failed or is slow, and the observer holds the change
// in memory to retry, where an instance that dies loses it. The publisher of a change
// that a journal keeps (package journal) then leaves it in the journal, for a relay to
// publish again later under the same ID, which such an observer stores once. Defer is
// called on the goroutine that publishes, before Observe returns; an observer that
// stored the change, or keeps nothing of it, does not call it.
func (e *Change) Defer() { e.deferred = true }

// Deferred reports whether an observer called [Change.Defer] while the change was
// published.
func (e *Change) Deferred() bool { return e.deferred }

func (e *Call) Kind() Kind    { return CallFinished }
func (e *Refusal) Kind() Kind { return CallRefused }
func (e *Sweep) Kind() Kind   { return ReservationsVoided }
func (e *Change) Kind() Kind  { return e.Type }

func (e *Call) Time() time.Time    { return e.At }
func (e *Refusal) Time() time.Time { return e.At }
func (e *Sweep) Time() time.Time   { return e.At }
func (e *Change) Time() time.Time  { return e.At }

func (*Call) event()    {}
func (*Refusal) event() {}
func (*Sweep) event()   {}
func (*Change) event()  {}
