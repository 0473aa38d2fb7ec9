package webhook_test

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/webhook"
	"github.com/tollgate-dev/tollgate/webhook/signature"
)

func TestSign(t *testing.T) {
	current, err := signature.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	const previous = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	until := t0.Add(24 * time.Hour)
	m, err := webhook.NewMessage(t0, webhook.KeyRotatedData{Common: webhook.Common{ID: webhook.DerivedID("test", "sign"), Account: "acme"}, Key: "key_ci"}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		endpoint webhook.Endpoint
		now      time.Time
		valid    []string // the secrets that verify it
		invalid  []string // those that do not
	}{
		{"one secret", webhook.Endpoint{Secret: current}, t0, []string{current}, []string{previous}},
		{"during a rotation", webhook.Endpoint{Secret: current, PreviousSecret: previous, PreviousUntil: until}, t0, []string{current, previous}, nil},
		{"at the rotation's end", webhook.Endpoint{Secret: current, PreviousSecret: previous, PreviousUntil: until}, until, []string{current}, []string{previous}},
		{"after the rotation", webhook.Endpoint{Secret: current, PreviousSecret: previous, PreviousUntil: until}, until.Add(time.Hour), []string{current}, []string{previous}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if err := webhook.Sign(h, tc.endpoint, m, tc.now); err != nil {
				t.Fatal(err)
			}
			if h.Get("webhook-id") != m.ID || h.Get("webhook-timestamp") != strconv.FormatInt(tc.now.Unix(), 10) {
				t.Errorf("headers %v", h)
			}
			if n := len(strings.Fields(h.Get("webhook-signature"))); n != len(tc.valid) {
				t.Errorf("webhook-signature %q has %d tokens, want %d", h.Get("webhook-signature"), n, len(tc.valid))
			}
			for _, s := range tc.valid {
				if err := signature.Verify(s, h, m.Body, tc.now, 0); err != nil {
					t.Errorf("Verify: %v", err)
				}
			}
			for _, s := range tc.invalid {
				if err := signature.Verify(s, h, m.Body, tc.now, 0); !errors.Is(err, signature.ErrBadSignature) {
					t.Errorf("Verify with a secret that does not sign = %v, want ErrBadSignature", err)
				}
			}
		})
	}

	h := http.Header{}
	if err := webhook.Sign(h, webhook.Endpoint{Secret: "whsec_bad"}, m, t0); !errors.Is(err, signature.ErrMalformedSecret) || len(h) != 0 {
		t.Errorf("Sign with a malformed secret = %v, set %v; want ErrMalformedSecret, nothing set", err, h)
	}
	if err := webhook.Sign(h, webhook.Endpoint{Secret: current}, webhook.Message{Body: m.Body}, t0); err == nil || len(h) != 0 {
		t.Errorf("Sign of a message without an id = %v, set %v; want an error, nothing set", err, h)
	}
}
