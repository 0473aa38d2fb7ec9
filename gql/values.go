package gql

import (
	"encoding/json"
	"fmt"
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

// jsonValue is the Go type of the JSON scalar: any JSON value, passed through.
type jsonValue struct{ raw json.RawMessage }

// ImplementsGraphQLType binds jsonValue to the JSON scalar.
func (*jsonValue) ImplementsGraphQLType(name string) bool { return name == "JSON" }

// UnmarshalGraphQL is not used: JSON is an output type only.
func (v *jsonValue) UnmarshalGraphQL(input any) error {
	b, err := json.Marshal(input)
	v.raw = b
	return err
}

// UnmarshalJSON keeps the raw value, for decoding results.
func (v *jsonValue) UnmarshalJSON(b []byte) error {
	v.raw = append(v.raw[:0], b...)
	return nil
}

// MarshalJSON writes the raw value.
func (v jsonValue) MarshalJSON() ([]byte, error) {
	if len(v.raw) == 0 {
		return []byte("null"), nil
	}
	return v.raw, nil
}

// intValue is the Go type of Int results. GraphQL's Int is 32 bits wide, but the
// catalog's integers are 64: results are written as the JSON numbers they are (a Unix
// time after 2038, say) rather than failing.
type intValue int64

// ImplementsGraphQLType binds intValue to Int.
func (*intValue) ImplementsGraphQLType(name string) bool { return name == "Int" }

// UnmarshalGraphQL is not used: results are output only.
func (v *intValue) UnmarshalGraphQL(input any) error {
	switch n := input.(type) {
	case int32:
		*v = intValue(n)
	case int64:
		*v = intValue(n)
	case float64:
		*v = intValue(n)
	default:
		return fmt.Errorf("not an integer: %T", input)
	}
	return nil
}

// fieldError is a resolver's error, with the code clients branch on.
type fieldError struct {
	message, code string
}

func (e *fieldError) Error() string { return e.message }

// Extensions gives graphql-go the error's extensions.
func (e *fieldError) Extensions() map[string]any { return map[string]any{"code": e.code} }
