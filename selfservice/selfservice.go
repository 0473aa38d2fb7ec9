// Package selfservice is the self-service API of account holders: their account, plan and
// balance, their keys, their webhook endpoints and their audit log, managed with their
// own credentials. It
// serves JSON in the envelope of the REST front door:
//
//	{"status": "ok", "error": null, "data": ...}
//	{"status": "error", "error": "what went wrong and what to do", "data": null}
//
// Routes, as the host mounts the handler (both "/v1/account" and "/v1/account/"):
//
//	GET    /v1/account                        the account, its plan and balance, the first page of the keys the caller may see
//	GET    /v1/account/keys                   a page of the keys the caller may see (never their values): ?limit=&cursor=
//	POST   /v1/account/keys                   create a sub-key: {"name", "apis"?, "channels"?, "allowed_ips"?, "expires_at"?}
//	PATCH  /v1/account/keys/{key_id}          rename a sub-key or narrow it: {"name"?, "restrictions"?: {"apis"?, ...}}
//	DELETE /v1/account/keys/{key_id}          revoke a sub-key (as POST .../revoke)
//	POST   /v1/account/keys/{key_id}/rotate   give a key a new value
//	POST   /v1/account/keys/{key_id}/revoke   revoke a sub-key
//	GET    /v1/account/audit                  the account's audit log (primary key only): ?limit=&cursor=&from=&to=
//	GET    /v1/account/usage                  usage over time: ?from=&to=&interval=&by=&api=&key=&channel=
//
// and the account's webhook endpoints (with [Options.Webhooks]; primary key only):
//
//	GET    /v1/account/webhooks                                               the endpoints, their secrets masked
//	POST   /v1/account/webhooks                                               create one: {"url", "events"?}; 201, its secret in data.secret, shown once
//	GET    /v1/account/webhooks/{endpoint_id}                                 one endpoint
//	PATCH  /v1/account/webhooks/{endpoint_id}                                 {"url"?, "events"?, "disabled"?}
//	DELETE /v1/account/webhooks/{endpoint_id}                                 delete it and its deliveries
//	POST   /v1/account/webhooks/{endpoint_id}/rotate                          a new secret, in data.secret, shown once
//	POST   /v1/account/webhooks/{endpoint_id}/test                            202: an endpoint.test message, for that endpoint only
//	GET    /v1/account/webhooks/{endpoint_id}/deliveries                      its deliveries, newest first: ?limit=&cursor=
//	POST   /v1/account/webhooks/{endpoint_id}/deliveries/{message_id}/resend  202: deliver the message again
//
// GET /v1/account/usage takes the query parameters and answers the body of the
// time-series form of GET /v1/analytics: one series per group, a point per bucket with
// calls, credits, errors by code and latency percentiles. The primary key (or a session
// acting as it) sees the whole account; a sub-key, or a session it started, only its own
// calls, and naming another key is a 403 ([accounts.Manager.OwnUsage]). A bad
// parameter is a 400 whose message begins with its name; a service that records no
// usage answers 404.
//
// Requests authenticate as calls do: the x-api-key header, Authorization: Bearer with
// the key, or an x-jwt session token. They are not API calls: never billed, no
// rate-limit event. The rules (who may manage which key, narrowing only, the primary
// key rotated but never revoked, another account's key answered 404, every change in
// the audit log with the acting key and the client's address) are the service's, in
// [accounts.Manager.CreateOwnKey] and its siblings; this package only translates HTTP.
//
// Listings of keys are paged, oldest key first: GET /v1/account/keys answers
// {"keys": [...], "next": cursor or null} with at most limit keys (1 to 200, default
// 50); pass next as cursor for the page after. GET /v1/account answers the first page,
// with keys_next. A cursor whose key was deleted since (a revoked key is deleted after
// the service's retention) is a 400: list from the first page.
//
// A webhook endpoint receives the account's events (package webhook has their types
// and the signature of every delivery): the types in events (none: every type), posted
// to url, an absolute http or https URL of at most 2048 bytes, without a user name,
// password or fragment, whose host is public (not localhost, nor a private, loopback or
// link-local address, unless the host allows them). Only the account's primary key, or
// a session acting as it, manages them: a sub-key is answered 403 saying so. An
// endpoint of another account is answered 404. The secret that signs the deliveries
// appears in full in data.secret twice only: when the endpoint is created and when it
// is rotated; everywhere else it is masked ("whsec_" and four characters). The secret a
// rotation replaced still signs beside the new one for a grace (24 hours by default:
// data.previous_secret_until). An account has at most 16 endpoints: one more is a 409
// saying to delete one. A disabled endpoint is given no deliveries, and is refused a
// test or a resend (409) until it is enabled ("disabled": false). An endpoint the
// operator disabled (data.disabled_by "operator", with the operator's reason) stays
// disabled: enabling it is refused (409, conflict) until the operator enables it; the
// holder may still change, rotate or delete it. Every change of an
// endpoint is in the audit log, never a secret. Creating, changing, rotating, testing
// and resending spend the self-service budget as key changes do; deleting and disabling
// never do. A service that delivers no webhooks answers these routes 404.
//
// Creating, rotating and changing a key spend the account's self-service budget (see
// [accounts.Options.SelfServiceLimit]); beyond it they are answered 429 with
// Retry-After and a message that says when to retry. An account holds at most
// [accounts.Options.MaxOwnKeys] keys for self-service to create one, counting the keys
// revoked within the service's retention: beyond it, 409.
//
// A new or rotated key's value appears once, in data.value, and never again: it is not
// stored. Listings show each key's id, name, primary flag, restrictions, created_at,
// rotated_at, revoked and revoked_at, and last_used: when the key was last used, null
// if never, or if the service records no usage (or its usage store cannot answer: the
// keys are listed all the same); never a value or a hash. Refusals carry the
// status of their cause and say why: 400 naming the field, 401, 403 with what the
// caller may not do, 404, 409, 413 for a body over 64 KiB, 415, 429.
package selfservice

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/internal/mgmtapi"
	"github.com/tollgate-dev/tollgate/internal/usagehttp"
	"github.com/tollgate-dev/tollgate/webhook"
)

// Options configures the handler. The zero value is the default.
type Options struct {
	// Edge holds the HTTP settings every door shares; the API reads the client's
	// address through its trusted proxies, for IP allow-lists and the audit log's
	// addresses. The default is [edge.Default]: the address is the TCP peer. The API
	// answers no cross-origin call, whatever the edge's origins.
	Edge *edge.Edge
	// Webhooks manages the webhook endpoints of the accounts (webhook.NewEndpoints, on
	// the service's events); the routes under /v1/account/webhooks serve it. Nil: the
	// service delivers no webhooks, and those routes answer 404.
	Webhooks *webhook.Endpoints
}

// Handler serves the self-service API. Create it with [NewHandler].
type Handler struct {
	mgr    *accounts.Manager
	mux    *http.ServeMux
	door   *edge.Door
	routes []mgmtapi.Route
}

// NewHandler returns the self-service API of the accounts that mgr manages. opts may
// be nil. Mount it at both "/v1/account" and "/v1/account/".
func NewHandler(mgr *accounts.Manager, opts *Options) (*Handler, error) {
	if mgr == nil {
		return nil, errors.New("selfservice: NewHandler needs an accounts.Manager")
	}
	if opts == nil {
		opts = &Options{}
	}
	e := opts.Edge
	if e == nil {
		e = edge.Default()
	}
	h := &Handler{mgr: mgr, mux: http.NewServeMux(), door: e.Door(edge.DoorSpec{})}
	hooks := &mgmtapi.Webhooks{Endpoints: opts.Webhooks, Door: h.door, Owner: h.webhookOwner, Disabled: mgmtapi.HolderDisabled}
	h.routes = append([]mgmtapi.Route{
		{Method: http.MethodGet, Path: "/v1/account", Serve: h.getAccount},
		{Method: http.MethodGet, Path: "/v1/account/keys", Serve: h.listKeys},
		{Method: http.MethodPost, Path: "/v1/account/keys", Serve: h.createKey},
		{Method: http.MethodPatch, Path: "/v1/account/keys/{key_id}", Serve: h.updateKey},
		{Method: http.MethodDelete, Path: "/v1/account/keys/{key_id}", Serve: h.revokeKey},
		{Method: http.MethodPost, Path: "/v1/account/keys/{key_id}/rotate", Serve: h.rotateKey},
		{Method: http.MethodPost, Path: "/v1/account/keys/{key_id}/revoke", Serve: h.revokeKey},
		{Method: http.MethodGet, Path: "/v1/account/audit", Serve: h.auditLog},
		{Method: http.MethodGet, Path: "/v1/account/usage", Serve: h.usage},
	}, hooks.Routes("/v1/account/webhooks")...)
	mgmtapi.Mount(h.mux, "/v1/account/", "account", h.routes)
	return h, nil
}

// webhookOwner authenticates the caller of a webhook route: the account's holder (its
// primary key, or a session acting as it), whose account's endpoints it manages.
func (h *Handler) webhookOwner(r *http.Request) (mgmtapi.WebhookOwner, error) {
	holder, err := h.mgr.AccountHolder(r.Context(), h.caller(r), "webhook endpoints")
	if err != nil {
		return mgmtapi.WebhookOwner{}, err
	}
	return mgmtapi.WebhookOwner{Account: holder.Account.ID, Actor: holder.Actor, Spend: holder.Spend}, nil
}

// ServeHTTP performs the edge check (a well-formed credential, else the bare 403 every
// front door answers) and routes the request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, ok := h.door.Caller(w, r, 0)
	if !ok {
		return
	}
	h.mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
}

// callerKey is the context key of the caller that ServeHTTP read.
type callerKey struct{}

// caller is how the request arrived, as ServeHTTP read it.
func (h *Handler) caller(r *http.Request) tollgate.Caller {
	c, _ := r.Context().Value(callerKey{}).(tollgate.Caller)
	return c
}

func (h *Handler) getAccount(w http.ResponseWriter, r *http.Request) {
	info, err := h.mgr.OwnAccount(r.Context(), h.caller(r))
	if err != nil {
		h.door.WriteError(w, r, err, nil)
		return
	}
	plan := map[string]any{
		"name": info.Plan.Name, "credits": info.Plan.Credits,
		"rate_per_minute": info.Plan.RatePerMinute, "concurrency": info.Plan.Concurrency,
	}
	var caller any
	if info.Caller.ID != "" {
		caller = info.Caller.ID
	}
	h.door.WriteJSON(w, r, http.StatusOK, map[string]any{
		"account": mgmtapi.AccountJSON(info.Account), "plan": plan, "balance": mgmtapi.BalanceJSON(info.Balance),
		"keys": keysJSON(info.Keys, info.LastUsed), "keys_next": mgmtapi.Nullable(info.KeysNext), "key_id": caller,
	})
}

func (h *Handler) listKeys(w http.ResponseWriter, r *http.Request) {
	q, problem := mgmtapi.KeyQuery(r.URL.Query())
	if problem != "" {
		h.door.WriteError(w, r, mgmtapi.Invalid(problem), nil)
		return
	}
	page, err := h.mgr.OwnKeys(r.Context(), h.caller(r), q)
	if err != nil {
		h.door.WriteError(w, r, err, nil)
		return
	}
	h.door.WriteJSON(w, r, http.StatusOK, map[string]any{"keys": keysJSON(page.Keys, page.LastUsed), "next": mgmtapi.Nullable(page.Next)})
}

// keysJSON is the JSON form of a list of keys, each with its last_used time (null if
// unknown).
func keysJSON(keys []auth.Key, lastUsed map[string]time.Time) []map[string]any {
	out := mgmtapi.KeysJSON(keys)
	for i, k := range keys {
		var last *time.Time
		if t, ok := lastUsed[k.ID]; ok {
			last = &t
		}
		out[i]["last_used"] = last
	}
	return out
}

func (h *Handler) createKey(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Name string `json:"name"`
		mgmtapi.RestrictionFields
	}
	if err := mgmtapi.Decode(w, r, &body); err != nil {
		h.door.WriteError(w, r, err, nil)
		return
	}
	rs, err := body.Build()
	if err != nil {
		h.door.WriteError(w, r, err, nil)
		return
	}
	key, value, err := h.mgr.CreateOwnKey(r.Context(), h.caller(r), accounts.NewKey{Name: body.Name, Restrictions: rs})
	if err != nil {
		h.door.WriteError(w, r, err, nil)
		return
	}
	h.door.WriteJSON(w, r, http.StatusCreated, map[string]any{"key": mgmtapi.KeyJSON(key), "value": value})
}

func (h *Handler) updateKey(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Name         *string                    `json:"name"`
		Restrictions *mgmtapi.RestrictionFields `json:"restrictions"`
	}
	if err := mgmtapi.Decode(w, r, &body); err != nil {
		h.door.WriteError(w, r, err, nil)
		return
	}
	if body.Name == nil && body.Restrictions == nil {
		h.door.WriteError(w, r, mgmtapi.Invalid("give name, restrictions or both: the body changes nothing"), nil)
		return
	}
	change := accounts.KeyChange{Name: body.Name}
	if body.Restrictions != nil {
		rs, err := body.Restrictions.Build()
		if err != nil {
			h.door.WriteError(w, r, err, nil)
			return
		}
		change.Restrictions = &rs
	}
	key, err := h.mgr.UpdateOwnKey(r.Context(), h.caller(r), r.PathValue("key_id"), change)
	if err != nil {
		h.door.WriteError(w, r, err, nil)
		return
	}
	h.door.WriteJSON(w, r, http.StatusOK, map[string]any{"key": mgmtapi.KeyJSON(key)})
}

func (h *Handler) rotateKey(w http.ResponseWriter, r *http.Request) {
	key, value, err := h.mgr.RotateOwnKey(r.Context(), h.caller(r), r.PathValue("key_id"))
	if err != nil {
		h.door.WriteError(w, r, err, nil)
		return
	}
	h.door.WriteJSON(w, r, http.StatusOK, map[string]any{"key": mgmtapi.KeyJSON(key), "value": value})
}

func (h *Handler) revokeKey(w http.ResponseWriter, r *http.Request) {
	key, err := h.mgr.RevokeOwnKey(r.Context(), h.caller(r), r.PathValue("key_id"))
	if err != nil {
		h.door.WriteError(w, r, err, nil)
		return
	}
	h.door.WriteJSON(w, r, http.StatusOK, map[string]any{"key": mgmtapi.KeyJSON(key)})
}

func (h *Handler) auditLog(w http.ResponseWriter, r *http.Request) {
	q, problem := mgmtapi.AuditQuery(r.URL.Query())
	if problem != "" {
		h.door.WriteError(w, r, mgmtapi.Invalid(problem), nil)
		return
	}
	page, err := h.mgr.OwnAuditLog(r.Context(), h.caller(r), q)
	if err != nil {
		h.door.WriteError(w, r, err, nil)
		return
	}
	h.door.WriteJSON(w, r, http.StatusOK, mgmtapi.AuditPageJSON(page))
}

func (h *Handler) usage(w http.ResponseWriter, r *http.Request) {
	q, err := usagehttp.Query(r.URL.Query(), h.mgr.Service().Now())
	if err != nil {
		h.door.WriteError(w, r, err, nil)
		return
	}
	res, err := h.mgr.OwnUsage(r.Context(), h.caller(r), q)
	if err != nil {
		h.door.WriteError(w, r, err, nil)
		return
	}
	h.door.WriteJSON(w, r, http.StatusOK, usagehttp.NewBody(res))
}
