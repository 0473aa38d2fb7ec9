package clientgen

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"unicode"
	"unicode/utf8"

	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/internal/paramdoc"
)

//go:embed templates
var templateFS embed.FS

// A language is one ecosystem the generator writes packages for: where each API's
// package goes, the files of a package and the template that writes each, and the
// functions its templates call. Each language's file (golang.go, js.go, python.go,
// ...) defines one, and its templates are in templates/<name>.
type language struct {
	name  string
	dir   func(m *model) string // the package's directory under the language's
	files []outFile
	funcs template.FuncMap
	// prepare sets the language's names in a model: Package, Namespace and each
	// parameter's Member. It may be nil.
	prepare func(m *model, o options)
}

type outFile struct {
	path     func(m *model) string
	template string
	format   func(name string, src []byte) ([]byte, error) // post-processing, or nil
}

func fixed(p string) func(*model) string { return func(*model) string { return p } }

// allLanguages are the languages the generator writes, in the order it writes them.
var allLanguages = []*language{&goLanguage, &jsLanguage, &pythonLanguage, &dotnetLanguage, &javaLanguage, &phpLanguage, &dartLanguage}

// languages are the names of allLanguages, as -lang takes them.
var languages = func() []string {
	names := make([]string, len(allLanguages))
	for i, l := range allLanguages {
		names[i] = l.name
	}
	return names
}()

// languageNamed returns the language of a name in languages.
func languageNamed(name string) *language {
	for _, l := range allLanguages {
		if l.name == name {
			return l
		}
	}
	panic("tollgate-gen: no language " + name)
}

// loadTemplates parses the templates of each language, with the shared ones.
func loadTemplates() (map[string]*template.Template, error) {
	out := make(map[string]*template.Template, len(allLanguages))
	for _, l := range allLanguages {
		lang := l.name
		t := template.New(lang).Funcs(commonFuncs).Funcs(l.funcs)
		// README templates share a base name across languages, so each language's is
		// parsed under the name lang/README.md.tmpl.
		entries, err := templateFS.ReadDir("templates/" + lang)
		if err != nil {
			return nil, err
		}
		for _, name := range append([]string{"common.tmpl"}, dirNames(lang, entries)...) {
			src, err := templateFS.ReadFile(path.Join("templates", name))
			if err != nil {
				return nil, err
			}
			tname := path.Base(name)
			if tname == "README.md.tmpl" {
				tname = lang + "/" + tname
			}
			if _, err := t.New(tname).Parse(string(src)); err != nil {
				return nil, err
			}
		}
		out[lang] = t
	}
	return out, nil
}

func dirNames(lang string, entries []fs.DirEntry) []string {
	var names []string
	for _, e := range entries {
		names = append(names, lang+"/"+e.Name())
	}
	return names
}

// render writes one file of a package.
func render(t *template.Template, f outFile, m *model) ([]byte, error) {
	if f.template == "" {
		return []byte{}, nil
	}
	var b bytes.Buffer
	if err := t.ExecuteTemplate(&b, f.template, m); err != nil {
		return nil, fmt.Errorf("api %s: %w", m.API.ID, err)
	}
	out := b.Bytes()
	if f.format != nil {
		return f.format(f.path(m), out)
	}
	return out, nil
}

// commonFuncs are the template functions of every language.
var commonFuncs = template.FuncMap{
	"wrap":       wrap,
	"sentence":   sentence,
	"lowerFirst": lowerFirst,
	"credits":    credits,
	"fileRules":  fileRules,
	"typeName":   paramdoc.Type,
	"paramNote":  paramNote,
	"paramDoc":   paramDoc,
	"goDoc":      goDoc,
	"mdCell":     func(s string) string { return strings.ReplaceAll(s, "|", `\|`) },
	"ifFile": func(api *catalog.API, yes, no string) string {
		if api.File != nil {
			return yes
		}
		return no
	},
}

// wrapWidth is the width of generated comments, prefix included.
const wrapWidth = 90

// wrap breaks text into lines of at most wrapWidth characters, each starting with
// prefix (trailing white space of the prefix is dropped on empty lines).
func wrap(text, prefix string) string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(text) {
		if line != "" && utf8.RuneCountInString(prefix+line+" "+w) > wrapWidth {
			lines = append(lines, prefix+line)
			line = w
			continue
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	if line != "" || len(lines) == 0 {
		lines = append(lines, strings.TrimRight(prefix+line, " "))
	}
	return strings.Join(lines, "\n")
}

// sentence returns s with a final full stop.
func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" || strings.HasSuffix(s, ".") || strings.HasSuffix(s, "!") || strings.HasSuffix(s, "?") {
		return s
	}
	return s + "."
}

// lowerFirst lowercases the first letter of s, unless it starts an acronym ("HMAC").
func lowerFirst(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	if next, _ := utf8.DecodeRuneInString(s[n:]); unicode.IsUpper(next) {
		return s
	}
	return string(unicode.ToLower(r)) + s[n:]
}

func credits(n int64) string {
	if n == 1 {
		return "1 credit"
	}
	return strconv.FormatInt(n, 10) + " credits"
}

// fileRules describes what a file field takes: "image/png, image/jpeg or image/gif, at
// most 5 MiB".
func fileRules(f *catalog.FileField) string {
	types := strings.Join(f.Types, ", ")
	if i := strings.LastIndex(types, ", "); i >= 0 {
		types = types[:i] + " or " + types[i+2:]
	}
	return types + ", at most " + paramdoc.Bytes(f.MaxBytes)
}

// paramNote is the documentation of a parameter: its description and its rules.
func paramNote(p *catalog.Param, rules string) string {
	note := sentence(p.Description)
	if rules != "" {
		note += " " + sentence(strings.ToUpper(rules[:1])+rules[1:])
	}
	return strings.TrimSpace(note)
}

// paramDoc is the Go documentation of a Params field: its description and rules.
func paramDoc(goName string, p *catalog.Param, rules string) string {
	doc := goDoc(goName, p.Description)
	if doc == "" {
		doc = goName + " is the " + p.Name + " parameter."
	}
	if rules != "" {
		doc += " " + sentence(strings.ToUpper(rules[:1])+rules[1:])
	}
	return doc
}

// goDoc is the Go documentation of a field: "Text is the text to hash." for a
// description that starts with an article, the description as it is otherwise.
func goDoc(goName, description string) string {
	d := sentence(description)
	for _, article := range []string{"The ", "A ", "An "} {
		if strings.HasPrefix(d, article) {
			return goName + " is " + lowerFirst(d)
		}
	}
	return d
}

// rule is the validation rule of a parameter as the JavaScript and Python packages
// hold it: its entries in order, with the language's key names.
type rule []ruleEntry

type ruleEntry struct {
	key   string
	value any
}

// ruleOf returns the rule of p. snake selects Python's key names.
func ruleOf(p *catalog.Param, snake bool) rule {
	key := func(camel, snakeKey string) string {
		if snake {
			return snakeKey
		}
		return camel
	}
	r := rule{}
	if p.Name != "" {
		r = append(r, ruleEntry{"name", p.Name})
	}
	r = append(r, ruleEntry{"type", string(p.Type)})
	if p.Required {
		r = append(r, ruleEntry{"required", true})
	}
	if p.Min != nil {
		r = append(r, ruleEntry{"min", *p.Min})
	}
	if p.Max != nil {
		r = append(r, ruleEntry{"max", *p.Max})
	}
	if p.MinLength != nil {
		r = append(r, ruleEntry{key("minLength", "min_length"), int64(*p.MinLength)})
	}
	if p.MaxLength != nil {
		r = append(r, ruleEntry{key("maxLength", "max_length"), int64(*p.MaxLength)})
	}
	if p.Enum != nil {
		r = append(r, ruleEntry{"enum", p.Enum})
	}
	if p.Format != "" {
		r = append(r, ruleEntry{"format", string(p.Format)})
	}
	if p.Items != nil {
		r = append(r, ruleEntry{"items", ruleOf(p.Items, snake)})
	}
	if p.Fields != nil {
		fs := make([]any, len(p.Fields))
		for i := range p.Fields {
			fs[i] = ruleOf(&p.Fields[i], snake)
		}
		r = append(r, ruleEntry{"fields", fs})
	}
	return r
}

// fileRule returns the file field as the JavaScript and Python packages hold it.
func fileRule(f *catalog.FileField, snake bool) rule {
	types := make([]any, len(f.Types))
	for i, t := range f.Types {
		types[i] = t
	}
	maxKey := "maxBytes"
	if snake {
		maxKey = "max_bytes"
	}
	return rule{{"name", f.Name}, {"types", types}, {maxKey, f.MaxBytes}}
}

// literal writes v as a JavaScript or Python literal: strings in single quotes for
// JavaScript and double quotes for Python, Python's True, False and None, numbers
// without needless decimals, and rules as objects (bare keys in JavaScript).
func literal(v any, python bool) string {
	str := jsQuote
	if python {
		str = jsonString
	}
	switch v := v.(type) {
	case nil:
		if python {
			return "None"
		}
		return "null"
	case bool:
		switch {
		case python && v:
			return "True"
		case python:
			return "False"
		}
		return strconv.FormatBool(v)
	case string:
		return str(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = literal(e, python)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case map[string]any:
		keys := slices.Sorted(maps.Keys(v))
		parts := make([]string, len(keys))
		for i, k := range keys {
			key := str(k)
			if !python {
				key = jsProp(k)
			}
			parts[i] = key + ": " + literal(v[k], python)
		}
		return braces(parts, python)
	case rule:
		parts := make([]string, len(v))
		for i, e := range v {
			key := str(e.key)
			if !python {
				key = e.key
			}
			parts[i] = key + ": " + literal(e.value, python)
		}
		return braces(parts, python)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// braces encloses the members of an object: {"a": 1} in Python, { a: 1 } in
// JavaScript.
func braces(parts []string, python bool) string {
	if python {
		return "{" + strings.Join(parts, ", ") + "}"
	}
	if len(parts) == 0 {
		return "{}"
	}
	return "{ " + strings.Join(parts, ", ") + " }"
}

// jsQuote returns s as a JavaScript string literal in single quotes.
func jsQuote(s string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for _, r := range s {
		switch {
		case r == '\\' || r == '\'':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r < 0x20 || r == '\u2028' || r == '\u2029':
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// jsonString quotes s as JSON does, without escaping <, > and &: a string literal in
// JavaScript and Python alike.
func jsonString(s string) string {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	e.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

// MarshalJSON writes the rule as a JSON object with its entries in order.
func (r rule) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range r {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(jsonString(e.key))
		b.WriteByte(':')
		v, err := json.Marshal(e.value)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// rulesJSON returns the rules of a package's parameters, and of its file if it has
// one, as one line of JSON for the packages that read them when they load (.NET, Java,
// PHP, Dart): {"params": [...], "file": {...}}, with Python's snake_case keys. The
// line holds no single quote, so that it fits a raw string of any of those languages.
func rulesJSON(m *model) string {
	params := make([]rule, len(m.Params))
	for i, p := range m.Params {
		params[i] = ruleOf(p.Param, true)
	}
	r := rule{{"params", params}}
	if m.API.File != nil {
		r = append(r, ruleEntry{"file", fileRule(m.API.File, true)})
	}
	b, _ := json.Marshal(r) // rules hold strings, numbers, booleans and lists
	return strings.ReplaceAll(string(b), "'", `\u0027`)
}

// memberNames sets each parameter's Member: its name as style writes it, changed so
// that it is neither a reserved word of the language nor a name given before.
func memberNames(m *model, style func(string) string, reserved map[string]bool) {
	names := newNameSet()
	for w := range reserved {
		names[w] = true
	}
	members := map[string]string{}
	for i := range m.Params {
		m.Params[i].Member = names.add(style(m.Params[i].Name))
		members[m.Params[i].Name] = m.Params[i].Member
	}
	for i := range m.Example {
		m.Example[i].P.Member = members[m.Example[i].P.Name]
	}
	for i := range m.FileFields {
		m.FileFields[i].Member = members[m.FileFields[i].Name]
	}
}

// camel writes a name in lower camel case: "delay_ms" is delayMs.
func camel(name string) string { return lowerFirst(pascal(name)) }

// floatLiteral writes f as a floating-point literal of C-like languages (Go, Java, C#,
// Dart): with a decimal point or an exponent.
func floatLiteral(f float64) string {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}
