package gql

import (
	"encoding/json"
	"reflect"
	"strings"
)

// The fast path. Once the APIs of a query have run, graphql-go's real execution only
// shapes their results: it parses and validates the query again, starts a goroutine per
// root field, and calls every resolver through reflection, which is most of a one-API
// query's cost in the gateway. For the queries clients send most (fields, aliases and
// arguments written in the text, no fragments, directives or variables) the gateway
// writes the data itself: the query's selections are read once, when its plan is made
// (after graphql-go has validated it), and kept with the plan; each answer is then
// written from the decoded results, value by value as graphql-go writes them
// (json.Marshal of each scalar, the fields in the order selected). Everything else
// (fragments, directives, variables, a field selected twice under one name, a failed
// call, a value the path cannot write) goes
// through graphql-go, as before: the fast path either writes exactly what graphql-go
// would, or steps aside before anything is sent. The tests compare the two on every
// kind of result.

// A selection is a field of a query's selection set: its response key, its name and,
// for an object or a list of objects, the fields selected from it.
type selection struct {
	alias, name string
	sels        []selection
}

// readSelections returns the selections of a query written in the subset the fast path
// serves (one operation, fields with aliases and literal arguments), or false. The
// query has passed graphql-go's validation, so the reader only tells the subset apart;
// it does not judge whether a query is valid.
func readSelections(query string) ([]selection, bool) {
	r := &selReader{s: query}
	r.skip()
	if r.peek() != '{' {
		if r.name() != "query" {
			return nil, false // a mutation, a subscription or a fragment definition
		}
		r.skip()
		if r.peek() != '{' {
			if r.name() == "" {
				return nil, false
			}
			r.skip()
		}
	}
	sels, ok := r.selectionSet()
	r.skip()
	if !ok || r.i != len(r.s) {
		return nil, false // variables, directives, or another definition
	}
	return sels, true
}

// selReader reads a query document, byte by byte.
type selReader struct {
	s string
	i int
}

func (r *selReader) peek() byte {
	if r.i < len(r.s) {
		return r.s[r.i]
	}
	return 0
}

// skip skips what GraphQL ignores: white space, line ends, commas, comments and the
// byte order mark.
func (r *selReader) skip() {
	for r.i < len(r.s) {
		switch r.s[r.i] {
		case ' ', '\t', '\n', '\r', ',':
			r.i++
		case '#':
			r.skipComment()
		case 0xEF:
			if !strings.HasPrefix(r.s[r.i:], "\uFEFF") {
				return
			}
			r.i += len("\uFEFF")
		default:
			return
		}
	}
}

func (r *selReader) skipComment() {
	for r.i < len(r.s) && r.s[r.i] != '\n' && r.s[r.i] != '\r' {
		r.i++
	}
}

// name reads a name, or returns "" if there is none here.
func (r *selReader) name() string {
	start := r.i
	for r.i < len(r.s) {
		c := r.s[r.i]
		if c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || r.i > start && '0' <= c && c <= '9' {
			r.i++
			continue
		}
		break
	}
	return r.s[start:r.i]
}

// selectionSet reads { field... }. A field selected twice under one response key is
// merged by GraphQL: that is left to graphql-go.
func (r *selReader) selectionSet() ([]selection, bool) {
	if r.peek() != '{' {
		return nil, false
	}
	r.i++
	var sels []selection
	for {
		r.skip()
		if r.peek() == '}' {
			r.i++
			return sels, len(sels) > 0
		}
		sel := selection{alias: r.name()}
		if sel.alias == "" {
			return nil, false // a fragment spread, or an inline fragment
		}
		sel.name = sel.alias
		r.skip()
		if r.peek() == ':' {
			r.i++
			r.skip()
			if sel.name = r.name(); sel.name == "" {
				return nil, false
			}
			r.skip()
		}
		if r.peek() == '(' {
			if !r.skipArguments() {
				return nil, false
			}
			r.skip()
		}
		if r.peek() == '{' {
			var ok bool
			if sel.sels, ok = r.selectionSet(); !ok {
				return nil, false
			}
		}
		for _, o := range sels {
			if o.alias == sel.alias {
				return nil, false
			}
		}
		sels = append(sels, sel)
	}
}

// skipArguments skips (arguments), which the dry run has already read. A variable
// ($) in them is left to graphql-go.
func (r *selReader) skipArguments() bool {
	depth := 0
	for r.i < len(r.s) {
		switch r.s[r.i] {
		case '(':
			depth++
		case ')':
			if depth--; depth == 0 {
				r.i++
				return true
			}
		case '$':
			return false
		case '#':
			r.skipComment()
			continue
		case '"':
			if !r.skipString() {
				return false
			}
			continue
		}
		r.i++
	}
	return false
}

// skipString skips a string or a block string.
func (r *selReader) skipString() bool {
	if strings.HasPrefix(r.s[r.i:], `"""`) {
		for r.i += 3; r.i < len(r.s); r.i++ {
			switch {
			case strings.HasPrefix(r.s[r.i:], `\"""`):
				r.i += 3
			case strings.HasPrefix(r.s[r.i:], `"""`):
				r.i += 3
				return true
			}
		}
		return false
	}
	for r.i++; r.i < len(r.s); r.i++ {
		switch r.s[r.i] {
		case '\\':
			r.i++
		case '"':
			r.i++
			return true
		}
	}
	return false
}

// appendData appends the data of a query, written from its calls' decoded results as
// graphql-go would write it, or returns false if the fast path cannot: a root field
// that is no API, or a value it cannot write. done holds the results by call key;
// every call succeeded. Every alias of one API has the same result, since the plan
// runs an API once and refuses a query that names it with different arguments.
func appendData(b []byte, s *schema, calls []call, sels []selection, done *state) ([]byte, bool) {
	return appendObject(b, "Query", sels, func(b []byte, sel selection) ([]byte, bool) {
		r := s.roots[sel.name]
		if r == nil {
			return nil, false // __schema, __type: introspection beside the APIs
		}
		for _, c := range calls {
			if c.root == r {
				v, found := done.values[c.key]
				if !found {
					return nil, false
				}
				return appendValue(b, v, r.result, sel.sels)
			}
		}
		return nil, false
	})
}

// appendObject appends an object with the fields sels: __typename is typeName, and
// value appends the value of every other field.
func appendObject(b []byte, typeName string, sels []selection, value func([]byte, selection) ([]byte, bool)) ([]byte, bool) {
	if len(sels) == 0 {
		return nil, false
	}
	b = append(b, '{')
	for i, sel := range sels {
		if i > 0 {
			b = append(b, ',')
		}
		// A response key is a GraphQL name, and so is a type's: nothing to escape.
		b = append(append(append(b, '"'), sel.alias...), '"', ':')
		if sel.name == "__typename" {
			b = append(append(append(b, '"'), typeName...), '"')
			continue
		}
		var ok bool
		if b, ok = value(b, sel); !ok {
			return nil, false
		}
	}
	return append(b, '}'), true
}

// appendValue appends the value v (a pointer, nil for null) of type t with the
// selections sels, as graphql-go writes it.
func appendValue(b []byte, v reflect.Value, t *outType, sels []selection) ([]byte, bool) {
	if v.IsNil() {
		return append(b, "null"...), true
	}
	e := v.Elem()
	switch {
	case t.elem != nil:
		b = append(b, '[')
		for i := range e.Len() {
			if i > 0 {
				b = append(b, ',')
			}
			var ok bool
			if b, ok = appendValue(b, e.Index(i), t.elem, sels); !ok {
				return nil, false
			}
		}
		return append(b, ']'), true
	case t.fields != nil:
		return appendObject(b, t.gql, sels, func(b []byte, sel selection) ([]byte, bool) {
			f, found := t.fields[sel.name]
			if !found {
				return nil, false
			}
			return appendValue(b, e.Field(f.index), f.typ, sel.sels)
		})
	}
	if len(sels) > 0 {
		return nil, false
	}
	data, err := json.Marshal(e.Interface())
	if err != nil {
		return nil, false
	}
	return append(b, data...), true
}
