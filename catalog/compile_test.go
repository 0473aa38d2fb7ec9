package catalog_test

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/catalog"
)

// baseDef is a small valid definition that the refusal cases break one way each.
func baseDef() catalog.API {
	return catalog.API{
		ID: "base", Method: http.MethodGet, Cost: 1,
		Params: []catalog.Param{
			{Name: "text", Type: catalog.String, Required: true},
		},
		Result:  []catalog.Field{{Name: "out", Type: catalog.String}},
		Handler: nopHandler,
	}
}

// withParam returns baseDef with p added after "text".
func withParam(p catalog.Param) func(*catalog.API) {
	return func(a *catalog.API) { a.Params = append(a.Params, p) }
}

// withField returns baseDef with f added to the result.
func withField(f catalog.Field) func(*catalog.API) {
	return func(a *catalog.API) { a.Result = append(a.Result, f) }
}

// fileBase makes baseDef a valid file API.
func fileBase(a *catalog.API) {
	a.Method = http.MethodPost
	a.File = &catalog.FileField{Name: "image", Types: []string{"image/png"}, MaxBytes: 100}
}

// TestCompileRefuses checks every kind of wrong definition: Compile refuses it with an
// error that wraps ErrInvalidAPI and names the API and the offending part.
func TestCompileRefuses(t *testing.T) {
	str := catalog.String
	tests := []struct {
		name   string
		change func(*catalog.API)
		want   []string // substrings of the message
	}{
		// The id.
		{"empty id", func(a *catalog.API) { a.ID = "" }, []string{"id must be"}},
		{"uppercase id", func(a *catalog.API) { a.ID = "Hash" }, []string{`"Hash"`, "id must be"}},
		{"underscore id", func(a *catalog.API) { a.ID = "date_info" }, []string{`"date_info"`, "id must be"}},
		{"leading hyphen", func(a *catalog.API) { a.ID = "-hash" }, []string{`"-hash"`, "id must be"}},
		{"trailing hyphen", func(a *catalog.API) { a.ID = "hash-" }, []string{`"hash-"`, "id must be"}},
		{"double hyphen", func(a *catalog.API) { a.ID = "date--info" }, []string{`"date--info"`, "single hyphens"}},
		{"id too long", func(a *catalog.API) { a.ID = strings.Repeat("a", 65) }, []string{"1 to 64"}},
		{"id with space", func(a *catalog.API) { a.ID = "date info" }, []string{"id must be"}},
		{"id with dot", func(a *catalog.API) { a.ID = "date.info" }, []string{"id must be"}},
		{"non-ASCII id", func(a *catalog.API) { a.ID = "héllo" }, []string{"id must be"}},
		{"reserved account", func(a *catalog.API) { a.ID = "account" }, []string{"reserved", "/v1/account"}},
		{"reserved analytics", func(a *catalog.API) { a.ID = "analytics" }, []string{"reserved", "/v1/analytics"}},
		{"reserved catalog", func(a *catalog.API) { a.ID = "catalog" }, []string{"reserved", "/v1/catalog"}},
		{"reserved graphql", func(a *catalog.API) { a.ID = "graphql" }, []string{"reserved", "/v1/graphql"}},
		{"reserved mcp", func(a *catalog.API) { a.ID = "mcp" }, []string{"reserved", "/v1/mcp"}},

		// Method and cost.
		{"empty method", func(a *catalog.API) { a.Method = "" }, []string{"method", "GET or POST"}},
		{"PUT", func(a *catalog.API) { a.Method = http.MethodPut }, []string{`method "PUT"`}},
		{"lowercase get", func(a *catalog.API) { a.Method = "get" }, []string{`method "get"`}},
		{"cost -1", func(a *catalog.API) { a.Cost = -1 }, []string{"cost -1", "must be 0 (a free API) or more"}},
		{"negative cost", func(a *catalog.API) { a.Cost = -5 }, []string{"cost -5"}},

		// File APIs.
		{"file API with GET", func(a *catalog.API) { fileBase(a); a.Method = http.MethodGet }, []string{"file API must use POST"}},
		{"file without types", func(a *catalog.API) { fileBase(a); a.File.Types = nil }, []string{`file field "image"`, "media types"}},
		{"file with bad media type", func(a *catalog.API) { fileBase(a); a.File.Types = []string{"image/png", "PNG"} }, []string{`file field "image"`, `"PNG"`}},
		{"file with uppercase media type", func(a *catalog.API) { fileBase(a); a.File.Types = []string{"Image/PNG"} }, []string{`"Image/PNG"`}},
		{"file with MaxBytes 0", func(a *catalog.API) { fileBase(a); a.File.MaxBytes = 0 }, []string{`file field "image"`, "MaxBytes"}},
		{"file with negative MaxBytes", func(a *catalog.API) { fileBase(a); a.File.MaxBytes = -1 }, []string{"MaxBytes"}},
		{"file field named url", func(a *catalog.API) { fileBase(a); a.File.Name = "url" }, []string{`file field "url"`}},
		{"file field without name", func(a *catalog.API) { fileBase(a); a.File.Name = "" }, []string{`file field ""`}},
		{"file field bad name", func(a *catalog.API) { fileBase(a); a.File.Name = "1image" }, []string{`file field "1image"`}},
		{"param url on file API", func(a *catalog.API) {
			fileBase(a)
			a.Params = append(a.Params, catalog.Param{Name: "url", Type: str})
		}, []string{`parameter "url"`, "file field"}},
		{"param named like the file field", func(a *catalog.API) {
			fileBase(a)
			a.Params = append(a.Params, catalog.Param{Name: "image", Type: str})
		}, []string{`parameter "image"`, "file field"}},

		// Parameter names.
		{"empty param name", withParam(catalog.Param{Type: str}), []string{`parameter ""`}},
		{"param name with digit first", withParam(catalog.Param{Name: "1st", Type: str}), []string{`parameter "1st"`}},
		{"param name with underscore first", withParam(catalog.Param{Name: "_x", Type: str}), []string{`parameter "_x"`}},
		{"param name with space", withParam(catalog.Param{Name: "a b", Type: str}), []string{`parameter "a b"`}},
		{"param name with colon", withParam(catalog.Param{Name: "a:b", Type: str}), []string{`parameter "a:b"`}},
		{"param name with slash", withParam(catalog.Param{Name: "a/b", Type: str}), []string{`parameter "a/b"`}},
		{"param name non-ASCII", withParam(catalog.Param{Name: "héllo", Type: str}), []string{`parameter "héllo"`}},
		{"param name too long", withParam(catalog.Param{Name: "a" + strings.Repeat("b", 64), Type: str}), []string{"at most 64"}},
		{"duplicate param", withParam(catalog.Param{Name: "text", Type: str}), []string{"parameter text", `collides with "text"`}},
		{"params a-b and a_b collide", func(a *catalog.API) {
			a.Params = append(a.Params, catalog.Param{Name: "a-b", Type: str}, catalog.Param{Name: "a_b", Type: str})
		}, []string{"parameter a_b", `"a-b"`, "GraphQL name a_b"}},
		{"params a.b and a-b collide", func(a *catalog.API) {
			a.Params = append(a.Params, catalog.Param{Name: "a.b", Type: str}, catalog.Param{Name: "a-b", Type: str})
		}, []string{"parameter a-b", `"a.b"`, "a_b"}},
		{"params page_size and pageSize cannot be bound apart", func(a *catalog.API) {
			a.Params = append(a.Params, catalog.Param{Name: "page_size", Type: str}, catalog.Param{Name: "pageSize", Type: str})
		}, []string{`"page_size"`, `"pageSize"`, "differ only in case or underscores"}},

		// Types, Items and Fields.
		{"empty type", withParam(catalog.Param{Name: "p"}), []string{"parameter p", `type ""`}},
		{"unknown type", withParam(catalog.Param{Name: "p", Type: "date"}), []string{"parameter p", `type "date"`}},
		{"JSON param", withParam(catalog.Param{Name: "p", Type: catalog.JSON}), []string{"parameter p", `type "json"`}},
		{"array without Items", withParam(catalog.Param{Name: "p", Type: catalog.Array}), []string{"parameter p", "Items"}},
		{"Items on a string", withParam(catalog.Param{Name: "p", Type: str, Items: &catalog.Param{Type: str}}), []string{"parameter p", "Items"}},
		{"array of arrays", withParam(catalog.Param{Name: "p", Type: catalog.Array,
			Items: &catalog.Param{Type: catalog.Array, Items: &catalog.Param{Type: str}}}), []string{"parameter p", "arrays of arrays"}},
		{"bad Items type", withParam(catalog.Param{Name: "p", Type: catalog.Array, Items: &catalog.Param{Type: catalog.JSON}}), []string{"parameter p", "items", `type "json"`}},
		{"Fields on a string", withParam(catalog.Param{Name: "p", Type: str, Fields: []catalog.Param{{Name: "a", Type: str}}}), []string{"parameter p", "Fields"}},
		{"object without Fields", withParam(catalog.Param{Name: "p", Type: catalog.Object}), []string{"parameter p", "Fields"}},
		{"bad nested field name", withParam(catalog.Param{Name: "p", Type: catalog.Object, Fields: []catalog.Param{{Name: "a b", Type: str}}}), []string{`parameter p."a b"`}},
		{"nested fields collide", withParam(catalog.Param{Name: "p", Type: catalog.Object, Fields: []catalog.Param{
			{Name: "x-y", Type: str}, {Name: "x.y", Type: str}}}), []string{"parameter p.x.y", `"x-y"`}},
		{"bad nested field rule", withParam(catalog.Param{Name: "p", Type: catalog.Object, Fields: []catalog.Param{
			{Name: "n", Type: catalog.Integer, MinLength: catalog.Len(1)}}}), []string{"parameter p.n", "MinLength"}},

		// Bounds.
		{"Min on a string", withParam(catalog.Param{Name: "p", Type: str, Min: catalog.Num(1)}), []string{"parameter p", "Min and Max"}},
		{"Max on a boolean", withParam(catalog.Param{Name: "p", Type: catalog.Boolean, Max: catalog.Num(1)}), []string{"parameter p", "Min and Max"}},
		{"Min > Max", withParam(catalog.Param{Name: "p", Type: catalog.Integer, Min: catalog.Num(5), Max: catalog.Num(4)}), []string{"parameter p", "Min", "greater than Max"}},
		{"NaN Min", withParam(catalog.Param{Name: "p", Type: catalog.Number, Min: catalog.Num(math.NaN())}), []string{"parameter p", "finite"}},
		{"infinite Max", withParam(catalog.Param{Name: "p", Type: catalog.Number, Max: catalog.Num(math.Inf(1))}), []string{"parameter p", "finite"}},
		{"MinLength on integer", withParam(catalog.Param{Name: "p", Type: catalog.Integer, MinLength: catalog.Len(1)}), []string{"parameter p", "MinLength and MaxLength"}},
		{"MaxLength on object", withParam(catalog.Param{Name: "p", Type: catalog.Object, MaxLength: catalog.Len(1),
			Fields: []catalog.Param{{Name: "a", Type: str}}}), []string{"parameter p", "MinLength and MaxLength"}},
		{"negative MinLength", withParam(catalog.Param{Name: "p", Type: str, MinLength: catalog.Len(-1)}), []string{"parameter p", "negative"}},
		{"negative MaxLength", withParam(catalog.Param{Name: "p", Type: catalog.Array, MaxLength: catalog.Len(-2),
			Items: &catalog.Param{Type: str}}), []string{"parameter p", "negative"}},
		{"MinLength > MaxLength", withParam(catalog.Param{Name: "p", Type: str, MinLength: catalog.Len(3), MaxLength: catalog.Len(2)}), []string{"parameter p", "MinLength", "greater than MaxLength"}},

		// Enums.
		{"empty enum", withParam(catalog.Param{Name: "p", Type: str, Enum: []any{}}), []string{"parameter p", "Enum", "empty"}},
		{"duplicate enum string", withParam(catalog.Param{Name: "p", Type: str, Enum: []any{"a", "b", "a"}}), []string{"parameter p", "enum value a is listed twice"}},
		{"duplicate enum int and int64", withParam(catalog.Param{Name: "p", Type: catalog.Integer, Enum: []any{1, int64(1)}}), []string{"parameter p", "listed twice"}},
		{"duplicate enum number", withParam(catalog.Param{Name: "p", Type: catalog.Number, Enum: []any{1, 1.0}}), []string{"parameter p", "listed twice"}},
		{"enum on boolean", withParam(catalog.Param{Name: "p", Type: catalog.Boolean, Enum: []any{true}}), []string{"parameter p", "Enum", "strings, integers and numbers only"}},
		{"enum on array", withParam(catalog.Param{Name: "p", Type: catalog.Array, Enum: []any{"a"}, Items: &catalog.Param{Type: str}}), []string{"parameter p", "Enum", "strings, integers and numbers only"}},
		{"enum value of wrong type", withParam(catalog.Param{Name: "p", Type: catalog.Integer, Enum: []any{1, "two"}}), []string{"parameter p", "enum value two"}},
		{"enum value not integral", withParam(catalog.Param{Name: "p", Type: catalog.Integer, Enum: []any{1, 2.5}}), []string{"parameter p", "enum value 2.5"}},
		{"enum value above Max", withParam(catalog.Param{Name: "p", Type: catalog.Integer, Max: catalog.Num(10), Enum: []any{1, 20}}), []string{"parameter p", "enum value 20"}},
		{"enum value too long", withParam(catalog.Param{Name: "p", Type: str, MaxLength: catalog.Len(3), Enum: []any{"abc", "abcd"}}), []string{"parameter p", "enum value abcd"}},
		{"enum value of wrong format", withParam(catalog.Param{Name: "p", Type: str, Format: catalog.FormatDate, Enum: []any{"today"}}), []string{"parameter p", "enum value today", "YYYY-MM-DD"}},
		{"enum value below Min", withParam(catalog.Param{Name: "p", Type: catalog.Number, Min: catalog.Num(0), Enum: []any{0.5, -0.5}}), []string{"parameter p", "enum value -0.5", "at least 0"}},
		{"empty enum value of required string", withParam(catalog.Param{Name: "p", Type: str, Required: true, Enum: []any{"a", ""}}), []string{"parameter p", "must not be empty"}},
		{"nested enum value above Max", withParam(catalog.Param{Name: "p", Type: catalog.Array, Items: &catalog.Param{
			Type: catalog.Integer, Max: catalog.Num(3), Enum: []any{1, 4}}}), []string{"parameter p", "items", "enum value 4"}},

		// Formats.
		{"format on integer", withParam(catalog.Param{Name: "p", Type: catalog.Integer, Format: catalog.FormatDate}), []string{"parameter p", "Format", "strings only"}},
		{"unknown format", withParam(catalog.Param{Name: "p", Type: str, Format: "uuid"}), []string{"parameter p", `format "uuid"`}},

		// Defaults and examples.
		{"required with default", withParam(catalog.Param{Name: "p", Type: str, Required: true, Default: "x"}), []string{"parameter p", "required parameter cannot have a default"}},
		{"default of wrong type", withParam(catalog.Param{Name: "p", Type: catalog.Integer, Default: "ten"}), []string{"parameter p", "default or example ten"}},
		{"default above Max", withParam(catalog.Param{Name: "p", Type: catalog.Integer, Max: catalog.Num(10), Default: 11}), []string{"parameter p", "default or example 11", "at most 10"}},
		{"default not integral", withParam(catalog.Param{Name: "p", Type: catalog.Integer, Default: 2.5}), []string{"parameter p", "2.5"}},
		{"default outside enum", withParam(catalog.Param{Name: "p", Type: str, Enum: []any{"a", "b"}, Default: "c"}), []string{"parameter p", "must be one of a, b"}},
		{"default too short", withParam(catalog.Param{Name: "p", Type: str, MinLength: catalog.Len(2), Default: "x"}), []string{"parameter p", "at least 2 characters"}},
		{"default of wrong format", withParam(catalog.Param{Name: "p", Type: str, Format: catalog.FormatEmail, Default: "nobody"}), []string{"parameter p", "email"}},
		{"default array too long", withParam(catalog.Param{Name: "p", Type: catalog.Array, MaxLength: catalog.Len(1),
			Items: &catalog.Param{Type: str}, Default: []string{"a", "b"}}), []string{"parameter p", "at most 1 elements"}},
		{"default array bad element", withParam(catalog.Param{Name: "p", Type: catalog.Array,
			Items: &catalog.Param{Type: catalog.Integer}, Default: []any{1, "x"}}), []string{"parameter p", `"p[1]"`}},
		{"default object missing required field", withParam(catalog.Param{Name: "p", Type: catalog.Object,
			Fields: []catalog.Param{{Name: "a", Type: str, Required: true}}, Default: map[string]any{}}), []string{"parameter p", `"p.a"`, "is required"}},
		{"default object unknown field", withParam(catalog.Param{Name: "p", Type: catalog.Object,
			Fields: []catalog.Param{{Name: "a", Type: str}}, Default: map[string]any{"b": "x"}}), []string{"parameter p", `"p.b"`}},
		{"example of wrong type", withParam(catalog.Param{Name: "p", Type: catalog.Boolean, Example: "yes"}), []string{"parameter p", "default or example yes"}},
		{"example below Min", withParam(catalog.Param{Name: "p", Type: catalog.Number, Min: catalog.Num(0), Example: -1}), []string{"parameter p", "at least 0"}},
		{"empty example of required string", withParam(catalog.Param{Name: "p", Type: str, Required: true, Example: ""}), []string{"parameter p", "must not be empty"}},
		{"example with invalid UTF-8", withParam(catalog.Param{Name: "p", Type: str, Example: "\xff"}), []string{"parameter p", "UTF-8"}},

		// Result fields.
		{"result field without name", withField(catalog.Field{Type: str}), []string{`result field ""`, "needs a name"}},
		{"result fields collide", func(a *catalog.API) {
			a.Result = []catalog.Field{{Name: "day-of-week", Type: str}, {Name: "day_of_week", Type: str}}
		}, []string{`result field "day_of_week"`, `"day-of-week"`, "day_of_week"}},
		{"result fields collide by dropped characters", func(a *catalog.API) {
			a.Result = []catalog.Field{{Name: "is leap year", Type: str}, {Name: "isleapyear", Type: str}}
		}, []string{`result field "isleapyear"`, `"is leap year"`}},
		{"result field maps to empty", withField(catalog.Field{Name: "日本", Type: str}), []string{`result field "日本"`, "no letters or digits"}},
		{"result field of spaces", withField(catalog.Field{Name: "  ", Type: str}), []string{`result field "  "`, "no letters or digits"}},
		{"result field __typename", withField(catalog.Field{Name: "__typename", Type: str}), []string{`"__typename"`, "reserved by GraphQL"}},
		{"result field maps to __", withField(catalog.Field{Name: "--x", Type: str}), []string{`"--x"`, "__x"}},
		{"result field maps to __ via _-", withField(catalog.Field{Name: "_-x", Type: str}), []string{`"_-x"`, "reserved"}},
		{"result field bad type", withField(catalog.Field{Name: "f", Type: "date"}), []string{`result field "f"`, `type "date"`}},
		{"result field empty type", withField(catalog.Field{Name: "f"}), []string{`result field "f"`, `type ""`}},
		{"result array without Items", withField(catalog.Field{Name: "f", Type: catalog.Array}), []string{`result field "f"`, "Items"}},
		{"result Items on string", withField(catalog.Field{Name: "f", Type: str, Items: &catalog.Field{Type: str}}), []string{`result field "f"`, "Items"}},
		{"result bad Items type", withField(catalog.Field{Name: "f", Type: catalog.Array, Items: &catalog.Field{Type: "x"}}), []string{`result field "f" items`, `type "x"`}},
		{"result object without Fields", withField(catalog.Field{Name: "f", Type: catalog.Object}), []string{`result field "f"`, "type json"}},
		{"result Fields on string", withField(catalog.Field{Name: "f", Type: str, Fields: []catalog.Field{{Name: "a", Type: str}}}), []string{`result field "f"`, "Fields"}},
		{"nested result fields collide", withField(catalog.Field{Name: "f", Type: catalog.Object, Fields: []catalog.Field{
			{Name: "a:b", Type: str}, {Name: "a/b", Type: str}}}), []string{`result field "f".`, `"a/b"`, `"a:b"`}},
		{"nested result field bad", withField(catalog.Field{Name: "f", Type: catalog.Array, Items: &catalog.Field{
			Type: catalog.Object, Fields: []catalog.Field{{Name: "__x", Type: str}}}}), []string{`"__x"`, "reserved"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			def := baseDef()
			tt.change(&def)
			a, err := catalog.Compile(def)
			if err == nil {
				t.Fatalf("Compile accepted the definition: %+v", a)
			}
			if a != nil {
				t.Errorf("Compile returned an API with the error %v", err)
			}
			if !errors.Is(err, catalog.ErrInvalidAPI) {
				t.Errorf("error %v does not wrap ErrInvalidAPI", err)
			}
			if errors.Is(err, catalog.ErrDuplicate) {
				t.Errorf("error %v wraps ErrDuplicate", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, "api ") || !strings.Contains(msg, `"`+def.ID+`"`) {
				t.Errorf("error %q does not name the API %q", msg, def.ID)
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
			// Register refuses it the same way.
			if err := (&catalog.Registry{}).Register(def); !errors.Is(err, catalog.ErrInvalidAPI) {
				t.Errorf("Register: error %v does not wrap ErrInvalidAPI", err)
			}
		})
	}
}

// TestCompileAccepts checks definitions at the edges of the rules that must be accepted.
func TestCompileAccepts(t *testing.T) {
	tests := []struct {
		name   string
		change func(*catalog.API)
	}{
		{"one-letter id", func(a *catalog.API) { a.ID = "a" }},
		{"digit-leading id", func(a *catalog.API) { a.ID = "1password" }},
		{"64-character id", func(a *catalog.API) { a.ID = strings.Repeat("a", 32) + "-" + strings.Repeat("b", 31) }},
		{"POST", func(a *catalog.API) { a.Method = http.MethodPost }},
		{"file API", fileBase},
		{"64-character param name", withParam(catalog.Param{Name: "a" + strings.Repeat("b", 63), Type: catalog.String})},
		{"param name with dots and hyphens", withParam(catalog.Param{Name: "a.b-c_d", Type: catalog.String})},
		{"Min == Max", withParam(catalog.Param{Name: "p", Type: catalog.Number, Min: catalog.Num(0), Max: catalog.Num(0)})},
		{"MinLength 0", withParam(catalog.Param{Name: "p", Type: catalog.String, MinLength: catalog.Len(0), MaxLength: catalog.Len(0)})},
		{"default 0 with Min 0", withParam(catalog.Param{Name: "p", Type: catalog.Integer, Min: catalog.Num(0), Default: 0})},
		{"default false", withParam(catalog.Param{Name: "p", Type: catalog.Boolean, Default: false})},
		{"default empty string", withParam(catalog.Param{Name: "p", Type: catalog.String, Default: ""})},
		{"int32 default for a number", withParam(catalog.Param{Name: "p", Type: catalog.Number, Default: int32(3)})},
		{"uint8 default for an integer", withParam(catalog.Param{Name: "p", Type: catalog.Integer, Default: uint8(3)})},
		{"integral float default for an integer", withParam(catalog.Param{Name: "p", Type: catalog.Integer, Default: 3.0})},
		{"enum with bounds", withParam(catalog.Param{Name: "p", Type: catalog.Integer, Min: catalog.Num(1), Max: catalog.Num(3), Enum: []any{1, 2, 3}})},
		{"enum with format", withParam(catalog.Param{Name: "p", Type: catalog.String, Format: catalog.FormatHexColor, Enum: []any{"#fff", "#000"}})},
		{"result field with odd names", func(a *catalog.API) {
			a.Result = []catalog.Field{{Name: "1st-of-month", Type: catalog.String}, {Name: "is leap year", Type: catalog.Boolean}, {Name: "_x", Type: catalog.JSON}}
		}},
		{"no params, no result", func(a *catalog.API) { a.Params, a.Result = nil, nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			def := baseDef()
			tt.change(&def)
			a, err := catalog.Compile(def)
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			if a.InputSchema() == nil || a.ResultSchema() == nil {
				t.Error("compiled API has no schemas")
			}
		})
	}
}

// TestCompileNilHandler checks that Compile accepts a definition without a handler
// (clients compile to validate) and Register refuses it.
func TestCompileNilHandler(t *testing.T) {
	def := baseDef()
	def.Handler = nil
	a, err := catalog.Compile(def)
	if err != nil {
		t.Fatalf("Compile without handler: %v", err)
	}
	if _, err := a.ValidateJSON(map[string]any{"text": "x"}); err != nil {
		t.Errorf("ValidateJSON on a handler-less API: %v", err)
	}
	err = (&catalog.Registry{}).Register(def)
	if !errors.Is(err, catalog.ErrInvalidAPI) || !strings.Contains(err.Error(), "no handler") || !strings.Contains(err.Error(), `"base"`) {
		t.Errorf("Register without handler: got %v, want ErrInvalidAPI naming the API and the missing handler", err)
	}
}

// TestCompileNormalizes checks what Compile fills in: a default title, enum values,
// defaults and examples converted to the declared types, and nested defaults applied
// inside an object default.
func TestCompileNormalizes(t *testing.T) {
	a := fullAPI()
	if a.Title != "Full test" {
		t.Errorf("Title = %q", a.Title)
	}
	def := baseDef()
	if got := mustCompile(t, def).Title; got != "base" {
		t.Errorf("default Title = %q, want the id", got)
	}
	byName := map[string]catalog.Param{}
	for _, p := range a.Params {
		byName[p.Name] = p
	}
	checks := []struct {
		what      string
		got, want any
	}{
		{"level enum", byName["level"].Enum, []any{int64(1), int64(2), int64(3)}},
		{"scale enum", byName["scale"].Enum, []any{0.5, 1.0, 2.0}},
		{"count default", byName["count"].Default, int64(10)},
		{"flag default", byName["flag"].Default, false},
		{"tags default", byName["tags"].Default, []any{"a"}},
		{"opts default", byName["opts"].Default, map[string]any{"mode": "fast", "depth": int64(3)}},
		{"opts.depth default", byName["opts"].Fields[1].Default, int64(3)},
		{"name example", byName["name"].Example, "héllo"},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %#v, want %#v", c.what, c.got, c.want)
		}
	}
	// The sample's date-info result fields survive unchanged: the REST names are kept.
	if a.Result[1].Name != "day-of-week" {
		t.Errorf("result field renamed to %q", a.Result[1].Name)
	}
	// A compiled file API keeps "url" out of its declared Params (so that it can be
	// compiled again, or decoded by a client and compiled), but accepts it.
	f := mustCompile(t, fileDef())
	for _, p := range f.Params {
		if p.Name == catalog.URLParam {
			t.Errorf("compiled file API declares %q in Params", catalog.URLParam)
		}
	}
	again, err := catalog.Compile(*f)
	if err != nil {
		t.Fatalf("compiling a compiled file API again: %v", err)
	}
	if _, err := again.ValidateQuery(url.Values{"url": {"https://example.com/a.png"}}); err != nil {
		t.Errorf("recompiled file API refuses url: %v", err)
	}
}

// TestCompileDeepCopy checks that the registered API shares nothing mutable with the
// definition: changing the definition's slices, maps and pointers afterwards changes
// neither the registered API nor how it validates.
func TestCompileDeepCopy(t *testing.T) {
	def := fullDef()
	file := fileDef()
	reg := &catalog.Registry{}
	if err := reg.Register(def); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(file); err != nil {
		t.Fatal(err)
	}
	a, _ := reg.Lookup("full-test")
	fa, _ := reg.Lookup("file-test")
	before, _ := json.Marshal(a)
	beforeFile, _ := json.Marshal(fa)

	// Mutate everything reachable from the definitions.
	def.ID = "changed"
	def.Params[0].Name = "changed"
	*def.Params[0].MaxLength = 100
	*def.Params[0].MinLength = 0
	def.Params[1].Enum[0] = "purple"
	*def.Params[7].Max = 1000
	*def.Params[7].Min = -1000
	def.Params[8].Enum[0] = 99
	def.Params[12].Items.Type = catalog.Integer
	*def.Params[12].Items.MaxLength = 100
	def.Params[12].Default.([]string)[0] = "mutated"
	def.Params[14].Default.(map[string]any)["mode"] = "slow"
	def.Params[14].Fields[0].Enum[1] = "medium"
	def.Params[14].Fields[1].Name = "height"
	def.Params[15].Items.Fields[0].Required = false
	def.Params = append(def.Params[:1], def.Params[2:]...)
	def.Result[0].Name = "changed"
	def.Result[2].Items.Type = catalog.String
	def.Result[3].Fields[0].Name = "changed"
	file.File.Types[0] = "image/gif"
	file.File.Name = "changed"
	file.File.MaxBytes = 1

	after, _ := json.Marshal(a)
	afterFile, _ := json.Marshal(fa)
	if string(before) != string(after) {
		t.Errorf("registered API changed with its definition:\nbefore %s\nafter  %s", before, after)
	}
	if string(beforeFile) != string(afterFile) {
		t.Errorf("registered file API changed with its definition:\nbefore %s\nafter  %s", beforeFile, afterFile)
	}
	// And it still validates by the original rules.
	base := func() map[string]any { return map[string]any{"name": "abc"} }
	for _, tc := range []struct {
		name  string
		set   map[string]any
		param string // "" for accepted
	}{
		{"long name", map[string]any{"name": "abcdef"}, "name"},
		{"original enum", map[string]any{"color": "red"}, ""},
		{"mutated enum", map[string]any{"color": "purple"}, "color"},
		{"count above 100", map[string]any{"count": 101}, "count"},
		{"level 1", map[string]any{"level": 1}, ""},
		{"string tags", map[string]any{"tags": []any{"abcd"}}, ""},
		{"points need x", map[string]any{"points": []any{map[string]any{}}}, "points[0].x"},
		{"opts medium", map[string]any{"opts": map[string]any{"mode": "medium"}}, "opts.mode"},
	} {
		in := base()
		for k, v := range tc.set {
			in[k] = v
		}
		_, err := a.ValidateJSON(in)
		if tc.param == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		paramError(t, err, tc.param)
	}
	out, err := a.ValidateJSON(base())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out["tags"], []any{"a"}) || !reflect.DeepEqual(out["opts"], map[string]any{"mode": "fast", "depth": int64(3)}) {
		t.Errorf("defaults changed with the definition: tags %v, opts %v", out["tags"], out["opts"])
	}
	if fa.File.Name != "image" || fa.File.Types[0] != "image/png" || fa.File.MaxBytes != 1<<20 {
		t.Errorf("file field changed with the definition: %+v", fa.File)
	}
}

// TestFileURLParam checks that a compiled file API gives the url parameter it
// validates, a copy, and that other APIs give none.
func TestFileURLParam(t *testing.T) {
	def := baseDef()
	fileBase(&def)
	api, err := catalog.Compile(def)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := api.FileURLParam()
	if !ok || p.Name != catalog.URLParam || p.Type != catalog.String || p.Format != catalog.FormatURL || p.MaxLength == nil {
		t.Fatalf("FileURLParam() = %+v, %v", p, ok)
	}
	*p.MaxLength = 1
	if _, err := api.ValidateQuery(url.Values{"text": {"x"}, catalog.URLParam: {"https://example.com/a.png"}}); err != nil {
		t.Errorf("changing the returned parameter changed the API: %v", err)
	}
	plain, err := catalog.Compile(baseDef())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := plain.FileURLParam(); ok {
		t.Error("an API without a file has a url parameter")
	}
	if _, ok := (&catalog.API{File: &catalog.FileField{}}).FileURLParam(); ok {
		t.Error("an API that was not compiled has a url parameter")
	}
}
