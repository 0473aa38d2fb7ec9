package catalog

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strings"
)

// ErrInvalidAPI is wrapped by every error that reports a wrong API definition.
var ErrInvalidAPI = errors.New("catalog: invalid API definition")

// ReservedIDs are the API ids that would shadow the service's own endpoints under /v1/
// (account: the account holders' self-service API under /v1/account/).
// ("batch" is not one: an API named batch is called at /v1/batch, its batches sent to
// /v1/batch/batch.)
var ReservedIDs = []string{"account", "analytics", "catalog", "graphql", "mcp"}

var (
	idPattern    = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$`)
	namePattern  = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.-]{0,63}$`)
	mediaPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9!#$&^_.+-]*/[a-z0-9][a-z0-9!#$&^_.+-]*$`)
)

// compiled is what Compile derives from a definition: lookup tables and schemas.
type compiled struct {
	params       []Param           // the declared parameters, plus "url" for file APIs
	byName       map[string]*Param // params by name
	names        string            // "a, b, c", for error messages
	inputSchema  json.RawMessage
	resultSchema json.RawMessage
}

// Compile checks an API definition and returns a compiled copy that can validate input
// and describe itself. The copy shares nothing mutable with def. Registries compile the
// APIs they are given, so hosts rarely call it directly.
//
// The checks: the id's shape and that it is not reserved; method and cost;
// every parameter's name, type and rules, with defaults, enum values and examples that
// obey them; result fields of known types; and GraphQL names (see [GraphQLName]) that are
// usable and do not collide among the parameters or among the fields of one object.
// Errors wrap [ErrInvalidAPI] and name the API and the offending part.
func Compile(def API) (*API, error) {
	a := def
	a.Params = cloneParams(def.Params)
	a.Result = cloneFields(def.Result)
	if def.File != nil {
		f := *def.File
		f.Types = slices.Clone(def.File.Types)
		a.File = &f
	}
	if err := a.check(); err != nil {
		return nil, fmt.Errorf("%w: api %q: %w", ErrInvalidAPI, def.ID, err)
	}
	if a.Title == "" {
		a.Title = a.ID
	}
	c := &compiled{params: a.Params, byName: make(map[string]*Param)}
	if a.File != nil {
		c.params = append(slices.Clip(c.params), Param{
			Name:        URLParam,
			Type:        String,
			Format:      FormatURL,
			MaxLength:   Len(2048),
			Description: "Address of the file to fetch, instead of uploading it in the " + a.File.Name + " field.",
		})
	}
	names := make([]string, len(c.params))
	for i := range c.params {
		c.byName[c.params[i].Name] = &c.params[i]
		names[i] = c.params[i].Name
	}
	c.names = strings.Join(names, ", ")
	a.compiled = c
	c.inputSchema = mustJSON(inputSchema(&a))
	c.resultSchema = mustJSON(resultSchema(&a))
	return &a, nil
}

func (a *API) check() error {
	switch {
	case !idPattern.MatchString(a.ID) || strings.Contains(a.ID, "--"):
		return errors.New("the id must be 1 to 64 lowercase letters, digits and single hyphens, not starting or ending with a hyphen")
	case slices.Contains(ReservedIDs, a.ID):
		return fmt.Errorf("the id is reserved for the service's own endpoint /v1/%s", a.ID)
	case a.Method != http.MethodGet && a.Method != http.MethodPost:
		return fmt.Errorf("method %q: must be GET or POST", a.Method)
	case a.Cost < 0:
		return fmt.Errorf("cost %d: must be 0 (a free API) or more credits", a.Cost)
	case a.File != nil && a.Method != http.MethodPost:
		return errors.New("a file API must use POST")
	}
	if root := RootFieldName(a.ID); checkGraphQLName(root) != "" {
		return fmt.Errorf("the id %s", checkGraphQLName(root))
	}
	if f := a.File; f != nil {
		if !namePattern.MatchString(f.Name) || f.Name == URLParam {
			return fmt.Errorf("file field %q: the name must start with a letter, hold letters, digits, _ . -, and not be %q", f.Name, URLParam)
		}
		if len(f.Types) == 0 {
			return fmt.Errorf("file field %q: list the accepted media types", f.Name)
		}
		for _, t := range f.Types {
			if !mediaPattern.MatchString(t) {
				return fmt.Errorf("file field %q: %q is not a lowercase media type such as image/png", f.Name, t)
			}
		}
		if f.MaxBytes <= 0 {
			return fmt.Errorf("file field %q: MaxBytes must be positive", f.Name)
		}
		for _, p := range a.Params {
			if p.Name == URLParam || p.Name == f.Name {
				return fmt.Errorf("parameter %q: the name is taken by the file field of this file API", p.Name)
			}
		}
	}
	if err := checkParams(a.Params, ""); err != nil {
		return err
	}
	// The GraphQL gateway binds arguments by name ignoring case and underscores, so two
	// parameters that differ only in those would be ambiguous there.
	folded := make(map[string]string, len(a.Params))
	for _, p := range a.Params {
		f := strings.ToLower(strings.ReplaceAll(GraphQLName(p.Name), "_", ""))
		if other, dup := folded[f]; dup {
			return fmt.Errorf("parameters %q and %q differ only in case or underscores, which the GraphQL gateway cannot tell apart; rename one", other, p.Name)
		}
		folded[f] = p.Name
	}
	return checkFields(a.Result, "result field ")
}

func checkParams(params []Param, prefix string) error {
	seen := make(map[string]string, len(params))
	for i := range params {
		p := &params[i]
		where := "parameter " + prefix + p.Name
		if !namePattern.MatchString(p.Name) {
			return fmt.Errorf("parameter %s%q: a name starts with a letter and holds at most 64 letters, digits and _ . -", prefix, p.Name)
		}
		gql := GraphQLName(p.Name)
		if msg := checkGraphQLName(gql); msg != "" {
			return fmt.Errorf("%s %s", where, msg)
		}
		if other, dup := seen[gql]; dup {
			return fmt.Errorf("%s: collides with %q, both map to GraphQL name %s", where, other, gql)
		}
		seen[gql] = p.Name
		if err := p.check(prefix + p.Name); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
	}
	return nil
}

// check verifies that the rules fit the type, checks the members of arrays and objects,
// then normalizes the values the definition carries. path names p in errors.
func (p *Param) check(path string) error {
	switch p.Type {
	case String, Integer, Number, Boolean, Array, Object:
	default:
		return fmt.Errorf("type %q: must be string, integer, number, boolean, array or object", p.Type)
	}
	num := p.Type == Integer || p.Type == Number
	switch {
	case (p.Items != nil) != (p.Type == Array):
		return errors.New("the Items field is required for arrays and allowed for arrays only")
	case p.Fields != nil && p.Type != Object:
		return errors.New("the Fields field is allowed for objects only")
	case p.Type == Object && len(p.Fields) == 0:
		return errors.New("an object declares its Fields")
	case (p.Min != nil || p.Max != nil) && !num:
		return errors.New("the Min and Max rules apply to integers and numbers only")
	case p.Min != nil && p.Max != nil && *p.Min > *p.Max:
		return errors.New("the Min rule is greater than Max")
	case (p.MinLength != nil || p.MaxLength != nil) && p.Type != String && p.Type != Array:
		return errors.New("the MinLength and MaxLength rules apply to strings and arrays only")
	case p.MinLength != nil && *p.MinLength < 0, p.MaxLength != nil && *p.MaxLength < 0:
		return errors.New("the MinLength and MaxLength rules cannot be negative")
	case p.MinLength != nil && p.MaxLength != nil && *p.MinLength > *p.MaxLength:
		return errors.New("the MinLength rule is greater than MaxLength")
	case p.Enum != nil && p.Type != String && !num:
		return errors.New("the Enum rule applies to strings, integers and numbers only")
	case p.Enum != nil && len(p.Enum) == 0:
		return errors.New("the Enum rule is empty")
	case p.Format != "" && p.Type != String:
		return errors.New("the Format rule applies to strings only")
	case p.Format != "" && formatHint[p.Format] == "":
		return fmt.Errorf("format %q: must be email, url, ip, date or hexcolor", p.Format)
	case p.Required && p.Default != nil:
		return errors.New("a required parameter cannot have a default")
	}
	for _, b := range []*float64{p.Min, p.Max} {
		if b != nil && (math.IsNaN(*b) || math.IsInf(*b, 0)) {
			return errors.New("the Min and Max rules must be finite")
		}
	}
	switch p.Type {
	case Array:
		if p.Items.Type == Array {
			return errors.New("arrays of arrays are not supported; use an array of objects")
		}
		if err := p.Items.check(path + "[]"); err != nil {
			return fmt.Errorf("items: %w", err)
		}
	case Object:
		if err := checkParams(p.Fields, path+"."); err != nil {
			return err
		}
	}
	return p.normalize()
}

// normalize converts Enum values, Default and Example to the declared type (so that
// an int enum becomes int64) and checks them against the rules.
func (p *Param) normalize() error {
	if p.Enum != nil {
		rules := *p // every rule but the enum itself, which is being normalized
		rules.Enum = nil
		for i, v := range p.Enum {
			n, err := rules.fromJSON(jsonish(v), p.Name)
			if err != nil {
				return fmt.Errorf("enum value %v: %w", v, err)
			}
			if slices.Contains(p.Enum[:i], n) {
				return fmt.Errorf("enum value %v is listed twice", v)
			}
			p.Enum[i] = n
		}
	}
	for _, v := range []*any{&p.Default, &p.Example} {
		if *v == nil {
			continue
		}
		n, err := p.fromJSON(jsonish(*v), p.Name)
		if err != nil {
			return fmt.Errorf("default or example %v does not obey the rules: %w", *v, err)
		}
		*v = n
	}
	return nil
}

func checkFields(fields []Field, where string) error {
	seen := make(map[string]string, len(fields))
	for _, f := range fields {
		w := where + fmt.Sprintf("%q", f.Name)
		if f.Name == "" {
			return fmt.Errorf("%s: a field needs a name", w)
		}
		gql := GraphQLName(f.Name)
		if msg := checkGraphQLName(gql); msg != "" {
			return fmt.Errorf("%s %s", w, msg)
		}
		if other, dup := seen[gql]; dup {
			return fmt.Errorf("%s collides with %q: both map to GraphQL name %s", w, other, gql)
		}
		seen[gql] = f.Name
		if err := f.check(w); err != nil {
			return err
		}
	}
	return nil
}

func (f *Field) check(where string) error {
	switch f.Type {
	case String, Integer, Number, Boolean, JSON:
	case Array:
	case Object:
		if len(f.Fields) == 0 {
			return fmt.Errorf("%s: an object declares its Fields (use type json for a free-form object)", where)
		}
	default:
		return fmt.Errorf("%s: type %q: must be string, integer, number, boolean, array, object or json", where, f.Type)
	}
	if (f.Items != nil) != (f.Type == Array) {
		return fmt.Errorf("%s: Items is required for arrays and allowed for arrays only", where)
	}
	if f.Fields != nil && f.Type != Object {
		return fmt.Errorf("%s: Fields is allowed for objects only", where)
	}
	if f.Items != nil {
		if err := f.Items.check(where + " items"); err != nil {
			return err
		}
	}
	return checkFields(f.Fields, where+".")
}

func cloneParams(ps []Param) []Param {
	if ps == nil {
		return nil
	}
	out := make([]Param, len(ps))
	for i, p := range ps {
		out[i] = p.clone()
	}
	return out
}

func (p Param) clone() Param {
	if p.Items != nil {
		items := p.Items.clone()
		p.Items = &items
	}
	p.Fields = cloneParams(p.Fields)
	p.Min, p.Max = clonePtr(p.Min), clonePtr(p.Max)
	p.MinLength, p.MaxLength = clonePtr(p.MinLength), clonePtr(p.MaxLength)
	p.Enum = slices.Clone(p.Enum)
	p.Default, p.Example = cloneValue(p.Default), cloneValue(p.Example)
	return p
}

func cloneFields(fs []Field) []Field {
	if fs == nil {
		return nil
	}
	out := make([]Field, len(fs))
	for i, f := range fs {
		if f.Items != nil {
			items := cloneFields([]Field{*f.Items})[0]
			f.Items = &items
		}
		f.Fields = cloneFields(f.Fields)
		out[i] = f
	}
	return out
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// jsonish turns a Go value written in a definition ([]string{"a"}, a struct) into the
// JSON-like form that validation works on. Plain values pass through.
func jsonish(v any) any {
	switch v.(type) {
	case nil, string, bool, int, int32, int64, float32, float64, json.Number, []any, map[string]any:
		return v
	}
	b, err := json.Marshal(v)
	if err != nil {
		return v // validation reports the type
	}
	out, err := decodeJSONText(string(b))
	if err != nil {
		return v
	}
	return out
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("catalog: cannot encode a schema: " + err.Error()) // values are built here from plain types
	}
	return b
}
