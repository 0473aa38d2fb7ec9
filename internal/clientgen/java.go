package clientgen

import (
	"encoding/xml"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"unicode"

	"github.com/tollgate-dev/tollgate/catalog"
)

// javaLanguage writes one Maven project per API, in a directory named after the API:
// Java 8 source (Android has no java.net.http) on HttpURLConnection, with JSON through
// Jackson (jackson-databind), usable from Kotlin.
var javaLanguage = language{
	name: "java",
	dir:  func(m *model) string { return m.API.ID },
	files: []outFile{
		{fixed("pom.xml"), "pom.xml.tmpl", nil},
		{fixed("README.md"), "java/README.md.tmpl", nil},
		{javaSource("Client"), "Client.java.tmpl", nil},
		{javaSource("Params"), "Params.java.tmpl", nil},
		{javaFile("Response"), "Response.java.tmpl", nil},
		{javaFile("BatchResponse"), "BatchResponse.java.tmpl", nil},
		{func(m *model) string { return javaFile(m.Brand + "Exception")(m) }, "BaseException.java.tmpl", nil},
		{javaFile("ValidationException"), "ValidationException.java.tmpl", nil},
		{javaFile("ApiException"), "ApiException.java.tmpl", nil},
		{javaFile("NetworkException"), "NetworkException.java.tmpl", nil},
		{javaFile("Validator"), "Validator.java.tmpl", nil},
	},
	funcs: template.FuncMap{
		"javaString":  javaQuote,
		"javaDoc":     javaDoc,
		"javaType":    javaType,
		"javaExample": javaExample,
		"rulesJSON":   rulesJSON,
		"xml":         xmlText,
		"mavenGroup": func(m *model) string {
			group, _, _ := strings.Cut(m.Package, ":")
			return group
		},
	},
	prepare: func(m *model, o options) {
		m.Namespace = o.javaPackage + "." + javaPackageSegment(m.API.ID)
		m.Package = o.javaPackage + ":" + m.API.ID
		// toMap is the Params method that returns the values.
		memberNames(m, camel, mapWith(javaKeywords, "toMap"))
	},
}

// javaFile returns the path of a class's source file in a Java package.
func javaFile(class string) func(m *model) string {
	return func(m *model) string {
		return "src/main/java/" + strings.ReplaceAll(m.Namespace, ".", "/") + "/" + class + ".java"
	}
}

// javaSource returns the path of the source of the class Prefix+suffix.
func javaSource(suffix string) func(m *model) string {
	return func(m *model) string { return javaFile(m.Prefix + suffix)(m) }
}

// javaKeywords are Java's reserved words and literals, which cannot name a method or
// a package.
var javaKeywords = mapWith(nil, "abstract", "assert", "boolean", "break", "byte", "case", "catch", "char",
	"class", "const", "continue", "default", "do", "double", "else", "enum", "extends", "final", "finally",
	"float", "for", "goto", "if", "implements", "import", "instanceof", "int", "interface", "long", "native",
	"new", "package", "private", "protected", "public", "return", "short", "static", "strictfp", "super",
	"switch", "synchronized", "this", "throw", "throws", "transient", "try", "void", "volatile", "while",
	"true", "false", "null", "_")

// mapWith returns a copy of set with words added.
func mapWith(set map[string]bool, words ...string) map[string]bool {
	out := make(map[string]bool, len(set)+len(words))
	for w := range set {
		out[w] = true
	}
	for _, w := range words {
		out[w] = true
	}
	return out
}

// javaPackageSegment returns the last segment of an API's Java package: the id without
// hyphens, "uuid-generator" is uuidgenerator.
func javaPackageSegment(id string) string {
	s := strings.ReplaceAll(id, "-", "")
	if s == "" || unicode.IsDigit(rune(s[0])) {
		s = "api" + s
	}
	if javaKeywords[s] {
		s += "api"
	}
	return s
}

// javaQuote returns s as a Java string literal, in ASCII: characters outside it as
// \uXXXX escapes (which Java reads before anything else, so never for a quote, a
// backslash or a line end).
func javaQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20:
			fmt.Fprintf(&b, `\%03o`, r)
		case r < 0x7f:
			b.WriteRune(r)
		default:
			for _, u := range utf16Units(r) {
				fmt.Fprintf(&b, `\u%04x`, u)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// utf16Units returns the UTF-16 code units of r.
func utf16Units(r rune) []rune {
	if r < 0x10000 {
		return []rune{r}
	}
	r -= 0x10000
	return []rune{0xd800 + r>>10, 0xdc00 + r&0x3ff}
}

// javaType returns the Java type of a parameter's setter: scalars as primitives,
// arrays as lists and objects as maps.
func javaType(p *catalog.Param, boxed bool) string {
	switch p.Type {
	case catalog.String:
		return "String"
	case catalog.Integer:
		return map[bool]string{false: "long", true: "Long"}[boxed]
	case catalog.Number:
		return map[bool]string{false: "double", true: "Double"}[boxed]
	case catalog.Boolean:
		return map[bool]string{false: "boolean", true: "Boolean"}[boxed]
	case catalog.Array:
		return "java.util.List<" + javaType(p.Items, true) + ">"
	}
	return "java.util.Map<String, Object>"
}

// javaExample returns the setter calls of the example call: .text("hello").count(2).
func javaExample(m *model) string {
	var b strings.Builder
	for _, a := range m.Example {
		fmt.Fprintf(&b, ".%s(%s)", a.P.Member, javaValue(a.P.Param, a.Value))
	}
	return b.String()
}

// javaValue returns the Java expression of an example value of p's type.
func javaValue(p *catalog.Param, v any) string {
	switch v := v.(type) {
	case string:
		return javaQuote(v)
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
		if p != nil {
			items = p.Items
		}
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = javaValue(items, e)
		}
		return "java.util.Arrays.asList(" + strings.Join(parts, ", ") + ")"
	case map[string]any:
		var b strings.Builder
		b.WriteString("new java.util.LinkedHashMap<String, Object>() {{")
		for _, k := range slices.Sorted(maps.Keys(v)) {
			var f *catalog.Param
			if p != nil {
				f = paramField(p, k)
			}
			fmt.Fprintf(&b, " put(%s, %s);", javaQuote(k), javaValue(f, v[k]))
		}
		b.WriteString(" }}")
		return b.String()
	}
	return "null"
}

// javaPackageName matches what -java-package takes.
var javaPackageName = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$`)

// xmlText escapes text for an XML element or attribute.
func xmlText(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s)) // a strings.Builder does not fail
	return b.String()
}

// javaDoc makes text safe in a Javadoc comment: HTML escaped, with no comment end and
// no backslash (javac reads \u escapes even in comments).
func javaDoc(text string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "*/", "*&#47;", `\`, "&#92;", "@", "&#64;").Replace(text)
}
