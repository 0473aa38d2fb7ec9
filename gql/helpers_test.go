package gql_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/examples/apis"
	"github.com/tollgate-dev/tollgate/gql"
	"github.com/tollgate-dev/tollgate/internal/cleantext"
	"github.com/tollgate-dev/tollgate/internal/doortest"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/wire"
)

// t0 is the instant every test clock starts at: the middle of a month, so that no
// credit period ends during a test.
var t0 = time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC)

// testPlans are the plans of every test service. free allows one API per GraphQL query,
// as a free plan does; tiny is small enough to hit its rate limit in a few calls; solo
// runs one call at a time and has no rate limit; open has no rate or concurrency limit.
var testPlans = []billing.Plan{
	{Name: "free", Credits: 50, RatePerMinute: 5, Concurrency: 1, GraphQLMaxAPIs: 1},
	{Name: "pro", Credits: 100000, RatePerMinute: 600, Concurrency: 10, GraphQLMaxAPIs: 10},
	{Name: "tiny", Credits: 5, RatePerMinute: 2, Concurrency: 1, GraphQLMaxAPIs: 10},
	{Name: "open", Credits: 1000, GraphQLMaxAPIs: 10},
	{Name: "solo", Credits: 100, Concurrency: 1, GraphQLMaxAPIs: 10},
}

// config changes the defaults of a test harness.
type config struct {
	// gql is passed to gql.NewHandler; its Logger is replaced.
	gql gql.Options
	// svc is passed to tollgate.New; its Now and Logger are replaced.
	svc tollgate.Options
	// plans replaces testPlans.
	plans []billing.Plan
	// sampleOnly leaves out the test APIs.
	sampleOnly bool
	// extra APIs are registered after the others.
	extra []catalog.API
	// realClock uses time.Now instead of a test clock (benchmarks).
	realClock bool
}

// harness is one service on memory stores with the GraphQL handler in front of it.
// Every API's handler is wrapped so that the harness counts the runs of each API.
type harness struct {
	clock   *testenv.Clock
	reg     *catalog.Registry
	stores  tollgate.Stores
	ps      *billing.Plans
	svc     *tollgate.Service
	mgr     *accounts.Manager // manages svc's accounts
	handler *gql.Handler
	block   *doortest.Blocker
	runs    *runCounter
	cfg     config
}

// runCounter counts the handler runs of each API.
type runCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *runCounter) add(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[id]++
}

// get returns the runs of the API with the given id.
func (c *runCounter) get(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[id]
}

// total returns the runs of every API.
func (c *runCounter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.n {
		n += v
	}
	return n
}

// counted wraps an API's handler so that its runs are counted.
func (c *runCounter) counted(a catalog.API) catalog.API {
	next := a.Handler
	a.Handler = catalog.HandlerFunc(func(ctx context.Context, req *catalog.Request) (any, error) {
		c.add(req.API.ID)
		return next.ServeAPI(ctx, req)
	})
	return a
}

// testAPIs are the APIs the harness adds to the sample catalog.
func testAPIs(b *doortest.Blocker) []catalog.API {
	return []catalog.API{
		b.API(),
		doortest.FailAPI(1),
		doortest.PanicAPI(),
		{
			ID: "costly", Title: "Costly", Description: "Costs three credits.",
			Method: http.MethodGet, Cost: 3,
			Result: []catalog.Field{{Name: "ok", Type: catalog.Boolean}},
			Handler: catalog.HandlerFunc(func(context.Context, *catalog.Request) (any, error) {
				return map[string]any{"ok": true}, nil
			}),
		},
		{
			ID: "nested", Title: "Nested", Description: "Returns a result four objects deep.",
			Method: http.MethodGet, Cost: 1,
			Result: []catalog.Field{{Name: "level1", Type: catalog.Object, Fields: []catalog.Field{
				{Name: "name", Type: catalog.String},
				{Name: "level2", Type: catalog.Object, Fields: []catalog.Field{
					{Name: "level3", Type: catalog.Object, Fields: []catalog.Field{
						{Name: "value", Type: catalog.Integer},
					}},
				}},
			}}},
			Handler: catalog.HandlerFunc(func(context.Context, *catalog.Request) (any, error) {
				return map[string]any{"level1": map[string]any{"name": "one",
					"level2": map[string]any{"level3": map[string]any{"value": 3}}}}, nil
			}),
		},
	}
}

// newHarness builds a service on memory stores with the sample catalog (and, unless
// cfg.sampleOnly, the test APIs) and its GraphQL handler.
func newHarness(t testing.TB, cfg config) *harness {
	t.Helper()
	h := &harness{
		clock: testenv.NewClock(t0), cfg: cfg, reg: &catalog.Registry{},
		runs:  &runCounter{n: map[string]int{}},
		block: doortest.NewBlocker(),
		stores: tollgate.Stores{
			Keys:   memory.NewKeyStore(),
			Ledger: memory.NewLedger(nil),
			Rates:  memory.NewRateLimiter(),
			Slots:  memory.NewConcurrencyLimiter(),
		},
	}
	t.Cleanup(h.block.Release)
	defs := apis.All()
	if !cfg.sampleOnly {
		defs = append(defs, testAPIs(h.block)...)
	}
	defs = append(defs, cfg.extra...)
	for _, a := range defs {
		if err := h.reg.Register(h.runs.counted(a)); err != nil {
			t.Fatalf("Register(%s): %v", a.ID, err)
		}
	}
	plans := cfg.plans
	if plans == nil {
		plans = testPlans
	}
	var err error
	if h.ps, err = billing.NewPlans(plans...); err != nil {
		t.Fatal(err)
	}
	h.svc = h.newService(t, cfg.svc)
	h.mgr = h.newManager(t, h.svc)
	opts := cfg.gql
	opts.Logger = slog.New(slog.DiscardHandler)
	if h.handler, err = gql.NewHandler(h.svc, &opts); err != nil {
		t.Fatalf("NewHandler: %v", err)
	}
	return h
}

// newService returns a service on the harness's registry, stores, plans and clock.
// Called again, it makes a second instance on the same stores.
func (h *harness) newService(t testing.TB, opts tollgate.Options) *tollgate.Service {
	t.Helper()
	opts.Now = h.clock.Now
	if h.cfg.realClock {
		opts.Now = nil
	}
	opts.Logger = slog.New(slog.DiscardHandler)
	svc, err := tollgate.New(h.reg, h.stores, h.ps, &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	return svc
}

// newManager returns a manager of the accounts of svc, a service of the harness.
func (h *harness) newManager(t testing.TB, svc *tollgate.Service) *accounts.Manager {
	t.Helper()
	mgr, err := accounts.New(svc, &accounts.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mgr.Close)
	return mgr
}

// account is a test account with a key.
type account struct {
	ID    string
	KeyID string
	Key   string
}

// newAccount creates an account on plan through the Manager, with credits as its
// starting balance when it is not negative (else the plan's allowance).
func (h *harness) newAccount(t testing.TB, plan string, credits int64) account {
	t.Helper()
	spec := accounts.Spec{Plan: plan}
	if credits >= 0 {
		spec.Credits = &credits
	}
	acct, key, value, err := h.mgr.CreateAccount(context.Background(), spec)
	if err != nil {
		t.Fatalf("CreateAccount(%s): %v", plan, err)
	}
	return account{ID: acct.ID, KeyID: key.ID, Key: value}
}

// newSubKey creates a sub-key of the account with the given restrictions.
func (h *harness) newSubKey(t testing.TB, acct account, name string, spec auth.RestrictionSpec) account {
	t.Helper()
	r, err := auth.NewRestrictions(spec)
	if err != nil {
		t.Fatal(err)
	}
	key, value, err := h.mgr.CreateKey(context.Background(), acct.ID, accounts.NewKey{Name: name, Restrictions: r})
	if err != nil {
		t.Fatalf("CreateKey(%s): %v", name, err)
	}
	return account{ID: acct.ID, KeyID: key.ID, Key: value}
}

// balance reads an account's remaining credits through the Manager.
func (h *harness) balance(t testing.TB, acctID string) int64 {
	t.Helper()
	info, err := h.mgr.Account(context.Background(), acctID)
	if err != nil {
		t.Fatalf("Account(%s): %v", acctID, err)
	}
	return info.Balance.Remaining
}

// header is one request header.
type header struct{ name, value string }

func apiKey(v string) header      { return header{"X-Api-Key", v} }
func accept(v string) header      { return header{"Accept", v} }
func contentType(v string) header { return header{"Content-Type", v} }

const (
	mediaGraphQL = "application/graphql-response+json"
	mediaJSON    = "application/json"
)

// gqlError is one error of a GraphQL result.
type gqlError struct {
	Message    string         `json:"message"`
	Path       []any          `json:"path"`
	Extensions map[string]any `json:"extensions"`
}

// Code returns extensions.code.
func (e gqlError) Code() string { s, _ := e.Extensions["code"].(string); return s }

// response is an answer of the GraphQL handler, read and checked.
type response struct {
	Status int
	Header http.Header
	Body   []byte
	// Edge reports the edge's HTML 403.
	Edge bool
	// HasData reports a data member; Data is its value.
	HasData bool
	Data    json.RawMessage
	Errors  []gqlError
}

// Int returns an integer header, or -1 if it is absent or not a number.
func (r *response) Int(name string) int64 {
	n, err := strconv.ParseInt(r.Header.Get(name), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// DataMap decodes data as an object, with numbers as json.Number.
func (r *response) DataMap(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(r.Data))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		t.Fatalf("data %s is not an object: %v", r.Data, err)
	}
	return m
}

// Codes returns the extensions.code of every error.
func (r *response) Codes() []string {
	var out []string
	for _, e := range r.Errors {
		out = append(out, e.Code())
	}
	return out
}

// gqlBody encodes a GraphQL request body.
func gqlBody(t testing.TB, query string, vars map[string]any) string {
	t.Helper()
	m := map[string]any{"query": query}
	if vars != nil {
		m["variables"] = vars
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// newRequest builds a request to the handler. Header names are set as written.
func newRequest(ctx context.Context, method, body string, hdrs ...header) *http.Request {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequestWithContext(ctx, method, "/v1/graphql", rd)
	for _, hd := range hdrs {
		req.Header[hd.name] = append(req.Header[hd.name], hd.value)
	}
	return req
}

// serve sends a request through the handler and checks the shape of the answer (see
// checkResponse).
func (h *harness) serve(t testing.TB, req *http.Request) *response {
	t.Helper()
	r, err := serveRecorded(h.handler, req)
	if err == nil {
		err = checkResponse(req, r)
	}
	if err != nil {
		t.Fatalf("%s %s: %v\nheaders: %v\nbody: %s", req.Method, req.URL.Path, err, r.Header, truncate(r.Body))
	}
	return r
}

// serveRecorded runs a request through a handler with a recorder.
func serveRecorded(hd http.Handler, req *http.Request) (*response, error) {
	rec := httptest.NewRecorder()
	hd.ServeHTTP(rec, req)
	res := rec.Result()
	return &response{Status: res.StatusCode, Header: res.Header, Body: rec.Body.Bytes()}, nil
}

// post sends a raw body with a key and Content-Type: application/json, plus hdrs.
func (h *harness) post(t testing.TB, key, body string, hdrs ...header) *response {
	t.Helper()
	all := []header{contentType(mediaJSON)}
	if key != "" {
		all = append(all, apiKey(key))
	}
	return h.serve(t, newRequest(t.Context(), http.MethodPost, body, append(all, hdrs...)...))
}

// query sends a GraphQL query with variables (may be nil) and a key.
func (h *harness) query(t testing.TB, key, query string, vars map[string]any, hdrs ...header) *response {
	t.Helper()
	return h.post(t, key, gqlBody(t, query, vars), hdrs...)
}

// goQuery posts a query on a goroutine of its own, for a query that blocks, and
// returns the channel its checked answer arrives on.
func (h *harness) goQuery(t testing.TB, key, query string) <-chan *response {
	answer := make(chan *response, 1)
	go func() {
		req := newRequest(context.Background(), http.MethodPost, gqlBody(t, query, nil), contentType(mediaJSON), apiKey(key))
		r, _ := serveRecorded(h.handler, req)
		if err := checkResponse(req, r); err != nil {
			t.Error(err)
		}
		answer <- r
	}()
	return answer
}

// checkResponse checks what every answer of the GraphQL handler must satisfy, and fills
// in r.Edge, r.HasData, r.Data and r.Errors:
//   - the edge 403 is text/html, not JSON, with no CORS, error code or credit header;
//   - a preflight is an empty 204;
//   - everything else is a GraphQL result in the negotiated media type (the one asked
//     for by Accept, graphql-response+json without Accept, application/json for answers
//     given before negotiation), with CORS headers and Cache-Control: no-store, whose
//     only members are data, errors and extensions, with data or errors;
//   - every error has a non-empty message and a string extensions.code;
//   - data means 200 and a JSON object or null; a non-200 answer has no data, and has
//     errors;
//   - an X-Error-Code header, when set, is the code of the first error.
func checkResponse(req *http.Request, r *response) error {
	ct := r.Header.Get("Content-Type")
	if r.Status == http.StatusForbidden && strings.HasPrefix(ct, "text/html") {
		r.Edge = true
		if json.Valid(r.Body) {
			return errors.New("the edge 403 has a JSON body")
		}
		if !bytes.Contains(bytes.ToLower(r.Body), []byte("<html")) {
			return errors.New("the edge 403 body is not HTML")
		}
		for name := range r.Header {
			if strings.HasPrefix(strings.ToLower(name), "access-control-") {
				return errors.New("the edge 403 carries the CORS header " + name)
			}
		}
		if r.Header.Get(wire.HeaderErrorCode) != "" || r.Header.Get(wire.HeaderCreditsRemaining) != "" {
			return errors.New("the edge 403 carries service headers")
		}
		return nil
	}
	if req.Method == http.MethodOptions {
		if r.Status != http.StatusNoContent || len(r.Body) != 0 {
			return errors.New("a preflight must be an empty 204, got " + strconv.Itoa(r.Status))
		}
		return nil
	}
	if ct != mediaGraphQL && ct != mediaJSON {
		return errors.New("Content-Type is " + strconv.Quote(ct))
	}
	if want := wantMedia(req.Header.Values("Accept")); want != "" && ct != want && r.Status != http.StatusNotAcceptable && r.Status/100 == 2 {
		return errors.New("Content-Type is " + ct + ", want " + want)
	}
	switch cross := req.Header.Get("Origin") != ""; {
	case cross && r.Header.Get("Access-Control-Allow-Origin") == "":
		return errors.New("a JSON answer to a cross-origin request lacks Access-Control-Allow-Origin")
	case !cross && r.Header.Get("Access-Control-Allow-Origin") != "":
		return errors.New("a JSON answer to a request without an Origin carries Access-Control-Allow-Origin")
	}
	if r.Header.Get("Cache-Control") != "no-store" {
		return errors.New("a JSON answer lacks Cache-Control: no-store")
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(r.Body, &top); err != nil || top == nil {
		return errors.New("the body is not a JSON object")
	}
	for k := range top {
		if k != "data" && k != "errors" && k != "extensions" {
			return errors.New("the result has the member " + strconv.Quote(k))
		}
	}
	data, hasData := top["data"]
	errs, hasErrors := top["errors"]
	if !hasData && !hasErrors {
		return errors.New("the result has neither data nor errors")
	}
	if hasErrors {
		if err := json.Unmarshal(errs, &r.Errors); err != nil {
			return errors.New("errors is not a list of errors: " + err.Error())
		}
		if len(r.Errors) == 0 {
			return errors.New("errors is an empty list")
		}
		for _, e := range r.Errors {
			if e.Message == "" {
				return errors.New("an error has no message")
			}
			if cleantext.Message(e.Message) != e.Message {
				return errors.New("the error message " + strconv.Quote(e.Message) + " is not clean text")
			}
			if e.Code() == "" {
				return errors.New("the error " + strconv.Quote(e.Message) + " has no extensions.code")
			}
		}
	}
	if hasData {
		if r.Status != http.StatusOK {
			return errors.New("an answer with data has status " + strconv.Itoa(r.Status))
		}
		if !bytes.HasPrefix(data, []byte("{")) && string(data) != "null" {
			return errors.New("data is neither an object nor null")
		}
		r.HasData, r.Data = true, data
	} else if r.Status == http.StatusOK && ct == mediaGraphQL {
		return errors.New("a graphql-response+json answer without data has status 200")
	}
	if code := r.Header.Get(wire.HeaderErrorCode); code != "" && (len(r.Errors) == 0 || r.Errors[0].Code() != code) {
		return errors.New("X-Error-Code " + code + " is not the code of the first error")
	}
	return nil
}

// wantMedia returns the media type an answer to a request with these Accept headers
// must have on success, or "" when any will do.
func wantMedia(accept []string) string {
	joined := strings.Join(accept, ",")
	switch {
	case strings.Contains(joined, "q=0"):
		return "" // the tests of negotiation check these themselves
	case len(accept) == 0, strings.Contains(joined, mediaGraphQL):
		return mediaGraphQL
	case strings.Contains(joined, mediaJSON), strings.Contains(joined, "*/*"):
		return mediaJSON
	}
	return ""
}

func truncate(b []byte) string {
	if len(b) > 800 {
		return string(b[:800]) + "..."
	}
	return string(b)
}

// wantError checks an answer that stops the whole query: its status, that it has no
// data and errors that all have the code, and that the first error's message contains
// every fragment (case-insensitively).
func wantError(t testing.TB, r *response, status int, code string, fragments ...string) gqlError {
	t.Helper()
	if r.Status != status || r.Edge || len(r.Errors) == 0 || slices.ContainsFunc(r.Errors, func(e gqlError) bool { return e.Code() != code }) {
		t.Fatalf("got %d %v (%s), want %d %s", r.Status, r.Codes(), truncate(r.Body), status, code)
	}
	if r.HasData {
		t.Errorf("a refused query has data: %s", r.Data)
	}
	e := r.Errors[0]
	for _, f := range fragments {
		if !strings.Contains(strings.ToLower(e.Message), strings.ToLower(f)) {
			t.Errorf("message %q does not mention %q", e.Message, f)
		}
	}
	return e
}

// wantGatewayError is wantError for the gateway's own refusals, which also carry the
// code in X-Error-Code.
func wantGatewayError(t testing.TB, r *response, status int, code string, fragments ...string) gqlError {
	t.Helper()
	e := wantError(t, r, status, code, fragments...)
	if len(r.Errors) != 1 {
		t.Errorf("%d errors, want one: %s", len(r.Errors), r.Body)
	}
	if got := r.Header.Get(wire.HeaderErrorCode); got != code {
		t.Errorf("X-Error-Code is %q, want %q", got, code)
	}
	return e
}

// wantOK checks a success without errors and returns its data.
func wantOK(t testing.TB, r *response) map[string]any {
	t.Helper()
	if r.Status != http.StatusOK || len(r.Errors) != 0 || !r.HasData {
		t.Fatalf("got %d %v: %s, want 200 with data and no errors", r.Status, r.Codes(), truncate(r.Body))
	}
	if r.Header.Get(wire.HeaderErrorCode) != "" {
		t.Errorf("a success carries X-Error-Code %q", r.Header.Get(wire.HeaderErrorCode))
	}
	return r.DataMap(t)
}

// wantCredits checks the credit headers of an authenticated answer: the cost of this
// request and the balance left.
func wantCredits(t testing.TB, r *response, plan string, cost, remaining int64) {
	t.Helper()
	if got := r.Int(wire.HeaderCreditsCost); got != cost {
		t.Errorf("%s is %d, want %d (headers %v)", wire.HeaderCreditsCost, got, cost, r.Header)
	}
	if got := r.Int(wire.HeaderCreditsRemaining); got != remaining {
		t.Errorf("%s is %d, want %d", wire.HeaderCreditsRemaining, got, remaining)
	}
	if r.Int(wire.HeaderCreditsLimit) < 0 || r.Header.Get(wire.HeaderCreditsRenewal) == "" {
		t.Errorf("the credit headers are incomplete: %v", r.Header)
	}
	if got := r.Header.Get(wire.HeaderPlan); got != plan {
		t.Errorf("%s is %q, want %q", wire.HeaderPlan, got, plan)
	}
}

// wantNoCredits checks that an answer carries no credit header.
func wantNoCredits(t testing.TB, r *response) {
	t.Helper()
	for _, name := range []string{wire.HeaderCreditsCost, wire.HeaderCreditsRemaining, wire.HeaderPlan} {
		if r.Header.Get(name) != "" {
			t.Errorf("an unauthenticated answer carries %s", name)
		}
	}
}

// field returns the value at a path of nested objects in data.
func field(t testing.TB, data map[string]any, path ...string) any {
	t.Helper()
	var cur any = data
	for i, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			t.Fatalf("%s is not an object in %v", strings.Join(path[:i], "."), data)
		}
		if cur, ok = m[p]; !ok {
			t.Fatalf("%s is missing in %v", strings.Join(path[:i+1], "."), data)
		}
	}
	return cur
}

// keys returns the sorted keys of an object.
func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// mustJSON encodes v.
func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// jsonNumber is a number as DataMap decodes it.
func jsonNumber(s string) json.Number { return json.Number(s) }
