package clientgen

import (
	"regexp"
	"strings"
	"text/template"

	"github.com/tollgate-dev/tollgate/catalog"
)

// pythonLanguage writes one Python distribution per API, in a directory named after
// the API, with its module in a folder of the module's name.
var pythonLanguage = language{
	name: "python",
	dir:  func(m *model) string { return m.API.ID },
	files: []outFile{
		{fixed("pyproject.toml"), "pyproject.toml.tmpl", nil},
		{fixed("README.md"), "python/README.md.tmpl", nil},
		{func(m *model) string { return m.PyModule + "/__init__.py" }, "init.py.tmpl", nil},
		{func(m *model) string { return m.PyModule + "/client.py" }, "client.py.tmpl", nil},
		{func(m *model) string { return m.PyModule + "/py.typed" }, "", nil},
	},
	funcs: pyFuncs,
}

// pyFuncs are the template functions of the Python packages.
var pyFuncs = template.FuncMap{
	"pyString":      jsonString,
	"pyRule":        func(p *catalog.Param) string { return literal(ruleOf(p, true), true) },
	"pyFile":        pyFile,
	"pyParamType":   pyParamType,
	"pyResultType":  pyResultType,
	"pyExampleArgs": pyExampleArgs,
	"pyDoc":         pyDoc,
	"pyDocstring":   pyDocstring,
	"pyDict":        newPyDict,
}

var pyIdent = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// pyKeywords are Python's reserved words, which cannot name a class attribute.
var pyKeywords = map[string]bool{
	"False": true, "None": true, "True": true, "and": true, "as": true, "assert": true, "async": true,
	"await": true, "break": true, "class": true, "continue": true, "def": true, "del": true, "elif": true,
	"else": true, "except": true, "finally": true, "for": true, "from": true, "global": true, "if": true,
	"import": true, "in": true, "is": true, "lambda": true, "nonlocal": true, "not": true, "or": true,
	"pass": true, "raise": true, "return": true, "try": true, "while": true, "with": true, "yield": true,
}

// pyDict is a TypedDict to generate: class syntax when every key is an identifier,
// the functional syntax otherwise.
type pyDict struct {
	Name, Doc          string
	Identifiers        bool
	Required, Optional []param
}

func newPyDict(name, doc string, params []param) pyDict {
	d := pyDict{Name: name, Doc: doc, Identifiers: true}
	for _, p := range params {
		if !pyIdent.MatchString(p.Name) || pyKeywords[p.Name] {
			d.Identifiers = false
		}
		if p.Required {
			d.Required = append(d.Required, p)
		} else {
			d.Optional = append(d.Optional, p)
		}
	}
	return d
}

func pyFile(f *catalog.FileField) string {
	if f == nil {
		return "None"
	}
	return literal(fileRule(f, true), true)
}

// pyParamType returns the type hint of a parameter: enums are Literal types.
func pyParamType(p *catalog.Param) string {
	if p.Enum != nil {
		vs := make([]string, len(p.Enum))
		for i, v := range p.Enum {
			vs[i] = literal(v, true)
		}
		return "Literal[" + strings.Join(vs, ", ") + "]"
	}
	switch p.Type {
	case catalog.Array:
		return "List[" + pyParamType(p.Items) + "]"
	case catalog.Object:
		return "Dict[str, Any]"
	}
	return pyScalar(p.Type)
}

// pyResultType returns the type hint of a result field.
func pyResultType(f *catalog.Field) string {
	switch f.Type {
	case catalog.Array:
		return "List[" + pyResultType(f.Items) + "]"
	case catalog.Object:
		return "Dict[str, Any]"
	}
	return pyScalar(f.Type)
}

// pyScalar returns the type hint of a scalar type; Any for free-form JSON.
func pyScalar(t catalog.Type) string {
	switch t {
	case catalog.String:
		return "str"
	case catalog.Integer:
		return "int"
	case catalog.Number:
		return "float"
	case catalog.Boolean:
		return "bool"
	}
	return "Any"
}

// pyExampleArgs returns the dict literal of the example call.
func pyExampleArgs(m *model) string {
	parts := make([]string, len(m.Example))
	for i, a := range m.Example {
		parts[i] = jsonString(a.P.Name) + ": " + literal(a.Value, true)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// pyDoc makes text safe inside a triple-quoted docstring.
func pyDoc(text string) string {
	return strings.ReplaceAll(strings.ReplaceAll(text, `\`, `\\`), `"""`, `\"\"\"`)
}

// pyDocstring returns text as a docstring at indent, wrapped.
func pyDocstring(text, indent string) string {
	return wrap(`"""`+pyDoc(text)+`"""`, indent)
}
