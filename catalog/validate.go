package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A ParamError reports a parameter that is missing, unknown, of the wrong type or
// outside its rules. Param names it; for members of arrays and objects it is a path such
// as "items[2].name".
type ParamError struct {
	Param  string
	Reason string
}

func (e *ParamError) Error() string { return fmt.Sprintf("parameter %q: %s", e.Param, e.Reason) }

func paramErr(path, format string, args ...any) error {
	return &ParamError{Param: path, Reason: fmt.Sprintf(format, args...)}
}

// ValidateJSON validates the parameters of a JSON request body (decoded with
// [json.Decoder.UseNumber] or not) or of any JSON-like value from another protocol
// (MCP arguments, GraphQL arguments). It applies defaults and returns the parameters
// converted to their declared types. Unknown parameters are refused, so that a misspelt
// name is reported instead of silently ignored. Integers may arrive as json.Number, int,
// int32, int64 or an integral float64; numbers as json.Number, any integer or a float.
// A null value counts as absent.
//
// Errors are [*ParamError] values. When several parameters are wrong, the first unknown
// name in sorted order is reported, else the first wrong parameter in declaration order.
// The API must have been compiled by [Compile] or a [Registry].
func (a *API) ValidateJSON(in map[string]any) (Params, error) {
	c := a.compiled
	out := make(Params, len(c.params))
	known := 0 // the parameters given, to tell whether in holds any other name
	for i := range c.params {
		p := &c.params[i]
		v, given := in[p.Name]
		if given {
			known++
		}
		if v != nil {
			got, err := p.fromJSON(v, p.Name)
			if err != nil {
				return nil, unknownFirst(c, in, err)
			}
			out[p.Name] = got
		} else if err := p.absent(out, ""); err != nil {
			return nil, unknownFirst(c, in, err)
		}
	}
	if known != len(in) {
		return nil, checkNames(c, in)
	}
	return out, nil
}

// ValidateQuery validates parameters that arrive as text: a query string, or the form
// fields of a multipart upload. Each value is converted to the declared type:
// integers and numbers in decimal, booleans as true/false/1/0. An array is given by
// repeating the name (?tag=a&tag=b) or as one JSON array (?tag=["a","b"]); an object as
// JSON text. Errors are reported as by [API.ValidateJSON].
func (a *API) ValidateQuery(in url.Values) (Params, error) {
	c := a.compiled
	out := make(Params, len(c.params))
	known := 0 // the parameters given, to tell whether in holds any other name
	for i := range c.params {
		p := &c.params[i]
		if vs, ok := in[p.Name]; ok {
			known++
			got, err := p.fromText(vs, p.Name)
			if err != nil {
				return nil, unknownFirst(c, in, err)
			}
			out[p.Name] = got
		} else if err := p.absent(out, ""); err != nil {
			return nil, unknownFirst(c, in, err)
		}
	}
	if known != len(in) {
		return nil, checkNames(c, in)
	}
	return out, nil
}

// unknownFirst returns the error of an unknown name in in, if there is one, and else
// err: an unknown name is reported before a wrong parameter. (The validations count
// the parameters given rather than look every given name up, and look for the unknown
// one only on failure.)
func unknownFirst[V any](c *compiled, in map[string]V, err error) error {
	if uerr := checkNames(c, in); uerr != nil {
		return uerr
	}
	return err
}

// checkNames reports the first given name, in sorted order, that is not a parameter.
func checkNames[V any](c *compiled, in map[string]V) error {
	bad, found := "", false
	for name := range in {
		if _, ok := c.byName[name]; !ok && (!found || name < bad) {
			bad, found = name, true
		}
	}
	if !found {
		return nil
	}
	bad = reportName(bad)
	if len(c.params) == 0 {
		return paramErr(bad, "unknown parameter; this API takes no parameters")
	}
	return paramErr(bad, "unknown parameter; this API accepts %s", c.names)
}

// reportName returns a caller's unknown name as an error reports it: quoted and cut
// when it is not valid UTF-8 or is longer than any declared name can be.
func reportName(name string) string {
	if !utf8.ValidString(name) || len(name) > 64 {
		return strconv.QuoteToASCII(truncate(name, 64))
	}
	return name
}

// absent handles a parameter that was not given: an error if it is required, else its
// default (if any) goes into out.
func (p *Param) absent(out map[string]any, prefix string) error {
	if p.Required {
		return paramErr(prefix+p.Name, "is required")
	}
	if p.Default != nil {
		out[p.Name] = cloneValue(p.Default)
	}
	return nil
}

// fromText converts query-string values to the parameter's type and checks its rules.
func (p *Param) fromText(vs []string, path string) (any, error) {
	if p.Type == Array {
		if len(vs) == 1 && strings.HasPrefix(strings.TrimSpace(vs[0]), "[") {
			v, err := decodeJSONText(vs[0])
			if err != nil {
				return nil, paramErr(path, "is not a valid JSON array: %v", err)
			}
			return p.fromJSON(v, path)
		}
		items := make([]any, len(vs))
		for i, s := range vs {
			v, err := p.Items.scalarFromText(s, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			items[i] = v
		}
		return items, p.checkLength(len(items), path)
	}
	if len(vs) != 1 {
		return nil, paramErr(path, "is given %d times; give it once", len(vs))
	}
	return p.scalarFromText(vs[0], path)
}

func (p *Param) scalarFromText(s, path string) (any, error) {
	switch p.Type {
	case String:
		return p.checkString(s, path)
	case Integer:
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return nil, paramErr(path, "must be an integer, got %s", quoteInput(s))
		}
		return p.checkNumber(n, float64(n), path)
	case Number:
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, paramErr(path, "must be a number, got %s", quoteInput(s))
		}
		return p.checkNumber(f, f, path)
	case Boolean:
		switch strings.ToLower(strings.TrimSpace(s)) {
		case "true", "1":
			return true, nil
		case "false", "0":
			return false, nil
		}
		return nil, paramErr(path, "must be true or false, got %s", quoteInput(s))
	default: // Object, or an Array nested in an array
		v, err := decodeJSONText(s)
		if err != nil {
			return nil, paramErr(path, "must be JSON text of type %s: %v", p.Type, err)
		}
		return p.fromJSON(v, path)
	}
}

// fromJSON converts a JSON-like value to the parameter's type and checks its rules.
func (p *Param) fromJSON(v any, path string) (any, error) {
	switch p.Type {
	case String:
		s, ok := v.(string)
		if !ok {
			return nil, typeErr(path, "a string", v)
		}
		return p.checkString(s, path)
	case Integer:
		n, ok := toInt(v)
		if !ok {
			return nil, typeErr(path, "an integer", v)
		}
		return p.checkNumber(n, float64(n), path)
	case Number:
		f, ok := toFloat(v)
		if !ok {
			return nil, typeErr(path, "a number", v)
		}
		return p.checkNumber(f, f, path)
	case Boolean:
		b, ok := v.(bool)
		if !ok {
			return nil, typeErr(path, "true or false", v)
		}
		return b, nil
	case Array:
		in, ok := v.([]any)
		if !ok {
			return nil, typeErr(path, "an array", v)
		}
		out := make([]any, len(in))
		for i, e := range in {
			ep := fmt.Sprintf("%s[%d]", path, i)
			if e == nil {
				return nil, paramErr(ep, "must not be null")
			}
			ev, err := p.Items.fromJSON(e, ep)
			if err != nil {
				return nil, err
			}
			out[i] = ev
		}
		return out, p.checkLength(len(out), path)
	case Object:
		in, ok := v.(map[string]any)
		if !ok {
			return nil, typeErr(path, "an object", v)
		}
		bad, found := "", false // the first unknown field in sorted order, as in checkNames
		for name := range in {
			if p.field(name) == nil && (!found || name < bad) {
				bad, found = name, true
			}
		}
		if found {
			return nil, paramErr(path+"."+reportName(bad), "unknown field; %s accepts %s", path, fieldNames(p.Fields))
		}
		out := make(map[string]any, len(p.Fields))
		for i := range p.Fields {
			fp := &p.Fields[i]
			fpath := path + "." + fp.Name
			if fv := in[fp.Name]; fv != nil {
				got, err := fp.fromJSON(fv, fpath)
				if err != nil {
					return nil, err
				}
				out[fp.Name] = got
			} else if err := fp.absent(out, path+"."); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, paramErr(path, "has unsupported type %q", p.Type)
}

func (p *Param) field(name string) *Param {
	for i := range p.Fields {
		if p.Fields[i].Name == name {
			return &p.Fields[i]
		}
	}
	return nil
}

func (p *Param) checkString(s, path string) (any, error) {
	if !utf8.ValidString(s) {
		return nil, paramErr(path, "must be valid UTF-8 text")
	}
	if s == "" && p.Required {
		return nil, paramErr(path, "is required and must not be empty")
	}
	if err := p.checkLength(utf8.RuneCountInString(s), path); err != nil {
		return nil, err
	}
	if p.Enum != nil && !slices.ContainsFunc(p.Enum, func(e any) bool { es, _ := e.(string); return es == s }) {
		return nil, paramErr(path, "must be one of %s, got %s", enumList(p.Enum), quoteInput(s))
	}
	if p.Format != "" && !formatOK(p.Format, s) {
		return nil, paramErr(path, "must be %s, got %s", formatHint[p.Format], quoteInput(s))
	}
	return s, nil
}

// checkNumber checks the bounds and enum of an integer (v is int64) or number (v is
// float64); f is the same value as a float64.
func (p *Param) checkNumber(v any, f float64, path string) (any, error) {
	if p.Min != nil && f < *p.Min {
		return nil, paramErr(path, "must be at least %s, got %s", fmtNum(*p.Min), fmtNum(f))
	}
	if p.Max != nil && f > *p.Max {
		return nil, paramErr(path, "must be at most %s, got %s", fmtNum(*p.Max), fmtNum(f))
	}
	if p.Enum != nil && !slices.Contains(p.Enum, v) {
		return nil, paramErr(path, "must be one of %s, got %s", enumList(p.Enum), fmtNum(f))
	}
	return v, nil
}

func (p *Param) checkLength(n int, path string) error {
	unit := "characters"
	if p.Type == Array {
		unit = "elements"
	}
	if p.MinLength != nil && n < *p.MinLength {
		return paramErr(path, "must have at least %d %s, got %d", *p.MinLength, unit, n)
	}
	if p.MaxLength != nil && n > *p.MaxLength {
		return paramErr(path, "must have at most %d %s, got %d", *p.MaxLength, unit, n)
	}
	return nil
}

// toInt accepts every integer representation that JSON decoders and the GraphQL and
// MCP libraries produce, including integral floats.
func toInt(v any) (int64, bool) {
	switch n := v.(type) {
	case json.Number:
		if i, err := n.Int64(); err == nil {
			return i, true
		}
		f, err := n.Float64()
		if err != nil {
			return 0, false
		}
		return floatToInt(f)
	case float64:
		return floatToInt(n)
	case float32:
		return floatToInt(float64(n))
	case int:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	}
	return 0, false
}

func floatToInt(f float64) (int64, bool) {
	if f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return 0, false
	}
	return int64(f), true
}

func toFloat(v any) (float64, bool) {
	var f float64
	switch n := v.(type) {
	case json.Number:
		var err error
		if f, err = n.Float64(); err != nil {
			return 0, false
		}
	case float64:
		f = n
	case float32:
		f = float64(n)
	case int:
		f = float64(n)
	case int32:
		f = float64(n)
	case int64:
		f = float64(n)
	default:
		return 0, false
	}
	return f, !math.IsInf(f, 0) && !math.IsNaN(f)
}

func typeErr(path, want string, got any) error {
	return paramErr(path, "must be %s, got %s", want, JSONKind(got))
}

// jsonKind names the JSON type of a value for error messages.
func JSONKind(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number, float64, float32, int, int32, int64:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	case nil:
		return "null"
	}
	return fmt.Sprintf("a value of type %T", v)
}

var formatHint = map[Format]string{
	FormatEmail:    "an email address (name@example.com)",
	FormatURL:      "an http or https URL",
	FormatIP:       "an IPv4 or IPv6 address",
	FormatDate:     "a date in the form YYYY-MM-DD",
	FormatHexColor: "a hex color such as #1a2b3c",
}

func formatOK(f Format, s string) bool {
	switch f {
	case FormatEmail:
		at := strings.LastIndexByte(s, '@')
		if at < 1 || hasSpace(s) || strings.Count(s, "@") != 1 {
			return false
		}
		domain := s[at+1:]
		dot := strings.LastIndexByte(domain, '.')
		return dot > 0 && dot < len(domain)-1
	case FormatURL:
		u, err := url.Parse(s)
		return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && !hasSpace(s)
	case FormatIP:
		ip, err := netip.ParseAddr(s)
		return err == nil && ip.Zone() == "" // a zone (fe80::1%eth0) is not part of an address
	case FormatDate:
		return len(s) == 10 && s[4] == '-' && s[7] == '-' && allDigits(s[:4]) && allDigits(s[5:7]) && allDigits(s[8:])
	case FormatHexColor:
		h := strings.TrimPrefix(s, "#")
		return (len(h) == 3 || len(h) == 6) && strings.Trim(h, "0123456789abcdefABCDEF") == ""
	}
	return false
}

// hasSpace reports whether s holds a character that \s matches in the patterns of the
// JSON Schema (ECMA-262 white space and line terminators).
func hasSpace(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || r == '\ufeff' })
}

func allDigits(s string) bool { return strings.Trim(s, "0123456789") == "" }

// decodeJSONText decodes one JSON value, keeping numbers exact.
func decodeJSONText(s string) (any, error) {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, fmt.Errorf("unexpected text after the JSON value")
	}
	return v, nil
}

// cloneValue copies arrays and objects so that handlers cannot change a shared default.
func cloneValue(v any) any {
	switch t := v.(type) {
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = cloneValue(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = cloneValue(e)
		}
		return out
	}
	return v
}

func enumList(values []any) string {
	var b bytes.Buffer
	for i, v := range values {
		if i > 0 {
			b.WriteString(", ")
		}
		if s, ok := v.(string); ok {
			b.WriteString(s)
		} else {
			fmt.Fprint(&b, v)
		}
	}
	return b.String()
}

func fieldNames(params []Param) string {
	names := make([]string, len(params))
	for i, p := range params {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}

func fmtNum(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// quoteInput quotes a caller's value for an error message, cut to a readable length.
func quoteInput(s string) string { return strconv.QuoteToASCII(truncate(s, 40)) }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
