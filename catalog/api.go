package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// An API is one single-purpose API of the catalog: an identifier, a description for people
// and generated clients, a credit cost, a typed parameter schema and the handler that does
// the work.
//
// Hosts build an API as a struct literal and hand it to [Registry.Register], which checks
// it, copies it and compiles its schemas. The *API values a registry returns are shared and
// must not be modified.
type API struct {
	// ID identifies the API in every protocol: the REST path /v1/<ID>, the MCP tool name
	// and, after the naming rules of [RootFieldName], the GraphQL root field. It is made of
	// lowercase letters, digits and single hyphens, at most 64 characters.
	ID string `json:"id"`

	// Title is a short human name ("Hash"). Description says what the API does, in one or
	// two sentences. Category groups APIs in listings ("Security", "Date and time").
	Title       string `json:"title"`
	Description string `json:"description"`
	Category    string `json:"category,omitempty"`

	// Method is "GET" (parameters in the query string) or "POST" (a JSON body, or a
	// multipart upload for file APIs). File APIs must use POST.
	Method string `json:"method"`

	// Cost is the number of credits one call spends. Zero makes a free API: its calls
	// are authenticated, rate-limited and counted in the usage as any other, and never
	// charged, so they are served even when the balance is spent. It must not be
	// negative.
	Cost int64 `json:"cost"`

	// Params declares the parameters, in the order they are documented.
	Params []Param `json:"params"`

	// File, when set, makes this a file API: the caller uploads a file in the named
	// multipart field or passes a "url" parameter that the service fetches. File APIs
	// are served over REST and MCP (URL form only), never over GraphQL.
	File *FileField `json:"file,omitempty"`

	// Result declares the fields of the data object the handler returns. It is used
	// for output schemas (OpenAPI, MCP, GraphQL types). An API with no declared fields
	// has a free-form result.
	Result []Field `json:"result,omitempty"`

	// Handler does the work. It receives validated parameters. It is required to
	// register the API; clients that only validate input leave it nil.
	Handler Handler `json:"-"`

	// compiled is filled in by compile: lookup tables and the schema documents.
	compiled *compiled
}

// A FileField describes the file a file API accepts.
type FileField struct {
	// Name is the multipart form field that carries the upload ("image").
	Name string `json:"name"`
	// Types lists the accepted media types ("image/png"). The service identifies the
	// type from the file's content, not from what the client claims.
	Types []string `json:"types"`
	// MaxBytes caps the file size. It must be positive.
	MaxBytes int64 `json:"max_bytes"`
	// Description documents the field.
	Description string `json:"description,omitempty"`
}

// URLParam is the name of the parameter that carries the address of the file in the URL
// form of a file API. Every file API accepts it; it must not be declared in Params.
const URLParam = "url"

// A Field is one field of an API's result.
type Field struct {
	// Name is the JSON name of the field, exactly as the handler writes it. It may hold
	// characters that GraphQL names cannot; [GraphQLName] maps it.
	Name string `json:"name"`
	// Type is the field's type. [JSON] marks a free-form value.
	Type Type `json:"type"`
	// Items describes the elements of an [Array] field.
	Items *Field `json:"items,omitempty"`
	// Fields describes the members of an [Object] field.
	Fields []Field `json:"fields,omitempty"`
	// Description documents the field.
	Description string `json:"description,omitempty"`
}

// A Handler serves calls to one API.
//
// ServeAPI returns the result, which becomes the data member of the response envelope and
// must encode to a JSON object (a struct with json tags or a map[string]any). It should
// return promptly when ctx is done.
//
// To say that a well-formed input is wrong (a date that does not exist, a value the API
// cannot process), return an error made by [Reject]: the caller gets a 400 with the
// message and the call is charged (the API did its work on a valid request). Any other
// error, a panic or a timeout counts as a failure on the service's side: the caller
// gets a 5xx and the credits are refunded.
type Handler interface {
	ServeAPI(ctx context.Context, req *Request) (any, error)
}

// HandlerFunc adapts a function to the [Handler] interface.
type HandlerFunc func(ctx context.Context, req *Request) (any, error)

// ServeAPI calls f(ctx, req).
func (f HandlerFunc) ServeAPI(ctx context.Context, req *Request) (any, error) { return f(ctx, req) }

// A Request is one validated call to an API.
type Request struct {
	// API is the API being called.
	API *API
	// Params holds the validated parameters with defaults applied. Values are string,
	// int64, float64, bool, []any or map[string]any according to the declared types.
	Params Params
	// File is the uploaded or fetched file of a file API, nil otherwise.
	File *File
	// AccountID and KeyID identify the caller. KeyID is empty for session tokens.
	AccountID, KeyID string

	charge  int64 // what Charge set
	charged bool  // whether Charge set it
}

// ErrChargeOutOfRange is the error of a [Request.Charge] below zero or above the API's
// cost.
var ErrChargeOutOfRange = errors.New("catalog: a call may be charged from 0 to its API's cost")

// Charge sets what the call is charged if it succeeds (or is rejected): from 0 to the
// API's Cost, which its admission reserved; the rest is refunded when the call is
// settled. A handler whose price depends on the work (a cost per item, per unit it
// reports) declares the most a call may cost as the API's Cost, and charges less. A
// call that fails on the service's side is refunded whole, whatever it set. Charge
// out of range returns [ErrChargeOutOfRange] and changes nothing. Like the rest of the
// Request it is not safe for concurrent use: call it before the handler returns, from
// one goroutine at a time, as the service reads it then.
func (r *Request) Charge(credits int64) error {
	if credits < 0 || r.API == nil || credits > r.API.Cost {
		return ErrChargeOutOfRange
	}
	r.charge, r.charged = credits, true
	return nil
}

// Charged returns what the call is charged if it succeeds: what [Request.Charge] set,
// or the API's cost.
func (r *Request) Charged() int64 {
	if r.charged {
		return r.charge
	}
	if r.API == nil {
		return 0
	}
	return r.API.Cost
}

// A File is the content of a file passed to a file API.
type File struct {
	// Name is the client's file name or the last segment of the fetched URL. It is
	// informational and may be empty.
	Name string
	// ContentType is the media type detected from the content.
	ContentType string
	// Data is the file content.
	Data []byte
}

// Params holds validated parameter values by name.
type Params map[string]any

// String returns the string parameter name, or "" when it is absent.
func (p Params) String(name string) string { s, _ := p[name].(string); return s }

// Int returns the integer parameter name, or 0 when it is absent.
func (p Params) Int(name string) int64 { n, _ := p[name].(int64); return n }

// Float returns the number parameter name, or 0 when it is absent.
func (p Params) Float(name string) float64 { f, _ := p[name].(float64); return f }

// Bool returns the boolean parameter name, or false when it is absent.
func (p Params) Bool(name string) bool { b, _ := p[name].(bool); return b }

// A RejectError is returned by a handler that judges a well-formed input wrong. The
// caller gets a 400 with the message, and the call is charged.
type RejectError struct {
	Message string
}

func (e *RejectError) Error() string { return e.Message }

// Reject returns a [*RejectError] with a formatted message that tells the caller what is
// wrong with the input, for example Reject("date %q does not exist", s).
func Reject(format string, args ...any) error {
	return &RejectError{Message: fmt.Sprintf(format, args...)}
}

// InputSchema returns the JSON Schema (draft 2020-12) of the API's input: an object with
// one property per parameter, and for file APIs the "url" property of the URL form. It
// returns nil for an API that was not compiled by [Compile] or a [Registry].
func (a *API) InputSchema() json.RawMessage {
	if a.compiled == nil {
		return nil
	}
	return a.compiled.inputSchema
}

// ResultSchema returns the JSON Schema (draft 2020-12) of the API's data object; an API
// without declared result fields has the schema of any object. It returns nil for an API
// that was not compiled by [Compile] or a [Registry].
func (a *API) ResultSchema() json.RawMessage {
	if a.compiled == nil {
		return nil
	}
	return a.compiled.resultSchema
}

// MarshalJSON encodes the API's public description: every field but the handler, plus
// its input and result schemas (for a compiled API). This is the form GET /v1/catalog
// serves and clients decode.
func (a *API) MarshalJSON() ([]byte, error) {
	type plain API // without methods, to avoid recursion
	return json.Marshal(struct {
		*plain
		InputSchema  json.RawMessage `json:"input_schema,omitempty"`
		ResultSchema json.RawMessage `json:"result_schema,omitempty"`
	}{(*plain)(a), a.InputSchema(), a.ResultSchema()})
}

// FileURLParam returns the "url" parameter of a compiled file API, the address of
// its file in the URL form ([URLParam]), with its rules; false for an API that takes no
// file or was not compiled.
func (a *API) FileURLParam() (Param, bool) {
	if a.File == nil || a.compiled == nil {
		return Param{}, false
	}
	if p, ok := a.compiled.byName[URLParam]; ok {
		return p.clone(), true
	}
	return Param{}, false
}
