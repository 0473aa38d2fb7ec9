package admin

import (
	"fmt"
	"net/http"
	"unicode/utf8"

	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/internal/mgmtapi"
	"github.com/tollgate-dev/tollgate/webhook"
)

// Webhook endpoints (package webhook has the rules): the operator's own, which receive
// the events of every account, and those of an account, which the operator may list,
// disable (for good: the holder cannot enable it again), enable again and delete. The
// package documentation lists the routes.

// webhookRoutes are the routes of webhook endpoints, served by hooks.
func (h *Handler) webhookRoutes(hooks *mgmtapi.Webhooks) []mgmtapi.Route {
	return append(hooks.Routes("/admin/v1/webhooks"),
		mgmtapi.Route{Method: http.MethodGet, Path: "/admin/v1/accounts/{account_id}/webhooks", Serve: h.accountWebhooks},
		mgmtapi.Route{Method: http.MethodPatch, Path: "/admin/v1/accounts/{account_id}/webhooks/{endpoint_id}", Serve: h.changeAccountWebhook},
		mgmtapi.Route{Method: http.MethodDelete, Path: "/admin/v1/accounts/{account_id}/webhooks/{endpoint_id}", Serve: h.deleteAccountWebhook},
	)
}

// operator is the owner of the operator's endpoints, the actor of a request's changes.
func (h *Handler) operator(r *http.Request) (mgmtapi.WebhookOwner, error) {
	return mgmtapi.WebhookOwner{Actor: h.actor(r), Operator: true}, nil
}

// actor is the actor of the changes r makes.
func (h *Handler) actor(r *http.Request) event.Actor {
	return event.Actor{ID: audit.Operator, Addr: h.door.Addr(r)}
}

// accountWebhooks answers an account's endpoints, their secrets masked: {"endpoints"}.
func (h *Handler) accountWebhooks(w http.ResponseWriter, r *http.Request) {
	if !h.hooksReady(w, r) || !mgmtapi.NoParams(h.door, w, r) {
		return
	}
	id := r.PathValue("account_id")
	// An account that does not exist is a 404, as on the other routes of an account;
	// its keys' first page is the lightest read that says so.
	if _, err := h.mgr.AccountKeys(r.Context(), auth.KeyQuery{Account: id, Limit: 1}); err != nil {
		h.door.WriteError(w, r, err, nil)
		return
	}
	es, err := h.webhooks.List(r.Context(), id)
	if err != nil {
		h.door.WriteError(w, r, mgmtapi.WebhookError(err), nil)
		return
	}
	h.door.WriteJSON(w, r, http.StatusOK, map[string]any{"endpoints": mgmtapi.EndpointsJSON(es)})
}

// changeAccountWebhook disables an account's endpoint, or enables it again:
// {"disabled", "reason"?}. It answers the endpoint. The operator's disabling sticks:
// the account's holder cannot enable it again; the operator enables an endpoint
// whoever disabled it.
func (h *Handler) changeAccountWebhook(w http.ResponseWriter, r *http.Request) {
	if !h.hooksReady(w, r) {
		return
	}
	var body struct {
		Disabled *bool  `json:"disabled"`
		Reason   string `json:"reason"`
	}
	if err := mgmtapi.Decode(w, r, &body); err != nil {
		h.door.WriteError(w, r, err, nil)
		return
	}
	if body.Disabled == nil {
		h.door.WriteError(w, r, mgmtapi.Invalid("disabled is required: true disables the endpoint, false enables it again"), nil)
		return
	}
	const prefix = "disabled by the operator"
	reason := prefix
	if body.Reason != "" {
		if max := webhook.MaxReason - len(prefix+": "); utf8.RuneCountInString(body.Reason) > max {
			h.door.WriteError(w, r, mgmtapi.Invalid(fmt.Sprintf("reason: give at most %d characters", max)), nil)
			return
		}
		reason += ": " + body.Reason
	}
	e, err := h.webhooks.Update(r.Context(), h.actor(r), r.PathValue("account_id"), r.PathValue("endpoint_id"),
		webhook.EndpointChange{Disabled: body.Disabled, Reason: reason, ByOperator: true})
	if err != nil {
		h.door.WriteError(w, r, mgmtapi.WebhookError(err), nil)
		return
	}
	h.door.WriteJSON(w, r, http.StatusOK, mgmtapi.EndpointJSON(e))
}

// deleteAccountWebhook deletes an account's endpoint and its deliveries: {"id",
// "deleted"}. An id that names no endpoint of the account is a 404.
func (h *Handler) deleteAccountWebhook(w http.ResponseWriter, r *http.Request) {
	if !h.hooksReady(w, r) {
		return
	}
	id := r.PathValue("endpoint_id")
	if err := h.webhooks.Delete(r.Context(), h.actor(r), r.PathValue("account_id"), id); err != nil {
		h.door.WriteError(w, r, mgmtapi.WebhookError(err), nil)
		return
	}
	h.door.WriteJSON(w, r, http.StatusOK, map[string]any{"id": id, "deleted": true})
}

// hooksReady answers a request to a service that delivers no webhooks, and returns
// false.
func (h *Handler) hooksReady(w http.ResponseWriter, r *http.Request) bool {
	if h.webhooks == nil {
		h.door.WriteError(w, r, mgmtapi.NoWebhooksError(), nil)
		return false
	}
	return true
}
