package rest_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/rest"
	"github.com/tollgate-dev/tollgate/wire"
)

// TestBadInput proves that every kind of bad input gets the right status, X-Error-Code
// and a message that says what was wrong (naming the parameter where there is one), and
// loses nothing: no credit and no rate-limit event.
func TestBadInput(t *testing.T) {
	h := newHarness(t, config{rest: rest.Options{MaxBodyBytes: 1024}})
	acct := h.newAccount(t, "pro")
	ct := func(v string) []header { return []header{contentType(v)} }
	js := ct("application/json")
	cases := []struct {
		name      string
		method    string
		path      string
		body      string
		hdrs      []header
		status    int
		code      string
		fragments []string
	}{
		// The body.
		{"malformed JSON", "POST", "/v1/echo", `{"message":`, js, 400, "invalid_input", []string{"not valid JSON"}},
		{"JSON syntax error", "POST", "/v1/echo", `{"message" "a"}`, js, 400, "invalid_input", []string{"not valid JSON", "invalid character"}},
		{"JSON array", "POST", "/v1/echo", `[{"message":"a"}]`, js, 400, "invalid_input", []string{"JSON object", "an array"}},
		{"JSON string", "POST", "/v1/echo", `"hello"`, js, 400, "invalid_input", []string{"JSON object", "a string"}},
		{"JSON number", "POST", "/v1/echo", `42`, js, 400, "invalid_input", []string{"JSON object", "a number"}},
		{"JSON null", "POST", "/v1/echo", `null`, js, 400, "invalid_input", []string{"JSON object", "null"}},
		{"trailing garbage", "POST", "/v1/echo", `{"message":"a"} x`, js, 400, "invalid_input", []string{"one JSON object and nothing after it"}},
		{"trailing object", "POST", "/v1/echo", `{"message":"a"}{"message":"b"}`, js, 400, "invalid_input", []string{"one JSON object and nothing after it"}},
		{"trailing number", "POST", "/v1/echo", `{"message":"a"} 1`, js, 400, "invalid_input", []string{"one JSON object and nothing after it"}},
		{"trailing string", "POST", "/v1/echo", `{"message":"a"}"b"`, js, 400, "invalid_input", []string{"one JSON object and nothing after it"}},
		{"body over MaxBodyBytes", "POST", "/v1/echo", `{"message":"` + strings.Repeat("x", 2000) + `"}`, js, 413, "body_too_large", []string{"larger than the 1024 bytes"}},
		{"padding over MaxBodyBytes", "POST", "/v1/echo", `{"message":"a"}` + strings.Repeat(" ", 2000), js, 413, "body_too_large", []string{"1024 bytes"}},
		{"form over MaxBodyBytes", "POST", "/v1/echo", "message=" + strings.Repeat("x", 2000), ct("application/x-www-form-urlencoded"), 413, "body_too_large", []string{"1024 bytes"}},
		{"text/plain", "POST", "/v1/echo", `{"message":"a"}`, ct("text/plain"), 415, "unsupported_media_type", []string{"text/plain", "application/json"}},
		{"unparseable Content-Type", "POST", "/v1/echo", `{"message":"a"}`, ct("application/json; ="), 415, "unsupported_media_type", []string{"cannot be parsed"}},
		{"no Content-Type", "POST", "/v1/echo", `{"message":"a"}`, nil, 415, "unsupported_media_type", []string{"no Content-Type", "application/json"}},
		{"no Content-Type, empty body", "POST", "/v1/echo", ``, nil, 400, "invalid_input", []string{`"message"`, "required"}},
		{"query string on a POST API", "POST", "/v1/echo?message=a", `{"message":"a"}`, js, 400, "invalid_input", []string{"echo", "body", "not in the query string"}},
		{"multipart to a non-file API", "POST", "/v1/echo", "--b\r\nContent-Disposition: form-data; name=\"message\"\r\n\r\na\r\n--b--\r\n", ct("multipart/form-data; boundary=b"), 415, "unsupported_media_type", []string{"takes no file", "application/json"}},
		// The route.
		{"unknown API", "GET", "/v1/nope", ``, nil, 404, "not_found", []string{`"nope"`, "/v1/catalog"}},
		{"API ids are lowercase", "GET", "/v1/HASH?text=a", ``, nil, 404, "not_found", []string{`"HASH"`}},
		{"trailing slash", "GET", "/v1/hash/?text=a", ``, nil, 404, "not_found", []string{"/v1/{api_id}", "/v1/catalog"}},
		{"path below an API", "POST", "/v1/echo/extra", `{"message":"a"}`, js, 404, "not_found", []string{"/v1/catalog"}},
		{"no API id", "GET", "/v1/", ``, nil, 404, "not_found", []string{"/v1/catalog"}},
		{"wrong method GET", "GET", "/v1/echo?message=a", ``, nil, 405, "method_not_allowed", []string{"echo", "POST", "not GET"}},
		{"wrong method POST", "POST", "/v1/hash", `{"text":"a"}`, js, 405, "method_not_allowed", []string{"hash", "GET", "not POST"}},
		{"wrong method DELETE", "DELETE", "/v1/hash?text=a", ``, nil, 405, "method_not_allowed", []string{"hash", "GET"}},
		// The parameters, from a query string.
		{"missing required", "GET", "/v1/hash", ``, nil, 400, "invalid_input", []string{`"text"`, "required"}},
		{"empty required", "GET", "/v1/hash?text=", ``, nil, 400, "invalid_input", []string{`"text"`}},
		{"unknown parameter", "GET", "/v1/hash?text=a&txt=b", ``, nil, 400, "invalid_input", []string{`"txt"`, "unknown", "text, algorithm"}},
		{"mistyped", "GET", "/v1/uuid-generator?count=abc", ``, nil, 400, "invalid_input", []string{`"count"`, "integer"}},
		{"fraction for integer", "GET", "/v1/uuid-generator?count=1.5", ``, nil, 400, "invalid_input", []string{`"count"`}},
		{"out of range high", "GET", "/v1/uuid-generator?count=500", ``, nil, 400, "invalid_input", []string{`"count"`, "100"}},
		{"out of range low", "GET", "/v1/uuid-generator?count=0", ``, nil, 400, "invalid_input", []string{`"count"`, "1"}},
		{"enum violation", "GET", "/v1/hash?text=a&algorithm=sha3", ``, nil, 400, "invalid_input", []string{`"algorithm"`, "sha256"}},
		{"date format", "GET", "/v1/date-info?date=30.02.2026", ``, nil, 400, "invalid_input", []string{`"date"`, "YYYY-MM-DD"}},
		{"text too long", "GET", "/v1/hash?text=" + strings.Repeat("a", 10001), ``, nil, 400, "invalid_input", []string{`"text"`, "10000"}},
		{"repeated parameter", "GET", "/v1/hash?text=a&text=b", ``, nil, 400, "invalid_input", []string{`"text"`}},
		{"unparseable query", "GET", "/v1/hash?text=%zz", ``, nil, 400, "invalid_input", []string{"query string"}},
		// The parameters, from a JSON body.
		{"JSON mistyped", "POST", "/v1/echo", `{"message":5}`, js, 400, "invalid_input", []string{`"message"`, "string"}},
		{"JSON missing", "POST", "/v1/echo", `{}`, js, 400, "invalid_input", []string{`"message"`, "required"}},
		{"JSON null required", "POST", "/v1/echo", `{"message":null}`, js, 400, "invalid_input", []string{`"message"`, "required"}},
		{"JSON unknown", "POST", "/v1/echo", `{"message":"a","mesage":"b"}`, js, 400, "invalid_input", []string{`"mesage"`, "unknown"}},
		{"JSON out of range", "POST", "/v1/echo", `{"message":"a","delay_ms":-1}`, js, 400, "invalid_input", []string{`"delay_ms"`, "0"}},
		{"JSON huge integer", "POST", "/v1/echo", `{"message":"a","delay_ms":1e400}`, js, 400, "invalid_input", []string{`"delay_ms"`}},
		{"JSON too long", "POST", "/v1/echo", `{"message":"` + strings.Repeat("a", 1001) + `"}`, js, 400, "invalid_input", []string{`"message"`, "1000"}},
		{"JSON empty secret", "POST", "/v1/hmac", `{"message":"a","secret":""}`, js, 400, "invalid_input", []string{`"secret"`}},
		{"JSON enum", "POST", "/v1/hmac", `{"message":"a","secret":"s","encoding":"base32"}`, js, 400, "invalid_input", []string{`"encoding"`, "hex", "base64"}},
		{"form enum", "POST", "/v1/hmac", `message=a&secret=s&algorithm=md5`, ct("application/x-www-form-urlencoded"), 400, "invalid_input", []string{`"algorithm"`}},
	}

	before := h.balance(t, acct.ID)
	rateBefore := h.analytics(t, key(acct.Key)).RateLimit
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var r *response
			hdrs := append([]header{key(acct.Key)}, c.hdrs...)
			if c.body != "" {
				r = h.do(t, c.method, c.path, strings.NewReader(c.body), hdrs...)
			} else {
				r = h.do(t, c.method, c.path, nil, hdrs...)
			}
			wantError(t, r, c.status, c.code, c.fragments...)
			if c.status == http.StatusMethodNotAllowed {
				want := "GET"
				if strings.Contains(c.path, "echo") {
					want = "POST"
				}
				if allow := r.Header.Get("Allow"); !strings.Contains(allow, want) {
					t.Errorf("Allow = %q, want it to name %s", allow, want)
				}
			}
			// The caller still learns its position, and that this cost nothing.
			if r.Int(wire.HeaderCreditsCost) != 0 || r.Int(wire.HeaderCreditsRemaining) != before.Remaining {
				t.Errorf("credit headers cost %q remaining %q, want 0 and %d",
					r.Header.Get(wire.HeaderCreditsCost), r.Header.Get(wire.HeaderCreditsRemaining), before.Remaining)
			}
			if after := h.balance(t, acct.ID); after != before {
				t.Errorf("balance changed from %+v to %+v", before, after)
			}
			if rate := h.analytics(t, key(acct.Key)).RateLimit; rate == nil || *rate != *rateBefore {
				t.Errorf("rate limit changed from %+v to %+v", rateBefore, rate)
			}
		})
	}
	// The account is intact: a good call goes through and is the first one charged.
	r := h.hash(t, acct.Key)
	wantOK(t, r)
	if r.Int(wire.HeaderCreditsUsed) != 1 {
		t.Errorf("used %d after the bad calls and one good one, want 1", r.Int(wire.HeaderCreditsUsed))
	}
}
