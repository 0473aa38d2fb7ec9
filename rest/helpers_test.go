package rest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"log/slog"
	"math"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/examples/apis"
	"github.com/tollgate-dev/tollgate/internal/doortest"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/rest"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/usage"
	"github.com/tollgate-dev/tollgate/wire"
)

// t0 is the instant every test clock starts at: the middle of a month, so that a
// month's renewal is a deliberate step of the test.
var t0 = time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC)

// sessionSecret is a session secret of the minimum length.
var sessionSecret = []byte("0123456789abcdef0123456789abcdef")

// testPlans are the plans of every test service. tiny is small enough to hit each of
// its limits in a few calls; open has no rate or concurrency limit.
var testPlans = []billing.Plan{
	{Name: "free", Credits: 50, RatePerMinute: 5, Concurrency: 1, GraphQLMaxAPIs: 1, BatchMaxItems: 10},
	{Name: "pro", Credits: 100000, RatePerMinute: 600, Concurrency: 10, GraphQLMaxAPIs: 10, BatchMaxItems: 100},
	{Name: "tiny", Credits: 5, RatePerMinute: 2, Concurrency: 1, GraphQLMaxAPIs: 1},
	{Name: "open", Credits: 1000, GraphQLMaxAPIs: 10},
}

// config changes the defaults of a test harness.
type config struct {
	// svc is passed to tollgate.New; its Now and Logger are replaced.
	svc tollgate.Options
	// accounts is passed to accounts.New; its Logger is replaced.
	accounts accounts.Options
	// usage, if set, records the service's usage statistics: a usage.Recorder on it
	// (with the defaults but the test clock) observes the service's events, and the
	// manager reads it (accounts.Options.Usage).
	usage usage.Store
	// rest is passed to rest.NewHandler; its Logger is replaced.
	rest rest.Options
	// edge is the edge of the door (rest.Options.Edge).
	edge edge.Options
	// sessions turns on x-jwt (tollgate.Options.Sessions).
	sessions bool
	// sampleOnly leaves out the test APIs (block, fail, nan, list, panic).
	sampleOnly bool
	// noServer builds no httptest.Server (for the fuzz target).
	noServer bool
	// plans replaces testPlans.
	plans []billing.Plan
	// realClock uses time.Now instead of a test clock (for benchmarks).
	realClock bool
}

// harness is one service, with the manager of its accounts, and the REST handler in
// front of it.
type harness struct {
	clock    *testenv.Clock
	svc      *tollgate.Service
	mgr      *accounts.Manager
	rec      *usage.Recorder // nil unless config.usage is set
	handler  *rest.Handler
	srv      *httptest.Server
	client   *http.Client
	sessions *auth.Sessions
	block    *doortest.Blocker
	cfg      config
}

// testAPIs are the APIs the harness adds to the sample catalog.
func testAPIs(b *doortest.Blocker) []catalog.API {
	return []catalog.API{
		b.API(),
		doortest.FailAPI(1),
		{
			ID: "nan", Title: "NaN", Description: "Returns a result that JSON cannot encode.",
			Method: http.MethodGet, Cost: 1,
			Handler: catalog.HandlerFunc(func(context.Context, *catalog.Request) (any, error) {
				return map[string]any{"ratio": math.NaN()}, nil
			}),
		},
		{
			ID: "list", Title: "List", Description: "Returns a result that is not a JSON object.",
			Method: http.MethodGet, Cost: 1,
			Handler: catalog.HandlerFunc(func(context.Context, *catalog.Request) (any, error) {
				return []int{1, 2, 3}, nil
			}),
		},
		doortest.PanicAPI(),
		{
			ID: "metered", Title: "Metered", Description: "Costs at most 10 credits, and charges n.",
			Method: http.MethodGet, Cost: 10,
			Params: []catalog.Param{{Name: "n", Type: catalog.Integer, Required: true}},
			Handler: catalog.HandlerFunc(func(_ context.Context, req *catalog.Request) (any, error) {
				return map[string]any{"charged": req.Charge(req.Params.Int("n")) == nil}, nil
			}),
		},
		{
			ID: "free", Title: "Free", Description: "Costs nothing.",
			Method: http.MethodGet, Cost: 0,
			Handler: catalog.HandlerFunc(func(context.Context, *catalog.Request) (any, error) {
				return map[string]any{"ok": true}, nil
			}),
		},
	}
}

// newHarness builds a service on memory stores with the sample catalog (and, unless
// cfg.sampleOnly, the test APIs), its REST handler and an httptest.Server in front.
func newHarness(t testing.TB, cfg config) *harness {
	t.Helper()
	h := &harness{clock: testenv.NewClock(t0), cfg: cfg, block: doortest.NewBlocker()}
	reg := &catalog.Registry{}
	if err := apis.Register(reg); err != nil {
		t.Fatal(err)
	}
	if !cfg.sampleOnly {
		for _, a := range testAPIs(h.block) {
			if err := reg.Register(a); err != nil {
				t.Fatal(err)
			}
		}
	}
	plans := cfg.plans
	if plans == nil {
		plans = testPlans
	}
	ps, err := billing.NewPlans(plans...)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	opts := cfg.svc
	opts.Now = h.clock.Now
	if cfg.realClock {
		opts.Now = nil
	}
	opts.Logger = logger
	if cfg.sessions {
		if h.sessions, err = auth.NewSessions(sessionSecret); err != nil {
			t.Fatal(err)
		}
		opts.Sessions = h.sessions
	}
	stores := tollgate.Stores{
		Keys:   memory.NewKeyStore(),
		Ledger: memory.NewLedger(nil),
		Rates:  memory.NewRateLimiter(),
		Slots:  memory.NewConcurrencyLimiter(),
	}
	h.svc, err = tollgate.New(reg, stores, ps, &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.svc.Close)
	aopts := cfg.accounts
	aopts.Logger = logger
	if cfg.usage != nil {
		h.rec, err = usage.NewRecorder(cfg.usage, &usage.RecorderOptions{Now: opts.Now, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		h.svc.Events().Subscribe(h.rec, h.rec.Kinds()...)
		t.Cleanup(func() { _ = h.rec.Close(context.Background()) })
		aopts.Usage = cfg.usage
	}
	if h.mgr, err = accounts.New(h.svc, &aopts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.mgr.Close)
	ropts := cfg.rest
	ropts.Logger = logger
	e, err := edge.New(&cfg.edge)
	if err != nil {
		t.Fatal(err)
	}
	ropts.Edge = e
	if ropts.Accounts == nil {
		ropts.Accounts = h.mgr
	}
	h.handler, err = rest.NewHandler(h.svc, &ropts)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.noServer {
		return h
	}
	h.srv = httptest.NewServer(h.handler)
	t.Cleanup(h.srv.Close)
	t.Cleanup(h.block.Release) // runs first: blocked calls end before the server closes
	h.client = h.srv.Client()
	return h
}

// peerAddr is the address the server sees its test clients come from.
func (h *harness) peerAddr() netip.Addr {
	return netip.MustParseAddrPort(h.srv.Listener.Addr().String()).Addr().Unmap()
}

// account is a test account with its primary key.
type account struct {
	ID    string
	KeyID string
	Key   string
}

// accountOpts are the optional parts of a new account.
type accountOpts struct {
	credits      *int64
	restrictions auth.RestrictionSpec
}

// newAccount creates an account on plan through the Manager.
func (h *harness) newAccount(t testing.TB, plan string, opts ...accountOpts) account {
	t.Helper()
	spec := accounts.Spec{Plan: plan}
	for _, o := range opts {
		spec.Credits = o.credits
		spec.Restrictions = restrictions(t, o.restrictions)
	}
	acct, key, value, err := h.mgr.CreateAccount(t.Context(), spec)
	if err != nil {
		t.Fatalf("CreateAccount(%s): %v", plan, err)
	}
	return account{ID: acct.ID, KeyID: key.ID, Key: value}
}

// credits returns a pointer to n, for accountOpts.credits.
func credits(n int64) *int64 { return &n }

// newSubKey creates a sub-key of the account with the given restrictions.
func (h *harness) newSubKey(t testing.TB, acct account, name string, spec auth.RestrictionSpec) account {
	t.Helper()
	key, value, err := h.mgr.CreateKey(t.Context(), acct.ID, accounts.NewKey{Name: name, Restrictions: restrictions(t, spec)})
	if err != nil {
		t.Fatalf("CreateKey(%s, %+v): %v", name, spec, err)
	}
	return account{ID: acct.ID, KeyID: key.ID, Key: value}
}

func restrictions(t testing.TB, spec auth.RestrictionSpec) auth.Restrictions {
	t.Helper()
	r, err := auth.NewRestrictions(spec)
	if err != nil {
		t.Fatalf("NewRestrictions(%+v): %v", spec, err)
	}
	return r
}

// balance reads an account's balance through the Manager.
func (h *harness) balance(t testing.TB, acctID string) billing.Balance {
	t.Helper()
	info, err := h.mgr.Account(t.Context(), acctID)
	if err != nil {
		t.Fatalf("Account(%s): %v", acctID, err)
	}
	return info.Balance
}

// session issues a session token for the account, valid for ttl from the test clock.
func (h *harness) session(t testing.TB, acctID string, ttl time.Duration) string {
	t.Helper()
	tok, err := h.sessions.Issue(acctID, h.clock.Now(), ttl)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// response is an answer of the REST handler, read and checked.
type response struct {
	Status int
	Header http.Header
	Body   []byte
	// Edge reports the edge's HTML 403.
	Edge bool
	// Error is the envelope's error message (empty on success); Data its data member
	// (null on failure).
	Error string
	Data  json.RawMessage
}

// Code returns the X-Error-Code header.
func (r *response) Code() string { return r.Header.Get(wire.HeaderErrorCode) }

// Int returns an integer header, or -1 if it is absent or not a number.
func (r *response) Int(name string) int64 {
	n, err := strconv.ParseInt(r.Header.Get(name), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// DataMap decodes the data member as an object.
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

// header is one request header. Names are sent as written.
type header struct{ name, value string }

func key(v string) header         { return header{"X-Api-Key", v} }
func bearer(v string) header      { return header{"Authorization", "Bearer " + v} }
func jwt(v string) header         { return header{"X-Jwt", v} }
func contentType(v string) header { return header{"Content-Type", v} }

var jsonType = contentType("application/json")

// do sends a request to the test server and checks the shape of the answer (see
// checkResponse).
func (h *harness) do(t testing.TB, method, path string, body io.Reader, hdrs ...header) *response {
	t.Helper()
	r, err := h.send(t.Context(), method, path, body, hdrs...)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if err := h.checkResponse(method, path, hasOrigin(hdrs), r); err != nil {
		t.Fatalf("%s %s: %v\nheaders: %v\nbody: %s", method, path, err, r.Header, truncateForLog(r.Body))
	}
	return r
}

// hasOrigin reports whether the headers hold an Origin: a cross-origin request.
func hasOrigin(hdrs []header) bool {
	return slices.ContainsFunc(hdrs, func(h header) bool { return strings.EqualFold(h.name, "Origin") })
}

// send is do without testing.TB, for goroutines: it returns what went wrong.
func (h *harness) send(ctx context.Context, method, path string, body io.Reader, hdrs ...header) (*response, error) {
	req, err := http.NewRequestWithContext(ctx, method, h.srv.URL+path, body)
	if err != nil {
		return nil, err
	}
	for _, hd := range hdrs {
		req.Header[hd.name] = append(req.Header[hd.name], hd.value) // as written, not canonicalized
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return &response{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// serve sends a request through the handler with a recorder (no network) and checks
// the shape of the answer.
func (h *harness) serve(t testing.TB, req *http.Request) *response {
	t.Helper()
	rec := httptest.NewRecorder()
	h.handler.ServeHTTP(rec, req)
	r := &response{Status: rec.Code, Header: rec.Result().Header, Body: rec.Body.Bytes()}
	if err := h.checkResponse(req.Method, req.URL.Path, req.Header.Get("Origin") != "", r); err != nil {
		t.Fatalf("%s %s: %v\nheaders: %v\nbody: %s", req.Method, req.URL.Path, err, r.Header, truncateForLog(r.Body))
	}
	return r
}

// checkResponse checks what every answer of the REST handler must satisfy and fills in
// r.Edge, r.Error and r.Data:
//   - the edge 403 is text/html, not JSON, with no Access-Control-* header;
//   - a preflight is 204 without a body; the OpenAPI document is JSON;
//   - everything else is the envelope with exactly status, error and data: "ok", null
//     and an object on 2xx, "error", a non-empty message and null otherwise, with
//     X-Error-Code on errors only, and (with the default CORS policy) CORS headers when
//     the request is cross-origin (has an Origin), none otherwise.
func (h *harness) checkResponse(method, path string, cross bool, r *response) error {
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
	if method == http.MethodOptions {
		if r.Status != http.StatusNoContent || len(r.Body) != 0 {
			return errors.New("a preflight must be an empty 204, got " + strconv.Itoa(r.Status))
		}
		return nil
	}
	if ct != "application/json" {
		return errors.New("Content-Type is " + strconv.Quote(ct) + ", want application/json")
	}
	switch acao := r.Header.Get("Access-Control-Allow-Origin"); {
	case len(h.cfg.edge.AllowedOrigins) == 0 && cross && acao != "*":
		return errors.New("a JSON answer to a cross-origin request lacks Access-Control-Allow-Origin: *")
	case !cross && (acao != "" || r.Header.Get("Access-Control-Expose-Headers") != ""):
		return errors.New("a JSON answer to a request without an Origin carries CORS headers")
	}
	if path == "/v1/openapi.json" && r.Status == http.StatusOK {
		if !json.Valid(r.Body) {
			return errors.New("the OpenAPI document is not valid JSON")
		}
		return nil
	}
	var env map[string]json.RawMessage
	if err := json.Unmarshal(r.Body, &env); err != nil {
		return errors.New("the body is not a JSON object: " + err.Error())
	}
	ok := r.Status >= 200 && r.Status < 300
	switch {
	case ok && (len(env) != 3 || env["status"] == nil || env["error"] == nil || env["data"] == nil):
		return errors.New("a success envelope must have exactly the fields status, error and data")
	case !ok && (len(env) != 4 || env["status"] == nil || env["error"] == nil || env["data"] == nil || env["code"] == nil):
		return errors.New("an error envelope must have exactly the fields status, error, data and code")
	}
	var status string
	if err := json.Unmarshal(env["status"], &status); err != nil {
		return errors.New("status is not a string")
	}
	if ok {
		switch {
		case status != "ok":
			return errors.New(`status is ` + strconv.Quote(status) + ` on success, want "ok"`)
		case string(env["error"]) != "null":
			return errors.New("error is not null on success")
		case !bytes.HasPrefix(env["data"], []byte("{")):
			return errors.New("data is not an object on success")
		case r.Header.Get(wire.HeaderErrorCode) != "":
			return errors.New("a success carries X-Error-Code")
		}
		r.Data = env["data"]
		return nil
	}
	switch {
	case status != "error":
		return errors.New(`status is ` + strconv.Quote(status) + ` on failure, want "error"`)
	case string(env["data"]) != "null":
		return errors.New("data is not null on failure")
	case r.Header.Get(wire.HeaderErrorCode) == "":
		return errors.New("a failure lacks X-Error-Code")
	case string(env["code"]) != strconv.Quote(r.Header.Get(wire.HeaderErrorCode)):
		return errors.New("the envelope's code " + string(env["code"]) + " is not X-Error-Code's " + r.Header.Get(wire.HeaderErrorCode))
	}
	if err := json.Unmarshal(env["error"], &r.Error); err != nil || r.Error == "" {
		return errors.New("error is not a non-empty string on failure")
	}
	return nil
}

func truncateForLog(b []byte) string {
	if len(b) > 600 {
		return string(b[:600]) + "..."
	}
	return string(b)
}

// wantError checks an error answer: its status, X-Error-Code and that the message
// contains every fragment (case-insensitively).
func wantError(t testing.TB, r *response, status int, code string, fragments ...string) {
	t.Helper()
	if r.Status != status || r.Code() != code {
		t.Fatalf("got %d %q (%s), want %d %q", r.Status, r.Code(), truncateForLog(r.Body), status, code)
	}
	for _, f := range fragments {
		if !strings.Contains(strings.ToLower(r.Error), strings.ToLower(f)) {
			t.Errorf("message %q does not mention %q", r.Error, f)
		}
	}
}

// wantOK checks a success and returns its data.
func wantOK(t testing.TB, r *response) map[string]any {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("got %d %q: %s, want 200", r.Status, r.Code(), truncateForLog(r.Body))
	}
	return r.DataMap(t)
}

// analytics is the decoded data of GET /v1/analytics.
type analytics struct {
	Account string `json:"account"`
	Plan    string `json:"plan"`
	Key     *struct {
		ID      string `json:"id"`
		Name    string `json:"name"`
		Primary bool   `json:"primary"`
	} `json:"key"`
	Credits struct {
		Used      int64     `json:"used"`
		Remaining int64     `json:"remaining"`
		Limit     int64     `json:"limit"`
		Renewal   time.Time `json:"renewal"`
	} `json:"credits"`
	RateLimit *struct {
		PerMinute int `json:"per_minute"`
		Burst     int `json:"burst"`
		Remaining int `json:"remaining"`
	} `json:"rate_limit"`
	Concurrency struct {
		Limit int `json:"limit"`
		InUse int `json:"in_use"`
	} `json:"concurrency"`
	GraphQLMaxAPIs int              `json:"graphql_max_apis"`
	BatchMaxItems  int              `json:"batch_max_items"`
	Calls          map[string]int64 `json:"calls"`
}

// analytics calls GET /v1/analytics with the given credential and decodes it.
func (h *harness) analytics(t testing.TB, creds ...header) analytics {
	t.Helper()
	r := h.do(t, http.MethodGet, "/v1/analytics", nil, creds...)
	wantOK(t, r)
	var a analytics
	if err := json.Unmarshal(r.Data, &a); err != nil {
		t.Fatalf("analytics %s: %v", r.Data, err)
	}
	return a
}

// hash calls the hash API with a key.
func (h *harness) hash(t testing.TB, k string) *response {
	t.Helper()
	return h.do(t, http.MethodGet, "/v1/hash?text=hello", nil, key(k))
}

// Test images, generated.

func pngImage(t testing.TB, w, hgt int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, testImage(w, hgt)); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func jpegImage(t testing.TB, w, hgt int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, testImage(w, hgt), nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func gifImage(t testing.TB, w, hgt int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := gif.Encode(&b, testImage(w, hgt), nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func testImage(w, h int) image.Image {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for x := range w {
		for y := range h {
			img.Set(x, y, color.RGBA{uint8(x * 40), uint8(y * 40), 200, 255})
		}
	}
	return img
}

// formPart is one part of a multipart body: a file if filename is set.
type formPart struct {
	field, filename string
	data            []byte
}

// multipartBody encodes parts and returns the body and its Content-Type.
func multipartBody(t testing.TB, parts ...formPart) (*bytes.Buffer, string) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for _, p := range parts {
		var w io.Writer
		var err error
		if p.filename != "" {
			w, err = mw.CreateFormFile(p.field, p.filename)
		} else {
			w, err = mw.CreateFormField(p.field)
		}
		if err != nil {
			t.Fatal(err)
		}
		w.Write(p.data)
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return &b, mw.FormDataContentType()
}
