package clientgen

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"

	"github.com/tollgate-dev/tollgate/catalog"
)

// dotnetLanguage writes one NuGet package per API, in a directory named after the API:
// C# for netstandard2.0 (within what Mono's mcs compiles too), HttpClient with async
// methods that take a CancellationToken, JSON through Newtonsoft.Json.
var dotnetLanguage = language{
	name: "dotnet",
	dir:  func(m *model) string { return m.API.ID },
	files: []outFile{
		{func(m *model) string { return m.Namespace + ".csproj" }, "csproj.tmpl", nil},
		{fixed("README.md"), "dotnet/README.md.tmpl", nil},
		{func(m *model) string { return m.Class + ".cs" }, "Client.cs.tmpl", nil},
		{fixed("Runtime.cs"), "Runtime.cs.tmpl", nil},
	},
	funcs: template.FuncMap{
		"csString":  csQuote,
		"csDoc":     xmlText,
		"csType":    csType,
		"csExample": csExample,
		"rulesJSON": rulesJSON,
		"xml":       xmlText,
	},
	prepare: func(m *model, o options) {
		m.Namespace = o.dotnetNamespace + "." + m.Prefix
		m.Package = m.Namespace
		// ToDictionary is the method of the parameters; a property cannot have the
		// name of its class.
		memberNames(m, pascal, mapWith(nil, "ToDictionary", m.Prefix+"Params"))
	},
}

// dotnetNamespaceName matches what -dotnet-namespace takes.
var dotnetNamespaceName = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*(\.[A-Z][A-Za-z0-9]*)*$`)

// csQuote returns s as a C# verbatim string literal.
func csQuote(s string) string {
	return `@"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// csType returns the C# type of a parameter's property: optional scalars are nullable,
// arrays lists and objects dictionaries.
func csType(p *catalog.Param) string {
	switch p.Type {
	case catalog.String:
		return "string"
	case catalog.Integer:
		return "long?"
	case catalog.Number:
		return "double?"
	case catalog.Boolean:
		return "bool?"
	case catalog.Array:
		return "IList<" + strings.TrimSuffix(csType(p.Items), "?") + ">"
	}
	return "IDictionary<string, object>"
}

// csExample returns the object initializer of the example call: { Text = "hello" }.
func csExample(m *model) string {
	parts := make([]string, len(m.Example))
	for i, a := range m.Example {
		parts[i] = a.P.Member + " = " + csValue(a.P.Param, a.Value)
	}
	if len(parts) == 0 {
		return "()"
	}
	return " { " + strings.Join(parts, ", ") + " }"
}

// csValue returns the C# expression of an example value of p's type.
func csValue(p *catalog.Param, v any) string {
	switch v := v.(type) {
	case string:
		return csQuote(v)
	case bool:
		return strconv.FormatBool(v)
	case int64:
		if p != nil && p.Type == catalog.Number {
			return strconv.FormatInt(v, 10) + ".0"
		}
		return strconv.FormatInt(v, 10) + "L"
	case float64:
		return floatLiteral(v)
	case []any:
		var items *catalog.Param
		elem := "object"
		if p != nil && p.Items != nil {
			items, elem = p.Items, strings.TrimSuffix(csType(p.Items), "?")
		}
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = csValue(items, e)
		}
		return "new List<" + elem + "> { " + strings.Join(parts, ", ") + " }"
	case map[string]any:
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(v)) {
			var f *catalog.Param
			if p != nil {
				f = paramField(p, k)
			}
			parts = append(parts, fmt.Sprintf("{ %s, %s }", csQuote(k), csValue(f, v[k])))
		}
		return "new Dictionary<string, object> { " + strings.Join(parts, ", ") + " }"
	}
	return "null"
}
