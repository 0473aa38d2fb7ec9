// Package jsonfield words an error of decoding JSON into a Go value for the client that
// sent the JSON: a value of the wrong type is named by its field's JSON path and what
// the field must be ("amount must be a whole number, not a string"), never by Go's
// names of types and packages, which encoding/json's own message shows ("cannot
// unmarshal string into Go struct field .amount of type int64").
package jsonfield

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"unicode"
)

// A Describer says what its JSON form is, for a message that refuses another value:
// "an RFC 3339 time, such as ...". A type whose pointer implements it is described so.
type Describer interface {
	DescribeJSON() string
}

// TypeError returns the message of err if it is (or wraps) a *json.UnmarshalTypeError
// of a field of v, the value (a pointer to a struct) that was decoded into:
// "<path> must be <what>, not <given>", or "<path> must be <what>: an item is <given>"
// for an item of an array. ok is false for any other error, and for a value of the
// wrong type as a whole (it has no field to name).
func TypeError(v any, err error) (msg string, ok bool) {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return "", false
	}
	path := Path(te.Field)
	if path == "" {
		return "", false
	}
	if declared := fieldType(reflect.TypeOf(v), strings.Split(path, ".")); declared != nil && declared.Kind() == reflect.Slice &&
		deref(declared.Elem()) == deref(te.Type) {
		return fmt.Sprintf("%s must be %s: an item is %s", path, Describe(declared), Words(te.Value)), true
	}
	return fmt.Sprintf("%s must be %s, not %s", path, Describe(te.Type), Words(te.Value)), true
}

// Path returns the JSON path of encoding/json's UnmarshalTypeError.Field
// ("RestrictionFields.apis", "restrictions.expires_at"): the names of the fields,
// without those of embedded structs, which are Go names beginning with a capital
// letter (a JSON name that begins with one is not told apart, and is left out too).
func Path(field string) string {
	var parts []string
	for p := range strings.SplitSeq(field, ".") {
		if p != "" && !unicode.IsUpper([]rune(p)[0]) {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, ".")
}

// Describe says what a JSON value of type t is: "a string", "a whole number", "an
// array of strings", "an object", or what t's [Describer] says.
func Describe(t reflect.Type) string {
	t = deref(t)
	if d, ok := reflect.New(t).Interface().(Describer); ok {
		return d.DescribeJSON()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number, 0 or more"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array of " + plural(t.Elem())
	case reflect.Interface:
		return "a JSON value"
	}
	return "an object"
}

// Given describes a JSON value for a message: a string as it is (cut short), any
// other value by its kind, in the form of UnmarshalTypeError.Value, for a Describer's
// UnmarshalJSON to report a value it refuses.
func Given(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	switch b[0] {
	case '"':
		s := string(b)
		if len(s) > 42 {
			s = s[:40] + `..."`
		}
		return "string " + s
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	}
	return "number"
}

// Words words a value described as UnmarshalTypeError.Value describes one ("number",
// "number 1e30", "string", "string \"x\"", "object", ...; see [Given]) for a
// message: "a number", "1e30", "a string", "\"x\"", "an object".
func Words(value string) string {
	kind, literal, _ := strings.Cut(value, " ")
	switch {
	case literal != "":
		return literal
	case kind == "bool":
		return "true or false"
	case kind == "object" || kind == "array":
		return "an " + kind
	case kind == "":
		return "another value"
	}
	return "a " + kind
}

// plural names the values of type t, for an array of them.
func plural(t reflect.Type) string {
	switch d := Describe(t); {
	case d == "a string":
		return "strings"
	case strings.HasPrefix(d, "a whole number"):
		return "whole numbers"
	case d == "an object":
		return "objects"
	}
	return "values"
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// fieldType returns the declared type of the field at path in t (a struct, or a pointer
// to one), looking into embedded structs; nil if there is none.
func fieldType(t reflect.Type, path []string) reflect.Type {
	if t == nil {
		return nil
	}
	for _, name := range path {
		if t = deref(t); t.Kind() != reflect.Struct {
			return nil
		}
		if t = structField(t, name); t == nil {
			return nil
		}
	}
	return deref(t)
}

// structField returns the type of the field of struct t whose JSON name is name.
func structField(t reflect.Type, name string) reflect.Type {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case tag == name:
			return f.Type
		case f.Anonymous && tag == "" && deref(f.Type).Kind() == reflect.Struct:
			if ft := structField(deref(f.Type), name); ft != nil {
				return ft
			}
		}
	}
	return nil
}
