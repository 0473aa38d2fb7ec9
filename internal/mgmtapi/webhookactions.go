package mgmtapi

import (
	"context"

	"github.com/tollgate-dev/tollgate/webhook"
)

// HolderDisabled is the reason recorded when an account's holder disables one of the
// account's endpoints (through the account holders' API or the dashboard).
const HolderDisabled = "disabled by the account holder"

// WebhookActions are the changes an owner makes to its webhook endpoints, with the
// rules every door that serves them keeps (the account holders' API, the admin API,
// the dashboard), so that they cannot differ from door to door:
//
//   - what is refused whatever the endpoint (a URL, event types) is refused before
//     anything is read or spent;
//   - a request that names no endpoint of the owner spends nothing;
//   - a creation, a change of the URL or the types, enabling, a rotation, a test
//     message and a resend spend the owner's budget (WebhookOwner.Spend) once judged
//     valid; deleting and disabling never do, so that an owner may always stop
//     deliveries; a test or a resend to a disabled endpoint, and the holder's
//     enabling of an endpoint the operator disabled, are refused without spending;
//   - the operator's changes (WebhookOwner.Operator) are the operator's, whatever the
//     request says: its disabling of an account's endpoint sticks (see
//     webhook.Endpoints.Update).
//
// Its errors are those of webhook.Endpoints (pass them to [WebhookError]) and those of
// the budget, [*tollgate.Error] values.
type WebhookActions struct {
	Endpoints *webhook.Endpoints
	Owner     WebhookOwner
}

// spend spends the owner's budget, if it has one.
func (a WebhookActions) spend(ctx context.Context) error {
	if a.Owner.Spend == nil {
		return nil
	}
	return a.Owner.Spend(ctx)
}

// existing spends the owner's budget for a request about its endpoint id, once the
// endpoint is found, and returns it (its secrets masked).
func (a WebhookActions) existing(ctx context.Context, id string) (webhook.Endpoint, error) {
	e, err := a.Endpoints.Get(ctx, a.Owner.Account, id)
	if err != nil {
		return webhook.Endpoint{}, err
	}
	return e, a.spend(ctx)
}

// Create creates an endpoint that receives the events of the given types (none:
// every type) at url, and returns it with its secret in full (see
// [webhook.Endpoints.Create]).
func (a WebhookActions) Create(ctx context.Context, url string, events []string) (webhook.Endpoint, error) {
	if err := a.Endpoints.Check(webhook.EndpointChange{URL: &url, Events: &events}); err != nil {
		return webhook.Endpoint{}, err
	}
	if err := a.spend(ctx); err != nil {
		return webhook.Endpoint{}, err
	}
	return a.Endpoints.Create(ctx, a.Owner.Actor, a.Owner.Account, url, events)
}

// Update changes the endpoint id as c says (see [webhook.Endpoints.Update]), made by
// the operator if the owner is (WebhookOwner.Operator), whatever c says. An account's
// holder enabling an endpoint that the operator disabled is refused
// (store.ErrConflict), without spending.
func (a WebhookActions) Update(ctx context.Context, id string, c webhook.EndpointChange) (webhook.Endpoint, error) {
	if err := a.Endpoints.Check(c); err != nil {
		return webhook.Endpoint{}, err
	}
	c.ByOperator = a.Owner.Operator
	// Disabling alone spends nothing: an owner may always stop deliveries.
	if c.URL != nil || c.Events != nil || c.Disabled != nil && !*c.Disabled {
		e, err := a.Endpoints.Get(ctx, a.Owner.Account, id)
		if err != nil {
			return webhook.Endpoint{}, err
		}
		if !lockedByOperator(e, c) {
			if err := a.spend(ctx); err != nil {
				return webhook.Endpoint{}, err
			}
		}
	}
	return a.Endpoints.Update(ctx, a.Owner.Actor, a.Owner.Account, id, c)
}

// lockedByOperator reports whether c asks to enable e, an account's endpoint that the
// operator disabled, for its holder: Endpoints.Update refuses it.
func lockedByOperator(e webhook.Endpoint, c webhook.EndpointChange) bool {
	return c.Disabled != nil && !*c.Disabled && !c.ByOperator && e.Account != "" &&
		!e.Disabled.IsZero() && e.DisabledBy == webhook.DisabledByOperator
}

// Delete deletes the endpoint id and its deliveries.
func (a WebhookActions) Delete(ctx context.Context, id string) error {
	return a.Endpoints.Delete(ctx, a.Owner.Actor, a.Owner.Account, id)
}

// RotateSecret gives the endpoint id a new secret, and returns it with the new secret
// in full (see [webhook.Endpoints.RotateSecret]).
func (a WebhookActions) RotateSecret(ctx context.Context, id string) (webhook.Endpoint, error) {
	if _, err := a.existing(ctx, id); err != nil {
		return webhook.Endpoint{}, err
	}
	return a.Endpoints.RotateSecret(ctx, a.Owner.Actor, a.Owner.Account, id)
}

// sending finds the endpoint id for a message to send it, and spends the owner's
// budget if the endpoint can be sent one (a disabled one is then refused without).
func (a WebhookActions) sending(ctx context.Context, id string) error {
	e, err := a.Endpoints.Get(ctx, a.Owner.Account, id)
	if err != nil || !e.Disabled.IsZero() {
		return err
	}
	return a.spend(ctx)
}

// SendTest sends the endpoint id a test message, and no other endpoint, and returns
// its delivery, pending (see [webhook.Endpoints.SendTest]).
func (a WebhookActions) SendTest(ctx context.Context, id string) (webhook.Delivery, error) {
	if err := a.sending(ctx, id); err != nil {
		return webhook.Delivery{}, err
	}
	return a.Endpoints.SendTest(ctx, a.Owner.Actor, a.Owner.Account, id)
}

// Resend delivers the message again to the endpoint id, and returns the delivery,
// pending (see [webhook.Endpoints.Resend]).
func (a WebhookActions) Resend(ctx context.Context, id, message string) (webhook.Delivery, error) {
	if err := a.sending(ctx, id); err != nil {
		return webhook.Delivery{}, err
	}
	return a.Endpoints.Resend(ctx, a.Owner.Account, id, message)
}
