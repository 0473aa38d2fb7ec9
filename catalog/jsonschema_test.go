package catalog_test

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/examples/apis"
)

// sampleAPIs registers the sample catalog and returns its APIs by id.
func sampleAPIs(t *testing.T) map[string]*catalog.API {
	t.Helper()
	reg := &catalog.Registry{}
	if err := apis.Register(reg); err != nil {
		t.Fatalf("registering the sample catalog: %v", err)
	}
	out := map[string]*catalog.API{}
	for _, a := range reg.List() {
		out[a.ID] = a
	}
	return out
}

// prop returns the schema of one property of an object schema.
func prop(t *testing.T, s map[string]any, name string) map[string]any {
	t.Helper()
	props, ok := s["properties"].(map[string]any)
	if !ok {
		t.Fatalf("schema has no properties: %v", s)
	}
	p, ok := props[name].(map[string]any)
	if !ok {
		t.Fatalf("schema has no property %q: %v", name, slices.Sorted(maps.Keys(props)))
	}
	return p
}

// jsonText encodes v as the test compares it.
func jsonText(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSampleInputSchemas checks the input schema of every sample API against its public
// contract (ids, parameter types, limits, enums and defaults), which the generated
// clients and the docs rely on.
func TestSampleInputSchemas(t *testing.T) {
	all := sampleAPIs(t)
	if got := slices.Sorted(maps.Keys(all)); !reflect.DeepEqual(got, []string{"date-info", "echo", "hash", "hmac", "image-info", "uuid-generator"}) {
		t.Fatalf("sample ids = %v", got)
	}
	type kw struct{ prop, keyword, want string } // want is JSON text; "" means absent
	tests := []struct {
		id       string
		props    []string // property names, sorted
		required string   // JSON text of "required"; "" means absent
		keywords []kw
	}{
		{"hash", []string{"algorithm", "text"}, `["text"]`, []kw{
			{"text", "type", `"string"`}, {"text", "maxLength", `10000`}, {"text", "minLength", `1`},
			{"text", "examples", `["hello"]`},
			{"algorithm", "type", `"string"`}, {"algorithm", "enum", `["md5","sha1","sha256","sha512"]`},
			{"algorithm", "default", `"sha256"`}, {"algorithm", "minLength", ""},
		}},
		{"hmac", []string{"algorithm", "encoding", "message", "secret"}, `["message","secret"]`, []kw{
			{"message", "minLength", `1`}, {"message", "maxLength", ""},
			{"secret", "minLength", `1`},
			{"algorithm", "enum", `["sha1","sha256","sha512"]`}, {"algorithm", "default", `"sha256"`},
			{"encoding", "enum", `["hex","base64"]`}, {"encoding", "default", `"hex"`},
		}},
		{"uuid-generator", []string{"count"}, "", []kw{
			{"count", "type", `"integer"`}, {"count", "minimum", `1`}, {"count", "maximum", `100`},
			{"count", "default", `1`}, {"count", "enum", ""},
		}},
		{"date-info", []string{"date"}, `["date"]`, []kw{
			{"date", "type", `"string"`}, {"date", "format", `"date"`}, {"date", "minLength", `1`},
			{"date", "pattern", `"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"`}, {"date", "examples", `["2024-02-29"]`},
		}},
		{"echo", []string{"delay_ms", "message"}, `["message"]`, []kw{
			{"message", "maxLength", `1000`}, {"message", "minLength", `1`},
			{"delay_ms", "type", `"integer"`}, {"delay_ms", "minimum", `0`}, {"delay_ms", "maximum", `5000`},
			{"delay_ms", "default", `0`},
		}},
		{"image-info", []string{"url"}, "", []kw{
			{"url", "type", `"string"`}, {"url", "format", `"uri"`}, {"url", "maxLength", `2048`},
			{"url", "minLength", ""},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			a := all[tt.id]
			if a == nil {
				t.Fatalf("no API %q", tt.id)
			}
			raw := a.InputSchema()
			if !json.Valid(raw) {
				t.Fatalf("input schema is not JSON: %s", raw)
			}
			s := decodeSchema(t, raw)
			if s["$schema"] != catalog.SchemaDialect || catalog.SchemaDialect != "https://json-schema.org/draft/2020-12/schema" {
				t.Errorf("$schema = %v", s["$schema"])
			}
			if s["type"] != "object" || s["additionalProperties"] != false {
				t.Errorf("type = %v, additionalProperties = %v", s["type"], s["additionalProperties"])
			}
			if s["title"] != a.Title || s["description"] != a.Description {
				t.Errorf("title, description = %v, %v", s["title"], s["description"])
			}
			props := s["properties"].(map[string]any)
			if got := slices.Sorted(maps.Keys(props)); !reflect.DeepEqual(got, tt.props) {
				t.Errorf("properties = %v, want %v", got, tt.props)
			}
			if req, ok := s["required"]; tt.required == "" && ok {
				t.Errorf("required = %v, want absent", req)
			} else if tt.required != "" && jsonText(t, req) != tt.required {
				t.Errorf("required = %s, want %s", jsonText(t, req), tt.required)
			}
			for _, k := range tt.keywords {
				got, ok := prop(t, s, k.prop)[k.keyword]
				switch {
				case k.want == "" && ok:
					t.Errorf("%s.%s = %s, want absent", k.prop, k.keyword, jsonText(t, got))
				case k.want != "" && !ok:
					t.Errorf("%s.%s is absent, want %s", k.prop, k.keyword, k.want)
				case k.want != "" && jsonText(t, got) != k.want:
					t.Errorf("%s.%s = %s, want %s", k.prop, k.keyword, jsonText(t, got), k.want)
				}
			}
			// Every declared description reaches the schema.
			for _, p := range a.Params {
				if p.Description != "" && prop(t, s, p.Name)["description"] != p.Description {
					t.Errorf("%s.description = %v", p.Name, prop(t, s, p.Name)["description"])
				}
			}
		})
	}
}

// TestSampleResultSchemas checks the result schema of every sample API: its property
// names are the REST names of the result fields, however odd, with their types.
func TestSampleResultSchemas(t *testing.T) {
	all := sampleAPIs(t)
	want := map[string]map[string]string{ // id -> field -> type
		"hash":           {"algorithm": "string", "hash": "string"},
		"hmac":           {"hmac": "string", "algorithm": "string", "encoding": "string"},
		"uuid-generator": {"uuids": "array", "count": "integer"},
		"date-info": {"date": "string", "day-of-week": "string", "iso:week": "integer", "unix.seconds": "integer",
			"quarter/year": "string", "1st-of-month": "string", "is leap year": "boolean"},
		"echo":       {"message": "string", "delay_ms": "integer"},
		"image-info": {"format": "string", "width": "integer", "height": "integer", "bytes": "integer"},
	}
	for id, fields := range want {
		a := all[id]
		s := decodeSchema(t, a.ResultSchema())
		if s["$schema"] != catalog.SchemaDialect || s["type"] != "object" {
			t.Errorf("%s: $schema = %v, type = %v", id, s["$schema"], s["type"])
		}
		props := s["properties"].(map[string]any)
		if got, w := slices.Sorted(maps.Keys(props)), slices.Sorted(maps.Keys(fields)); !reflect.DeepEqual(got, w) {
			t.Errorf("%s: result properties = %v, want %v", id, got, w)
		}
		for name, typ := range fields {
			if p := prop(t, s, name); p["type"] != typ || p["description"] == nil {
				t.Errorf("%s: result %q = %v, want type %s with a description", id, name, p, typ)
			}
		}
	}
	if items := prop(t, decodeSchema(t, all["uuid-generator"].ResultSchema()), "uuids")["items"]; jsonText(t, items) != `{"type":"string"}` {
		t.Errorf("uuids items = %s", jsonText(t, items))
	}
	// An API without result fields has a free-form object result.
	free := mustCompile(t, catalog.API{ID: "free", Method: "GET", Cost: 1})
	if got := string(free.ResultSchema()); got != `{"$schema":"`+catalog.SchemaDialect+`","type":"object"}` {
		t.Errorf("free-form result schema = %s", got)
	}
	if got := string(free.InputSchema()); got != `{"$schema":"`+catalog.SchemaDialect+`","additionalProperties":false,"properties":{},"title":"free","type":"object"}` {
		t.Errorf("input schema without params = %s", got)
	}
}

// TestFullSchemas checks the schema keywords of every rule, nested objects and
// arrays included, on the full test API.
func TestFullSchemas(t *testing.T) {
	a := fullAPI()
	s := decodeSchema(t, a.InputSchema())
	if jsonText(t, s["required"]) != `["name"]` {
		t.Errorf("required = %s", jsonText(t, s["required"]))
	}
	checks := []struct {
		prop string
		want string // JSON text of the whole property schema
	}{
		{"name", `{"examples":["héllo"],"maxLength":5,"minLength":2,"type":"string"}`},
		{"color", `{"default":"red","enum":["red","green","blue"],"type":"string"}`},
		{"email", `{"format":"email","pattern":"^[^\\s@]+@[^\\s@]+\\.[^\\s@]+$","type":"string"}`},
		{"addr", `{"anyOf":[{"format":"ipv4"},{"format":"ipv6"}],"type":"string"}`},
		{"hex", `{"pattern":"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$","type":"string"}`},
		{"count", `{"default":10,"maximum":100,"minimum":1,"type":"integer"}`},
		{"level", `{"enum":[1,2,3],"type":"integer"}`},
		{"ratio", `{"maximum":2.5,"minimum":-1.5,"type":"number"}`},
		{"scale", `{"enum":[0.5,1,2],"type":"number"}`},
		{"flag", `{"default":false,"type":"boolean"}`},
		{"tags", `{"default":["a"],"items":{"maxLength":4,"minLength":1,"type":"string"},"maxItems":3,"minItems":1,"type":"array"}`},
		{"ids", `{"items":{"minimum":0,"type":"integer"},"type":"array"}`},
		{"opts", `{"additionalProperties":false,"default":{"depth":3,"mode":"fast"},"properties":{"depth":{"default":3,"maximum":9,"minimum":0,"type":"integer"},"mode":{"enum":["fast","slow"],"minLength":1,"type":"string"}},"required":["mode"],"type":"object"}`},
		{"points", `{"items":{"additionalProperties":false,"properties":{"label":{"type":"string"},"x":{"type":"number"}},"required":["x"],"type":"object"},"type":"array"}`},
	}
	for _, c := range checks {
		if got := jsonText(t, prop(t, s, c.prop)); got != c.want {
			t.Errorf("%s:\n got  %s\n want %s", c.prop, got, c.want)
		}
	}
	site := prop(t, s, "site")
	if site["format"] != "uri" || site["pattern"] == nil {
		t.Errorf("site = %v", site)
	}
	r := decodeSchema(t, a.ResultSchema())
	if got := jsonText(t, r["properties"]); got != `{"day-of-week":{"type":"string"},"list":{"items":{"type":"integer"},"type":"array"},"nested":{"properties":{"a.b":{"type":"number"}},"type":"object"},"ok":{"type":"boolean"},"raw":{}}` {
		t.Errorf("result properties = %s", got)
	}
	// The schemas are stable: compiling again gives the same bytes.
	if b := mustCompile(t, fullDef()); string(b.InputSchema()) != string(a.InputSchema()) || string(b.ResultSchema()) != string(a.ResultSchema()) {
		t.Error("schemas differ between two compilations")
	}
}

// TestSchemaAgreesWithValidation is a property check: whatever ValidateJSON accepts
// satisfies the input schema as written (types, required, enum, minimum, maximum,
// lengths, items, patterns, additionalProperties), both as given (nulls aside) and as
// converted; and each refusal below breaks a schema keyword too, so the schema is not
// vacuous.
func TestSchemaAgreesWithValidation(t *testing.T) {
	a := fullAPI()
	s := decodeSchema(t, a.InputSchema())
	accepted := 0
	for _, tc := range jsonCases {
		in := decodeBody(t, tc.body)
		out, err := a.ValidateJSON(in)
		if err == nil {
			accepted++
			if msg := schemaViolation(s, dropNulls(in), "input"); msg != "" {
				t.Errorf("%s: accepted input breaks the schema: %s", tc.name, msg)
			}
			if msg := schemaViolation(s, map[string]any(out), "params"); msg != "" {
				t.Errorf("%s: validated params break the schema: %s", tc.name, msg)
			}
			continue
		}
	}
	if accepted < 10 {
		t.Fatalf("only %d accepted cases", accepted)
	}
	refused := []string{
		`{}`,
		`{"name":""}`,
		`{"name":"a"}`,
		`{"name":"abcdef"}`,
		`{"name":"abc","color":"purple"}`,
		`{"name":"abc","count":0}`,
		`{"name":"abc","count":101}`,
		`{"name":"abc","count":2.5}`,
		`{"name":"abc","level":4}`,
		`{"name":"abc","scale":3}`,
		`{"name":"abc","ratio":2.6}`,
		`{"name":"abc","ratio":-2}`,
		`{"name":"abc","tags":[]}`,
		`{"name":"abc","tags":["a","b","c","d"]}`,
		`{"name":"abc","tags":["toolong"]}`,
		`{"name":"abc","ids":[-1]}`,
		`{"name":"abc","opts":{}}`,
		`{"name":"abc","opts":{"mode":"fast","depth":10}}`,
		`{"name":"abc","opts":{"mode":"fast","x":1}}`,
		`{"name":"abc","points":[{}]}`,
		`{"name":"abc","bogus":1}`,
		`{"name":"abc","day":"2026-2-3"}`,
		`{"name":"abc","hex":"#abcd"}`,
		`{"name":"abc","email":"a@b"}`,
		`{"name":"abc","site":"ftp://x.y"}`,
		`{"name":"abc","addr":"1.2.3"}`,
		`{"name":"abc","flag":"yes"}`,
	}
	for _, body := range refused {
		in := decodeBody(t, body)
		if _, err := a.ValidateJSON(in); err == nil {
			t.Errorf("%s: accepted", body)
		}
		if msg := schemaViolation(s, in, "input"); msg == "" {
			t.Errorf("%s: refused by validation but satisfies the schema", body)
		}
	}
}

// TestMarshalRoundTrip checks the catalog document path: a registered API encoded with
// json.Marshal (as GET /v1/catalog serves it), decoded into a catalog.API and compiled,
// validates exactly like the original, and encodes to the same bytes.
func TestMarshalRoundTrip(t *testing.T) {
	reg := &catalog.Registry{}
	if err := apis.Register(reg); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(fullDef()); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(fileDef()); err != nil {
		t.Fatal(err)
	}
	// Inputs: the JSON cases, plus the sample APIs' own inputs.
	var inputs []string
	for _, c := range jsonCases {
		inputs = append(inputs, c.body)
	}
	inputs = append(inputs,
		`{}`, `{"text":"hello"}`, `{"text":"hello","algorithm":"md5"}`, `{"text":"hello","algorithm":"crc32"}`,
		`{"text":""}`, `{"message":"hi","secret":"k"}`, `{"message":"hi","secret":""}`, `{"message":"hi","secret":"k","encoding":"base64"}`,
		`{"count":100}`, `{"count":101}`, `{"count":0}`, `{"count":1.5}`,
		`{"date":"2024-02-29"}`, `{"date":"2024-2-29"}`, `{"date":"2026-02-30"}`,
		`{"message":"x","delay_ms":5000}`, `{"message":"x","delay_ms":5001}`, `{"message":"x","delay_ms":-1}`,
		`{"url":"https://example.com/a.png"}`, `{"url":"ftp://example.com/a.png"}`, `{"image":"x"}`,
		`{"mode":"slow"}`, `{"mode":"x","url":"http://a.b"}`,
	)
	for _, orig := range reg.List() {
		t.Run(orig.ID, func(t *testing.T) {
			doc, err := json.Marshal(orig)
			if err != nil {
				t.Fatal(err)
			}
			var top map[string]json.RawMessage
			if err := json.Unmarshal(doc, &top); err != nil {
				t.Fatal(err)
			}
			if string(top["input_schema"]) != string(orig.InputSchema()) || string(top["result_schema"]) != string(orig.ResultSchema()) {
				t.Error("the encoded API does not carry its schemas")
			}
			for _, k := range []string{"id", "title", "description", "method", "cost", "params"} {
				if _, ok := top[k]; !ok {
					t.Errorf("the encoded API has no %q", k)
				}
			}
			if _, ok := top["Handler"]; ok {
				t.Error("the encoded API carries its handler")
			}
			var params []struct{ Name string }
			if err := json.Unmarshal(top["params"], &params); err != nil {
				t.Fatal(err)
			}
			for _, p := range params {
				if p.Name == catalog.URLParam {
					t.Error("the implicit url parameter is encoded as a declared parameter")
				}
			}

			// Clients may decode numbers as float64 or as json.Number.
			decoders := map[string]func() (catalog.API, error){
				"float64": func() (catalog.API, error) {
					var c catalog.API
					err := json.Unmarshal(doc, &c)
					return c, err
				},
				"UseNumber": func() (catalog.API, error) {
					var c catalog.API
					d := json.NewDecoder(strings.NewReader(string(doc)))
					d.UseNumber()
					err := d.Decode(&c)
					return c, err
				},
			}
			for name, decode := range decoders {
				decoded, err := decode()
				if err != nil {
					t.Fatalf("%s: decoding %s: %v", name, doc, err)
				}
				if decoded.Handler != nil {
					t.Fatalf("%s: decoded a handler", name)
				}
				client, err := catalog.Compile(decoded)
				if err != nil {
					t.Fatalf("%s: compiling the decoded API: %v\n%s", name, err, doc)
				}
				again, _ := json.Marshal(client)
				if string(again) != string(doc) {
					t.Errorf("%s: re-encoded API differs:\n got  %s\n want %s", name, again, doc)
				}
				for _, body := range inputs {
					in := decodeBody(t, body)
					want, wantErr := orig.ValidateJSON(in)
					got, gotErr := client.ValidateJSON(decodeBody(t, body))
					if (wantErr == nil) != (gotErr == nil) || wantErr != nil && wantErr.Error() != gotErr.Error() {
						t.Errorf("%s: %s: server says %v, client says %v", name, body, wantErr, gotErr)
						continue
					}
					if !reflect.DeepEqual(got, want) {
						t.Errorf("%s: %s: server gives %#v, client gives %#v", name, body, want, got)
					}
				}
			}
		})
	}
}
