package admin

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/internal/mgmtapi"
	"github.com/tollgate-dev/tollgate/internal/usagehttp"
	"github.com/tollgate-dev/tollgate/usage"
)

// GET /admin/v1/usage: the usage of every account over a range, summed per account,
// API, channel or outcome and ranked (accounts.Manager.UsageTotals, usage.TotalsQuery):
//
//	GET /admin/v1/usage?from=2030-01-01&to=2030-02-01&group_by=account&order=credits&limit=20
//
//   - from, to: the range [from, to), RFC 3339 instants or dates (midnight UTC). The
//     default to is the end of today (the next midnight UTC), the default from the
//     midnight UTC 30 days before to. The range is widened to whole minutes and read
//     from the coarsest buckets that cover it: a range at midnight UTC may cover 400
//     days, one on the hour 31 days, any other 1 day.
//   - group_by: account (the default), api, channel or outcome.
//   - order: calls (the default) or credits, largest first; ties by the group's value.
//   - account, api, channel, outcome: keep only the calls of that account, API,
//     channel (rest, graphql, mcp, batch, other) or outcome (ok, or an error code).
//   - limit: 1 to 200 groups a page (default 50); cursor: the next of the page before.
//
// It answers {from, to, resolution, group_by, order, filters: {account, api, channel,
// outcome}, rows: [{group, calls, credits, errors}], total: {calls, credits, errors},
// groups, next}: from and to as widened, the resolution of the buckets read (minute,
// hour or day), the filters (null when not given), a row per group of the page (errors
// counts the calls that did not succeed), the totals and the number of groups of the
// whole selection, and the cursor of the next page (null on the last). Each page is
// read when it is asked for: calls recorded in between move groups in the ranking. A
// parameter that is unknown, given twice, empty or wrong is a 400 whose message begins
// with its name; a service that records no usage answers 404.

// usageParams are the query parameters of GET /admin/v1/usage.
var usageParams = []string{"from", "to", "group_by", "order", "account", "api", "channel", "outcome", "limit", "cursor"}

// usageQuery reads the query parameters of GET /admin/v1/usage, with now for the
// default range. Its errors are CodeInvalidInput refusals whose message begins with
// the parameter's name; the manager checks the rest.
func usageQuery(params url.Values, now time.Time) (usage.TotalsQuery, error) {
	var q usage.TotalsQuery
	for name, vs := range params {
		switch {
		case !slices.Contains(usageParams, name):
			return q, mgmtapi.Invalid(fmt.Sprintf("unknown parameter %.40q: GET /admin/v1/usage takes %s", name, strings.Join(usageParams, ", ")))
		case len(vs) > 1:
			return q, mgmtapi.Invalid(name + ": given more than once: give it once")
		case vs[0] == "":
			return q, mgmtapi.Invalid(name + ": empty: give a value, or leave the parameter out")
		}
	}
	var err error
	q.To = usage.Day.Start(now).Add(24 * time.Hour)
	if v := params.Get("to"); v != "" {
		if q.To, err = usagehttp.ParseInstant("to", v); err != nil {
			return q, err
		}
	}
	q.From = usage.Day.Start(q.To.Add(-30 * 24 * time.Hour))
	if v := params.Get("from"); v != "" {
		if q.From, err = usagehttp.ParseInstant("from", v); err != nil {
			return q, err
		}
	}
	q.GroupBy = usage.Dimension(params.Get("group_by"))
	q.Order = usage.Order(params.Get("order"))
	q.Account, q.API, q.Channel, q.Outcome = params.Get("account"), params.Get("api"), params.Get("channel"), params.Get("outcome")
	if v := params.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > usage.MaxTotalsLimit || strings.TrimLeft(v, "0123456789") != "" {
			return q, mgmtapi.Invalid(fmt.Sprintf("limit: give a whole number from 1 to %d", usage.MaxTotalsLimit))
		}
		q.Limit = n
	}
	q.Cursor = params.Get("cursor") // the store reads it, and refuses one that no page returned
	return q, nil
}

// usageTotals serves GET /admin/v1/usage.
func (h *Handler) usageTotals(w http.ResponseWriter, r *http.Request) {
	q, err := usageQuery(r.URL.Query(), h.mgr.Service().Now())
	if err != nil {
		h.door.WriteError(w, r, err, nil)
		return
	}
	page, err := h.mgr.UsageTotals(r.Context(), q)
	if err != nil {
		h.door.WriteError(w, r, err, nil)
		return
	}
	h.door.WriteJSON(w, r, http.StatusOK, usageBody(page))
}

// usageBody is the JSON form of a page of usage totals.
func usageBody(p usage.TotalsPage) map[string]any {
	q := p.Query
	rows := make([]map[string]any, len(p.Rows))
	for i, g := range p.Rows {
		rows[i] = map[string]any{"group": g.Group, "calls": g.Calls, "credits": g.Credits, "errors": g.Errors}
	}
	return map[string]any{
		"from": q.From, "to": q.To, "resolution": p.Resolution.String(),
		"group_by": string(q.GroupBy), "order": string(q.Order),
		"filters": map[string]any{
			"account": mgmtapi.Nullable(q.Account), "api": mgmtapi.Nullable(q.API),
			"channel": mgmtapi.Nullable(q.Channel), "outcome": mgmtapi.Nullable(q.Outcome),
		},
		"rows":   rows,
		"total":  map[string]any{"calls": p.Sum.Calls, "credits": p.Sum.Credits, "errors": p.Sum.Errors},
		"groups": p.Groups,
		"next":   mgmtapi.Nullable(p.Next),
	}
}
