package clientgen

import (
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"

	"github.com/tollgate-dev/tollgate/catalog"
)

// dartLanguage writes one pub package per API, in a directory named after the API: Dart
// 3 with null safety, HTTP through dart:io's HttpClient, no dependencies.
var dartLanguage = language{
	name: "dart",
	dir:  func(m *model) string { return m.API.ID },
	files: []outFile{
		{fixed("pubspec.yaml"), "pubspec.yaml.tmpl", nil},
		{fixed("README.md"), "dart/README.md.tmpl", nil},
		{fixed("CHANGELOG.md"), "CHANGELOG.md.tmpl", nil},
		{func(m *model) string { return "lib/" + m.Package + ".dart" }, "library.dart.tmpl", nil},
		{fixed("lib/src/client.dart"), "client.dart.tmpl", nil},
		{fixed("lib/src/runtime.dart"), "runtime.dart.tmpl", nil},
		{fixed("example/example.dart"), "example.dart.tmpl", nil},
	},
	funcs: template.FuncMap{
		"dartString":  dartQuote,
		"dartType":    dartType,
		"dartExample": dartExample,
		"dartDoc":     func(s string) string { return strings.ReplaceAll(s, "*/", "*\\/") },
		"rulesJSON":   rulesJSON,
		"jsonString":  jsonString,
	},
	prepare: func(m *model, o options) {
		m.Package = o.dartPrefix + "_" + strings.ReplaceAll(m.API.ID, "-", "_")
		m.Namespace = m.Package
		memberNames(m, camel, mapWith(dartReserved, "toJson"))
	},
}

// dartReserved are Dart's reserved words and built-in identifiers, which cannot name a
// field and a named parameter everywhere.
var dartReserved = mapWith(nil, "abstract", "as", "assert", "async", "await", "base", "break", "case", "catch",
	"class", "const", "continue", "covariant", "default", "deferred", "do", "dynamic", "else", "enum", "export",
	"extends", "extension", "external", "factory", "false", "final", "finally", "for", "Function", "get", "hide",
	"if", "implements", "import", "in", "interface", "is", "late", "library", "mixin", "new", "null", "of", "on",
	"operator", "part", "required", "rethrow", "return", "sealed", "set", "show", "static", "super", "switch",
	"sync", "this", "throw", "true", "try", "type", "typedef", "var", "void", "when", "while", "with", "yield")

// dartPrefixName matches what -dart-prefix takes.
var dartPrefixName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// dartQuote returns s as a Dart string literal in single quotes, with $ escaped.
func dartQuote(s string) string {
	q := jsQuote(s) // the same escapes as JavaScript's, plus $ for interpolation
	return strings.ReplaceAll(q, "$", `\$`)
}

// dartType returns the Dart type of a parameter (nullable unless required).
func dartType(p *catalog.Param, required bool) string {
	var t string
	switch p.Type {
	case catalog.String:
		t = "String"
	case catalog.Integer:
		t = "int"
	case catalog.Number:
		t = "num"
	case catalog.Boolean:
		t = "bool"
	case catalog.Array:
		t = "List<" + dartType(p.Items, true) + ">"
	default:
		t = "Map<String, Object?>"
	}
	if !required {
		t += "?"
	}
	return t
}

// dartExample returns the named arguments of the example call: text: 'hello'.
func dartExample(m *model) string {
	parts := make([]string, len(m.Example))
	for i, a := range m.Example {
		parts[i] = a.P.Member + ": " + dartValue(a.P.Param, a.Value)
	}
	return strings.Join(parts, ", ")
}

// dartValue returns the Dart literal of an example value of p's type.
func dartValue(p *catalog.Param, v any) string {
	switch v := v.(type) {
	case string:
		return dartQuote(v)
	case bool:
		return strconv.FormatBool(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return floatLiteral(v)
	case []any:
		var items *catalog.Param
		if p != nil {
			items = p.Items
		}
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = dartValue(items, e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case map[string]any:
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(v)) {
			var f *catalog.Param
			if p != nil {
				f = paramField(p, k)
			}
			parts = append(parts, dartQuote(k)+": "+dartValue(f, v[k]))
		}
		return "<String, Object?>{" + strings.Join(parts, ", ") + "}"
	}
	return "null"
}
