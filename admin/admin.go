// Package admin is an optional http.Handler for operators: create accounts and keys,
// read an account with its balance and keys, change an account's plan, rotate and
// revoke keys, grant or take away credits, and manage webhook endpoints. It is
// protected by a bearer admin token, compared in constant time.
//
// Routes, relative to where the host mounts the handler (JSON in, the envelope out):
//
//	GET  /admin/v1/openapi.json                    the OpenAPI 3.1 document of these routes (no token)
//	GET  /admin/v1/plans                           the plans an account may be on
//	POST /admin/v1/accounts                        {"id"?, "plan", "credits"?, "billing_anchor"?, "apis"?, "channels"?, "allowed_ips"?, "expires_at"?}
//	GET  /admin/v1/accounts/{account_id}
//	PATCH /admin/v1/accounts/{account_id}          {"plan", "effective"?}
//	GET  /admin/v1/accounts/{account_id}/keys      ?limit=&cursor=
//	POST /admin/v1/accounts/{account_id}/keys      {"name", "apis"?, "channels"?, "allowed_ips"?, "expires_at"?}
//	POST /admin/v1/keys/{key_id}/rotate
//	POST /admin/v1/keys/{key_id}/revoke
//	POST /admin/v1/accounts/{account_id}/credits   {"amount", "reason", "expires_at"?}
//	GET  /admin/v1/accounts/{account_id}/audit     ?limit=&cursor=&from=&to=
//
// and the lifecycle of accounts:
//
//	GET    /admin/v1/accounts                           ?limit=&cursor=&plan=&state=&created_from=&created_before=&id_prefix=
//	POST   /admin/v1/accounts/{account_id}/suspend      {"reason"}
//	POST   /admin/v1/accounts/{account_id}/reactivate   {"reason"?}
//	POST   /admin/v1/accounts/{account_id}/close        {"reason"}
//	DELETE /admin/v1/accounts/{account_id}
//
// and the usage of every account:
//
//	GET    /admin/v1/usage                           ?from=&to=&group_by=&order=&account=&api=&channel=&outcome=&limit=&cursor=
//
// and webhook endpoints (with [Options.Webhooks]): the operator's own, which receive
// the events of every account, and those of an account:
//
//	GET    /admin/v1/webhooks
//	POST   /admin/v1/webhooks                                                 {"url", "events"?}
//	GET    /admin/v1/webhooks/{endpoint_id}
//	PATCH  /admin/v1/webhooks/{endpoint_id}                                   {"url"?, "events"?, "disabled"?}
//	DELETE /admin/v1/webhooks/{endpoint_id}
//	POST   /admin/v1/webhooks/{endpoint_id}/rotate
//	POST   /admin/v1/webhooks/{endpoint_id}/test
//	GET    /admin/v1/webhooks/{endpoint_id}/deliveries                        ?limit=&cursor=
//	POST   /admin/v1/webhooks/{endpoint_id}/deliveries/{message_id}/resend
//	GET    /admin/v1/accounts/{account_id}/webhooks
//	PATCH  /admin/v1/accounts/{account_id}/webhooks/{endpoint_id}             {"disabled", "reason"?}
//	DELETE /admin/v1/accounts/{account_id}/webhooks/{endpoint_id}
//
// The listing answers {"accounts": [...], "next": cursor or null}, in the order of the
// accounts' ids: limit 1 to 200 (default 50), cursor the "next" of the page before,
// plan and state (active, suspended or closed) select the accounts with them,
// created_from and created_before (RFC 3339) those created within [from, before),
// id_prefix those whose id begins with it. A page may hold fewer accounts than the
// limit, even none, while next is set: the store bounds what one page examines, and a
// listing goes on until next is null. Every account in an answer carries its "state"
// and "state_changed_at" (null if it never changed), and a closed one "deletable_at".
// On a Redis key store upgraded from a release before this listing, the accounts it
// held are listed once redis.Store.IndexAccounts has run (see package store/redis).
//
// Suspend refuses every call of the account's keys with 403 account_suspended until
// reactivate, on every instance from the next call; the account holder may still sign
// in and read the account, its keys and usage. Close revokes every key of the account
// for good (they answer as revoked keys do); calls in flight settle normally, and
// reservations left open are voided at their expiry. Suspend and close need a reason,
// recorded in the audit log (reactivate takes one optionally); each answers the account
// as it is afterwards, and a change to the state it is in already changes nothing. A
// closed account cannot be suspended or reactivated (409). DELETE deletes a closed
// account and its keys once accounts.Options.ClosedRetention (90 days by default) has
// passed since its closure; before, or for an account that is not closed, it is a 409
// saying when it becomes possible.
//
// GET /admin/v1/accounts/{account_id} answers the account, its balance and the first
// page of its keys (keys_next continues it); the keys route lists them a page at a
// time, oldest first: {"keys": [...], "next": cursor or null}, limit 1 to 200 (default
// 50), cursor the "next" of the page before. The operator's key creation is not held to
// the cap of self-service (accounts.Options.MaxOwnKeys).
//
// PATCH /admin/v1/accounts/{account_id} changes the account's plan: "effective" is
// "now" or "renewal" (the end of the current period), by default now for an upgrade (a
// plan with more credits) and at the renewal otherwise; it answers the account, its
// balance, "changed" (false when nothing had to change) and "effective_at". A change
// now makes the current period's allowance the new plan's: it adds the difference of
// the allowances to what is left of it (or takes it from what is left, never from what
// calls in flight hold); a change at the renewal shows in the account's "pending_plan"
// and "pending_plan_at" until then. See accounts.Manager.ChangePlan.
//
// The audit route lists the account's audit log newest first (with accounts.Options.Audit
// set; else 404): limit 1 to 1000 (default 50), cursor the "next" of the page before,
// from and to RFC 3339 instants (from <= at < to). Every change made through this
// handler is recorded with the actor "operator" and the client's address, read through
// the trusted proxies of the edge ([Options.Edge]) as every door reads it.
//
// The usage route ranks the usage of every account over a range (with
// accounts.Options.Usage set; else 404): the calls, credits and errors summed per
// account, API, channel or outcome (group_by), largest first by calls or credits
// (order), filtered by account, api, channel or outcome, a page at a time (limit 1 to
// 200, default 50; cursor the "next" of the page before). from and to are RFC 3339
// instants or dates, by default the 30 days to the end of today (UTC); see
// docs/tour.md for the bounds of the range and the body.
//
// The operator's webhook endpoints receive the events of every account (package
// webhook has their types and the signature of every delivery); /admin/v1/webhooks
// answers an account's endpoint as one that does not exist. An endpoint's url is an
// absolute http or https URL of at most 2048 bytes, without a user name, password or
// fragment, whose host is public unless the host allows others; events names the
// types it receives (none: every type). Its secret appears in full (data.secret) only
// when it is created (201) and rotated; every other answer masks it. The secret a
// rotation replaced still signs for a grace (24 hours by default). There are at most 16
// endpoints: one more is a 409 saying to delete one. test enqueues an endpoint.test
// message for that endpoint only (202), and resend makes a delivery pending again
// (202); both are refused (409) for a disabled endpoint. The operator lists an
// account's endpoints, may disable one with a reason, shown to the account's holder
// with the endpoint (disabled_by "operator") and in its audit log, enable one again
// whoever disabled it, and delete one with its deliveries. An endpoint the operator
// disabled stays disabled for its holder, whose enabling is a 409 saying that only
// the operator enables it; the holder manages the account's endpoints otherwise
// (package selfservice). The changes of an account's endpoints are in the
// account's audit log; those of the operator's own endpoints are in none (they are no
// account's). A service that delivers no webhooks answers these routes 404.
//
// Key values appear only in the responses that create them (data.value): at account
// creation, sub-key creation and rotation. They are never stored, so they cannot be read
// again. The optional restriction fields of an account creation apply to the whole
// account; every key of the account is confined within them.
//
// A credits request with a positive amount is a grant: credits given or bought, which
// carry over from period to period, as the plan's allowance renews, until they are
// spent or until expires_at (RFC 3339, in the future, at most ten years ahead; absent
// for a grant that never lapses). Calls spend the allowance first, then the grants that
// lapse first. A negative amount takes credits away in the same order. A balance reads
// {"remaining", "granted", "allowance_remaining", "used", "limit", "renewal",
// "next_lapse"}: remaining is allowance_remaining plus granted, and next_lapse, when a
// grant lapses, is {"at", "credits"}, the earliest expiry and the credits lapsing then.
// A credits request may carry an Idempotency-Key header so that a retried grant applies
// once; a key that is reused returns the current balance and changes nothing, whatever
// the amount, for as long as the ledger remembers it: always on PostgreSQL, 35 days on
// Redis, the account's last 4096 requests (its calls included) on the memory ledger.
//
// The OpenAPI document ([OpenAPI]) describes every route: its parameters and their
// bounds, its body, the data of its success and each error status it answers, and the
// admin token as a bearer scheme. GET /admin/v1/openapi.json serves it to any caller,
// without the token: it names no secret, no account and no plan, only what this
// package's documentation says. It is built on the first request, and carries a strong
// ETag with Cache-Control: no-cache (If-None-Match answers 304). Like every answer of
// the admin API it carries no CORS header; other methods on its path need the token
// (then 405).
//
// Mount it on a separate listener or behind network controls where possible:
//
//	mux.Handle("/admin/", adminHandler)
package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/internal/mgmtapi"
	"github.com/tollgate-dev/tollgate/webhook"
	"github.com/tollgate-dev/tollgate/wire"
)

// MinTokenLength is the shortest admin token [NewHandler] accepts.
const MinTokenLength = 16

// Options configures the admin handler. The zero value is the default; every field is
// optional.
type Options struct {
	// Edge holds the HTTP settings every door shares; the admin API reads the client's
	// address through its trusted proxies, for the address the audit log records for a
	// change. The default is [edge.Default]: the address is the TCP peer. The admin API
	// answers no cross-origin call, whatever the edge's origins.
	Edge *edge.Edge
	// Webhooks manages the webhook endpoints (webhook.NewEndpoints, on the service's
	// events): the operator's own, under /admin/v1/webhooks, and the accounts'. Nil:
	// the service delivers no webhooks, and those routes answer 404.
	Webhooks *webhook.Endpoints
}

// Handler serves the admin API. Create it with [NewHandler].
type Handler struct {
	mgr      *accounts.Manager
	webhooks *webhook.Endpoints // nil: no webhooks
	token    [sha256.Size]byte
	mux      *http.ServeMux
	door     *edge.Door
	routes   []mgmtapi.Route
	// openapi returns the OpenAPI document as served, built on the first request.
	openapi func() (openAPIDoc, error)
}

// NewHandler returns the admin API of the accounts that mgr manages, protected by
// token, which callers send as "Authorization: Bearer <token>". The token must be at
// least [MinTokenLength] characters. opts may be nil.
func NewHandler(mgr *accounts.Manager, token string, opts *Options) (*Handler, error) {
	if mgr == nil {
		return nil, errors.New("admin: NewHandler needs an accounts.Manager")
	}
	if len(token) < MinTokenLength {
		return nil, fmt.Errorf("admin: the admin token needs at least %d characters", MinTokenLength)
	}
	if opts == nil {
		opts = &Options{}
	}
	e := opts.Edge
	if e == nil {
		e = edge.Default()
	}
	h := &Handler{mgr: mgr, webhooks: opts.Webhooks, token: sha256.Sum256([]byte(token)), mux: http.NewServeMux(),
		door: e.Door(edge.DoorSpec{}), openapi: sync.OnceValues(buildOpenAPI)}
	hooks := &mgmtapi.Webhooks{Endpoints: opts.Webhooks, Door: h.door, Owner: h.operator, Disabled: "disabled by the operator"}
	h.routes = append(h.lifecycleRoutes(), []mgmtapi.Route{
		{Method: http.MethodGet, Path: OpenAPIPath, Serve: h.serveOpenAPI},
		{Method: http.MethodGet, Path: "/admin/v1/plans", Serve: h.listPlans},
		{Method: http.MethodPost, Path: "/admin/v1/accounts", Serve: h.createAccount},
		{Method: http.MethodGet, Path: "/admin/v1/accounts/{account_id}", Serve: h.getAccount},
		{Method: http.MethodPatch, Path: "/admin/v1/accounts/{account_id}", Serve: h.changePlan},
		{Method: http.MethodGet, Path: "/admin/v1/accounts/{account_id}/keys", Serve: h.listKeys},
		{Method: http.MethodPost, Path: "/admin/v1/accounts/{account_id}/keys", Serve: h.createKey},
		{Method: http.MethodPost, Path: "/admin/v1/keys/{key_id}/rotate", Serve: h.rotateKey},
		{Method: http.MethodPost, Path: "/admin/v1/keys/{key_id}/revoke", Serve: h.revokeKey},
		{Method: http.MethodPost, Path: "/admin/v1/accounts/{account_id}/credits", Serve: h.adjustCredits},
		{Method: http.MethodGet, Path: "/admin/v1/accounts/{account_id}/audit", Serve: h.auditLog},
		{Method: http.MethodGet, Path: "/admin/v1/usage", Serve: h.usageTotals},
	}...)
	h.routes = append(h.routes, h.webhookRoutes(hooks)...)
	mgmtapi.Mount(h.mux, "/admin/", "admin", h.routes)
	return h, nil
}

// ServeHTTP checks the admin token, then routes the request. The OpenAPI document
// ([OpenAPIPath]) is served to GET and HEAD without a token: it names no secret.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == OpenAPIPath && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		h.serveOpenAPI(w, r)
		return
	}
	if !h.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="tollgate-admin"`)
		edge.WriteEnvelopeError(w, http.StatusUnauthorized, wire.CodeUnauthorized, "send the admin token as Authorization: Bearer <token>")
		return
	}
	h.mux.ServeHTTP(w, r.WithContext(accounts.WithActor(r.Context(), h.actor(r))))
}

// authorized compares the bearer token with the admin token in constant time. Both are
// hashed first, so the comparison does not depend on their lengths either.
func (h *Handler) authorized(r *http.Request) bool {
	v := r.Header.Get("Authorization")
	if len(v) < 7 || !strings.EqualFold(v[:7], "bearer ") {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(v[7:])))
	return subtle.ConstantTimeCompare(got[:], h.token[:]) == 1
}

// listPlans answers the plans, sorted by name: {"plans": [{"name", "credits",
// "rate_per_minute", "burst"?, "concurrency", "graphql_max_apis", "batch_max_items"}]}.
func (h *Handler) listPlans(w http.ResponseWriter, r *http.Request) {
	h.door.WriteJSON(w, r, http.StatusOK, map[string]any{"plans": h.mgr.Plans()})
}

func (h *Handler) createAccount(w http.ResponseWriter, r *http.Request) {
	var body struct {
		ID            string           `json:"id"`
		Plan          string           `json:"plan"`
		Credits       *int64           `json:"credits"`
		BillingAnchor *mgmtapi.Instant `json:"billing_anchor"`
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
	spec := accounts.Spec{ID: body.ID, Plan: body.Plan, Credits: body.Credits, Restrictions: rs}
	if body.BillingAnchor != nil {
		spec.BillingAnchor = &body.BillingAnchor.Time
	}
	acct, key, value, err := h.mgr.CreateAccount(r.Context(), spec)
	if err != nil {
		h.door.WriteError(w, r, err, nil)
		return
	}
	// An account that existed with this definition (creation is idempotent) is answered
	// 200 with created false and no value: values are never stored. A new account has
	// a value, since the request gives none.
	if value == "" {
		h.door.WriteJSON(w, r, http.StatusOK, map[string]any{"account": mgmtapi.AccountJSON(acct), "key": mgmtapi.KeyJSON(key), "created": false})
		return
	}
	h.door.WriteJSON(w, r, http.StatusCreated, map[string]any{"account": mgmtapi.AccountJSON(acct), "key": mgmtapi.KeyJSON(key), "value": value, "created": true})
}

func (h *Handler) getAccount(w http.ResponseWriter, r *http.Request) {
	info, err := h.mgr.Account(r.Context(), r.PathValue("account_id"))
	if err != nil {
		h.door.WriteError(w, r, err, nil)
		return
	}
	h.door.WriteJSON(w, r, http.StatusOK, map[string]any{
		"account": h.accountJSON(info.Account), "balance": mgmtapi.BalanceJSON(info.Balance), "keys": mgmtapi.KeysJSON(info.Keys),
		"keys_next": mgmtapi.Nullable(info.KeysNext),
	})
}

func (h *Handler) listKeys(w http.ResponseWriter, r *http.Request) {
	q, problem := mgmtapi.KeyQuery(r.URL.Query())
	if problem != "" {
		h.door.WriteError(w, r, mgmtapi.Invalid(problem), nil)
		return
	}
	q.Account = r.PathValue("account_id")
	page, err := h.mgr.AccountKeys(r.Context(), q)
	if err != nil {
		h.door.WriteError(w, r, err, nil)
		return
	}
	h.door.WriteJSON(w, r, http.StatusOK, map[string]any{"keys": mgmtapi.KeysJSON(page.Keys), "next": mgmtapi.Nullable(page.Next)})
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
	key, value, err := h.mgr.CreateKey(r.Context(), r.PathValue("account_id"), accounts.NewKey{Name: body.Name, Restrictions: rs})
	if err != nil {
		h.door.WriteError(w, r, err, nil)
		return
	}
	h.door.WriteJSON(w, r, http.StatusCreated, map[string]any{"key": mgmtapi.KeyJSON(key), "value": value})
}

func (h *Handler) rotateKey(w http.ResponseWriter, r *http.Request) {
	key, value, err := h.mgr.RotateKey(r.Context(), r.PathValue("key_id"))
	if err != nil {
		h.door.WriteError(w, r, err, nil)
		return
	}
	h.door.WriteJSON(w, r, http.StatusOK, map[string]any{"key": mgmtapi.KeyJSON(key), "value": value})
}

func (h *Handler) revokeKey(w http.ResponseWriter, r *http.Request) {
	key, err := h.mgr.RevokeKey(r.Context(), r.PathValue("key_id"))
	if err != nil {
		h.door.WriteError(w, r, err, nil)
		return
	}
	h.door.WriteJSON(w, r, http.StatusOK, map[string]any{"key": mgmtapi.KeyJSON(key)})
}

func (h *Handler) adjustCredits(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Amount    *int64     `json:"amount"`
		Reason    string     `json:"reason"`
		ExpiresAt *time.Time `json:"expires_at"`
	}
	if err := mgmtapi.Decode(w, r, &body); err != nil {
		h.door.WriteError(w, r, err, nil)
		return
	}
	if body.Amount == nil || *body.Amount == 0 {
		h.door.WriteError(w, r, mgmtapi.Invalid("amount is required: a positive number grants credits, a negative one takes them away"), nil)
		return
	}
	if strings.TrimSpace(body.Reason) == "" || len(body.Reason) > 500 {
		h.door.WriteError(w, r, mgmtapi.Invalid("reason is required (at most 500 characters): say why the balance changes"), nil)
		return
	}
	idem := r.Header.Get("Idempotency-Key")
	if len(idem) > 255 {
		h.door.WriteError(w, r, mgmtapi.Invalid("the Idempotency-Key header is longer than 255 characters"), nil)
		return
	}
	opts := &accounts.CreditOptions{IdempotencyKey: idem}
	if body.ExpiresAt != nil {
		opts.ExpiresAt = *body.ExpiresAt
	}
	b, err := h.mgr.AdjustCredits(r.Context(), r.PathValue("account_id"), *body.Amount, body.Reason, opts)
	if err != nil {
		h.door.WriteError(w, r, err, nil)
		return
	}
	h.door.WriteJSON(w, r, http.StatusOK, map[string]any{"balance": mgmtapi.BalanceJSON(b)})
}

func (h *Handler) auditLog(w http.ResponseWriter, r *http.Request) {
	q, problem := mgmtapi.AuditQuery(r.URL.Query())
	if problem != "" {
		h.door.WriteError(w, r, mgmtapi.Invalid(problem), nil)
		return
	}
	q.Account = r.PathValue("account_id")
	page, err := h.mgr.AuditLog(r.Context(), q)
	if err != nil {
		h.door.WriteError(w, r, err, nil)
		return
	}
	h.door.WriteJSON(w, r, http.StatusOK, mgmtapi.AuditPageJSON(page))
}
