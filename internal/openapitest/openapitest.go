// Package openapitest holds an OpenAPI 3.1 document to what it says, in tests: its
// structure, checked with Redocly's recommended rules ([Lint]); and the answers of the
// handler it describes, checked against the schemas and headers of its responses, and
// the requests it declares invalid, found from the schemas of its parameters and
// bodies ([Doc]). Schemas are validated as JSON Schema draft 2020-12, with the formats
// date-time, date and uuid asserted rather than only annotated.
package openapitest

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// redoclyConfig is Redocly's recommended rules. The license of a document is the host's
// to set, so its absence is not a problem here.
const redoclyConfig = "extends:\n  - recommended\nrules:\n  info-license: off\n"

// Lint validates doc (a value that encodes as an OpenAPI document) with Redocly's
// recommended rules (the structure of OpenAPI 3.1, the JSON Schemas inside it, and
// good-practice rules) and fails t on any error or warning. Without the npm tools it
// skips t (fails it in CI; see testenv.NodeTool).
func Lint(t *testing.T, doc any) {
	t.Helper()
	redocly := testenv.NodeTool(t, "redocly")
	body, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path, config := filepath.Join(dir, "openapi.json"), filepath.Join(dir, "redocly.yaml")
	if err := os.WriteFile(path, body, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(config, []byte(redoclyConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), redocly, "lint", "--config", config, "--format", "json", path)
	cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true")
	out, err := cmd.Output()
	var report struct {
		Totals struct{ Errors, Warnings int }
		// Problems are printed as they are when there are any.
		Problems []json.RawMessage
	}
	if jerr := json.Unmarshal(out, &report); jerr != nil {
		t.Fatalf("redocly lint: %v; output is not its JSON report (%v):\n%s", err, jerr, out)
	}
	if err != nil || report.Totals.Errors > 0 || report.Totals.Warnings > 0 {
		t.Fatalf("redocly lint: %d errors, %d warnings (%v):\n%s", report.Totals.Errors, report.Totals.Warnings, err, out)
	}
}

// Methods are the methods an OpenAPI path item may have operations for, lower case.
var Methods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// A Doc is an OpenAPI document, read for checking requests and answers against it.
type Doc struct {
	raw  map[string]any
	defs map[string]any // the component schemas, their references rewritten to $defs

	mu       sync.Mutex
	compiled map[string]*jsonschema.Resolved // by the JSON of the schema and strict
}

// Load reads doc, a value that encodes as an OpenAPI 3.1 document.
func Load(t testing.TB, doc any) *Doc {
	t.Helper()
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	d := &Doc{raw: raw, defs: map[string]any{}, compiled: map[string]*jsonschema.Resolved{}}
	schemas, _ := dig(raw, "components", "schemas").(map[string]any)
	for name, s := range schemas {
		d.defs[name] = rewriteRefs(s)
	}
	return d
}

// Routes returns the document's operations as "METHOD path" ("GET /v1/things/{id}"),
// sorted.
func (d *Doc) Routes() []string {
	var out []string
	paths, _ := d.raw["paths"].(map[string]any)
	for p, item := range paths {
		for m := range item.(map[string]any) {
			if slices.Contains(Methods, m) {
				out = append(out, strings.ToUpper(m)+" "+p)
			}
		}
	}
	slices.Sort(out)
	return out
}

// Operations returns every operation of the document, in the order of [Doc.Routes].
func (d *Doc) Operations() []*Operation {
	var out []*Operation
	for _, r := range d.Routes() {
		m, p, _ := strings.Cut(r, " ")
		out = append(out, d.operation(m, p))
	}
	return out
}

func (d *Doc) operation(method, template string) *Operation {
	item := dig(d.raw, "paths", template).(map[string]any)
	return &Operation{Method: method, Path: template, doc: d, item: item, raw: item[strings.ToLower(method)].(map[string]any)}
}

// Match returns the path template of the document that path (a concrete path, without
// its query) matches, a {parameter} matching any non-empty segment, and its operation
// for method: template is "" when no template matches path, op nil when one does but
// has no operation for method.
func (d *Doc) Match(method, path string) (template string, op *Operation) {
	segs := strings.Split(path, "/")
	paths, _ := d.raw["paths"].(map[string]any)
	for t := range paths {
		tsegs := strings.Split(t, "/")
		if len(tsegs) != len(segs) {
			continue
		}
		match := true
		for i, s := range tsegs {
			if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
				match = segs[i] != ""
			} else {
				match = s == segs[i]
			}
			if !match {
				break
			}
		}
		if !match {
			continue
		}
		if _, has := paths[t].(map[string]any)[strings.ToLower(method)]; !has {
			return t, nil
		}
		return t, d.operation(method, t)
	}
	return "", nil
}

// PathOperations returns the operations of the path item of template.
func (d *Doc) PathOperations(template string) []*Operation {
	var out []*Operation
	for _, m := range d.PathMethods(template) {
		out = append(out, d.operation(m, template))
	}
	return out
}

// PathMethods returns the methods the path item of template has operations for, upper
// case and sorted.
func (d *Doc) PathMethods(template string) []string {
	var out []string
	for m := range dig(d.raw, "paths", template).(map[string]any) {
		if slices.Contains(Methods, m) {
			out = append(out, strings.ToUpper(m))
		}
	}
	slices.Sort(out)
	return out
}

// An Operation is one operation of a [Doc].
type Operation struct {
	// Method (upper case) and Path (the template) name it.
	Method, Path string
	doc          *Doc
	item, raw    map[string]any
}

func (o *Operation) String() string { return o.Method + " " + o.Path }

// Statuses returns the statuses the operation documents ("200", "404", "default"),
// sorted.
func (o *Operation) Statuses() []string {
	responses, _ := o.raw["responses"].(map[string]any)
	return slices.Sorted(maps.Keys(responses))
}

// Secured reports whether the operation needs a credential: it has security
// requirements of its own, or the document's apply to it.
func (o *Operation) Secured() bool {
	sec, ok := o.raw["security"].([]any)
	if !ok {
		sec, _ = o.doc.raw["security"].([]any)
	}
	return len(sec) > 0
}

// A Param is a parameter of an operation.
type Param struct {
	Name, In string
	Required bool
	Schema   map[string]any
}

// Params returns the operation's parameters, those of its path item first, with their
// references resolved.
func (o *Operation) Params() []Param {
	var out []Param
	for _, list := range []any{o.item["parameters"], o.raw["parameters"]} {
		ps, _ := list.([]any)
		for _, p := range ps {
			pm := o.doc.resolve(p)
			s, _ := pm["schema"].(map[string]any)
			req, _ := pm["required"].(bool)
			out = append(out, Param{Name: pm["name"].(string), In: pm["in"].(string), Required: req, Schema: s})
		}
	}
	return out
}

// Body returns the JSON schema of the operation's request body and its example, or nil
// schema when it takes none; required says whether the body is required.
func (o *Operation) Body() (schema map[string]any, example any, required bool) {
	rb, ok := o.raw["requestBody"].(map[string]any)
	if !ok {
		return nil, nil, false
	}
	rb = o.doc.resolve(rb)
	media, _ := dig(rb, "content", "application/json").(map[string]any)
	schema, _ = media["schema"].(map[string]any)
	required, _ = rb["required"].(bool)
	return schema, media["example"], required
}

// resolve follows a $ref to the document's object.
func (d *Doc) resolve(v any) map[string]any {
	m, _ := v.(map[string]any)
	for range 10 {
		r, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		var keys []string
		for _, k := range strings.Split(strings.TrimPrefix(r, "#/"), "/") {
			keys = append(keys, strings.ReplaceAll(strings.ReplaceAll(k, "~1", "/"), "~0", "~"))
		}
		m, _ = dig(d.raw, keys...).(map[string]any)
	}
	return m
}

// CheckAnswer checks an answer of the operation against the document: its status is
// documented (or a "default" is), the headers that the response marks required are
// there and valid, and a body is JSON valid against the response's schema (a
// response without content has no body). With strict, every object schema that lists
// its properties and says nothing of others is held to allow no others, so that a
// field the document does not name is found.
func (o *Operation) CheckAnswer(status int, header http.Header, body []byte, strict bool) error {
	responses, _ := o.raw["responses"].(map[string]any)
	resp, ok := responses[strconv.Itoa(status)]
	if !ok {
		if resp, ok = responses["default"]; !ok || status < 400 {
			return fmt.Errorf("%s answered %d, which it does not document (it documents %v)", o, status, o.Statuses())
		}
	}
	r := o.doc.resolve(resp)
	headers, _ := r["headers"].(map[string]any)
	for name, h := range headers {
		hm := o.doc.resolve(h)
		v := header.Get(name)
		if req, _ := hm["required"].(bool); req && v == "" {
			return fmt.Errorf("%s %d: no %s header, which the document requires", o, status, name)
		}
		if v == "" {
			continue
		}
		s, _ := hm["schema"].(map[string]any)
		var inst any = v
		if s["type"] == "integer" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return fmt.Errorf("%s %d: header %s %q is not an integer", o, status, name, v)
			}
			inst = float64(n)
		}
		if err := o.doc.Validate(s, inst, false); err != nil {
			return fmt.Errorf("%s %d: header %s %q: %v", o, status, name, v, err)
		}
	}
	content, _ := r["content"].(map[string]any)
	if len(content) == 0 {
		if len(body) > 0 {
			return fmt.Errorf("%s %d: a body, where the document has no content: %s", o, status, body)
		}
		return nil
	}
	media, ok := content["application/json"].(map[string]any)
	if !ok {
		return fmt.Errorf("%s %d: the document has no application/json content", o, status)
	}
	if ct := header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return fmt.Errorf("%s %d: Content-Type %q, want application/json", o, status, ct)
	}
	var inst any
	if err := json.Unmarshal(body, &inst); err != nil {
		return fmt.Errorf("%s %d: the body is not JSON: %v\n%s", o, status, err, body)
	}
	if err := o.doc.Validate(media["schema"], inst, strict); err != nil {
		return fmt.Errorf("%s %d: the body does not match the document: %v\n%s", o, status, err, body)
	}
	return nil
}

// Validate validates instance (a value as encoding/json decodes it into any) against
// schema, a schema of the document (its references to the components resolved); see
// [Operation.CheckAnswer] for strict.
func (d *Doc) Validate(schema any, instance any, strict bool) error {
	rs, err := d.compile(schema, strict)
	if err != nil {
		return err
	}
	return rs.Validate(instance)
}

// compile returns schema compiled for [Doc.Validate], once for each schema.
func (d *Doc) compile(schema any, strict bool) (*jsonschema.Resolved, error) {
	key, err := json.Marshal([]any{schema, strict})
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if rs, ok := d.compiled[string(key)]; ok {
		return rs, nil
	}
	defs := map[string]any{}
	for name, s := range d.defs {
		if strict {
			s = strictly(s)
		}
		defs[name] = asserted(s)
	}
	if strict {
		schema = strictly(schema)
	}
	root := map[string]any{"$defs": defs, "allOf": []any{asserted(rewriteRefs(schema))}}
	b, err := json.Marshal(root)
	if err != nil {
		return nil, err
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("the schema does not decode: %v", err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("the schema does not resolve: %v", err)
	}
	d.compiled[string(key)] = rs
	return rs, nil
}

// formatPatterns are the patterns that assert the formats the documents use.
var formatPatterns = map[string]string{
	"date-time": `^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$`,
	"date":      `^[0-9]{4}-[0-9]{2}-[0-9]{2}$`,
	"uuid":      `^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`,
}

// asserted returns a copy of schema in which each format of formatPatterns is asserted:
// a schema with the format holds a string to its pattern too.
func asserted(schema any) any {
	return walk(schema, func(m map[string]any) {
		if f, ok := m["format"].(string); ok && formatPatterns[f] != "" {
			check := map[string]any{"pattern": formatPatterns[f]}
			all, _ := m["allOf"].([]any)
			m["allOf"] = append(slices.Clone(all), check)
		}
	})
}

// strictly returns a copy of schema in which every object schema that lists its
// properties, and says nothing of others, allows no others.
func strictly(schema any) any {
	return walk(schema, func(m map[string]any) {
		if _, ok := m["properties"]; !ok {
			return
		}
		if _, ok := m["additionalProperties"]; !ok {
			m["additionalProperties"] = false
		}
	})
}

// rewriteRefs returns a copy of schema whose references to the components' schemas
// refer to $defs.
func rewriteRefs(schema any) any {
	return walk(schema, func(m map[string]any) {
		if r, ok := m["$ref"].(string); ok {
			m["$ref"] = strings.Replace(r, "#/components/schemas/", "#/$defs/", 1)
		}
	})
}

// walk returns a deep copy of v, calling f on each object of the copy, children first.
func walk(v any, f func(map[string]any)) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, x := range v {
			m[k] = walk(x, f)
		}
		f(m)
		return m
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = walk(x, f)
		}
		return out
	}
	return v
}

// dig returns the value at the keys' path in nested objects, or nil.
func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// The values that [Doc.Invalid] and [Doc.InvalidQuery] try: every JSON type, and
// strings of the shapes that formats, patterns and enums refuse.
var (
	poolStrings = []string{"", " ", "a.b", "bogus", "UPPER", "Ω", "not-a-time", "0", "-1", "1.5",
		"2030-01-15", "2030-01-15T12:00:00", "2030-01-15 12:00:00Z"}
	poolOthers = []any{0.0, -1.0, 1.5, 1e30, 9007199254740992.0, -9007199254740992.0, true,
		[]any{}, []any{""}, []any{"bogus"}, []any{"UPPER"}, []any{1.0}, []any{true}, map[string]any{}}
)

// Invalid returns values that schema (a schema of the document) declares invalid, for
// a check that the handler refuses each: from a pool of values of every JSON type and
// of many shapes, and the values just past the bounds that schema sets (maximum,
// minimum, maxLength, minLength, and those of its items). For a property that is not
// required, null and the empty string are not among them: encoding/json reads null as
// the property not given, and a handler reads the empty string so too.
func (d *Doc) Invalid(schema map[string]any, required bool) []any {
	var pool []any
	for _, s := range poolStrings {
		pool = append(pool, s)
	}
	pool = append(append(pool, poolOthers...), bounds(schema)...)
	if items, ok := schema["items"].(map[string]any); ok {
		for _, v := range bounds(items) {
			pool = append(pool, []any{v})
		}
	}
	if required {
		pool = append(pool, nil)
	}
	var out []any
	kinds := map[string]bool{} // the kinds of value the schema's type refuses, tried once
	for _, v := range pool {
		if v == "" && !required {
			continue
		}
		k := kind(v)
		if !typeAllows(schema, k) {
			if kinds[k] {
				continue
			}
			kinds[k] = true
		}
		if d.Validate(schema, v, false) != nil {
			out = append(out, v)
		}
	}
	return out
}

// kind returns the JSON type of v, a value as encoding/json decodes it into any
// ("number" for every number).
func kind(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "boolean"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "null"
}

// typeAllows reports whether the type of schema, if it says one, allows values of
// kind k (an integer's type allows numbers).
func typeAllows(schema map[string]any, k string) bool {
	var types []string
	switch t := schema["type"].(type) {
	case nil:
		return true
	case string:
		types = []string{t}
	case []any:
		for _, x := range t {
			s, _ := x.(string)
			types = append(types, s)
		}
	}
	return slices.Contains(types, k) || k == "number" && slices.Contains(types, "integer")
}

// InvalidQuery returns values of a query parameter whose schema is schema that it
// declares invalid, as [Doc.Invalid] does; a value is read as a number where the
// schema's type is a number and the value is one. The empty value is not among them:
// handlers read "name=" as a parameter not given.
func (d *Doc) InvalidQuery(schema map[string]any) []string {
	pool := slices.Clone(poolStrings[1:])
	for _, v := range bounds(schema) {
		switch v := v.(type) {
		case string:
			pool = append(pool, v)
		case float64:
			pool = append(pool, strconv.FormatFloat(v, 'f', -1, 64))
		}
	}
	var out []string
	for _, s := range pool {
		if s != "" && d.Validate(schema, typed(schema, s), false) != nil {
			out = append(out, s)
		}
	}
	return out
}

// Valid returns the values at the bounds of a query parameter whose schema is schema,
// which it declares valid, for a check that the handler takes each: its maximum and
// minimum, each value of its enum, and its default.
func (d *Doc) Valid(schema map[string]any) []string {
	var vals []any
	for _, k := range []string{"maximum", "minimum", "default"} {
		if v, ok := schema[k]; ok {
			vals = append(vals, v)
		}
	}
	enum, _ := schema["enum"].([]any)
	vals = append(vals, enum...)
	var out []string
	for _, v := range vals {
		switch v := v.(type) {
		case string:
			out = append(out, v)
		case float64:
			out = append(out, strconv.FormatFloat(v, 'f', -1, 64))
		}
	}
	return out
}

// CheckRequest checks a request of the operation against the document: each query
// parameter of target is one of the operation's, given once, and valid for its schema
// (a number where its type is one); each required parameter in the path or the query
// is there; each path parameter is valid for its schema; and body, if not empty, is
// JSON valid for the schema of the request body (a body the document requires must be
// there).
func (o *Operation) CheckRequest(target string, body []byte) error {
	path, rawQuery, _ := strings.Cut(target, "?")
	query, err := url.ParseQuery(rawQuery)
	if err != nil {
		return fmt.Errorf("%s: the query does not parse: %v", o, err)
	}
	params := o.Params()
	for name, vs := range query {
		i := slices.IndexFunc(params, func(p Param) bool { return p.In == "query" && p.Name == name })
		if i < 0 {
			return fmt.Errorf("%s: query parameter %q is not one the document names", o, name)
		}
		if len(vs) > 1 {
			return fmt.Errorf("%s: query parameter %q is given %d times", o, name, len(vs))
		}
		if err := o.doc.Validate(params[i].Schema, typed(params[i].Schema, vs[0]), false); err != nil {
			return fmt.Errorf("%s: query parameter %s=%q: %v", o, name, vs[0], err)
		}
	}
	segs, tsegs := strings.Split(path, "/"), strings.Split(o.Path, "/")
	for _, p := range params {
		switch p.In {
		case "query":
			if p.Required && !query.Has(p.Name) {
				return fmt.Errorf("%s: no query parameter %s, which the document requires", o, p.Name)
			}
		case "path":
			i := slices.Index(tsegs, "{"+p.Name+"}")
			if i < 0 || i >= len(segs) {
				return fmt.Errorf("%s: the path has no parameter %s", o, p.Name)
			}
			v, err := url.PathUnescape(segs[i])
			if err != nil {
				return err
			}
			if err := o.doc.Validate(p.Schema, v, false); err != nil {
				return fmt.Errorf("%s: path parameter %s=%q: %v", o, p.Name, v, err)
			}
		}
	}
	schema, _, required := o.Body()
	switch {
	case len(body) == 0 && required:
		return fmt.Errorf("%s: no body, which the document requires", o)
	case len(body) == 0:
		return nil
	case schema == nil:
		return fmt.Errorf("%s: a body, where the document has none", o)
	}
	var inst any
	if err := json.Unmarshal(body, &inst); err != nil {
		return fmt.Errorf("%s: the body is not JSON: %v", o, err)
	}
	if err := o.doc.Validate(schema, inst, false); err != nil {
		return fmt.Errorf("%s: the body %.200s: %v", o, body, err)
	}
	return nil
}

// typed returns the value of a query parameter as its schema reads it: a number where
// its type is a number and v is one, else v.
func typed(schema map[string]any, v string) any {
	if t := schema["type"]; t == "integer" || t == "number" {
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			return f
		}
	}
	return v
}

// bounds returns the values just past the bounds that schema sets.
func bounds(schema map[string]any) []any {
	var out []any
	if n, ok := schema["maximum"].(float64); ok {
		out = append(out, n+1)
	}
	if n, ok := schema["minimum"].(float64); ok {
		out = append(out, n-1)
	}
	if n, ok := schema["maxLength"].(float64); ok {
		out = append(out, strings.Repeat("a", int(n)+1))
	}
	if n, ok := schema["minLength"].(float64); ok && n > 0 {
		out = append(out, strings.Repeat("a", int(n)-1))
	}
	return out
}
