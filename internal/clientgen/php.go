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

// phpLanguage writes one Composer package per API, in a directory named after the API:
// PHP 8.1 or later, PSR-4, HTTP through the curl extension.
var phpLanguage = language{
	name: "php",
	dir:  func(m *model) string { return m.API.ID },
	files: []outFile{
		{fixed("composer.json"), "composer.json.tmpl", nil},
		{fixed("README.md"), "php/README.md.tmpl", nil},
		{func(m *model) string { return "src/" + m.Class + ".php" }, "Client.php.tmpl", nil},
		{fixed("src/Response.php"), "Response.php.tmpl", nil},
		{fixed("src/BatchResponse.php"), "BatchResponse.php.tmpl", nil},
		{fixed("src/Credits.php"), "Credits.php.tmpl", nil},
		{fixed("src/RateLimit.php"), "RateLimit.php.tmpl", nil},
		{func(m *model) string { return "src/" + m.Brand + "Exception.php" }, "BaseException.php.tmpl", nil},
		{fixed("src/ValidationException.php"), "ValidationException.php.tmpl", nil},
		{fixed("src/ApiException.php"), "ApiException.php.tmpl", nil},
		{fixed("src/NetworkException.php"), "NetworkException.php.tmpl", nil},
		{fixed("src/Validator.php"), "Validator.php.tmpl", nil},
	},
	funcs: template.FuncMap{
		"phpString":   phpQuote,
		"phpExample":  func(m *model) string { return phpValue(exampleObject(m)) },
		"phpType":     phpType,
		"phpDoc":      func(s string) string { return strings.ReplaceAll(s, "*/", "*\\/") },
		"rulesJSON":   rulesJSON,
		"jsonString":  jsonString,
		"phpShapeKey": phpShapeKey,
		"phpFile": func(f *catalog.FileField) string {
			types := make([]any, len(f.Types))
			for i, t := range f.Types {
				types[i] = t
			}
			return phpValue(map[string]any{"name": f.Name, "types": types, "max_bytes": f.MaxBytes})
		},
	},
	prepare: func(m *model, o options) {
		m.Namespace = o.phpNamespace + `\` + m.Prefix
		m.Package = strings.ToLower(strings.ReplaceAll(o.phpNamespace, `\`, "-")) + "/" + m.API.ID
	},
}

// phpNamespaceName matches what -php-namespace takes.
var phpNamespaceName = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*(\\[A-Z][A-Za-z0-9]*)*$`)

// exampleObject returns the arguments of the example call as one object.
func exampleObject(m *model) map[string]any {
	obj := make(map[string]any, len(m.Example))
	for _, a := range m.Example {
		obj[a.P.Name] = a.Value
	}
	return obj
}

// phpQuote returns s as a single-quoted PHP string literal.
func phpQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// phpValue returns the PHP literal of a JSON-like value: objects as arrays with string
// keys.
func phpValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return phpQuote(v)
	case bool:
		return strconv.FormatBool(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return floatLiteral(v)
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = phpValue(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case map[string]any:
		parts := []string{}
		for _, k := range slices.Sorted(maps.Keys(v)) {
			parts = append(parts, phpQuote(k)+" => "+phpValue(v[k]))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return fmt.Sprint(v)
}

// phpType returns the type of a parameter in a PHPDoc array shape.
func phpType(p *catalog.Param) string {
	if p.Enum != nil {
		vs := make([]string, len(p.Enum))
		for i, e := range p.Enum {
			vs[i] = phpValue(e)
		}
		return strings.Join(vs, "|")
	}
	switch p.Type {
	case catalog.String:
		return "string"
	case catalog.Integer:
		return "int"
	case catalog.Number:
		return "int|float"
	case catalog.Boolean:
		return "bool"
	case catalog.Array:
		return "list<" + phpType(p.Items) + ">"
	}
	parts := make([]string, len(p.Fields))
	for i := range p.Fields {
		f := &p.Fields[i]
		opt := "?"
		if f.Required {
			opt = ""
		}
		parts[i] = phpShapeKey(f.Name) + opt + ": " + phpType(f)
	}
	return "array{" + strings.Join(parts, ", ") + "}"
}

// phpShapeKey writes a key of an array shape: bare when it is an identifier.
func phpShapeKey(name string) string {
	if pyIdent.MatchString(name) {
		return name
	}
	return phpQuote(name)
}
