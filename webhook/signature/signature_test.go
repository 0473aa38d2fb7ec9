package signature_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/webhook/signature"
)

// The scheme's published example: this secret, id, timestamp and body sign to want.
const (
	vectorSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorBody   = `{"test": 2432232314}`
	vectorWant   = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

var vectorAt = time.Unix(1614265330, 0)

func TestSignVector(t *testing.T) {
	got, err := signature.Sign(vectorID, vectorAt, []byte(vectorBody), vectorSecret)
	if err != nil {
		t.Fatal(err)
	}
	if got != vectorWant {
		t.Errorf("Sign = %s, want %s", got, vectorWant)
	}
}

func TestSignRotation(t *testing.T) {
	other, err := signature.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	got, err := signature.Sign(vectorID, vectorAt, []byte(vectorBody), vectorSecret, other)
	if err != nil {
		t.Fatal(err)
	}
	tokens := strings.Split(got, " ")
	if len(tokens) != 2 || tokens[0] != vectorWant || !strings.HasPrefix(tokens[1], "v1,") || tokens[1] == vectorWant {
		t.Errorf("Sign with two secrets = %q, want %s and a token of the other secret", got, vectorWant)
	}
}

func TestSignRefuses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		id      string
		secrets []string
	}{
		{"no secret", vectorID, nil},
		{"malformed secret", vectorID, []string{vectorSecret, "whsec_short"}},
		{"empty id", "", []string{vectorSecret}},
		{"id with a dot", "msg_a.b", []string{vectorSecret}},
		{"id with a space", "msg_a b", []string{vectorSecret}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, err := signature.Sign(tc.id, vectorAt, []byte(vectorBody), tc.secrets...); err == nil {
				t.Errorf("Sign = %q, want an error", got)
			}
		})
	}
}

func TestParseSecret(t *testing.T) {
	fresh, err := signature.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		secret string
		bytes  int // 0: malformed
	}{
		{"the published example", vectorSecret, 24},
		{"a new secret", fresh, signature.SecretBytes},
		{"64 bytes", "whsec_" + strings.Repeat("AAAA", 21) + "AA==", 64},
		{"empty", "", 0},
		{"the prefix alone", "whsec_", 0},
		{"no prefix", strings.TrimPrefix(vectorSecret, "whsec_"), 0},
		{"another prefix", "whsk_" + strings.TrimPrefix(vectorSecret, "whsec_"), 0},
		{"not base64", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLa!w", 0},
		{"URL-safe base64", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLa-w", 0},
		{"no padding", strings.TrimSuffix(fresh, "="), 0},
		{"a line break", "whsec_MfKQ9r8GKYqrTwjUPD8I\nLPZIo2LaLaSw", 0},
		{"a space", vectorSecret + " ", 0},
		{"23 bytes", "whsec_" + strings.Repeat("AAAA", 7) + "AAA=", 0},
		{"65 bytes", "whsec_" + strings.Repeat("AAAA", 21) + "AAA=", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, err := signature.ParseSecret(tc.secret)
			switch {
			case tc.bytes == 0 && !errors.Is(err, signature.ErrMalformedSecret):
				t.Errorf("ParseSecret = %d bytes, %v; want ErrMalformedSecret", len(key), err)
			case tc.bytes != 0 && (err != nil || len(key) != tc.bytes):
				t.Errorf("ParseSecret = %d bytes, %v; want %d bytes", len(key), err, tc.bytes)
			}
			if err != nil && len(tc.secret) > len(signature.SecretPrefix) && strings.Contains(err.Error(), tc.secret) {
				t.Errorf("the error %q shows the secret", err)
			}
		})
	}
}

func TestNewSecretIsRandom(t *testing.T) {
	a, err := signature.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	b, err := signature.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	if a == b || !strings.HasPrefix(a, signature.SecretPrefix) {
		t.Errorf("NewSecret = %q, then %q", a, b)
	}
}

// TestVerifyHeaders covers what the client's tests do not: the forms a header may not
// take. (The client's tests cover signatures, rotation, tampering and tolerance.)
func TestVerifyHeaders(t *testing.T) {
	for _, tc := range []struct {
		name          string
		id, timestamp string
		want          error
	}{
		{"as signed", vectorID, "1614265330", nil},
		{"a leading zero", vectorID, "01614265330", signature.ErrBadSignature},
		{"a plus sign", vectorID, "+1614265330", signature.ErrBadSignature},
		{"negative", vectorID, "-1614265330", signature.ErrBadSignature},
		{"milliseconds", vectorID, "1614265330000", signature.ErrBadSignature},
		{"not a number", vectorID, "yesterday", signature.ErrBadSignature},
		{"RFC 3339", vectorID, "2021-02-25T15:02:10Z", signature.ErrBadSignature},
		{"an id with a dot", "msg_p5jXN8AQM9LWM0D4loKWxJek.1", "1614265330", signature.ErrBadSignature},
		{"no id", "", "1614265330", signature.ErrMissingHeaders},
		{"no timestamp", vectorID, "", signature.ErrMissingHeaders},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.id != "" {
				h.Set(signature.HeaderID, tc.id)
			}
			if tc.timestamp != "" {
				h.Set(signature.HeaderTimestamp, tc.timestamp)
			}
			h.Set(signature.HeaderSignature, vectorWant)
			err := signature.Verify(vectorSecret, h, []byte(vectorBody), vectorAt, 0)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
}
