package client_test

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/client"
	"github.com/tollgate-dev/tollgate/webhook/signature"
)

// The Standard Webhooks scheme's published example.
const (
	vectorSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorBody   = `{"test": 2432232314}`
	vectorSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	vectorTime   = 1614265330
)

// TestVerifyWebhookVector checks the published example: its signature verifies (its
// body is not an event, which is the only thing VerifyWebhook holds against it).
func TestVerifyWebhookVector(t *testing.T) {
	h := http.Header{}
	h.Set("webhook-id", vectorID)
	h.Set("webhook-timestamp", strconv.Itoa(vectorTime))
	h.Set("webhook-signature", vectorSig)
	_, err := client.VerifyWebhook(vectorSecret, h, []byte(vectorBody), time.Unix(vectorTime, 0), 0)
	if err == nil || !strings.Contains(err.Error(), "not an event") {
		t.Fatalf("VerifyWebhook of the published example = %v, want a body that is not an event", err)
	}
	for _, sentinel := range []error{client.ErrWebhookSignature, client.ErrWebhookHeaders, client.ErrWebhookTooOld, client.ErrWebhookTooNew, client.ErrWebhookSecret} {
		if errors.Is(err, sentinel) {
			t.Errorf("VerifyWebhook of the published example = %v, want it verified", err)
		}
	}
	h.Set("webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OF=")
	if _, err := client.VerifyWebhook(vectorSecret, h, []byte(vectorBody), time.Unix(vectorTime, 0), 0); !errors.Is(err, client.ErrWebhookSignature) {
		t.Errorf("VerifyWebhook of the example with its signature changed = %v, want ErrWebhookSignature", err)
	}
}

func TestVerifyWebhook(t *testing.T) {
	const (
		id   = "msg_2c4h2h6rboqzu7ft3vxtqakr4e"
		body = `{"type":"key.rotated","timestamp":"2026-03-01T12:00:00Z","data":{"id":"msg_2c4h2h6rboqzu7ft3vxtqakr4e","account":"acme","actor":"operator","key":"key_1"}}`
	)
	other, err := signature.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 1, 12, 0, 5, 0, time.UTC)
	sign := func(id string, at time.Time, body string, secrets ...string) string {
		s, err := signature.Sign(id, at, []byte(body), secrets...)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	type request struct {
		id, timestamp, signature, body string
	}
	valid := request{id, strconv.FormatInt(at.Unix(), 10), sign(id, at, body, vectorSecret), body}
	for _, tc := range []struct {
		name      string
		secret    string
		req       request
		now       time.Time
		tolerance time.Duration
		want      error // nil: verified
	}{
		{name: "valid", req: valid, now: at},
		{name: "the zero time is now", req: request{id, strconv.FormatInt(time.Now().Unix(), 10), sign(id, time.Now(), body, vectorSecret), body}},
		{name: "rotation, the new secret first", req: request{id, valid.timestamp, sign(id, at, body, vectorSecret, other), body}, now: at},
		{name: "rotation, the old secret first", req: request{id, valid.timestamp, sign(id, at, body, other, vectorSecret), body}, now: at},
		{name: "rotation, verified with the other secret", secret: other, req: request{id, valid.timestamp, sign(id, at, body, vectorSecret, other), body}, now: at},
		{name: "another secret", secret: other, req: valid, now: at, want: client.ErrWebhookSignature},
		{name: "two tokens, neither the secret's", secret: other, req: request{id, valid.timestamp, vectorSig + " " + vectorSig, body}, now: at, want: client.ErrWebhookSignature},
		{name: "tampered body", req: request{id, valid.timestamp, valid.signature, strings.Replace(body, "key_1", "key_2", 1)}, now: at, want: client.ErrWebhookSignature},
		{name: "body with a trailing newline", req: request{id, valid.timestamp, valid.signature, body + "\n"}, now: at, want: client.ErrWebhookSignature},
		{name: "tampered id", req: request{"msg_2c4h2h6rboqzu7ft3vxtqakr4f", valid.timestamp, valid.signature, body}, now: at, want: client.ErrWebhookSignature},
		{name: "tampered timestamp", req: request{id, strconv.FormatInt(at.Unix()+1, 10), valid.signature, body}, now: at, want: client.ErrWebhookSignature},
		{name: "an unknown version", req: request{id, valid.timestamp, "v1a," + strings.TrimPrefix(valid.signature, "v1,"), body}, now: at, want: client.ErrWebhookSignature},
		{name: "at the tolerance, after", req: valid, now: at.Add(5 * time.Minute)},
		{name: "at the tolerance, before", req: valid, now: at.Add(-5 * time.Minute)},
		{name: "replayed past the tolerance", req: valid, now: at.Add(5*time.Minute + time.Second), want: client.ErrWebhookTooOld},
		{name: "replayed a day later", req: valid, now: at.Add(24 * time.Hour), want: client.ErrWebhookTooOld},
		{name: "from the future", req: valid, now: at.Add(-5*time.Minute - time.Second), want: client.ErrWebhookTooNew},
		{name: "a tolerance of one minute", req: valid, now: at.Add(2 * time.Minute), tolerance: time.Minute, want: client.ErrWebhookTooOld},
		{name: "a tolerance of one hour", req: valid, now: at.Add(59 * time.Minute), tolerance: time.Hour},
		{name: "no id", req: request{"", valid.timestamp, valid.signature, body}, now: at, want: client.ErrWebhookHeaders},
		{name: "no timestamp", req: request{id, "", valid.signature, body}, now: at, want: client.ErrWebhookHeaders},
		{name: "no signature", req: request{id, valid.timestamp, "", body}, now: at, want: client.ErrWebhookHeaders},
		{name: "a malformed secret", secret: "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", req: valid, now: at, want: client.ErrWebhookSecret},
	} {
		t.Run(tc.name, func(t *testing.T) {
			secret := tc.secret
			if secret == "" {
				secret = vectorSecret
			}
			h := http.Header{}
			for name, value := range map[string]string{"webhook-id": tc.req.id, "webhook-timestamp": tc.req.timestamp, "webhook-signature": tc.req.signature} {
				if value != "" {
					h.Set(name, value)
				}
			}
			ev, err := client.VerifyWebhook(secret, h, []byte(tc.req.body), tc.now, tc.tolerance)
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("VerifyWebhook = %+v, %v; want %v", ev, err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("VerifyWebhook: %v", err)
			}
			if ev.ID != id || ev.Type != "key.rotated" || !ev.Timestamp.Equal(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)) {
				t.Errorf("VerifyWebhook = %+v", ev)
			}
			var data struct{ ID, Account, Actor, Key string }
			if err := ev.Decode(&data); err != nil {
				t.Fatal(err)
			}
			if data.ID != id || data.Account != "acme" || data.Actor != "operator" || data.Key != "key_1" {
				t.Errorf("Decode = %+v", data)
			}
		})
	}
}

// TestVerifyWebhookBody checks that a signed body that is not an event is refused, as
// an error of its own.
func TestVerifyWebhookBody(t *testing.T) {
	at := time.Unix(vectorTime, 0)
	for _, body := range []string{
		``,
		`[]`,
		`{"type":"key.rotated","timestamp":"2026-03-01T12:00:00Z"}`,
		`{"type":"key.rotated","timestamp":"2026-03-01T12:00:00Z","data":[]}`,
		`{"timestamp":"2026-03-01T12:00:00Z","data":{}}`,
		`{"type":"key.rotated","data":{}}`,
		`{"type":"key.rotated","timestamp":"yesterday","data":{}}`,
	} {
		sig, err := signature.Sign(vectorID, at, []byte(body), vectorSecret)
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		h.Set("webhook-id", vectorID)
		h.Set("webhook-timestamp", strconv.Itoa(vectorTime))
		h.Set("webhook-signature", sig)
		ev, err := client.VerifyWebhook(vectorSecret, h, []byte(body), at, 0)
		if err == nil || errors.Is(err, client.ErrWebhookSignature) {
			t.Errorf("VerifyWebhook of %s = %+v, %v; want a body that is not an event", body, ev, err)
		}
	}
}
