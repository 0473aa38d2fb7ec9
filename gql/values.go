package gql

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
)

// rawArg is the Go type of every argument: it takes whatever graphql-go decoded (a
// scalar, an enum name, a list, an input object) and leaves coercion to the catalog's
// validation, the same that REST and MCP use. It binds to any input type because
// graphql-go asks an Unmarshaler before it looks at the value's kind.
type rawArg struct {
	value any
	set   bool
}

// ImplementsGraphQLType accepts every input type.
func (*rawArg) ImplementsGraphQLType(string) bool { return true }

// UnmarshalGraphQL keeps the value as decoded.
func (r *rawArg) UnmarshalGraphQL(input any) error {
	r.value, r.set = input, true
	return nil
}

// Nullable lets an optional argument use the non-pointer rawArg.
func (*rawArg) Nullable() {}

// The scalars of API results. An API's result is decoded into its result type with
// encoding/json, and every scalar field of that type is a pointer to one of the types
// below: stringValue for String, intValue for Int, floatValue for Float, boolValue for
// Boolean and jsonValue for JSON. Each keeps its value as the JSON an answer writes for
// it, made when the result is decoded, so that writing an answer copies bytes (see
// shape.go) and graphql-go, which writes a scalar with json.Marshal, writes the same.
//
// A value is what encoding/json would make of it as a Go string, int64, float64, bool
// or raw JSON and then write again: a string is re-escaped as encoding/json escapes
// (HTML characters, U+2028 and U+2029, invalid UTF-8), a number is written as the Go
// value it parses to, JSON is compacted. A value of another JSON type than the field's
// (a number for a String, 1.5 for an Int) is the type's zero value ("", 0, false), as
// encoding/json leaves a Go field it allocated and could not fill, and is marked as a
// mismatch for the log. Null is a nil pointer.

// A scalar is the JSON an answer writes for a scalar of an API result.
type scalar struct {
	// json is the value's JSON; nil, for a value never decoded (a result that is not
	// JSON), is written null.
	json []byte
	// mismatch is set when the result held a value of another type than the field's.
	mismatch bool
}

// set keeps out as the value's JSON or, when out is nil, zero, marking a mismatch.
func (s *scalar) set(out []byte, zero string) {
	s.json, s.mismatch = out, out == nil
	if out == nil {
		s.json = []byte(zero)
	}
}

// A resultScalar is a pointer to one of the scalar types of results.
type resultScalar interface{ scalarOf() *scalar }

func (s *scalar) scalarOf() *scalar { return s }

// appendJSON appends the value as an answer writes it.
func (s *scalar) appendJSON(b []byte) []byte {
	if s.json == nil {
		return append(b, "null"...)
	}
	return append(b, s.json...)
}

// MarshalJSON writes the value, for graphql-go.
func (s scalar) MarshalJSON() ([]byte, error) { return s.appendJSON(nil), nil }

// UnmarshalGraphQL is not used: results are output only.
func (*scalar) UnmarshalGraphQL(any) error {
	return errors.New("gql: a result type is not an input type")
}

// stringValue is the Go type of String results.
type stringValue struct{ scalar }

// ImplementsGraphQLType binds stringValue to String.
func (*stringValue) ImplementsGraphQLType(name string) bool { return name == "String" }

// UnmarshalJSON keeps a JSON string as encoding/json writes it.
func (v *stringValue) UnmarshalJSON(b []byte) error {
	v.set(stringJSON(b), `""`)
	return nil
}

// intValue is the Go type of Int results. GraphQL's Int is 32 bits wide, but the
// catalog's integers are 64: results are written as the JSON numbers they are (a Unix
// time after 2038, say) rather than failing.
type intValue struct{ scalar }

// ImplementsGraphQLType binds intValue to Int.
func (*intValue) ImplementsGraphQLType(name string) bool { return name == "Int" }

// UnmarshalJSON keeps a JSON number that is a 64-bit integer.
func (v *intValue) UnmarshalJSON(b []byte) error {
	var out []byte
	if n, err := strconv.ParseInt(string(b), 10, 64); err == nil {
		out = strconv.AppendInt(nil, n, 10)
	}
	v.set(out, "0")
	return nil
}

// floatValue is the Go type of Float results.
type floatValue struct{ scalar }

// ImplementsGraphQLType binds floatValue to Float.
func (*floatValue) ImplementsGraphQLType(name string) bool { return name == "Float" }

// UnmarshalJSON keeps a JSON number as encoding/json writes the float64 it parses to.
func (v *floatValue) UnmarshalJSON(b []byte) error {
	var out []byte
	if f, err := strconv.ParseFloat(string(b), 64); err == nil {
		out, _ = json.Marshal(f) // a parsed number is finite: it cannot fail
	}
	v.set(out, "0")
	return nil
}

// boolValue is the Go type of Boolean results.
type boolValue struct{ scalar }

// ImplementsGraphQLType binds boolValue to Boolean.
func (*boolValue) ImplementsGraphQLType(name string) bool { return name == "Boolean" }

var (
	jsonTrue  = []byte("true")
	jsonFalse = []byte("false")
)

// UnmarshalJSON keeps true and false.
func (v *boolValue) UnmarshalJSON(b []byte) error {
	switch {
	case bytes.Equal(b, jsonTrue):
		v.set(jsonTrue, "")
	case bytes.Equal(b, jsonFalse):
		v.set(jsonFalse, "")
	default:
		v.set(nil, "false")
	}
	return nil
}

// jsonValue is the Go type of the JSON scalar: any JSON value, passed through.
type jsonValue struct{ scalar }

// ImplementsGraphQLType binds jsonValue to the JSON scalar.
func (*jsonValue) ImplementsGraphQLType(name string) bool { return name == "JSON" }

// UnmarshalJSON keeps any JSON value, compacted and escaped as encoding/json writes a
// json.RawMessage.
func (v *jsonValue) UnmarshalJSON(b []byte) error {
	out, err := json.Marshal(json.RawMessage(b))
	if err != nil {
		out = nil // not JSON: encoding/json hands an Unmarshaler only valid JSON
	}
	v.set(out, "null")
	return nil
}

// stringJSON returns a JSON string as encoding/json writes the Go string it decodes
// to, or nil if b is not a JSON string. Most strings are written back as they are.
func stringJSON(b []byte) []byte {
	if len(b) < 2 || b[0] != '"' {
		return nil
	}
	if plainString(b[1 : len(b)-1]) {
		return bytes.Clone(b)
	}
	var s string
	if json.Unmarshal(b, &s) != nil {
		return nil
	}
	out, _ := json.Marshal(s) // a string always encodes
	return out
}

// plainString reports whether the inside of a JSON string is written back unchanged
// by encoding/json: printable ASCII without escapes or the characters it escapes for
// HTML. Anything else takes the long way, which is exact.
func plainString(s []byte) bool {
	for _, c := range s {
		if c < 0x20 || c >= 0x7f || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// fieldError is a resolver's error, with the code clients branch on.
type fieldError struct {
	message, code string
}

func (e *fieldError) Error() string { return e.message }

// Extensions gives graphql-go the error's extensions.
func (e *fieldError) Extensions() map[string]any { return map[string]any{"code": e.code} }
