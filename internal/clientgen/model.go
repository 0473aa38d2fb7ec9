package clientgen

import (
	"encoding/json"
	"fmt"
	"go/token"
	"slices"
	"strings"
	"unicode"

	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/internal/paramdoc"
)

// model is what the templates of one API's packages read.
type model struct {
	API     *catalog.API
	Version string // the package's semver
	BaseURL string // the service the package calls by default
	// Params are the API's parameters, plus "url" for file APIs (the URL form).
	Params []param
	// Result describes the fields of the data member.
	Result []field
	// Example is a call that obeys the rules, for the README and the examples.
	Example []exampleArg

	GoPackage, GoImport string // package name and import path
	JSPackage           string // npm name
	PyDist, PyModule    string // distribution and import name
	// Package is the package's name in its ecosystem's registry, and Namespace the
	// namespace its code is in, for the languages that set them in their prepare
	// function: the NuGet id and C# namespace, the Maven coordinates and Java package,
	// the Composer name and PHP namespace, the pub name and Dart library.
	Package, Namespace string
	// Class is the name of the client's class: HashClient.
	Class string
	// Prefix starts the names of the other types: HashParams.
	Prefix string
	// Brand is the brand's command in Pascal case (Tollgate), which names the base
	// class of the package's errors: TollgateError, TollgateException. Command is the
	// command itself (tollgate), and KeyVar the environment variable the examples read
	// the key from (TOLLGATE_API_KEY).
	Brand, Command, KeyVar string

	// ResultStruct says whether the Go result is a struct (every field name fits a
	// struct tag) rather than a map.
	ResultStruct bool
	// ExampleUsesClient says whether the Go example calls client.Ptr.
	ExampleUsesClient bool
	// PyNeedsLiteral says whether a Python type hint is a Literal (an enum).
	PyNeedsLiteral bool
	// FileFields are the parameters of a file call: all but url.
	FileFields []param
}

// param is one parameter with its names in each language.
type param struct {
	*catalog.Param
	GoName string
	// Member is the parameter's name in the typed parameters of the languages that
	// set it in their prepare function: a property, a setter or a named argument.
	Member string
	Rules  string // the rules in words, "" if none
	URL    bool   // the "url" parameter of a file API
}

// field is one result field with its Go name.
type field struct {
	*catalog.Field
	GoName string
	Sub    []field // the members of an object field, or of the items of an array
}

// exampleArg is one argument of the example call.
type exampleArg struct {
	P     param
	Value any
}

// options are the generator's settings that shape the names.
type options struct {
	goImport        string // import path prefix of the Go packages
	npmScope        string // npm scope, with @
	pyPrefix        string // prefix of Python names
	javaPackage     string // Java package and Maven group of the Java packages
	dotnetNamespace string // namespace that holds the .NET packages' namespaces
	phpNamespace    string // namespace that holds the PHP packages' namespaces
	dartPrefix      string // prefix of the Dart packages' names
	baseURL         string
	command         string // the brand's command (brand.Brand.Command)
	envPrefix       string // the brand's prefix of environment variables
}

// newModel builds the model of api. version is the package's version.
func newModel(api *catalog.API, o options, version string) (*model, error) {
	m := &model{API: api, Version: version, BaseURL: o.baseURL}
	m.GoPackage = goPackageName(api.ID)
	m.GoImport = strings.TrimSuffix(o.goImport, "/") + "/" + m.GoPackage
	m.JSPackage = o.npmScope + "/" + api.ID
	m.Prefix = pascal(api.ID)
	m.Class = m.Prefix + "Client"
	m.PyDist = o.pyPrefix + "-" + api.ID
	m.PyModule = strings.ReplaceAll(m.PyDist, "-", "_")
	m.Command, m.Brand, m.KeyVar = o.command, pascal(o.command), o.envPrefix+"_API_KEY"
	params := slices.Clone(api.Params)
	if api.File != nil {
		u, err := urlParam(api)
		if err != nil {
			return nil, err
		}
		params = append(params, u)
	}
	names := newNameSet("Values") // Params has a method of that name
	for i := range params {
		p := &params[i]
		m.Params = append(m.Params, param{Param: p, GoName: names.add(goName(p.Name)), Rules: paramdoc.Rules(p), URL: api.File != nil && p.Name == catalog.URLParam})
	}
	m.Result = resultFields(api.Result)
	m.ResultStruct = resultTaggable(m.Result)
	m.Example = example(api, m.Params)
	for _, a := range m.Example {
		if strings.Contains(goExample(a), "client.Ptr") {
			m.ExampleUsesClient = true
		}
	}
	for _, p := range m.Params {
		if !p.URL {
			m.FileFields = append(m.FileFields, p)
		}
		if usesEnum(p.Param) {
			m.PyNeedsLiteral = true
		}
	}
	return m, nil
}

// usesEnum reports whether the Python type hint of p is or holds a Literal: p or its
// items have an enum (objects are typed as dicts).
func usesEnum(p *catalog.Param) bool {
	return p.Enum != nil || p.Items != nil && usesEnum(p.Items)
}

// urlParam returns the "url" parameter that a compiled file API accepts, read from its
// input schema so that its rules are the catalog's.
func urlParam(api *catalog.API) (catalog.Param, error) {
	var schema struct {
		Properties map[string]struct {
			MaxLength   *int   `json:"maxLength"`
			Description string `json:"description"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(api.InputSchema(), &schema); err != nil {
		return catalog.Param{}, fmt.Errorf("api %s: reading its input schema: %w", api.ID, err)
	}
	u, ok := schema.Properties[catalog.URLParam]
	if !ok {
		return catalog.Param{}, fmt.Errorf("api %s: its input schema has no %q property", api.ID, catalog.URLParam)
	}
	return catalog.Param{Name: catalog.URLParam, Type: catalog.String, Format: catalog.FormatURL,
		MaxLength: u.MaxLength, Description: u.Description}, nil
}

func resultFields(fs []catalog.Field) []field {
	names := newNameSet()
	out := make([]field, len(fs))
	for i := range fs {
		f := &fs[i]
		out[i] = field{Field: f, GoName: names.add(goName(f.Name))}
		switch {
		case f.Type == catalog.Object:
			out[i].Sub = resultFields(f.Fields)
		case f.Type == catalog.Array && f.Items.Type == catalog.Object:
			out[i].Sub = resultFields(f.Items.Fields)
		}
	}
	return out
}

// example returns the arguments of an example call: every required parameter and
// every parameter with an example, with a value that obeys its rules.
func example(api *catalog.API, params []param) []exampleArg {
	var args []exampleArg
	for _, p := range params {
		if p.URL || (!p.Required && p.Example == nil) {
			continue
		}
		args = append(args, exampleArg{P: p, Value: exampleValue(p.Param)})
	}
	return args
}

// exampleValue returns the example of p, or a value built to obey its rules.
func exampleValue(p *catalog.Param) any {
	switch {
	case p.Example != nil:
		return p.Example
	case p.Default != nil:
		return p.Default
	case len(p.Enum) > 0:
		return p.Enum[0]
	}
	switch p.Type {
	case catalog.String:
		s := map[catalog.Format]string{
			catalog.FormatDate: "2024-02-29", catalog.FormatEmail: "name@example.com",
			catalog.FormatURL: "https://example.com/", catalog.FormatIP: "192.0.2.1",
			catalog.FormatHexColor: "#1a2b3c",
		}[p.Format]
		if s == "" {
			s = "hello"
		}
		if p.MinLength != nil && len(s) < *p.MinLength {
			s += strings.Repeat("x", *p.MinLength-len(s))
		}
		if p.MaxLength != nil && len(s) > *p.MaxLength {
			s = s[:*p.MaxLength]
		}
		return s
	case catalog.Integer, catalog.Number:
		v := 1.0
		if p.Min != nil && v < *p.Min {
			v = *p.Min
		}
		if p.Max != nil && v > *p.Max {
			v = *p.Max
		}
		if p.Type == catalog.Integer {
			return int64(v)
		}
		return v
	case catalog.Boolean:
		return true
	case catalog.Array:
		n := 1
		if p.MinLength != nil {
			n = max(n, *p.MinLength)
		}
		items := make([]any, n)
		for i := range items {
			items[i] = exampleValue(p.Items)
		}
		return items
	case catalog.Object:
		obj := map[string]any{}
		for i := range p.Fields {
			if f := &p.Fields[i]; f.Required || f.Example != nil {
				obj[f.Name] = exampleValue(f)
			}
		}
		return obj
	}
	return nil
}

// nameSet hands out unique identifiers: a name already given gets a number.
type nameSet map[string]bool

func newNameSet(reserved ...string) nameSet {
	s := nameSet{}
	for _, r := range reserved {
		s[r] = true
	}
	return s
}

func (s nameSet) add(name string) string {
	n := name
	for i := 2; s[n]; i++ {
		n = fmt.Sprintf("%s%d", name, i)
	}
	s[n] = true
	return n
}

// words splits a name into its words: at every character that is not a letter or a
// digit, and where a lowercase letter is followed by an uppercase one.
func words(name string) []string {
	var out []string
	var cur []rune
	prevLower := false
	for _, r := range name {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r) || r > unicode.MaxASCII:
			if len(cur) > 0 {
				out = append(out, string(cur))
			}
			cur, prevLower = nil, false
			continue
		case unicode.IsUpper(r) && prevLower:
			out = append(out, string(cur))
			cur = nil
		}
		cur = append(cur, r)
		prevLower = unicode.IsLower(r) || unicode.IsDigit(r)
	}
	if len(cur) > 0 {
		out = append(out, string(cur))
	}
	return out
}

// pascal joins the words of name with capitals: "uuid-generator" is UuidGenerator.
func pascal(name string) string {
	var b strings.Builder
	for _, w := range words(name) {
		b.WriteString(strings.ToUpper(w[:1]) + strings.ToLower(w[1:]))
	}
	s := b.String()
	if s == "" || unicode.IsDigit(rune(s[0])) {
		s = "X" + s
	}
	return s
}

// initialisms are the words Go names write in capitals (as golint's list has them).
var initialisms = map[string]bool{
	"ACL": true, "API": true, "ASCII": true, "CPU": true, "CSS": true, "DNS": true, "EOF": true,
	"GUID": true, "HTML": true, "HTTP": true, "HTTPS": true, "ID": true, "IP": true, "JSON": true,
	"QPS": true, "RAM": true, "RPC": true, "SLA": true, "SMTP": true, "SQL": true, "SSH": true,
	"TCP": true, "TLS": true, "TTL": true, "UDP": true, "UI": true, "UID": true, "UUID": true,
	"URI": true, "URL": true, "UTF8": true, "VM": true, "XML": true, "XMPP": true, "XSRF": true, "XSS": true,
}

// goName returns the exported Go name of a parameter or field name: "delay_ms" is
// DelayMs, "user_id" is UserID, "1st-of-month" is X1stOfMonth.
func goName(name string) string {
	var b strings.Builder
	for _, w := range words(name) {
		if u := strings.ToUpper(w); initialisms[u] {
			b.WriteString(u)
		} else {
			b.WriteString(strings.ToUpper(w[:1]) + strings.ToLower(w[1:]))
		}
	}
	s := b.String()
	if s == "" || unicode.IsDigit(rune(s[0])) {
		s = "X" + s
	}
	return s
}

// goPackageName returns the Go package name of an API id: lowercase letters and
// digits, "uuid-generator" is uuidgenerator.
func goPackageName(id string) string {
	s := strings.ReplaceAll(id, "-", "")
	if s == "" || unicode.IsDigit(rune(s[0])) {
		s = "api" + s
	}
	if token.IsKeyword(s) {
		s += "api"
	}
	return s
}

// paramField returns the field of an object parameter by name, or nil.
func paramField(p *catalog.Param, name string) *catalog.Param {
	for i := range p.Fields {
		if p.Fields[i].Name == name {
			return &p.Fields[i]
		}
	}
	return nil
}
