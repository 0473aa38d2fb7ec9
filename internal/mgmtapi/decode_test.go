package mgmtapi

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
)

// implementation matches what a message must never show: Go's type and package names
// and encoding/json's own wording.
var implementation = regexp.MustCompile(`Go (struct|value)|\bu?int(8|16|32|64)\b|float64|\bmgmtapi\.|\bjson:|UnmarshalJSON|RestrictionFields|parsing time|2006-01-02`)

// TestDecodeMessages checks that a body that does not decode is answered with a message
// that names the field and what it must be, never a Go type.
func TestDecodeMessages(t *testing.T) {
	type body struct {
		ID      string `json:"id"`
		Credits *int64 `json:"credits"`
		Amount  int64  `json:"amount"`
		Enabled bool   `json:"enabled"`
		RestrictionFields
		Restrictions *RestrictionFields `json:"restrictions"`
	}
	for _, tt := range []struct{ in, want string }{
		{`{"id":1}`, "id must be a string, not a number"},
		{`{"credits":"a"}`, "credits must be a whole number, not a string"},
		{`{"amount":1e30}`, "amount must be a whole number, not 1e30"},
		{`{"amount":1.5}`, "amount must be a whole number, not 1.5"},
		{`{"enabled":"yes"}`, "enabled must be true or false, not a string"},
		{`{"apis":"hash"}`, "apis must be an array of strings, not a string"},
		{`{"apis":[1]}`, "apis must be an array of strings: an item is a number"},
		{`{"expires_at":"99999-01-01"}`, `expires_at must be an RFC 3339 time, such as "2030-01-15T12:00:00Z", not "99999-01-01"`},
		{`{"expires_at":5}`, `expires_at must be an RFC 3339 time, such as "2030-01-15T12:00:00Z", not a number`},
		{`{"restrictions":[]}`, "restrictions must be an object, not an array"},
		{`{"restrictions":{"expires_at":{}}}`, `restrictions.expires_at must be an RFC 3339 time, such as "2030-01-15T12:00:00Z", not an object`},
		{`{"restrictions":{"channels":[true]}}`, "restrictions.channels must be an array of strings: an item is true or false"},
		{`{"nope":1}`, `the body has an unknown field "nope"`},
		{`{"id":`, "the body is not valid JSON"},
		{`{"id" "x"}`, "the body is not valid JSON (at byte"},
		{`[1]`, "the body must be a JSON object of the route's fields"},
		{`"x"`, "the body must be a JSON object of the route's fields"},
	} {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tt.in))
		r.Header.Set("Content-Type", "application/json")
		var b body
		err := Decode(w, r, &b)
		if err == nil {
			t.Errorf("%s: decoded", tt.in)
			continue
		}
		if c := tollgate.CodeOf(err); c != tollgate.CodeInvalidInput {
			t.Errorf("%s: code %s, want invalid_input", tt.in, c)
		}
		if msg := err.Error(); !strings.HasPrefix(msg, tt.want) || implementation.MatchString(msg) {
			t.Errorf("%s: %q, want it to begin %q and name no Go type", tt.in, msg, tt.want)
		}
	}

	// A good time decodes into the restrictions.
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{"restrictions":{"expires_at":"2030-01-15T12:00:00Z"}}`))
	var b body
	if Decode(w, r, &b) != nil || b.Restrictions == nil || b.Restrictions.ExpiresAt == nil {
		t.Fatalf("a good body: %s", w.Body)
	}
	rs, err := b.Restrictions.Build()
	if err != nil || !rs.ExpiresAt().Equal(time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC)) {
		t.Errorf("Build: %+v %v", rs, err)
	}
}
