// Package signature signs and verifies webhook deliveries by the Standard Webhooks
// scheme, version 1 (symmetric): the sender signs "<webhook-id>.<webhook-timestamp>.<body>"
// with HMAC-SHA256 and the endpoint's secret, and sends the signature in the
// webhook-signature header as "v1,<base64>"; the receiver computes it again and
// compares.
//
// A secret is "whsec_" followed by the standard base64 (with padding) of its bytes:
// [NewSecret] makes one of 32 random bytes; [ParseSecret] reads one of 24 to 64 bytes,
// the sizes the scheme allows. While an endpoint's secret is being replaced, a delivery
// is signed with both, one token each, separated by a space; a receiver that holds
// either accepts it.
//
// The package imports nothing of the server, so that the Go client (package client)
// and any receiver may use it. The HMAC and the constant-time comparison of each token
// are those of the scheme's official Go library.
package signature

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// The headers of a delivery.
const (
	// HeaderID carries the message's id, the same on every attempt and every
	// endpoint: a receiver that has seen it may ignore the message.
	HeaderID = "webhook-id"
	// HeaderTimestamp carries the moment of the attempt, in Unix seconds.
	HeaderTimestamp = "webhook-timestamp"
	// HeaderSignature carries the signatures: "v1,<base64>", one per secret,
	// separated by spaces.
	HeaderSignature = "webhook-signature"
)

// SecretPrefix begins every secret.
const SecretPrefix = "whsec_"

// SecretBytes is the size of the secrets [NewSecret] makes; [ParseSecret] takes from
// 24 to 64 bytes.
const SecretBytes = 32

const minSecretBytes, maxSecretBytes = 24, 64

// DefaultTolerance is how far a delivery's timestamp may be from the receiver's clock,
// either way, when [Verify] is given no tolerance.
const DefaultTolerance = 5 * time.Minute

// The errors of [ParseSecret], [Sign] and [Verify]. Verify's wrap one of them, with
// what was wrong.
var (
	// ErrMalformedSecret: the secret is not one: never the secret itself in a
	// message, so that a log does not keep it.
	ErrMalformedSecret = errors.New(`webhook: the secret is malformed: it is "whsec_" followed by the base64 of 24 to 64 bytes; copy it whole, as the endpoint shows it`)
	// ErrMissingHeaders: a header of the scheme is missing from the request.
	ErrMissingHeaders = errors.New("webhook: the request lacks a header of the signature: it needs webhook-id, webhook-timestamp and webhook-signature")
	// ErrBadSignature: no signature of the request is the body's, id's and
	// timestamp's with the secret: they were changed, the request was not sent by the
	// service, or the secret is not the endpoint's.
	ErrBadSignature = errors.New("webhook: no signature of the request matches: check that the secret is the endpoint's and that the body is passed exactly as received")
	// ErrTooOld: the request was signed longer ago than the tolerance: a replay, or
	// the receiver's clock is behind.
	ErrTooOld = errors.New("webhook: the request's timestamp is too old")
	// ErrTooNew: the request was signed further ahead than the tolerance: the
	// receiver's clock is behind the sender's.
	ErrTooNew = errors.New("webhook: the request's timestamp is too far in the future")
)

// NewSecret returns a new secret: "whsec_" and the base64 of [SecretBytes] random bytes.
func NewSecret() (string, error) {
	b := make([]byte, SecretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("webhook: no randomness for a secret: %w", err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(b), nil
}

// ParseSecret returns the bytes of a secret: "whsec_" followed by the standard base64,
// with its padding, of 24 to 64 bytes. Any other string is [ErrMalformedSecret].
func ParseSecret(secret string) ([]byte, error) {
	enc, ok := strings.CutPrefix(secret, SecretPrefix)
	if !ok {
		return nil, ErrMalformedSecret
	}
	key, err := base64.StdEncoding.Strict().DecodeString(enc)
	if err != nil || len(key) < minSecretBytes || len(key) > maxSecretBytes || strings.ContainsAny(enc, "\r\n") {
		return nil, ErrMalformedSecret
	}
	return key, nil
}

// Sign returns the webhook-signature of body, sent as message id at at: "v1,<base64>"
// for each secret, in their order, separated by spaces. It fails if a secret is
// malformed, if there is none, or if id is empty or holds a dot or a space (which the
// scheme's signed content and header cannot carry).
func Sign(id string, at time.Time, body []byte, secrets ...string) (string, error) {
	if id == "" || strings.ContainsAny(id, ". ") {
		return "", fmt.Errorf("webhook: the message id %q cannot be signed: it must be non-empty, without dots or spaces", id)
	}
	if len(secrets) == 0 {
		return "", errors.New("webhook: nothing to sign with: give the endpoint's secret")
	}
	tokens := make([]string, len(secrets))
	for i, s := range secrets {
		wh, err := webhookOf(s)
		if err != nil {
			return "", err
		}
		if tokens[i], err = wh.Sign(id, at, body); err != nil {
			return "", fmt.Errorf("webhook: signing: %w", err)
		}
	}
	return strings.Join(tokens, " "), nil
}

// Verify checks a delivery received at now: that its headers are there, that one of
// the signatures of webhook-signature is the body's (with the id and timestamp of its
// headers) by secret, compared in constant time, and then that its timestamp is within
// tolerance of now, either way (a tolerance of 0 or less is [DefaultTolerance]). body
// must be the request's body as received, before any parsing.
//
// The error wraps [ErrMalformedSecret], [ErrMissingHeaders], [ErrBadSignature] (also
// for a timestamp that is not Unix seconds), [ErrTooOld] or [ErrTooNew]. The signature
// is checked before the timestamp, so that a timestamp too old or too new is reported
// only for a request the service signed.
func Verify(secret string, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	wh, err := webhookOf(secret)
	if err != nil {
		return err
	}
	var missing []string
	for _, name := range []string{HeaderID, HeaderTimestamp, HeaderSignature} {
		if h.Get(name) == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w (missing: %s)", ErrMissingHeaders, strings.Join(missing, ", "))
	}
	ts := h.Get(HeaderTimestamp)
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || strconv.FormatInt(sec, 10) != ts || sec < 0 {
		return fmt.Errorf("%w (webhook-timestamp is not a time in Unix seconds)", ErrBadSignature)
	}
	if strings.Contains(h.Get(HeaderID), ".") {
		// The signed content is "id.timestamp.body": an id with a dot would let its
		// parts be shifted between the three.
		return fmt.Errorf("%w (webhook-id holds a dot)", ErrBadSignature)
	}
	if err := wh.VerifyIgnoringTimestamp(body, h); err != nil {
		return ErrBadSignature
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	at := time.Unix(sec, 0)
	switch {
	case now.Sub(at) > tolerance:
		return fmt.Errorf("%w: it was signed at %s, more than %s before %s (a replay, or this clock is behind)",
			ErrTooOld, at.UTC().Format(time.RFC3339), tolerance, now.UTC().Format(time.RFC3339))
	case at.Sub(now) > tolerance:
		return fmt.Errorf("%w: it was signed at %s, more than %s after %s (this clock is behind)",
			ErrTooNew, at.UTC().Format(time.RFC3339), tolerance, now.UTC().Format(time.RFC3339))
	}
	return nil
}

// webhookOf returns the scheme's signer of secret.
func webhookOf(secret string) (*standardwebhooks.Webhook, error) {
	key, err := ParseSecret(secret)
	if err != nil {
		return nil, err
	}
	wh, err := standardwebhooks.NewWebhookRaw(key)
	if err != nil {
		return nil, ErrMalformedSecret // an empty key, which ParseSecret refuses
	}
	return wh, nil
}
