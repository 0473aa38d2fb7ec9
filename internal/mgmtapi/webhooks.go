package mgmtapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/webhook"
)

// NoWebhooksError is the answer of the webhook routes of a service that delivers
// none: a 404 that says so.
func NoWebhooksError() error {
	return &tollgate.Error{Code: tollgate.CodeNotFound, Message: "this service delivers no webhooks"}
}

// Webhooks serves the routes of webhook endpoints that the account holders' API and the
// admin API share: an owner's endpoints (an account's, or the operator's), their
// secrets, test messages and deliveries. The doors differ in who the owner is. Its
// changes are [WebhookActions], whose rules the dashboard keeps too.
type Webhooks struct {
	// Endpoints manages the endpoints; nil answers every route 404 ([NoWebhooksError]).
	Endpoints *webhook.Endpoints
	Door      *edge.Door
	// Owner returns whose endpoints r manages, or the error to answer.
	Owner func(r *http.Request) (WebhookOwner, error)
	// Disabled is the reason recorded when the owner disables an endpoint.
	Disabled string
}

// A WebhookOwner is whose endpoints a request manages, and who manages them.
type WebhookOwner struct {
	// Account is the account whose endpoints they are; "" for the operator's.
	Account string
	// Operator is set when the operator manages them (the admin API), whether they
	// are the operator's own or an account's: the operator's disabling of an
	// account's endpoint sticks, and the operator enables an endpoint whoever disabled
	// it (webhook.EndpointChange.ByOperator). The account holders' API and the
	// dashboard leave it unset.
	Operator bool
	// Actor is who makes the changes.
	Actor event.Actor
	// Spend, if set, spends the owner's budget before a request that makes the service
	// store or send something, once the request is judged valid (see
	// accounts.Holder.Spend).
	Spend func(ctx context.Context) error
}

// Routes returns the routes under root ("/v1/account/webhooks"):
//
//	GET    root                                                the owner's endpoints
//	POST   root                                                {"url", "events"?}: 201, with the secret
//	GET    root/{endpoint_id}
//	PATCH  root/{endpoint_id}                                  {"url"?, "events"?, "disabled"?}
//	DELETE root/{endpoint_id}
//	POST   root/{endpoint_id}/rotate                           a new secret
//	POST   root/{endpoint_id}/test                             202: an endpoint.test message, for it only
//	GET    root/{endpoint_id}/deliveries                       ?limit=&cursor=
//	POST   root/{endpoint_id}/deliveries/{message_id}/resend   202
func (h *Webhooks) Routes(root string) []Route {
	one := root + "/{endpoint_id}"
	return []Route{
		{Method: http.MethodGet, Path: root, Serve: h.list},
		{Method: http.MethodPost, Path: root, Serve: h.create},
		{Method: http.MethodGet, Path: one, Serve: h.get},
		{Method: http.MethodPatch, Path: one, Serve: h.update},
		{Method: http.MethodDelete, Path: one, Serve: h.delete},
		{Method: http.MethodPost, Path: one + "/rotate", Serve: h.rotate},
		{Method: http.MethodPost, Path: one + "/test", Serve: h.test},
		{Method: http.MethodGet, Path: one + "/deliveries", Serve: h.deliveries},
		{Method: http.MethodPost, Path: one + "/deliveries/{message_id}/resend", Serve: h.resend},
	}
}

// ready answers a request to a service that delivers no webhooks, and returns false.
func (h *Webhooks) ready(w http.ResponseWriter, r *http.Request) bool {
	if h.Endpoints == nil {
		h.Door.WriteError(w, r, NoWebhooksError(), nil)
		return false
	}
	return true
}

// owner returns whose endpoints r manages, or answers the request and returns false.
func (h *Webhooks) owner(w http.ResponseWriter, r *http.Request) (WebhookOwner, bool) {
	o, err := h.Owner(r)
	if err != nil {
		h.Door.WriteError(w, r, err, nil)
		return WebhookOwner{}, false
	}
	return o, true
}

// begin returns the owner of r, or answers a request to a service that delivers no
// webhooks, or one whose owner cannot be told, and returns false.
func (h *Webhooks) begin(w http.ResponseWriter, r *http.Request) (WebhookOwner, bool) {
	if !h.ready(w, r) {
		return WebhookOwner{}, false
	}
	return h.owner(w, r)
}

// actions returns the actions of o's endpoints.
func (h *Webhooks) actions(o WebhookOwner) WebhookActions {
	return WebhookActions{Endpoints: h.Endpoints, Owner: o}
}

// answer writes data with status, or err.
func (h *Webhooks) answer(w http.ResponseWriter, r *http.Request, status int, data any, err error) {
	if err != nil {
		h.Door.WriteError(w, r, WebhookError(err), nil)
		return
	}
	h.Door.WriteJSON(w, r, status, data)
}

func (h *Webhooks) list(w http.ResponseWriter, r *http.Request) {
	o, ok := h.begin(w, r)
	if !ok || !NoParams(h.Door, w, r) {
		return
	}
	es, err := h.Endpoints.List(r.Context(), o.Account)
	h.answer(w, r, http.StatusOK, map[string]any{"endpoints": EndpointsJSON(es)}, err)
}

func (h *Webhooks) create(w http.ResponseWriter, r *http.Request) {
	if !h.ready(w, r) {
		return
	}
	var body struct {
		URL    *string  `json:"url"`
		Events []string `json:"events"`
	}
	if err := Decode(w, r, &body); err != nil {
		h.Door.WriteError(w, r, err, nil)
		return
	}
	if body.URL == nil {
		h.Door.WriteError(w, r, Invalid("url is required: give the absolute http or https URL to deliver to"), nil)
		return
	}
	if err := h.Endpoints.Check(webhook.EndpointChange{URL: body.URL, Events: &body.Events}); err != nil {
		h.Door.WriteError(w, r, WebhookError(err), nil)
		return
	}
	o, ok := h.owner(w, r)
	if !ok {
		return
	}
	e, err := h.actions(o).Create(r.Context(), *body.URL, body.Events)
	h.answer(w, r, http.StatusCreated, EndpointJSON(e), err)
}

func (h *Webhooks) get(w http.ResponseWriter, r *http.Request) {
	o, ok := h.begin(w, r)
	if !ok {
		return
	}
	e, err := h.Endpoints.Get(r.Context(), o.Account, r.PathValue("endpoint_id"))
	h.answer(w, r, http.StatusOK, EndpointJSON(e), err)
}

func (h *Webhooks) update(w http.ResponseWriter, r *http.Request) {
	if !h.ready(w, r) {
		return
	}
	var body struct {
		URL      *string   `json:"url"`
		Events   *[]string `json:"events"`
		Disabled *bool     `json:"disabled"`
	}
	if err := Decode(w, r, &body); err != nil {
		h.Door.WriteError(w, r, err, nil)
		return
	}
	if body.URL == nil && body.Events == nil && body.Disabled == nil {
		h.Door.WriteError(w, r, Invalid("give url, events, disabled or several: the body changes nothing"), nil)
		return
	}
	c := webhook.EndpointChange{URL: body.URL, Events: body.Events, Disabled: body.Disabled, Reason: h.Disabled}
	if err := h.Endpoints.Check(c); err != nil {
		h.Door.WriteError(w, r, WebhookError(err), nil)
		return
	}
	o, ok := h.owner(w, r)
	if !ok {
		return
	}
	e, err := h.actions(o).Update(r.Context(), r.PathValue("endpoint_id"), c)
	h.answer(w, r, http.StatusOK, EndpointJSON(e), err)
}

func (h *Webhooks) delete(w http.ResponseWriter, r *http.Request) {
	o, ok := h.begin(w, r)
	if !ok {
		return
	}
	id := r.PathValue("endpoint_id")
	err := h.actions(o).Delete(r.Context(), id)
	h.answer(w, r, http.StatusOK, map[string]any{"id": id, "deleted": true}, err)
}

func (h *Webhooks) rotate(w http.ResponseWriter, r *http.Request) {
	o, ok := h.begin(w, r)
	if !ok {
		return
	}
	e, err := h.actions(o).RotateSecret(r.Context(), r.PathValue("endpoint_id"))
	h.answer(w, r, http.StatusOK, EndpointJSON(e), err)
}

func (h *Webhooks) test(w http.ResponseWriter, r *http.Request) {
	o, ok := h.begin(w, r)
	if !ok {
		return
	}
	d, err := h.actions(o).SendTest(r.Context(), r.PathValue("endpoint_id"))
	h.answer(w, r, http.StatusAccepted, DeliveryJSON(d), err)
}

func (h *Webhooks) deliveries(w http.ResponseWriter, r *http.Request) {
	o, ok := h.begin(w, r)
	if !ok {
		return
	}
	q, problem := DeliveryQuery(r.URL.Query())
	if problem != "" {
		h.Door.WriteError(w, r, Invalid(problem), nil)
		return
	}
	p, err := h.Endpoints.Deliveries(r.Context(), o.Account, r.PathValue("endpoint_id"), q)
	if err != nil {
		h.Door.WriteError(w, r, WebhookError(err), nil)
		return
	}
	out := make([]map[string]any, len(p.Deliveries))
	for i, d := range p.Deliveries {
		out[i] = DeliveryJSON(d)
	}
	h.Door.WriteJSON(w, r, http.StatusOK, map[string]any{"deliveries": out, "next": Nullable(p.Next)})
}

func (h *Webhooks) resend(w http.ResponseWriter, r *http.Request) {
	o, ok := h.begin(w, r)
	if !ok {
		return
	}
	d, err := h.actions(o).Resend(r.Context(), r.PathValue("endpoint_id"), r.PathValue("message_id"))
	h.answer(w, r, http.StatusAccepted, DeliveryJSON(d), err)
}

// NoParams answers a request to a route that takes no query parameter but was given
// one, and returns false.
func NoParams(door *edge.Door, w http.ResponseWriter, r *http.Request) bool {
	for name := range r.URL.Query() {
		door.WriteError(w, r, Invalid("unknown parameter "+quote(name)+": the route takes none"), nil)
		return false
	}
	return true
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

// DeliveryQuery reads the parameters of a listing of deliveries (limit, cursor). On
// failure it returns a message that names the parameter.
func DeliveryQuery(params url.Values) (webhook.Query, string) {
	var q webhook.Query
	var problem string
	q.Limit, q.Cursor, problem = pageParams(params, "deliveries", webhook.MaxLimit)
	return q, problem
}

// WebhookError returns the refusal that answers err, an error of webhook.Endpoints: a
// [*tollgate.Error] with the code of its kind and its message. Another error is
// returned as it is.
func WebhookError(err error) error {
	var we *webhook.Error
	if !errors.As(err, &we) {
		return err
	}
	code := tollgate.CodeInternal
	switch {
	case errors.Is(we.Kind, store.ErrInvalid):
		code = tollgate.CodeInvalidInput
	case errors.Is(we.Kind, store.ErrNotFound):
		code = tollgate.CodeNotFound
	case errors.Is(we.Kind, store.ErrConflict):
		code = tollgate.CodeConflict
	case errors.Is(we.Kind, store.ErrUnavailable):
		code = tollgate.CodeUnavailable
	}
	return &tollgate.Error{Code: code, Message: we.Message, Err: err}
}

// EndpointJSON is the JSON form of a webhook endpoint: its secret as the endpoint has
// it (in full only where it is created or rotated; masked elsewhere), the replaced
// one's end while it still signs, and when a delivery to it last succeeded.
func EndpointJSON(e webhook.Endpoint) map[string]any {
	m := map[string]any{
		"id": e.ID, "account": Nullable(e.Account), "url": e.URL, "events": orEmpty(e.Types),
		"secret": e.Secret, "previous_secret": Nullable(e.PreviousSecret), "previous_secret_until": nil,
		"disabled": !e.Disabled.IsZero(), "disabled_at": nullTime(e.Disabled), "disabled_reason": Nullable(e.DisabledReason),
		"disabled_by": Nullable(e.DisabledBy), "last_delivered_at": nullTime(e.LastDelivered), "created_at": e.Created.UTC(),
	}
	if e.PreviousSecret != "" {
		m["previous_secret_until"] = e.PreviousUntil.UTC()
	}
	return m
}

// EndpointsJSON is the JSON form of a list of endpoints.
func EndpointsJSON(es []webhook.Endpoint) []map[string]any {
	out := make([]map[string]any, len(es))
	for i, e := range es {
		out[i] = EndpointJSON(e)
	}
	return out
}

// DeliveryJSON is the JSON form of a delivery: the message it delivers (its id, type,
// when its event happened, and the payload posted), where it stands, and its last
// attempt.
func DeliveryJSON(d webhook.Delivery) map[string]any {
	var next, last, payload any
	if d.State == webhook.Pending {
		next = d.Due.UTC()
	}
	if !d.Last.At.IsZero() {
		var status any
		if d.Last.Status != 0 {
			status = d.Last.Status
		}
		last = map[string]any{"at": d.Last.At.UTC(), "status": status, "error": Nullable(d.Last.Error)}
	}
	if json.Valid(d.Message.Body) {
		payload = json.RawMessage(d.Message.Body)
	}
	return map[string]any{
		"endpoint": d.Endpoint, "message_id": d.Message.ID, "type": d.Message.Type, "occurred_at": d.Message.At.UTC(),
		"state": d.State.String(), "attempts": d.Attempts, "next_attempt_at": next, "last_attempt": last, "payload": payload,
	}
}

// WebhookEndpointSchema is the JSON Schema of [EndpointJSON]'s form, for the OpenAPI
// documents; secret says what its secret is in the answer described.
func WebhookEndpointSchema(secret string) map[string]any {
	str := func(description string) map[string]any {
		return map[string]any{"type": "string", "description": description}
	}
	nullable := func(typ, description string) map[string]any {
		return map[string]any{"type": []string{typ, "null"}, "description": description}
	}
	at := func(s map[string]any) map[string]any { s["format"] = "date-time"; return s }
	props := map[string]any{
		"id":      str("The endpoint's id: ep_ and 26 characters."),
		"account": nullable("string", "The account whose events the endpoint receives; null for an operator's endpoint, which receives every account's."),
		"url":     map[string]any{"type": "string", "format": "uri", "maxLength": webhook.MaxURLLength, "description": "Where deliveries are posted."},
		"events": map[string]any{"type": "array", "items": map[string]any{"type": "string", "enum": webhook.Types()}, "maxItems": webhook.MaxTypes,
			"description": "The event types the endpoint receives; empty for every type."},
		"secret": str(secret),
		"previous_secret": nullable("string", "The secret the last rotation replaced, masked, while it still signs deliveries "+
			"(each delivery then carries a signature by each secret); null otherwise."),
		"previous_secret_until": at(nullable("string", "When previous_secret stops signing; null when there is none.")),
		"disabled":              map[string]any{"type": "boolean", "description": "A disabled endpoint is given no new deliveries."},
		"disabled_at":           at(nullable("string", "When it was disabled; null while it is enabled.")),
		"disabled_reason": nullable("string", "Why it was disabled: by its owner, by the operator, or by the service after its deliveries "+
			"failed for the whole retry schedule; null while it is enabled."),
		"disabled_by": map[string]any{"type": []string{"string", "null"},
			"enum": []any{webhook.DisabledByAccount, webhook.DisabledByOperator, webhook.DisabledByDelivery, nil},
			"description": "Who disabled it: account (its holder), operator (the operator: only the operator enables it again; the holder's enabling is a 409), " +
				"or delivery (the service, after it answered 410 Gone or its deliveries failed for the whole retry schedule). " +
				"null while it is enabled, and for an endpoint disabled before the service kept who did."},
		"last_delivered_at": at(nullable("string", "When an attempt to deliver to it last succeeded (answered with a 2xx status); "+
			"null before the first.")),
		"created_at": at(str("When it was created.")),
	}
	required := []string{"id", "account", "url", "events", "secret", "previous_secret", "previous_secret_until", "disabled",
		"disabled_at", "disabled_reason", "disabled_by", "last_delivered_at", "created_at"}
	return map[string]any{"type": "object", "required": required, "properties": props, "description": "A webhook endpoint."}
}

// WebhookDeliverySchema is the JSON Schema of [DeliveryJSON]'s form.
func WebhookDeliverySchema() map[string]any {
	at := func(description string, null bool) map[string]any {
		s := map[string]any{"type": "string", "format": "date-time", "description": description}
		if null {
			s["type"] = []string{"string", "null"}
		}
		return s
	}
	props := map[string]any{
		"endpoint":    map[string]any{"type": "string", "description": "The endpoint's id."},
		"message_id":  map[string]any{"type": "string", "description": "The message's id, the webhook-id header of every attempt: msg_ and 26 characters."},
		"type":        map[string]any{"type": "string", "description": "The event type, or endpoint.test for a test message."},
		"occurred_at": at("When the event happened.", false),
		"state": map[string]any{"type": "string", "enum": []string{webhook.Pending.String(), webhook.Delivered.String(), webhook.Failed.String()},
			"description": "pending: an attempt is due at next_attempt_at; delivered: answered with a 2xx status; failed: given up, " +
				"after the retry schedule's last attempt failed, on a 410 Gone answer, or, without a further attempt, because the endpoint " +
				"was disabled (its disabled_reason says why)."},
		"attempts": map[string]any{"type": "integer", "minimum": 0, "description": "The attempts made. A delivery held back " +
			"while the endpoint's host does not answer, or given up because the endpoint was disabled, counts no attempt for it."},
		"next_attempt_at": at("When the next attempt is due, for a pending delivery; null otherwise.", true),
		"last_attempt": map[string]any{"type": []string{"object", "null"}, "description": "The last attempt's outcome; null before the first. " +
			"A delivery held back or given up without an attempt keeps the last one made.",
			"required": []string{"at", "status", "error"},
			"properties": map[string]any{
				"at":     at("When it was made.", false),
				"status": map[string]any{"type": []string{"integer", "null"}, "description": "The HTTP status of the answer; null when there was none."},
				"error":  map[string]any{"type": []string{"string", "null"}, "description": "Why it failed; null when it succeeded."},
			}},
		"payload": map[string]any{"type": []string{"object", "null"}, "description": "The body posted: {\"type\", \"timestamp\", \"data\"}.",
			"properties": map[string]any{
				"type":      map[string]any{"type": "string"},
				"timestamp": map[string]any{"type": "string", "format": "date-time"},
				"data":      map[string]any{"type": "object"},
			}},
	}
	required := []string{"endpoint", "message_id", "type", "occurred_at", "state", "attempts", "next_attempt_at", "last_attempt", "payload"}
	return map[string]any{"type": "object", "required": required, "properties": props, "description": "A message on its way to an endpoint."}
}
