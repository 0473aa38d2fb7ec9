package gql

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	graphql "github.com/graph-gophers/graphql-go"
	gqlerrors "github.com/graph-gophers/graphql-go/errors"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/internal/cleantext"
	"github.com/tollgate-dev/tollgate/wire"
)

// Options configures the GraphQL handler. The zero value is the default; every field is
// optional.
type Options struct {
	// Disabled turns the gateway off: every request is answered with
	// GRAPHQL_NOT_SUPPORTED (403), without authentication.
	Disabled bool
	// Edge holds the HTTP settings every door shares: the trusted proxies, the
	// origins CORS allows, the IETF rate headers. The default is [edge.Default].
	Edge *edge.Edge
	// Limits bound the queries the gateway accepts.
	Limits Limits
	// Logger receives failures inside the gateway. The default is slog.Default().
	Logger *slog.Logger
}

// Limits bound the queries the gateway accepts; a query beyond one is answered with
// QUERY_TOO_COMPLEX (400) before anything runs. Zero fields take the defaults.
type Limits struct {
	// MaxQueryBytes bounds the length of the query text. Default 16 KiB.
	MaxQueryBytes int
	// MaxDepth bounds the depth of the data a query selects, counting the root field
	// as 1; introspection is not counted. Default 10.
	MaxDepth int
	// MaxRootFields bounds the number of API fields of a query, aliases counted.
	// Default 20.
	MaxRootFields int
	// MaxSelections bounds the number of fields a query selects from API results,
	// each field of a result counted once (aliases of one field, and a fragment spread
	// twice, count once). Behind it, every alias and spread counted, a query may expand
	// to at most max(2000, 4*MaxSelections) selections, introspection included. Beyond
	// either bound the answer is 400 QUERY_TOO_COMPLEX. Default 500.
	MaxSelections int
}

func (l Limits) withDefaults() Limits {
	if l.MaxQueryBytes <= 0 {
		l.MaxQueryBytes = 16 << 10
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = 10
	}
	if l.MaxRootFields <= 0 {
		l.MaxRootFields = 20
	}
	if l.MaxSelections <= 0 {
		l.MaxSelections = 500
	}
	return l
}

// Handler serves the GraphQL gateway. Create it with [NewHandler].
type Handler struct {
	svc      *tollgate.Service
	plans    *planCache
	requests *requestCache
	disabled bool
	limits   Limits
	door     *edge.Door
	log      *slog.Logger

	mu     sync.Mutex // serializes schema builds
	schema atomic.Pointer[schema]
	failed uint64 // the catalog version whose build failed last (guarded by mu), 0 if none
}

// NewHandler returns the GraphQL gateway of svc, serving POST /v1/graphql. opts may be
// nil. The schema is built from the catalog now (so that a catalog GraphQL cannot map
// is reported at once) and rebuilt whenever the catalog changes.
func NewHandler(svc *tollgate.Service, opts *Options) (*Handler, error) {
	if svc == nil {
		return nil, errors.New("gql: NewHandler needs a Service")
	}
	if opts == nil {
		opts = &Options{}
	}
	h := &Handler{
		svc:      svc,
		plans:    newPlanCache(1024),
		requests: newRequestCache(1024),
		disabled: opts.Disabled,
		limits:   opts.Limits.withDefaults(),
		log:      opts.Logger,
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	e := opts.Edge
	if e == nil {
		e = edge.Default()
	}
	h.door = e.Door(edge.DoorSpec{Methods: "POST, OPTIONS", Logger: h.log})
	if _, err := h.current(); err != nil {
		return nil, err
	}
	return h, nil
}

// current returns the schema of the catalog's current version, building it if needed.
func (h *Handler) current() (*schema, error) {
	reg := h.svc.Catalog()
	v := reg.Version()
	if s := h.schema.Load(); s != nil && s.version == v {
		return s, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	old := h.schema.Load()
	if old != nil && (old.version == v || h.failed == v) {
		// A catalog version GraphQL cannot serve keeps the last good schema rather
		// than failing every request; it is not built again until the catalog changes.
		return old, nil
	}
	s, err := buildSchema(reg.List(), v, h.resolve,
		graphql.MaxQueryLength(h.limits.MaxQueryBytes),
		graphql.MaxDepth(max(30, h.limits.MaxDepth+2)), // a backstop: introspection is 14 deep
		graphql.MaxSelections(h.selectionBound()),
		graphql.MaxParallelism(h.limits.MaxRootFields+1),
	)
	if err != nil {
		h.failed = v
		if old != nil {
			h.log.Error("gql: the catalog cannot be served over GraphQL; serving the last good schema", "version", v, "error", err)
			return old, nil
		}
		return nil, err
	}
	h.schema.Store(s)
	return s, nil
}

// Schema returns the SDL of the current schema.
func (h *Handler) Schema() (string, error) {
	s, err := h.current()
	if err != nil {
		return "", err
	}
	return s.sdl, nil
}

// Media types of responses.
const (
	mediaGraphQL = "application/graphql-response+json"
	mediaJSON    = "application/json"
)

// request is the body of a GraphQL-over-HTTP request.
type request struct {
	Query         *string
	OperationName *string
	Variables     map[string]any
	// variablesJSON is the variables' text as sent, for the plan cache's key.
	variablesJSON []byte
}

// ServeHTTP serves one GraphQL request: transport rules, then one call of the service,
// which authenticates the caller and asks the gateway what the query calls: the
// request is read, and the query is planned (or its plan found in the cache). The
// service admits every API the query names as one call and runs them; their results
// are then written into the shape of the answer.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodOptions {
		h.door.Preflight(w, r)
		return
	}
	// Negotiate first, so that every answer uses the media type the client accepts;
	// a client that accepts neither is told so once its key is checked.
	media, acceptable := negotiate(r.Header.Values("Accept"))
	rw := &responder{h: h, w: w, r: r, media: media}
	if h.disabled {
		rw.failStatus(http.StatusForbidden, "GRAPHQL_NOT_SUPPORTED", "GraphQL is not offered by this service; use the REST endpoints /v1/{api_id}")
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		rw.failStatus(http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "GraphQL queries are sent with POST")
		return
	}
	caller, ok := h.door.Caller(w, r, auth.ChannelGraphQL)
	if !ok {
		return
	}
	var q query
	reply := h.svc.CallAll(r.Context(), caller, func() ([]tollgate.Item, error) {
		if !acceptable {
			return nil, &refusal{http.StatusNotAcceptable, "NOT_ACCEPTABLE", "the gateway answers with application/graphql-response+json or application/json; accept one of them"}
		}
		req, err := rw.readRequest()
		if err != nil {
			return nil, err
		}
		s, err := h.current()
		if err != nil {
			h.log.ErrorContext(r.Context(), "gql: cannot build the schema", "error", err)
			return nil, &refusal{http.StatusInternalServerError, "INTERNAL_SERVER_ERROR", "the GraphQL schema cannot be built from the catalog"}
		}
		return h.prepare(r.Context(), s, req, &q)
	})
	rw.rc = &reply.Receipt
	switch {
	case reply.Err != nil:
		rw.failErr(reply.Err)
	case q.errors != nil:
		rw.requestErrors(q.errors)
	case reply.Results == nil:
		rw.send(http.StatusOK, q.plan.body) // introspection, __typename: nothing to run, nothing to charge
	default:
		h.answer(rw, &q, reply.Results)
	}
}

// A query is what the gateway knows of a request's query while the service runs it.
type query struct {
	s    *schema
	req  request
	plan *plan
	// errors are graphql-go's errors of a query that cannot run: the answer.
	errors []*gqlerrors.QueryError
}

// prepare plans a well-formed request: it checks the query's size, plans it (or finds
// its plan in the cache), checks its calls against the gateway's limits, and returns
// the items the service is to call, one per distinct call. A query with nothing to run,
// or that graphql-go refused, returns no items and leaves its answer in q.
func (h *Handler) prepare(ctx context.Context, s *schema, req request, q *query) ([]tollgate.Item, error) {
	q.s, q.req = s, req
	text, op := *req.Query, ""
	if req.OperationName != nil {
		op = *req.OperationName
	}
	if len(text) > h.limits.MaxQueryBytes {
		return nil, tooComplex("the query is %d bytes long; the gateway takes at most %d", len(text), h.limits.MaxQueryBytes)
	}
	var buf [512]byte
	key := appendPlanKey(buf[:0], s.version, op, text, req.variablesJSON)
	p := h.plans.lookup(key)
	if p == nil {
		var err error
		if p, err = h.plan(ctx, s, string(key), text, op, req.Variables); err != nil {
			return nil, err
		}
		if p.errors != nil {
			q.errors = p.errors
			return nil, nil
		}
	}
	q.plan = p
	if p.refused != nil {
		return nil, p.refused
	}
	return p.items, nil
}

// plan plans a query, and keeps the plan of a query graphql-go took without errors in
// the cache. graphql-go executes the query once, with every root field resolved to its
// API's probe (see shape.go): it parses and validates the query, expands fragments,
// applies @skip, @include and variables, and each root resolver records the API it
// names and the arguments it would call it with. What graphql-go writes is the answer
// of a query that names no API (introspection, __typename), or the shape of the
// answers of one that does.
func (h *Handler) plan(ctx context.Context, s *schema, key, text, op string, vars map[string]any) (*plan, error) {
	st := &state{planning: true}
	resp, err := execute(withState(ctx, st), s, text, op, vars)
	if err != nil {
		h.log.ErrorContext(ctx, "gql: graphql-go failed", "error", err)
		return nil, &refusal{http.StatusInternalServerError, "INTERNAL_SERVER_ERROR", "internal error: the query cannot be run"}
	}
	if tooManySelections(resp.Errors) {
		// graphql-go's own bound, which also counts what the gateway's count of
		// result fields sees once (aliases of one field, fragments spread twice).
		return nil, tooComplex("the query expands to more than %d selections once aliases and fragments are counted; select fewer fields", h.selectionBound())
	}
	if len(resp.Errors) > 0 && len(st.calls) == 0 {
		return &plan{errors: resp.Errors}, nil
	}
	p := &plan{calls: st.calls}
	if len(st.calls) == 0 {
		body, err := json.Marshal(resp)
		if err != nil {
			h.log.ErrorContext(ctx, "gql: cannot encode a response", "error", err)
			return nil, &refusal{http.StatusInternalServerError, "INTERNAL_SERVER_ERROR", "internal error"}
		}
		p.body = body
	} else {
		// Sort the calls, so that errors and invocations are deterministic
		// (graphql-go ran the resolvers in parallel).
		slices.SortFunc(p.calls, func(a, b call) int { return strings.Compare(a.key, b.key) })
		h.items(p)
		if len(resp.Errors) == 0 && p.refused == nil {
			p.shape, p.shaped = s.readShape(resp.Data, p.calls)
			p.template = resp.Data
		}
	}
	if len(resp.Errors) == 0 {
		h.plans.put(key, p)
	}
	return p, nil
}

// answer writes the answer of a query whose calls ran, results in the order of its
// items: from the plan's shape, or through graphql-go's execution for a query without
// one.
func (h *Handler) answer(rw *responder, q *query, results []tollgate.Result) {
	ctx := rw.r.Context()
	p := q.plan
	// Decode each result once: every alias of an API shares its one invocation.
	decoded := make([]reflect.Value, len(results))
	failed := make([]error, len(results))
	result := func(call int) (reflect.Value, error) {
		i := p.itemOf[call]
		if !decoded[i].IsValid() && failed[i] == nil {
			decoded[i], failed[i] = h.decode(ctx, p.calls[call].root, &results[i])
		}
		return decoded[i], failed[i]
	}
	if p.shaped {
		w := answerWriter{b: make([]byte, 0, 512)}
		w.b = append(w.b, `{"data":`...)
		w.writeData(p.shape, func(f *shapeField) (reflect.Value, error) { return result(f.call) })
		if w.mismatched != nil {
			h.log.WarnContext(ctx, "gql: an API result does not match its declared fields", "api", w.mismatched.api.ID)
		}
		if w.errs == nil {
			rw.send(http.StatusOK, append(w.b, '}'))
			return
		}
		rw.write(http.StatusOK, &graphql.Response{Errors: w.errs, Data: w.b[len(`{"data":`):]})
		return
	}
	// graphql-go's execution, whose root resolvers return the results decoded here, on
	// this goroutine, so that they only look them up.
	done := &state{results: make(map[*root]int, len(p.calls)), decoded: decoded, failed: failed}
	for i, c := range p.calls {
		result(i)
		done.results[c.root] = p.itemOf[i]
	}
	op := ""
	if q.req.OperationName != nil {
		op = *q.req.OperationName
	}
	resp, err := execute(withState(ctx, done), q.s, *q.req.Query, op, q.req.Variables)
	if err != nil {
		h.log.ErrorContext(ctx, "gql: graphql-go failed", "error", err)
		rw.failStatus(http.StatusInternalServerError, "INTERNAL_SERVER_ERROR", "internal error: the results cannot be written")
		return
	}
	rw.write(http.StatusOK, resp)
}

// execute runs a query through graphql-go. graphql-go panics on some queries instead
// of refusing them: v1.11 panics on a literal it cannot read when it compares the
// arguments of two fields that share a name: a number beyond its type (an Int beyond
// 64 bits, a Float beyond float64), or a string its lexer took with what precedes it
// (-"x"). Such a panic is answered as the validation error it should have been; any
// other is returned as an error, the service's failure.
func execute(ctx context.Context, s *schema, query, op string, vars map[string]any) (resp *graphql.Response, err error) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		refuse := func(message string) {
			resp, err = &graphql.Response{Errors: []*gqlerrors.QueryError{{
				Message: message, Extensions: map[string]any{"code": "GRAPHQL_VALIDATION_FAILED"},
			}}}, nil
		}
		var num *strconv.NumError
		e, _ := v.(error)
		switch {
		case errors.As(e, &num):
			refuse(fmt.Sprintf("the number %s is out of range: an Int has 32 bits, a Float 64", num.Num))
		case errors.Is(e, strconv.ErrSyntax):
			refuse("a literal of the query cannot be read: write strings, numbers and enum values on their own")
		default:
			resp, err = nil, fmt.Errorf("graphql-go panicked: %v", v)
		}
	}()
	return s.exec.Exec(ctx, query, op, vars), nil
}

// appendPlanKey appends the key of a request in the plan cache.
func appendPlanKey(b []byte, version uint64, op, query string, variables []byte) []byte {
	b = strconv.AppendUint(b, version, 10)
	b = append(append(append(b, 0), op...), 0)
	b = append(append(append(b, query...), 0), variables...)
	return b
}

// items checks a plan's calls against the gateway's limits and keeps in it the items
// of the service's call, one per distinct call (a root field and its arguments), in the
// order of the sorted calls, and the item of each call; or the refusal of a query
// beyond a limit.
//
// The service runs an API named several times (aliases, fragments) once if every time
// names it with the same arguments, and refuses the query before anything runs if not.
// A query costs what its APIs cost over REST, and runs each as one call would, so it
// cannot run one API several times for the price of one; running many inputs through
// one API is the job of a batch request.
func (h *Handler) items(p *plan) {
	calls := p.calls
	if n := len(calls); n > h.limits.MaxRootFields {
		p.refused = tooComplex("the query has %d API fields (aliases count); the gateway takes at most %d", n, h.limits.MaxRootFields)
		return
	}
	depth, selections := 0, 0
	var files, paths []string
	for _, c := range calls {
		depth, selections = max(depth, c.depth), selections+c.fields
		if c.root.api.File != nil && !slices.Contains(files, c.root.name) {
			files = append(files, c.root.name)
			paths = append(paths, "POST /v1/"+c.root.api.ID)
		}
	}
	switch {
	case depth > h.limits.MaxDepth:
		p.refused = tooComplex("the query selects data %d levels deep; the gateway takes at most %d", depth, h.limits.MaxDepth)
	case selections > h.limits.MaxSelections:
		p.refused = tooComplex("the query selects %d fields; the gateway takes at most %d", selections, h.limits.MaxSelections)
	case len(files) > 0:
		p.refused = &refusal{http.StatusBadRequest, codeFileUpload, fmt.Sprintf(
			"%s take%s a file, and files cannot be sent through GraphQL; call %s over REST: %s",
			strings.Join(files, ", "), singular(len(files)), pronoun(len(files)), strings.Join(paths, ", "))}
	}
	if p.refused != nil {
		return
	}
	p.items, p.itemOf = make([]tollgate.Item, 0, len(calls)), make([]int, len(calls))
	for i, c := range calls {
		// The same root field with the same arguments, spread twice, is one item.
		if j := slices.IndexFunc(calls[:i], func(o call) bool { return o.key == c.key }); j >= 0 {
			p.itemOf[i] = p.itemOf[j]
			continue
		}
		p.itemOf[i] = len(p.items)
		p.items = append(p.items, tollgate.Item{API: c.root.api.ID, Input: tollgate.Input{JSON: c.args}, Name: c.root.name})
	}
}

// selectionBound is graphql-go's bound on the selections of a query, every alias and
// every fragment spread counted, introspection included (the standard introspection
// query needs several hundred): a backstop behind Limits.MaxSelections, which counts
// each result field once.
func (h *Handler) selectionBound() int {
	return max(2000, 4*h.limits.MaxSelections)
}

// tooManySelections reports whether graphql-go refused a query for its selections.
func tooManySelections(errs []*gqlerrors.QueryError) bool {
	for _, e := range errs {
		if errors.Is(e, graphql.ErrTooManySelections) {
			return true
		}
	}
	return false
}

func tooComplex(format string, args ...any) error {
	return &refusal{http.StatusBadRequest, codeTooComplex, fmt.Sprintf(format, args...)}
}

func singular(n int) string {
	if n == 1 {
		return "s"
	}
	return ""
}

func pronoun(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}

// resolve is what every root field does: when the query is planned, record the call
// and return the API's probe; when graphql-go writes the answer of a query that has no
// shape, return the result its call produced, decoded before the run.
func (h *Handler) resolve(ctx context.Context, r *root, args map[string]any) (reflect.Value, error) {
	st := stateFrom(ctx)
	if st.planning {
		depth, fields := 1, 1
		for _, name := range graphql.SelectedFieldNames(ctx) {
			depth = max(depth, 2+strings.Count(name, "."))
			fields++
		}
		st.record(call{root: r, args: args, key: callKey(r, args), depth: depth, fields: fields})
		return r.probe, nil
	}
	i, ok := st.results[r]
	if !ok {
		return reflect.Value{}, &fieldError{message: "internal error: the call was not planned", code: "INTERNAL_SERVER_ERROR"}
	}
	return st.decoded[i], st.failed[i]
}

// decode turns a call's result into the value its root field resolves to, or the error
// it shows.
func (h *Handler) decode(ctx context.Context, r *root, res *tollgate.Result) (reflect.Value, error) {
	if res.Err != nil {
		return reflect.Value{}, &fieldError{message: res.Err.Message, code: codeOf(res.Err.Code).code}
	}
	body := res.JSON
	if r.result.rename != nil {
		renamed, err := r.result.rename.rewrite(body)
		if err != nil {
			h.log.ErrorContext(ctx, "gql: an API result cannot be read", "api", r.api.ID, "error", err)
			return reflect.Value{}, &fieldError{message: "internal error: the result cannot be read", code: "INTERNAL_SERVER_ERROR"}
		}
		body = renamed
	}
	v := reflect.New(r.result.goType.Elem())
	if err := json.Unmarshal(body, v.Interface()); err != nil {
		// A result that does not match its declared fields: serve what matched.
		h.log.WarnContext(ctx, "gql: an API result does not match its declared fields", "api", r.api.ID, "error", err)
	}
	return v, nil
}

// callKey identifies a call: the root field and its arguments. Encoding sorts map keys.
func callKey(r *root, args map[string]any) string {
	b, err := json.Marshal(args)
	if err != nil {
		b = []byte(fmt.Sprint(args))
	}
	return r.name + "\x00" + string(b)
}

// A call is a root field the plan met.
type call struct {
	root          *root
	args          map[string]any
	key           string
	depth, fields int
}

// state is a request's state, shared by its root resolvers through the context.
type state struct {
	planning bool
	mu       sync.Mutex
	calls    []call // the plan's calls
	// results is the index in decoded and failed of the result of each API, for
	// graphql-go's execution of a query without a shape.
	results map[*root]int
	decoded []reflect.Value
	failed  []error
}

func (s *state) record(c call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, c)
}

type stateKey struct{}

func withState(ctx context.Context, s *state) context.Context {
	return context.WithValue(ctx, stateKey{}, s)
}

func stateFrom(ctx context.Context) *state { return ctx.Value(stateKey{}).(*state) }

// negotiate picks the response media type from the Accept headers: graphql-response+json
// when it is accepted or when there is no Accept header, application/json when only
// that (or a wildcard) is accepted.
func negotiate(accept []string) (string, bool) {
	if len(accept) == 0 {
		return mediaGraphQL, true
	}
	jsonOK := false
	for _, header := range accept {
		for item := range strings.SplitSeq(header, ",") {
			mt, params, err := parseMediaType(item)
			if err != nil || refused(params["q"]) {
				continue
			}
			switch mt {
			case mediaGraphQL:
				return mediaGraphQL, true
			case mediaJSON, "application/*", "*/*":
				jsonOK = true
			}
		}
	}
	return mediaJSON, jsonOK
}

// parseMediaType parses a media type as mime.ParseMediaType does, taking a short cut
// for the common case of a bare type without parameters: its result is only ever
// compared with the types the gateway knows, and a malformed bare type matches none.
func parseMediaType(v string) (string, map[string]string, error) {
	v = strings.TrimSpace(v)
	if !strings.ContainsRune(v, ';') {
		return strings.ToLower(v), nil, nil
	}
	return mime.ParseMediaType(v)
}

// refused reports whether an Accept item's quality value refuses its media type: q=0,
// also written 0.0, 0.00 or 0.000.
func refused(q string) bool {
	if q == "" {
		return false
	}
	v, err := strconv.ParseFloat(q, 64)
	return err == nil && v <= 0
}

// maxBody bounds a request body: the query, its variables and extensions.
const maxBody = 1 << 20

// responder writes the answers of one request.
type responder struct {
	h     *Handler
	w     http.ResponseWriter
	r     *http.Request
	media string
	rc    *tollgate.Receipt // the figures of the credit and rate headers, once the service answered
}

// readRequest reads and checks the body. Its errors are refusals.
func (rw *responder) readRequest() (request, error) {
	var req request
	ct := rw.r.Header.Get("Content-Type")
	mt, params, err := parseMediaType(ct)
	switch {
	case ct == "":
		return req, &refusal{http.StatusUnsupportedMediaType, "BAD_REQUEST", "send the request as Content-Type: application/json"}
	case err == nil && mt == "multipart/form-data":
		return req, &refusal{http.StatusBadRequest, codeFileUpload, "files cannot be uploaded through GraphQL; call file APIs over REST (POST /v1/{api_id})"}
	case err != nil || mt != "application/json":
		return req, &refusal{http.StatusUnsupportedMediaType, "BAD_REQUEST", fmt.Sprintf("the gateway takes application/json, not %q", ct)}
	case params["charset"] != "" && !strings.EqualFold(params["charset"], "utf-8"):
		return req, &refusal{http.StatusUnsupportedMediaType, "BAD_REQUEST", "the request body must be UTF-8"}
	}
	body, err := io.ReadAll(http.MaxBytesReader(rw.w, rw.r.Body, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return req, &refusal{http.StatusBadRequest, codeTooComplex, fmt.Sprintf("the request body is larger than %d bytes", maxBody)}
		}
		return req, &refusal{http.StatusBadRequest, "BAD_REQUEST", "the request body cannot be read"}
	}
	if req, ok := rw.h.requests.lookup(body); ok {
		return req, nil
	}
	// One decode of the body; the parameters' JSON types are checked on their text.
	var raw struct {
		Query, OperationName, Variables, Extensions json.RawMessage
	}
	if err := json.Unmarshal(body, &raw); err != nil || raw.Query == nil {
		return req, &refusal{http.StatusBadRequest, "BAD_REQUEST", "the body must be a JSON object with a query string"}
	}
	if !jsonKindOK(raw.Query, "query") {
		return req, &refusal{http.StatusBadRequest, "BAD_REQUEST", "query must be a string"}
	}
	for _, p := range []struct {
		name, want string
		v          json.RawMessage
	}{{"operationName", "a string or null", raw.OperationName}, {"variables", "an object or null", raw.Variables}, {"extensions", "an object or null", raw.Extensions}} {
		if p.v != nil && !jsonKindOK(p.v, p.name) {
			return req, &refusal{http.StatusBadRequest, "BAD_REQUEST", fmt.Sprintf("%s must be %s", p.name, p.want)}
		}
	}
	var query string
	if err := json.Unmarshal(raw.Query, &query); err != nil {
		return req, &refusal{http.StatusBadRequest, "BAD_REQUEST", "the query must be a JSON string"}
	}
	req.Query = &query
	if raw.OperationName != nil && string(raw.OperationName) != "null" {
		var op string
		json.Unmarshal(raw.OperationName, &op)
		req.OperationName = &op
	}
	if raw.Variables != nil && string(raw.Variables) != "null" {
		if err := json.Unmarshal(raw.Variables, &req.Variables); err != nil {
			return req, &refusal{http.StatusBadRequest, "BAD_REQUEST", "variables must be a JSON object"}
		}
		req.variablesJSON = raw.Variables
	}
	rw.h.requests.keep(body, req)
	return req, nil
}

// jsonKindOK checks the JSON type of a request parameter.
func jsonKindOK(v json.RawMessage, name string) bool {
	s := strings.TrimSpace(string(v))
	if s == "" {
		return false
	}
	switch name {
	case "query":
		return s[0] == '"'
	case "operationName":
		return s[0] == '"' || s == "null"
	}
	return s[0] == '{' || s == "null"
}

// write writes a GraphQL result with the credit headers.
func (rw *responder) write(status int, resp *graphql.Response) {
	if len(resp.Errors) == 0 && len(resp.Extensions) == 0 && len(resp.Data) > 0 {
		// The common answer, data alone, without a second pass over the data
		// (json.Marshal would validate and compact graphql-go's output again).
		body := make([]byte, 0, len(`{"data":}`)+len(resp.Data))
		body = append(append(append(body, `{"data":`...), resp.Data...), '}')
		rw.send(status, body)
		return
	}
	resp.Errors = cleanErrors(resp.Errors)
	body, err := json.Marshal(resp)
	if err != nil {
		rw.h.log.ErrorContext(rw.r.Context(), "gql: cannot encode a response", "error", err)
		rw.failStatus(http.StatusInternalServerError, "INTERNAL_SERVER_ERROR", "internal error")
		return
	}
	rw.send(status, body)
}

// cleanErrors makes the messages of errors clean text (see package cleantext):
// graphql-go formats some of its validation errors badly, a fragment on an unknown
// type as "... can never be of type %!q(<nil>)", breaks some over lines, and echoes
// what the query holds. It also drops an error that repeats an earlier one, message,
// locations and path alike, which graphql-go reports twice for a variable of an
// unknown list type.
func cleanErrors(errs []*gqlerrors.QueryError) []*gqlerrors.QueryError {
	out := errs[:0]
	for _, e := range errs {
		e.Message = cleantext.Message(e.Message)
		if !slices.ContainsFunc(out, func(o *gqlerrors.QueryError) bool {
			return o.Message == e.Message && slices.Equal(o.Locations, e.Locations) && slices.Equal(o.Path, e.Path)
		}) {
			out = append(out, e)
		}
	}
	return out
}

func (rw *responder) send(status int, body []byte) {
	hdr := rw.w.Header()
	rw.h.door.CORS(hdr, rw.r)
	if rw.rc != nil {
		rw.h.door.Receipt(hdr, rw.rc)
	}
	// Canonical keys, set directly: this is on every answer's path.
	hdr["Content-Type"] = []string{rw.media}
	hdr["Cache-Control"] = []string{"no-store"}
	rw.w.WriteHeader(status)
	rw.w.Write(body)
}

// requestErrors answers a request that graphql-go could not parse, validate or
// execute: 400 for graphql-response+json, 200 for application/json, as the
// GraphQL-over-HTTP specification says.
func (rw *responder) requestErrors(errs []*gqlerrors.QueryError) {
	classify(errs)
	if code, ok := errs[0].Extensions["code"].(string); ok {
		// As every refusal of the gateway: the code in X-Error-Code too.
		rw.w.Header()[wire.HeaderErrorCode] = []string{code}
	}
	status := http.StatusOK
	if rw.media == mediaGraphQL {
		status = http.StatusBadRequest
	}
	rw.write(status, &graphql.Response{Errors: errs})
}

// classify gives each error of a request that graphql-go could not parse, validate or
// execute its extensions.code, and says in the gateway's words why an operation it does
// not offer was refused.
func classify(errs []*gqlerrors.QueryError) {
	for _, e := range errs {
		code := "GRAPHQL_VALIDATION_FAILED"
		switch {
		case errors.Is(e, gqlerrors.ErrSyntax) || strings.HasPrefix(e.Message, "syntax error"):
			code = "GRAPHQL_PARSE_FAILED"
		case strings.Contains(e.Message, "no mutations are offered"):
			e.Message = "mutations are not supported: the GraphQL gateway is read-only"
			code = "OPERATION_NOT_SUPPORTED"
		case strings.Contains(e.Message, "graphql-ws protocol header is missing"):
			e.Message = "subscriptions are not supported: the GraphQL gateway answers queries"
			code = "OPERATION_NOT_SUPPORTED"
		}
		if e.Extensions == nil {
			e.Extensions = map[string]any{"code": code}
		}
	}
}

// failErr answers with the refusal of a request: the gateway's own, or the service's,
// with the status and code its Code maps to.
func (rw *responder) failErr(err error) {
	if e := (*tollgate.Error)(nil); errors.As(err, &e) {
		if e.Code == tollgate.CodeNoCredential || e.Code == tollgate.CodeMalformedCredential {
			edge.Deny(rw.w)
			return
		}
		if e.RetryAfter > 0 {
			edge.SetRetryAfter(rw.w.Header(), e.RetryAfter)
		}
	}
	a := rw.h.refusalOf(rw.r.Context(), err)
	rw.failStatus(a.status, a.code, a.message)
}

// refusalOf returns how the gateway answers a request refused with err: the gateway's
// own refusal, or the service's error with the status and code its Code maps to.
func (h *Handler) refusalOf(ctx context.Context, err error) *refusal {
	var (
		e   *tollgate.Error
		own *refusal
	)
	switch {
	case errors.As(err, &own):
		return own
	case !errors.As(err, &e):
		h.log.ErrorContext(ctx, "gql: unexpected error", "error", err)
		e = &tollgate.Error{Code: tollgate.CodeInternal, Message: "internal error"}
	}
	m := codeOf(e.Code)
	return &refusal{m.status, m.code, e.Message}
}

// failStatus answers with one error and no data.
func (rw *responder) failStatus(status int, code, message string) {
	rw.w.Header()[wire.HeaderErrorCode] = []string{code}
	body, _ := json.Marshal(map[string]any{"errors": []any{map[string]any{
		"message": cleantext.Message(message), "extensions": map[string]any{"code": code},
	}}})
	rw.send(status, body)
}
