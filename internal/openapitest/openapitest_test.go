package openapitest

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

// doc is a small document: one operation with a path parameter, a query parameter, a
// body, and answers whose schemas refer to the components.
var doc = map[string]any{
	"openapi": "3.1.0",
	"paths": map[string]any{
		"/things/{id}": map[string]any{"post": map[string]any{
			"parameters": []any{
				map[string]any{"$ref": "#/components/parameters/ID"},
				map[string]any{"name": "limit", "in": "query", "schema": map[string]any{"type": "integer", "minimum": 1, "maximum": 10}},
				map[string]any{"name": "state", "in": "query", "schema": map[string]any{"type": "string", "enum": []any{"on", "off"}}},
			},
			"requestBody": map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{
				"schema": map[string]any{"type": "object", "required": []any{"name"}, "additionalProperties": false,
					"properties": map[string]any{"name": map[string]any{"type": "string", "maxLength": 3}}},
				"example": map[string]any{"name": "a"},
			}}},
			"responses": map[string]any{
				"200": map[string]any{"description": "ok",
					"headers": map[string]any{"ETag": map[string]any{"required": true, "schema": map[string]any{"type": "string"}}},
					"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Thing"}}}},
				"304": map[string]any{"description": "not modified"},
			},
		}},
	},
	"components": map[string]any{
		"parameters": map[string]any{"ID": map[string]any{"name": "id", "in": "path", "required": true, "schema": map[string]any{"type": "string", "maxLength": 4}}},
		"schemas": map[string]any{"Thing": map[string]any{"type": "object", "required": []any{"at"},
			"properties": map[string]any{"at": map[string]any{"type": "string", "format": "date-time"}}}},
	},
}

func TestMatch(t *testing.T) {
	d := Load(t, doc)
	if tmpl, op := d.Match("POST", "/things/x1"); tmpl != "/things/{id}" || op == nil || op.String() != "POST /things/{id}" {
		t.Errorf("Match POST /things/x1: %q %v", tmpl, op)
	}
	if tmpl, op := d.Match("GET", "/things/x1"); tmpl != "/things/{id}" || op != nil {
		t.Errorf("Match GET /things/x1: %q %v, want the template and no operation", tmpl, op)
	}
	for _, p := range []string{"/things/", "/things/x1/y", "/other/x1"} {
		if tmpl, _ := d.Match("POST", p); tmpl != "" {
			t.Errorf("Match %s: %q, want none", p, tmpl)
		}
	}
	if got := d.Routes(); !slices.Equal(got, []string{"POST /things/{id}"}) {
		t.Errorf("Routes: %v", got)
	}
}

func TestCheckAnswer(t *testing.T) {
	_, op := Load(t, doc).Match("POST", "/things/x1")
	json := http.Header{"Content-Type": {"application/json"}, "Etag": {`"v1"`}}
	for _, tt := range []struct {
		name   string
		status int
		header http.Header
		body   string
		strict bool
		fault  string // in the error; "" for none
	}{
		{"valid", 200, json, `{"at":"2030-01-15T12:00:00Z"}`, true, ""},
		{"another field", 200, json, `{"at":"2030-01-15T12:00:00Z","x":1}`, false, ""},
		{"another field, strictly", 200, json, `{"at":"2030-01-15T12:00:00Z","x":1}`, true, "additional"},
		{"not a date-time", 200, json, `{"at":"yesterday"}`, false, "pattern"},
		{"a required field missing", 200, json, `{}`, false, "at"},
		{"no ETag", 200, http.Header{"Content-Type": {"application/json"}}, `{"at":"2030-01-15T12:00:00Z"}`, false, "ETag"},
		{"not JSON", 200, http.Header{"Content-Type": {"text/plain"}, "Etag": {`"v1"`}}, `{}`, false, "Content-Type"},
		{"no content", 304, nil, ``, true, ""},
		{"a body without content", 304, nil, `x`, true, "a body"},
		{"undocumented", 404, json, `{}`, true, "does not document"},
	} {
		err := op.CheckAnswer(tt.status, tt.header, []byte(tt.body), tt.strict)
		if tt.fault == "" && err != nil || tt.fault != "" && (err == nil || !strings.Contains(err.Error(), tt.fault)) {
			t.Errorf("%s: %v, want an error about %q", tt.name, err, tt.fault)
		}
	}
}

func TestCheckRequest(t *testing.T) {
	_, op := Load(t, doc).Match("POST", "/things/x1")
	for _, tt := range []struct {
		target, body string
		ok           bool
	}{
		{"/things/x1?limit=10&state=on", `{"name":"abc"}`, true},
		{"/things/x1", `{"name":"abc"}`, true},
		{"/things/x1?limit=11", `{"name":"abc"}`, false},
		{"/things/x1?state=other", `{"name":"abc"}`, false},
		{"/things/x1?bogus=1", `{"name":"abc"}`, false},
		{"/things/x1?limit=1&limit=2", `{"name":"abc"}`, false},
		{"/things/x12345", `{"name":"abc"}`, false},
		{"/things/x1", `{"name":"abcd"}`, false},
		{"/things/x1", `{"name":"a","x":1}`, false},
		{"/things/x1", ``, false},
	} {
		if err := op.CheckRequest(tt.target, []byte(tt.body)); (err == nil) != tt.ok {
			t.Errorf("%s %s: %v, want ok %v", tt.target, tt.body, err, tt.ok)
		}
	}
}

func TestInvalidAndValid(t *testing.T) {
	d := Load(t, doc)
	_, op := d.Match("POST", "/things/x1")
	params := op.Params()
	limit, state := params[1].Schema, params[2].Schema
	if got := d.InvalidQuery(limit); !slices.Contains(got, "11") || !slices.Contains(got, "0") || !slices.Contains(got, "1.5") || slices.Contains(got, "") {
		t.Errorf("InvalidQuery(limit): %v, want 11, 0 and 1.5 among them, and not the empty value", got)
	}
	if got := d.Valid(limit); !slices.Equal(got, []string{"10", "1"}) {
		t.Errorf("Valid(limit): %v", got)
	}
	if got := d.Valid(state); !slices.Equal(got, []string{"on", "off"}) {
		t.Errorf("Valid(state): %v", got)
	}
	schema, _, _ := op.Body()
	name := schema["properties"].(map[string]any)["name"].(map[string]any)
	got := d.Invalid(name, true)
	if !slices.Contains(got, any("aaaa")) || !slices.Contains(got, nil) || slices.Contains(got, any("abc")) {
		t.Errorf("Invalid(name, required): %v, want aaaa and null among them, and no valid name", got)
	}
	enum := map[string]any{"type": "string", "enum": []any{"now", "renewal"}}
	if opt := d.Invalid(enum, false); !slices.Contains(opt, any("bogus")) || slices.Contains(opt, nil) || slices.Contains(opt, any("")) {
		t.Errorf("Invalid(enum, not required): %v, want bogus among them, and neither null nor the empty string", opt)
	}
	for _, v := range got {
		if d.Validate(name, v, false) == nil {
			t.Errorf("Invalid(name) gave %v, which is valid", v)
		}
	}
}
