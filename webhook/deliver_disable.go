package webhook

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate/store"
)

// maxDisableScan is the most deliveries a deliverer looks at for a success before it
// disables an endpoint whose delivery failed its whole schedule.
const maxDisableScan = 1000

// maxDisableTries is how many times a deliverer reads an endpoint again when another
// change of it came between its reading and its disabling.
const maxDisableTries = 3

// longest returns the longest a delivery may stay pending, from its first attempt to
// its last, without being resent: every wait of the schedule jittered to its longest,
// or put off by a Retry-After to the longest allowed.
func (d *Deliverer) longest() time.Duration {
	var total time.Duration
	for _, w := range d.schedule {
		if d.jitter > 0 {
			w = time.Duration(float64(w) * (1 + d.jitter))
		}
		total += max(w, d.maxRetryAfter)
	}
	return total
}

// disableIfFailing disables ep, whose delivery of m failed its schedule's last
// attempt (recorded as o), if no delivery to ep succeeded since m was made: see
// [Deliverer] for where it looks.
func (d *Deliverer) disableIfFailing(ctx context.Context, ep Endpoint, m Message, o Outcome) {
	since := m.At
	oldest := since.Add(-d.longest())
	q := Query{Limit: 100}
	for seen := 0; seen < maxDisableScan; {
		page, err := d.store.Deliveries(ctx, ep.ID, q)
		if err != nil {
			if ctx.Err() == nil {
				d.stats.storeErrors.Add(1)
				d.log.Warn("webhook: cannot list an endpoint's deliveries to tell whether it fails them all; it stays enabled",
					"endpoint", ep.ID, "error", err)
			}
			return
		}
		for _, x := range page.Deliveries {
			if x.Message.At.Before(oldest) {
				page.Next = ""
				break
			}
			if x.State == Delivered && !x.Last.At.Before(since) {
				return
			}
			seen++
		}
		if page.Next == "" {
			break
		}
		q.Cursor = page.Next
	}
	reason := fmt.Sprintf("no delivery to the endpoint succeeded since %s, and the delivery of %s failed every attempt of the retry schedule; fix the endpoint, then enable it again",
		since.UTC().Format(time.RFC3339), m.ID)
	d.disable(ctx, ep, DisabledFailing, reason, o)
}

// disable disables ep for reason, after the attempt recorded as o, unless it is
// disabled already or its URL changed since it was read (the failures were another
// URL's); and tells OnDisabled.
func (d *Deliverer) disable(ctx context.Context, ep Endpoint, cause DisableCause, reason string, o Outcome) {
	url := ep.URL
	for range maxDisableTries {
		if !ep.Disabled.IsZero() || ep.URL != url {
			return
		}
		change := ep
		change.Disabled, change.DisabledReason = d.now(), reason
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
