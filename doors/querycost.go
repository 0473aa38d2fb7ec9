package doors

import (
	"context"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/dashboard"
	"github.com/tollgate-dev/tollgate/gql"
)

// QueryCosts gives the dashboard's GraphQL explorer the gateway's judgement of a query
// before it runs (gql.Handler.Estimate): what it would cost, and how the gateway would
// refuse it. Mount wires it; a host that mounts the doors one by one sets
// dashboard.Options.GraphQL to QueryCosts(its gateway).
func QueryCosts(g *gql.Handler) dashboard.Estimator { return queryCosts{g} }

type queryCosts struct{ g *gql.Handler }

func (q queryCosts) QueryCost(ctx context.Context, c tollgate.Caller, query dashboard.Query) dashboard.QueryCost {
	e := q.g.Estimate(ctx, c, gql.Request{Query: query.Query, OperationName: query.OperationName, Variables: query.Variables})
	a := dashboard.QueryCost{APIs: make([]dashboard.QueryAPI, 0, len(e.APIs)), Credits: e.Credits,
		Plan: e.Plan.Name, MaxAPIs: e.Plan.GraphQLMaxAPIs, Balance: e.Balance.Remaining}
	for _, api := range e.APIs {
		a.APIs = append(a.APIs, dashboard.QueryAPI{ID: api.ID, Field: api.Field, Cost: api.Cost})
	}
	if end := e.Balance.Period.End; !end.IsZero() {
		a.Renewal = &end
	}
	if e.Refusal != nil {
		a.Refusal = &dashboard.QueryRefusal{Status: e.Refusal.Status, Code: e.Refusal.Code, Message: e.Refusal.Message}
	}
	return a
}
