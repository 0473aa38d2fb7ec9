package mgmtapi

import (
	"fmt"
	"net/url"

	"github.com/tollgate-dev/tollgate/auth"
)

// maxFilter bounds the text filters of a listing of accounts (plan, id_prefix), as
// long as an id may be.
const maxFilter = 64

// AccountQuery reads the parameters of a listing of accounts (limit, cursor, plan,
// state, created_from, created_before, id_prefix) into a query. On failure it returns a
// message that names the parameter.
func AccountQuery(params url.Values) (auth.AccountQuery, string) {
	var q auth.AccountQuery
	var problem string
	q.Limit, q.After, problem = pageParams(params, "accounts", auth.MaxAccountPage,
		"plan", "state", "created_from", "created_before", "id_prefix")
	if problem != "" {
		return q, problem
	}
	if s := params.Get("state"); s != "" {
		q.State = auth.AccountState(s)
		if !q.State.Valid() {
			return q, "state must be active, suspended or closed"
		}
	}
	for _, p := range []struct {
		name string
		v    *string
	}{{"plan", &q.Plan}, {"id_prefix", &q.IDPrefix}} {
		if *p.v = params.Get(p.name); len(*p.v) > maxFilter {
			return q, fmt.Sprintf("%s must be at most %d bytes long", p.name, maxFilter)
		}
	}
	return q, timeRange(params, "created_from", "created_before", &q.CreatedFrom, &q.CreatedBefore)
}

// addState adds an account's state to its JSON form: "state" (active, suspended or
// closed) and "state_changed_at" (null if it never changed).
func addState(m map[string]any, a auth.Account) {
	m["state"] = a.State.OrActive()
	if a.StateChangedAt.IsZero() {
		m["state_changed_at"] = nil
	} else {
		m["state_changed_at"] = a.StateChangedAt
	}
}
