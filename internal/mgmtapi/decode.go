package mgmtapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/internal/jsonfield"
)

// Instant is a time in a request body: an RFC 3339 string, such as
// "2030-01-15T12:00:00Z". A value of another form is refused with a message that names
// its field.
type Instant struct{ time.Time }

// UnmarshalJSON reads an RFC 3339 string; any other value is a *json.UnmarshalTypeError,
// which encoding/json completes with the field's name.
func (t *Instant) UnmarshalJSON(b []byte) error {
	if err := t.Time.UnmarshalJSON(b); err != nil {
		return &json.UnmarshalTypeError{Value: jsonfield.Given(b), Type: reflect.TypeFor[Instant]()}
	}
	return nil
}

// DescribeJSON says what an Instant is in JSON (see jsonfield.Describer).
func (*Instant) DescribeJSON() string { return `an RFC 3339 time, such as "2030-01-15T12:00:00Z"` }

// bodyError returns the message of a body that encoding/json could not decode into v (a
// pointer to a struct of the route's fields): it names the field and what it must be,
// never a Go type or package.
func bodyError(v any, err error) string {
	if msg, ok := jsonfield.TypeError(v, err); ok {
		return msg
	}
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		return "the body must be a JSON object of the route's fields"
	case errors.As(err, &se):
		return fmt.Sprintf("the body is not valid JSON (at byte %d): send a JSON object of the route's fields", se.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the body is not valid JSON: it ends before the object does"
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return "the body has an unknown field " + name + ": send only the route's fields"
	}
	return "the body is not a valid request: send a JSON object of the route's fields"
}
