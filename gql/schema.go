package gql

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	graphql "github.com/graph-gophers/graphql-go"

	"github.com/tollgate-dev/tollgate/catalog"
)

// The schema is generated from the catalog at run time. graphql-go binds a schema's
// fields to Go methods and struct fields, and has no resolver that looks fields up by
// name (its authors chose Go types over a schema built in code), so the SDL is written
// as text and the Go types are made with reflect: the root resolver is a struct of
// func-typed fields (graphql.UseFieldResolvers), one per API, each made with
// reflect.MakeFunc over an arguments struct and a result type made with
// reflect.StructOf. Every root field is nullable (a failed API is null beside an error)
// and named by catalog.RootFieldName; arguments and result fields by
// catalog.GraphQLName. Arguments are all of type rawArg and validated by the catalog,
// exactly as REST validates them.
//
// Each API also has a probe: a value of its result type with every field set, one
// element in every list, and every scalar a marker that names its place. A query's plan
// resolves every root field to its probe, and what graphql-go writes for the probes is
// the shape of every answer to that query (see shape.go).

// A schema is the GraphQL schema of one version of the catalog.
type schema struct {
	version uint64
	exec    *graphql.Schema
	sdl     string
	roots   map[string]*root // by root field name
	// marker begins every probe marker, a JSON string: "\u0000", then a random nonce
	// of this schema, so that no text of the schema can be mistaken for one.
	marker  []byte
	leaves  []leaf          // the scalars of the probes, by marker number
	objects map[string]leaf // the place of each object type of a result, by name
}

// A root is the root field of one API.
type root struct {
	name     string
	api      *catalog.API
	args     []arg        // in the order of argsType's fields
	argsType reflect.Type // struct of rawArg
	result   *outType     // an object type, or JSON for a free-form result
	resolver reflect.Value
	probe    reflect.Value // a value of result.goType whose scalars are markers
}

// A leaf is the place of a scalar, or of an object, in the result of an API: the
// indexes of the fields that lead to it from the result (lists left out).
type leaf struct {
	root *root
	path []int
}

// An outType is an output type of the schema: how it is written in the SDL, the Go
// type its values decode into, and how their fields are reached.
type outType struct {
	gql    string       // String, [Int], RichtypesResult...: the type's name for an object
	goType reflect.Type // a pointer, so that a missing value is null
	// rename, when not nil, rewrites the keys of values that cannot be JSON struct tags.
	rename *renamer
	fields []*outType // an object's fields, in the order of the Go struct's
	elem   *outType   // a list's element type
}

// An arg binds a GraphQL argument to a catalog parameter.
type arg struct {
	param string
	// enum maps GraphQL enum values to the parameter's values, for enum arguments.
	enum map[string]any
	// spec is the parameter, for the input coercion of lists.
	spec *catalog.Param
}

var (
	ctxType   = reflect.TypeFor[context.Context]()
	errorType = reflect.TypeFor[error]()
	enumName  = regexp.MustCompile(`^[_A-Za-z][_0-9A-Za-z]*$`)
)

// builder writes the SDL and the Go types of one schema.
type builder struct {
	sdl   strings.Builder
	types map[string]bool // type names taken
	s     *schema
}

// resolve is what a root field does when it runs; the handler supplies it.
type resolve func(ctx context.Context, r *root, args map[string]any) (reflect.Value, error)

// buildSchema generates the schema of apis. File APIs are root fields too (with their
// url argument), so that a query naming one is understood and refused as
// FILE_UPLOAD_NOT_SUPPORTED.
func buildSchema(apis []*catalog.API, version uint64, fn resolve, opts ...graphql.SchemaOpt) (*schema, error) {
	nonce := make([]byte, 8)
	rand.Read(nonce)
	s := &schema{version: version, roots: make(map[string]*root, len(apis)), objects: map[string]leaf{},
		marker: []byte(`"\u0000` + hex.EncodeToString(nonce))}
	b := &builder{types: map[string]bool{"Query": true, "JSON": true}, s: s}
	var query strings.Builder
	query.WriteString("type Query {\n")
	var rootFields []reflect.StructField
	for i, a := range apis {
		r, err := b.root(a, &query)
		if err != nil {
			return nil, fmt.Errorf("gql: api %q: %w", a.ID, err)
		}
		s.roots[r.name] = r
		r.resolver = makeResolver(r, fn)
		r.probe = b.probe(r, r.result, nil)
		rootFields = append(rootFields, reflect.StructField{
			Name: "R" + strconv.Itoa(i), Type: r.resolver.Type(), Tag: reflect.StructTag(`graphql:"` + r.name + `"`),
		})
	}
	if len(apis) == 0 {
		query.WriteString("  \"The catalog has no APIs yet.\"\n  _empty: Boolean\n")
		rootFields = append(rootFields, reflect.StructField{Name: "Empty", Type: reflect.TypeFor[*bool](), Tag: `graphql:"_empty"`})
	}
	query.WriteString("}\n")
	s.sdl = "schema { query: Query }\n\n\"Any JSON value.\"\nscalar JSON\n\n" + query.String() + b.sdl.String()

	rootValue := reflect.New(reflect.StructOf(rootFields)).Elem()
	for i, a := range apis {
		rootValue.Field(i).Set(s.roots[catalog.RootFieldName(a.ID)].resolver)
	}
	exec, err := graphql.ParseSchema(s.sdl, rootValue.Addr().Interface(), append([]graphql.SchemaOpt{
		graphql.UseFieldResolvers(), graphql.UseStringDescriptions(),
	}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("gql: the generated schema is refused: %w", err)
	}
	s.exec = exec
	return s, nil
}

// makeResolver returns the resolver function of a root field. A field without
// arguments gets a resolver without an arguments parameter: graphql-go refuses a
// resolver that takes arguments the field does not declare.
func makeResolver(r *root, fn resolve) reflect.Value {
	in := []reflect.Type{ctxType}
	if len(r.args) > 0 {
		in = append(in, r.argsType)
	}
	typ := reflect.FuncOf(in, []reflect.Type{r.result.goType, errorType}, false)
	nilResult := reflect.Zero(r.result.goType)
	nilErr := reflect.Zero(errorType)
	return reflect.MakeFunc(typ, func(in []reflect.Value) []reflect.Value {
		ctx := in[0].Interface().(context.Context)
		var args map[string]any
		if len(in) > 1 {
			args = r.readArgs(in[1])
		} else {
			args = map[string]any{}
		}
		v, err := fn(ctx, r, args)
		if err != nil {
			return []reflect.Value{nilResult, reflect.ValueOf(&err).Elem()}
		}
		if !v.IsValid() {
			v = nilResult
		}
		return []reflect.Value{v, nilErr}
	})
}

// readArgs returns the arguments that were given (or defaulted), by parameter name,
// with enum values mapped back to the parameter's values.
func (r *root) readArgs(v reflect.Value) map[string]any {
	out := make(map[string]any, len(r.args))
	for i, a := range r.args {
		raw := v.Field(i).Interface().(rawArg)
		if !raw.set || raw.value == nil {
			continue
		}
		val := raw.value
		if a.enum != nil {
			if s, ok := val.(string); ok {
				if mapped, ok := a.enum[s]; ok {
					val = mapped
				}
			}
		}
		out[a.param] = coerceInput(a.spec, val)
	}
	return out
}

// coerceInput finishes the input coercion that graphql-go leaves to the resolver of an
// argument it does not type, at any depth: a single value given where a list is
// expected is a list of one (tags: "a" is tags: ["a"]), as the GraphQL specification
// says, and the fields of input objects go back from their GraphQL names to the
// parameter's (first_name to first-name). It copies what it changes.
func coerceInput(p *catalog.Param, v any) any {
	if p == nil || v == nil {
		return v
	}
	switch p.Type {
	case catalog.Array:
		if p.Items == nil {
			return v
		}
		list, ok := v.([]any)
		if !ok {
			return []any{coerceInput(p.Items, v)}
		}
		out := make([]any, len(list))
		for i, e := range list {
			out[i] = coerceInput(p.Items, e)
		}
		return out
	case catalog.Object:
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		out := make(map[string]any, len(m))
		for k, e := range m {
			out[k] = e
		}
		for i := range p.Fields {
			f := &p.Fields[i]
			if name := catalog.GraphQLName(f.Name); name != f.Name {
				if e, ok := m[name]; ok {
					delete(out, name)
					out[f.Name] = e
				}
			}
			if e, ok := out[f.Name]; ok {
				out[f.Name] = coerceInput(f, e)
			}
		}
		return out
	}
	return v
}

// root writes the root field of an API and builds its Go types.
func (b *builder) root(a *catalog.API, query *strings.Builder) (*root, error) {
	r := &root{name: catalog.RootFieldName(a.ID), api: a}
	typeBase := pascal(r.name)
	params := a.Params
	if a.File != nil {
		params = append(slices.Clip(params), catalog.Param{Name: catalog.URLParam, Type: catalog.String, Format: catalog.FormatURL,
			Description: "Address of the file. File APIs cannot be called through GraphQL; use REST."})
	}
	desc := strings.TrimSpace(a.Description)
	if a.Cost == 0 {
		desc += " Free: costs no credits."
	} else {
		desc += fmt.Sprintf(" Costs %d credit%s.", a.Cost, plural(a.Cost))
	}
	if a.File != nil {
		desc += " A file API: call it over REST; GraphQL answers FILE_UPLOAD_NOT_SUPPORTED."
	}
	writeDescription(query, "  ", desc)
	query.WriteString("  " + r.name)
	var argFields []reflect.StructField
	if len(params) > 0 {
		query.WriteString("(\n")
		for _, p := range params {
			name := catalog.GraphQLName(p.Name)
			typ, enum, err := b.inputType(typeBase+pascal(name), &p)
			if err != nil {
				return nil, fmt.Errorf("parameter %q: %w", p.Name, err)
			}
			if p.Required {
				typ += "!"
			}
			writeDescription(query, "    ", p.Description)
			query.WriteString("    " + name + ": " + typ)
			if p.Default != nil {
				lit, err := literal(&p, p.Default, enum)
				if err != nil {
					return nil, fmt.Errorf("parameter %q: default: %w", p.Name, err)
				}
				query.WriteString(" = " + lit)
			}
			query.WriteString("\n")
			r.args = append(r.args, arg{param: p.Name, enum: enum, spec: &p})
			argFields = append(argFields, reflect.StructField{Name: goName(name), Type: reflect.TypeFor[rawArg]()})
		}
		query.WriteString("  )")
	}
	r.argsType = reflect.StructOf(argFields)
	if len(a.Result) == 0 {
		r.result = scalarType[*jsonValue]("JSON")
	} else {
		var err error
		r.result, err = b.objectType(b.typeName(typeBase+"Result"), a.Title+": the result of the "+a.ID+" API.", a.Result)
		if err != nil {
			return nil, err
		}
	}
	query.WriteString(": " + r.result.gql + "\n")
	return r, nil
}

// scalarType returns a scalar output type whose values decode into T.
func scalarType[T any](gql string) *outType {
	return &outType{gql: gql, goType: reflect.TypeFor[T]()}
}

// probe returns the probe of a value of type t at path in r's result: a pointer to a
// value with every field set and one element in every list, whose scalars are markers
// registered in the schema's leaves.
func (b *builder) probe(r *root, t *outType, path []int) reflect.Value {
	v := reflect.New(t.goType.Elem())
	switch {
	case t.elem != nil:
		list := reflect.MakeSlice(v.Elem().Type(), 1, 1)
		list.Index(0).Set(b.probe(r, t.elem, path))
		v.Elem().Set(list)
	case t.fields != nil:
		for i, f := range t.fields {
			v.Elem().Field(i).Set(b.probe(r, f, append(slices.Clip(path), i)))
		}
		b.s.objects[t.gql] = leaf{root: r, path: path} // each object type has one place
	default:
		marker := strconv.AppendInt(bytes.Clone(b.s.marker), int64(len(b.s.leaves)), 10)
		v.Interface().(resultScalar).scalarOf().json = append(marker, '"')
		b.s.leaves = append(b.s.leaves, leaf{root: r, path: path})
	}
	return v
}

// objectType writes an output object type and returns it, with the renamer its values
// need (nil if none: see [renamer]).
func (b *builder) objectType(name, desc string, fields []catalog.Field) (*outType, error) {
	var def strings.Builder
	writeDescription(&def, "", desc)
	def.WriteString("type " + name + " {\n")
	var goFields []reflect.StructField
	out := &outType{gql: name, fields: make([]*outType, 0, len(fields))}
	rename := &renamer{fields: make(map[string]fieldRename, len(fields))}
	needed := false
	for i := range fields {
		f := &fields[i]
		gqlName := catalog.GraphQLName(f.Name)
		typ, err := b.outputType(name+pascal(gqlName), f)
		if err != nil {
			return nil, fmt.Errorf("result field %q: %w", f.Name, err)
		}
		out.fields = append(out.fields, typ)
		writeDescription(&def, "  ", f.Description)
		def.WriteString("  " + gqlName + ": " + typ.gql + "\n")
		key := f.Name
		if !jsonTagValid(key) {
			// encoding/json cannot take this name as a tag: decode the field under an
			// alias, to which the renamer moves it.
			key = "~" + strconv.Itoa(i)
			for slices.ContainsFunc(fields, func(o catalog.Field) bool { return o.Name == key }) {
				key += "~"
			}
		}
		needed = needed || key != f.Name || typ.rename != nil
		rename.fields[f.Name] = fieldRename{key: key, sub: typ.rename}
		goFields = append(goFields, reflect.StructField{
			Name: "F" + strconv.Itoa(i), Type: typ.goType,
			Tag: reflect.StructTag(`json:"` + key + `" graphql:"` + gqlName + `"`),
		})
	}
	def.WriteString("}\n\n")
	b.sdl.WriteString(def.String())
	if needed {
		out.rename = rename
	}
	out.goType = reflect.PointerTo(reflect.StructOf(goFields))
	return out, nil
}

// outputType returns the output type of a result field: nullable at every level.
func (b *builder) outputType(typeName string, f *catalog.Field) (*outType, error) {
	switch f.Type {
	case catalog.String:
		return scalarType[*stringValue]("String"), nil
	case catalog.Integer:
		return scalarType[*intValue]("Int"), nil
	case catalog.Number:
		return scalarType[*floatValue]("Float"), nil
	case catalog.Boolean:
		return scalarType[*boolValue]("Boolean"), nil
	case catalog.JSON:
		return scalarType[*jsonValue]("JSON"), nil
	case catalog.Array:
		elem, err := b.outputType(typeName+"Item", f.Items)
		if err != nil {
			return nil, err
		}
		list := &outType{gql: "[" + elem.gql + "]", goType: reflect.PointerTo(reflect.SliceOf(elem.goType)), elem: elem}
		if elem.rename != nil {
			list.rename = &renamer{items: elem.rename}
		}
		return list, nil
	case catalog.Object:
		return b.objectType(b.typeName(typeName), f.Description, f.Fields)
	}
	return nil, fmt.Errorf("type %q has no GraphQL type", f.Type)
}

// inputType returns the GraphQL type of a parameter (without the ! of a required one),
// writing the enum or input object types it needs, and the map of enum values.
func (b *builder) inputType(typeName string, p *catalog.Param) (string, map[string]any, error) {
	switch p.Type {
	case catalog.String:
		if enum := enumValues(p.Enum); enum != nil {
			name := b.typeName(typeName)
			var def strings.Builder
			writeDescription(&def, "", p.Description)
			def.WriteString("enum " + name + " {\n")
			for _, v := range p.Enum {
				def.WriteString("  " + v.(string) + "\n")
			}
			def.WriteString("}\n\n")
			b.sdl.WriteString(def.String())
			return name, enum, nil
		}
		return "String", nil, nil
	case catalog.Integer:
		return "Int", nil, nil
	case catalog.Number:
		return "Float", nil, nil
	case catalog.Boolean:
		return "Boolean", nil, nil
	case catalog.Array:
		elem, enum, err := b.inputType(typeName+"Item", p.Items)
		if err != nil {
			return "", nil, err
		}
		return "[" + elem + "!]", enum, nil
	case catalog.Object:
		name := b.typeName(typeName + "Input")
		var def strings.Builder
		writeDescription(&def, "", p.Description)
		def.WriteString("input " + name + " {\n")
		for i := range p.Fields {
			f := &p.Fields[i]
			fname := catalog.GraphQLName(f.Name) // mapped back by coerceInput
			typ, _, err := b.inputType(name+pascal(fname), f)
			if err != nil {
				return "", nil, err
			}
			if f.Required {
				typ += "!"
			}
			writeDescription(&def, "  ", f.Description)
			def.WriteString("  " + fname + ": " + typ + "\n")
		}
		def.WriteString("}\n\n")
		b.sdl.WriteString(def.String())
		return name, nil, nil
	}
	return "", nil, fmt.Errorf("type %q has no GraphQL input type", p.Type)
}

// enumValues returns the GraphQL enum of a string parameter's enum, or nil when the
// values are not all usable as GraphQL enum values (then the argument is a String and
// the catalog checks the value).
func enumValues(values []any) map[string]any {
	if len(values) == 0 {
		return nil
	}
	m := make(map[string]any, len(values))
	for _, v := range values {
		s, ok := v.(string)
		if !ok || !enumName.MatchString(s) || s == "true" || s == "false" || s == "null" {
			return nil
		}
		m[s] = s
	}
	return m
}

// literal writes a default value as a GraphQL literal.
func literal(p *catalog.Param, v any, enum map[string]any) (string, error) {
	if s, ok := v.(string); ok && enum != nil {
		return s, nil
	}
	switch p.Type {
	case catalog.Object:
		m, ok := v.(map[string]any)
		if !ok {
			return "", fmt.Errorf("not an object")
		}
		var parts []string
		for i := range p.Fields {
			f := &p.Fields[i]
			if fv, ok := m[f.Name]; ok {
				lit, err := literal(f, fv, nil)
				if err != nil {
					return "", err
				}
				parts = append(parts, catalog.GraphQLName(f.Name)+": "+lit)
			}
		}
		return "{" + strings.Join(parts, ", ") + "}", nil
	case catalog.Array:
		list, ok := v.([]any)
		if !ok {
			return "", fmt.Errorf("not a list")
		}
		parts := make([]string, len(list))
		for i, e := range list {
			lit, err := literal(p.Items, e, enumValues(p.Items.Enum))
			if err != nil {
				return "", err
			}
			parts[i] = lit
		}
		return "[" + strings.Join(parts, ", ") + "]", nil
	}
	b, err := json.Marshal(v) // strings, numbers and booleans are written alike
	return string(b), err
}

// typeName returns name, or name with a number when it is taken.
func (b *builder) typeName(name string) string {
	n := name
	for i := 2; b.types[n]; i++ {
		n = name + strconv.Itoa(i)
	}
	b.types[n] = true
	return n
}

// pascal turns a GraphQL name into PascalCase for type names: day_of_week ->
// DayOfWeek. A result that would start with a digit is prefixed with "Api".
func pascal(name string) string {
	var b strings.Builder
	for _, part := range strings.Split(name, "_") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	s := b.String()
	if s == "" || ('0' <= s[0] && s[0] <= '9') {
		s = "Api" + s
	}
	return s
}

// goName is the Go field name that graphql-go binds to the GraphQL argument name: it
// matches names ignoring case and underscores. Parameter names start with a letter.
func goName(gqlName string) string {
	return strings.ToUpper(gqlName[:1]) + gqlName[1:]
}

// jsonTagValid reports whether encoding/json takes name as the key of a struct tag: it
// ignores (and then never fills) a tag whose key holds characters other than letters,
// digits and the punctuation below, and a comma, a quote or a backquote would break
// the tag itself.
func jsonTagValid(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range name {
		if !strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c) && !unicode.IsLetter(c) && !unicode.IsDigit(c) {
			return false
		}
	}
	return true
}

// A renamer rewrites the keys of an API's result that encoding/json cannot take as
// struct tags (see [jsonTagValid]: "a,b", "dir\\name", "temp°C") into the aliases the
// result's Go type decodes, at any depth. A result whose names are all valid tags needs
// none, and pays nothing.
type renamer struct {
	fields map[string]fieldRename // for an object: every declared field, by REST name
	items  *renamer               // for a list: the renamer of its elements
}

// A fieldRename is the key a result field is decoded under, and its value's renamer.
type fieldRename struct {
	key string
	sub *renamer
}

// rewrite returns the JSON result with its keys renamed.
func (r *renamer) rewrite(result []byte) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(result))
	d.UseNumber() // numbers are written back as they came
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(r.apply(v))
}

func (r *renamer) apply(v any) any {
	if r == nil {
		return v
	}
	switch x := v.(type) {
	case map[string]any:
		if r.fields == nil {
			return v
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			if f, ok := r.fields[k]; ok { // undeclared keys are dropped: no alias is hit
				out[f.key] = f.sub.apply(e)
			}
		}
		return out
	case []any:
		if r.items == nil {
			return v
		}
		for i, e := range x {
			x[i] = r.items.apply(e)
		}
	}
	return v
}

func writeDescription(b *strings.Builder, indent, text string) {
	text = strings.TrimSpace(text)
	if text == "" {
		return
	}
	b.WriteString(indent + `"""` + strings.ReplaceAll(text, `"""`, `\"""`) + `"""` + "\n")
}

func plural(n int64) string {
	if n == 1 {
		return ""
	}
	return "s"
}
