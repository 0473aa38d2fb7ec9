package webhook

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
)

// Redacted is what an [Endpoint] logged or printed shows in place of a secret it
// holds (Secret, PreviousSecret): neither the secret nor a part of it.
const Redacted = "[redacted]"

// Interface guards: an Endpoint never shows its secrets in the logs nor in print.
var (
	_ slog.LogValuer = Endpoint{}
	_ fmt.Formatter  = Endpoint{}
	_ json.Marshaler = Endpoint{}
)

// redacted returns e with its secrets replaced by [Redacted] (an empty one stays
// empty, so that a reader tells "no previous secret" from one).
func (e Endpoint) redacted() Endpoint {
	if e.Secret != "" {
		e.Secret = Redacted
	}
	if e.PreviousSecret != "" {
		e.PreviousSecret = Redacted
	}
	return e
}

// LogValue returns the endpoint as log/slog logs it: a group of its fields, its
// secrets replaced by [Redacted], so that a secret is never logged, whatever the
// handler.
func (e Endpoint) LogValue() slog.Value {
	e = e.redacted()
	attrs := []slog.Attr{
		slog.String("id", e.ID), slog.String("account", e.Account), slog.String("url", e.URL),
		slog.Any("types", e.Types), slog.String("secret", e.Secret),
	}
	if e.PreviousSecret != "" {
		attrs = append(attrs, slog.String("previous_secret", e.PreviousSecret), slog.Time("previous_until", e.PreviousUntil))
	}
	if !e.Disabled.IsZero() {
		attrs = append(attrs, slog.Time("disabled", e.Disabled), slog.String("disabled_reason", e.DisabledReason),
			slog.String("disabled_by", e.DisabledBy))
	}
	attrs = append(attrs, slog.Time("created", e.Created))
	if !e.LastDelivered.IsZero() {
		attrs = append(attrs, slog.Time("last_delivered", e.LastDelivered))
	}
	attrs = append(attrs, slog.Int64("revision", e.Revision))
	return slog.GroupValue(attrs...)
}

// endpointFields is an Endpoint's fields without its methods, for Format.
type endpointFields Endpoint

// Format prints the endpoint as fmt prints a struct, for every verb and flag (%v,
// %+v, %#v, %s, ...), its secrets replaced by [Redacted]: printing an endpoint, or
// a value that holds one, never shows a secret.
func (e Endpoint) Format(f fmt.State, verb rune) {
	out := fmt.Sprintf(fmt.FormatString(f, verb), endpointFields(e.redacted()))
	if verb == 'v' && f.Flag('#') {
		out = strings.Replace(out, "webhook.endpointFields{", "webhook.Endpoint{", 1)
	}
	fmt.Fprint(f, out)
}

// MarshalJSON encodes the endpoint as encoding/json encodes a struct (its fields by
// their Go names), its secrets replaced by [Redacted]: a log handler that encodes
// values as JSON (slog.JSONHandler, for an endpoint inside another value) never shows
// a secret. It is for logs and diagnostics, not for keeping endpoints: a [Store] keeps
// the secrets by its own encoding.
func (e Endpoint) MarshalJSON() ([]byte, error) {
	return json.Marshal(endpointFields(e.redacted()))
}
