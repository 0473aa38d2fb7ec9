package webhook

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate/store"
)

// MaxEndpoints is the most endpoints one account may have; the operator's endpoints
// (those of no account) are bounded by it too. A store refuses one more with
// [ErrTooManyEndpoints].
const MaxEndpoints = 16

// MaxPending is the most deliveries an endpoint may have pending (not yet delivered nor
// given up), claimed or not. The outbox is bounded by it: a message enqueued for an
// endpoint that has MaxPending pending deliveries is not delivered to that endpoint, and
// Enqueue reports the endpoint as dropped (the service counts it and tells the
// endpoint's owner). The bound is exact in every store, also when enqueues for one
// endpoint race (those of every account meet at the operator's endpoints): Enqueue
// never takes an endpoint past it, and drops an endpoint only when it has that many
// pending (Resend, which it does not hold, may take an endpoint past it). A store may be configured with a lower bound (to bound the memory
// a dead endpoint holds, or for tests); it then has a method MaxPending() int that
// returns it, which storetest.TestWebhooks reads.
const MaxPending = 10000

// MaxBody is the largest message body, in bytes.
const MaxBody = 16 << 10

// MaxTypes is the most event types an endpoint may name.
const MaxTypes = 64

// ErrTooManyEndpoints is returned by [Store.CreateEndpoint] for an account (or the
// operator) that already has [MaxEndpoints] endpoints. It wraps store.ErrConflict.
var ErrTooManyEndpoints = fmt.Errorf("webhook: the account has the most endpoints it may have (%d): delete one first: %w", MaxEndpoints, store.ErrConflict)

// ErrClaimLost is returned by [Store.Record] when the claim it names no longer holds
// the delivery: the lease ended and another deliverer claimed it, the delivery was
// resent meanwhile, or the claim's outcome was recorded already. The outcome is not
// recorded. (A delivery deleted meanwhile, with its endpoint or by a prune, is
// store.ErrNotFound.) It wraps store.ErrConflict.
var ErrClaimLost = fmt.Errorf("webhook: the delivery is no longer held by this claim: %w", store.ErrConflict)

// ErrBadCursor reports a cursor that no listing of deliveries returned. It wraps
// store.ErrInvalid.
var ErrBadCursor = fmt.Errorf("webhook: the cursor is not one a listing of deliveries returned: %w", store.ErrInvalid)

// An Endpoint is a URL that events are delivered to, signed with its secret.
type Endpoint struct {
	// ID names the endpoint: "ep_" and 26 characters of lower-case base32.
	ID string
	// Account is the account whose events the endpoint receives; empty for an
	// operator's endpoint, which receives the events of every account.
	Account string
	// URL is where deliveries are posted: an absolute http or https URL.
	URL string
	// Types are the event types the endpoint receives, sorted and without repeats;
	// empty for every type.
	Types []string
	// Secret signs the deliveries: "whsec_" and the base64 of 32 random bytes.
	Secret string
	// PreviousSecret is the secret a rotation replaced; deliveries are signed with it
	// too until PreviousUntil, so that a receiver may move to the new one.
	PreviousSecret string
	PreviousUntil  time.Time
	// Disabled is when the endpoint was disabled (zero while it is enabled), and
	// DisabledReason says why: an owner disabled it, or its deliveries failed for the
	// whole retry schedule. A disabled endpoint is given no new deliveries.
	Disabled       time.Time
	DisabledReason string
	// DisabledBy says who disabled it, while it is disabled: [DisabledByAccount],
	// [DisabledByOperator] or [DisabledByDelivery]; empty while it is enabled, and for
	// an endpoint disabled before stores kept it (then anyone who may enable it does).
	// An account's endpoint that the operator disabled stays disabled for the
	// account's holder: only the operator enables it again ([Endpoints.Update]).
	DisabledBy string
	// Created is when the endpoint was created.
	Created time.Time
	// LastDelivered is when an attempt to the endpoint last succeeded: the latest
	// Attempt.At of the Delivered outcomes recorded for its deliveries; zero before the
	// first. [Store.Record] sets it, at once with the outcome, and never moves it back;
	// nothing else does: [Store.CreateEndpoint] stores it zero and
	// [Store.UpdateEndpoint] keeps the stored one, whatever they are given. It is no
	// change of the endpoint: Revision stays.
	LastDelivered time.Time
	// Revision counts the endpoint's changes: 1 when created, raised by every
	// [Store.UpdateEndpoint], which takes effect only at the revision it was read at.
	Revision int64
}

// Who disabled an endpoint: the values of [Endpoint.DisabledBy], at most
// [MaxDisabledBy] bytes.
const (
	// DisabledByAccount: the account's holder disabled the endpoint (through the
	// account holders' API or the dashboard). The holder or the operator enables it.
	DisabledByAccount = "account"
	// DisabledByOperator: the operator disabled it (through the admin API; an
	// operator's own endpoint is always disabled by the operator). Only the operator
	// enables it again: the account's holder is refused.
	DisabledByOperator = "operator"
	// DisabledByDelivery: the deliverer disabled it, after it answered 410 Gone or
	// failed every delivery for the whole retry schedule. Its owner, or the operator,
	// enables it again once it is fixed.
	DisabledByDelivery = "delivery"
)

// MaxDisabledBy is the longest [Endpoint.DisabledBy] a store holds, in bytes.
const MaxDisabledBy = 16

// A Message is one event as it is delivered: stored once, delivered to each endpoint
// it was enqueued for.
type Message struct {
	// ID is the message's webhook-id, the same on every attempt and every endpoint:
	// "msg_" and 26 characters of lower-case base32. A message whose ID a store has
	// seen is not enqueued again (see [Store.Enqueue]). It is random ([NewID]) for an
	// event that happens once by nature, and derived from the event's cause
	// ([DerivedID]) for one that instances may see more than once and must be sent
	// once: a threshold is named by its type, account, period and threshold, a change
	// by its own ID ([Translate]).
	ID string
	// Type is the event type, such as "key.rotated".
	Type string
	// Account is the account the event is about; empty for none.
	Account string
	// At is when the event happened.
	At time.Time
	// Body is what is posted: the JSON object {"type", "timestamp", "data"}, at most
	// MaxBody bytes.
	Body []byte
	// Keep is how long the store remembers the ID, to enqueue the message once: at
	// least until Keep, and at least as long as the message has deliveries. An event
	// that must happen once per period (a threshold) has an ID derived from its cause
	// ([DerivedID]) and a Keep at the period's end; a translated change is kept for
	// [ReplayWindow].
	Keep time.Time
}

// A State is where a delivery stands.
type State uint8

// The states of a delivery.
const (
	// Pending: the delivery waits for its next attempt, due at [Delivery.Due].
	Pending State = iota + 1
	// Delivered: an attempt was answered with a 2xx status.
	Delivered
	// Failed: the delivery was given up: its attempts failed for the whole retry
	// schedule, the receiver asked for no more, or its endpoint was disabled (then
	// without a further attempt: see [Outcome]).
	Failed
)

// String returns the state's name: "pending", "delivered" or "failed".
func (s State) String() string {
	switch s {
	case Pending:
		return "pending"
	case Delivered:
		return "delivered"
	case Failed:
		return "failed"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// A Delivery is one message on its way to one endpoint.
type Delivery struct {
	Endpoint string
	Message  Message
	State    State
	// Attempts is the number of attempts made.
	Attempts int
	// Due, for a pending delivery, is when its next attempt may be made; for a
	// delivery that a claim holds, the end of its lease. It is zero for a delivery
	// delivered or failed.
	Due time.Time
	// Last is the last attempt's outcome; zero before the first.
	Last Attempt
	// Claim, in a delivery that [Store.Claim] returned, names that claim: the one
	// [Store.Record] must give back. It is empty in listings.
	Claim string
}

// An Attempt is the outcome of one attempt to deliver a message.
type Attempt struct {
	// At is when the attempt was made; zero in an [Outcome] for none.
	At time.Time
	// Status is the HTTP status of the answer; 0 when there was none.
	Status int
	// Error says why the attempt failed; empty when it succeeded. A store keeps its
	// first MaxError bytes at most (cut at a character boundary): a longer Error is
	// cut, not refused, so that an outcome is never lost for its words.
	Error string
}

// MaxError is the longest [Attempt.Error] a store keeps, in bytes.
const MaxError = 512

// An Outcome is what [Store.Record] stores when a deliverer is done with a claimed
// delivery: most often after an attempt, sometimes without one.
type Outcome struct {
	Endpoint, Message string
	// Claim is the claim the delivery was claimed with.
	Claim string
	// Attempt is the attempt made, or the zero Attempt for none: the deliverer gives
	// the delivery back without making one. Without an attempt, the State is Pending
	// (the delivery is postponed: held back, due again at Due, its attempts and Last
	// untouched) or Failed (it is given up unattempted, as when its endpoint is
	// disabled); Delivered needs an attempt.
	Attempt Attempt
	// State is where the delivery stands now: Delivered, Failed, or Pending again,
	// due at Due.
	State State
	Due   time.Time
}

// Attempted reports whether o tells of an attempt: whether its Attempt.At is set.
func (o Outcome) Attempted() bool { return !o.Attempt.At.IsZero() }

// A Query selects a page of an endpoint's deliveries.
type Query struct {
	// Limit is the most deliveries on the page, 1 to [MaxLimit]; 0 is [DefaultLimit].
	// Another is store.ErrInvalid.
	Limit int
	// Cursor is a Page.Next; empty for the first page.
	Cursor string
}

// A Page is one page of deliveries, newest message first: by Message.At, then by
// Message.ID (compared byte-wise), both decreasing.
type Page struct {
	Deliveries []Delivery
	// Next is the cursor of the next page; empty on the last.
	Next string
}

// A Store keeps the endpoints and the outbox: the messages to deliver and each
// delivery's attempts. It is shared by every instance, so that any instance may
// deliver what another enqueued, and it outlives them: a message enqueued is delivered
// even if the instance that enqueued it is killed.
//
// Stores never read the clock: every time is passed in. Implementations must be safe for
// concurrent use by any number of instances. Every implementation should pass
// storetest.TestWebhooks.
//
// A store refuses what it cannot hold with an error wrapping store.ErrInvalid, and
// stores nothing of it: every store checks endpoints with [CheckEndpoint], what it is
// given to enqueue with [CheckEnqueue], outcomes with [CheckOutcome], claims with
// [CheckClaim], ids, accounts and instants given to look up or decide with [CheckID],
// [CheckAccount] and [CheckTime], and queries with [ParseQuery], so that all refuse the
// same values; [PageOf] makes a page of deliveries as every store does. A method given
// a canceled context returns an error matching it and changes nothing. Instants are
// kept to the nanosecond and returned in UTC.
type Store interface {
	// CreateEndpoint stores a new endpoint, with Revision 1 and no LastDelivered
	// (whatever e says), and returns it. It returns an error wrapping store.ErrConflict if the ID
	// is taken, and ErrTooManyEndpoints if the endpoint's account already has
	// MaxEndpoints. Concurrent creations never take an account past the bound.
	CreateEndpoint(ctx context.Context, e Endpoint) (Endpoint, error)
	// Endpoint returns the endpoint with the ID, or an error wrapping
	// store.ErrNotFound.
	Endpoint(ctx context.Context, id string) (Endpoint, error)
	// Endpoints returns the endpoints of account (the operator's for ""), oldest
	// first (by Created, then ID).
	Endpoints(ctx context.Context, account string) ([]Endpoint, error)
	// UpdateEndpoint replaces the endpoint (not its ID, Account, Created or
	// LastDelivered, which keep their stored values whatever e says) if its stored
	// Revision is e.Revision, and returns it as stored, with the Revision raised by
	// one. It returns an error
	// wrapping store.ErrNotFound if there is no such endpoint, and store.ErrConflict if
	// it changed since it was read.
	UpdateEndpoint(ctx context.Context, e Endpoint) (Endpoint, error)
	// DeleteEndpoint deletes the endpoint and its deliveries, pending or not, claimed
	// or not. Their messages stay, as long as Message.Keep says. It returns an error
	// wrapping store.ErrNotFound if there is no such endpoint.
	DeleteEndpoint(ctx context.Context, id string) error

	// Enqueue stores m with one pending delivery, due at now, for each of endpoints,
	// at once: all of it or nothing. A message whose ID the store remembers (see
	// [Message.Keep]) is not stored again: Enqueue then returns fresh false and
	// changes nothing, so that instances that see the same cause enqueue it once.
	// An endpoint that has MaxPending pending deliveries, or that does not exist
	// (deleted meanwhile), gets none, and is listed in dropped, in the order of
	// endpoints. An endpoint named twice counts once. A message enqueued for no
	// endpoint is remembered all the same. Enqueue does not look at Endpoint.Disabled:
	// the caller picks the endpoints. A message refused (see [CheckMessage]) is not
	// remembered.
	Enqueue(ctx context.Context, m Message, endpoints []string, now time.Time) (fresh bool, dropped []string, err error)
	// Claim leases up to limit pending deliveries due at now (Due not after it), the
	// earliest due first, to a new claim until now+lease, and returns them with the
	// claim (a random token, the same for every delivery of one call) and with their
	// Due moved to the lease's end. A delivery whose lease has not ended is not
	// claimed again: one attempt is made by one deliverer at a time. A delivery whose
	// lease ended without an outcome (its deliverer died) is due again. limit is 1 to
	// [MaxClaim] and lease positive; others are store.ErrInvalid.
	Claim(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]Delivery, error)
	// Record stores the outcome o of a delivery claimed with o.Claim and ends the
	// claim: the delivery is in o.State, and a Pending one is due again at o.Due, not
	// before. An outcome with an attempt (o.Attempted) counts it: Attempts is raised
	// by one and Last set to o.Attempt. One without an attempt counts none and leaves
	// Last as it was: a Pending one postpones the delivery, a Failed one gives it up
	// unattempted (see [Outcome]). A Delivered outcome also sets the endpoint's
	// LastDelivered to o.Attempt.At unless it is later already, in the same atomic
	// change as the delivery's, so that a reader of the endpoint never misses a
	// success recorded before it read. A claim holds its delivery until the delivery
	// is claimed again, resent or recorded: a Record after the lease's end, when
	// nobody claimed the delivery since, is taken. It returns ErrClaimLost if the
	// claim no longer holds the delivery, and an error wrapping store.ErrNotFound if
	// there is no such delivery.
	Record(ctx context.Context, o Outcome) error
	// Deliveries returns a page of the endpoint's deliveries (see [Page]), with
	// their messages and without their claims. An endpoint that does not exist has
	// none: its page is empty, without an error.
	Deliveries(ctx context.Context, endpoint string, q Query) (Page, error)
	// Resend makes the delivery of message to endpoint pending again, due at now,
	// whatever its state, ending any claim of it, and returns it; its attempts are
	// kept. It is not bounded by MaxPending (an endpoint's deliveries are, by its
	// retention). It returns an error wrapping store.ErrNotFound if there is no such
	// delivery.
	Resend(ctx context.Context, endpoint, message string, now time.Time) (Delivery, error)
	// Pending returns the number of pending deliveries of every endpoint, claimed or
	// not.
	Pending(ctx context.Context) (int64, error)
	// Prune deletes the deliveries delivered or failed whose last attempt was before
	// before (or, with no attempt, that were enqueued before it: a delivery given up
	// unattempted is aged by its last attempt too), and the messages
	// left with no delivery (by this Prune or before it) whose Keep is before before,
	// and returns how many deliveries it deleted. Pending deliveries are never pruned.
	// A message's ID pruned may be enqueued again.
	Prune(ctx context.Context, before time.Time) (int64, error)

	// ClaimSweep claims the sweep named name (see [SweepClaim]) for one sweeper until
	// now+lease, unless another claim holds it, and returns the claim with the
	// position the sweep's last RecordSweep stored ("" before the first). It returns
	// ok false, and no error, when another claim holds the sweep: one made within its
	// lease, neither recorded nor claimed again since. A sweep whose lease ended is
	// claimed anew, whoever held it. name is an ID ([CheckID]) and lease positive;
	// others are store.ErrInvalid.
	ClaimSweep(ctx context.Context, name string, now time.Time, lease time.Duration) (c SweepClaim, ok bool, err error)
	// RecordSweep stores position as the position of the sweep named name and ends
	// the claim, if the claim still holds the sweep: a claim holds it until it is
	// recorded or the sweep is claimed again (a RecordSweep after the lease's end,
	// when nobody claimed the sweep since, is taken). It returns ErrClaimLost,
	// storing nothing, if the claim no longer holds it. A position is text of at most
	// [MaxPosition] bytes; another is store.ErrInvalid.
	RecordSweep(ctx context.Context, name, claim, position string) error
}

// MaxPosition is the longest position of a sweep a store holds, in bytes.
const MaxPosition = 1024

// A SweepClaim holds a sweep of the webhooks for one sweeper: a piece of periodic work
// that every instance may do, once at a time, that goes on from where the last one
// left it. The Dispatcher's sweeps of expired keys and of renewed periods are named
// "key.expired" and "period.renewed"; the position is the sweeper's own text, which the
// store keeps as it is.
type SweepClaim struct {
	// Claim is the claim's token, random, for [Store.RecordSweep].
	Claim string
	// Position is where the last sweep left off: its RecordSweep's position, "" for
	// none.
	Position string
}
