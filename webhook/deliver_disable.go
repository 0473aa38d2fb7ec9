package webhook

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate/store"
)

// maxDisableTries is how many times a deliverer reads an endpoint again when another
// change of it came between its reading and its disabling.
const maxDisableTries = 3

// disableIfFailing disables ep, whose delivery of m failed its schedule's last
// attempt (recorded as o), if no attempt to ep succeeded since m was made: if its
// LastDelivered, read now that o is recorded, is before m.At.
func (d *Deliverer) disableIfFailing(ctx context.Context, ep Endpoint, m Message, o Outcome) {
	fresh, err := d.store.Endpoint(ctx, ep.ID)
	switch {
	case ctx.Err() != nil, errors.Is(err, store.ErrNotFound):
		return
	case err != nil:
		d.stats.storeErrors.Add(1)
		d.log.Warn("webhook: cannot read an endpoint to tell whether it fails every delivery; it stays enabled",
			"endpoint", ep.ID, "error", err)
		return
	case fresh.URL != ep.URL:
		return // the failures were another URL's
	}
	reason := fmt.Sprintf("no delivery to the endpoint succeeded since %s, and the delivery of %s failed every attempt of the retry schedule; fix the endpoint, then enable it again",
		m.At.UTC().Format(time.RFC3339), m.ID)
	d.disable(ctx, fresh, DisabledFailing, reason, o, m.At)
}

// disable disables ep for reason, after the attempt recorded as o, unless it is
// disabled already, its URL changed since it was read (the failures were another
// URL's), or, with a since, an attempt to it succeeded since then; and tells
// OnDisabled.
func (d *Deliverer) disable(ctx context.Context, ep Endpoint, cause DisableCause, reason string, o Outcome, since time.Time) {
	url := ep.URL
	for range maxDisableTries {
		if !ep.Disabled.IsZero() || ep.URL != url || !since.IsZero() && !ep.LastDelivered.Before(since) {
			return
		}
		change := ep
		change.Disabled, change.DisabledReason, change.DisabledBy = d.now(), reason, DisabledByDelivery
		stored, err := d.store.UpdateEndpoint(ctx, change)
		switch {
		case err == nil:
			d.stats.disabled.Add(1)
			d.log.Info("webhook: disabled an endpoint", "endpoint", ep.ID, "account", ep.Account,
				"cause", cause.String(), "message", o.Message, "reason", reason)
			d.tell(ctx, DisabledEndpoint{Endpoint: stored.ID, Account: stored.Account, URL: stored.URL,
				At: stored.Disabled, Reason: stored.DisabledReason, Cause: cause, Message: o.Message, Last: o.Attempt})
			return
		case ctx.Err() != nil, errors.Is(err, store.ErrNotFound):
			return
		case !errors.Is(err, store.ErrConflict):
			d.stats.storeErrors.Add(1)
			d.log.Warn("webhook: cannot disable an endpoint", "endpoint", ep.ID, "cause", cause.String(), "error", err)
			return
		}
		fresh, err := d.store.Endpoint(ctx, ep.ID)
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, store.ErrNotFound) {
				d.stats.storeErrors.Add(1)
				d.log.Warn("webhook: cannot read an endpoint to disable it", "endpoint", ep.ID, "error", err)
			}
			return
		}
		ep = fresh
	}
	d.log.Warn("webhook: an endpoint kept changing while it was being disabled; it stays enabled", "endpoint", ep.ID, "cause", cause.String())
}

// tell tells OnDisabled of e, if it is set, keeping a panic of it from the deliverer.
func (d *Deliverer) tell(ctx context.Context, e DisabledEndpoint) {
	if d.onDisabled == nil {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			d.log.Error("webhook: OnDisabled panicked", "endpoint", e.Endpoint, "panic", r)
		}
	}()
	d.onDisabled(ctx, e)
}
