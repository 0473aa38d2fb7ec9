package gql

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/internal/cleantext"
)

// A Request is a GraphQL query as a client sends it: the query's text, the name of the
// operation to run (empty when the text has one operation) and the variables.
type Request struct {
	Query         string
	OperationName string
	Variables     map[string]any
}

// An Estimate is what a query would cost and how the gateway would answer it, judged
// before it runs: see [Handler.Estimate].
type Estimate struct {
	// APIs are the distinct APIs the query names, in the order it first names them.
	APIs []EstimatedAPI
	// Credits is what the query would cost: the sum of the REST costs of its distinct
	// APIs, which is what its admission reserves.
	Credits int64
	// Plan is the caller's plan; its GraphQLMaxAPIs is the number of distinct APIs a
	// query may name (0: no cap). Zero when the caller could not be authenticated.
	Plan billing.Plan
	// Balance is the account's balance now; zero when it could not be read.
	Balance billing.Balance
	// Refusal is how the gateway would refuse the query instead of running it; nil when
	// it would run it, as far as can be known before it is sent (the plan's rate limit
	// and concurrency ceiling are judged when it is).
	Refusal *Refusal
}

// An EstimatedAPI is one API of an [Estimate].
type EstimatedAPI struct {
	// ID is the API's id, Field the query's root field that names it.
	ID, Field string
	// Cost is the API's cost in credits, as over REST.
	Cost int64
}

// A Refusal is how the gateway would refuse a query: the HTTP status of its answer,
// the extensions.code of its error, and the message. A query graphql-go cannot parse or
// validate has the code of its first error and all their messages, joined by "; ".
type Refusal struct {
	Status  int
	Code    string
	Message string
}

// Estimate judges a query as the gateway would judge it if the caller sent it now,
// without running it, charging it or counting it against the rate limit: the same
// parsing, validation and plan (the cached one, if the query was planned before), the
// same limits (its size, depth and fields, file APIs), and the service's own rules
// through [tollgate.Service.QuoteAll] (the caller's credential and restrictions, the
// plan's APIs per query, each API's arguments, an API named with different
// arguments, whether the balance covers the cost). The caller is taken as arriving on
// the graphql channel. A query that names no API (introspection) costs nothing.
//
// It is for a page that shows a query's cost as a person types it (package
// dashboard's GraphQL explorer): the figures come from the code that admits and
// charges the query, so they cannot drift from what the gateway then does.
func (h *Handler) Estimate(ctx context.Context, c tollgate.Caller, req Request) Estimate {
	if h.disabled {
		return Estimate{Refusal: &Refusal{http.StatusForbidden, "GRAPHQL_NOT_SUPPORTED",
			"GraphQL is not offered by this service; use the REST endpoints /v1/{api_id}"}}
	}
	c.Channel = auth.ChannelGraphQL
	r := request{Query: &req.Query}
	if req.OperationName != "" {
		r.OperationName = &req.OperationName
	}
	if len(req.Variables) > 0 {
		vars, err := json.Marshal(req.Variables)
		if err != nil {
			return Estimate{Refusal: &Refusal{http.StatusBadRequest, "BAD_REQUEST", "variables must be a JSON object"}}
		}
		r.Variables, r.variablesJSON = req.Variables, vars
	}
	var q query
	quote := h.svc.QuoteAll(ctx, c, func() ([]tollgate.Item, error) {
		s, err := h.current()
		if err != nil {
			h.log.ErrorContext(ctx, "gql: cannot build the schema", "error", err)
			return nil, &refusal{http.StatusInternalServerError, "INTERNAL_SERVER_ERROR", "the GraphQL schema cannot be built from the catalog"}
		}
		return h.prepare(ctx, s, r, &q)
	})
	e := Estimate{Credits: quote.Cost, Plan: quote.Plan, Balance: quote.Balance}
	for _, a := range quote.APIs {
		e.APIs = append(e.APIs, EstimatedAPI{ID: a.ID, Field: catalog.RootFieldName(a.ID), Cost: a.Cost})
	}
	if q.plan != nil && q.plan.refused != nil {
		// The gateway refused the query before the service saw its APIs (a file API,
		// a query too complex): they are the plan's.
		for _, c := range q.plan.calls {
			if !slices.ContainsFunc(e.APIs, func(a EstimatedAPI) bool { return a.ID == c.root.api.ID }) {
				e.APIs = append(e.APIs, EstimatedAPI{ID: c.root.api.ID, Field: c.root.name, Cost: c.root.api.Cost})
				e.Credits += c.root.api.Cost
			}
		}
	}
	switch {
	case quote.Err != nil:
		a := h.refusalOf(ctx, quote.Err)
		if code := tollgate.CodeOf(quote.Err); code == tollgate.CodeNoCredential || code == tollgate.CodeMalformedCredential {
			a = &refusal{http.StatusForbidden, "INVALID_API_KEY", "the request carries no valid credential"}
		}
		e.Refusal = &Refusal{a.status, a.code, cleantext.Message(a.message)}
	case q.errors != nil:
		classify(q.errors)
		msgs := make([]string, len(q.errors))
		for i, qe := range q.errors {
			msgs[i] = cleantext.Message(qe.Message)
		}
		code, _ := q.errors[0].Extensions["code"].(string)
		e.Refusal = &Refusal{http.StatusBadRequest, code, strings.Join(msgs, "; ")}
	}
	return e
}
