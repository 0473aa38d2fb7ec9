package dashboard

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/internal/mgmtapi"
	"github.com/tollgate-dev/tollgate/webhook"
)

// The Webhooks pages (with Options.Webhooks): the account's endpoints, the form that
// adds one, and each endpoint's page with its actions and deliveries. They run the
// actions of the account holders' API (mgmtapi.WebhookActions, on the
// webhook.Endpoints the host gives), with the session as the holder: only the
// primary key's session (or one of the whole account) manages the endpoints.

// deliveriesPageSize is the number of deliveries an endpoint's page shows.
const deliveriesPageSize = webhook.DefaultLimit

// webhookRoutes registers the routes of the Webhooks pages.
func (h *Handler) webhookRoutes() {
	h.mux.HandleFunc("GET /webhooks", h.page(h.webhooksPage))
	h.mux.HandleFunc("POST /webhooks", h.form(h.createWebhook))
	h.mux.HandleFunc("GET /webhook", h.page(h.webhookPage))
	h.mux.HandleFunc("POST /webhook-test", h.form(h.testWebhook))
	h.mux.HandleFunc("POST /webhook-resend", h.form(h.resendWebhook))
	h.mux.HandleFunc("POST /webhook-disable", h.form(h.disableWebhook))
	h.mux.HandleFunc("POST /webhook-enable", h.form(h.enableWebhook))
	h.mux.HandleFunc("POST /webhook-rotate", h.form(h.rotateWebhook))
	h.mux.HandleFunc("GET /webhook-delete", h.page(h.confirmDeleteWebhook))
	h.mux.HandleFunc("POST /webhook-delete", h.form(h.deleteWebhook))
}

// endpointRow is an endpoint as the pages show it, its secrets masked.
type endpointRow struct {
	ID, URL string
	// Events are the event types it receives; empty for every type.
	Events []string
	// Secret is the secret, masked; PreviousSecret the one a rotation replaced, masked,
	// while it still signs deliveries (until PreviousUntil).
	Secret, PreviousSecret string
	PreviousUntil          time.Time
	// Disabled is when it was disabled (zero while it is enabled), Reason why;
	// ByOperator is set when the operator disabled it: only the operator enables it
	// again, so the page offers no Enable.
	Disabled   time.Time
	Reason     string
	ByOperator bool
	Created    time.Time
}

// rowOf returns e as the pages show it, its secrets masked whatever e holds.
func rowOf(e webhook.Endpoint) endpointRow {
	row := endpointRow{ID: e.ID, URL: e.URL, Events: e.Types, Secret: webhook.MaskSecret(e.Secret),
		Disabled: e.Disabled, Reason: e.DisabledReason, Created: e.Created,
		ByOperator: !e.Disabled.IsZero() && e.DisabledBy == webhook.DisabledByOperator}
	if e.PreviousSecret != "" {
		row.PreviousSecret, row.PreviousUntil = webhook.MaskSecret(e.PreviousSecret), e.PreviousUntil
	}
	return row
}

// webhookForm is what the form that adds an endpoint was filled with, kept when the
// service refuses it so that the person can fix it.
type webhookForm struct {
	URL    string
	Events []choice
}

// newWebhookForm returns the form that adds an endpoint, filled from a post (nil for
// an empty form): a checkbox per event type.
func newWebhookForm(post url.Values) webhookForm {
	f := webhookForm{URL: post.Get("url")}
	for _, t := range webhook.Types() {
		f.Events = append(f.Events, choice{Value: t, Checked: slices.Contains(post["event"], t)})
	}
	return f
}

// webhooksData is the Webhooks page.
type webhooksData struct {
	// Refused says why the endpoints are not shown to this session ("" when they are).
	Refused string
	// Brand names the service.
	Brand     string
	Endpoints []endpointRow
	Form      webhookForm
	// Max is the most endpoints an account may have; Full is set when it has them.
	Max  int
	Full bool
}

// deliveryRow is one delivery of an endpoint's page.
type deliveryRow struct {
	Type, Message string
	// At is when the event happened.
	At time.Time
	// State is "pending", "delivered" or "failed"; Next, for a pending delivery, when
	// its next attempt is due.
	State    string
	Attempts int
	Next     time.Time
	// LastAt, LastStatus and LastError are the last attempt's (LastAt zero before the
	// first; LastStatus 0 when there was no answer).
	LastAt     time.Time
	LastStatus int
	LastError  string
}

// webhookData is an endpoint's page.
type webhookData struct {
	Endpoint   endpointRow
	Brand      string
	Deliveries []deliveryRow
	// Next is the link to the next (older) page of deliveries; empty on the last.
	// Paged is set on a page after the first.
	Next  string
	Paged bool
}

// webhookSecretData is the page that shows an endpoint's secret, once.
type webhookSecretData struct {
	Endpoint endpointRow
	Secret   string
	Rotated  bool
}

// webhookNotices are the notices of an endpoint's page after an action (?done=).
var webhookNotices = map[string]string{
	"test":    "A test event (endpoint.test) is queued for this endpoint alone: its delivery is listed below. Reload the page to follow it.",
	"resend":  "The delivery is pending again: the message is delivered again shortly, with the same webhook-id.",
	"disable": "The endpoint is disabled: it is given no new deliveries, and those pending fail without an attempt.",
	"enable":  "The endpoint is enabled: it is given the events that happen from now on, not those it missed.",
}

// hookActions returns the webhook actions of the visit's account holder: the session
// of the account's primary key, or of the whole account. A sub-key's session is
// refused (CodeForbidden), with the service's message.
func (h *Handler) hookActions(r *http.Request, v *visit) (mgmtapi.WebhookActions, error) {
	holder, err := h.mgr.AccountHolder(r.Context(), v.Caller, "webhook endpoints")
	if err != nil {
		return mgmtapi.WebhookActions{}, err
	}
	return mgmtapi.WebhookActions{Endpoints: h.webhooks, Owner: mgmtapi.WebhookOwner{
		Account: holder.Account.ID, Actor: holder.Actor, Spend: holder.Spend}}, nil
}

// webhooksPage serves the Webhooks page: the account's endpoints and the form that
// adds one.
func (h *Handler) webhooksPage(w http.ResponseWriter, r *http.Request, v *visit) {
	page := v.view("Webhooks", "webhooks")
	if r.URL.Query().Has("deleted") {
		page.Notice = "The endpoint is deleted, with its deliveries: it receives nothing more."
	}
	h.renderWebhooks(w, r, v, page, http.StatusOK, newWebhookForm(nil))
}

// renderWebhooks renders the Webhooks page with the form given; a sub-key's session
// is told that only the primary key manages webhooks.
func (h *Handler) renderWebhooks(w http.ResponseWriter, r *http.Request, v *visit, page *view, status int, form webhookForm) {
	d := &webhooksData{Brand: h.brand.Name, Form: form, Max: webhook.MaxEndpoints}
	page.Data = d
	a, err := h.hookActions(r, v)
	var es []webhook.Endpoint
	if err == nil {
		es, err = h.webhooks.List(r.Context(), a.Owner.Account)
	}
	if err != nil {
		err = mgmtapi.WebhookError(err)
		if tollgate.CodeOf(err) != tollgate.CodeForbidden {
			h.failed(w, r, v, err)
			return
		}
		status, d.Refused = statusOf(err)
		page.Error = ""
	}
	for _, e := range es {
		d.Endpoints = append(d.Endpoints, rowOf(e))
	}
	d.Full = len(es) >= webhook.MaxEndpoints
	h.render(w, r, status, "webhooks", page)
}

// personal reports whether err, an error of the service, is for the person to fix
// (shown on the page of the form), not a session that ended nor an outage.
func personal(err error) bool {
	status, _ := statusOf(err)
	return status < 500 && tollgate.CodeOf(err) != tollgate.CodeUnauthorized
}

// createWebhook adds an endpoint from the form and shows its secret, this once.
func (h *Handler) createWebhook(w http.ResponseWriter, r *http.Request, v *visit) {
	form := newWebhookForm(r.PostForm)
	a, err := h.hookActions(r, v)
	var e webhook.Endpoint
	if err == nil {
		e, err = a.Create(r.Context(), strings.TrimSpace(form.URL), r.PostForm["event"])
	}
	if err != nil {
		err = mgmtapi.WebhookError(err)
		if !personal(err) {
			h.failed(w, r, v, err)
			return
		}
		setRetryAfter(w, err)
		status, msg := statusOf(err)
		page := v.view("Webhooks", "webhooks")
		page.Error = "The endpoint was not added: " + msg
		h.renderWebhooks(w, r, v, page, status, form)
		return
	}
	page := v.view("Your new webhook endpoint", "webhooks")
	page.Data = webhookSecretData{Endpoint: rowOf(e), Secret: e.Secret}
	h.render(w, r, http.StatusCreated, "webhook-secret", page)
}

// webhookPage serves an endpoint's page (?id=): what it is, its actions, and a page
// of its deliveries, newest first (?cursor= for older ones).
func (h *Handler) webhookPage(w http.ResponseWriter, r *http.Request, v *visit) {
	q := r.URL.Query()
	page := v.view("Webhook endpoint", "webhooks")
	page.Notice = webhookNotices[q.Get("done")]
	h.renderWebhook(w, r, v, page, http.StatusOK, q.Get("id"), q.Get("cursor"))
}

// renderWebhook renders the page of the endpoint id with the page of deliveries that
// cursor names.
func (h *Handler) renderWebhook(w http.ResponseWriter, r *http.Request, v *visit, page *view, status int, id, cursor string) {
	e, ok := h.endpoint(w, r, v, id)
	if !ok {
		return
	}
	p, err := h.webhooks.Deliveries(r.Context(), e.Account, e.ID, webhook.Query{Limit: deliveriesPageSize, Cursor: cursor})
	if err != nil {
		if err = mgmtapi.WebhookError(err); tollgate.CodeOf(err) == tollgate.CodeInvalidInput && cursor != "" {
			// A cursor of deliveries pruned since, or one made up: the first page.
			seeOther(w, "webhook?"+url.Values{"id": {e.ID}}.Encode())
			return
		}
		h.failed(w, r, v, err)
		return
	}
	d := webhookData{Endpoint: rowOf(e), Brand: h.brand.Name, Paged: cursor != ""}
	for _, dl := range p.Deliveries {
		row := deliveryRow{Type: dl.Message.Type, Message: dl.Message.ID, At: dl.Message.At, State: dl.State.String(),
			Attempts: dl.Attempts, LastAt: dl.Last.At, LastStatus: dl.Last.Status, LastError: dl.Last.Error}
		if dl.State == webhook.Pending {
			row.Next = dl.Due
		}
		d.Deliveries = append(d.Deliveries, row)
	}
	if p.Next != "" {
		d.Next = "webhook?" + url.Values{"id": {e.ID}, "cursor": {p.Next}}.Encode()
	}
	page.Data = d
	h.render(w, r, status, "webhook", page)
}

// endpoint returns the endpoint id of the visit's account, its secrets masked, or
// answers: 404 for an id that names none, the refusal of a sub-key's session.
func (h *Handler) endpoint(w http.ResponseWriter, r *http.Request, v *visit, id string) (webhook.Endpoint, bool) {
	a, err := h.hookActions(r, v)
	var e webhook.Endpoint
	if err == nil {
		e, err = h.webhooks.Get(r.Context(), a.Owner.Account, id)
	}
	if err == nil {
		return e, true
	}
	switch err = mgmtapi.WebhookError(err); tollgate.CodeOf(err) {
	case tollgate.CodeNotFound, tollgate.CodeInvalidInput:
		h.noEndpoint(w, r, v)
	default:
		h.failed(w, r, v, err)
	}
	return webhook.Endpoint{}, false
}

// noEndpoint answers 404: the account has no such endpoint.
func (h *Handler) noEndpoint(w http.ResponseWriter, r *http.Request, v *visit) {
	page := v.view("Webhook endpoint not found", "webhooks")
	page.Message, page.Link, page.LinkText = "Your account has no webhook endpoint with this id.", "webhooks", "Go to the webhooks"
	h.render(w, r, http.StatusNotFound, "message", page)
}

// endpointAction runs act on the endpoint of the form's endpoint_id and sends the
// person to the endpoint's page, which says what was done; a refusal is shown on that
// page.
func (h *Handler) endpointAction(w http.ResponseWriter, r *http.Request, v *visit, done string,
	act func(ctx context.Context, a mgmtapi.WebhookActions, id string) error) {
	id := r.PostForm.Get("endpoint_id")
	a, err := h.hookActions(r, v)
	if err == nil {
		err = act(r.Context(), a, id)
	}
	if err != nil {
		h.actionRefused(w, r, v, id, err)
		return
	}
	seeOther(w, "webhook?"+url.Values{"id": {id}, "done": {done}}.Encode())
}

// actionRefused answers the refusal or failure err of an action on the endpoint id:
// a person's mistake (a disabled endpoint tested, a message it never had, the budget
// spent) on the endpoint's page with its status, or 404 when id names no endpoint of
// the account.
func (h *Handler) actionRefused(w http.ResponseWriter, r *http.Request, v *visit, id string, err error) {
	if err = mgmtapi.WebhookError(err); !personal(err) || tollgate.CodeOf(err) == tollgate.CodeForbidden {
		h.failed(w, r, v, err)
		return
	}
	setRetryAfter(w, err)
	status, msg := statusOf(err)
	page := v.view("Webhook endpoint", "webhooks")
	page.Error = msg
	h.renderWebhook(w, r, v, page, status, id, "")
}

// testWebhook sends the endpoint a test event.
func (h *Handler) testWebhook(w http.ResponseWriter, r *http.Request, v *visit) {
	h.endpointAction(w, r, v, "test", func(ctx context.Context, a mgmtapi.WebhookActions, id string) error {
		_, err := a.SendTest(ctx, id)
		return err
	})
}

// resendWebhook delivers the form's message_id again to the endpoint.
func (h *Handler) resendWebhook(w http.ResponseWriter, r *http.Request, v *visit) {
	h.endpointAction(w, r, v, "resend", func(ctx context.Context, a mgmtapi.WebhookActions, id string) error {
		_, err := a.Resend(ctx, id, r.PostForm.Get("message_id"))
		return err
	})
}

// disableWebhook disables the endpoint, as its holder asked.
func (h *Handler) disableWebhook(w http.ResponseWriter, r *http.Request, v *visit) {
	h.setDisabled(w, r, v, true, "disable")
}

// enableWebhook enables the endpoint again.
func (h *Handler) enableWebhook(w http.ResponseWriter, r *http.Request, v *visit) {
	h.setDisabled(w, r, v, false, "enable")
}

func (h *Handler) setDisabled(w http.ResponseWriter, r *http.Request, v *visit, disabled bool, done string) {
	h.endpointAction(w, r, v, done, func(ctx context.Context, a mgmtapi.WebhookActions, id string) error {
		_, err := a.Update(ctx, id, webhook.EndpointChange{Disabled: &disabled, Reason: mgmtapi.HolderDisabled})
		return err
	})
}

// rotateWebhook gives the endpoint a new secret and shows it, this once.
func (h *Handler) rotateWebhook(w http.ResponseWriter, r *http.Request, v *visit) {
	id := r.PostForm.Get("endpoint_id")
	a, err := h.hookActions(r, v)
	var e webhook.Endpoint
	if err == nil {
		e, err = a.RotateSecret(r.Context(), id)
	}
	if err != nil {
		h.actionRefused(w, r, v, id, err)
		return
	}
	page := v.view("The endpoint's new secret", "webhooks")
	page.Data = webhookSecretData{Endpoint: rowOf(e), Secret: e.Secret, Rotated: true}
	h.render(w, r, http.StatusOK, "webhook-secret", page)
}

// confirmDeleteWebhook serves the page that asks to confirm the deletion of the
// endpoint ?id= names.
func (h *Handler) confirmDeleteWebhook(w http.ResponseWriter, r *http.Request, v *visit) {
	e, ok := h.endpoint(w, r, v, r.URL.Query().Get("id"))
	if !ok {
		return
	}
	page := v.view("Delete the webhook endpoint", "webhooks")
	page.Data = rowOf(e)
	h.render(w, r, http.StatusOK, "webhook-delete", page)
}

// deleteWebhook deletes the endpoint of the form, and its deliveries.
func (h *Handler) deleteWebhook(w http.ResponseWriter, r *http.Request, v *visit) {
	id := r.PostForm.Get("endpoint_id")
	a, err := h.hookActions(r, v)
	if err == nil {
		err = a.Delete(r.Context(), id)
	}
	if err != nil {
		h.actionRefused(w, r, v, id, err)
		return
	}
	seeOther(w, "webhooks?deleted=1")
}
