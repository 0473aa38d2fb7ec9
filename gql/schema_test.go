package gql_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/gql"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// introspectionQuery is the text of graphql-js 16's getIntrospectionQuery().
func introspectionQuery(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "introspection.graphql"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The parts of an introspection result the tests read.
type (
	introSchema struct {
		QueryType        struct{ Name string }   `json:"queryType"`
		MutationType     *struct{ Name string }  `json:"mutationType"`
		SubscriptionType *struct{ Name string }  `json:"subscriptionType"`
		Types            []introType             `json:"types"`
		Directives       []struct{ Name string } `json:"directives"`
	}
	introType struct {
		Kind        string       `json:"kind"`
		Name        string       `json:"name"`
		Description *string      `json:"description"`
		Fields      []introField `json:"fields"`
		InputFields []introInput `json:"inputFields"`
		EnumValues  []struct {
			Name string `json:"name"`
		} `json:"enumValues"`
	}
	introField struct {
		Name        string       `json:"name"`
		Description *string      `json:"description"`
		Args        []introInput `json:"args"`
		Type        typeRef      `json:"type"`
	}
	introInput struct {
		Name         string  `json:"name"`
		Description  *string `json:"description"`
		Type         typeRef `json:"type"`
		DefaultValue *string `json:"defaultValue"`
	}
	typeRef struct {
		Kind   string   `json:"kind"`
		Name   *string  `json:"name"`
		OfType *typeRef `json:"ofType"`
	}
)

// String writes a type reference as in SDL: String!, [Int], HashResult.
func (r typeRef) String() string {
	switch r.Kind {
	case "NON_NULL":
		return r.OfType.String() + "!"
	case "LIST":
		return "[" + r.OfType.String() + "]"
	}
	if r.Name == nil {
		return "?"
	}
	return *r.Name
}

// introspect runs the full graphql-js introspection query with the key and decodes
// the schema, checking that it cost nothing and ran nothing.
func (h *harness) introspect(t testing.TB, acct account) (introSchema, map[string]introType) {
	t.Helper()
	before, runs := h.balance(t, acct.ID), h.runs.total()
	r := h.query(t, acct.Key, introspectionQuery(t), nil)
	data := wantOK(t, r)
	if _, ok := data["__schema"]; !ok {
		t.Fatalf("no __schema in %s", truncate(r.Data))
	}
	var out struct {
		Schema introSchema `json:"__schema"`
	}
	if err := json.Unmarshal(r.Data, &out); err != nil {
		t.Fatal(err)
	}
	if got := h.balance(t, acct.ID); got != before {
		t.Errorf("introspection cost %d credits", before-got)
	}
	if h.runs.total() != runs {
		t.Error("introspection ran an API")
	}
	wantCredits(t, r, r.Header.Get("X-Plan"), 0, before)
	types := make(map[string]introType, len(out.Schema.Types))
	for _, ty := range out.Schema.Types {
		types[ty.Name] = ty
	}
	return out.Schema, types
}

func fieldByName(t testing.TB, ty introType, name string) introField {
	t.Helper()
	for _, f := range ty.Fields {
		if f.Name == name {
			return f
		}
	}
	t.Fatalf("type %s has no field %s", ty.Name, name)
	return introField{}
}

func argByName(t testing.TB, f introField, name string) introInput {
	t.Helper()
	for _, a := range f.Args {
		if a.Name == name {
			return a
		}
	}
	t.Fatalf("field %s has no argument %s", f.Name, name)
	return introInput{}
}

func described(d *string) bool { return d != nil && strings.TrimSpace(*d) != "" }

// TestSchemaSDLGolden compares the SDL of the sample catalog with
// testdata/sample.graphql (go test -run SDLGolden -update rewrites it), and checks the
// lines the contract depends on, so that a rewrite of the golden file cannot hide them.
func TestSchemaSDLGolden(t *testing.T) {
	h := newHarness(t, config{sampleOnly: true})
	sdl, err := h.handler.Schema()
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "sample.graphql")
	if *update {
		if err := os.WriteFile(golden, []byte(sdl), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if sdl != string(want) {
		t.Errorf("the SDL differs from %s (run with -update if the change is intended):\n%s", golden, sdl)
	}
	for _, line := range []string{
		"scalar JSON",
		"  hash(\n",
		"    text: String!\n",
		"    algorithm: HashAlgorithm = sha256\n",
		"  ): HashResult\n",
		"  hmac(\n",
		"    secret: String!\n",
		"    encoding: HmacEncoding = hex\n",
		"  ): HmacResult\n",
		"    count: Int = 1\n",
		"  ): UuidgeneratorResult\n",
		"    date: String!\n",
		"  ): DateinfoResult\n",
		"    message: String!\n",
		"    delay_ms: Int = 0\n",
		"  ): EchoResult\n",
		"    url: String\n",
		"  ): ImageinfoResult\n",
		"enum HashAlgorithm {\n  md5\n  sha1\n  sha256\n  sha512\n}",
		"enum HmacEncoding {\n  hex\n  base64\n}",
		"  day_of_week: String\n", "  iso_week: Int\n", "  unix_seconds: Int\n",
		"  quarter_year: String\n", "  _1st_of_month: String\n", "  isleapyear: Boolean\n",
		"  uuids: [String]\n",
		`"""Computes the cryptographic hash of a text and returns it in hexadecimal. Costs 1 credit."""`,
		`"""The text to hash."""`,
		`"""The English name of the weekday."""`,
		"Costs 2 credits. A file API",
	} {
		if !strings.Contains(sdl, line) {
			t.Errorf("the SDL lacks %q", line)
		}
	}
	for _, bad := range []string{"mutation", "subscription", "): HashResult!", "): DateinfoResult!"} {
		if strings.Contains(sdl, bad) {
			t.Errorf("the SDL holds %q", bad)
		}
	}
}

// TestSchemaServed checks the schema the gateway serves, through the standard
// introspection query: one nullable root field per API, typed arguments with defaults,
// enums, non-null required arguments, result types with the GraphQL names of the REST
// fields, descriptions everywhere, no mutation or subscription type.
func TestSchemaServed(t *testing.T) {
	h := newHarness(t, config{sampleOnly: true})
	acct := h.newAccount(t, "pro", -1)
	schema, types := h.introspect(t, acct)
	if schema.QueryType.Name != "Query" || schema.MutationType != nil || schema.SubscriptionType != nil {
		t.Errorf("root types: query %q, mutation %v, subscription %v", schema.QueryType.Name, schema.MutationType, schema.SubscriptionType)
	}
	query := types["Query"]
	var roots []string
	for _, f := range query.Fields {
		roots = append(roots, f.Name)
		if f.Type.Kind == "NON_NULL" {
			t.Errorf("root field %s is %s, want nullable", f.Name, f.Type)
		}
		if !described(f.Description) || !strings.Contains(*f.Description, "Costs ") {
			t.Errorf("root field %s has the description %v", f.Name, f.Description)
		}
		for _, a := range f.Args {
			if !described(a.Description) {
				t.Errorf("argument %s.%s has no description", f.Name, a.Name)
			}
		}
	}
	slices.Sort(roots)
	if want := []string{"dateinfo", "echo", "hash", "hmac", "imageinfo", "uuidgenerator"}; !slices.Equal(roots, want) {
		t.Errorf("root fields %v, want %v", roots, want)
	}

	args := []struct {
		field, arg, typ string
		def             any // nil: no default
	}{
		{"hash", "text", "String!", nil},
		{"hash", "algorithm", "HashAlgorithm", "sha256"},
		{"hmac", "message", "String!", nil},
		{"hmac", "secret", "String!", nil},
		{"hmac", "algorithm", "HmacAlgorithm", "sha256"},
		{"hmac", "encoding", "HmacEncoding", "hex"},
		{"uuidgenerator", "count", "Int", "1"},
		{"dateinfo", "date", "String!", nil},
		{"echo", "message", "String!", nil},
		{"echo", "delay_ms", "Int", "0"},
		{"imageinfo", "url", "String", nil},
	}
	for _, a := range args {
		got := argByName(t, fieldByName(t, query, a.field), a.arg)
		if got.Type.String() != a.typ {
			t.Errorf("%s(%s) has type %s, want %s", a.field, a.arg, got.Type, a.typ)
		}
		switch {
		case a.def == nil && got.DefaultValue != nil:
			t.Errorf("%s(%s) has the default %s", a.field, a.arg, *got.DefaultValue)
		case a.def != nil && (got.DefaultValue == nil || *got.DefaultValue != a.def):
			t.Errorf("%s(%s) has the default %v, want %v", a.field, a.arg, got.DefaultValue, a.def)
		}
	}

	for name, values := range map[string][]string{
		"HashAlgorithm": {"md5", "sha1", "sha256", "sha512"},
		"HmacAlgorithm": {"sha1", "sha256", "sha512"},
		"HmacEncoding":  {"hex", "base64"},
	} {
		ty := types[name]
		var got []string
		for _, v := range ty.EnumValues {
			got = append(got, v.Name)
		}
		if ty.Kind != "ENUM" || !slices.Equal(got, values) {
			t.Errorf("%s is %s %v, want ENUM %v", name, ty.Kind, got, values)
		}
	}

	results := map[string][][2]string{
		"HashResult":          {{"algorithm", "String"}, {"hash", "String"}},
		"HmacResult":          {{"hmac", "String"}, {"algorithm", "String"}, {"encoding", "String"}},
		"UuidgeneratorResult": {{"uuids", "[String]"}, {"count", "Int"}},
		"EchoResult":          {{"message", "String"}, {"delay_ms", "Int"}},
		"ImageinfoResult":     {{"format", "String"}, {"width", "Int"}, {"height", "Int"}, {"bytes", "Int"}},
		"DateinfoResult": {{"date", "String"}, {"day_of_week", "String"}, {"iso_week", "Int"}, {"unix_seconds", "Int"},
			{"quarter_year", "String"}, {"_1st_of_month", "String"}, {"isleapyear", "Boolean"}},
	}
	for name, fields := range results {
		ty := types[name]
		if ty.Kind != "OBJECT" || !described(ty.Description) || len(ty.Fields) != len(fields) {
			t.Errorf("%s: kind %s, description %v, %d fields; want an object with a description and %d fields", name, ty.Kind, ty.Description, len(ty.Fields), len(fields))
			continue
		}
		for i, f := range fields {
			got := ty.Fields[i]
			if got.Name != f[0] || got.Type.String() != f[1] || !described(got.Description) {
				t.Errorf("%s field %d is %s: %s (%v), want %s: %s with a description", name, i, got.Name, got.Type, got.Description, f[0], f[1])
			}
		}
	}
	if ty := types["JSON"]; ty.Kind != "SCALAR" {
		t.Errorf("JSON is %q, want a scalar", ty.Kind)
	}
}

// TestIntrospectionFree sends the standard graphql-js introspection query with both
// media types, with a free-plan key, under limits far smaller than the query's depth:
// 200 with __schema, no credit spent, no API run.
func TestIntrospectionFree(t *testing.T) {
	h := newHarness(t, config{gql: gql.Options{Limits: gql.Limits{MaxDepth: 2, MaxSelections: 3, MaxRootFields: 1}}})
	free := h.newAccount(t, "free", -1)
	for _, media := range []string{mediaGraphQL, mediaJSON} {
		r := h.query(t, free.Key, introspectionQuery(t), nil, accept(media))
		data := wantOK(t, r)
		if r.Header.Get("Content-Type") != media {
			t.Errorf("Content-Type %q, want %q", r.Header.Get("Content-Type"), media)
		}
		if field(t, data, "__schema", "queryType", "name") != "Query" {
			t.Errorf("queryType: %v", field(t, data, "__schema", "queryType"))
		}
		wantCredits(t, r, "free", 0, 50)
	}
	for _, q := range []string{`{ __typename }`, `{ __type(name: "HashResult") { name fields { name } } }`, `query Q { __schema { queryType { name } } }`} {
		data := wantOK(t, h.query(t, free.Key, q, nil))
		if len(data) == 0 {
			t.Errorf("%s: empty data", q)
		}
	}
	if got := h.balance(t, free.ID); got != 50 {
		t.Errorf("balance %d after introspection, want 50", got)
	}
	if n := h.runs.total(); n != 0 {
		t.Errorf("introspection ran %d APIs", n)
	}
}

// richAPIs are APIs with every kind of parameter and result: lists, input objects,
// numbers, booleans, enums (GraphQL names or not), defaults, a free-form (JSON) field,
// nested objects, lists of objects, 64-bit integers, and an API with a free-form result
// and no parameters.
func richAPIs() []catalog.API {
	return []catalog.API{{
		ID: "rich-types", Title: "Rich", Description: "Echoes its parameters and returns typed results.",
		Method: http.MethodPost, Cost: 1,
		Params: []catalog.Param{
			{Name: "tags", Type: catalog.Array, Items: &catalog.Param{Type: catalog.String}, Required: true, Description: "Tags."},
			{Name: "ids", Type: catalog.Array, Items: &catalog.Param{Type: catalog.Integer}, Description: "Ids."},
			{Name: "point", Type: catalog.Object, Description: "A point.", Fields: []catalog.Param{
				{Name: "x", Type: catalog.Number, Required: true, Description: "X."},
				{Name: "y", Type: catalog.Number, Default: 0.0, Description: "Y."},
				{Name: "label", Type: catalog.String, Description: "Label."},
			}},
			{Name: "points", Type: catalog.Array, Description: "Points.", Items: &catalog.Param{Type: catalog.Object, Fields: []catalog.Param{
				{Name: "x", Type: catalog.Number, Required: true},
			}}},
			{Name: "ratio", Type: catalog.Number, Default: 0.5, Description: "A ratio."},
			{Name: "limit", Type: catalog.Integer, Min: catalog.Num(1), Max: catalog.Num(10), Default: 3, Description: "A limit."},
			{Name: "flag", Type: catalog.Boolean, Description: "A flag."},
			{Name: "mode", Type: catalog.String, Enum: []any{"fast", "slow"}, Default: "fast", Description: "A mode."},
			{Name: "color", Type: catalog.String, Enum: []any{"light-blue", "dark red"}, Description: "Not GraphQL names."},
		},
		Result: []catalog.Field{
			{Name: "echo", Type: catalog.JSON, Description: "The validated parameters."},
			{Name: "summary", Type: catalog.Object, Description: "A nested object.", Fields: []catalog.Field{
				{Name: "count", Type: catalog.Integer},
				{Name: "mean", Type: catalog.Number},
				{Name: "first-tag", Type: catalog.String},
			}},
			{Name: "items", Type: catalog.Array, Description: "A list of objects.", Items: &catalog.Field{Type: catalog.Object, Fields: []catalog.Field{
				{Name: "name", Type: catalog.String},
				{Name: "value.x", Type: catalog.Number},
				{Name: "sub", Type: catalog.Object, Fields: []catalog.Field{{Name: "ok", Type: catalog.Boolean}}},
			}}},
			{Name: "numbers", Type: catalog.Array, Items: &catalog.Field{Type: catalog.Integer}},
			{Name: "big", Type: catalog.Integer, Description: "Beyond 32 bits."},
		},
		Handler: catalog.HandlerFunc(func(_ context.Context, req *catalog.Request) (any, error) {
			tags := req.Params["tags"].([]any)
			first := ""
			if len(tags) > 0 {
				first = tags[0].(string)
			}
			return map[string]any{
				"echo":    req.Params,
				"summary": map[string]any{"count": len(tags), "mean": 2.5, "first-tag": first},
				"items": []any{
					map[string]any{"name": "a", "value.x": 1.5, "sub": map[string]any{"ok": true}},
					map[string]any{"name": "b", "value.x": -2, "sub": nil},
				},
				"numbers": []int64{1, 2, 3},
				"big":     int64(1) << 40,
			}, nil
		}),
	}, {
		ID: "free-form", Title: "Free form", Description: "Returns a free-form result.",
		Method: http.MethodGet, Cost: 1,
		Handler: catalog.HandlerFunc(func(context.Context, *catalog.Request) (any, error) {
			return map[string]any{"any": []any{1, "two", map[string]any{"three": 3.5}}, "weird key": nil}, nil
		}),
	}}
}

// TestRichTypesRoundTrip queries APIs with every kind of parameter and result and
// checks that values arrive at the handler as the catalog types them (defaults
// applied, enums mapped, lists coerced) and come back in the GraphQL shape.
func TestRichTypesRoundTrip(t *testing.T) {
	h := newHarness(t, config{sampleOnly: true, extra: richAPIs()})
	acct := h.newAccount(t, "pro", -1)
	sdl, err := h.handler.Schema()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"    tags: [String!]!\n", "    ids: [Int!]\n", "    point: RichtypesPointInput\n",
		"    points: [RichtypesPointsItemInput!]\n", "    ratio: Float = 0.5\n", "    limit: Int = 3\n",
		"    flag: Boolean\n", "    mode: RichtypesMode = fast\n", "    color: String\n",
		"  ): RichtypesResult\n", "  freeform: JSON\n",
		"input RichtypesPointInput {", "  x: Float!\n", "enum RichtypesMode {\n  fast\n  slow\n}",
		"  echo: JSON\n", "  summary: RichtypesResultSummary\n", "  first_tag: String\n",
		"  items: [RichtypesResultItemsItem]\n", "  value_x: Float\n", "  numbers: [Int]\n", "  big: Int\n",
	} {
		if !strings.Contains(sdl, line) {
			t.Errorf("the SDL lacks %q", line)
		}
	}

	const sel = `{ echo summary { count mean first_tag } items { name value_x sub { ok } } numbers big }`
	tests := []struct {
		name  string
		query string
		vars  map[string]any
		echo  string // the parameters the handler received, as JSON
	}{
		{"literals", `{ richtypes(tags: ["a", "b"], ids: [1, 2], point: {x: 1.5, label: "p"}, points: [{x: 1}, {x: 2}], flag: true, mode: slow, color: "light-blue", ratio: 2) ` + sel + ` }`, nil,
			`{"color":"light-blue","flag":true,"ids":[1,2],"limit":3,"mode":"slow","point":{"label":"p","x":1.5,"y":0},"points":[{"x":1},{"x":2}],"ratio":2,"tags":["a","b"]}`},
		{"defaults", `{ richtypes(tags: []) ` + sel + ` }`, nil,
			`{"limit":3,"mode":"fast","ratio":0.5,"tags":[]}`},
		{"variables", `query Q($t: [String!]!, $p: RichtypesPointInput, $l: Int, $m: RichtypesMode, $r: Float) { richtypes(tags: $t, point: $p, limit: $l, mode: $m, ratio: $r) ` + sel + ` }`,
			map[string]any{"t": []any{"a"}, "p": map[string]any{"x": 2, "y": -1.25}, "l": 10, "m": "slow", "r": 1e-3},
			`{"limit":10,"mode":"slow","point":{"x":2,"y":-1.25},"ratio":0.001,"tags":["a"]}`},
		{"single values coerced to lists", `{ richtypes(tags: "one", ids: 7, points: {x: 3}) ` + sel + ` }`, nil,
			`{"ids":[7],"limit":3,"mode":"fast","points":[{"x":3}],"ratio":0.5,"tags":["one"]}`},
		{"a single variable value coerced to a list", `query($t: [String!]!) { richtypes(tags: $t) ` + sel + ` }`, map[string]any{"t": "solo"},
			`{"limit":3,"mode":"fast","ratio":0.5,"tags":["solo"]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.query(t, acct.Key, tt.query, tt.vars)
			data := wantOK(t, r)
			rich := data["richtypes"].(map[string]any)
			echo, _ := json.Marshal(rich["echo"])
			if string(echo) != tt.echo {
				t.Errorf("the handler received %s, want %s", echo, tt.echo)
			}
			tags, _ := json.Marshal(field(t, rich, "summary"))
			if !strings.Contains(string(tags), `"mean":2.5`) {
				t.Errorf("summary %s", tags)
			}
			if want := `"items":[{"name":"a","value_x":1.5,"sub":{"ok":true}},{"name":"b","value_x":-2,"sub":null}]`; !strings.Contains(string(r.Data), want) {
				t.Errorf("data %s lacks %s", r.Data, want)
			}
			if n := fmt.Sprint(rich["numbers"]); n != "[1 2 3]" {
				t.Errorf("numbers %s", n)
			}
			if b := fmt.Sprint(rich["big"]); b != "1099511627776" {
				t.Errorf("big %s, want 1099511627776 (64-bit integers are kept)", b)
			}
		})
	}

	t.Run("free-form result", func(t *testing.T) {
		r := h.query(t, acct.Key, `{ freeform }`, nil)
		wantOK(t, r)
		if want := `{"freeform":{"any":[1,"two",{"three":3.5}],"weird key":null}}`; string(r.Data) != want {
			t.Errorf("data %s, want %s", r.Data, want)
		}
	})

	refused := []struct{ name, query, msg string }{
		{"out of range", `{ richtypes(tags: [], limit: 11) { big } }`, `"limit"`},
		{"not in the enum", `{ richtypes(tags: [], color: "green") { big } }`, `"color"`},
		{"list element of the wrong type through a variable", `query($t: [String!]!) { richtypes(tags: $t) { big } }`, `tags[1]`},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			r := h.query(t, acct.Key, tt.query, map[string]any{"t": []any{"a", 2}})
			wantGatewayError(t, r, http.StatusBadRequest, "BAD_USER_INPUT", "richtypes", tt.msg)
		})
	}
	if got := h.runs.get("rich-types"); got != len(tests) {
		t.Errorf("rich-types ran %d times, want %d", got, len(tests))
	}
}

// TestSchemaRebuild changes the catalog under a live handler: a new API can be queried
// by the very next query, a removed one is a validation error, the others keep working.
func TestSchemaRebuild(t *testing.T) {
	h := newHarness(t, config{sampleOnly: true})
	acct := h.newAccount(t, "pro", -1)
	const q = `{ shout(text: "hi") { text } }`
	r := h.query(t, acct.Key, q, nil)
	wantError(t, r, http.StatusBadRequest, "GRAPHQL_VALIDATION_FAILED", "shout")

	err := h.reg.Register(catalog.API{
		ID: "shout", Title: "Shout", Description: "Upper-cases a text.", Method: http.MethodGet, Cost: 1,
		Params: []catalog.Param{{Name: "text", Type: catalog.String, Required: true, Description: "The text."}},
		Result: []catalog.Field{{Name: "text", Type: catalog.String, Description: "The text, upper-cased."}},
		Handler: catalog.HandlerFunc(func(_ context.Context, req *catalog.Request) (any, error) {
			return map[string]any{"text": strings.ToUpper(req.Params.String("text"))}, nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	data := wantOK(t, h.query(t, acct.Key, q, nil))
	if got := field(t, data, "shout", "text"); got != "HI" {
		t.Errorf("shout = %v", got)
	}
	if sdl, _ := h.handler.Schema(); !strings.Contains(sdl, "  shout(\n") {
		t.Error("Schema() lacks the new API")
	}
	if got := h.balance(t, acct.ID); got != 100000-1 {
		t.Errorf("balance %d, want %d", got, 100000-1)
	}

	h.reg.Remove("shout")
	r = h.query(t, acct.Key, q, nil)
	wantError(t, r, http.StatusBadRequest, "GRAPHQL_VALIDATION_FAILED", "shout")
	if sdl, _ := h.handler.Schema(); strings.Contains(sdl, "shout") {
		t.Error("Schema() still has the removed API")
	}
	wantOK(t, h.query(t, acct.Key, `{ hash(text: "x") { hash } }`, nil))
	if got := h.balance(t, acct.ID); got != 100000-2 {
		t.Errorf("balance %d, want %d (the refused query is free)", got, 100000-2)
	}
}

// TestSchemaRebuildConcurrent queries the gateway from many goroutines while the
// catalog changes under it: every query of a stable API succeeds, whatever schema it
// met, and the race detector sees the atomic swap.
func TestSchemaRebuildConcurrent(t *testing.T) {
	h := newHarness(t, config{sampleOnly: true, plans: []billing.Plan{{Name: "open", Credits: 1 << 40, GraphQLMaxAPIs: 10}}})
	acct := h.newAccount(t, "open", -1)
	const workers, perWorker, changes = 4, 25, 20
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range changes {
			id := fmt.Sprintf("temp-%d", i%3)
			h.reg.Remove(id)
			err := h.reg.Register(catalog.API{
				ID: id, Title: "Temp", Description: "A temporary API.", Method: http.MethodGet, Cost: 1,
				Result:  []catalog.Field{{Name: "n", Type: catalog.Integer}},
				Handler: catalog.HandlerFunc(func(context.Context, *catalog.Request) (any, error) { return map[string]any{"n": i}, nil }),
			})
			if err != nil {
				t.Error(err)
			}
			if _, err := h.handler.Schema(); err != nil {
				t.Error(err)
			}
		}
		close(stop)
	})
	for w := range workers {
		wg.Go(func() {
			for i := 0; i < perWorker || !closed(stop); i++ {
				text := fmt.Sprintf("w%d-%d", w, i)
				req := newRequest(context.Background(), http.MethodPost, gqlBody(t, `{ hash(text: "`+text+`") { hash } }`, nil), apiKey(acct.Key), contentType(mediaJSON))
				r, _ := serveRecorded(h.handler, req)
				if err := checkResponse(req, r); err != nil || r.Status != http.StatusOK || len(r.Errors) != 0 {
					t.Errorf("query during a rebuild: %d %v %s", r.Status, err, truncate(r.Body))
					return
				}
			}
		})
	}
	wg.Wait()
}

func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// TestRegistrationRejectsUnmappableNames registers APIs whose names GraphQL cannot
// take: each is refused with an error that says why, and the gateway keeps serving the
// catalog it had.
func TestRegistrationRejectsUnmappableNames(t *testing.T) {
	h := newHarness(t, config{sampleOnly: true})
	acct := h.newAccount(t, "pro", -1)
	handler := catalog.HandlerFunc(func(context.Context, *catalog.Request) (any, error) { return map[string]any{}, nil })
	base := func(id string) catalog.API {
		return catalog.API{ID: id, Title: "T", Description: "D", Method: http.MethodGet, Cost: 1, Handler: handler}
	}
	tests := []struct {
		name string
		api  func() catalog.API
		want []string
	}{
		{"root field taken by date-info", func() catalog.API { return base("dateinfo") }, []string{"graphql root field dateinfo"}},
		{"parameters that differ in underscores", func() catalog.API {
			a := base("paged")
			a.Params = []catalog.Param{{Name: "page_size", Type: catalog.Integer}, {Name: "pagesize", Type: catalog.Integer}}
			return a
		}, []string{"page_size", "pagesize", "graphql"}},
		{"parameters that differ in case", func() catalog.API {
			a := base("cased")
			a.Params = []catalog.Param{{Name: "Query", Type: catalog.String}, {Name: "query", Type: catalog.String}}
			return a
		}, []string{"graphql"}},
		{"parameters that map to one name", func() catalog.API {
			a := base("clash")
			a.Params = []catalog.Param{{Name: "a-b", Type: catalog.String}, {Name: "a.b", Type: catalog.String}}
			return a
		}, []string{"a_b"}},
		{"result fields that map to one name", func() catalog.API {
			a := base("clash-result")
			a.Result = []catalog.Field{{Name: "x-y", Type: catalog.String}, {Name: "x/y", Type: catalog.String}}
			return a
		}, []string{"x_y"}},
		{"nested result fields that map to one name", func() catalog.API {
			a := base("clash-nested")
			a.Result = []catalog.Field{{Name: "o", Type: catalog.Object, Fields: []catalog.Field{{Name: "p+q", Type: catalog.String}, {Name: "p:q", Type: catalog.String}}}}
			return a
		}, []string{"p_q"}},
		{"a result field reserved by GraphQL", func() catalog.API {
			a := base("reserved")
			a.Result = []catalog.Field{{Name: "--type", Type: catalog.String}}
			return a
		}, []string{"__"}},
		{"a result field with no letters", func() catalog.API {
			a := base("empty-name")
			a.Result = []catalog.Field{{Name: "!!", Type: catalog.String}}
			return a
		}, []string{"no letters"}},
	}
	before, _ := h.handler.Schema()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := h.reg.Register(tt.api())
			if err == nil {
				t.Fatal("registered")
			}
			for _, w := range tt.want {
				if !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(w)) {
					t.Errorf("the error %q does not mention %q", err, w)
				}
			}
			if !errors.Is(err, catalog.ErrInvalidAPI) && !errors.Is(err, catalog.ErrDuplicate) {
				t.Errorf("the error %v wraps neither ErrInvalidAPI nor ErrDuplicate", err)
			}
		})
	}
	if after, _ := h.handler.Schema(); after != before {
		t.Error("a refused registration changed the schema")
	}
	wantOK(t, h.query(t, acct.Key, `{ hash(text: "x") { hash } }`, nil))
}

// TestOddNamesServed registers, under a live gateway, APIs whose names the catalog
// accepts and GraphQL maps: no parameters at all, object parameters whose fields are
// not GraphQL names, result fields holding the characters of naming rule 2 (a
// backslash among them) and other punctuation. Each must be queryable, and must not
// take the rest of the gateway down.
func TestOddNamesServed(t *testing.T) {
	h := newHarness(t, config{sampleOnly: true})
	acct := h.newAccount(t, "pro", -1)
	tests := []struct {
		name  string
		api   catalog.API
		query string
		want  string
	}{
		{"no parameters", catalog.API{
			ID: "no-params", Title: "T", Description: "D", Method: http.MethodGet, Cost: 1,
			Result: []catalog.Field{{Name: "ok", Type: catalog.Boolean}},
			Handler: catalog.HandlerFunc(func(context.Context, *catalog.Request) (any, error) {
				return map[string]any{"ok": true}, nil
			}),
		}, `{ noparams { ok } }`, `{"noparams":{"ok":true}}`},
		{"object parameter fields that are not GraphQL names", catalog.API{
			ID: "person", Title: "T", Description: "D", Method: http.MethodPost, Cost: 1,
			Params: []catalog.Param{{Name: "who", Type: catalog.Object, Required: true, Fields: []catalog.Param{
				{Name: "first-name", Type: catalog.String, Required: true},
				{Name: "last.name", Type: catalog.String, Default: "Doe"},
			}}, {Name: "boss", Type: catalog.Object, Default: map[string]any{"first-name": "Grace"}, Fields: []catalog.Param{
				{Name: "first-name", Type: catalog.String},
			}}},
			Result: []catalog.Field{{Name: "full", Type: catalog.String}},
			Handler: catalog.HandlerFunc(func(_ context.Context, req *catalog.Request) (any, error) {
				who := req.Params["who"].(map[string]any)
				boss := req.Params["boss"].(map[string]any)
				return map[string]any{"full": fmt.Sprint(who["first-name"], " ", who["last.name"], " for ", boss["first-name"])}, nil
			}),
		}, `{ person(who: {first_name: "Ada"}) { full } }`, `{"person":{"full":"Ada Doe for Grace"}}`},
		{"result fields with a backslash, a comma and a quote", catalog.API{
			ID: "punctuation", Title: "T", Description: "D", Method: http.MethodGet, Cost: 1,
			Result: []catalog.Field{
				{Name: `dir\name`, Type: catalog.String},
				{Name: "a,b", Type: catalog.Integer},
				{Name: `say "hi"`, Type: catalog.String},
				{Name: "it's", Type: catalog.String},
				{Name: "temp°C", Type: catalog.Number},
				{Name: "nest", Type: catalog.Array, Items: &catalog.Field{Type: catalog.Object, Fields: []catalog.Field{{Name: `x\y`, Type: catalog.Boolean}}}},
			},
			Handler: catalog.HandlerFunc(func(context.Context, *catalog.Request) (any, error) {
				return map[string]any{`dir\name`: "d", "a,b": 2, `say "hi"`: "hi", "it's": "mine", "temp°C": 21.5,
					"nest": []any{map[string]any{`x\y`: true}}}, nil
			}),
		}, `{ punctuation { dir_name ab sayhi its tempC nest { x_y } } }`, `{"punctuation":{"dir_name":"d","ab":2,"sayhi":"hi","its":"mine","tempC":21.5,"nest":[{"x_y":true}]}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := h.reg.Register(tt.api); err != nil {
				t.Fatalf("Register: %v", err)
			}
			defer h.reg.Remove(tt.api.ID)
			r := h.query(t, acct.Key, tt.query, nil)
			wantOK(t, r)
			if string(r.Data) != tt.want {
				t.Errorf("data %s, want %s", r.Data, tt.want)
			}
			wantOK(t, h.query(t, acct.Key, `{ hash(text: "x") { hash } }`, nil))
		})
	}
}
