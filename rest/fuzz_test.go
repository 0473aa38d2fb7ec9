package rest_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/rest"
)

// restOptionsForFuzz keeps the body limit small, so that the fuzzer reaches 413.
var restOptionsForFuzz = rest.Options{MaxBodyBytes: 4096}

// FuzzRequestBody posts arbitrary bytes as application/json to /v1/echo and /v1/hmac
// through the handler. Whatever the body, the handler must not panic, must answer 200,
// 400, 413, 415 or 429 in the envelope, and a non-200 must leave the balance unchanged
// (a 200 costs exactly 1).
func FuzzRequestBody(f *testing.F) {
	for _, seed := range []string{
		`{"message":"hello"}`,
		`{"message":"hello","delay_ms":0}`,
		`{"message":"m","secret":"s"}`,
		`{"message":"m","secret":"s","algorithm":"sha512","encoding":"base64"}`,
		``,
		`{}`,
		`null`,
		`[]`,
		`"string"`,
		`{"message":"a"}{"message":"b"}`,
		`{"message":"a"} 1`,
		`{"message":"a"}]`,
		`{"message":{"nested":[[[[{"deep":true}]]]]}}`,
		`{"message":[1,2,{"a":null}],"secret":{"x":{}}}`,
		`{"message":"a","delay_ms":1e400}`,
		`{"message":"a","delay_ms":-0}`,
		`{"message":"a","delay_ms":99999999999999999999999999999}`,
		`{"message":"a","delay_ms":1.0}`,
		`{"message":"a","delay_ms":"5"}`,
		`{"message":"héllo ✓ 🎉 \u0000 \ud800","secret":"ключ"}`,
		"{\"message\":\"\xff\xfe\"}",
		`{"message":"a","message":"b"}`,
		`{"` + strings.Repeat("k", 100) + `":1}`,
		`{"message":"` + strings.Repeat("x", 1001) + `"}`,
		strings.Repeat("[", 10000),
		`{"message":"a"` + strings.Repeat(" ", 100) + `}`,
		"\ufeff{\"message\":\"bom\"}",
	} {
		f.Add([]byte(seed))
	}
	h := newHarness(f, config{noServer: true, rest: restOptionsForFuzz})
	acct := h.newAccount(f, "open", accountOpts{credits: credits(1 << 40)})

	f.Fuzz(func(t *testing.T, body []byte) {
		for _, path := range []string{"/v1/echo", "/v1/hmac"} {
			before := h.balance(t, acct.ID)
			req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, path, bytes.NewReader(body))
			req.Header.Set("X-Api-Key", acct.Key)
			req.Header.Set("Content-Type", "application/json")
			r := h.serve(t, req) // checks the envelope
			switch r.Status {
			case 200, 400, 413, 415, 429:
			default:
				t.Fatalf("%s: status %d (%s) for body %q", path, r.Status, r.Body, body)
			}
			after := h.balance(t, acct.ID)
			want := before.Remaining
			if r.Status == http.StatusOK {
				want--
			}
			if after.Remaining != want {
				t.Fatalf("%s: status %d moved the balance from %d to %d for body %q", path, r.Status, before.Remaining, after.Remaining, body)
			}
		}
	})
}
