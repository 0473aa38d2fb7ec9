// Package paramdoc describes the parameters of a catalog API in words, for the help of
// the command-line client and the documentation of generated client packages, so that
// both state the rules the same way the validation applies them.
package paramdoc

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/tollgate-dev/tollgate/catalog"
)

// Type names the type of p: "string", "integer", "array of string", "object".
func Type(p *catalog.Param) string {
	if p.Type == catalog.Array && p.Items != nil {
		return "array of " + Type(p.Items)
	}
	return string(p.Type)
}

// Rules lists the rules of p in words, separated by "; ", such as
// "required; at most 10000 characters" or "1 to 100; default 1". It is empty for a
// parameter without rules.
func Rules(p *catalog.Param) string {
	var rs []string
	if p.Required {
		rs = append(rs, "required")
	}
	unit := "characters"
	if p.Type == catalog.Array {
		unit = "elements"
	}
	switch {
	case p.Min != nil && p.Max != nil:
		rs = append(rs, Value(*p.Min)+" to "+Value(*p.Max))
	case p.Min != nil:
		rs = append(rs, "at least "+Value(*p.Min))
	case p.Max != nil:
		rs = append(rs, "at most "+Value(*p.Max))
	}
	switch {
	case p.MinLength != nil && p.MaxLength != nil:
		rs = append(rs, fmt.Sprintf("%d to %d %s", *p.MinLength, *p.MaxLength, unit))
	case p.MinLength != nil:
		rs = append(rs, fmt.Sprintf("at least %d %s", *p.MinLength, unit))
	case p.MaxLength != nil:
		rs = append(rs, fmt.Sprintf("at most %d %s", *p.MaxLength, unit))
	}
	if p.Enum != nil {
		vs := make([]string, len(p.Enum))
		for i, v := range p.Enum {
			vs[i] = Value(v)
		}
		rs = append(rs, "one of "+strings.Join(vs, ", "))
	}
	if p.Format != "" {
		rs = append(rs, "format "+Format(p.Format))
	}
	if p.Default != nil {
		rs = append(rs, "default "+Value(p.Default))
	}
	return strings.Join(rs, "; ")
}

// Format describes a string format: "date (YYYY-MM-DD)".
func Format(f catalog.Format) string {
	switch f {
	case catalog.FormatDate:
		return "date (YYYY-MM-DD)"
	case catalog.FormatEmail:
		return "email (name@example.com)"
	case catalog.FormatURL:
		return "url (http or https)"
	case catalog.FormatIP:
		return "ip (IPv4 or IPv6)"
	case catalog.FormatHexColor:
		return "hexcolor (#RGB or #RRGGBB)"
	}
	return string(f)
}

// Value formats a value of a definition (a bound, an enum value, a default) as a
// person would write it: numbers without exponent or trailing zeros, strings bare.
func Value(v any) string {
	switch v := v.(type) {
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case string:
		return v
	case []any, map[string]any:
		b, _ := json.Marshal(v) // values of a compiled definition encode
		return string(b)
	}
	return fmt.Sprint(v)
}

// Bytes formats a size: "5 MiB", "512 KiB", "100 bytes".
func Bytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
