package webhook_test

import (
	"testing"

	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/webhook"
)

// TestReviewOperatorDisableSticks: the operator disables an account's endpoint (PATCH
// /admin/v1/accounts/{account}/webhooks/{id}, with a reason: abuse, a receiver that
// holds the deliverer, a URL that attacks a third party), and the account's holder
// enables it again at once (PATCH /v1/account/webhooks/{id} {"disabled": false}),
// or points it elsewhere and tests it: both doors call the same Endpoints.Update,
// which does not know who disabled it. The operator has no way to stop an account's
// endpoint (there is no admin route to delete one either) but closing the account.
//
// Fix: record who disabled an endpoint (owner, operator, service); refuse the owner's
// enabling (409) of one the operator disabled, and let only the operator lift it.
func TestReviewOperatorDisableSticks(t *testing.T) {
	env := newEndpoints(t, nil)
	ctx := t.Context()
	ep := env.create(t, "acme", "https://example.com/in")
	operator := event.Actor{ID: audit.Operator}
	yes, no := true, false
	if _, err := env.m.Update(ctx, operator, "acme", ep.ID, webhook.EndpointChange{Disabled: &yes,
		Reason: "disabled by the operator: abuse"}); err != nil {
		t.Fatal(err)
	}
	got, err := env.m.Update(ctx, holder, "acme", ep.ID, webhook.EndpointChange{Disabled: &no})
	if err == nil {
		t.Errorf("the holder enabled the endpoint the operator disabled: %+v", got)
	} else {
		wantError(t, "the holder enabling it", err, store.ErrConflict)
	}
}

// TestReviewSingleLabelHostRefused: a host name without a dot ("intranet",
// "db-primary") is taken, and the deliverer resolves it with the system resolver's
// search domains: it names a host of the service's own network ("db-primary.corp").
// The dial-time check refuses a private address, but not an internal service on a
// public address (split-horizon DNS, a cloud host whose firewall admits the service's
// egress address), and the lookups themselves probe the internal zone.
//
// Fix: refuse a host without a dot (as localhost is refused), and resolve names as
// rooted ("name.") so that no search domain applies.
func TestReviewSingleLabelHostRefused(t *testing.T) {
	env := newEndpoints(t, nil)
	for _, url := range []string{"https://intranet/hook", "http://db-primary:8080/"} {
		_, err := env.m.Create(t.Context(), holder, "acme", url, nil)
		if err == nil {
			t.Errorf("%s: taken", url)
			continue
		}
		wantError(t, url, err, store.ErrInvalid, "url")
	}
}
