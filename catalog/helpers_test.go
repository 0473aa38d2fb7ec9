package catalog_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/tollgate-dev/tollgate/catalog"
)

// nopHandler is a handler for APIs that tests register but never call.
var nopHandler = catalog.HandlerFunc(func(context.Context, *catalog.Request) (any, error) {
	return map[string]any{}, nil
})

// fullDef is a test API with every parameter type and every rule.
func fullDef() catalog.API {
	return catalog.API{
		ID: "full-test", Title: "Full test", Category: "Testing", Method: http.MethodPost, Cost: 3,
		Description: "Every type and every rule.",
		Params: []catalog.Param{
			{Name: "name", Type: catalog.String, Required: true, MinLength: catalog.Len(2), MaxLength: catalog.Len(5), Example: "héllo"},
			{Name: "color", Type: catalog.String, Enum: []any{"red", "green", "blue"}, Default: "red"},
			{Name: "email", Type: catalog.String, Format: catalog.FormatEmail},
			{Name: "site", Type: catalog.String, Format: catalog.FormatURL},
			{Name: "addr", Type: catalog.String, Format: catalog.FormatIP},
			{Name: "day", Type: catalog.String, Format: catalog.FormatDate},
			{Name: "hex", Type: catalog.String, Format: catalog.FormatHexColor},
			{Name: "count", Type: catalog.Integer, Min: catalog.Num(1), Max: catalog.Num(100), Default: 10},
			{Name: "level", Type: catalog.Integer, Enum: []any{1, 2, 3}},
			{Name: "ratio", Type: catalog.Number, Min: catalog.Num(-1.5), Max: catalog.Num(2.5)},
			{Name: "scale", Type: catalog.Number, Enum: []any{0.5, 1, 2}},
			{Name: "flag", Type: catalog.Boolean, Default: false},
			{Name: "tags", Type: catalog.Array, MinLength: catalog.Len(1), MaxLength: catalog.Len(3), Default: []string{"a"},
				Items: &catalog.Param{Type: catalog.String, MinLength: catalog.Len(1), MaxLength: catalog.Len(4)}},
			{Name: "ids", Type: catalog.Array, Items: &catalog.Param{Type: catalog.Integer, Min: catalog.Num(0)}},
			{Name: "opts", Type: catalog.Object, Default: map[string]any{"mode": "fast"}, Fields: []catalog.Param{
				{Name: "mode", Type: catalog.String, Required: true, Enum: []any{"fast", "slow"}},
				{Name: "depth", Type: catalog.Integer, Min: catalog.Num(0), Max: catalog.Num(9), Default: 3},
			}},
			{Name: "points", Type: catalog.Array, Items: &catalog.Param{Type: catalog.Object, Fields: []catalog.Param{
				{Name: "x", Type: catalog.Number, Required: true},
				{Name: "label", Type: catalog.String},
			}}},
			{Name: "delay_ms", Type: catalog.Integer, Min: catalog.Num(0), Max: catalog.Num(5000)},
		},
		Result: []catalog.Field{
			{Name: "ok", Type: catalog.Boolean},
			{Name: "day-of-week", Type: catalog.String},
			{Name: "list", Type: catalog.Array, Items: &catalog.Field{Type: catalog.Integer}},
			{Name: "nested", Type: catalog.Object, Fields: []catalog.Field{{Name: "a.b", Type: catalog.Number}}},
			{Name: "raw", Type: catalog.JSON},
		},
		Handler: nopHandler,
	}
}

// fileDef is a small file API.
func fileDef() catalog.API {
	return catalog.API{
		ID: "file-test", Method: http.MethodPost, Cost: 2,
		File: &catalog.FileField{Name: "image", Types: []string{"image/png"}, MaxBytes: 1 << 20},
		Params: []catalog.Param{
			{Name: "mode", Type: catalog.String, Enum: []any{"fast", "slow"}, Default: "fast"},
		},
		Handler: nopHandler,
	}
}

// mustCompile compiles def or fails the test.
func mustCompile(t testing.TB, def catalog.API) *catalog.API {
	t.Helper()
	a, err := catalog.Compile(def)
	if err != nil {
		t.Fatalf("Compile(%q): %v", def.ID, err)
	}
	return a
}

// fullAPI is the compiled fullDef, shared by tests that only read it.
var fullAPI = sync.OnceValue(func() *catalog.API {
	a, err := catalog.Compile(fullDef())
	if err != nil {
		panic(err)
	}
	return a
})

// paramError asserts that err is a *ParamError about param.
func paramError(t testing.TB, err error, param string) *catalog.ParamError {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want a *ParamError about %q", param)
	}
	var pe *catalog.ParamError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *ParamError", err, err)
	}
	if pe.Param != param {
		t.Fatalf("ParamError.Param = %q, want %q (error: %v)", pe.Param, param, err)
	}
	if pe.Reason == "" || !strings.Contains(err.Error(), fmt.Sprintf("%q", param)) {
		t.Fatalf("error %q does not name parameter %q or has no reason", err, param)
	}
	return pe
}

// checkParams checks what a successful validation returned against the declared
// parameters, independently of the package: every given parameter is present with its
// declared Go type and obeys its rules, every absent one holds its default or is
// missing, and nothing else is there. given reports whether a parameter was given
// (not null).
func checkParams(t testing.TB, a *catalog.API, out catalog.Params, given func(name string) bool) {
	t.Helper()
	declared := slices.Clone(a.Params)
	if a.File != nil {
		declared = append(declared, catalog.Param{Name: catalog.URLParam, Type: catalog.String, Format: catalog.FormatURL, MaxLength: catalog.Len(2048)})
	}
	for name := range out {
		if !slices.ContainsFunc(declared, func(p catalog.Param) bool { return p.Name == name }) {
			t.Errorf("result holds undeclared parameter %q", name)
		}
	}
	for _, p := range declared {
		v, ok := out[p.Name]
		switch {
		case given(p.Name):
			if !ok {
				t.Errorf("given parameter %q is missing from the result", p.Name)
				continue
			}
		case p.Required:
			t.Errorf("required parameter %q was accepted though absent", p.Name)
			continue
		case p.Default == nil:
			if ok {
				t.Errorf("absent parameter %q without default has value %#v", p.Name, v)
			}
			continue
		default:
			if !ok {
				t.Errorf("absent parameter %q did not get its default", p.Name)
				continue
			}
			if !jsonEqual(v, p.Default) {
				t.Errorf("absent parameter %q = %#v, want its default %#v", p.Name, v, p.Default)
			}
		}
		if msg := checkValue(p, v, p.Name); msg != "" {
			t.Error(msg)
		}
	}
}

// checkValue reports ("" if none) how v breaks the declared type or rules of p.
func checkValue(p catalog.Param, v any, path string) string {
	switch p.Type {
	case catalog.String:
		s, ok := v.(string)
		if !ok {
			return fmt.Sprintf("%s: got %T, want string", path, v)
		}
		if !utf8.ValidString(s) {
			return fmt.Sprintf("%s: invalid UTF-8 %q accepted", path, s)
		}
		if p.Required && s == "" {
			return fmt.Sprintf("%s: empty required string accepted", path)
		}
		if msg := checkLen(p, utf8.RuneCountInString(s), path); msg != "" {
			return msg
		}
		if p.Enum != nil && !slices.Contains(p.Enum, any(s)) {
			return fmt.Sprintf("%s: %q is not in the enum %v", path, s, p.Enum)
		}
	case catalog.Integer:
		n, ok := v.(int64)
		if !ok {
			return fmt.Sprintf("%s: got %T, want int64", path, v)
		}
		if msg := checkBounds(p, float64(n), path); msg != "" {
			return msg
		}
		if p.Enum != nil && !slices.Contains(p.Enum, any(n)) {
			return fmt.Sprintf("%s: %d is not in the enum %v", path, n, p.Enum)
		}
	case catalog.Number:
		f, ok := v.(float64)
		if !ok {
			return fmt.Sprintf("%s: got %T, want float64", path, v)
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Sprintf("%s: non-finite %v accepted", path, f)
		}
		if msg := checkBounds(p, f, path); msg != "" {
			return msg
		}
		if p.Enum != nil && !slices.Contains(p.Enum, any(f)) {
			return fmt.Sprintf("%s: %v is not in the enum %v", path, f, p.Enum)
		}
	case catalog.Boolean:
		if _, ok := v.(bool); !ok {
			return fmt.Sprintf("%s: got %T, want bool", path, v)
		}
	case catalog.Array:
		items, ok := v.([]any)
		if !ok {
			return fmt.Sprintf("%s: got %T, want []any", path, v)
		}
		if msg := checkLen(p, len(items), path); msg != "" {
			return msg
		}
		for i, e := range items {
			if msg := checkValue(*p.Items, e, fmt.Sprintf("%s[%d]", path, i)); msg != "" {
				return msg
			}
		}
	case catalog.Object:
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: got %T, want map[string]any", path, v)
		}
		for k := range m {
			if !slices.ContainsFunc(p.Fields, func(f catalog.Param) bool { return f.Name == k }) {
				return fmt.Sprintf("%s: unknown field %q accepted", path, k)
			}
		}
		for _, f := range p.Fields {
			fv, ok := m[f.Name]
			if !ok {
				if f.Required {
					return fmt.Sprintf("%s.%s: required field missing", path, f.Name)
				}
				if f.Default != nil {
					return fmt.Sprintf("%s.%s: default not applied", path, f.Name)
				}
				continue
			}
			if msg := checkValue(f, fv, path+"."+f.Name); msg != "" {
				return msg
			}
		}
	default:
		return fmt.Sprintf("%s: declared with unexpected type %q", path, p.Type)
	}
	return ""
}

func checkLen(p catalog.Param, n int, path string) string {
	if p.MinLength != nil && n < *p.MinLength {
		return fmt.Sprintf("%s: length %d below MinLength %d", path, n, *p.MinLength)
	}
	if p.MaxLength != nil && n > *p.MaxLength {
		return fmt.Sprintf("%s: length %d above MaxLength %d", path, n, *p.MaxLength)
	}
	return ""
}

func checkBounds(p catalog.Param, f float64, path string) string {
	if p.Min != nil && f < *p.Min {
		return fmt.Sprintf("%s: %v below Min %v", path, f, *p.Min)
	}
	if p.Max != nil && f > *p.Max {
		return fmt.Sprintf("%s: %v above Max %v", path, f, *p.Max)
	}
	return ""
}

// jsonEqual compares two JSON-like values after encoding, so int and int64 or []string
// and []any holding the same values compare equal.
func jsonEqual(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}

// decodeSchema decodes a JSON Schema document, keeping numbers as json.Number.
func decodeSchema(t testing.TB, raw json.RawMessage) map[string]any {
	t.Helper()
	if raw == nil {
		t.Fatal("schema is nil")
	}
	d := json.NewDecoder(strings.NewReader(string(raw)))
	d.UseNumber()
	var s map[string]any
	if err := d.Decode(&s); err != nil {
		t.Fatalf("schema %s does not parse: %v", raw, err)
	}
	return s
}

var patterns sync.Map // pattern string -> *regexp.Regexp

// schemaViolation hand-checks v against the handful of JSON Schema keywords the catalog
// writes (type, properties, required, additionalProperties, items, enum, minimum,
// maximum, minLength, maxLength, minItems, maxItems, pattern, and the anyOf of ipv4 and
// ipv6). It reports the first violation, or "" when v satisfies the schema.
func schemaViolation(s map[string]any, v any, path string) string {
	if typ, ok := s["type"].(string); ok {
		if !schemaTypeOK(typ, v) {
			return fmt.Sprintf("%s: %#v is not of schema type %s", path, v, typ)
		}
	}
	if enum, ok := s["enum"].([]any); ok {
		if !slices.ContainsFunc(enum, func(e any) bool { return schemaEqual(e, v) }) {
			return fmt.Sprintf("%s: %#v is not in schema enum %v", path, v, enum)
		}
	}
	if f, ok := toFloat(v); ok {
		if min, ok := toFloat(s["minimum"]); ok && f < min {
			return fmt.Sprintf("%s: %v is below schema minimum %v", path, f, min)
		}
		if max, ok := toFloat(s["maximum"]); ok && f > max {
			return fmt.Sprintf("%s: %v is above schema maximum %v", path, f, max)
		}
	}
	if str, ok := v.(string); ok {
		n := float64(utf8.RuneCountInString(str))
		if min, ok := toFloat(s["minLength"]); ok && n < min {
			return fmt.Sprintf("%s: %q is shorter than schema minLength %v", path, str, min)
		}
		if max, ok := toFloat(s["maxLength"]); ok && n > max {
			return fmt.Sprintf("%s: %q is longer than schema maxLength %v", path, str, max)
		}
		if pat, ok := s["pattern"].(string); ok {
			re, _ := patterns.Load(pat)
			if re == nil {
				re, _ = patterns.LoadOrStore(pat, regexp.MustCompile(pat))
			}
			if !re.(*regexp.Regexp).MatchString(str) {
				return fmt.Sprintf("%s: %q does not match schema pattern %s", path, str, pat)
			}
		}
		if anyOf, ok := s["anyOf"].([]any); ok && len(anyOf) == 2 {
			// The catalog writes anyOf only for the ip format: ipv4 or ipv6, no zone.
			if net.ParseIP(str) == nil {
				return fmt.Sprintf("%s: %q is neither ipv4 nor ipv6", path, str)
			}
		}
	}
	if arr, ok := v.([]any); ok {
		n := float64(len(arr))
		if min, ok := toFloat(s["minItems"]); ok && n < min {
			return fmt.Sprintf("%s: %d items, below schema minItems %v", path, len(arr), min)
		}
		if max, ok := toFloat(s["maxItems"]); ok && n > max {
			return fmt.Sprintf("%s: %d items, above schema maxItems %v", path, len(arr), max)
		}
		if items, ok := s["items"].(map[string]any); ok {
			for i, e := range arr {
				if msg := schemaViolation(items, e, fmt.Sprintf("%s[%d]", path, i)); msg != "" {
					return msg
				}
			}
		}
	}
	if obj, ok := v.(map[string]any); ok {
		props, _ := s["properties"].(map[string]any)
		if req, ok := s["required"].([]any); ok {
			for _, r := range req {
				if _, ok := obj[r.(string)]; !ok {
					return fmt.Sprintf("%s: schema-required %q is missing", path, r)
				}
			}
		}
		for k, e := range obj {
			ps, ok := props[k].(map[string]any)
			if !ok {
				if s["additionalProperties"] == false {
					return fmt.Sprintf("%s: %q is not allowed by additionalProperties false", path, k)
				}
				continue
			}
			if msg := schemaViolation(ps, e, path+"."+k); msg != "" {
				return msg
			}
		}
	}
	return ""
}

func schemaTypeOK(typ string, v any) bool {
	switch typ {
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "number":
		_, ok := toFloat(v)
		return ok
	case "integer":
		f, ok := toFloat(v)
		return ok && f == math.Trunc(f)
	case "array":
		_, ok := v.([]any)
		return ok
	case "object":
		_, ok := v.(map[string]any)
		return ok
	}
	return false
}

func schemaEqual(a, b any) bool {
	fa, okA := toFloat(a)
	fb, okB := toFloat(b)
	if okA || okB {
		return okA && okB && fa == fb
	}
	return a == b
}

// toFloat converts the numeric forms that appear in decoded JSON and in validated
// parameters to float64.
func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case float64:
		return n, true
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	}
	return 0, false
}

// dropNulls returns a copy of a decoded JSON value without the null members of its
// objects, at any depth (the catalog counts a null member as absent; a JSON Schema
// would not).
func dropNulls(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			if e != nil {
				out[k] = dropNulls(e)
			}
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = dropNulls(e)
		}
		return out
	}
	return v
}

// decodeBody decodes a JSON text as a request body is decoded: with UseNumber.
func decodeBody(t testing.TB, body string) map[string]any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(body))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatalf("test body %s: %v", body, err)
	}
	return m
}
