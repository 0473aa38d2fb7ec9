package gql

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"testing"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/catalog"
)

// fastAPIs declare a result of every kind the fast path writes: each scalar, nested
// objects, lists of scalars, of objects and of lists, keys that need renaming, and a
// free-form result.
func fastAPIs() []*catalog.API {
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
		},
	}, {
		ID: "hash", Title: "Hash", Cost: 1,
		Params: []catalog.Param{{Name: "text", Type: catalog.String}},
		Result: []catalog.Field{{Name: "algorithm", Type: catalog.String}, {Name: "hash", Type: catalog.String}},
	}, {
		ID: "free-form", Title: "Free form", Cost: 1,
	}}
}

// fastResults are API results to write: well-formed, odd and ill-typed.
var fastResults = []string{
	`{"name":"n","count":3,"ratio":0.5,"ok":true,"raw":{"b":[1, 2],"a":"x"},"point":{"x":1,"label":"p","value.x":2.5,"temp°C":-4},` +
		`"points":[{"x":1},null,{"label":"q","value.x":1e21}],"tags":["a",null,"c"],"grid":[[1,2],null,[]],"a,b":"ab","day-of-week":"Monday",` +
		`"algorithm":"sha256","hash":"abc"}`,
	`{"name":"<b>&amp;</b>\u2028\u2029","count":9007199254740993,"ratio":-0,"ok":false,"raw":"<html> & \u2028","point":null,"points":[],"tags":null}`,
	`{"NAME":"upper","Count":1.0,"ratio":1e-7,"raw":null,"point":{"X":"not a number","LABEL":"L"},"Algorithm":"md5"}`,
	`{"name":7,"count":1.5,"ratio":"half","ok":"yes","points":{"x":1},"tags":"one","grid":[[1.5]]}`,
	`{"count":99999999999999999999,"raw":[1,{"z":null}," "]}`,
	`{"name":"dup","name":"second","raw":  {  "spaced" :  true  }  }`,
	`null`,
	`[]`,
	`"just a string"`,
	`12.50`,
	`{}`,
}

// fastQueries are queries in the fast path's subset and beyond it (want false).
var fastQueries = []struct {
	query string
	fast  bool
}{
	{`{ hash(text: "hello") { algorithm hash } }`, true},
	{`query { hash { hash } }`, true},
	{`query Named { h: hash(text: "a") { alg: algorithm hash __typename } __typename }`, true},
	{`{ shapes { name count ratio ok raw point { x label value_x tempC } points { x label value_x tempC __typename } tags grid ab day_of_week } }`, true},
	{`{ shapes(text: "(\"}{)") { t: __typename n: name points { label } } freeform hash(text: """ block ) " "" """) { hash } }`, true},
	{"\uFEFF# comment (\n{ shapes(text: \"a\" # ) \"\n) { name, count } }", true},
	{`{ a: hash(text: "x") { hash } b: hash(text: "x") { algorithm } }`, true},
	// Other arguments: the plan refuses the query before the fast path; given one
	// result, as every alias of an API has, the fast path serves it.
	{`{ a: hash(text: "x") { hash } b: hash(text: "y") { hash } }`, true},
	{`{ hash(text: "x") { hash } hash(text: "x") { algorithm } }`, false},
	{`{ hash(text: "x") { ...F } } fragment F on HashResult { hash }`, false},
	{`{ hash(text: "x") { ... on HashResult { hash } } }`, false},
	{`{ hash(text: "x") @include(if: true) { hash } }`, false},
	{`query($t: String) { hash(text: $t) { hash } }`, false},
	{`{ __schema { queryType { name } } hash(text: "x") { hash } }`, false},
	{`{ freeform }`, true},
}

// newFastSchema builds the schema of fastAPIs with the handler's resolvers.
func newFastSchema(t testing.TB) (*Handler, *schema) {
	h := &Handler{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	s, err := buildSchema(fastAPIs(), 1, h.resolve)
	if err != nil {
		t.Fatal(err)
	}
	return h, s
}

// compareFast runs query with every call answering result, through graphql-go and
// through the fast path, and reports whether the fast path served it; it fails the
// test if the two answers differ.
func compareFast(t testing.TB, h *Handler, s *schema, query, result string) bool {
	ctx := context.Background()
	dry := &state{dry: true}
	if resp := s.exec.Exec(withState(ctx, dry), query, "", nil); len(resp.Errors) > 0 || len(dry.calls) == 0 {
		return false
	}
	sels, ok := readSelections(query)
	if !ok {
		return false
	}
	done := &state{values: map[string]reflect.Value{}, errs: map[string]error{}}
	for _, c := range dry.calls {
		if _, seen := done.values[c.key]; seen {
			continue
		}
		v, err := h.decode(ctx, c.root.api.ID, c.root, &tollgate.Result{JSON: []byte(result)})
		if err != nil {
			return false // a failed call: the handler leaves its error to graphql-go
		}
		done.values[c.key] = v
	}
	fast, ok := appendData(nil, s, dry.calls, sels, done)
	if !ok {
		return false
	}
	slow := s.exec.Exec(withState(ctx, done), query, "", nil)
	if len(slow.Errors) > 0 || !bytes.Equal(fast, slow.Data) {
		t.Fatalf("query %s, result %s:\nfast path %s\ngraphql-go %s %v", query, result, fast, slow.Data, slow.Errors)
	}
	return true
}

// TestFastPathMatchesGraphQLGo: for every query and result, the fast path serves the
// queries of its subset, and writes byte for byte what graphql-go writes.
func TestFastPathMatchesGraphQLGo(t *testing.T) {
	h, s := newFastSchema(t)
	for _, q := range fastQueries {
		for _, result := range fastResults {
			if got := compareFast(t, h, s, q.query, result); got != q.fast {
				t.Errorf("query %s: fast path %v, want %v", q.query, got, q.fast)
			}
		}
	}
}

// FuzzFastPath compares the fast path with graphql-go on random queries and results.
//
//	go test -run='^$' -fuzz=FuzzFastPath -fuzztime=30s ./gql/
func FuzzFastPath(f *testing.F) {
	for i, q := range fastQueries {
		f.Add(q.query, fastResults[i%len(fastResults)])
	}
	h, s := newFastSchema(f)
	f.Fuzz(func(t *testing.T, query, result string) {
		if len(query) > 4096 || len(result) > 4096 {
			return
		}
		compareFast(t, h, s, query, result)
	})
}

// TestReadSelections reads the shape of queries in the subset.
func TestReadSelections(t *testing.T) {
	sels, ok := readSelections(`query Q { a: hash(text: "x") { hash alg: algorithm } __typename }`)
	if !ok {
		t.Fatal("not read")
	}
	want := []selection{
		{alias: "a", name: "hash", sels: []selection{{alias: "hash", name: "hash"}, {alias: "alg", name: "algorithm"}}},
		{alias: "__typename", name: "__typename"},
	}
	if !slices.EqualFunc(sels, want, equalSelection) {
		t.Errorf("read %+v, want %+v", sels, want)
	}
	for _, q := range []string{``, `{}`, `{ a(`, `{ a("unterminated) }`, `{ a(x: """open) }`, `{ a(x: """ \""" ) }`, `subscription { a }`, `query Q($x: Int) { a }`, `{ a } { b }`, `{ a: }`} {
		if _, ok := readSelections(q); ok {
			t.Errorf("%q was read", q)
		}
	}
}

func equalSelection(a, b selection) bool {
	return a.alias == b.alias && a.name == b.name && slices.EqualFunc(a.sels, b.sels, equalSelection)
}
