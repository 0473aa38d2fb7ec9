package admin

import (
	"net/http"
	"strings"

	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/internal/mgmtapi"
)

// changePlan answers PATCH /admin/v1/accounts/{account_id}, {"plan", "effective"?}:
// it moves the account to the plan, now or at its renewal (accounts.Manager.ChangePlan),
// and answers {"account", "balance", "changed", "effective_at"}: the account as it
// reads after the change (its pending_plan and pending_plan_at for a change at the
// renewal), its balance now, whether anything changed, and when the new plan takes
// effect (null when nothing changed).
func (h *Handler) changePlan(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Plan      string `json:"plan"`
		Effective string `json:"effective"`
	}
	if err := mgmtapi.Decode(w, r, &body); err != nil {
		h.door.WriteError(w, r, err, nil)
		return
	}
	if strings.TrimSpace(body.Plan) == "" {
		h.door.WriteError(w, r, mgmtapi.Invalid(`plan is required: the plan to move the account to, with "effective": "now" or "renewal" (by default now for an upgrade, at the renewal otherwise)`), nil)
		return
	}
	c, err := h.mgr.ChangePlan(r.Context(), r.PathValue("account_id"), body.Plan, accounts.Effective(body.Effective))
	if err != nil {
		h.door.WriteError(w, r, err, nil)
		return
	}
	var at any
	if c.Changed {
		at = c.EffectiveAt.UTC()
	}
	h.door.WriteJSON(w, r, http.StatusOK, map[string]any{"account": h.accountJSON(c.Account), "balance": mgmtapi.BalanceJSON(c.Balance),
		"changed": c.Changed, "effective_at": at})
}
