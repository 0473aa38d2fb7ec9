package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/tollgate-dev/tollgate/webhook/signature"
)

// A WebhookEvent is an event a service delivered to a webhook endpoint, verified.
type WebhookEvent struct {
	// ID is the message's id (the webhook-id header, and the data's "id"): the same
	// on every attempt to deliver it. A message may be delivered more than once, so
	// a receiver that must act once remembers the ids it has handled.
	ID string
	// Type is the event type, such as "key.rotated" (docs/webhooks.md lists them).
	Type string
	// Timestamp is when the event happened, on the service's clock.
	Timestamp time.Time
	// Data is the event's data: a JSON object whose members depend on Type.
	Data json.RawMessage
}

// Decode decodes the event's data into v.
func (e WebhookEvent) Decode(v any) error {
	if err := json.Unmarshal(e.Data, v); err != nil {
		return fmt.Errorf("client: decoding the data of a %s webhook: %w", e.Type, err)
	}
	return nil
}

// The errors of [VerifyWebhook], for errors.Is. A receiver answers a request that
// fails to verify with a 4xx status and does nothing with it.
var (
	// ErrWebhookHeaders: the request lacks webhook-id, webhook-timestamp or
	// webhook-signature. It was not sent by the service.
	ErrWebhookHeaders = signature.ErrMissingHeaders
	// ErrWebhookSignature: no signature of the request matches the body, id and
	// timestamp with the secret: the request was changed or not sent by the
	// service, the secret is not the endpoint's, or the body was not passed exactly
	// as received.
	ErrWebhookSignature = signature.ErrBadSignature
	// ErrWebhookTooOld: the request was signed longer ago than the tolerance: a
	// replay, or the receiver's clock is behind.
	ErrWebhookTooOld = signature.ErrTooOld
	// ErrWebhookTooNew: the request was signed further ahead than the tolerance: the
	// receiver's clock is behind.
	ErrWebhookTooNew = signature.ErrTooNew
	// ErrWebhookSecret: the secret given is not one ("whsec_" and base64).
	ErrWebhookSecret = signature.ErrMalformedSecret
)

// DefaultWebhookTolerance is how far a webhook's timestamp may be from now, either
// way, when [VerifyWebhook] is given no tolerance.
const DefaultWebhookTolerance = signature.DefaultTolerance

// VerifyWebhook checks a request delivered to a webhook endpoint and returns its
// event. secret is the endpoint's signing secret ("whsec_..."), header and body the
// request's, the body exactly as received; now is the time of receipt (the zero time
// for the current time), and tolerance how far the request's timestamp may be from
// now, either way (0 for [DefaultWebhookTolerance]).
//
// It checks that one of the signatures of the webhook-signature header (one per
// secret while the endpoint's secret is being replaced) is the body's, id's and
// timestamp's by secret, in constant time, then that the timestamp is within
// tolerance, then decodes the body {"type", "timestamp", "data"}. The error wraps
// [ErrWebhookHeaders], [ErrWebhookSignature], [ErrWebhookTooOld], [ErrWebhookTooNew]
// or [ErrWebhookSecret]; a body that is signed but not an event is an error of its own.
func VerifyWebhook(secret string, header http.Header, body []byte, now time.Time, tolerance time.Duration) (WebhookEvent, error) {
	if now.IsZero() {
		now = time.Now()
	}
	if err := signature.Verify(secret, header, body, now, tolerance); err != nil {
		return WebhookEvent{}, err
	}
	var b struct {
		Type      string          `json:"type"`
		Timestamp time.Time       `json:"timestamp"`
		Data      json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return WebhookEvent{}, fmt.Errorf("client: the webhook's body is not an event: %w", err)
	}
	if b.Type == "" || b.Timestamp.IsZero() || !bytes.HasPrefix(b.Data, []byte("{")) {
		return WebhookEvent{}, fmt.Errorf(`client: the webhook's body is not an event: it needs "type", "timestamp" and a "data" object`)
	}
	return WebhookEvent{ID: header.Get(signature.HeaderID), Type: b.Type, Timestamp: b.Timestamp, Data: b.Data}, nil
}
