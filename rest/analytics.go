package rest

import (
	"net/http"
	"time"

	"github.com/tollgate-dev/tollgate/internal/httpx"
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
	// Calls counts the calls per API in the current period.
	Calls  map[string]int64 `json:"calls"`
	Period periodInfo       `json:"period"`
}

type keyInfo struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Primary bool   `json:"primary"`
}

type creditsInfo struct {
	Used      int64     `json:"used"`
	Remaining int64     `json:"remaining"`
	Limit     int64     `json:"limit"`
	Renewal   time.Time `json:"renewal"`
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
func (h *Handler) serveAnalytics(w http.ResponseWriter, r *http.Request) {
	if !h.methodOnly(w, r) {
		return
	}
	p, ok := h.authenticate(w, r, 0)
	if !ok {
		return
	}
	st, err := h.svc.Status(r.Context(), &p)
	if err != nil {
		h.writeError(w, r, err, nil)
		return
	}
	b := st.Balance
	out := analytics{
		Account: p.Account.ID,
		Plan:    p.Plan.Name,
		Credits: creditsInfo{Used: b.Used, Remaining: b.Remaining, Limit: b.Allowance, Renewal: b.Period.End},
		Concurrency: concurrencyInfo{
			Limit: p.Plan.Concurrency, InUse: st.SlotsInUse,
		},
		GraphQLMaxAPIs: p.Plan.GraphQLMaxAPIs,
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
	if out.Calls == nil {
		out.Calls = map[string]int64{}
	}
	httpx.SetCreditHeaders(w.Header(), p.Plan.Name, 0, b)
	h.writeData(w, r, http.StatusOK, out)
}
