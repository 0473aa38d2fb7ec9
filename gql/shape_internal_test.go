package gql

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	gqlerrors "github.com/graph-gophers/graphql-go/errors"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/edge"
)

// shapeAPIs declare a result of every kind an answer writes: each scalar, nested
// objects, lists of scalars, of objects and of lists, keys that need renaming, and a
// free-form result.
func shapeAPIs() []*catalog.API {
	point := []catalog.Field{
		{Name: "x", Type: catalog.Number},
		{Name: "label", Type: catalog.String},
		{Name: "value.x", Type: catalog.Number},
		{Name: "temp°C", Type: catalog.Integer},
	}
	return []*catalog.API{{
		ID: "shapes", Title: "Shapes", Cost: 1,
		Params: []catalog.Param{{Name: "text", Type: catalog.String}},
		Result: []catalog.Field{
			{Name: "name", Type: catalog.String},
			{Name: "count", Type: catalog.Integer},
			{Name: "ratio", Type: catalog.Number},
			{Name: "ok", Type: catalog.Boolean},
			{Name: "raw", Type: catalog.JSON},
			{Name: "point", Type: catalog.Object, Fields: point},
			{Name: "points", Type: catalog.Array, Items: &catalog.Field{Type: catalog.Object, Fields: point}},
			{Name: "tags", Type: catalog.Array, Items: &catalog.Field{Type: catalog.String}},
			{Name: "grid", Type: catalog.Array, Items: &catalog.Field{Type: catalog.Array, Items: &catalog.Field{Type: catalog.Integer}}},
			{Name: "a,b", Type: catalog.String},
			{Name: "day-of-week", Type: catalog.String},
			{Name: "flags", Type: catalog.Object, Fields: []catalog.Field{{Name: "on", Type: catalog.Boolean}, {Name: "off", Type: catalog.Boolean}}},
		},
	}, {
		ID: "hash", Title: "Hash", Cost: 1,
		Params: []catalog.Param{{Name: "text", Type: catalog.String}},
		Result: []catalog.Field{{Name: "algorithm", Type: catalog.String}, {Name: "hash", Type: catalog.String}},
	}, {
		ID: "free-form", Title: "Free form", Cost: 1,
	}}
}

// shapeResults are API results to write: well-formed, odd and ill-typed. failResult
// stands for a call that failed.
var shapeResults = []string{
	`{"name":"n","count":3,"ratio":0.5,"ok":true,"raw":{"b":[1, 2],"a":"x"},"point":{"x":1,"label":"p","value.x":2.5,"temp°C":-4},` +
		`"points":[{"x":1},null,{"label":"q","value.x":1e21}],"tags":["a",null,"c"],"grid":[[1,2],null,[]],"a,b":"ab","day-of-week":"Monday",` +
		`"flags":{"on":true,"off":false},"algorithm":"sha256","hash":"abc"}`,
	`{"name":"<b>&amp;</b>\u2028\u2029","count":9007199254740993,"ratio":-0,"ok":false,"raw":"<html> & \u2028","point":null,"points":[],"tags":null}`,
	`{"NAME":"upper","Count":1.0,"ratio":1e-7,"raw":null,"point":{"X":"not a number","LABEL":"L"},"Algorithm":"md5"}`,
	`{"name":7,"count":1.5,"ratio":"half","ok":"yes","points":{"x":1},"tags":"one","grid":[[1.5]],"flags":[true]}`,
	`{"count":99999999999999999999,"ratio":1e400,"raw":[1,{"z":null}," "]}`,
	`{"name":"dup","name":"second","raw":  {  "spaced" :  true  }  }`,
	"{\"name\":\"caf\u00e9 \\u00e9 \\ud83d\\ude00 \\u0041 \\/ \\t\",\"tags\":[\"\\ud800\",\"\xff\"]}",
	`null`,
	`[]`,
	`"just a string"`,
	`12.50`,
	`{}`,
	failResult,
}

const failResult = "!fail"

// shapeQueries are queries the shape writes (want true) and queries it leaves to
// graphql-go's execution (want false), with their variables.
var shapeQueries = []struct {
	query, vars string
	shaped      bool
}{
	{`{ hash(text: "hello") { algorithm hash } }`, ``, true},
	{`query { hash { hash } }`, ``, true},
	{`query Named { h: hash(text: "a") { alg: algorithm hash __typename } __typename }`, ``, true},
	{`{ shapes { name count ratio ok raw point { x label value_x tempC } points { x label value_x tempC __typename } tags grid ab day_of_week flags { on off } } }`, ``, true},
	{`{ shapes(text: "(\"}{)") { t: __typename n: name points { label } } freeform hash(text: """ block ) " "" """) { hash } }`, ``, true},
	{"\uFEFF# comment (\n{ shapes(text: \"a\" # ) \"\n) { name, count } }", ``, true},
	{`{ a: hash(text: "x") { hash } b: hash(text: "x") { algorithm } }`, ``, true},
	{`{ a: hash(text: "x") { hash } b: hash(text: "y") { hash } }`, ``, true},
	{`{ hash(text: "x") { hash } hash(text: "x") { algorithm } }`, ``, true},
	{`{ hash(text: "x") { ...F } } fragment F on HashResult { hash }`, ``, true},
	{`{ hash(text: "x") { ... on HashResult { hash } } }`, ``, true},
	{`{ hash(text: "x") @include(if: true) { hash } }`, ``, true},
	{`query($t: String) { hash(text: $t) { hash } }`, `{"t": "x"}`, true},
	{`query($s: Boolean!) { shapes { name @skip(if: $s) count @include(if: $s) point { x @skip(if: $s) label } } }`, `{"s": true}`, true},
	{`fragment P on ShapesResultPoint { x ...L } fragment L on ShapesResultPoint { label } { shapes { point { ...P } p2: point { label __typename } points { ... on ShapesResultPointsItem { label } x } } }`, ``, true},
	{`fragment Q on Query { hash(text: "x") { hash } } { ...Q shapes { ok } }`, ``, true},
	{`{ shapes { flags { off } f: flags { on off } ok } }`, ``, true},
	{`{ __schema { queryType { name } } hash(text: "x") { hash } }`, ``, true},
	{`{ __type(name: "HashResult") { name fields { name } } shapes { count } }`, ``, true},
	{`{ freeform }`, ``, true},
	{`{ f: freeform g: freeform shapes { raw } }`, ``, true},
	{`{ shapes { name point { __typename } p: points { t: __typename } } }`, ``, true},
	{`{ shapes { grid name } x: shapes { point { __typename } } }`, ``, true},
	{`{ __type(name: "ShapesResultPoint") { name } shapes { point { __typename } count } }`, ``, true},
	{`{ hash(text: "x") { __typename } }`, ``, true},
	{`{ __typename h: hash(text: "x") { t: __typename } q: __typename }`, ``, true},
	// No marker or __typename below a place, or a __typename beside introspection
	// that could name it too: graphql-go writes the answer.
	{`{ __type(name: "HashResult") { name } hash(text: "x") { __typename } }`, ``, false},
	{`query($s: Boolean!) { shapes { point { x @skip(if: $s) } name } }`, `{"s": true}`, false},
	{`query($s: Boolean!) { hash(text: "x") { hash @skip(if: $s) } }`, `{"s": true}`, false},
}

// newShapeSchema builds the schema of shapeAPIs with the handler's resolvers.
func newShapeSchema(t testing.TB) (*Handler, *schema) {
	h := &Handler{log: slog.New(slog.NewTextHandler(io.Discard, nil)), door: edge.Default().Door(edge.DoorSpec{Methods: "POST, OPTIONS"})}
	s, err := buildSchema(shapeAPIs(), 1, h.resolve)
	if err != nil {
		t.Fatal(err)
	}
	return h, s
}

// compareShape plans query with vars and, with every call answering result, writes the
// answer from the plan's shape and through graphql-go's execution: it reports whether
// the query has a shape, and fails the test if the two answers differ.
func compareShape(t testing.TB, h *Handler, s *schema, query, vars, result string) bool {
	ctx := context.Background()
	variables := func() map[string]any { // graphql-go adds defaults to the map it is given
		var m map[string]any
		json.Unmarshal([]byte(vars), &m)
		return m
	}
	planning := &state{planning: true}
	resp, err := execute(withState(ctx, planning), s, query, "", variables())
	if err != nil {
		t.Fatalf("query %s: %v", query, err)
	}
	if len(resp.Errors) > 0 || len(planning.calls) == 0 {
		return false
	}
	shape, ok := s.readShape(resp.Data, planning.calls)
	if !ok {
		return false
	}
	// One result per API, as the service gives every alias of an API its one result.
	res := tollgate.Result{JSON: []byte(result)}
	if result == failResult {
		res = tollgate.Result{Err: &tollgate.Error{Code: tollgate.CodeAPIFailed, Message: "the API failed"}}
	}
	done := &state{results: map[*root]int{}}
	for _, c := range planning.calls {
		if _, seen := done.results[c.root]; !seen {
			v, err := h.decode(ctx, c.root, &res)
			done.results[c.root] = len(done.decoded)
			done.decoded, done.failed = append(done.decoded, v), append(done.failed, err)
		}
	}
	w := answerWriter{}
	w.writeData(shape, func(f *shapeField) (reflect.Value, error) {
		i := done.results[f.root]
		return done.decoded[i], done.failed[i]
	})
	slow, err := execute(withState(ctx, done), s, query, "", variables())
	if err != nil {
		t.Fatalf("query %s: %v", query, err)
	}
	if !bytes.Equal(w.b, slow.Data) || errorsText(w.errs) != errorsText(slow.Errors) {
		t.Fatalf("query %s, result %s:\nshape      %s %s\ngraphql-go %s %s", query, result, w.b, errorsText(w.errs), slow.Data, errorsText(slow.Errors))
	}
	return true
}

// errorsText writes errors as JSON, in the order of their paths: graphql-go reports
// the errors of root fields in the order their resolvers returned.
func errorsText(errs []*gqlerrors.QueryError) string {
	errs = slices.Clone(errs)
	slices.SortFunc(errs, func(a, b *gqlerrors.QueryError) int { return strings.Compare(fmt.Sprint(a.Path), fmt.Sprint(b.Path)) })
	b, _ := json.Marshal(errs)
	return string(b)
}

// TestShapeMatchesGraphQLGo: for every query and result, the answer written from the
// plan's shape is byte for byte graphql-go's, and every query but those with a place no
// marker shows has a shape.
func TestShapeMatchesGraphQLGo(t *testing.T) {
	h, s := newShapeSchema(t)
	for _, q := range shapeQueries {
		for _, result := range shapeResults {
			if got := compareShape(t, h, s, q.query, q.vars, result); got != q.shaped {
				t.Errorf("query %s: shaped %v, want %v", q.query, got, q.shaped)
			}
		}
	}
}

// FuzzShape compares the answers written from shapes with graphql-go's on random
// queries and results.
//
//	go test -run='^$' -fuzz=FuzzShape -fuzztime=30s ./gql/
func FuzzShape(f *testing.F) {
	for i, q := range shapeQueries {
		f.Add(q.query, q.vars, shapeResults[i%len(shapeResults)])
	}
	h, s := newShapeSchema(f)
	f.Fuzz(func(t *testing.T, query, vars, result string) {
		if len(query) > 4096 || len(vars) > 1024 || len(result) > 4096 {
			return
		}
		compareShape(t, h, s, query, vars, result)
	})
}

// TestScalarsMatchEncodingJSON: a scalar of a result is written as encoding/json writes
// the Go value it decodes the scalar to, in a field of a result: a *string, an *int64,
// a *float64, a *bool, or a *json.RawMessage for JSON.
func TestScalarsMatchEncodingJSON(t *testing.T) {
	values := []string{
		`null`, `""`, `"plain text"`, `"<b>&amp;</b>"`, `"\u2028\u2029"`, "\"caf\u00e9\"", `"\u00e9\ud83d\ude00"`,
		`"\ud800"`, "\"\xff\xfe\"", `"\/\t\n\"\\"`, `"\u0000"`, `"\u007f"`,
		`0`, `-0`, `7`, `-12`, `9007199254740993`, `9223372036854775807`, `9223372036854775808`, `-9223372036854775809`,
		`1.0`, `1.5`, `-0.0`, `1e3`, `1E-7`, `1e21`, `1e20`, `123456789e-15`, `1e400`, `-1e400`, `5e-324`, `0.1e-6`,
		`true`, `false`, `[]`, `[1, "a"]`, `{}`, `{ "a" : [ true , null ] , "<" : "&" }`,
	}
	kinds := []struct {
		name string
		want func(raw string) (string, error)
		got  reflect.Type
	}{
		{"String", typedJSON[string], reflect.TypeFor[stringValue]()},
		{"Int", typedJSON[int64], reflect.TypeFor[intValue]()},
		{"Float", typedJSON[float64], reflect.TypeFor[floatValue]()},
		{"Boolean", typedJSON[bool], reflect.TypeFor[boolValue]()},
		{"JSON", typedJSON[json.RawMessage], reflect.TypeFor[jsonValue]()},
	}
	for _, k := range kinds {
		for _, raw := range values {
			want, wantErr := k.want(raw)
			field := reflect.StructOf([]reflect.StructField{{Name: "V", Type: reflect.PointerTo(k.got), Tag: `json:"v"`}})
			v := reflect.New(field)
			if err := json.Unmarshal([]byte(`{"v":`+raw+`}`), v.Interface()); err != nil {
				t.Fatalf("%s %s: %v", k.name, raw, err)
			}
			got, mismatch := "null", false
			if p := v.Elem().Field(0); !p.IsNil() {
				sc := p.Interface().(resultScalar).scalarOf()
				got, mismatch = string(sc.json), sc.mismatch
			}
			if got != want || mismatch != (wantErr != nil) {
				t.Errorf("%s %s: written %s (mismatch %v), encoding/json writes %s (error %v)", k.name, raw, got, mismatch, want, wantErr)
			}
		}
	}
}

// typedJSON decodes raw into a *T field as encoding/json does, and writes it again.
func typedJSON[T any](raw string) (string, error) {
	var v struct {
		V *T `json:"v"`
	}
	err := json.Unmarshal([]byte(`{"v":`+raw+`}`), &v)
	out, _ := json.Marshal(v.V)
	return string(out), err
}

// TestProbes: every scalar of every probe has a marker of its own, and the schema's
// leaves lead to it.
func TestProbes(t *testing.T) {
	_, s := newShapeSchema(t)
	seen := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(s.roots)) {
		r := s.roots[name]
		var walk func(v reflect.Value, typ *outType, path []int)
		walk = func(v reflect.Value, typ *outType, path []int) {
			if v.IsNil() {
				t.Fatalf("%s %v: nil in a probe", name, path)
			}
			switch {
			case typ.elem != nil:
				if v.Elem().Len() != 1 {
					t.Fatalf("%s %v: a list of %d", name, path, v.Elem().Len())
				}
				walk(v.Elem().Index(0), typ.elem, path)
			case typ.fields != nil:
				for i, f := range typ.fields {
					walk(v.Elem().Field(i), f, append(slices.Clip(path), i))
				}
			default:
				m := v.Interface().(resultScalar).scalarOf().json
				l, whole, found := s.markerIn(m)
				if !found || !whole || l.root != r || !slices.Equal(l.path, path) || seen[string(m)] {
					t.Errorf("%s %v: marker %s leads to %s %v (whole %v, found %v, seen %v)", name, path, m, l.root.name, l.path, whole, found, seen[string(m)])
				}
				seen[string(m)] = true
			}
		}
		walk(r.probe, r.result, nil)
	}
	if len(seen) != len(s.leaves) {
		t.Errorf("%d markers in the probes, %d leaves", len(seen), len(s.leaves))
	}
}

// TestShapedAnswersSkipGraphQLGo: once a query is planned, its answers are written from
// the plan alone; graphql-go is not consulted again.
func TestShapedAnswersSkipGraphQLGo(t *testing.T) {
	h, s := newShapeSchema(t)
	h.plans, h.limits = newPlanCache(8), Limits{}.withDefaults()
	const q = `query($t: String) { a: hash(text: $t) { ...H } shapes { count flags { on } } } fragment H on HashResult { hash __typename }`
	p, err := h.plan(context.Background(), s, "key", q, "", map[string]any{"t": "x"})
	if err != nil || !p.shaped {
		t.Fatalf("plan %+v, %v: want a shape", p, err)
	}
	s.exec = nil // a call of graphql-go would fail the answer
	rec := httptest.NewRecorder()
	rw := &responder{h: h, w: rec, r: httptest.NewRequest(http.MethodPost, "/v1/graphql", nil), media: mediaGraphQL}
	results := make([]tollgate.Result, len(p.items))
	for i, it := range p.items {
		results[i].JSON = map[string][]byte{"hash": []byte(`{"hash":"abc"}`), "shapes": []byte(`{"count":2,"flags":{"on":true}}`)}[it.API]
	}
	h.answer(rw, &query{s: s, req: request{Query: new(string)}, plan: p}, results)
	want := `{"data":{"a":{"hash":"abc","__typename":"HashResult"},"shapes":{"count":2,"flags":{"on":true}}}}`
	if rec.Code != http.StatusOK || rec.Body.String() != want {
		t.Errorf("got %d %s, want 200 %s", rec.Code, rec.Body, want)
	}
}

// TestCompactJSONReaders: the readers of graphql-go's answers split compact JSON as
// encoding/json does, strings with escapes and brackets included, and refuse anything
// else.
func TestCompactJSONReaders(t *testing.T) {
	objects := []struct {
		in   string
		want []string // key=value
	}{
		{`{}`, nil},
		{`{"a":1}`, []string{"a=1"}},
		{`{"a":"x\"},{[","b":{"c":[1,{"d":"]"}]},"e":null,"f":[]}`, []string{`a="x\"},{["`, `b={"c":[1,{"d":"]"}]}`, "e=null", "f=[]"}},
		{`{"a":"\\","b":true}`, []string{`a="\\"`, "b=true"}},
	}
	for _, tt := range objects {
		var got []string
		if !eachMember([]byte(tt.in), func(k, v []byte) bool { got = append(got, string(k)+"="+string(v)); return true }) || !slices.Equal(got, tt.want) {
			t.Errorf("%s: read %q, want %q", tt.in, got, tt.want)
		}
	}
	for _, in := range []string{``, `{`, `[]`, `{"a":1 }`, `{ "a":1}`, `{"a" :1}`, `{"a":}`, `{"a\"b":1}`, `{"a":1"b":2}`, `{a:1}`, `{"a":"open}`} {
		if eachMember([]byte(in), func(k, v []byte) bool { return true }) {
			t.Errorf("%s was read", in)
		}
	}
	for in, want := range map[string]string{`[1]`: `1`, `[{"a":[1,2]}]`: `{"a":[1,2]}`, `["],["]`: `"],["`} {
		if got, ok := onlyElement([]byte(in)); !ok || string(got) != want {
			t.Errorf("%s: element %s, %v; want %s", in, got, ok, want)
		}
	}
	for _, in := range []string{`[]`, `[1,2]`, `[`, `{}`, `[[1],[2]]`} {
		if got, ok := onlyElement([]byte(in)); ok {
			t.Errorf("%s: element %s", in, got)
		}
	}
}
