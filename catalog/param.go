package catalog

// A Type is the type of a parameter or result field.
type Type string

// The types a parameter or result field can have.
const (
	String  Type = "string"
	Integer Type = "integer" // a whole number that fits in int64
	Number  Type = "number"  // a finite float64
	Boolean Type = "boolean"
	Array   Type = "array"  // a list of values of the Items type
	Object  Type = "object" // a JSON object with the declared Fields
	// JSON is a free-form value. It is allowed in result fields only.
	JSON Type = "json"
)

// A Format constrains the shape of a string parameter.
type Format string

// The formats a string parameter can declare. They check shape only: a date in the
// right shape that does not exist (2026-02-30) passes, and it is the API's job to
// reject it (which is charged: the API did its work on a well-formed request).
const (
	FormatEmail    Format = "email"    // local@domain.tld, no spaces
	FormatURL      Format = "url"      // an absolute http or https URL with a host
	FormatIP       Format = "ip"       // an IPv4 or IPv6 address
	FormatDate     Format = "date"     // YYYY-MM-DD
	FormatHexColor Format = "hexcolor" // #RGB or #RRGGBB, the # optional
)

// A Param declares one parameter of an API.
//
// The zero value of every rule means "no rule". Bounds are pointers so that 0 can be a
// bound; [Num] and [Len] make them readable in literals:
//
//	catalog.Param{Name: "count", Type: catalog.Integer, Min: catalog.Num(1), Max: catalog.Num(100), Default: 1}
type Param struct {
	// Name is the parameter's name in query strings and JSON bodies. It starts with a
	// letter and holds letters, digits, underscores, hyphens and dots, at most 64
	// characters.
	Name string `json:"name,omitempty"`
	// Type is the parameter's type; [JSON] is not allowed.
	Type Type `json:"type"`
	// Items describes the elements of an [Array] parameter (its Name is ignored).
	Items *Param `json:"items,omitempty"`
	// Fields describes the members of an [Object] parameter.
	Fields []Param `json:"fields,omitempty"`

	// Required parameters must be present and not null; a required string must not be
	// empty.
	Required bool `json:"required,omitempty"`
	// Default is used when an optional parameter is absent. It must obey the rules.
	Default any `json:"default,omitempty"`

	// Min and Max bound an [Integer] or [Number], inclusive.
	Min *float64 `json:"min,omitempty"`
	Max *float64 `json:"max,omitempty"`
	// MinLength and MaxLength bound the length of a [String] (in characters) or of an
	// [Array] (in elements), inclusive.
	MinLength *int `json:"min_length,omitempty"`
	MaxLength *int `json:"max_length,omitempty"`
	// Enum lists the allowed values of a String, Integer or Number parameter.
	Enum []any `json:"enum,omitempty"`
	// Format constrains the shape of a [String].
	Format Format `json:"format,omitempty"`

	// Description documents the parameter for people and generated clients.
	Description string `json:"description,omitempty"`
	// Example is a valid value shown in documentation. It must obey the rules.
	Example any `json:"example,omitempty"`
}

// Num returns a pointer to v, for [Param.Min] and [Param.Max].
func Num(v float64) *float64 { return &v }

// Len returns a pointer to n, for [Param.MinLength] and [Param.MaxLength].
func Len(n int) *int { return &n }
