package dashboard

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/wire"
)

// An Estimator judges a GraphQL query before it runs, as the service's GraphQL gateway
// would: what it would cost and how the gateway would refuse it. doors.Mount gives the
// dashboard the gateway's own judgement (doors.QueryCosts adapts a *gql.Handler).
type Estimator interface {
	QueryCost(ctx context.Context, c tollgate.Caller, q Query) QueryCost
}

// A Query is a GraphQL query as the explorer sends it (the body of POST /graphql/cost):
// its text, the operation to run (empty when the text has one) and the variables.
type Query struct {
	Query         string         `json:"query"`
	OperationName string         `json:"operationName"`
	Variables     map[string]any `json:"variables"`
}

// graphqlPath is where the service's GraphQL gateway is, under its root.
const graphqlPath = "/v1/graphql"

// maxCostBody bounds the body of POST /graphql/cost: a query (the gateway takes 16 KiB
// by default) and its variables.
const maxCostBody = 256 << 10

// explorerPolicy returns the Content-Security-Policy of the explorer: the dashboard's,
// with the style elements that carry nonce allowed besides the dashboard's own style
// sheets. The editor (CodeMirror) writes its styles into one such element, given the
// nonce; scripts are still the dashboard's own files only.
func explorerPolicy(nonce string) string {
	return strings.Replace(ContentSecurityPolicy, "style-src 'self'", "style-src 'self' 'nonce-"+nonce+"'", 1)
}

// newNonce returns a fresh nonce for a Content-Security-Policy: 128 random bits, in
// base64url, which has no character that HTML escapes.
func newNonce() string {
	b := make([]byte, 16)
	rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// servicePath returns the path of p under the service's root: under the path of
// Options.PublicURL if it has one. The explorer and the reference fetch it from the
// dashboard's own host.
func (h *Handler) servicePath(p string) string {
	if h.publicURL == "" {
		return p
	}
	u, err := url.Parse(h.publicURL) // checked by NewHandler: cannot fail
	if err != nil {
		return p
	}
	return u.Path + p
}

// explorerData is the explorer page.
type explorerData struct {
	// Endpoint is the path of the GraphQL gateway; Cost the path, relative to the
	// dashboard, of the cost of a query.
	Endpoint, Cost string
}

// explorerPage serves the GraphQL explorer: an editor that completes from the schema,
// the cost of the query as it is typed, its result and what it cost once it ran, and
// the schema's types and fields.
func (h *Handler) explorerPage(w http.ResponseWriter, r *http.Request, v *visit) {
	if h.graphql == nil {
		page := v.view("GraphQL explorer", "")
		page.Message, page.Link, page.LinkText = "This service offers no GraphQL gateway.", "./", "Go to the overview"
		h.render(w, r, http.StatusNotFound, "message", page)
		return
	}
	nonce := newNonce()
	w.Header().Set("Content-Security-Policy", explorerPolicy(nonce))
	page := v.view("GraphQL explorer", "graphql")
	page.Nonce = nonce
	page.Data = explorerData{Endpoint: h.servicePath(graphqlPath), Cost: "graphql/cost"}
	h.render(w, r, http.StatusOK, "graphql", page)
}

// QueryCost is what a query would cost and how the gateway would answer it, judged
// by the gateway before it runs; its JSON is the answer of POST /graphql/cost.
type QueryCost struct {
	// APIs are the distinct APIs the query names, with their costs.
	APIs []QueryAPI `json:"apis"`
	// Credits is the sum of their costs.
	Credits int64 `json:"credits"`
	// Plan is the plan's name; MaxAPIs the number of distinct APIs a query may name
	// (0: no cap).
	Plan    string `json:"plan"`
	MaxAPIs int    `json:"max_apis"`
	// Balance is the credits that remain, Renewal when they renew (absent when the
	// balance could not be read).
	Balance int64      `json:"balance"`
	Renewal *time.Time `json:"renewal,omitempty"`
	// Refusal is how the gateway would refuse the query; null when it would run it.
	Refusal *QueryRefusal `json:"refusal"`
}

// A QueryAPI is one API a query names: its id, the query's root field that names it,
// and its cost in credits.
type QueryAPI struct {
	ID    string `json:"id"`
	Field string `json:"field"`
	Cost  int64  `json:"cost"`
}

// A QueryRefusal is how the gateway would refuse a query: the HTTP status of its
// answer, the GraphQL code of its error, and the message.
type QueryRefusal struct {
	Status  int    `json:"status"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// queryCost serves POST /graphql/cost: the cost of a query, and the refusal the
// gateway would give, before it runs. Nothing runs and nothing is charged. Like a
// form, it must come from the dashboard's origin with the session's CSRF token (in
// the X-CSRF-Token header), as JSON.
func (h *Handler) queryCost(w http.ResponseWriter, r *http.Request) {
	if h.graphql == nil {
		writeJSONError(w, http.StatusNotFound, "this service offers no GraphQL gateway")
		return
	}
	if err := h.sessions.CheckOrigin(r); err != nil {
		writeJSONError(w, http.StatusForbidden, "this request comes from another site's page, so it was refused")
		return
	}
	v, ok := h.visitOf(r)
	if !ok {
		writeJSONError(w, http.StatusUnauthorized, "you are not signed in, or your session has ended: sign in again")
		return
	}
	if !h.sessions.CheckCSRF(v.Visit, r.Header.Get(wire.HeaderCSRFToken)) {
		writeJSONError(w, http.StatusForbidden, "this request does not carry your session's security token in "+wire.HeaderCSRFToken+": reload the page")
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeJSONError(w, http.StatusUnsupportedMediaType, "send the query as application/json")
		return
	}
	var req Query
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxCostBody))
	if err := dec.Decode(&req); err != nil {
		if tooBig := (*http.MaxBytesError)(nil); errors.As(err, &tooBig) {
			writeJSONError(w, http.StatusRequestEntityTooLarge, "the query and its variables are larger than 256 KiB")
			return
		}
		writeJSONError(w, http.StatusBadRequest, `the body must be a JSON object such as {"query": "{ ... }", "variables": {}}`)
		return
	}
	a := h.graphql.QueryCost(r.Context(), v.Caller, req)
	if a.APIs == nil {
		a.APIs = []QueryAPI{}
	}
	if a.Refusal != nil && a.Refusal.Status >= 500 && a.Refusal.Status != http.StatusServiceUnavailable {
		h.log.ErrorContext(r.Context(), "dashboard: a query's cost cannot be judged", "account", v.Claims.Account, "code", a.Refusal.Code)
	}
	writeJSON(w, http.StatusOK, a)
}

// writeJSON writes v as a JSON answer that is never cached.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	json.NewEncoder(&buf).Encode(v) // plain data: cannot fail
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// writeJSONError writes {"error": msg}.
func writeJSONError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}
