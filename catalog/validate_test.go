package catalog_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/catalog"
)

// qv builds url.Values from name, value pairs; a name may repeat.
func qv(pairs ...string) url.Values {
	v := url.Values{}
	for i := 0; i+1 < len(pairs); i += 2 {
		v.Add(pairs[i], pairs[i+1])
	}
	return v
}

// withName adds the required "name" parameter of fullDef to a query.
func withName(pairs ...string) url.Values { return qv(append([]string{"name", "abc"}, pairs...)...) }

// defaults is what fullDef's validation yields for the parameters left out.
var defaults = map[string]any{
	"color": "red",
	"count": int64(10),
	"flag":  false,
	"tags":  []any{"a"},
	"opts":  map[string]any{"mode": "fast", "depth": int64(3)},
}

type validateCase struct {
	name   string
	want   map[string]any // on success: expected values of these parameters
	param  string         // on failure: ParamError.Param
	reason string         // on failure: a substring of ParamError.Reason
}

// TestValidateQuery checks query-string validation of every type and rule.
func TestValidateQuery(t *testing.T) {
	a := fullAPI()
	tests := []struct {
		in url.Values
		validateCase
	}{
		// Accepted, with the conversions and defaults.
		{withName(), validateCase{name: "defaults", want: merge(defaults, map[string]any{"name": "abc"})}},
		{qv("name", "héllo"), validateCase{name: "5 characters, 6 bytes", want: map[string]any{"name": "héllo"}}},
		{qv("name", "日本"), validateCase{name: "2 characters, 6 bytes", want: map[string]any{"name": "日本"}}},
		{withName("count", "1"), validateCase{name: "count at Min", want: map[string]any{"count": int64(1)}}},
		{withName("count", "100"), validateCase{name: "count at Max", want: map[string]any{"count": int64(100)}}},
		{withName("count", " 42 "), validateCase{name: "count with spaces", want: map[string]any{"count": int64(42)}}},
		{withName("count", "+7"), validateCase{name: "count with plus", want: map[string]any{"count": int64(7)}}},
		{withName("delay_ms", "0"), validateCase{name: "zero", want: map[string]any{"delay_ms": int64(0)}}},
		{withName("ratio", "-1.5"), validateCase{name: "ratio at Min", want: map[string]any{"ratio": -1.5}}},
		{withName("ratio", "2.5"), validateCase{name: "ratio at Max", want: map[string]any{"ratio": 2.5}}},
		{withName("ratio", "2"), validateCase{name: "integral ratio", want: map[string]any{"ratio": 2.0}}},
		{withName("ratio", "1e-3"), validateCase{name: "ratio exponent", want: map[string]any{"ratio": 0.001}}},
		{withName("flag", "true"), validateCase{name: "flag true", want: map[string]any{"flag": true}}},
		{withName("flag", "false"), validateCase{name: "flag false", want: map[string]any{"flag": false}}},
		{withName("flag", "1"), validateCase{name: "flag 1", want: map[string]any{"flag": true}}},
		{withName("flag", "0"), validateCase{name: "flag 0", want: map[string]any{"flag": false}}},
		{withName("flag", "TRUE"), validateCase{name: "flag TRUE", want: map[string]any{"flag": true}}},
		{withName("color", "blue"), validateCase{name: "string enum", want: map[string]any{"color": "blue"}}},
		{withName("level", "3"), validateCase{name: "integer enum", want: map[string]any{"level": int64(3)}}},
		{withName("scale", "1"), validateCase{name: "number enum as integer", want: map[string]any{"scale": 1.0}}},
		{withName("scale", "0.5"), validateCase{name: "number enum", want: map[string]any{"scale": 0.5}}},
		{withName("tags", "x", "tags", "yy"), validateCase{name: "array by repeated keys", want: map[string]any{"tags": []any{"x", "yy"}}}},
		{withName("tags", `["x","yy","zzz"]`), validateCase{name: "array as JSON", want: map[string]any{"tags": []any{"x", "yy", "zzz"}}}},
		{withName("tags", ` [ "x" ] `), validateCase{name: "array as JSON with spaces", want: map[string]any{"tags": []any{"x"}}}},
		{withName("tags", "x,y"), validateCase{name: "comma is not a separator", want: map[string]any{"tags": []any{"x,y"}}}},
		{withName("ids", "1", "ids", "0"), validateCase{name: "integer array by keys", want: map[string]any{"ids": []any{int64(1), int64(0)}}}},
		{withName("ids", "[1, 2.0, 3e1]"), validateCase{name: "integer array as JSON", want: map[string]any{"ids": []any{int64(1), int64(2), int64(30)}}}},
		{withName("opts", `{"mode":"slow"}`), validateCase{name: "object as JSON", want: map[string]any{"opts": map[string]any{"mode": "slow", "depth": int64(3)}}}},
		{withName("opts", `{"mode":"slow","depth":0}`), validateCase{name: "object with zero", want: map[string]any{"opts": map[string]any{"mode": "slow", "depth": int64(0)}}}},
		{withName("opts", `{"mode":"slow","depth":null}`), validateCase{name: "null object field", want: map[string]any{"opts": map[string]any{"mode": "slow", "depth": int64(3)}}}},
		{withName("points", `[{"x":1.5,"label":"a"},{"x":-2}]`), validateCase{name: "array of objects as JSON",
			want: map[string]any{"points": []any{map[string]any{"x": 1.5, "label": "a"}, map[string]any{"x": -2.0}}}}},
		{withName("points", `{"x":1}`, "points", `{"x":2}`), validateCase{name: "array of objects by keys",
			want: map[string]any{"points": []any{map[string]any{"x": 1.0}, map[string]any{"x": 2.0}}}}},
		{withName("email", "someone@example.com"), validateCase{name: "email", want: map[string]any{"email": "someone@example.com"}}},
		{withName("email", "a.b+c@sub.example.co.uk"), validateCase{name: "email with plus", want: map[string]any{"email": "a.b+c@sub.example.co.uk"}}},
		{withName("site", "https://example.com/a?b=c#d"), validateCase{name: "https url", want: map[string]any{"site": "https://example.com/a?b=c#d"}}},
		{withName("site", "http://127.0.0.1:8080"), validateCase{name: "http url with port", want: map[string]any{"site": "http://127.0.0.1:8080"}}},
		{withName("site", "HTTPS://Example.com"), validateCase{name: "uppercase scheme", want: map[string]any{"site": "HTTPS://Example.com"}}},
		{withName("addr", "192.168.0.1"), validateCase{name: "ipv4", want: map[string]any{"addr": "192.168.0.1"}}},
		{withName("addr", "2001:db8::1"), validateCase{name: "ipv6", want: map[string]any{"addr": "2001:db8::1"}}},
		{withName("addr", "::ffff:10.0.0.1"), validateCase{name: "ipv4-mapped ipv6", want: map[string]any{"addr": "::ffff:10.0.0.1"}}},
		{withName("day", "2024-02-29"), validateCase{name: "date", want: map[string]any{"day": "2024-02-29"}}},
		{withName("day", "2026-02-30"), validateCase{name: "impossible date has the right shape", want: map[string]any{"day": "2026-02-30"}}},
		{withName("day", "0000-99-99"), validateCase{name: "shape only", want: map[string]any{"day": "0000-99-99"}}},
		{withName("hex", "#fff"), validateCase{name: "short hex color", want: map[string]any{"hex": "#fff"}}},
		{withName("hex", "A1B2C3"), validateCase{name: "hex color without #", want: map[string]any{"hex": "A1B2C3"}}},
		{withName("hex", "#a1b2c3"), validateCase{name: "hex color", want: map[string]any{"hex": "#a1b2c3"}}},

		// Refused.
		{qv(), validateCase{name: "required missing", param: "name", reason: "is required"}},
		{qv("name", ""), validateCase{name: "required empty", param: "name", reason: "must not be empty"}},
		{qv("name", "a"), validateCase{name: "too short", param: "name", reason: "at least 2 characters, got 1"}},
		{qv("name", "abcdef"), validateCase{name: "too long", param: "name", reason: "at most 5 characters, got 6"}},
		{qv("name", "héllos"), validateCase{name: "too long in characters", param: "name", reason: "got 6"}},
		{qv("name", "ab\xff"), validateCase{name: "invalid UTF-8", param: "name", reason: "UTF-8"}},
		{qv("name", "abc", "name", "def"), validateCase{name: "scalar given twice", param: "name", reason: "given 2 times"}},
		{withName("count", "5", "count", "6"), validateCase{name: "integer given twice", param: "count", reason: "given 2 times"}},
		{withName("count", "abc"), validateCase{name: "not an integer", param: "count", reason: `must be an integer, got "abc"`}},
		{withName("count", "1.5"), validateCase{name: "fraction for integer", param: "count", reason: "must be an integer"}},
		{withName("count", "1e2"), validateCase{name: "exponent for integer", param: "count", reason: "must be an integer"}},
		{withName("count", ""), validateCase{name: "empty integer", param: "count", reason: "must be an integer"}},
		{withName("count", "0x10"), validateCase{name: "hex integer", param: "count", reason: "must be an integer"}},
		{withName("count", "99999999999999999999"), validateCase{name: "integer overflow", param: "count", reason: "must be an integer"}},
		{withName("count", "0"), validateCase{name: "below Min", param: "count", reason: "at least 1, got 0"}},
		{withName("count", "101"), validateCase{name: "above Max", param: "count", reason: "at most 100, got 101"}},
		{withName("delay_ms", "-1"), validateCase{name: "negative below Min 0", param: "delay_ms", reason: "at least 0"}},
		{withName("ratio", "abc"), validateCase{name: "not a number", param: "ratio", reason: "must be a number"}},
		{withName("ratio", "NaN"), validateCase{name: "NaN", param: "ratio", reason: "must be a number"}},
		{withName("ratio", "Inf"), validateCase{name: "Inf", param: "ratio", reason: "must be a number"}},
		{withName("ratio", "1e400"), validateCase{name: "overflow", param: "ratio", reason: "must be a number"}},
		{withName("ratio", "2.51"), validateCase{name: "number above Max", param: "ratio", reason: "at most 2.5, got 2.51"}},
		{withName("ratio", "-1.6"), validateCase{name: "number below Min", param: "ratio", reason: "at least -1.5, got -1.6"}},
		{withName("flag", "yes"), validateCase{name: "not a boolean", param: "flag", reason: `must be true or false, got "yes"`}},
		{withName("flag", ""), validateCase{name: "empty boolean", param: "flag", reason: "true or false"}},
		{withName("flag", "2"), validateCase{name: "boolean 2", param: "flag", reason: "true or false"}},
		{withName("color", "purple"), validateCase{name: "not in string enum", param: "color", reason: `must be one of red, green, blue, got "purple"`}},
		{withName("color", "Red"), validateCase{name: "enum is case-sensitive", param: "color", reason: "must be one of"}},
		{withName("color", ""), validateCase{name: "empty not in enum", param: "color", reason: "must be one of"}},
		{withName("level", "4"), validateCase{name: "not in integer enum", param: "level", reason: "must be one of 1, 2, 3, got 4"}},
		{withName("scale", "3"), validateCase{name: "not in number enum", param: "scale", reason: "must be one of 0.5, 1, 2, got 3"}},
		{withName("email", "nobody"), validateCase{name: "email without @", param: "email", reason: "email address"}},
		{withName("email", "a@b"), validateCase{name: "email without dot", param: "email", reason: "email address"}},
		{withName("email", "@example.com"), validateCase{name: "email without local part", param: "email", reason: "email address"}},
		{withName("email", "a@@example.com"), validateCase{name: "email with two @", param: "email", reason: "email address"}},
		{withName("email", "a b@example.com"), validateCase{name: "email with space", param: "email", reason: "email address"}},
		{withName("email", "a@example."), validateCase{name: "email ending with dot", param: "email", reason: "email address"}},
		{withName("email", "a@.com"), validateCase{name: "email domain starting with dot", param: "email", reason: "email address"}},
		{withName("email", "a\f@example.com"), validateCase{name: "email with form feed", param: "email", reason: "email address"}},
		{withName("email", "a\v@example.com"), validateCase{name: "email with vertical tab", param: "email", reason: "email address"}},
		{withName("email", "a@exa\u00a0mple.com"), validateCase{name: "email with no-break space", param: "email", reason: "email address"}},
		{withName("email", "a@example.com\n"), validateCase{name: "email with newline", param: "email", reason: "email address"}},
		{withName("email", ""), validateCase{name: "empty email", param: "email", reason: "email address"}},
		{withName("site", "ftp://example.com"), validateCase{name: "ftp url", param: "site", reason: "http or https URL"}},
		{withName("site", "example.com"), validateCase{name: "url without scheme", param: "site", reason: "http or https URL"}},
		{withName("site", "http://"), validateCase{name: "url without host", param: "site", reason: "http or https URL"}},
		{withName("site", "http:example.com"), validateCase{name: "opaque url", param: "site", reason: "http or https URL"}},
		{withName("site", "https:///path"), validateCase{name: "url with empty host", param: "site", reason: "http or https URL"}},
		{withName("site", "http://exa mple.com"), validateCase{name: "url with space", param: "site", reason: "http or https URL"}},
		{withName("site", "javascript:alert(1)"), validateCase{name: "javascript url", param: "site", reason: "http or https URL"}},
		{withName("site", "http://exa\u00a0mple.com"), validateCase{name: "url with no-break space", param: "site", reason: "http or https URL"}},
		{withName("site", "http://a.b/\u2028"), validateCase{name: "url with line separator", param: "site", reason: "http or https URL"}},
		{withName("site", "http://a.b/\ufeff"), validateCase{name: "url with BOM", param: "site", reason: "http or https URL"}},
		{withName("site", "http://a.b/\t"), validateCase{name: "url with tab", param: "site", reason: "http or https URL"}},
		{withName("addr", "256.1.1.1"), validateCase{name: "ipv4 out of range", param: "addr", reason: "IPv4 or IPv6"}},
		{withName("addr", "1.2.3"), validateCase{name: "short ipv4", param: "addr", reason: "IPv4 or IPv6"}},
		{withName("addr", "01.2.3.4"), validateCase{name: "ipv4 leading zero", param: "addr", reason: "IPv4 or IPv6"}},
		{withName("addr", "example.com"), validateCase{name: "host name for ip", param: "addr", reason: "IPv4 or IPv6"}},
		{withName("addr", "10.0.0.0/8"), validateCase{name: "prefix for ip", param: "addr", reason: "IPv4 or IPv6"}},
		{withName("addr", "fe80::1%eth0"), validateCase{name: "ipv6 with zone", param: "addr", reason: "IPv4 or IPv6"}},
		{withName("addr", " 1.2.3.4"), validateCase{name: "ip with space", param: "addr", reason: "IPv4 or IPv6"}},
		{withName("day", "2026-2-3"), validateCase{name: "date without zero padding", param: "day", reason: "YYYY-MM-DD"}},
		{withName("day", "26-02-03"), validateCase{name: "two-digit year", param: "day", reason: "YYYY-MM-DD"}},
		{withName("day", "2026/02/03"), validateCase{name: "date with slashes", param: "day", reason: "YYYY-MM-DD"}},
		{withName("day", "2026-02-03T00:00:00Z"), validateCase{name: "timestamp for date", param: "day", reason: "YYYY-MM-DD"}},
		{withName("day", "2026-0a-03"), validateCase{name: "letter in date", param: "day", reason: "YYYY-MM-DD"}},
		{withName("day", "２０２６-02-03"), validateCase{name: "full-width digits", param: "day", reason: "YYYY-MM-DD"}},
		{withName("hex", "#ffff"), validateCase{name: "4-digit hex", param: "hex", reason: "hex color"}},
		{withName("hex", "#ggg"), validateCase{name: "not hex", param: "hex", reason: "hex color"}},
		{withName("hex", "##fff"), validateCase{name: "two #", param: "hex", reason: "hex color"}},
		{withName("hex", ""), validateCase{name: "empty hex", param: "hex", reason: "hex color"}},
		{withName("tags", "a", "tags", "b", "tags", "c", "tags", "d"), validateCase{name: "too many elements", param: "tags", reason: "at most 3 elements, got 4"}},
		{withName("tags", "[]"), validateCase{name: "too few elements", param: "tags", reason: "at least 1 elements, got 0"}},
		{withName("tags", "a", "tags", "toolong"), validateCase{name: "element too long", param: "tags[1]", reason: "at most 4 characters"}},
		{withName("tags", ""), validateCase{name: "empty element", param: "tags[0]", reason: "at least 1 characters"}},
		{withName("tags", `["a",1]`), validateCase{name: "JSON element of wrong type", param: "tags[1]", reason: "must be a string, got a number"}},
		{withName("tags", `["a",null]`), validateCase{name: "JSON null element", param: "tags[1]", reason: "must not be null"}},
		{withName("tags", `["a"`), validateCase{name: "broken JSON array", param: "tags", reason: "not a valid JSON array"}},
		{withName("tags", `["a"] x`), validateCase{name: "JSON array with trailing text", param: "tags", reason: "not a valid JSON array"}},
		{withName("ids", "1", "ids", "x"), validateCase{name: "element not an integer", param: "ids[1]", reason: "must be an integer"}},
		{withName("ids", "1", "ids", "-1"), validateCase{name: "element below Min", param: "ids[1]", reason: "at least 0"}},
		{withName("ids", "[0, 1.5]"), validateCase{name: "JSON element not integral", param: "ids[1]", reason: "must be an integer"}},
		{withName("opts", "fast"), validateCase{name: "object not JSON", param: "opts", reason: "JSON text of type object"}},
		{withName("opts", "[1]"), validateCase{name: "object given an array", param: "opts", reason: "must be an object, got an array"}},
		{withName("opts", `{"mode":"fast"}`, "opts", `{"mode":"slow"}`), validateCase{name: "object given twice", param: "opts", reason: "given 2 times"}},
		{withName("opts", `{"mode":"medium"}`), validateCase{name: "nested enum", param: "opts.mode", reason: "must be one of fast, slow"}},
		{withName("opts", `{"depth":1}`), validateCase{name: "nested required missing", param: "opts.mode", reason: "is required"}},
		{withName("opts", `{"mode":null}`), validateCase{name: "nested required null", param: "opts.mode", reason: "is required"}},
		{withName("opts", `{"mode":"fast","depth":10}`), validateCase{name: "nested above Max", param: "opts.depth", reason: "at most 9"}},
		{withName("opts", `{"mode":"fast","extra":1}`), validateCase{name: "nested unknown field", param: "opts.extra", reason: "unknown field; opts accepts mode, depth"}},
		{withName("points", `[{"x":1},{"label":"a"}]`), validateCase{name: "element's required field", param: "points[1].x", reason: "is required"}},
		{withName("points", `{"x":1}`, "points", `{"x":"1"}`), validateCase{name: "element field of wrong type", param: "points[1].x", reason: "must be a number, got a string"}},
		{withName("points", `{"x":1}`, "points", `nope`), validateCase{name: "element not JSON", param: "points[1]", reason: "JSON text of type object"}},
		{withName("bogus", "1"), validateCase{name: "unknown parameter", param: "bogus", reason: "unknown parameter; this API accepts name, color"}},
		{withName("Name", "abc"), validateCase{name: "names are case-sensitive", param: "Name", reason: "unknown parameter"}},
		{qv("zeta", "1", "alpha", "2"), validateCase{name: "unknown before missing required", param: "alpha", reason: "unknown parameter"}},
		{withName("color", "purple", "zeta", "1"), validateCase{name: "unknown before a wrong value", param: "zeta", reason: "unknown parameter"}},
		{withName("", "1"), validateCase{name: "empty name", param: "", reason: "unknown parameter"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := a.ValidateQuery(tt.in)
			checkCase(t, a, tt.validateCase, out, err, func(n string) bool { _, ok := tt.in[n]; return ok })
		})
	}
}

// checkCase checks the outcome of one validation against its case.
func checkCase(t *testing.T, a *catalog.API, tc validateCase, out catalog.Params, err error, given func(string) bool) {
	t.Helper()
	if tc.reason != "" { // a refusal (Param may be "")
		if out != nil {
			t.Errorf("got params %v with the error", out)
		}
		pe := paramError(t, err, tc.param)
		if !strings.Contains(pe.Reason, tc.reason) {
			t.Errorf("reason %q does not contain %q", pe.Reason, tc.reason)
		}
		return
	}
	if err != nil {
		t.Fatalf("refused: %v", err)
	}
	for k, want := range tc.want {
		if got := out[k]; !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %#v (%T), want %#v (%T)", k, got, got, want, want)
		}
	}
	checkParams(t, a, out, given)
}

func merge(ms ...map[string]any) map[string]any {
	out := map[string]any{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// jsonCases are JSON bodies for fullDef, shared by TestValidateJSON, the schema
// agreement test and the round-trip test.
var jsonCases = []struct {
	body string
	validateCase
}{
	{`{"name":"abc"}`, validateCase{name: "defaults", want: merge(defaults, map[string]any{"name": "abc"})}},
	{`{"name":"héllo"}`, validateCase{name: "5 characters", want: map[string]any{"name": "héllo"}}},
	{`{"name":"h\u00e9llo"}`, validateCase{name: "escaped character", want: map[string]any{"name": "héllo"}}},
	{`{"name":"abc","count":5}`, validateCase{name: "integer", want: map[string]any{"count": int64(5)}}},
	{`{"name":"abc","count":5.0}`, validateCase{name: "integral decimal", want: map[string]any{"count": int64(5)}}},
	{`{"name":"abc","count":1e2}`, validateCase{name: "integral exponent", want: map[string]any{"count": int64(100)}}},
	{`{"name":"abc","count":null}`, validateCase{name: "null is absent", want: map[string]any{"count": int64(10)}}},
	{`{"name":"abc","color":null,"email":null}`, validateCase{name: "nulls are absent", want: map[string]any{"color": "red"}}},
	{`{"name":"abc","level":2}`, validateCase{name: "integer enum", want: map[string]any{"level": int64(2)}}},
	{`{"name":"abc","scale":1}`, validateCase{name: "number enum", want: map[string]any{"scale": 1.0}}},
	{`{"name":"abc","scale":0.5}`, validateCase{name: "number enum fraction", want: map[string]any{"scale": 0.5}}},
	{`{"name":"abc","ratio":-1.5}`, validateCase{name: "number at Min", want: map[string]any{"ratio": -1.5}}},
	{`{"name":"abc","ratio":0}`, validateCase{name: "number zero", want: map[string]any{"ratio": 0.0}}},
	{`{"name":"abc","flag":true}`, validateCase{name: "boolean", want: map[string]any{"flag": true}}},
	{`{"name":"abc","tags":["x","yy"]}`, validateCase{name: "array", want: map[string]any{"tags": []any{"x", "yy"}}}},
	{`{"name":"abc","ids":[0,1.0,2e0]}`, validateCase{name: "integer array", want: map[string]any{"ids": []any{int64(0), int64(1), int64(2)}}}},
	{`{"name":"abc","ids":[]}`, validateCase{name: "empty array", want: map[string]any{"ids": []any{}}}},
	{`{"name":"abc","opts":{"mode":"slow"}}`, validateCase{name: "object with nested default", want: map[string]any{"opts": map[string]any{"mode": "slow", "depth": int64(3)}}}},
	{`{"name":"abc","opts":{"mode":"slow","depth":null}}`, validateCase{name: "nested null is absent", want: map[string]any{"opts": map[string]any{"mode": "slow", "depth": int64(3)}}}},
	{`{"name":"abc","points":[{"x":1},{"x":2.5,"label":"b"}]}`, validateCase{name: "array of objects",
		want: map[string]any{"points": []any{map[string]any{"x": 1.0}, map[string]any{"x": 2.5, "label": "b"}}}}},
	{`{"name":"abc","day":"2026-02-30","hex":"#ABC","addr":"::1","email":"x@y.zz","site":"http://a.b"}`, validateCase{name: "formats",
		want: map[string]any{"day": "2026-02-30", "hex": "#ABC", "addr": "::1", "email": "x@y.zz", "site": "http://a.b"}}},

	{`{}`, validateCase{name: "required missing", param: "name", reason: "is required"}},
	{`{"name":null}`, validateCase{name: "required null", param: "name", reason: "is required"}},
	{`{"name":""}`, validateCase{name: "required empty", param: "name", reason: "must not be empty"}},
	{`{"name":"a"}`, validateCase{name: "too short", param: "name", reason: "at least 2 characters"}},
	{`{"name":"héllos"}`, validateCase{name: "too long in characters", param: "name", reason: "at most 5 characters, got 6"}},
	{`{"name":5}`, validateCase{name: "number for string", param: "name", reason: "must be a string, got a number"}},
	{`{"name":["abc"]}`, validateCase{name: "array for string", param: "name", reason: "must be a string, got an array"}},
	{`{"name":"abc","count":"5"}`, validateCase{name: "string for integer", param: "count", reason: "must be an integer, got a string"}},
	{`{"name":"abc","count":2.5}`, validateCase{name: "fraction for integer", param: "count", reason: "must be an integer, got a number"}},
	{`{"name":"abc","count":true}`, validateCase{name: "boolean for integer", param: "count", reason: "got a boolean"}},
	{`{"name":"abc","count":1e400}`, validateCase{name: "huge integer", param: "count", reason: "must be an integer"}},
	{`{"name":"abc","count":9223372036854775808}`, validateCase{name: "int64 overflow", param: "count", reason: "must be an integer"}},
	{`{"name":"abc","count":0}`, validateCase{name: "below Min", param: "count", reason: "at least 1, got 0"}},
	{`{"name":"abc","count":101}`, validateCase{name: "above Max", param: "count", reason: "at most 100, got 101"}},
	{`{"name":"abc","ratio":"0.5"}`, validateCase{name: "string for number", param: "ratio", reason: "must be a number, got a string"}},
	{`{"name":"abc","ratio":1e400}`, validateCase{name: "infinite number", param: "ratio", reason: "must be a number"}},
	{`{"name":"abc","ratio":2.500001}`, validateCase{name: "number above Max", param: "ratio", reason: "at most 2.5"}},
	{`{"name":"abc","flag":"true"}`, validateCase{name: "string for boolean", param: "flag", reason: "must be true or false, got a string"}},
	{`{"name":"abc","flag":1}`, validateCase{name: "number for boolean", param: "flag", reason: "must be true or false, got a number"}},
	{`{"name":"abc","color":"purple"}`, validateCase{name: "string enum", param: "color", reason: "must be one of red, green, blue"}},
	{`{"name":"abc","level":4}`, validateCase{name: "integer enum", param: "level", reason: "must be one of 1, 2, 3, got 4"}},
	{`{"name":"abc","level":"2"}`, validateCase{name: "string for integer enum", param: "level", reason: "must be an integer"}},
	{`{"name":"abc","scale":1.5}`, validateCase{name: "number enum", param: "scale", reason: "must be one of 0.5, 1, 2, got 1.5"}},
	{`{"name":"abc","email":"a@b"}`, validateCase{name: "email", param: "email", reason: "email address"}},
	{`{"name":"abc","site":"ftp://a.b"}`, validateCase{name: "url", param: "site", reason: "http or https URL"}},
	{`{"name":"abc","addr":"1.2.3.4.5"}`, validateCase{name: "ip", param: "addr", reason: "IPv4 or IPv6"}},
	{`{"name":"abc","day":"2026-2-3"}`, validateCase{name: "date", param: "day", reason: "YYYY-MM-DD"}},
	{`{"name":"abc","hex":"#12345"}`, validateCase{name: "hex color", param: "hex", reason: "hex color"}},
	{`{"name":"abc","tags":"a"}`, validateCase{name: "string for array", param: "tags", reason: "must be an array, got a string"}},
	{`{"name":"abc","tags":[]}`, validateCase{name: "too few elements", param: "tags", reason: "at least 1 elements, got 0"}},
	{`{"name":"abc","tags":["a","b","c","d"]}`, validateCase{name: "too many elements", param: "tags", reason: "at most 3 elements, got 4"}},
	{`{"name":"abc","tags":["a",null]}`, validateCase{name: "null element", param: "tags[1]", reason: "must not be null"}},
	{`{"name":"abc","tags":["a","toolong"]}`, validateCase{name: "element too long", param: "tags[1]", reason: "at most 4 characters"}},
	{`{"name":"abc","tags":["a",["b"]]}`, validateCase{name: "nested array element", param: "tags[1]", reason: "must be a string, got an array"}},
	{`{"name":"abc","ids":[1,-1]}`, validateCase{name: "element below Min", param: "ids[1]", reason: "at least 0, got -1"}},
	{`{"name":"abc","opts":"fast"}`, validateCase{name: "string for object", param: "opts", reason: "must be an object, got a string"}},
	{`{"name":"abc","opts":{}}`, validateCase{name: "nested required missing", param: "opts.mode", reason: "is required"}},
	{`{"name":"abc","opts":{"mode":"fast","depth":10}}`, validateCase{name: "nested above Max", param: "opts.depth", reason: "at most 9, got 10"}},
	{`{"name":"abc","opts":{"mode":"fast","extra":null}}`, validateCase{name: "nested unknown field", param: "opts.extra", reason: "unknown field; opts accepts mode, depth"}},
	{`{"name":"abc","points":[{"x":1},{"label":"b"}]}`, validateCase{name: "element's required field", param: "points[1].x", reason: "is required"}},
	{`{"name":"abc","points":[{"x":1,"y":2}]}`, validateCase{name: "element's unknown field", param: "points[0].y", reason: "unknown field; points[0] accepts x, label"}},
	{`{"name":"abc","points":[5]}`, validateCase{name: "element not an object", param: "points[0]", reason: "must be an object, got a number"}},
	{`{"name":"abc","bogus":null}`, validateCase{name: "unknown null parameter", param: "bogus", reason: "unknown parameter"}},
	{`{"zzz":1,"name":"abc","mmm":2,"aaa":3}`, validateCase{name: "first unknown in sorted order", param: "aaa", reason: "unknown parameter"}},
	{`{"zzz":1}`, validateCase{name: "unknown before missing required", param: "zzz", reason: "unknown parameter"}},
	{`{"name":"abc","color":"purple","zzz":1}`, validateCase{name: "unknown before a wrong value", param: "zzz", reason: "unknown parameter"}},
	{`{"name":"a","count":0}`, validateCase{name: "first wrong in declaration order", param: "name", reason: "at least 2"}},
}

// TestValidateJSON checks JSON-body validation of every type and rule, on bodies
// decoded with UseNumber.
func TestValidateJSON(t *testing.T) {
	a := fullAPI()
	for _, tt := range jsonCases {
		t.Run(tt.name, func(t *testing.T) {
			in := decodeBody(t, tt.body)
			out, err := a.ValidateJSON(in)
			checkCase(t, a, tt.validateCase, out, err, func(n string) bool { return in[n] != nil })
		})
	}
}

// TestValidateJSONGoValues checks the Go values other protocols pass (GraphQL and MCP
// arguments, bodies decoded without UseNumber): float64, int, int32, int64.
func TestValidateJSONGoValues(t *testing.T) {
	a := fullAPI()
	tests := []struct {
		in map[string]any
		validateCase
	}{
		{map[string]any{"count": 7.0}, validateCase{name: "integral float64 for integer", want: map[string]any{"count": int64(7)}}},
		{map[string]any{"count": 7}, validateCase{name: "int for integer", want: map[string]any{"count": int64(7)}}},
		{map[string]any{"count": int32(7)}, validateCase{name: "int32 for integer", want: map[string]any{"count": int64(7)}}},
		{map[string]any{"count": int64(7)}, validateCase{name: "int64 for integer", want: map[string]any{"count": int64(7)}}},
		{map[string]any{"count": float32(7)}, validateCase{name: "float32 for integer", want: map[string]any{"count": int64(7)}}},
		{map[string]any{"count": json.Number("7")}, validateCase{name: "json.Number for integer", want: map[string]any{"count": int64(7)}}},
		{map[string]any{"ratio": 1}, validateCase{name: "int for number", want: map[string]any{"ratio": 1.0}}},
		{map[string]any{"ratio": int64(2)}, validateCase{name: "int64 for number", want: map[string]any{"ratio": 2.0}}},
		{map[string]any{"ratio": int32(-1)}, validateCase{name: "int32 for number", want: map[string]any{"ratio": -1.0}}},
		{map[string]any{"ratio": float32(0.25)}, validateCase{name: "float32 for number", want: map[string]any{"ratio": 0.25}}},
		{map[string]any{"ratio": 0.1}, validateCase{name: "float64 for number", want: map[string]any{"ratio": 0.1}}},
		{map[string]any{"level": json.Number("2")}, validateCase{name: "json.Number in int enum", want: map[string]any{"level": int64(2)}}},
		{map[string]any{"level": 2.0}, validateCase{name: "float64 in int enum", want: map[string]any{"level": int64(2)}}},
		{map[string]any{"level": 3}, validateCase{name: "int in int enum", want: map[string]any{"level": int64(3)}}},
		{map[string]any{"scale": 2}, validateCase{name: "int in number enum", want: map[string]any{"scale": 2.0}}},
		{map[string]any{"ids": []any{1, 2.0, int64(3), json.Number("4")}}, validateCase{name: "mixed integer elements", want: map[string]any{"ids": []any{int64(1), int64(2), int64(3), int64(4)}}}},
		{map[string]any{"opts": map[string]any{"mode": "slow", "depth": 4.0}}, validateCase{name: "float64 in object", want: map[string]any{"opts": map[string]any{"mode": "slow", "depth": int64(4)}}}},

		{map[string]any{"count": 2.5}, validateCase{name: "fractional float64 for integer", param: "count", reason: "must be an integer, got a number"}},
		{map[string]any{"count": math.NaN()}, validateCase{name: "NaN for integer", param: "count", reason: "must be an integer"}},
		{map[string]any{"count": 1e19}, validateCase{name: "float64 beyond int64", param: "count", reason: "must be an integer"}},
		{map[string]any{"count": "7"}, validateCase{name: "string for integer", param: "count", reason: "must be an integer, got a string"}},
		{map[string]any{"count": uint(7)}, validateCase{name: "uint for integer", param: "count", reason: "got a value of type uint"}},
		{map[string]any{"count": json.Number("x")}, validateCase{name: "bad json.Number", param: "count", reason: "must be an integer"}},
		{map[string]any{"count": 1000}, validateCase{name: "int above Max", param: "count", reason: "at most 100, got 1000"}},
		{map[string]any{"ratio": math.Inf(1)}, validateCase{name: "Inf for number", param: "ratio", reason: "must be a number"}},
		{map[string]any{"ratio": math.NaN()}, validateCase{name: "NaN for number", param: "ratio", reason: "must be a number"}},
		{map[string]any{"ratio": "1"}, validateCase{name: "string for number", param: "ratio", reason: "must be a number, got a string"}},
		{map[string]any{"ratio": int64(3)}, validateCase{name: "int64 above Max", param: "ratio", reason: "at most 2.5, got 3"}},
		{map[string]any{"level": 2.5}, validateCase{name: "fraction in int enum", param: "level", reason: "must be an integer"}},
		{map[string]any{"level": int64(5)}, validateCase{name: "int64 not in enum", param: "level", reason: "must be one of 1, 2, 3"}},
		{map[string]any{"tags": []string{"a"}}, validateCase{name: "[]string for array", param: "tags", reason: "must be an array, got a value of type []string"}},
		{map[string]any{"opts": map[string]string{"mode": "fast"}}, validateCase{name: "map[string]string for object", param: "opts", reason: "must be an object"}},
		{map[string]any{"name": []byte("abc")}, validateCase{name: "[]byte for string", param: "name", reason: "must be a string"}},
		{map[string]any{"name": "\xff\xfe"}, validateCase{name: "invalid UTF-8", param: "name", reason: "UTF-8"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := map[string]any{"name": "abc"}
			for k, v := range tt.in {
				in[k] = v
			}
			out, err := a.ValidateJSON(in)
			checkCase(t, a, tt.validateCase, out, err, func(n string) bool { return in[n] != nil })
		})
	}
}

// TestValidateDefaultsNotShared checks that default arrays and objects are fresh
// copies on every call: a handler that changes its params cannot change the next call's
// defaults, nor the API's declared defaults.
func TestValidateDefaultsNotShared(t *testing.T) {
	a := fullAPI()
	validators := map[string]func() (catalog.Params, error){
		"ValidateQuery": func() (catalog.Params, error) { return a.ValidateQuery(withName()) },
		"ValidateJSON":  func() (catalog.Params, error) { return a.ValidateJSON(map[string]any{"name": "abc"}) },
	}
	for name, validate := range validators {
		t.Run(name, func(t *testing.T) {
			first, err := validate()
			if err != nil {
				t.Fatal(err)
			}
			first["tags"].([]any)[0] = "mutated"
			opts := first["opts"].(map[string]any)
			opts["mode"] = "mutated"
			opts["depth"] = int64(99)
			delete(first, "color")

			second, err := validate()
			if err != nil {
				t.Fatal(err)
			}
			for k, want := range defaults {
				if !reflect.DeepEqual(second[k], want) {
					t.Errorf("after mutating a result, default %s = %#v, want %#v", k, second[k], want)
				}
			}
			for _, p := range a.Params {
				if want, ok := defaults[p.Name]; ok && !reflect.DeepEqual(p.Default, want) {
					t.Errorf("declared default of %s changed to %#v", p.Name, p.Default)
				}
			}
		})
	}
	// A given array or object is copied too: changing the result leaves the input alone.
	in := map[string]any{"name": "abc", "tags": []any{"x"}, "opts": map[string]any{"mode": "slow"}}
	out, err := a.ValidateJSON(in)
	if err != nil {
		t.Fatal(err)
	}
	out["tags"].([]any)[0] = "mutated"
	out["opts"].(map[string]any)["mode"] = "mutated"
	if in["tags"].([]any)[0] != "x" || in["opts"].(map[string]any)["mode"] != "slow" {
		t.Errorf("changing the result changed the input: %v", in)
	}
	if _, ok := in["opts"].(map[string]any)["depth"]; ok {
		t.Error("validation wrote a nested default into the caller's input")
	}
}

// TestValidateUnknownParam checks the message that lists the accepted parameters, and
// that the reported unknown parameter is the first in sorted order on every run.
func TestValidateUnknownParam(t *testing.T) {
	a := fullAPI()
	var names []string
	for _, p := range a.Params {
		names = append(names, p.Name)
	}
	want := "unknown parameter; this API accepts " + strings.Join(names, ", ")

	_, err := a.ValidateJSON(map[string]any{"name": "abc", "colour": "red"})
	if pe := paramError(t, err, "colour"); pe.Reason != want {
		t.Errorf("reason = %q, want %q", pe.Reason, want)
	}
	_, err = a.ValidateQuery(withName("colour", "red"))
	if pe := paramError(t, err, "colour"); pe.Reason != want {
		t.Errorf("query reason = %q, want %q", pe.Reason, want)
	}

	// Many unknown names: map order varies from run to run, the answer must not.
	in := map[string]any{"name": "abc"}
	q := withName()
	for _, n := range []string{"q9", "k", "b2", "zz", "b10", "m", "Z", "b1", "x"} {
		in[n] = 1
		q.Set(n, "1")
	}
	for range 50 {
		_, err := a.ValidateJSON(in)
		paramError(t, err, "Z")
		_, err = a.ValidateQuery(q)
		paramError(t, err, "Z")
	}

	// The same holds for the fields of an object, at any depth.
	nested := map[string]any{"name": "abc",
		"opts":   map[string]any{"mode": "fast", "zz": 1, "b": 2, "AX20": 3, "": nil},
		"points": []any{map[string]any{"x": 1}, map[string]any{"x": 1, "q": 1, "p": 1, "label": "l"}}}
	for range 50 {
		_, err := a.ValidateJSON(nested)
		paramError(t, err, "opts.")
		delete(nested["opts"].(map[string]any), "")
		_, err = a.ValidateJSON(nested)
		paramError(t, err, "opts.AX20")
		nested["opts"].(map[string]any)[""] = nil
		_, err = a.ValidateQuery(withName("points", `[{"x":1},{"x":1,"q":1,"p":1}]`))
		paramError(t, err, "points[1].p")
	}

	// A name that is not valid UTF-8 or is very long is quoted and cut in the report,
	// at the top level and in objects.
	long := strings.Repeat("x", 100)
	var pe *catalog.ParamError
	_, err = a.ValidateJSON(map[string]any{"name": "abc", "opts": map[string]any{"mode": "fast", "\xffbad": 1}})
	paramError(t, err, `opts."\xffbad"`)
	_, err = a.ValidateJSON(map[string]any{"name": "abc", "opts": map[string]any{"mode": "fast", long: 1}})
	paramError(t, err, `opts."`+strings.Repeat("x", 64)+`..."`)
	_, err = a.ValidateJSON(map[string]any{"name": "abc", "\xffbad": 1})
	paramError(t, err, `"\xffbad"`)
	_, err = a.ValidateQuery(withName(long, "1"))
	pe = paramError(t, err, `"`+strings.Repeat("x", 64)+`..."`)
	if !strings.Contains(pe.Reason, "unknown parameter") {
		t.Errorf("reason = %q", pe.Reason)
	}

	// An API without parameters says so.
	none := mustCompile(t, catalog.API{ID: "none", Method: http.MethodGet, Cost: 1})
	_, err = none.ValidateQuery(qv("x", "1"))
	if pe := paramError(t, err, "x"); pe.Reason != "unknown parameter; this API takes no parameters" {
		t.Errorf("reason = %q", pe.Reason)
	}
	if out, err := none.ValidateJSON(nil); err != nil || len(out) != 0 {
		t.Errorf("ValidateJSON(nil) on an API without parameters = %v, %v", out, err)
	}
}

// TestValidateErrorMessage checks the full text of a ParamError.
func TestValidateErrorMessage(t *testing.T) {
	_, err := fullAPI().ValidateJSON(map[string]any{"name": "abc", "count": 500})
	const want = `parameter "count": must be at most 100, got 500`
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %s", err, want)
	}
	// A long or odd value is quoted and cut in the message.
	_, err = fullAPI().ValidateQuery(withName("count", strings.Repeat("9", 50)+"\x00"))
	pe := paramError(t, err, "count")
	if !strings.Contains(pe.Reason, `"`+strings.Repeat("9", 40)+`..."`) {
		t.Errorf("reason %q does not quote the cut value", pe.Reason)
	}
}

// TestFileAPIURLParam checks the implicit "url" parameter of a file API.
func TestFileAPIURLParam(t *testing.T) {
	a := mustCompile(t, fileDef())
	const u = "https://example.com/cat.png"

	out, err := a.ValidateQuery(qv("url", u))
	if err != nil || out["url"] != u || out["mode"] != "fast" {
		t.Errorf("ValidateQuery(url) = %v, %v", out, err)
	}
	out, err = a.ValidateJSON(map[string]any{"url": u, "mode": "slow"})
	if err != nil || out["url"] != u || out["mode"] != "slow" {
		t.Errorf("ValidateJSON(url) = %v, %v", out, err)
	}
	// The URL form is optional: the file may come as an upload.
	out, err = a.ValidateQuery(url.Values{})
	if err != nil {
		t.Errorf("ValidateQuery without url: %v", err)
	}
	if _, ok := out["url"]; ok {
		t.Errorf("url present though not given: %v", out)
	}
	for _, bad := range []string{"ftp://example.com/a.png", "/local/path.png", "file:///etc/passwd", "https://" + strings.Repeat("a", 2048)} {
		_, err := a.ValidateQuery(qv("url", bad))
		paramError(t, err, "url")
		_, err = a.ValidateJSON(map[string]any{"url": bad})
		paramError(t, err, "url")
	}
	_, err = a.ValidateJSON(map[string]any{"url": 5})
	paramError(t, err, "url")
	_, err = a.ValidateQuery(qv("url", u, "url", u))
	paramError(t, err, "url")

	// The unknown-parameter message lists it, and the file field is not a parameter.
	_, err = a.ValidateJSON(map[string]any{"image": "x"})
	if pe := paramError(t, err, "image"); pe.Reason != "unknown parameter; this API accepts mode, url" {
		t.Errorf("reason = %q", pe.Reason)
	}

	// The input schema has it.
	s := decodeSchema(t, a.InputSchema())
	props := s["properties"].(map[string]any)
	urlProp, ok := props["url"].(map[string]any)
	if !ok {
		t.Fatalf("input schema has no url property: %s", a.InputSchema())
	}
	if urlProp["type"] != "string" || urlProp["format"] != "uri" || fmt.Sprint(urlProp["maxLength"]) != "2048" {
		t.Errorf("url property = %v", urlProp)
	}
	if urlProp["description"] == nil || !strings.Contains(urlProp["description"].(string), "image") {
		t.Errorf("url description does not mention the file field: %v", urlProp["description"])
	}
	if _, ok := s["required"]; ok {
		t.Errorf("file API input schema requires something: %v", s["required"])
	}
	if _, ok := props["image"]; ok {
		t.Error("the file field is a property of the input schema")
	}
}

// TestValidateUncompiled documents that an API must be compiled: validation of a bare
// definition panics rather than letting everything through.
func TestValidateUncompiled(t *testing.T) {
	def := baseDef()
	if def.InputSchema() != nil || def.ResultSchema() != nil {
		t.Error("an uncompiled API has schemas")
	}
	defer func() {
		if recover() == nil {
			t.Error("ValidateJSON on an uncompiled API did not panic")
		}
	}()
	_, _ = def.ValidateJSON(map[string]any{"text": "x"})
}

// TestParamsAccessors checks the typed getters of Params.
func TestParamsAccessors(t *testing.T) {
	p := catalog.Params{"s": "x", "i": int64(3), "f": 1.5, "b": true, "wrong": 7}
	if p.String("s") != "x" || p.Int("i") != 3 || p.Float("f") != 1.5 || !p.Bool("b") {
		t.Errorf("getters: %q %d %v %v", p.String("s"), p.Int("i"), p.Float("f"), p.Bool("b"))
	}
	if p.String("missing") != "" || p.Int("wrong") != 0 || p.Float("i") != 0 || p.Bool("s") {
		t.Error("getters of absent or mistyped parameters are not zero")
	}
	err := catalog.Reject("date %q does not exist", "2026-02-30")
	var re *catalog.RejectError
	if !errors.As(err, &re) || re.Message != `date "2026-02-30" does not exist` || err.Error() != re.Message {
		t.Errorf("Reject = %#v", err)
	}
}
