package webhook

import (
	"context"
	"errors"
	"fmt"

	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/store"
)

// EndpointTest is the type of the message that [Endpoints.SendTest] sends to one
// endpoint when its owner asks: the endpoint receives it whatever its types, and no
// other endpoint does. It is not one of [Types]: no endpoint subscribes to it.
const EndpointTest = "endpoint.test"

// EndpointTestData is the data of endpoint.test: the endpoint's owner asked for a test
// message, to see that the endpoint receives deliveries and checks their signatures.
type EndpointTestData struct {
	Common
	// Endpoint is the endpoint's id.
	Endpoint string `json:"endpoint"`
}

// Type returns [EndpointTest].
func (EndpointTestData) Type() string { return EndpointTest }

func (d EndpointTestData) bounded() Data {
	d.Common, d.Endpoint = d.Common.bound(), clip(d.Endpoint, MaxIDField)
	return d
}

// SendTest enqueues a message of the type [EndpointTest] for the endpoint of account
// with the given id, and for no other, and returns its delivery, pending. actor, who
// asked, is named in the message's data. A disabled endpoint is refused
// (store.ErrConflict: enable it first), and so is one that has [MaxPending] deliveries
// pending.
func (m *Endpoints) SendTest(ctx context.Context, actor event.Actor, account, id string) (Delivery, error) {
	e, err := m.enabled(ctx, account, id, "test it")
	if err != nil {
		return Delivery{}, err
	}
	now := m.now()
	msg, err := NewMessage(now, EndpointTestData{Common: Common{ID: NewID(), Account: e.Account, Actor: actor.ID}, Endpoint: e.ID}, now)
	if err != nil {
		return Delivery{}, &Error{Kind: store.ErrInvalid, Message: "the test message cannot be made for this endpoint", Err: err}
	}
	_, dropped, err := m.store.Enqueue(ctx, msg, []string{e.ID}, now)
	switch {
	case err != nil:
		return Delivery{}, m.storeError(ctx, "enqueuing a test message", err)
	case len(dropped) > 0:
		return Delivery{}, &Error{Kind: store.ErrConflict, Message: fmt.Sprintf(
			"the webhook endpoint %q has %d deliveries pending, the most it may have (or it was deleted meanwhile): let them be delivered before you test it",
			e.ID, MaxPending)}
	}
	m.wake()
	return Delivery{Endpoint: e.ID, Message: msg, State: Pending, Due: now}, nil
}

// Deliveries returns a page of the deliveries of the endpoint of account with the given
// id, newest message first (see [Query] for its limit and cursor).
func (m *Endpoints) Deliveries(ctx context.Context, account, id string, q Query) (Page, error) {
	if q.Limit < 0 || q.Limit > MaxLimit {
		return Page{}, invalid(fmt.Sprintf("limit: give 1 to %d, or none for %d", MaxLimit, DefaultLimit))
	}
	e, err := m.endpoint(ctx, account, id)
	if err != nil {
		return Page{}, err
	}
	p, err := m.store.Deliveries(ctx, e.ID, q)
	switch {
	case errors.Is(err, store.ErrInvalid) || errors.Is(err, ErrBadCursor):
		return Page{}, &Error{Kind: store.ErrInvalid, Err: err,
			Message: "cursor is not one a listing of the endpoint's deliveries returned: pass its next as it is, or start from the first page"}
	case errors.Is(err, store.ErrNotFound):
		return Page{}, notFound(account, id, err)
	case err != nil:
		return Page{}, m.storeError(ctx, "listing deliveries", err)
	}
	return p, nil
}

// Resend makes the delivery of the message with the given id to the endpoint of account
// with the given id pending again, due now, whatever its state, and returns it: the
// message is delivered again, with the same webhook-id, signed anew. A disabled
// endpoint is refused (store.ErrConflict: enable it first).
func (m *Endpoints) Resend(ctx context.Context, account, id, message string) (Delivery, error) {
	if err := checkID("message_id", message); err != nil {
		return Delivery{}, err
	}
	e, err := m.enabled(ctx, account, id, "send it a delivery again")
	if err != nil {
		return Delivery{}, err
	}
	d, err := m.store.Resend(ctx, e.ID, message, m.now())
	switch {
	case errors.Is(err, store.ErrNotFound):
		return Delivery{}, &Error{Kind: store.ErrNotFound, Err: err, Message: fmt.Sprintf(
			"the webhook endpoint %q has no delivery of the message %q: list its deliveries for their message ids (a delivery is kept for a while after its last attempt)",
			e.ID, message)}
	case err != nil:
		return Delivery{}, m.storeError(ctx, "resending a delivery", err)
	}
	m.wake()
	return d, nil
}

// wake tells the deliverer, if one is wired, that a delivery is due now.
func (m *Endpoints) wake() {
	if m.enqueued != nil {
		m.enqueued()
	}
}

// enabled returns the endpoint of account with the given id, or a store.ErrConflict if
// it is disabled, whose message says to enable it before doing what.
func (m *Endpoints) enabled(ctx context.Context, account, id, what string) (Endpoint, error) {
	e, err := m.endpoint(ctx, account, id)
	if err != nil {
		return Endpoint{}, err
	}
	switch {
	case e.Disabled.IsZero():
	case e.DisabledBy == DisabledByOperator && e.Account != "":
		return Endpoint{}, &Error{Kind: store.ErrConflict, Message: fmt.Sprintf(
			"the webhook endpoint %q was disabled by the operator (%s): only the operator can enable it again, which it must be before you %s",
			e.ID, e.DisabledReason, what)}
	default:
		return Endpoint{}, &Error{Kind: store.ErrConflict, Message: fmt.Sprintf(
			"the webhook endpoint %q is disabled (%s): enable it (disabled false) before you %s", e.ID, e.DisabledReason, what)}
	}
	return e, nil
}
