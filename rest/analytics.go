package rest

import (
	"net/http"
	"net/url"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/internal/usagehttp"
	"github.com/tollgate-dev/tollgate/usage"
)

// The body of GET /v1/analytics.
type analytics struct {
	Account string `json:"account"`
	Plan    string `json:"plan"`
	// Key is the key the call used, or that its session acts as; null for a session
	// that acts for the whole account.
	Key     *keyInfo    `json:"key"`
	Credits creditsInfo `json:"credits"`
	// RateLimit is null when the plan has no rate limit.
	RateLimit   *rateInfo       `json:"rate_limit"`
	Concurrency concurrencyInfo `json:"concurrency"`
	// GraphQLMaxAPIs is the number of APIs one GraphQL query may name; 0 means no cap.
	GraphQLMaxAPIs int `json:"graphql_max_apis"`
	// BatchMaxItems is the number of items one batch may hold: the plan's
	// batch_max_items (100 when it sets none), and no more than its rate limit's burst.
	BatchMaxItems int `json:"batch_max_items"`
	// Calls counts the calls per API in the current period: the whole account's for
	// the primary key (or a session acting as it, or one that names no key), only its
	// own for any other key (or a session acting as it), from the usage statistics,
	// and null for such a key on a service that records no usage statistics.
	Calls  map[string]int64 `json:"calls"`
	Period periodInfo       `json:"period"`
}

type keyInfo struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Primary bool   `json:"primary"`
}

type creditsInfo struct {
	Used      int64 `json:"used"`
	Remaining int64 `json:"remaining"`
	// Granted is the part of Remaining that grants hold: they carry over when the
	// allowance (Limit) renews.
	Granted int64     `json:"granted"`
	Limit   int64     `json:"limit"`
	Renewal time.Time `json:"renewal"`
}

type rateInfo struct {
	PerMinute int `json:"per_minute"`
	Burst     int `json:"burst"`
	// Remaining is the number of calls that could be made now.
	Remaining int `json:"remaining"`
}

type concurrencyInfo struct {
	// Limit is the ceiling; 0 means unlimited.
	Limit int `json:"limit"`
	InUse int `json:"in_use"`
}

type periodInfo struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// serveAnalytics reports the caller's plan, credits, limits and usage. Any valid key may
// call it, whatever its API and channel restrictions; it is never billed and uses no
// rate-limit event. A 200 means the key is good.
//
// With any of the query parameters of the time-series form (from, to, interval, by, api,
// key, channel), it answers with the account's usage over time instead (see
// serveUsage).
func (h *Handler) serveAnalytics(w http.ResponseWriter, r *http.Request) {
	if !h.methodOnly(w, r) {
		return
	}
	if q := r.URL.Query(); usagehttp.Asks(q) {
		h.serveUsage(w, r, q)
		return
	}
	p, ok := h.authenticate(w, r, 0)
	if !ok {
		return
	}
	var (
		st  billing.Status
		err error
	)
	if h.mgr != nil {
		st, err = h.mgr.Status(r.Context(), &p)
	} else {
		st, err = h.svc.Status(r.Context(), &p)
	}
	if err != nil {
		h.door.WriteError(w, r, err, nil)
		return
	}
	b := st.Balance
	out := analytics{
		Account: p.Account.ID,
		Plan:    p.Plan.Name,
		Credits: creditsInfo{Used: b.Used, Remaining: b.Remaining, Granted: b.Granted, Limit: b.Allowance, Renewal: b.Period.End},
		Concurrency: concurrencyInfo{
			Limit: p.Plan.Concurrency, InUse: st.SlotsInUse,
		},
		GraphQLMaxAPIs: p.Plan.GraphQLMaxAPIs,
		BatchMaxItems:  p.Plan.BatchItems(),
		Calls:          st.Usage,
		Period:         periodInfo{Start: b.Period.Start, End: b.Period.End},
	}
	if p.Key.ID != "" { // a key, or a session that acts as one
		out.Key = &keyInfo{ID: p.Key.ID, Name: p.Key.Name, Primary: p.Key.Primary}
	}
	if l, ok := p.Plan.RateLimit(); ok {
		remaining := 0
		if st.Rate.Allowed {
			remaining = st.Rate.Remaining + 1 // Peek reports what is left after one more call
		}
		out.RateLimit = &rateInfo{PerMinute: l.Rate, Burst: l.Burst, Remaining: remaining}
	}
	edge.SetCreditHeaders(w.Header(), p.Plan.Name, 0, b)
	h.door.WriteJSON(w, r, http.StatusOK, out)
}

// The time-series form of GET /v1/analytics:
//
//	GET /v1/analytics?from=2030-01-01&to=2030-01-31&interval=day&by=api
//
//   - from, to: the range [from, to), as RFC 3339 instants or dates (midnight UTC). The
//     default to is now, the default from is to less 30 days (interval day), 24 hours
//     (hour) or 1 hour (minute). The range is widened to whole buckets of the interval
//     (UTC), and may cover at most 400 days by day, 31 days by hour, 1 day by minute.
//   - interval: minute, hour or day (the default).
//   - by: api, key, channel, outcome or none (the default): one series per group.
//   - api, key, channel: keep only the calls of that API, key id or channel.
//
// It answers {account, from, to, interval, by, key, series: [{group, points: [{start,
// calls, credits, errors: {code: count}, latency_ms: {p50, p95, p99}}]}]}: a point per
// bucket that has calls; key is the key filter (null for none); errors counts the calls
// that did not succeed by code (refusals such as rate_limited included); latency_ms is
// null when no call of the point ran. The latencies are estimates within 9.1%
// (usage.QuantileError). The usage of the last few seconds (the service's flush
// interval) may not be in it yet.
//
// Like the rest of /v1/analytics it is never billed and any valid key may call it, for
// its own account only. The account's primary key (or a session it started, or one
// that no key started) sees the whole account; any other key, or a session it started,
// sees only that key's calls: the key filter is its id, and naming another key is a
// 403 (the rule is the accounts manager's: accounts.Manager.OwnUsage). A bad
// parameter is a 400 invalid_input whose message begins with the parameter's name; a
// service that records no usage answers 404. The parameters and the body are those of GET /v1/account/usage
// (package internal/usagehttp reads and writes both).

// serveUsage answers the time-series form of GET /v1/analytics. The accounts manager
// applies who may read which usage (accounts.Manager.OwnUsage).
func (h *Handler) serveUsage(w http.ResponseWriter, r *http.Request, q url.Values) {
	c, ok := h.door.Caller(w, r, 0)
	if !ok {
		return
	}
	uq, err := usagehttp.Query(q, h.svc.Now())
	if err == nil {
		var res usage.Result
		if h.mgr == nil {
			// Who asks is known before what the service lacks is told.
			c.Verify = true
			if _, err = h.svc.Authenticate(r.Context(), c); err == nil {
				err = &tollgate.Error{Code: tollgate.CodeNotFound, Message: "this service records no usage statistics (rest.Options.Accounts is not set)"}
			}
		} else if res, err = h.mgr.OwnUsage(r.Context(), c, uq); err == nil {
			h.door.WriteJSON(w, r, http.StatusOK, usagehttp.NewBody(res))
			return
		}
	}
	h.door.WriteError(w, r, err, nil)
}
