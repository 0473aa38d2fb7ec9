package dashboard_test

import (
	"errors"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/dashboard"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/session"
	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/webhook"
)

// hookURL is an endpoint's URL with characters that HTML must escape.
const hookURL = `http://127.0.0.1:9/hooks?a=1&b=<script>alert("x")</script>`

// shownSecret returns the secret a secret page shows.
func shownSecret(t *testing.T, p page) string {
	t.Helper()
	m := regexp.MustCompile(`id="webhook-secret" type="text" readonly value="(whsec_[^"]+)"`).FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("the page shows no secret (%d):\n%s", p.status, p.body)
	}
	return html.UnescapeString(m[1])
}

// escaped returns s as the dashboard's templates write it in text: HTML-escaped, with
// "+" as &#43; (a secret's base64 may hold one).
func escaped(s string) string { return strings.ReplaceAll(html.EscapeString(s), "+", "&#43;") }

// shows reports whether the page shows the text s, however it is escaped.
func (p page) shows(s string) bool { return strings.Contains(html.UnescapeString(p.body), s) }

// addEndpoint adds an endpoint through the dashboard and returns its id and secret.
func (b *browser) addEndpoint(csrf, u string, events ...string) (id, secret string) {
	b.t.Helper()
	p := b.do("POST", "/dashboard/webhooks", url.Values{"csrf_token": {csrf}, "url": {u}, "event": events})
	if p.status != http.StatusCreated {
		b.t.Fatalf("add an endpoint: %d\n%s", p.status, p.body)
	}
	m := regexp.MustCompile(`\(<code>(ep_[a-z0-9]+)</code>\) is added`).FindStringSubmatch(p.body)
	if m == nil {
		b.t.Fatalf("the page names no endpoint id:\n%s", p.body)
	}
	return m[1], shownSecret(b.t, p)
}

// post posts form with the CSRF token to path and wants a redirect to the endpoint's
// page saying done.
func (b *browser) act(csrf, path string, form url.Values, id, done string) {
	b.t.Helper()
	form.Set("csrf_token", csrf)
	p := b.do("POST", path, form)
	want := "webhook?" + url.Values{"done": {done}, "id": {id}}.Encode()
	if p.status != http.StatusSeeOther || p.header.Get("Location") != want {
		b.t.Fatalf("POST %s: %d to %q, want 303 to %q\n%s", path, p.status, p.header.Get("Location"), want, p.body)
	}
}

// row returns the table row of the page whose attribute attr is value.
func row(t *testing.T, p page, attr, value string) string {
	t.Helper()
	start := strings.Index(p.body, `<tr `+attr+`="`+value+`"`)
	if start < 0 {
		t.Fatalf("no row with %s=%q:\n%s", attr, value, p.body)
	}
	end := strings.Index(p.body[start:], "</tr>")
	return p.body[start : start+end]
}

// TestWebhooks walks the Webhooks pages as the primary key's session: the page is in
// the navigation; an endpoint added with two event types shows its secret once, which
// is the one the store signs with, and is listed with its URL escaped (as text, never a
// link), its events, its state and the secret masked; a test event's delivery is
// listed, and resent; disabling refuses a test until the endpoint is enabled again;
// rotating shows the new secret once; deleting asks first. Every change is in the audit
// log, made by the session's key; no secret reaches a later page or the log.
func TestWebhooks(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	b := e.browser(t)
	csrf := b.signIn(e.key)

	p := b.do("GET", "/dashboard/webhooks", nil)
	if p.status != http.StatusOK || !strings.Contains(p.body, `<a href="webhooks" aria-current="page">Webhooks</a>`) ||
		!strings.Contains(p.body, "no webhook endpoint yet") {
		t.Fatalf("the empty Webhooks page: %d\n%s", p.status, p.body)
	}
	for _, typ := range webhook.Types() {
		if !strings.Contains(p.body, `<input type="checkbox" name="event" value="`+typ+`">`) {
			t.Errorf("the form offers no checkbox for %s", typ)
		}
	}
	if o := b.do("GET", "/dashboard/", nil); !strings.Contains(o.body, `<a href="webhooks">Webhooks</a>`) {
		t.Error("the overview's navigation has no link to the Webhooks page")
	}

	id, secret := b.addEndpoint(csrf, hookURL, "key.created", "credits.low")
	stored, err := e.hookStore.Endpoint(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Secret != secret || stored.Account != "acme" || !slices.Equal(stored.Types, []string{"credits.low", "key.created"}) {
		t.Fatalf("stored %+v; shown secret %q", stored, secret)
	}

	list := b.do("GET", "/dashboard/webhooks", nil)
	r := row(t, list, "data-endpoint-id", id)
	for _, want := range []string{`<code class="url" data-field="url">` + html.EscapeString(hookURL) + `</code>`,
		"<code>credits.low</code>", "<code>key.created</code>", `data-field="state">enabled<`,
		`data-field="secret">` + escaped(webhook.MaskSecret(secret)) + `<`, "2030-01-15 12:00 UTC", `href="webhook?id=` + id + `"`} {
		if !strings.Contains(r, want) {
			t.Errorf("the endpoint's row lacks %s:\n%s", want, r)
		}
	}
	if strings.Contains(list.body, "<script>") || strings.Contains(list.body, `href="http`) {
		t.Errorf("the list has the URL unescaped, or as a link:\n%s", list.body)
	}

	// A test event: its delivery is listed, pending; then resent.
	b.act(csrf, "/dashboard/webhook-test", url.Values{"endpoint_id": {id}}, id, "test")
	ep := b.do("GET", "/dashboard/webhook?"+url.Values{"id": {id}, "done": {"test"}}.Encode(), nil)
	if ep.status != http.StatusOK || !strings.Contains(ep.body, "A test event (endpoint.test) is queued") {
		t.Fatalf("the endpoint's page after a test: %d\n%s", ep.status, ep.body)
	}
	dels, err := e.hooks.Deliveries(ctx, "acme", id, webhook.Query{})
	if err != nil || len(dels.Deliveries) != 1 || dels.Deliveries[0].Message.Type != webhook.EndpointTest {
		t.Fatalf("the deliveries after a test: %+v, %v", dels, err)
	}
	msg := dels.Deliveries[0].Message.ID
	d := row(t, ep, "data-message", msg)
	for _, want := range []string{`data-type="endpoint.test"`, `data-state="pending"`, `data-field="attempts">0<`, "none yet",
		`name="message_id" value="` + msg + `"`} {
		if !strings.Contains(d, want) {
			t.Errorf("the delivery's row lacks %s:\n%s", want, d)
		}
	}
	b.act(csrf, "/dashboard/webhook-resend", url.Values{"endpoint_id": {id}, "message_id": {msg}}, id, "resend")

	// Disabled, it is refused a test, with the service's message, until it is enabled.
	b.act(csrf, "/dashboard/webhook-disable", url.Values{"endpoint_id": {id}}, id, "disable")
	ep = b.do("GET", "/dashboard/webhook?id="+id, nil)
	if !strings.Contains(ep.body, `data-field="state">disabled<`) || !strings.Contains(ep.body, "disabled by the account holder") ||
		strings.Contains(ep.body, `action="webhook-test"`) || strings.Contains(ep.body, `action="webhook-resend"`) {
		t.Errorf("the disabled endpoint's page:\n%s", ep.body)
	}
	refused := b.do("POST", "/dashboard/webhook-test", url.Values{"endpoint_id": {id}, "csrf_token": {csrf}})
	if refused.status != http.StatusConflict || !strings.Contains(refused.body, `role="alert">the webhook endpoint &#34;`+id+`&#34; is disabled`) {
		t.Errorf("a test of a disabled endpoint: %d, want 409 with the service's message\n%s", refused.status, refused.body)
	}
	b.act(csrf, "/dashboard/webhook-enable", url.Values{"endpoint_id": {id}}, id, "enable")
	if got, _ := e.hooks.Get(ctx, "acme", id); !got.Disabled.IsZero() {
		t.Error("the endpoint is still disabled")
	}

	// Rotation: the new secret, once; the replaced one, masked, still signs.
	rotated := b.do("POST", "/dashboard/webhook-rotate", url.Values{"endpoint_id": {id}, "csrf_token": {csrf}})
	if rotated.status != http.StatusOK || !strings.Contains(rotated.body, "has a new secret") || !strings.Contains(rotated.body, "still signs each delivery beside it until") {
		t.Fatalf("rotate: %d\n%s", rotated.status, rotated.body)
	}
	newSecret := shownSecret(t, rotated)
	if stored, _ := e.hookStore.Endpoint(ctx, id); newSecret == secret || stored.Secret != newSecret || stored.PreviousSecret != secret {
		t.Fatalf("after the rotation the store holds %q (previous %q); shown %q", stored.Secret, stored.PreviousSecret, newSecret)
	}
	ep = b.do("GET", "/dashboard/webhook?id="+id, nil)
	if !strings.Contains(ep.body, `data-field="secret">`+escaped(webhook.MaskSecret(newSecret))+`<`) ||
		!strings.Contains(ep.body, "the replaced secret <code>"+escaped(webhook.MaskSecret(secret))+"</code> still signs") {
		t.Errorf("the endpoint's page after the rotation:\n%s", ep.body)
	}

	// Every page but the two that made them is without the secrets.
	var later []page
	for _, path := range []string{"/dashboard/webhooks", "/dashboard/webhook?id=" + id, "/dashboard/webhook-delete?id=" + id, "/dashboard/audit", "/dashboard/"} {
		p := b.do("GET", path, nil)
		if p.status != http.StatusOK {
			t.Fatalf("GET %s: %d", path, p.status)
		}
		later = append(later, p)
	}
	for _, p := range later {
		if p.shows(secret) || p.shows(newSecret) {
			t.Errorf("a later page shows a secret:\n%s", p.body)
		}
	}
	if confirm := later[2].body; !strings.Contains(confirm, "This cannot be undone") || !strings.Contains(confirm, `action="webhook-delete"`) {
		t.Errorf("the confirmation of the deletion:\n%s", confirm)
	}
	del := b.do("POST", "/dashboard/webhook-delete", url.Values{"endpoint_id": {id}, "csrf_token": {csrf}})
	if del.status != http.StatusSeeOther || del.header.Get("Location") != "webhooks?deleted=1" {
		t.Fatalf("delete: %d %q\n%s", del.status, del.header.Get("Location"), del.body)
	}
	if _, err := e.hookStore.Endpoint(ctx, id); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the endpoint after its deletion: %v", err)
	}
	if p := b.do("GET", "/dashboard/webhooks?deleted=1", nil); !strings.Contains(p.body, "The endpoint is deleted") || strings.Contains(p.body, id) {
		t.Errorf("the list after the deletion:\n%s", p.body)
	}

	log, err := e.mgr.OwnAuditLog(ctx, e.caller(), audit.Query{Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, entry := range log.Entries {
		if entry.Target == id {
			actions = append(actions, string(entry.Action))
			if entry.Actor != e.primaryID(t) {
				t.Errorf("%s was made by %q, want the session's key", entry.Action, entry.Actor)
			}
		}
	}
	if want := []string{"endpoint.delete", "endpoint.rotate", "endpoint.enable", "endpoint.disable", "endpoint.create"}; !slices.Equal(actions, want) {
		t.Errorf("the audit log of the endpoint: %v, want %v", actions, want)
	}
	logged := fmt.Sprint(e.logs.Records(t))
	if strings.Contains(logged, secret) || strings.Contains(logged, newSecret) {
		t.Error("a secret was logged")
	}
}

// TestWebhookRefusals: the service's refusals of a new endpoint are shown on the form,
// which keeps what was typed; an endpoint that is not the account's is a 404; an
// account with the most endpoints is told to delete one.
func TestWebhookRefusals(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)
	csrf := b.signIn(e.key)
	for _, tt := range []struct {
		name   string
		url    string
		events []string
		says   string
	}{
		{"no URL", "", nil, "url is required"},
		{"another scheme", "ftp://example.com/hooks", nil, `url has the scheme &#34;ftp&#34;`},
		{"a fragment", "https://example.com/hooks#here", nil, "url has a fragment"},
		{"credentials", "https://user:pw@example.com/hooks", nil, "url has a user name or password"},
		{"an unknown event", "https://example.com/hooks", []string{"key.created", "key.eaten"}, `events: &#34;key.eaten&#34; is not an event type`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := b.do("POST", "/dashboard/webhooks", url.Values{"csrf_token": {csrf}, "url": {tt.url}, "event": tt.events})
			if p.status != http.StatusBadRequest || !strings.Contains(p.body, "The endpoint was not added: "+tt.says) {
				t.Fatalf("%d, want 400 saying %q\n%s", p.status, tt.says, p.body)
			}
			if !strings.Contains(p.body, `name="url" type="url" required maxlength="2048" value="`+html.EscapeString(tt.url)+`"`) {
				t.Error("the form does not keep the URL")
			}
			if slices.Contains(tt.events, "key.created") && !strings.Contains(p.body, `value="key.created" checked>`) {
				t.Error("the form does not keep the events")
			}
		})
	}
	if es, _ := e.hooks.List(t.Context(), "acme"); len(es) != 0 {
		t.Fatalf("refused forms made %d endpoints", len(es))
	}

	// Another account's endpoint, and ids that name none: 404.
	theirs, err := e.hooks.Create(t.Context(), event.Actor{ID: "test"}, "globex", "https://example.com/globex", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/dashboard/webhook?id=" + theirs.ID, "/dashboard/webhook?id=ep_nope", "/dashboard/webhook?id=",
		"/dashboard/webhook-delete?id=" + theirs.ID} {
		if p := b.do("GET", path, nil); p.status != http.StatusNotFound || !strings.Contains(p.body, "no webhook endpoint with this id") {
			t.Errorf("GET %s: %d, want 404\n%.400s", path, p.status, p.body)
		}
	}
	for _, path := range []string{"/dashboard/webhook-test", "/dashboard/webhook-disable", "/dashboard/webhook-rotate", "/dashboard/webhook-delete"} {
		if p := b.do("POST", path, url.Values{"endpoint_id": {theirs.ID}, "csrf_token": {csrf}}); p.status != http.StatusNotFound {
			t.Errorf("POST %s of another account's endpoint: %d, want 404", path, p.status)
		}
	}
	if got, err := e.hooks.Get(t.Context(), "globex", theirs.ID); err != nil || !got.Disabled.IsZero() {
		t.Errorf("another account's endpoint after the refused posts: %+v, %v", got, err)
	}

	// A resend of a message the endpoint never had: the service's message on the
	// endpoint's page.
	id, _ := b.addEndpoint(csrf, "https://example.com/hooks")
	p := b.do("POST", "/dashboard/webhook-resend", url.Values{"endpoint_id": {id}, "message_id": {"msg_nope"}, "csrf_token": {csrf}})
	if p.status != http.StatusNotFound || !strings.Contains(p.body, `role="alert">the webhook endpoint &#34;`+id+`&#34; has no delivery of the message`) {
		t.Errorf("a resend of an unknown message: %d\n%s", p.status, p.body)
	}

	// The most endpoints: the form is gone, and a post is refused with 409.
	for i := 1; i < webhook.MaxEndpoints; i++ {
		if _, err := e.hooks.Create(t.Context(), event.Actor{ID: "test"}, "acme", fmt.Sprintf("https://example.com/%d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	full := b.do("GET", "/dashboard/webhooks", nil)
	if strings.Contains(full.body, `action="webhooks"`) || !strings.Contains(full.body, "the most it may have") {
		t.Errorf("the page of an account with the most endpoints:\n%s", full.body)
	}
	p = b.do("POST", "/dashboard/webhooks", url.Values{"csrf_token": {csrf}, "url": {"https://example.com/one-more"}})
	if p.status != http.StatusConflict || !strings.Contains(p.body, "delete one before you create another") {
		t.Errorf("one endpoint more: %d\n%s", p.status, p.body)
	}
	for _, r := range e.logs.Records(t) {
		if r.Level == "ERROR" {
			t.Errorf("a refusal was logged at ERROR: %s %v", r.Msg, r.Attrs)
		}
	}
}

// TestWebhooksSubKey: a sub-key's session sees that only the primary key manages
// webhooks, and every action it posts is refused, changing nothing.
func TestWebhooksSubKey(t *testing.T) {
	e := newEnv(t)
	ep, err := e.hooks.Create(t.Context(), event.Actor{ID: "test"}, "acme", "https://example.com/hooks", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, sub, err := e.mgr.CreateKey(t.Context(), "acme", accounts.NewKey{Name: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	b := e.browser(t)
	csrf := b.signIn(sub)
	p := b.do("GET", "/dashboard/webhooks", nil)
	if p.status != http.StatusForbidden || !strings.Contains(p.body, "a sub-key cannot manage the account&#39;s webhook endpoints") ||
		strings.Contains(p.body, ep.ID) || strings.Contains(p.body, `action="webhooks"`) {
		t.Errorf("the Webhooks page of a sub-key's session: %d\n%s", p.status, p.body)
	}
	if p := b.do("GET", "/dashboard/webhook?id="+ep.ID, nil); p.status != http.StatusForbidden || strings.Contains(p.body, "example.com") {
		t.Errorf("an endpoint's page for a sub-key's session: %d\n%s", p.status, p.body)
	}
	for _, path := range []string{"/dashboard/webhooks", "/dashboard/webhook-test", "/dashboard/webhook-disable", "/dashboard/webhook-rotate",
		"/dashboard/webhook-delete"} {
		p := b.do("POST", path, url.Values{"csrf_token": {csrf}, "endpoint_id": {ep.ID}, "url": {"https://example.com/mine"}})
		if p.status != http.StatusForbidden || !strings.Contains(p.body, "primary key") {
			t.Errorf("POST %s by a sub-key's session: %d, want 403\n%s", path, p.status, p.body)
		}
	}
	es, err := e.hooks.List(t.Context(), "acme")
	if err != nil || len(es) != 1 || es[0].Secret != webhook.MaskSecret(ep.Secret) || !es[0].Disabled.IsZero() {
		t.Errorf("the endpoints after the sub-key's posts: %+v, %v", es, err)
	}
	if page, _ := e.hooks.Deliveries(t.Context(), "acme", ep.ID, webhook.Query{}); len(page.Deliveries) != 0 {
		t.Error("a sub-key's session sent a test event")
	}
}

// TestWebhookFormsNeedCSRF: every webhook form is refused with 403 without the
// session's CSRF token or from another site, and nothing changes.
func TestWebhookFormsNeedCSRF(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)
	csrf := b.signIn(e.key)
	id, secret := b.addEndpoint(csrf, "https://example.com/hooks")
	for _, tt := range []struct {
		name  string
		token string
		hdr   []string
		want  string
	}{
		{"no token", "", nil, "security token"},
		{"forged token", csrf[:len(csrf)-2] + "xx", nil, "security token"},
		{"cross-site, with the token", csrf, []string{"Sec-Fetch-Site", "cross-site"}, "another site"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, path := range []string{"/dashboard/webhooks", "/dashboard/webhook-test", "/dashboard/webhook-resend", "/dashboard/webhook-disable",
				"/dashboard/webhook-enable", "/dashboard/webhook-rotate", "/dashboard/webhook-delete"} {
				form := url.Values{"endpoint_id": {id}, "url": {"https://example.com/other"}, "message_id": {"msg_x"}}
				if tt.token != "" {
					form.Set("csrf_token", tt.token)
				}
				if p := b.do("POST", path, form, tt.hdr...); p.status != http.StatusForbidden || !strings.Contains(p.body, tt.want) {
					t.Errorf("POST %s: %d, want 403 saying %q\n%s", path, p.status, tt.want, p.body)
				}
			}
		})
	}
	stored, err := e.hookStore.Endpoint(t.Context(), id)
	if err != nil || stored.Secret != secret || !stored.Disabled.IsZero() {
		t.Errorf("the endpoint after the refused posts: %+v, %v", stored, err)
	}
	if es, _ := e.hooks.List(t.Context(), "acme"); len(es) != 1 {
		t.Errorf("%d endpoints after the refused posts, want 1", len(es))
	}
	if page, _ := e.hooks.Deliveries(t.Context(), "acme", id, webhook.Query{}); len(page.Deliveries) != 0 {
		t.Error("a refused post sent a test event")
	}
}

// TestWebhooksAbsent: without Options.Webhooks, the dashboard has no Webhooks page and
// no link to it.
func TestWebhooksAbsent(t *testing.T) {
	e := newEnvWith(t, func(_ *session.Options, o *dashboard.Options) { o.Webhooks = nil })
	b := e.browser(t)
	csrf := b.signIn(e.key)
	if p := b.do("GET", "/dashboard/", nil); strings.Contains(p.body, `href="webhooks"`) {
		t.Error("the navigation links to the Webhooks page")
	}
	for _, path := range []string{"/dashboard/webhooks", "/dashboard/webhook?id=ep_x", "/dashboard/webhook-delete?id=ep_x"} {
		if p := b.do("GET", path, nil); p.status != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, p.status)
		}
	}
	if p := b.do("POST", "/dashboard/webhooks", url.Values{"csrf_token": {csrf}, "url": {"https://example.com/hooks"}}); p.status != http.StatusNotFound {
		t.Errorf("POST /dashboard/webhooks: %d, want 404", p.status)
	}
}

// TestWebhookOperatorDisabled: an endpoint the operator disabled is shown as disabled
// by the operator, with the operator's reason and no Enable; a post that enables it
// anyway is refused with 409 and the service's message, and changes nothing. Once the
// operator enabled it, the holder's own disabling offers Enable again.
func TestWebhookOperatorDisabled(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	b := e.browser(t)
	csrf := b.signIn(e.key)
	id, _ := b.addEndpoint(csrf, "https://example.com/hooks")
	yes, no := true, false
	if _, err := e.hooks.Update(ctx, event.Actor{ID: "operator"}, "acme", id,
		webhook.EndpointChange{Disabled: &yes, Reason: "disabled by the operator: it answers 500", ByOperator: true}); err != nil {
		t.Fatal(err)
	}
	ep := b.do("GET", "/dashboard/webhook?id="+id, nil)
	if !strings.Contains(ep.body, `data-field="state">disabled by the operator<`) || !ep.shows("disabled by the operator: it answers 500") ||
		!strings.Contains(ep.body, `data-field="operator-disabled"`) || strings.Contains(ep.body, `action="webhook-enable"`) {
		t.Errorf("the page of the endpoint the operator disabled:\n%s", ep.body)
	}
	if r := row(t, b.do("GET", "/dashboard/webhooks", nil), "data-endpoint-id", id); !strings.Contains(r, `data-field="state">disabled by the operator<`) {
		t.Errorf("the endpoint's row:\n%s", r)
	}
	refused := b.do("POST", "/dashboard/webhook-enable", url.Values{"endpoint_id": {id}, "csrf_token": {csrf}})
	if refused.status != http.StatusConflict || !refused.shows("only the operator can enable it again") {
		t.Errorf("enabling the endpoint the operator disabled: %d, want 409 with the service's message\n%s", refused.status, refused.body)
	}
	if got, _ := e.hooks.Get(ctx, "acme", id); got.Disabled.IsZero() || got.DisabledBy != webhook.DisabledByOperator {
		t.Errorf("after the refused enabling: %+v", got)
	}
	if _, err := e.hooks.Update(ctx, event.Actor{ID: "operator"}, "acme", id, webhook.EndpointChange{Disabled: &no, ByOperator: true}); err != nil {
		t.Fatal(err)
	}
	b.act(csrf, "/dashboard/webhook-disable", url.Values{"endpoint_id": {id}}, id, "disable")
	ep = b.do("GET", "/dashboard/webhook?id="+id, nil)
	if !strings.Contains(ep.body, `data-field="state">disabled<`) || !strings.Contains(ep.body, `action="webhook-enable"`) {
		t.Errorf("the page of the endpoint its holder disabled:\n%s", ep.body)
	}
	b.act(csrf, "/dashboard/webhook-enable", url.Values{"endpoint_id": {id}}, id, "enable")
}
