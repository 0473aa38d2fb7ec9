package gql

import (
	"bytes"
	"reflect"
	"slices"
	"strconv"
	"strings"

	gqlerrors "github.com/graph-gophers/graphql-go/errors"
)

// The shape of a query's answers. graphql-go has no prepared queries: every Exec
// parses, validates, expands and executes the query text again, one goroutine and one
// reflective call per root field, which is most of what a one-API query costs in the
// gateway. Yet everything graphql-go decides about an answer (which fields, under which
// keys, in which order, after fragments, @skip/@include and variables; __typename;
// introspection) depends on the request alone, not on what the APIs return. So the
// gateway executes a query once, when it plans it, with every root field resolved to
// its API's probe (see schema.go), and keeps what graphql-go wrote: the answer to the
// probes, each scalar a marker that names its place in the API's result. Every answer
// to the same request is that one with the markers' places filled from the results.
// graphql-go writes the objects and lists; the gateway writes only what it read from
// the results, as graphql-go writes them (each scalar keeps the JSON graphql-go would
// write for it, see values.go; an object is its fields in the order of the shape; a
// list is its elements; null is null), and an API that failed as graphql-go reports a
// failed resolver: null, and an error with its message, path and code.
//
// Lists have one element in the probes, so the shape of a list is the shape of its
// elements. A place is known from the markers below it, or from a __typename below it
// (each object type of a result has one place). Two kinds of query have no shape: one
// with an object of which every field is left out by @skip or @include ({}, which
// shows nothing), and one that selects only __typename of an API beside introspection
// (whose strings may name the same type). Their answers are written by graphql-go's own
// execution with the results, as for a query whose plan found errors. The tests compare
// the two on every kind of result and query.

// A shapeField is a field of an answer: a root field, or a field of an object.
type shapeField struct {
	key []byte // the response key: the alias, or the field's name
	// value is the field's value when it does not depend on the results: __typename,
	// introspection.
	value []byte
	root  *root    // a root field's API
	call  int      // a root field's index in the plan's calls
	index int      // an object's field: its index in the object's Go struct
	typ   *outType // the field's type
	sels  []shapeField
}

// readShape reads the shape of a query's answers from graphql-go's answer to the plan,
// whose calls are the root fields that resolved to a probe, or returns false if some
// place in it is not known.
//
// At the top, graphql-go writes one member per call (it resolves each response key
// once), and the others are __typename ("Query") or introspection. A member with a
// marker is a call's; when the members without one are exactly as many as the calls
// left, they are the calls' and their __typenames name their places; otherwise some
// of them may be introspection, whose strings can name the types of results too.
func (s *schema) readShape(data []byte, calls []call) ([]shapeField, bool) {
	var fields []shapeField
	var unknown []int // the members without a marker, nor a plain "Query"
	apis := 0
	ok := eachMember(data, func(key, value []byte) bool {
		f := shapeField{key: key, value: value}
		switch l, _, found := s.markerIn(value); {
		case found:
			f.root = l.root
			apis++
		case !quoted(value, "Query"):
			unknown = append(unknown, len(fields))
		}
		fields = append(fields, f)
		return true
	})
	if !ok || apis > len(calls) {
		return nil, false
	}
	if apis+len(unknown) == len(calls) {
		for _, i := range unknown {
			l, found := s.placeIn(fields[i].value)
			if !found {
				return nil, false
			}
			fields[i].root = l.root
		}
	}
	n := 0
	for i := range fields {
		f := &fields[i]
		if f.root == nil {
			continue // __typename, __schema or __type: written as graphql-go wrote it
		}
		v := f.value
		f.call = slices.IndexFunc(calls, func(c call) bool { return c.root == f.root })
		f.typ, f.value = f.root.result, nil
		if f.call < 0 || !s.readValue(v, f.root, nil, f) {
			return nil, false
		}
		n++
	}
	return fields, n == len(calls)
}

// readValue reads into f the shape of the value v of type f.typ at path in r's result.
func (s *schema) readValue(v []byte, r *root, path []int, f *shapeField) bool {
	t := f.typ
	switch {
	case t.elem != nil:
		only, ok := onlyElement(v)
		if !ok {
			return false
		}
		elem := shapeField{typ: t.elem}
		if !s.readValue(only, r, path, &elem) {
			return false
		}
		f.sels = elem.sels
		return true
	case t.fields != nil:
		return eachMember(v, func(key, value []byte) bool {
			if quoted(value, t.gql) {
				f.sels = append(f.sels, shapeField{key: key, value: value}) // __typename
				return true
			}
			l, found := s.placeIn(value)
			if !found || l.root != r || len(l.path) <= len(path) || !slices.Equal(l.path[:len(path)], path) {
				return false
			}
			i := l.path[len(path)]
			sel := shapeField{key: key, index: i, typ: t.fields[i]}
			if !s.readValue(value, r, l.path[:len(path)+1], &sel) {
				return false
			}
			f.sels = append(f.sels, sel)
			return true
		})
	}
	l, whole, found := s.markerIn(v)
	return found && whole && l.root == r && slices.Equal(l.path, path)
}

// placeIn returns the place of a value of an API's result, v, from the first marker
// in it, or else from the first __typename in it. Below an API's field, every string
// value graphql-go writes is a marker or a __typename, and each object type of a result
// has one place; above (introspection), a string may name a type of a result too.
func (s *schema) placeIn(v []byte) (leaf, bool) {
	if l, _, found := s.markerIn(v); found {
		return l, true
	}
	for rest := v; ; {
		i := bytes.Index(rest, []byte(`:"`))
		if i < 0 {
			return leaf{}, false
		}
		rest = rest[i+2:]
		if end := bytes.IndexByte(rest, '"'); end >= 0 {
			if l, ok := s.objects[string(rest[:end])]; ok {
				return l, true
			}
		}
	}
}

// markerIn returns the leaf of the first marker in v, and whether v is that marker
// and nothing else.
func (s *schema) markerIn(v []byte) (l leaf, whole, found bool) {
	i := bytes.Index(v, s.marker)
	if i < 0 {
		return leaf{}, false, false
	}
	digits := v[i+len(s.marker):]
	end := bytes.IndexByte(digits, '"')
	if end < 0 {
		return leaf{}, false, false
	}
	n, err := strconv.Atoi(string(digits[:end]))
	if err != nil || n < 0 || n >= len(s.leaves) {
		return leaf{}, false, false
	}
	return s.leaves[n], i == 0 && len(digits) == end+1, true
}

// The answers graphql-go writes are compact JSON (it writes the objects and lists
// itself, and every scalar with json.Marshal), and the readers below take nothing
// else: a space, or a key with an escape, is refused, and the query then has no shape.

// eachMember calls fn with the key and the value of each member of a compact JSON
// object, in their order, and reports whether b is one and fn took every member.
func eachMember(b []byte, fn func(key, value []byte) bool) bool {
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return false
	}
	for i := 1; i < len(b)-1; {
		if b[i] != '"' {
			return false
		}
		k := stringEnd(b, i)
		key := b[i+1 : k-1]
		if k >= len(b) || b[k] != ':' || bytes.IndexByte(key, '\\') >= 0 {
			return false
		}
		end := valueEnd(b, k+1)
		if end < 0 || end >= len(b) || (b[end] != ',' && end != len(b)-1) {
			return false
		}
		if !fn(key, b[k+1:end]) {
			return false
		}
		i = end + 1
	}
	return true
}

// onlyElement returns the element of a compact JSON list of one element.
func onlyElement(b []byte) ([]byte, bool) {
	if len(b) < 3 || b[0] != '[' || valueEnd(b, 1) != len(b)-1 || b[len(b)-1] != ']' {
		return nil, false
	}
	return b[1 : len(b)-1], true
}

// valueEnd returns the index just past the compact JSON value that begins at b[i], or
// -1 if none does. Only the brackets of a list or an object are matched, not what they
// hold.
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = stringEnd(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			case ' ', '\t', '\n', '\r':
				return -1
			}
		}
		return -1
	}
	// A number, true, false or null: up to the comma or bracket that ends it.
	j := i
	for ; j < len(b) && strings.IndexByte(",}]", b[j]) < 0; j++ {
		if strings.IndexByte(" \t\n\r\"{[", b[j]) >= 0 {
			return -1
		}
	}
	if j == i {
		return -1
	}
	return j
}

// stringEnd returns the index just past the JSON string that begins at b[i].
func stringEnd(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// quoted reports whether v is the JSON string of name, a GraphQL name.
func quoted(v []byte, name string) bool {
	return len(v) == len(name)+2 && v[0] == '"' && v[len(v)-1] == '"' && string(v[1:len(v)-1]) == name
}

// An answerWriter writes the data of an answer from the results of its calls.
type answerWriter struct {
	b    []byte
	errs []*gqlerrors.QueryError
	// mismatched names an API that returned a scalar written here of another type than
	// its field's, for the log.
	mismatched *root
	writing    *root // the API whose result is being written
}

// writeData writes the data of the fields of a shape; result gives the result of a
// root field's call: its decoded value, or the error its field shows.
func (w *answerWriter) writeData(fields []shapeField, result func(f *shapeField) (reflect.Value, error)) {
	w.b = append(w.b, '{')
	for i := range fields {
		f := &fields[i]
		w.key(i, f)
		switch {
		case f.value != nil:
			w.b = append(w.b, f.value...)
		default:
			v, err := result(f)
			if err != nil {
				// As graphql-go reports an error of a resolver.
				qe := gqlerrors.Errorf("%s", err)
				qe.Path, qe.ResolverError = []any{string(f.key)}, err
				if ex, ok := err.(interface{ Extensions() map[string]any }); ok {
					qe.Extensions = ex.Extensions()
				}
				w.errs = append(w.errs, qe)
				w.b = append(w.b, "null"...)
				continue
			}
			w.writing = f.root
			w.value(v, f.typ, f.sels)
		}
	}
	w.b = append(w.b, '}')
}

// key writes the key of the i-th field of an object. A response key is a GraphQL
// name: nothing to escape.
func (w *answerWriter) key(i int, f *shapeField) {
	if i > 0 {
		w.b = append(w.b, ',')
	}
	w.b = append(append(append(w.b, '"'), f.key...), '"', ':')
}

// value writes the value v (a pointer, nil for null) of type t with the fields sels.
func (w *answerWriter) value(v reflect.Value, t *outType, sels []shapeField) {
	if v.IsNil() {
		w.b = append(w.b, "null"...)
		return
	}
	switch {
	case t.elem != nil:
		e := v.Elem()
		w.b = append(w.b, '[')
		for i := range e.Len() {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.value(e.Index(i), t.elem, sels)
		}
		w.b = append(w.b, ']')
	case t.fields != nil:
		e := v.Elem()
		w.b = append(w.b, '{')
		for i := range sels {
			sel := &sels[i]
			w.key(i, sel)
			if sel.value != nil {
				w.b = append(w.b, sel.value...)
				continue
			}
			w.value(e.Field(sel.index), sel.typ, sel.sels)
		}
		w.b = append(w.b, '}')
	default:
		sc := v.Interface().(resultScalar).scalarOf()
		w.b = sc.appendJSON(w.b)
		if sc.mismatch && w.mismatched == nil {
			w.mismatched = w.writing
		}
	}
}
