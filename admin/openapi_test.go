package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/admin"
	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/examples/apis"
	"github.com/tollgate-dev/tollgate/internal/mgmtapi"
	"github.com/tollgate-dev/tollgate/internal/openapitest"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/usage"
	"github.com/tollgate-dev/tollgate/webhook"
)

// TestOpenAPIRoutes checks that the OpenAPI document has an operation for every route
// the handler registers, with its method, and none for a route it does not.
func TestOpenAPIRoutes(t *testing.T) {
	h, err := admin.NewHandler(newManager(t, time.Now, slog.New(slog.DiscardHandler)), adminToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	registered := admin.Routes(h)
	documented := openapitest.Load(t, admin.OpenAPI()).Routes()
	for _, r := range registered {
		if !slices.Contains(documented, r) {
			t.Errorf("the handler serves %s, which the OpenAPI document does not describe", r)
		}
	}
	for _, r := range documented {
		if !slices.Contains(registered, r) {
			t.Errorf("the OpenAPI document describes %s, which the handler does not serve", r)
		}
	}
	if !slices.Contains(registered, http.MethodGet+" "+admin.OpenAPIPath) {
		t.Errorf("the handler does not serve its document at %s: %v", admin.OpenAPIPath, registered)
	}
}

// TestOpenAPILint checks that the document is valid OpenAPI 3.1, with Redocly's
// recommended rules.
func TestOpenAPILint(t *testing.T) {
	openapitest.Lint(t, admin.OpenAPI())
}

// TestOpenAPIExamples checks that the example of every request body is valid for its
// schema: the requests of TestOpenAPIRefusals are built from them.
func TestOpenAPIExamples(t *testing.T) {
	doc := openapitest.Load(t, admin.OpenAPI())
	for _, op := range doc.Operations() {
		schema, example, _ := op.Body()
		if schema == nil {
			continue
		}
		if example == nil {
			t.Errorf("%s: its body has no example", op)
			continue
		}
		if err := doc.Validate(schema, example, true); err != nil {
			t.Errorf("%s: the example %v is not valid for the body's schema: %v", op, example, err)
		}
	}
}

// faults make the stores of a docEnv fail: down as a server out of reach does, and
// churn as an account that changes at every attempt to update it.
type faults struct{ down, churn atomic.Bool }

func (f *faults) err(what string) error {
	if f.down.Load() {
		return fmt.Errorf("%s: %w: connection refused", what, store.ErrUnavailable)
	}
	return nil
}

// faultyKeys is a key store that fails as its faults say.
type faultyKeys struct {
	*memory.KeyStore
	f *faults
}

func (k faultyKeys) CreateAccount(ctx context.Context, a auth.Account, primary auth.Key) error {
	if err := k.f.err("creating an account"); err != nil {
		return err
	}
	return k.KeyStore.CreateAccount(ctx, a, primary)
}

func (k faultyKeys) Account(ctx context.Context, id string) (auth.Account, error) {
	if err := k.f.err("reading an account"); err != nil {
		return auth.Account{}, err
	}
	return k.KeyStore.Account(ctx, id)
}

func (k faultyKeys) UpdateAccount(ctx context.Context, u auth.AccountUpdate) (auth.Account, error) {
	if err := k.f.err("updating an account"); err != nil {
		return auth.Account{}, err
	}
	if k.f.churn.Load() {
		return auth.Account{}, auth.ErrAccountChanged
	}
	return k.KeyStore.UpdateAccount(ctx, u)
}

func (k faultyKeys) Accounts(ctx context.Context, q auth.AccountQuery) (auth.AccountPage, error) {
	if err := k.f.err("listing accounts"); err != nil {
		return auth.AccountPage{}, err
	}
	return k.KeyStore.Accounts(ctx, q)
}

func (k faultyKeys) DeleteAccount(ctx context.Context, id string) error {
	if err := k.f.err("deleting an account"); err != nil {
		return err
	}
	return k.KeyStore.DeleteAccount(ctx, id)
}

func (k faultyKeys) CreateKey(ctx context.Context, key auth.Key, limit auth.KeyLimit) error {
	if err := k.f.err("creating a key"); err != nil {
		return err
	}
	return k.KeyStore.CreateKey(ctx, key, limit)
}

func (k faultyKeys) Key(ctx context.Context, id string) (auth.Key, error) {
	if err := k.f.err("reading a key"); err != nil {
		return auth.Key{}, err
	}
	return k.KeyStore.Key(ctx, id)
}

func (k faultyKeys) Keys(ctx context.Context, q auth.KeyQuery) (auth.KeyPage, error) {
	if err := k.f.err("listing keys"); err != nil {
		return auth.KeyPage{}, err
	}
	return k.KeyStore.Keys(ctx, q)
}

func (k faultyKeys) RotateKey(ctx context.Context, id string, rev int64, h auth.Hash, at time.Time) (auth.Key, error) {
	if err := k.f.err("rotating a key"); err != nil {
		return auth.Key{}, err
	}
	return k.KeyStore.RotateKey(ctx, id, rev, h, at)
}

func (k faultyKeys) RevokeKey(ctx context.Context, id string, rev int64, at time.Time) (auth.Key, error) {
	if err := k.f.err("revoking a key"); err != nil {
		return auth.Key{}, err
	}
	return k.KeyStore.RevokeKey(ctx, id, rev, at)
}

// faultyLedger is a ledger that fails while its faults are down.
type faultyLedger struct {
	*memory.Ledger
	f *faults
}

func (l faultyLedger) Open(ctx context.Context, o driver.Opening) error {
	if err := l.f.err("opening a balance"); err != nil {
		return err
	}
	return l.Ledger.Open(ctx, o)
}

func (l faultyLedger) Adjust(ctx context.Context, a driver.Adjustment) (billing.Balance, error) {
	if err := l.f.err("adjusting a balance"); err != nil {
		return billing.Balance{}, err
	}
	return l.Ledger.Adjust(ctx, a)
}

func (l faultyLedger) Balance(ctx context.Context, account string, now time.Time, p driver.Period, allowance int64) (billing.Balance, error) {
	if err := l.f.err("reading a balance"); err != nil {
		return billing.Balance{}, err
	}
	return l.Ledger.Balance(ctx, account, now, p, allowance)
}

// faultyAudit is an audit store whose listing fails while its faults are down.
type faultyAudit struct {
	*memory.AuditStore
	f *faults
}

func (a faultyAudit) List(ctx context.Context, q audit.Query) (audit.Page, error) {
	if err := a.f.err("listing the audit log"); err != nil {
		return audit.Page{}, err
	}
	return a.AuditStore.List(ctx, q)
}

// faultyUsage is a usage store whose totals fail while its faults are down.
type faultyUsage struct {
	*memory.UsageStore
	f *faults
}

func (u faultyUsage) Totals(ctx context.Context, q usage.TotalsQuery) (usage.TotalsPage, error) {
	if err := u.f.err("summing usage"); err != nil {
		return usage.TotalsPage{}, err
	}
	return u.UsageStore.Totals(ctx, q)
}

// faultyHooks is a webhook store that fails while its faults are down.
type faultyHooks struct {
	*memory.WebhookStore
	f *faults
}

func (h faultyHooks) CreateEndpoint(ctx context.Context, e webhook.Endpoint) (webhook.Endpoint, error) {
	if err := h.f.err("creating an endpoint"); err != nil {
		return webhook.Endpoint{}, err
	}
	return h.WebhookStore.CreateEndpoint(ctx, e)
}

func (h faultyHooks) Endpoint(ctx context.Context, id string) (webhook.Endpoint, error) {
	if err := h.f.err("reading an endpoint"); err != nil {
		return webhook.Endpoint{}, err
	}
	return h.WebhookStore.Endpoint(ctx, id)
}

func (h faultyHooks) Endpoints(ctx context.Context, account string) ([]webhook.Endpoint, error) {
	if err := h.f.err("listing endpoints"); err != nil {
		return nil, err
	}
	return h.WebhookStore.Endpoints(ctx, account)
}

// docEnv is a service for the black-box tests of the OpenAPI document: its admin and
// REST handlers on stores that fail as faults say, with an audit log, usage
// statistics and webhooks unless bare, and closed accounts deletable at once. It checks every answer
// against the document, and records the statuses each operation answered in seen.
type docEnv struct {
	*env
	doc    *openapitest.Doc
	faults *faults
	rec    *usage.Recorder
	seen   map[string]map[string]bool
	// The fixtures: acme (pro) with its primary key's value and a sub-key, and gone, a
	// closed account; unless bare, an operator's webhook endpoint, opsHook, with the
	// delivery of a test message, opsMessage, and one of acme's, acmeHook.
	acmeKey, subKey               string
	opsHook, opsMessage, acmeHook string
}

func newDocEnv(t *testing.T, bare bool, seen map[string]map[string]bool) *docEnv {
	t.Helper()
	clk := testenv.NewClock(t0)
	logs := &testenv.Logs{}
	logger := logs.Logger()
	reg := &catalog.Registry{}
	if err := apis.Register(reg); err != nil {
		t.Fatal(err)
	}
	ps, err := billing.NewPlans(plans...)
	if err != nil {
		t.Fatal(err)
	}
	f := &faults{}
	stores := tollgate.Stores{
		Keys:   faultyKeys{memory.NewKeyStore(), f},
		Ledger: faultyLedger{memory.NewLedger(nil), f},
		Rates:  memory.NewRateLimiter(),
		Slots:  memory.NewConcurrencyLimiter(),
	}
	svc, err := tollgate.New(reg, stores, ps, &tollgate.Options{Now: clk.Now, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	opts := &accounts.Options{Logger: logger, ClosedRetention: -1}
	var rec *usage.Recorder
	if !bare {
		as := faultyAudit{memory.NewAuditStore(), f}
		log := audit.NewLog(as, &audit.LogOptions{Now: clk.Now, Logger: logger})
		svc.Events().Subscribe(log, log.Kinds()...)
		t.Cleanup(log.Close)
		us := faultyUsage{memory.NewUsageStore(), f}
		if rec, err = usage.NewRecorder(us, &usage.RecorderOptions{FlushInterval: -1, PruneInterval: -1, Now: clk.Now, Logger: logger}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rec.Close(context.Background()) })
		svc.Events().Subscribe(rec, rec.Kinds()...)
		opts.Audit, opts.Usage = as, us
	}
	mgr, err := accounts.New(svc, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mgr.Close)
	var hooks *webhook.Endpoints
	if !bare {
		hooks = webhook.NewEndpoints(faultyHooks{memory.NewWebhookStore(), f}, svc.Events(), &webhook.EndpointsOptions{Now: clk.Now, Logger: logger})
	}
	e := &docEnv{env: serve(t, clk, logs, mgr, &admin.Options{Webhooks: hooks}), doc: openapitest.Load(t, admin.OpenAPI()), faults: f, rec: rec, seen: seen}

	ctx := t.Context()
	_, _, value, err := mgr.CreateAccount(ctx, accounts.Spec{ID: "acme", Plan: "pro"})
	if err != nil {
		t.Fatal(err)
	}
	sub, _, err := mgr.CreateKey(ctx, "acme", accounts.NewKey{Name: "office"})
	if err != nil {
		t.Fatal(err)
	}
	e.acmeKey, e.subKey = value, sub.ID
	if _, _, _, err := mgr.CreateAccount(ctx, accounts.Spec{ID: "gone", Plan: "free"}); err != nil {
		t.Fatal(err)
	}
	if _, err := mgr.CloseAccount(ctx, "gone", "left"); err != nil {
		t.Fatal(err)
	}
	if hooks != nil {
		ops, err := hooks.Create(ctx, event.Actor{ID: audit.Operator}, "", "https://ops.example.com/hooks", nil)
		if err != nil {
			t.Fatal(err)
		}
		d, err := hooks.SendTest(ctx, event.Actor{ID: audit.Operator}, "", ops.ID)
		if err != nil {
			t.Fatal(err)
		}
		acme, err := hooks.Create(ctx, event.Actor{ID: "key_holder"}, "acme", "https://acme.example.com/hooks", nil)
		if err != nil {
			t.Fatal(err)
		}
		e.opsHook, e.opsMessage, e.acmeHook = ops.ID, d.Message.ID, acme.ID
	}
	return e
}

// req is a request of the black-box tests: by default with the admin token and, with a
// body, Content-Type: application/json (hdr adds or replaces headers).
type req struct {
	method, target, body string
	hdr                  []string
	noToken              bool
}

// answer is an answer as sent.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// send sends r and checks the answer against the document: the operation of r's
// method and path (for a method the path does not take, every operation of the path)
// documents its status, headers and body. Objects are held to the properties the
// document names. The statuses each operation answered are recorded in e.seen.
func (e *docEnv) send(r req) answer {
	e.t.Helper()
	var body io.Reader
	var hdr []string
	if r.body != "" {
		body = strings.NewReader(r.body)
		hdr = append(hdr, "Content-Type", "application/json")
	}
	if !r.noToken {
		hdr = append(hdr, "Authorization", "Bearer "+adminToken)
	}
	res, b := e.roundTrip(r.method, r.target, body, append(hdr, r.hdr...)...)
	a := answer{status: res.StatusCode, header: res.Header, body: b}
	path, _, _ := strings.Cut(r.target, "?")
	template, op := e.doc.Match(r.method, path)
	if template == "" {
		e.t.Errorf("%s %s: no path of the document matches it", r.method, r.target)
		return a
	}
	ops := []*openapitest.Operation{op}
	if op == nil {
		ops = e.doc.PathOperations(template)
	}
	for _, op := range ops {
		if a.status < 300 {
			// What the handler takes, the document declares valid.
			if err := op.CheckRequest(r.target, []byte(r.body)); err != nil {
				e.t.Errorf("%s %.200s: answered %d, but the document declares the request invalid: %v", r.method, r.target, a.status, err)
			}
		}
		if err := op.CheckAnswer(a.status, a.header, a.body, true); err != nil {
			e.t.Errorf("%s %.200s: %v", r.method, r.target, err)
		}
		if e.seen[op.String()] == nil {
			e.seen[op.String()] = map[string]bool{}
		}
		e.seen[op.String()][strconv.Itoa(a.status)] = true
	}
	return a
}

// want sends r, checks the answer as send does, and that its status is status.
func (e *docEnv) want(r req, status int) answer {
	e.t.Helper()
	a := e.send(r)
	if a.status != status {
		e.t.Errorf("%s %.200s %.100s: %d, want %d\n%.500s", r.method, r.target, r.body, a.status, status, a.body)
	}
	return a
}

// served returns a request each operation serves, by "METHOD path", on the fixtures
// of e.
func (e *docEnv) served() map[string]req {
	return map[string]req{
		"GET " + admin.OpenAPIPath:                        {method: "GET", target: admin.OpenAPIPath},
		"GET /admin/v1/plans":                             {method: "GET", target: "/admin/v1/plans"},
		"GET /admin/v1/accounts":                          {method: "GET", target: "/admin/v1/accounts?state=active&limit=10"},
		"POST /admin/v1/accounts":                         {method: "POST", target: "/admin/v1/accounts", body: `{"id":"initech","plan":"pro"}`},
		"GET /admin/v1/accounts/{account_id}":             {method: "GET", target: "/admin/v1/accounts/acme"},
		"DELETE /admin/v1/accounts/{account_id}":          {method: "DELETE", target: "/admin/v1/accounts/gone"},
		"PATCH /admin/v1/accounts/{account_id}":           {method: "PATCH", target: "/admin/v1/accounts/acme", body: `{"plan":"free"}`},
		"GET /admin/v1/accounts/{account_id}/keys":        {method: "GET", target: "/admin/v1/accounts/acme/keys?limit=1"},
		"POST /admin/v1/accounts/{account_id}/keys":       {method: "POST", target: "/admin/v1/accounts/acme/keys", body: `{"name":"ci"}`},
		"POST /admin/v1/keys/{key_id}/rotate":             {method: "POST", target: "/admin/v1/keys/" + e.subKey + "/rotate"},
		"POST /admin/v1/keys/{key_id}/revoke":             {method: "POST", target: "/admin/v1/keys/" + e.subKey + "/revoke"},
		"POST /admin/v1/accounts/{account_id}/credits":    {method: "POST", target: "/admin/v1/accounts/acme/credits", body: `{"amount":5,"reason":"r"}`},
		"GET /admin/v1/accounts/{account_id}/audit":       {method: "GET", target: "/admin/v1/accounts/acme/audit?limit=5"},
		"POST /admin/v1/accounts/{account_id}/suspend":    {method: "POST", target: "/admin/v1/accounts/acme/suspend", body: `{"reason":"r"}`},
		"POST /admin/v1/accounts/{account_id}/reactivate": {method: "POST", target: "/admin/v1/accounts/acme/reactivate", body: `{"reason":"r"}`},
		"POST /admin/v1/accounts/{account_id}/close":      {method: "POST", target: "/admin/v1/accounts/acme/close", body: `{"reason":"r"}`},
		"GET /admin/v1/usage":                             {method: "GET", target: "/admin/v1/usage?group_by=api"},

		"GET /admin/v1/webhooks":                                               {method: "GET", target: "/admin/v1/webhooks"},
		"POST /admin/v1/webhooks":                                              {method: "POST", target: "/admin/v1/webhooks", body: `{"url":"https://ops.example.com/more"}`},
		"GET /admin/v1/webhooks/{endpoint_id}":                                 {method: "GET", target: "/admin/v1/webhooks/" + e.opsHook},
		"PATCH /admin/v1/webhooks/{endpoint_id}":                               {method: "PATCH", target: "/admin/v1/webhooks/" + e.opsHook, body: `{"events":["key.revoked"]}`},
		"DELETE /admin/v1/webhooks/{endpoint_id}":                              {method: "DELETE", target: "/admin/v1/webhooks/" + e.opsHook},
		"POST /admin/v1/webhooks/{endpoint_id}/rotate":                         {method: "POST", target: "/admin/v1/webhooks/" + e.opsHook + "/rotate"},
		"POST /admin/v1/webhooks/{endpoint_id}/test":                           {method: "POST", target: "/admin/v1/webhooks/" + e.opsHook + "/test"},
		"GET /admin/v1/webhooks/{endpoint_id}/deliveries":                      {method: "GET", target: "/admin/v1/webhooks/" + e.opsHook + "/deliveries?limit=5"},
		"POST /admin/v1/webhooks/{endpoint_id}/deliveries/{message_id}/resend": {method: "POST", target: "/admin/v1/webhooks/" + e.opsHook + "/deliveries/" + e.opsMessage + "/resend"},
		"GET /admin/v1/accounts/{account_id}/webhooks":                         {method: "GET", target: "/admin/v1/accounts/acme/webhooks"},
		"PATCH /admin/v1/accounts/{account_id}/webhooks/{endpoint_id}":         {method: "PATCH", target: "/admin/v1/accounts/acme/webhooks/" + e.acmeHook, body: `{"disabled":true}`},
		"DELETE /admin/v1/accounts/{account_id}/webhooks/{endpoint_id}":        {method: "DELETE", target: "/admin/v1/accounts/acme/webhooks/" + e.acmeHook},
	}
}

// TestOpenAPIAnswers checks, black-box, that the handler answers as its OpenAPI
// document says: every operation's success and each error status it documents, each
// answer's headers and body against the document's schemas (with no field the
// document does not name). First every operation is refused as the document says any
// may be: without the token (401, or the document itself, which needs none), by a
// method its path does not take (405, with Allow), with a body too large (413) or not
// JSON (415) where it takes one, and while the stores are out of reach (503, or the
// success of an operation that reads none). Then the routes are taken through their
// successes and refusals in turn, and every status each operation documents must have
// been answered.
func TestOpenAPIAnswers(t *testing.T) {
	seen := map[string]map[string]bool{}
	e := newDocEnv(t, false, seen)
	served := e.served()

	// The refusals any operation may answer.
	methods := []string{"GET", "POST", "PUT", "PATCH", "DELETE"}
	tooLarge := `{"name":"` + strings.Repeat("a", mgmtapi.MaxBody) + `"}`
	for _, op := range e.doc.Operations() {
		r, ok := served[op.String()]
		if !ok {
			t.Errorf("%s: the test has no request it serves; add one to served", op)
			continue
		}
		success := 0
		for _, s := range op.Statuses() {
			if n, _ := strconv.Atoi(s); n >= 200 && n < 300 && success == 0 {
				success = n
			}
		}
		anon := r
		anon.noToken = true
		if op.Secured() {
			e.want(anon, http.StatusUnauthorized)
		} else {
			e.want(anon, success)
		}
		if schema, _, _ := op.Body(); schema != nil {
			big := r
			big.body = tooLarge
			e.want(big, http.StatusRequestEntityTooLarge)
			text := r
			text.hdr = []string{"Content-Type", "text/plain"}
			e.want(text, http.StatusUnsupportedMediaType)
		}
		e.faults.down.Store(true)
		if slices.Contains(op.Statuses(), "503") {
			e.want(r, http.StatusServiceUnavailable)
		} else {
			e.want(r, success)
		}
		e.faults.down.Store(false)
	}
	for _, template := range slices.Sorted(maps.Keys(pathsOf(e.doc))) {
		takes := e.doc.PathMethods(template)
		for _, m := range methods {
			if !slices.Contains(takes, m) {
				target := strings.NewReplacer("{account_id}", "acme", "{key_id}", e.subKey, "{endpoint_id}", e.opsHook,
					"{message_id}", e.opsMessage).Replace(template)
				a := e.want(req{method: m, target: target}, http.StatusMethodNotAllowed)
				for _, took := range takes {
					if !strings.Contains(a.header.Get("Allow"), took) {
						t.Errorf("%s %s: Allow %q does not name %s", m, target, a.header.Get("Allow"), took)
					}
				}
				break
			}
		}
	}

	// A call, for the usage statistics.
	if s := e.hash(e.acmeKey); s != http.StatusOK {
		t.Fatalf("a call with acme's key: %d", s)
	}
	if err := e.rec.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}

	long := strings.Repeat("a", 65)
	accts, keys := "/admin/v1/accounts/", "/admin/v1/keys/"
	sub := keys + e.subKey
	for _, c := range []struct {
		r    req
		want int
	}{
		{req{method: "GET", target: "/admin/v1/plans"}, 200},

		{req{method: "POST", target: "/admin/v1/accounts", body: `{"id":"globex","plan":"pro","credits":10,"channels":["rest"],"expires_at":"2031-01-01T00:00:00Z"}`}, 201},
		{req{method: "POST", target: "/admin/v1/accounts", body: `{"id":"globex","plan":"pro","channels":["rest"],"expires_at":"2031-01-01T00:00:00Z"}`}, 200},
		{req{method: "POST", target: "/admin/v1/accounts", body: `{"id":"globex","plan":"free"}`}, 409},
		{req{method: "POST", target: "/admin/v1/accounts", body: `{"plan":"gold"}`}, 400},
		{req{method: "GET", target: "/admin/v1/accounts"}, 200},
		{req{method: "GET", target: "/admin/v1/accounts?limit=201"}, 400},

		{req{method: "GET", target: accts + "acme"}, 200},
		{req{method: "GET", target: accts + "nobody"}, 404},
		{req{method: "GET", target: accts + long}, 400},

		{req{method: "GET", target: accts + "acme/keys"}, 200},
		{req{method: "GET", target: accts + "nobody/keys"}, 404},
		{req{method: "GET", target: accts + "acme/keys?limit=0"}, 400},
		{req{method: "POST", target: accts + "acme/keys", body: `{"name":"deploy","apis":["hash"],"allowed_ips":["10.0.0.0/8"],"expires_at":"2031-01-01T00:00:00Z"}`}, 201},
		{req{method: "POST", target: accts + "nobody/keys", body: `{"name":"deploy"}`}, 404},
		{req{method: "POST", target: accts + "acme/keys", body: `{"name":" "}`}, 400},
		{req{method: "POST", target: accts + "gone/keys", body: `{"name":"deploy"}`}, 409},

		{req{method: "POST", target: sub + "/rotate"}, 200},
		{req{method: "POST", target: keys + "key_nobody/rotate"}, 404},
		{req{method: "POST", target: keys + long + "/rotate"}, 400},
		{req{method: "POST", target: sub + "/revoke"}, 200},
		{req{method: "POST", target: sub + "/revoke"}, 200},
		{req{method: "POST", target: keys + "key_nobody/revoke"}, 404},
		{req{method: "POST", target: keys + long + "/revoke"}, 400},
		{req{method: "POST", target: sub + "/rotate"}, 409},

		{req{method: "POST", target: accts + "acme/credits", body: `{"amount":100,"reason":"goodwill","expires_at":"2030-06-01T00:00:00Z"}`, hdr: []string{"Idempotency-Key", "grant-1"}}, 200},
		{req{method: "POST", target: accts + "nobody/credits", body: `{"amount":100,"reason":"goodwill"}`}, 404},
		{req{method: "POST", target: accts + "acme/credits", body: `{"amount":0,"reason":"nothing"}`}, 400},
		{req{method: "POST", target: accts + "acme/credits", body: `{"amount":-1000000000,"reason":"too much"}`}, 409},

		{req{method: "PATCH", target: accts + "acme", body: `{"plan":"free"}`}, 200},
		{req{method: "PATCH", target: accts + "acme", body: `{"plan":"free","effective":"renewal"}`}, 200},
		{req{method: "GET", target: accts + "acme"}, 200},
		{req{method: "PATCH", target: accts + "acme", body: `{"plan":"gold"}`}, 400},
		{req{method: "PATCH", target: accts + "nobody", body: `{"plan":"free"}`}, 404},
		{req{method: "PATCH", target: accts + "gone", body: `{"plan":"free"}`}, 409},
		{req{method: "PATCH", target: accts + "acme", body: `{"plan":"pro","effective":"now"}`}, 200},
		{req{method: "POST", target: "/admin/v1/accounts", body: `{"id":"yearly","plan":"free","billing_anchor":"2030-01-01T00:00:00Z"}`}, 201},
		{req{method: "POST", target: "/admin/v1/accounts", body: `{"id":"later","plan":"free","billing_anchor":"2040-01-01T00:00:00Z"}`}, 400},
		{req{method: "GET", target: accts + "acme/audit"}, 200},
		{req{method: "GET", target: accts + "acme/audit?limit=1001"}, 400},
		{req{method: "GET", target: "/admin/v1/usage?group_by=api&order=credits"}, 200},
		{req{method: "GET", target: "/admin/v1/usage?order=bogus"}, 400},

		{req{method: "POST", target: accts + "acme/suspend", body: `{"reason":"unpaid"}`}, 200},
		{req{method: "POST", target: accts + "nobody/suspend", body: `{"reason":"unpaid"}`}, 404},
		{req{method: "POST", target: accts + "acme/suspend", body: `{}`}, 400},
		{req{method: "POST", target: accts + "gone/suspend", body: `{"reason":"unpaid"}`}, 409},
		{req{method: "POST", target: accts + "acme/reactivate"}, 200},
		{req{method: "POST", target: accts + "acme/reactivate", body: `{"reason":"paid"}`}, 200},
		{req{method: "POST", target: accts + "nobody/reactivate"}, 404},
		{req{method: "POST", target: accts + "gone/reactivate"}, 409},
		{req{method: "POST", target: accts + long + "/reactivate"}, 400},
		{req{method: "POST", target: accts + "globex/close", body: `{"reason":"left"}`}, 200},
		{req{method: "POST", target: accts + "nobody/close", body: `{"reason":"left"}`}, 404},
		{req{method: "POST", target: accts + "acme/close", body: `{}`}, 400},
		{req{method: "GET", target: "/admin/v1/accounts?state=closed"}, 200},

		{req{method: "DELETE", target: accts + "acme"}, 409},
		{req{method: "DELETE", target: accts + "gone"}, 200},
		{req{method: "DELETE", target: accts + "nobody"}, 404},
		{req{method: "DELETE", target: accts + long}, 400},
		{req{method: "POST", target: "/admin/v1/accounts", body: `{"id":"gone","plan":"pro"}`}, 409},
	} {
		e.want(c.r, c.want)
	}

	// Webhook endpoints.
	hooks, ops := "/admin/v1/webhooks", "/admin/v1/webhooks/"+e.opsHook
	longID := strings.Repeat("x", webhook.MaxID+1)
	for i := 0; i < webhook.MaxEndpoints-2; i++ { // the fixture, and the one created below
		e.want(req{method: "POST", target: hooks, body: fmt.Sprintf(`{"url":"https://ops.example.com/%d"}`, i)}, 201)
	}
	for _, c := range []struct {
		r    req
		want int
	}{
		{req{method: "GET", target: hooks}, 200},
		{req{method: "GET", target: hooks + "?all=1"}, 400},
		{req{method: "POST", target: hooks, body: `{"url":"https://ops.example.com/last","events":["account.suspended"]}`}, 201},
		{req{method: "POST", target: hooks, body: `{"url":"https://ops.example.com/one-more"}`}, 409},
		{req{method: "POST", target: hooks, body: `{"url":"http://10.0.0.1/in"}`}, 400},
		{req{method: "GET", target: ops}, 200},
		{req{method: "GET", target: hooks + "/" + e.acmeHook}, 404},
		{req{method: "GET", target: hooks + "/" + longID}, 400},
		{req{method: "PATCH", target: ops, body: `{"url":"https://ops.example.com/v2","events":[]}`}, 200},
		{req{method: "PATCH", target: ops, body: `{"events":["nope"]}`}, 400},
		{req{method: "PATCH", target: hooks + "/ep_nothing", body: `{"disabled":true}`}, 404},
		{req{method: "POST", target: ops + "/rotate"}, 200},
		{req{method: "POST", target: hooks + "/ep_nothing/rotate"}, 404},
		{req{method: "POST", target: hooks + "/" + longID + "/rotate"}, 400},
		{req{method: "POST", target: ops + "/test"}, 202},
		{req{method: "POST", target: hooks + "/ep_nothing/test"}, 404},
		{req{method: "POST", target: hooks + "/" + longID + "/test"}, 400},
		{req{method: "GET", target: ops + "/deliveries?limit=1"}, 200},
		{req{method: "GET", target: ops + "/deliveries?limit=0"}, 400},
		{req{method: "GET", target: hooks + "/ep_nothing/deliveries"}, 404},
		{req{method: "POST", target: ops + "/deliveries/" + e.opsMessage + "/resend"}, 202},
		{req{method: "POST", target: ops + "/deliveries/" + webhook.NewID() + "/resend"}, 404},
		{req{method: "POST", target: ops + "/deliveries/" + longID + "/resend"}, 400},
		{req{method: "PATCH", target: ops, body: `{"disabled":true}`}, 200},
		{req{method: "POST", target: ops + "/test"}, 409},
		{req{method: "POST", target: ops + "/deliveries/" + e.opsMessage + "/resend"}, 409},
		{req{method: "GET", target: accts + "acme/webhooks"}, 200},
		{req{method: "GET", target: accts + "nobody/webhooks"}, 404},
		{req{method: "GET", target: accts + long + "/webhooks"}, 400},
		{req{method: "PATCH", target: accts + "acme/webhooks/" + e.acmeHook, body: `{"disabled":true,"reason":"it answers 500"}`}, 200},
		{req{method: "PATCH", target: accts + "acme/webhooks/" + e.acmeHook, body: `{"reason":"no flag"}`}, 400},
		{req{method: "PATCH", target: accts + "acme/webhooks/" + e.opsHook, body: `{"disabled":true}`}, 404},
		{req{method: "PATCH", target: accts + "acme/webhooks/" + e.acmeHook, body: `{"disabled":false}`}, 200},
		{req{method: "DELETE", target: accts + "acme/webhooks/" + e.opsHook}, 404},
		{req{method: "DELETE", target: accts + "globex/webhooks/" + e.acmeHook}, 404},
		{req{method: "DELETE", target: accts + "acme/webhooks/" + longID}, 400},
		{req{method: "DELETE", target: accts + "acme/webhooks/" + e.acmeHook}, 200},
		{req{method: "DELETE", target: accts + "acme/webhooks/" + e.acmeHook}, 404},
		{req{method: "DELETE", target: ops}, 200},
		{req{method: "DELETE", target: ops}, 404},
		{req{method: "DELETE", target: hooks + "/" + longID}, 400},
	} {
		e.want(c.r, c.want)
	}

	// An account that changes at every attempt to update it.
	e.faults.churn.Store(true)
	e.want(req{method: "POST", target: accts + "acme/close", body: `{"reason":"left"}`}, http.StatusConflict)
	e.faults.churn.Store(false)

	// The document, and again with its ETag.
	doc := e.want(req{method: "GET", target: admin.OpenAPIPath, noToken: true}, http.StatusOK)
	e.want(req{method: "GET", target: admin.OpenAPIPath, noToken: true, hdr: []string{"If-None-Match", doc.header.Get("ETag")}}, http.StatusNotModified)

	// A service that keeps neither an audit log nor usage statistics.
	bare := newDocEnv(t, true, seen)
	bare.want(req{method: "GET", target: accts + "acme/audit"}, http.StatusNotFound)
	bare.want(req{method: "GET", target: "/admin/v1/usage"}, http.StatusNotFound)
	bare.want(req{method: "GET", target: "/admin/v1/webhooks"}, http.StatusNotFound)
	bare.want(req{method: "POST", target: "/admin/v1/webhooks", body: `{"url":"https://ops.example.com/hooks"}`}, http.StatusNotFound)

	for _, op := range e.doc.Operations() {
		for _, s := range op.Statuses() {
			if s != "default" && !seen[op.String()][s] {
				t.Errorf("%s documents %s, which it never answered here: add a request that gets it, or take it out of the document", op, s)
			}
		}
	}
}

// pathsOf returns the path templates of doc's operations.
func pathsOf(doc *openapitest.Doc) map[string]bool {
	out := map[string]bool{}
	for _, op := range doc.Operations() {
		out[op.Path] = true
	}
	return out
}

// TestOpenAPIRefusals checks that the handler refuses the requests its OpenAPI
// document declares invalid: for every operation, path parameters, query parameters,
// headers and body properties past the bounds of their schemas (a limit above its
// maximum, a state or a grouping not in its enum, a time not in RFC 3339, a string too
// long, a property of the wrong type), an unknown query parameter, a body without a
// required property or with one the schema does not allow, and a body that is not an
// object. Each is built from a request the operation serves (the body from the
// document's example), and each refusal is checked against the document.
func TestOpenAPIRefusals(t *testing.T) {
	e := newDocEnv(t, false, map[string]map[string]bool{})
	ids := map[string]string{"account_id": "acme", "key_id": e.subKey, "endpoint_id": e.opsHook, "message_id": e.opsMessage}
	for _, op := range e.doc.Operations() {
		target := op.Path
		for name, v := range ids {
			target = strings.ReplaceAll(target, "{"+name+"}", v)
		}
		schema, example, _ := op.Body()
		base := ""
		if schema != nil {
			b, err := json.Marshal(example)
			if err != nil {
				t.Fatal(err)
			}
			base = string(b)
		}
		refused := func(r req, statuses ...int) {
			t.Helper()
			a := e.send(r)
			if !slices.Contains(statuses, a.status) {
				t.Errorf("%s %.200s %.200s %v: %d, want %v: the document declares the request invalid\n%.300s", r.method, r.target, r.body, r.hdr, a.status, statuses, a.body)
			}
		}
		var queried bool
		for _, p := range op.Params() {
			switch p.In {
			case "path":
				for _, v := range e.doc.InvalidQuery(p.Schema) {
					refused(req{method: op.Method, target: strings.Replace(op.Path, "{"+p.Name+"}", url.PathEscape(v), 1), body: base},
						http.StatusBadRequest, http.StatusNotFound)
				}
			case "query":
				queried = true
				for _, v := range e.doc.InvalidQuery(p.Schema) {
					refused(req{method: op.Method, target: target + "?" + url.Values{p.Name: {v}}.Encode(), body: base}, http.StatusBadRequest)
				}
			case "header":
				for _, v := range e.doc.InvalidQuery(p.Schema) {
					refused(req{method: op.Method, target: target, body: base, hdr: []string{p.Name, v}}, http.StatusBadRequest)
				}
			}
		}
		if queried {
			refused(req{method: op.Method, target: target + "?bogus=1"}, http.StatusBadRequest)
		}
		if op.Method == http.MethodGet {
			// The bounds themselves are taken.
			for _, p := range op.Params() {
				if p.In != "query" {
					continue
				}
				for _, v := range e.doc.Valid(p.Schema) {
					r := req{method: op.Method, target: target + "?" + url.Values{p.Name: {v}}.Encode()}
					if a := e.send(r); a.status != http.StatusOK {
						t.Errorf("%s %s: %d, want 200: the document declares the request valid\n%.300s", r.method, r.target, a.status, a.body)
					}
				}
			}
		}
		if schema == nil {
			continue
		}
		body := func(change func(m map[string]any)) string {
			m := maps.Clone(example.(map[string]any))
			change(m)
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
		required, _ := schema["required"].([]any)
		props, _ := schema["properties"].(map[string]any)
		for _, name := range slices.Sorted(maps.Keys(props)) {
			for _, v := range e.doc.Invalid(props[name].(map[string]any), slices.Contains(required, any(name))) {
				refused(req{method: op.Method, target: target, body: body(func(m map[string]any) { m[name] = v })}, http.StatusBadRequest)
			}
		}
		for _, name := range required {
			refused(req{method: op.Method, target: target, body: body(func(m map[string]any) { delete(m, name.(string)) })}, http.StatusBadRequest)
		}
		if schema["additionalProperties"] == false {
			refused(req{method: op.Method, target: target, body: body(func(m map[string]any) { m["bogus"] = 1 })}, http.StatusBadRequest)
		}
		for _, b := range []string{`[]`, `"text"`, `1`, `{"a":`} {
			refused(req{method: op.Method, target: target, body: b}, http.StatusBadRequest)
		}
	}
}

// TestOpenAPIServed checks how the handler serves its document: to anyone, whatever
// the Authorization header says, for GET and HEAD only (other methods need the token
// like every route, then 405); the bytes of OpenAPI, built once; a strong ETag that
// If-None-Match may name alone, in a list, weakly or as *; and no CORS header, as no
// answer of the admin API has.
func TestOpenAPIServed(t *testing.T) {
	e := newEnvWith(t, &admin.Options{Edge: mustEdge(t)})
	want, err := json.Marshal(admin.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	get := func(method string, hdr ...string) (*http.Response, []byte) {
		t.Helper()
		return e.roundTrip(method, admin.OpenAPIPath, nil, hdr...)
	}
	var etag string
	for _, hdr := range [][]string{
		nil,
		{"Authorization", "Bearer " + adminToken},
		{"Authorization", "Bearer not-the-token"},
		{"Origin", "https://app.example"},
	} {
		res, body := get(http.MethodGet, hdr...)
		if res.StatusCode != http.StatusOK || string(body) != string(want) {
			t.Fatalf("GET %v: %s, %d bytes; want 200 and the document", hdr, res.Status, len(body))
		}
		if ct, cc := res.Header.Get("Content-Type"), res.Header.Get("Cache-Control"); ct != "application/json" || cc != "no-cache" {
			t.Errorf("GET %v: Content-Type %q, Cache-Control %q", hdr, ct, cc)
		}
		if etag == "" {
			etag = res.Header.Get("ETag")
		}
		if got := res.Header.Get("ETag"); got != etag || !strings.HasPrefix(etag, `"`) {
			t.Errorf("GET %v: ETag %q, want one strong ETag (%q)", hdr, got, etag)
		}
		for name := range res.Header {
			if strings.HasPrefix(name, "Access-Control-") {
				t.Errorf("GET %v: a CORS header %s", hdr, name)
			}
		}
	}
	if res, body := get(http.MethodHead); res.StatusCode != http.StatusOK || len(body) != 0 || res.Header.Get("ETag") != etag {
		t.Errorf("HEAD: %s, %d bytes, ETag %q", res.Status, len(body), res.Header.Get("ETag"))
	}
	for _, inm := range []string{etag, `"other", ` + etag, "W/" + etag, "*"} {
		if res, body := get(http.MethodGet, "If-None-Match", inm); res.StatusCode != http.StatusNotModified || len(body) != 0 {
			t.Errorf("If-None-Match %s: %s, %d bytes; want 304", inm, res.Status, len(body))
		}
	}
	if res, _ := get(http.MethodGet, "If-None-Match", `"other"`); res.StatusCode != http.StatusOK {
		t.Errorf("If-None-Match another tag: %s, want 200", res.Status)
	}
	if res, _ := get(http.MethodPost); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST without the token: %s, want 401", res.Status)
	}
	if res, _ := get(http.MethodPost, "Authorization", "Bearer "+adminToken); res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST with the token: %s, Allow %q; want 405 and GET, HEAD", res.Status, res.Header.Get("Allow"))
	}
	// Any other path still needs the token.
	for _, p := range []string{admin.OpenAPIPath + "/", "/admin/v1/openapi.json.bak", "/admin/v1/OPENAPI.JSON"} {
		if res, _ := e.roundTrip(http.MethodGet, p, nil); res.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %s, want 401", p, res.Status)
		}
	}
}

// mustEdge returns an edge that allows https://app.example's scripts, so that a door
// that answered cross-origin calls would show it.
func mustEdge(t *testing.T) *edge.Edge {
	t.Helper()
	e, err := edge.New(&edge.Options{AllowedOrigins: []string{"https://app.example"}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}
