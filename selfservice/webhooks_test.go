package selfservice_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/internal/mgmtapi"
	"github.com/tollgate-dev/tollgate/internal/openapitest"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/selfservice"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/webhook"
	"github.com/tollgate-dev/tollgate/webhook/signature"
)

// t0 is when the clock of the webhook tests starts.
var t0 = time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC)

// hookEnv is the self-service API of a service on memory stores with an audit log and
// webhooks: acme, with its primary key's value and a sub-key's, and globex's primary
// key's value.
type hookEnv struct {
	t                 *testing.T
	h                 *selfservice.Handler
	doc               *openapitest.Doc
	store             *memory.WebhookStore
	clock             *testenv.Clock
	acme, sub, globex string // key values
	acmeKey           string // acme's primary key's id
}

// hookOptions say how a hookEnv differs from the default: private hosts allowed, no
// webhooks at all, a self-service budget.
type hookOptions struct {
	allowPrivate, none bool
	budget             driver.Limit
}

func newHookEnv(t *testing.T, o hookOptions) *hookEnv {
	t.Helper()
	e := &hookEnv{t: t, doc: openAPI(t), store: memory.NewWebhookStore(), clock: testenv.NewClock(t0)}
	plans, err := billing.NewPlans(billing.Plan{Name: "free", Credits: 10})
	if err != nil {
		t.Fatal(err)
	}
	stores := tollgate.Stores{
		Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
		Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter(),
	}
	svc, err := tollgate.New(&catalog.Registry{}, stores, plans, &tollgate.Options{Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	auditStore := memory.NewAuditStore()
	auditLog := audit.NewLog(auditStore, &audit.LogOptions{Now: e.clock.Now})
	svc.Events().Subscribe(auditLog, auditLog.Kinds()...)
	t.Cleanup(auditLog.Close)
	mgr, err := accounts.New(svc, &accounts.Options{Audit: auditStore, SelfServiceLimit: o.budget})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mgr.Close)
	ctx := t.Context()
	_, primary, value, err := mgr.CreateAccount(ctx, accounts.Spec{ID: "acme", Plan: "free"})
	if err != nil {
		t.Fatal(err)
	}
	e.acme, e.acmeKey = value, primary.ID
	if _, e.sub, err = mgr.CreateKey(ctx, "acme", accounts.NewKey{Name: "ci"}); err != nil {
		t.Fatal(err)
	}
	if _, _, e.globex, err = mgr.CreateAccount(ctx, accounts.Spec{ID: "globex", Plan: "free"}); err != nil {
		t.Fatal(err)
	}
	opts := &selfservice.Options{}
	if !o.none {
		opts.Webhooks = webhook.NewEndpoints(e.store, svc.Events(), &webhook.EndpointsOptions{AllowPrivate: o.allowPrivate, Now: e.clock.Now})
	}
	if e.h, err = selfservice.NewHandler(mgr, opts); err != nil {
		t.Fatal(err)
	}
	return e
}

// answer is an answer of the API: its status, its error's message and code, and its
// data.
type answer struct {
	status    int
	msg, code string
	data      json.RawMessage
	raw       string
}

// send sends a request with the key's value, and a JSON body if body is not empty,
// and checks the answer against the OpenAPI document, when the document describes the
// route.
func (e *hookEnv) send(key, method, path, body string) answer {
	e.t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("X-Api-Key", key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	if _, op := e.doc.Match(method, req.URL.Path); op != nil {
		if err := op.CheckAnswer(rec.Code, rec.Header(), rec.Body.Bytes(), true); err != nil {
			e.t.Errorf("%s %.100s: %v", method, path, err)
		}
		if rec.Code < 300 {
			if err := op.CheckRequest(path, []byte(body)); err != nil {
				e.t.Errorf("%s %.100s: answered %d, but the document declares the request invalid: %v", method, path, rec.Code, err)
			}
		}
	}
	var env struct {
		Error *string
		Code  string
		Data  json.RawMessage
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil {
		e.t.Fatalf("%s %s: %v\n%s", method, path, err, rec.Body)
	}
	a := answer{status: rec.Code, code: env.Code, data: env.Data, raw: rec.Body.String()}
	if env.Error != nil {
		a.msg = *env.Error
	}
	return a
}

// endpoint is an endpoint as the API answers it.
type endpoint struct {
	ID, URL, Secret     string
	Account             *string
	Events              []string
	PreviousSecret      *string    `json:"previous_secret"`
	PreviousSecretUntil *time.Time `json:"previous_secret_until"`
	Disabled            bool
	DisabledReason      *string    `json:"disabled_reason"`
	DisabledBy          *string    `json:"disabled_by"`
	LastDeliveredAt     *time.Time `json:"last_delivered_at"`
}

// delivery is a delivery as the API answers it.
type delivery struct {
	Endpoint  string
	MessageID string `json:"message_id"`
	Type      string
	State     string
	Payload   struct{ Type string }
}

func decode[T any](t *testing.T, a answer) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(a.data, &v); err != nil {
		t.Fatalf("%v: %s", err, a.raw)
	}
	return v
}

// want checks a's status, and that its error message holds each of words.
func want(t *testing.T, what string, a answer, status int, words ...string) {
	t.Helper()
	if a.status != status {
		t.Errorf("%s: %d %s, want %d", what, a.status, a.raw, status)
		return
	}
	for _, w := range words {
		if !strings.Contains(a.msg, w) {
			t.Errorf("%s: %q does not say %q", what, a.msg, w)
		}
	}
}

// TestWebhookSecrets: the secret is in the answer that creates an endpoint and in the
// one that rotates it, and in no listing; the replaced secret still signs until the
// grace ends.
func TestWebhookSecrets(t *testing.T) {
	e := newHookEnv(t, hookOptions{})
	a := e.send(e.acme, "POST", "/v1/account/webhooks", `{"url":"https://hooks.acme.example/in","events":["key.rotated","key.revoked"]}`)
	want(t, "create", a, http.StatusCreated)
	created := decode[endpoint](t, a)
	if _, err := signature.ParseSecret(created.Secret); err != nil || created.ID == "" || created.Account == nil || *created.Account != "acme" ||
		!slices.Equal(created.Events, []string{"key.revoked", "key.rotated"}) || created.Disabled {
		t.Fatalf("created %+v (%v): want its id and secret", created, err)
	}
	masked := created.Secret[:10] + "…"
	for _, path := range []string{"/v1/account/webhooks", "/v1/account/webhooks/" + created.ID} {
		a := e.send(e.acme, "GET", path, "")
		want(t, "GET "+path, a, http.StatusOK)
		if strings.Contains(a.raw, created.Secret) || !strings.Contains(a.raw, masked) {
			t.Errorf("GET %s shows the secret, or not its masked form: %s", path, a.raw)
		}
	}

	e.clock.Advance(time.Minute)
	a = e.send(e.acme, "POST", "/v1/account/webhooks/"+created.ID+"/rotate", "")
	want(t, "rotate", a, http.StatusOK)
	rotated := decode[endpoint](t, a)
	until := t0.Add(time.Minute + webhook.DefaultSecretGrace)
	if _, err := signature.ParseSecret(rotated.Secret); err != nil || rotated.Secret == created.Secret ||
		rotated.PreviousSecret == nil || *rotated.PreviousSecret != masked || rotated.PreviousSecretUntil == nil || !rotated.PreviousSecretUntil.Equal(until) {
		t.Fatalf("rotated %s: want a new secret, the old one masked until %v", a.raw, until)
	}
	stored, err := e.store.Endpoint(t.Context(), created.ID)
	if err != nil || stored.Secret != rotated.Secret || stored.PreviousSecret != created.Secret || !stored.PreviousUntil.Equal(until) {
		t.Fatalf("stored %+v %v: want the old secret previous until %v", stored, err, until)
	}
	if a := e.send(e.acme, "GET", "/v1/account/webhooks", ""); strings.Contains(a.raw, rotated.Secret) || strings.Contains(a.raw, created.Secret) {
		t.Errorf("the listing after the rotation shows a secret: %s", a.raw)
	}
	e.clock.Set(until)
	if got := decode[endpoint](t, e.send(e.acme, "GET", "/v1/account/webhooks/"+created.ID, "")); got.PreviousSecret != nil || got.PreviousSecretUntil != nil {
		t.Errorf("after the grace: %+v, want no previous secret", got)
	}
}

// TestWebhookRefusals: who may manage which endpoint, and the values refused, each
// with the status of its cause and a message that names what to fix.
func TestWebhookRefusals(t *testing.T) {
	e := newHookEnv(t, hookOptions{})
	ep := decode[endpoint](t, e.send(e.acme, "POST", "/v1/account/webhooks", `{"url":"https://hooks.acme.example/in"}`))
	one := "/v1/account/webhooks/" + ep.ID
	long := `https://example.com/` + strings.Repeat("a", webhook.MaxURLLength)
	for _, tt := range []struct {
		name, key, method, path, body string
		status                        int
		code                          string
		words                         []string
	}{
		{"a sub-key lists", e.sub, "GET", "/v1/account/webhooks", "", 403, "forbidden", []string{"sub-key", "primary key"}},
		{"a sub-key creates", e.sub, "POST", "/v1/account/webhooks", `{"url":"https://x.example/"}`, 403, "forbidden", []string{"sub-key"}},
		{"a sub-key reads", e.sub, "GET", one, "", 403, "forbidden", []string{"sub-key"}},
		{"a sub-key deletes", e.sub, "DELETE", one, "", 403, "forbidden", []string{"sub-key"}},
		{"another account reads", e.globex, "GET", one, "", 404, "not_found", []string{ep.ID}},
		{"another account changes", e.globex, "PATCH", one, `{"disabled":true}`, 404, "not_found", nil},
		{"another account rotates", e.globex, "POST", one + "/rotate", "", 404, "not_found", nil},
		{"another account tests", e.globex, "POST", one + "/test", "", 404, "not_found", nil},
		{"another account deletes", e.globex, "DELETE", one, "", 404, "not_found", nil},
		{"another account's deliveries", e.globex, "GET", one + "/deliveries", "", 404, "not_found", nil},
		{"another account resends", e.globex, "POST", one + "/deliveries/" + webhook.NewID() + "/resend", "", 404, "not_found", nil},
		{"no endpoint", e.acme, "GET", "/v1/account/webhooks/ep_nothing", "", 404, "not_found", []string{"ep_nothing"}},
		{"javascript:", e.acme, "POST", "/v1/account/webhooks", `{"url":"javascript:alert(1)"}`, 400, "invalid_input", []string{"url", "http or https"}},
		{"ftp:", e.acme, "POST", "/v1/account/webhooks", `{"url":"ftp://files.example/in"}`, 400, "invalid_input", []string{"url", `"ftp"`}},
		{"a password", e.acme, "POST", "/v1/account/webhooks", `{"url":"https://me:secret@x.example/in"}`, 400, "invalid_input", []string{"url", "password"}},
		{"too long", e.acme, "POST", "/v1/account/webhooks", `{"url":"` + long + `"}`, 400, "invalid_input", []string{"url", "2048"}},
		{"a fragment", e.acme, "PATCH", one, `{"url":"https://x.example/in#top"}`, 400, "invalid_input", []string{"url", "fragment"}},
		{"a private address", e.acme, "POST", "/v1/account/webhooks", `{"url":"http://10.0.0.7/in"}`, 400, "invalid_input", []string{"url", "private address"}},
		{"localhost", e.acme, "PATCH", one, `{"url":"http://localhost:3000/in"}`, 400, "invalid_input", []string{"url", "localhost"}},
		{"no url", e.acme, "POST", "/v1/account/webhooks", `{"events":["key.rotated"]}`, 400, "invalid_input", []string{"url is required"}},
		{"an unknown type", e.acme, "POST", "/v1/account/webhooks", `{"url":"https://x.example/","events":["key.rotated","key.eaten"]}`, 400, "invalid_input", []string{"events", `"key.eaten"`}},
		{"a type of the wrong kind", e.acme, "PATCH", one, `{"events":"key.rotated"}`, 400, "invalid_input", []string{"events"}},
		{"an unknown field", e.acme, "POST", "/v1/account/webhooks", `{"url":"https://x.example/","secret":"whsec_x"}`, 400, "invalid_input", []string{`"secret"`}},
		{"an empty change", e.acme, "PATCH", one, `{}`, 400, "invalid_input", []string{"changes nothing"}},
		{"a big body", e.acme, "POST", "/v1/account/webhooks", `{"url":"` + strings.Repeat("a", mgmtapi.MaxBody) + `"}`, 413, "body_too_large", nil},
		{"a bad limit", e.acme, "GET", one + "/deliveries?limit=101", "", 400, "invalid_input", []string{"limit"}},
		{"a bad cursor", e.acme, "GET", one + "/deliveries?cursor=bogus", "", 400, "invalid_input", []string{"cursor"}},
		{"a parameter", e.acme, "GET", "/v1/account/webhooks?all=1", "", 400, "invalid_input", []string{`"all"`}},
		{"no delivery", e.acme, "POST", one + "/deliveries/" + webhook.NewID() + "/resend", "", 404, "not_found", []string{"no delivery"}},
		{"a method", e.acme, "PUT", one, `{}`, 405, "method_not_allowed", nil},
	} {
		a := e.send(tt.key, tt.method, tt.path, tt.body)
		want(t, tt.name, a, tt.status, tt.words...)
		if a.code != tt.code {
			t.Errorf("%s: code %q, want %q", tt.name, a.code, tt.code)
		}
	}
	// Nothing changed.
	if got := decode[endpoint](t, e.send(e.acme, "GET", one, "")); got.URL != "https://hooks.acme.example/in" || got.Disabled {
		t.Errorf("after the refusals: %+v", got)
	}

	// Not JSON.
	req := httptest.NewRequest("POST", "/v1/account/webhooks", strings.NewReader("url=x"))
	req.Header.Set("X-Api-Key", e.acme)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnsupportedMediaType {
		t.Errorf("a form: %d %s", rec.Code, rec.Body)
	}

	// With private hosts allowed.
	p := newHookEnv(t, hookOptions{allowPrivate: true})
	for _, url := range []string{"http://10.0.0.7/in", "http://localhost:3000/in", "http://[::1]:8080/in"} {
		want(t, "private "+url, p.send(p.acme, "POST", "/v1/account/webhooks", `{"url":"`+url+`"}`), http.StatusCreated)
	}
	want(t, "javascript: with private hosts allowed", p.send(p.acme, "POST", "/v1/account/webhooks", `{"url":"javascript:alert(1)"}`), http.StatusBadRequest, "url")

	// A service without webhooks.
	none := newHookEnv(t, hookOptions{none: true})
	for _, path := range []string{"/v1/account/webhooks", "/v1/account/webhooks/ep_x", "/v1/account/webhooks/ep_x/deliveries"} {
		want(t, "no webhooks: "+path, none.send(none.acme, "GET", path, ""), http.StatusNotFound, "this service delivers no webhooks")
	}
	want(t, "no webhooks: create", none.send(none.acme, "POST", "/v1/account/webhooks", `{"url":"https://x.example/"}`), http.StatusNotFound, "no webhooks")
}

// TestWebhookBound: an account holds at most 16 endpoints; one more is a 409 that says
// to delete one, and a deletion makes room.
func TestWebhookBound(t *testing.T) {
	e := newHookEnv(t, hookOptions{budget: driver.Limit{Rate: -1}})
	var first string
	for i := range webhook.MaxEndpoints {
		a := e.send(e.acme, "POST", "/v1/account/webhooks", fmt.Sprintf(`{"url":"https://x.example/%d"}`, i))
		want(t, fmt.Sprint("endpoint ", i), a, http.StatusCreated)
		if i == 0 {
			first = decode[endpoint](t, a).ID
		}
	}
	want(t, "one more", e.send(e.acme, "POST", "/v1/account/webhooks", `{"url":"https://x.example/more"}`), http.StatusConflict, "16", "delete one")
	want(t, "another account", e.send(e.globex, "POST", "/v1/account/webhooks", `{"url":"https://x.example/more"}`), http.StatusCreated)
	want(t, "delete", e.send(e.acme, "DELETE", "/v1/account/webhooks/"+first, ""), http.StatusOK)
	want(t, "one more after a deletion", e.send(e.acme, "POST", "/v1/account/webhooks", `{"url":"https://x.example/more"}`), http.StatusCreated)
}

// TestWebhookMessages: a test enqueues one message, for its endpoint only; a resend
// makes a delivery pending again; the endpoint shows when a delivery last succeeded;
// both are refused for a disabled endpoint.
func TestWebhookMessages(t *testing.T) {
	e := newHookEnv(t, hookOptions{})
	ctx := t.Context()
	ep := decode[endpoint](t, e.send(e.acme, "POST", "/v1/account/webhooks", `{"url":"https://hooks.acme.example/in","events":["key.revoked"]}`))
	other := decode[endpoint](t, e.send(e.acme, "POST", "/v1/account/webhooks", `{"url":"https://hooks.acme.example/other"}`))
	decode[endpoint](t, e.send(e.globex, "POST", "/v1/account/webhooks", `{"url":"https://hooks.globex.example/in"}`))

	a := e.send(e.acme, "POST", "/v1/account/webhooks/"+ep.ID+"/test", "")
	want(t, "test", a, http.StatusAccepted)
	test := decode[delivery](t, a)
	if test.Endpoint != ep.ID || test.Type != "endpoint.test" || test.State != "pending" || test.Payload.Type != "endpoint.test" {
		t.Fatalf("the test's delivery: %s", a.raw)
	}
	claimed, err := e.store.Claim(ctx, e.clock.Now(), time.Minute, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(claimed) != 1 || claimed[0].Endpoint != ep.ID || claimed[0].Message.ID != test.MessageID {
		t.Fatalf("claimed %+v: want the test's one delivery, to its endpoint", claimed)
	}
	err = e.store.Record(ctx, webhook.Outcome{Endpoint: ep.ID, Message: test.MessageID, Claim: claimed[0].Claim,
		Attempt: webhook.Attempt{At: e.clock.Now(), Status: 410, Error: "the receiver answered 410 Gone"}, State: webhook.Failed})
	if err != nil {
		t.Fatal(err)
	}
	page := decode[struct {
		Deliveries []delivery
		Next       *string
	}](t, e.send(e.acme, "GET", "/v1/account/webhooks/"+ep.ID+"/deliveries?limit=10", ""))
	if len(page.Deliveries) != 1 || page.Deliveries[0].State != "failed" || page.Next != nil {
		t.Fatalf("the deliveries: %+v", page)
	}
	if page := e.send(e.acme, "GET", "/v1/account/webhooks/"+other.ID+"/deliveries", ""); !strings.Contains(page.raw, `"deliveries":[]`) {
		t.Errorf("the other endpoint's deliveries: %s", page.raw)
	}

	a = e.send(e.acme, "POST", "/v1/account/webhooks/"+ep.ID+"/deliveries/"+test.MessageID+"/resend", "")
	want(t, "resend", a, http.StatusAccepted)
	if d := decode[delivery](t, a); d.State != "pending" || d.MessageID != test.MessageID {
		t.Errorf("resent: %s", a.raw)
	}
	if got := decode[endpoint](t, e.send(e.acme, "GET", "/v1/account/webhooks/"+ep.ID, "")); got.LastDeliveredAt != nil {
		t.Errorf("last delivered at %v before any success", got.LastDeliveredAt)
	}
	claimed, err = e.store.Claim(ctx, e.clock.Now(), time.Minute, 100)
	if err != nil || len(claimed) != 1 || claimed[0].Message.ID != test.MessageID {
		t.Fatalf("claimed after the resend: %+v %v", claimed, err)
	}
	e.clock.Advance(time.Second)
	err = e.store.Record(ctx, webhook.Outcome{Endpoint: ep.ID, Message: test.MessageID, Claim: claimed[0].Claim,
		Attempt: webhook.Attempt{At: e.clock.Now(), Status: 204}, State: webhook.Delivered})
	if err != nil {
		t.Fatal(err)
	}
	if got := decode[endpoint](t, e.send(e.acme, "GET", "/v1/account/webhooks/"+ep.ID, "")); got.LastDeliveredAt == nil || !got.LastDeliveredAt.Equal(e.clock.Now()) {
		t.Errorf("last delivered at %v, want %v", got.LastDeliveredAt, e.clock.Now())
	}

	want(t, "disable", e.send(e.acme, "PATCH", "/v1/account/webhooks/"+ep.ID, `{"disabled":true}`), http.StatusOK)
	want(t, "test a disabled endpoint", e.send(e.acme, "POST", "/v1/account/webhooks/"+ep.ID+"/test", ""), http.StatusConflict, "disabled", "enable it")
	want(t, "resend to a disabled endpoint", e.send(e.acme, "POST", "/v1/account/webhooks/"+ep.ID+"/deliveries/"+test.MessageID+"/resend", ""),
		http.StatusConflict, "disabled")
}

// TestWebhookAudit: every change of an endpoint is in the account's audit log, with the
// key that made it, and no secret.
func TestWebhookAudit(t *testing.T) {
	e := newHookEnv(t, hookOptions{})
	a := e.send(e.acme, "POST", "/v1/account/webhooks", `{"url":"https://hooks.acme.example/in"}`)
	ep := decode[endpoint](t, a)
	one := "/v1/account/webhooks/" + ep.ID
	steps := []struct{ method, path, body string }{
		{"PATCH", one, `{"url":"https://hooks.acme.example/v2","events":["credits.low"]}`},
		{"PATCH", one, `{"disabled":true}`},
		{"PATCH", one, `{"disabled":false}`},
		{"POST", one + "/rotate", ""},
		{"POST", one + "/test", ""},
		{"DELETE", one, ""},
	}
	secrets := []string{ep.Secret}
	for _, s := range steps {
		a := e.send(e.acme, s.method, s.path, s.body)
		if a.status >= 300 {
			t.Fatalf("%s %s: %s", s.method, s.path, a.raw)
		}
		if s.path == one+"/rotate" {
			secrets = append(secrets, decode[endpoint](t, a).Secret)
		}
	}
	a = e.send(e.acme, "GET", "/v1/account/audit", "")
	want(t, "the audit log", a, http.StatusOK)
	log := decode[struct {
		Entries []struct {
			Actor, Action string
			Target        *string
			Address       *string
			Before, After json.RawMessage
			Reason        *string
		}
	}](t, a)
	var actions []string
	for _, en := range log.Entries {
		if !strings.HasPrefix(en.Action, "endpoint.") {
			continue
		}
		actions = append(actions, en.Action)
		if en.Actor != e.acmeKey || en.Target == nil || *en.Target != ep.ID || en.Address == nil {
			t.Errorf("%s: actor %q, target %v, address %v; want the primary key, the endpoint, the address", en.Action, en.Actor, en.Target, en.Address)
		}
	}
	wantActions := []string{"endpoint.delete", "endpoint.rotate", "endpoint.enable", "endpoint.disable", "endpoint.update", "endpoint.create"}
	if !slices.Equal(actions, wantActions) {
		t.Errorf("the audit log's actions %v, want %v", actions, wantActions)
	}
	for _, s := range secrets {
		if strings.Contains(a.raw, s) || strings.Contains(a.raw, s[:10]) {
			t.Errorf("the audit log holds a secret: %s", a.raw)
		}
	}
	if !strings.Contains(a.raw, `"before":{"url":"https://hooks.acme.example/in","events":[]}`) ||
		!strings.Contains(a.raw, `"reason":"disabled by the account holder"`) {
		t.Errorf("the audit log lacks the update's settings or the reason: %s", a.raw)
	}
}

// TestWebhookBudget: creating, changing, rotating, testing and resending spend the
// self-service budget, beyond which they are a 429; a refused value, disabling and
// deleting spend nothing and are never refused for it.
func TestWebhookBudget(t *testing.T) {
	e := newHookEnv(t, hookOptions{budget: driver.Limit{Rate: 1, Per: time.Hour, Burst: 3}})
	ep := decode[endpoint](t, e.send(e.acme, "POST", "/v1/account/webhooks", `{"url":"https://x.example/in"}`))
	one := "/v1/account/webhooks/" + ep.ID
	want(t, "a refused url", e.send(e.acme, "POST", "/v1/account/webhooks", `{"url":"ftp://x.example/in"}`), http.StatusBadRequest)
	want(t, "an endpoint that does not exist", e.send(e.acme, "POST", "/v1/account/webhooks/ep_nothing/rotate", ""), http.StatusNotFound)
	want(t, "rotate", e.send(e.acme, "POST", one+"/rotate", ""), http.StatusOK)
	want(t, "test", e.send(e.acme, "POST", one+"/test", ""), http.StatusAccepted)
	a := e.send(e.acme, "POST", one+"/test", "")
	want(t, "a test beyond the budget", a, http.StatusTooManyRequests, "try again")
	want(t, "a change beyond the budget", e.send(e.acme, "PATCH", one, `{"events":["key.created"]}`), http.StatusTooManyRequests)
	want(t, "disable", e.send(e.acme, "PATCH", one, `{"disabled":true}`), http.StatusOK)
	want(t, "delete", e.send(e.acme, "DELETE", one, ""), http.StatusOK)
	e.clock.Advance(time.Hour)
	want(t, "an hour later", e.send(e.acme, "POST", "/v1/account/webhooks", `{"url":"https://x.example/in"}`), http.StatusCreated)
}

// TestWebhookOperatorDisabled: an endpoint the operator disabled is shown to its
// holder as disabled by the operator, with the operator's reason; the holder's
// enabling is a 409 (conflict) that says only the operator enables it, changes nothing
// and spends nothing; the holder's own disabling and enabling work as before once the
// operator enabled it again.
func TestWebhookOperatorDisabled(t *testing.T) {
	e := newHookEnv(t, hookOptions{budget: driver.Limit{Rate: 1, Per: time.Hour, Burst: 2}})
	ep := decode[endpoint](t, e.send(e.acme, "POST", "/v1/account/webhooks", `{"url":"https://x.example/in"}`))
	one := "/v1/account/webhooks/" + ep.ID
	hooks := webhook.NewEndpoints(e.store, nil, nil) // the operator's door, on the same store
	yes, no := true, false
	if _, err := hooks.Update(t.Context(), event.Actor{ID: audit.Operator}, "acme", ep.ID,
		webhook.EndpointChange{Disabled: &yes, Reason: "disabled by the operator: abuse", ByOperator: true}); err != nil {
		t.Fatal(err)
	}
	got := decode[endpoint](t, e.send(e.acme, "GET", one, ""))
	if !got.Disabled || got.DisabledBy == nil || *got.DisabledBy != "operator" || got.DisabledReason == nil || *got.DisabledReason != "disabled by the operator: abuse" {
		t.Errorf("the endpoint the operator disabled, as its holder sees it: %+v", got)
	}
	for range 3 { // more than the budget: the refusal spends nothing
		a := e.send(e.acme, "PATCH", one, `{"disabled":false}`)
		want(t, "the holder's enabling", a, http.StatusConflict, "only the operator can enable it again")
		if a.code != "conflict" {
			t.Errorf("the holder's enabling: code %q, want conflict", a.code)
		}
	}
	want(t, "the holder's enabling with a change", e.send(e.acme, "PATCH", one, `{"disabled":false,"url":"https://y.example/in"}`),
		http.StatusConflict, "only the operator")
	if got := decode[endpoint](t, e.send(e.acme, "GET", one, "")); !got.Disabled || got.URL != "https://x.example/in" {
		t.Errorf("after the refused enablings: %+v", got)
	}
	want(t, "a test", e.send(e.acme, "POST", one+"/test", ""), http.StatusConflict, "only the operator")
	want(t, "the holder disables it again", e.send(e.acme, "PATCH", one, `{"disabled":true}`), http.StatusOK)
	if got := decode[endpoint](t, e.send(e.acme, "GET", one, "")); got.DisabledBy == nil || *got.DisabledBy != "operator" {
		t.Errorf("the holder's disabling took the operator's over: %+v", got)
	}
	if _, err := hooks.Update(t.Context(), event.Actor{ID: audit.Operator}, "acme", ep.ID,
		webhook.EndpointChange{Disabled: &no, ByOperator: true}); err != nil {
		t.Fatal(err)
	}
	a := e.send(e.acme, "PATCH", one, `{"disabled":true}`)
	want(t, "the holder disables it", a, http.StatusOK)
	if got := decode[endpoint](t, a); got.DisabledBy == nil || *got.DisabledBy != "account" {
		t.Errorf("disabled by its holder: %s", a.raw)
	}
	a = e.send(e.acme, "PATCH", one, `{"disabled":false}`)
	want(t, "the holder enables it (within the budget: the refusals spent none)", a, http.StatusOK)
	if got := decode[endpoint](t, a); got.Disabled || got.DisabledBy != nil {
		t.Errorf("enabled by its holder: %s", a.raw)
	}
}
