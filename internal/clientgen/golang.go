package clientgen

import (
	"fmt"
	"go/format"
	"slices"
	"strconv"
	"strings"
	"text/template"

	"github.com/tollgate-dev/tollgate/catalog"
)

// goLanguage writes one Go package per API, in a directory named after the package,
// built on the client package.
var goLanguage = language{
	name: "go",
	dir:  func(m *model) string { return m.GoPackage },
	files: []outFile{
		{fixed("doc.go"), "doc.go.tmpl", formatGo},
		{fixed("client.go"), "client.go.tmpl", formatGo},
		{fixed("example_test.go"), "example_test.go.tmpl", formatGo},
		{fixed("README.md"), "go/README.md.tmpl", nil},
	},
	funcs: goFuncs,
}

// goFuncs are the template functions of the Go packages.
var goFuncs = template.FuncMap{
	"goParamType":  goParamType,
	"goResultType": goResultType,
	"goDefinition": goDefinition,
	"goExample":    goExample,
	"goString":     strconv.Quote,
	"goTag":        goTag,
}

// goTypes are the Go types of the scalar types.
var goTypes = map[catalog.Type]string{
	catalog.String: "string", catalog.Integer: "int64", catalog.Number: "float64", catalog.Boolean: "bool",
}

// goParamType returns the Go type of a parameter: optional scalars are pointers (nil
// means absent), arrays are slices and objects are structs of their fields.
func goParamType(p *catalog.Param, optional bool) string {
	var t string
	switch p.Type {
	case catalog.Array:
		return "[]" + goParamType(p.Items, false)
	case catalog.Object:
		var b strings.Builder
		b.WriteString("struct {\n")
		names := newNameSet()
		for i := range p.Fields {
			f := &p.Fields[i]
			tag := f.Name
			if !f.Required {
				tag += ",omitempty"
			}
			fmt.Fprintf(&b, "%s %s %s\n", names.add(goName(f.Name)), goParamType(f, !f.Required), goTag(tag))
		}
		b.WriteString("}")
		t = b.String()
		if optional {
			return "*" + t
		}
		return t
	default:
		t = goTypes[p.Type]
	}
	if optional {
		return "*" + t
	}
	return t
}

// goResultType returns the Go type of a result field.
func goResultType(f field) string {
	switch f.Type {
	case catalog.JSON:
		return "any"
	case catalog.Array:
		if f.Items.Type == catalog.Object {
			return "[]" + goStruct(f.Sub)
		}
		return "[]" + goResultType(field{Field: f.Items})
	case catalog.Object:
		return goStruct(f.Sub)
	}
	return goTypes[f.Type]
}

func goStruct(fs []field) string {
	var b strings.Builder
	b.WriteString("struct {\n")
	for _, f := range fs {
		fmt.Fprintf(&b, "%s %s %s\n", f.GoName, goResultType(f), goTag(f.Name))
	}
	b.WriteString("}")
	return b.String()
}

// goTag returns the struct tag that names a JSON member.
func goTag(name string) string {
	return "`json:" + strconv.Quote(name) + "`"
}

// validTag reports whether encoding/json accepts name as a tag name.
func validTag(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range name {
		if strings.ContainsRune(`,"\`+"`", c) || c < ' ' {
			return false
		}
	}
	return true
}

// resultTaggable reports whether every result field can be named in a struct tag;
// when one cannot, the package decodes the result into a map.
func resultTaggable(fs []field) bool {
	for _, f := range fs {
		if !validTag(f.Name) || !resultTaggable(f.Sub) {
			return false
		}
	}
	return true
}

// goExample returns the Go expression of an example value for a Params field.
func goExample(a exampleArg) string {
	v := goValue(a.Value)
	if a.P.Type == catalog.Object || a.P.Type == catalog.Array {
		v = goTypedValue(a.P.Param, a.Value)
	}
	if a.P.Required || a.P.Type == catalog.Array {
		return v
	}
	switch a.P.Type {
	case catalog.Integer:
		return "client.Ptr[int64](" + v + ")"
	case catalog.Number:
		return "client.Ptr[float64](" + v + ")"
	case catalog.Object:
		return "&" + v
	}
	return "client.Ptr(" + v + ")"
}

// goTypedValue returns a composite literal of p's Go type holding v.
func goTypedValue(p *catalog.Param, v any) string {
	switch p.Type {
	case catalog.Array:
		items, _ := v.([]any)
		parts := make([]string, len(items))
		for i, it := range items {
			parts[i] = goTypedValue(p.Items, it)
		}
		return goParamType(p, false) + "{" + strings.Join(parts, ", ") + "}"
	case catalog.Object:
		obj, _ := v.(map[string]any)
		var parts []string
		names := newNameSet()
		for i := range p.Fields {
			f := &p.Fields[i]
			name := names.add(goName(f.Name))
			if fv, ok := obj[f.Name]; ok {
				arg := exampleArg{P: param{Param: f}, Value: fv}
				parts = append(parts, name+": "+goExample(arg))
			}
		}
		return goParamType(p, false) + "{" + strings.Join(parts, ", ") + "}"
	}
	return goValue(v)
}

// goValue returns the Go literal of a JSON-like value of a definition.
func goValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "nil"
	case string:
		return strconv.Quote(v)
	case bool:
		return strconv.FormatBool(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return floatLiteral(v)
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = goValue(e)
		}
		return "[]any{" + strings.Join(parts, ", ") + "}"
	case map[string]any:
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range v {
				if !yield(k) {
					return
				}
			}
		})
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = strconv.Quote(k) + ": " + goValue(v[k])
		}
		return "map[string]any{" + strings.Join(parts, ", ") + "}"
	}
	return fmt.Sprintf("%#v", v)
}

// goDefinition returns the Go literal of an API's definition, as a catalog.API.
func goDefinition(api *catalog.API) string {
	var b strings.Builder
	b.WriteString("catalog.API{\n")
	fmt.Fprintf(&b, "ID: %q, Title: %q, Category: %q,\n", api.ID, api.Title, api.Category)
	fmt.Fprintf(&b, "Description: %q,\n", api.Description)
	fmt.Fprintf(&b, "Method: %q, Cost: %d,\n", api.Method, api.Cost)
	if f := api.File; f != nil {
		types := make([]string, len(f.Types))
		for i, t := range f.Types {
			types[i] = strconv.Quote(t)
		}
		fmt.Fprintf(&b, "File: &catalog.FileField{Name: %q, Types: []string{%s}, MaxBytes: %d, Description: %q},\n",
			f.Name, strings.Join(types, ", "), f.MaxBytes, f.Description)
	}
	if len(api.Params) > 0 {
		b.WriteString("Params: []catalog.Param{\n")
		for i := range api.Params {
			b.WriteString(strings.TrimPrefix(goParamLiteral(&api.Params[i]), "catalog.Param") + ",\n")
		}
		b.WriteString("},\n")
	}
	if len(api.Result) > 0 {
		b.WriteString("Result: []catalog.Field{\n")
		for i := range api.Result {
			b.WriteString(strings.TrimPrefix(goFieldLiteral(&api.Result[i]), "catalog.Field") + ",\n")
		}
		b.WriteString("},\n")
	}
	b.WriteString("}")
	return b.String()
}

var goTypeConsts = map[catalog.Type]string{
	catalog.String: "catalog.String", catalog.Integer: "catalog.Integer", catalog.Number: "catalog.Number",
	catalog.Boolean: "catalog.Boolean", catalog.Array: "catalog.Array", catalog.Object: "catalog.Object",
	catalog.JSON: "catalog.JSON",
}

var goFormatConsts = map[catalog.Format]string{
	catalog.FormatEmail: "catalog.FormatEmail", catalog.FormatURL: "catalog.FormatURL", catalog.FormatIP: "catalog.FormatIP",
	catalog.FormatDate: "catalog.FormatDate", catalog.FormatHexColor: "catalog.FormatHexColor",
}

func goParamLiteral(p *catalog.Param) string {
	var parts []string
	if p.Name != "" {
		parts = append(parts, "Name: "+strconv.Quote(p.Name))
	}
	parts = append(parts, "Type: "+goTypeConsts[p.Type])
	if p.Items != nil {
		parts = append(parts, "Items: &"+goParamLiteral(p.Items))
	}
	if p.Fields != nil {
		fs := make([]string, len(p.Fields))
		for i := range p.Fields {
			fs[i] = strings.TrimPrefix(goParamLiteral(&p.Fields[i]), "catalog.Param")
		}
		parts = append(parts, "Fields: []catalog.Param{"+strings.Join(fs, ", ")+"}")
	}
	if p.Required {
		parts = append(parts, "Required: true")
	}
	if p.Default != nil {
		parts = append(parts, "Default: "+goValue(p.Default))
	}
	if p.Min != nil {
		parts = append(parts, "Min: catalog.Num("+goValue(*p.Min)+")")
	}
	if p.Max != nil {
		parts = append(parts, "Max: catalog.Num("+goValue(*p.Max)+")")
	}
	if p.MinLength != nil {
		parts = append(parts, "MinLength: catalog.Len("+strconv.Itoa(*p.MinLength)+")")
	}
	if p.MaxLength != nil {
		parts = append(parts, "MaxLength: catalog.Len("+strconv.Itoa(*p.MaxLength)+")")
	}
	if p.Enum != nil {
		parts = append(parts, "Enum: "+goValue(p.Enum))
	}
	if p.Format != "" {
		parts = append(parts, "Format: "+goFormatConsts[p.Format])
	}
	if p.Description != "" {
		parts = append(parts, "Description: "+strconv.Quote(p.Description))
	}
	if p.Example != nil {
		parts = append(parts, "Example: "+goValue(p.Example))
	}
	return "catalog.Param{" + strings.Join(parts, ", ") + "}"
}

func goFieldLiteral(f *catalog.Field) string {
	parts := []string{}
	if f.Name != "" {
		parts = append(parts, "Name: "+strconv.Quote(f.Name))
	}
	parts = append(parts, "Type: "+goTypeConsts[f.Type])
	if f.Items != nil {
		parts = append(parts, "Items: &"+goFieldLiteral(f.Items))
	}
	if f.Fields != nil {
		fs := make([]string, len(f.Fields))
		for i := range f.Fields {
			fs[i] = strings.TrimPrefix(goFieldLiteral(&f.Fields[i]), "catalog.Field")
		}
		parts = append(parts, "Fields: []catalog.Field{"+strings.Join(fs, ", ")+"}")
	}
	if f.Description != "" {
		parts = append(parts, "Description: "+strconv.Quote(f.Description))
	}
	return "catalog.Field{" + strings.Join(parts, ", ") + "}"
}

// formatGo formats generated Go source; an error is a bug of the generator, reported
// with the source for debugging.
func formatGo(name string, src []byte) ([]byte, error) {
	out, err := format.Source(src)
	if err != nil {
		return nil, fmt.Errorf("formatting the generated %s: %w\n%s", name, err, src)
	}
	return out, nil
}
