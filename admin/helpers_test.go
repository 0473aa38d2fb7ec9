package admin_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/admin"
	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/examples/apis"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/rest"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/wire"
)

// adminToken is the admin token of every test service.
const adminToken = "admin-token-0123456789abcdef"

// t0 is where every test clock starts: mid-month, so the renewal date is fixed.
var t0 = time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC)

// uuidPattern is the shape of a key value.
var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// plans are the plans of the sample server.
var plans = []billing.Plan{
	{Name: "free", Credits: 50, RatePerMinute: 5, Concurrency: 1, GraphQLMaxAPIs: 1},
	{Name: "pro", Credits: 100000, RatePerMinute: 600, Concurrency: 10, GraphQLMaxAPIs: 10},
}

// env is a service on memory stores with the sample catalog, its manager, and the
// admin and REST handlers on one mux behind a test server.
type env struct {
	t     *testing.T
	clock *testenv.Clock
	svc   *tollgate.Service
	mgr   *accounts.Manager
	srv   *httptest.Server
	logs  *testenv.Logs // everything the service logged
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, nil)
}

// newEnvWith is newEnv with the admin handler's options.
func newEnvWith(t *testing.T, opts *admin.Options) *env {
	t.Helper()
	return newEnvOf(t, envConfig{admin: opts})
}

// envConfig says what differs from newEnv's env: the admin handler's options, the
// plans (default: plans), the stores (default: fresh memory stores), the service's
// key cache (default: none) and when the clock starts (default: t0).
type envConfig struct {
	admin    *admin.Options
	plans    []billing.Plan
	stores   tollgate.Stores
	keyCache *auth.KeyCacheOptions
	start    time.Time
}

// newEnvOf returns the env that c describes.
func newEnvOf(t *testing.T, c envConfig) *env {
	t.Helper()
	if c.start.IsZero() {
		c.start = t0
	}
	clk := testenv.NewClock(c.start)
	logs := &testenv.Logs{}
	return serve(t, clk, logs, managerOf(t, clk.Now, logs.Logger(), c), c.admin)
}

// serve returns the env of mgr's service, whose clock is clk and logs logs: its admin
// handler (with opts) and REST handler behind a test server.
func serve(t *testing.T, clk *testenv.Clock, logs *testenv.Logs, mgr *accounts.Manager, opts *admin.Options) *env {
	t.Helper()
	svc := mgr.Service()
	ah, err := admin.NewHandler(mgr, adminToken, opts)
	if err != nil {
		t.Fatal(err)
	}
	rh, err := rest.NewHandler(svc, &rest.Options{Accounts: mgr, Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/admin/", ah)
	mux.Handle("/v1/", rh)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &env{t: t, clock: clk, svc: svc, mgr: mgr, srv: srv, logs: logs}
}

// newManager returns the manager of a service on memory stores, with an audit log, the
// sample catalog and plans.
func newManager(tb testing.TB, now func() time.Time, logger *slog.Logger) *accounts.Manager {
	tb.Helper()
	return managerOf(tb, now, logger, envConfig{})
}

// managerOf is newManager with the plans, stores and key cache of c.
func managerOf(tb testing.TB, now func() time.Time, logger *slog.Logger, c envConfig) *accounts.Manager {
	tb.Helper()
	reg := &catalog.Registry{}
	if err := apis.Register(reg); err != nil {
		tb.Fatal(err)
	}
	if c.plans == nil {
		c.plans = plans
	}
	ps, err := billing.NewPlans(c.plans...)
	if err != nil {
		tb.Fatal(err)
	}
	stores := c.stores
	if stores.Keys == nil {
		stores = tollgate.Stores{
			Keys:   memory.NewKeyStore(),
			Ledger: memory.NewLedger(nil),
			Rates:  memory.NewRateLimiter(),
			Slots:  memory.NewConcurrencyLimiter(),
		}
	}
	svc, err := tollgate.New(reg, stores, ps, &tollgate.Options{Now: now, Logger: logger, KeyCache: c.keyCache})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(svc.Close)
	auditStore := memory.NewAuditStore()
	auditLog := audit.NewLog(auditStore, &audit.LogOptions{Now: now, Logger: logger})
	svc.Events().Subscribe(auditLog, auditLog.Kinds()...)
	tb.Cleanup(auditLog.Close)
	mgr, err := accounts.New(svc, &accounts.Options{Audit: auditStore, Logger: logger})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(mgr.Close)
	return mgr
}

// envelope is the response envelope.
type envelope struct {
	Status string          `json:"status"`
	Error  *string         `json:"error"`
	Data   json.RawMessage `json:"data"`
	Code   *string         `json:"code"`
}

// response is a decoded HTTP response.
type response struct {
	status int
	header http.Header
	body   []byte
	env    envelope
}

// roundTrip sends a request to the test server and returns the answer and its body.
// hdr holds header name/value pairs.
func (e *env) roundTrip(method, path string, body io.Reader, hdr ...string) (*http.Response, []byte) {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.srv.URL+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return res, b
}

// do sends a request to the test server, and decodes the envelope of a JSON answer.
// hdr holds header name/value pairs.
func (e *env) do(method, path string, body io.Reader, hdr ...string) response {
	e.t.Helper()
	res, b := e.roundTrip(method, path, body, hdr...)
	r := response{status: res.StatusCode, header: res.Header, body: b}
	if strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") && len(b) > 0 {
		d := json.NewDecoder(bytes.NewReader(b))
		d.DisallowUnknownFields()
		if err := d.Decode(&r.env); err != nil {
			e.t.Fatalf("%s %s: the body is not an envelope: %v\n%s", method, path, err, b)
		}
		// An error envelope carries its code, the same as X-Error-Code; a success none.
		if code := r.header.Get(wire.HeaderErrorCode); (r.env.Status == "error") != (r.env.Code != nil) || r.env.Code != nil && *r.env.Code != code {
			e.t.Fatalf("%s %s: the envelope's code is not X-Error-Code %q\n%s", method, path, code, b)
		}
	}
	return r
}

// admin sends an authorized admin request with a JSON body (none if body is "").
func (e *env) admin(method, path, body string, hdr ...string) response {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
		hdr = append([]string{"Content-Type", "application/json"}, hdr...)
	}
	return e.do(method, path, rd, append([]string{"Authorization", "Bearer " + adminToken}, hdr...)...)
}

// rest calls an API over REST with a key: GET with a query, or POST with a JSON body.
func (e *env) rest(key, api string, params map[string]string) response {
	e.t.Helper()
	if api == "echo" || api == "hmac" {
		b, _ := json.Marshal(params)
		return e.do(http.MethodPost, "/v1/"+api, bytes.NewReader(b), "x-api-key", key, "Content-Type", "application/json")
	}
	q := url.Values{}
	for k, v := range params {
		q.Set(k, v)
	}
	return e.do(http.MethodGet, "/v1/"+api+"?"+q.Encode(), nil, "x-api-key", key)
}

// hash calls GET /v1/hash?text=x with key and returns the status.
func (e *env) hash(key string) int {
	e.t.Helper()
	return e.rest(key, "hash", map[string]string{"text": "x"}).status
}

// wantStatus fails the test unless r has the status; an error status must come with an
// error envelope.
func wantStatus(t *testing.T, what string, r response, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s: status %d, want %d\n%s", what, r.status, status, r.body)
	}
	if !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
		t.Fatalf("%s: Content-Type %q, want JSON", what, r.header.Get("Content-Type"))
	}
	if status >= 400 {
		if r.env.Status != "error" || r.env.Error == nil || *r.env.Error == "" || string(r.env.Data) != "null" {
			t.Fatalf("%s: not an error envelope: %s", what, r.body)
		}
	} else if r.env.Status != "ok" || r.env.Error != nil {
		t.Fatalf("%s: not a success envelope: %s", what, r.body)
	}
}

// wantError checks an error response and that its message holds each of the
// fragments.
func wantError(t *testing.T, what string, r response, status int, fragments ...string) {
	t.Helper()
	wantStatus(t, what, r, status)
	for _, f := range fragments {
		if !strings.Contains(*r.env.Error, f) {
			t.Errorf("%s: error %q does not mention %q", what, *r.env.Error, f)
		}
	}
}

// data decodes the envelope's data into v.
func data[T any](t *testing.T, r response) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.env.Data, &v); err != nil {
		t.Fatalf("data: %v\n%s", err, r.body)
	}
	return v
}

// accountJSON is data.account.
type accountJSON struct {
	ID         string     `json:"id"`
	Plan       string     `json:"plan"`
	CreatedAt  time.Time  `json:"created_at"`
	APIs       []string   `json:"apis"`
	Channels   []string   `json:"channels"`
	AllowedIPs []string   `json:"allowed_ips"`
	ExpiresAt  *time.Time `json:"expires_at"`
}

// keyJSON is data.key.
type keyJSON struct {
	ID         string     `json:"id"`
	Account    string     `json:"account"`
	Name       string     `json:"name"`
	Primary    bool       `json:"primary"`
	Revoked    bool       `json:"revoked"`
	CreatedAt  time.Time  `json:"created_at"`
	RotatedAt  *time.Time `json:"rotated_at"`
	RevokedAt  *time.Time `json:"revoked_at"`
	APIs       []string   `json:"apis"`
	Channels   []string   `json:"channels"`
	AllowedIPs []string   `json:"allowed_ips"`
	ExpiresAt  *time.Time `json:"expires_at"`
}

// balanceJSON is data.balance.
type balanceJSON struct {
	Remaining          int64     `json:"remaining"`
	Granted            int64     `json:"granted"`
	AllowanceRemaining int64     `json:"allowance_remaining"`
	Used               int64     `json:"used"`
	Limit              int64     `json:"limit"`
	Renewal            time.Time `json:"renewal"`
	NextLapse          *struct {
		At      time.Time `json:"at"`
		Credits int64     `json:"credits"`
	} `json:"next_lapse"`
}

// createdAccount is the data of POST /admin/v1/accounts.
type createdAccount struct {
	Account accountJSON `json:"account"`
	Key     keyJSON     `json:"key"`
	Value   string      `json:"value"`
}

// keyWithValue is the data of key creation and rotation.
type keyWithValue struct {
	Key   keyJSON `json:"key"`
	Value string  `json:"value"`
}

// accountInfo is the data of GET /admin/v1/accounts/{id}.
type accountInfo struct {
	Account accountJSON `json:"account"`
	Balance balanceJSON `json:"balance"`
	Keys    []keyJSON   `json:"keys"`
}

// createAccount creates an account through the admin API and returns its data.
func (e *env) createAccount(body string) createdAccount {
	e.t.Helper()
	r := e.admin(http.MethodPost, "/admin/v1/accounts", body)
	wantStatus(e.t, "create account "+body, r, http.StatusCreated)
	return data[createdAccount](e.t, r)
}

// createKey creates a sub-key through the admin API and returns its data.
func (e *env) createKey(account, body string) keyWithValue {
	e.t.Helper()
	r := e.admin(http.MethodPost, "/admin/v1/accounts/"+account+"/keys", body)
	wantStatus(e.t, "create key "+body, r, http.StatusCreated)
	return data[keyWithValue](e.t, r)
}

// account reads an account through the admin API.
func (e *env) account(id string) accountInfo {
	e.t.Helper()
	r := e.admin(http.MethodGet, "/admin/v1/accounts/"+id, "")
	wantStatus(e.t, "get account "+id, r, http.StatusOK)
	return data[accountInfo](e.t, r)
}
