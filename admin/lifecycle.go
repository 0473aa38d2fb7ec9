package admin

import (
	"net/http"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/internal/mgmtapi"
)

// The lifecycle of accounts (package accounts has the rules): listing them,
// suspending, reactivating, closing and deleting one. The package documentation lists
// the routes.

// lifecycleRoutes are the routes of the lifecycle of accounts.
func (h *Handler) lifecycleRoutes() []mgmtapi.Route {
	return []mgmtapi.Route{
		{Method: http.MethodGet, Path: "/admin/v1/accounts", Serve: h.listAccounts},
		{Method: http.MethodPost, Path: "/admin/v1/accounts/{account_id}/suspend", Serve: h.suspendAccount},
		{Method: http.MethodPost, Path: "/admin/v1/accounts/{account_id}/reactivate", Serve: h.reactivateAccount},
		{Method: http.MethodPost, Path: "/admin/v1/accounts/{account_id}/close", Serve: h.closeAccount},
		{Method: http.MethodDelete, Path: "/admin/v1/accounts/{account_id}", Serve: h.deleteAccount},
	}
}

// accountJSON is the JSON form of an account for operators: with, for a closed
// account, deletable_at, from when DELETE may delete it.
func (h *Handler) accountJSON(a auth.Account) map[string]any {
	m := mgmtapi.AccountJSON(a)
	if t := h.mgr.DeletableAt(a); !t.IsZero() {
		m["deletable_at"] = t
	}
	return m
}

// listAccounts answers a page of accounts in the order of their ids: {"accounts":
// [...], "next": cursor or null}. A page may hold fewer accounts than the limit, even
// none, with next set: the listing goes on until next is null.
func (h *Handler) listAccounts(w http.ResponseWriter, r *http.Request) {
	q, problem := mgmtapi.AccountQuery(r.URL.Query())
	if problem != "" {
		h.door.WriteError(w, r, mgmtapi.Invalid(problem), nil)
		return
	}
	page, err := h.mgr.Accounts(r.Context(), q)
	if err != nil {
		h.door.WriteError(w, r, err, nil)
		return
	}
	accts := make([]map[string]any, len(page.Accounts))
	for i, a := range page.Accounts {
		accts[i] = h.accountJSON(a)
	}
	h.door.WriteJSON(w, r, http.StatusOK, map[string]any{"accounts": accts, "next": mgmtapi.Nullable(page.Next)})
}

// reason reads the body of a change of an account's state, {"reason"}: an empty body
// (no Content-Length) gives no reason, which the manager refuses where one is required.
// On failure it has answered the request.
func (h *Handler) reason(w http.ResponseWriter, r *http.Request) (string, bool) {
	var body struct {
		Reason string `json:"reason"`
	}
	if r.ContentLength == 0 {
		return "", true
	}
	if err := mgmtapi.Decode(w, r, &body); err != nil {
		h.door.WriteError(w, r, err, nil)
		return "", false
	}
	return body.Reason, true
}

// changeState answers a change of an account's state made by change: the account as it
// is afterwards, {"account"}.
func (h *Handler) changeState(w http.ResponseWriter, r *http.Request, change func(id, reason string) (auth.Account, error)) {
	reason, ok := h.reason(w, r)
	if !ok {
		return
	}
	acct, err := change(r.PathValue("account_id"), reason)
	if err != nil {
		h.door.WriteError(w, r, err, nil)
		return
	}
	h.door.WriteJSON(w, r, http.StatusOK, map[string]any{"account": h.accountJSON(acct)})
}

func (h *Handler) suspendAccount(w http.ResponseWriter, r *http.Request) {
	h.changeState(w, r, func(id, reason string) (auth.Account, error) { return h.mgr.SuspendAccount(r.Context(), id, reason) })
}

func (h *Handler) reactivateAccount(w http.ResponseWriter, r *http.Request) {
	h.changeState(w, r, func(id, reason string) (auth.Account, error) { return h.mgr.ReactivateAccount(r.Context(), id, reason) })
}

func (h *Handler) closeAccount(w http.ResponseWriter, r *http.Request) {
	h.changeState(w, r, func(id, reason string) (auth.Account, error) { return h.mgr.CloseAccount(r.Context(), id, reason) })
}

// deleteAccount deletes a closed account whose retention has passed: {"id", "deleted":
// true}.
func (h *Handler) deleteAccount(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("account_id")
	if err := h.mgr.DeleteAccount(r.Context(), id); err != nil {
		h.door.WriteError(w, r, err, nil)
		return
	}
	h.door.WriteJSON(w, r, http.StatusOK, map[string]any{"id": id, "deleted": true})
}
