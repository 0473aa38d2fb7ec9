package dashboard

import (
	"net/http"
	"net/url"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/audit"
)

// auditPageSize is the number of entries a page of the audit log shows.
const auditPageSize = 50

// auditRow is one entry of the audit log as the page shows it.
type auditRow struct {
	At                               time.Time
	Actor, ActorName, Action, Target string
	TargetName, Addr, Reason         string
	Before, After                    string
	Credits                          int64
}

// auditData is the audit log page.
type auditData struct {
	Rows []auditRow
	// Next is the link to the next (older) page; empty on the last.
	Next string
	// Refused says why the log cannot be shown to this session ("" when it is).
	Refused string
	// Paged is set on a page after the first.
	Paged bool
}

// auditLog serves a page of the account's audit log, newest first, with the
// service's OwnAuditLog: a sub-key's session is refused, and the page says why.
func (h *Handler) auditLog(w http.ResponseWriter, r *http.Request, v *visit) {
	cursor := r.URL.Query().Get("cursor")
	res, err := h.mgr.OwnAuditLog(r.Context(), v.Caller, audit.Query{Limit: auditPageSize, Cursor: cursor})
	page := v.view("Audit log", "audit")
	d := auditData{Paged: cursor != ""}
	page.Data = &d
	if err != nil {
		switch code := tollgate.CodeOf(err); code {
		case tollgate.CodeForbidden, tollgate.CodeInvalidInput, tollgate.CodeNotFound:
			status, msg := statusOf(err)
			if code == tollgate.CodeForbidden {
				d.Refused = msg
			} else {
				page.Error = msg
			}
			h.render(w, r, status, "audit", page)
		default:
			h.failed(w, r, v, err)
		}
		return
	}
	names := h.keyNames(r, v)
	for _, e := range res.Entries {
		row := auditRow{At: e.At, Actor: e.Actor, ActorName: names[e.Actor], Action: string(e.Action),
			Target: e.Target, TargetName: names[e.Target], Reason: e.Reason, Credits: e.Credits,
			Before: string(e.Before), After: string(e.After)}
		if e.Addr.IsValid() {
			row.Addr = e.Addr.String()
		}
		d.Rows = append(d.Rows, row)
	}
	if res.Next != "" {
		d.Next = "audit?" + url.Values{"cursor": {res.Next}}.Encode()
	}
	h.render(w, r, http.StatusOK, "audit", page)
}
