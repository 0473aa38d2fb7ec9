package clientgen

import (
	"regexp"
	"strings"
	"text/template"

	"github.com/tollgate-dev/tollgate/catalog"
)

// jsLanguage writes one npm package per API, in a directory named after the API: an
// ES module with TypeScript declarations.
var jsLanguage = language{
	name: "js",
	dir:  func(m *model) string { return m.API.ID },
	files: []outFile{
		{fixed("index.js"), "index.js.tmpl", nil},
		{fixed("index.d.ts"), "index.d.ts.tmpl", nil},
		{fixed("package.json"), "package.json.tmpl", nil},
		{fixed("README.md"), "js/README.md.tmpl", nil},
	},
	funcs: jsFuncs,
}

// jsFuncs are the template functions of the JavaScript packages.
var jsFuncs = template.FuncMap{
	"jsString":      jsQuote,
	"json":          jsonString,
	"jsProp":        jsProp,
	"jsRule":        func(p *catalog.Param) string { return literal(ruleOf(p, false), false) },
	"jsFile":        jsFile,
	"tsParamType":   tsParamType,
	"tsResultType":  tsResultType,
	"jsExampleArgs": jsExampleArgs,
	"jsDoc":         func(s string) string { return strings.ReplaceAll(s, "*/", "*\\/") },
}

var jsIdent = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$]*$`)

// jsProp returns a property name as an object literal or an interface writes it:
// bare when it is an identifier, quoted otherwise.
func jsProp(name string) string {
	if jsIdent.MatchString(name) {
		return name
	}
	return jsonString(name)
}

func jsFile(f *catalog.FileField) string {
	if f == nil {
		return "null"
	}
	return literal(fileRule(f, false), false)
}

// tsParamType returns the TypeScript type of a parameter: enums are unions of their
// values, objects inline interfaces.
func tsParamType(p *catalog.Param) string {
	if p.Enum != nil {
		vs := make([]string, len(p.Enum))
		for i, v := range p.Enum {
			vs[i] = literal(v, false)
		}
		return strings.Join(vs, " | ")
	}
	switch p.Type {
	case catalog.Array:
		return "Array<" + tsParamType(p.Items) + ">"
	case catalog.Object:
		parts := make([]string, len(p.Fields))
		for i := range p.Fields {
			f := &p.Fields[i]
			opt := "?"
			if f.Required {
				opt = ""
			}
			parts[i] = jsProp(f.Name) + opt + ": " + tsParamType(f)
		}
		return "{ " + strings.Join(parts, "; ") + " }"
	}
	return tsScalar(p.Type)
}

// tsResultType returns the TypeScript type of a result field.
func tsResultType(f *catalog.Field) string {
	switch f.Type {
	case catalog.Array:
		return "Array<" + tsResultType(f.Items) + ">"
	case catalog.Object:
		parts := make([]string, len(f.Fields))
		for i := range f.Fields {
			parts[i] = jsProp(f.Fields[i].Name) + ": " + tsResultType(&f.Fields[i])
		}
		return "{ " + strings.Join(parts, "; ") + " }"
	}
	return tsScalar(f.Type)
}

// tsScalar returns the TypeScript type of a scalar type; unknown for free-form JSON.
func tsScalar(t catalog.Type) string {
	switch t {
	case catalog.String:
		return "string"
	case catalog.Integer, catalog.Number:
		return "number"
	case catalog.Boolean:
		return "boolean"
	}
	return "unknown"
}

// jsExampleArgs returns the object literal of the example call.
func jsExampleArgs(m *model) string {
	if len(m.Example) == 0 {
		return "{}"
	}
	parts := make([]string, len(m.Example))
	for i, a := range m.Example {
		parts[i] = jsProp(a.P.Name) + ": " + literal(a.Value, false)
	}
	return "{ " + strings.Join(parts, ", ") + " }"
}
