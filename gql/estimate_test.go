package gql_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/gql"
)

// TestEstimateMatchesTheGateway: for each query, the estimate names its distinct APIs
// and their cost, charges and runs nothing, and says what the gateway then answers
// when the same caller sends it: the same refusal (status and code), or a run whose
// X-Credits-Cost is the estimate's credits.
func TestEstimateMatchesTheGateway(t *testing.T) {
	tests := []struct {
		name    string
		plan    string
		credits int64
		// restrict, if set, makes the caller a sub-key limited to these APIs.
		restrict []string
		query    string
		vars     map[string]any
		apis     []string
		cost     int64
		code     string // the refusal's code; "" for a query that runs
		status   int
		message  string // a fragment of the refusal's message
	}{
		{name: "one API", plan: "pro", credits: 100, query: `{ hash(text: "x") { hash } }`,
			apis: []string{"hash"}, cost: 1},
		{name: "aliases of one API", plan: "pro", credits: 100,
			query: `{ a: hash(text: "x") { hash } b: hash(text: "x", algorithm: sha256) { algorithm } }`,
			apis:  []string{"hash"}, cost: 1},
		{name: "two APIs", plan: "pro", credits: 100, query: `{ costly { ok } hash(text: "x") { hash } }`,
			apis: []string{"costly", "hash"}, cost: 4},
		{name: "variables", plan: "pro", credits: 100, query: `query($t: String!) { hash(text: $t) { hash } }`,
			vars: map[string]any{"t": "x"}, apis: []string{"hash"}, cost: 1},
		{name: "introspection is free", plan: "pro", credits: 100, query: `{ __schema { queryType { name } } }`},
		{name: "over the plan's APIs per query", plan: "free", credits: 50, query: `{ costly { ok } hash(text: "x") { hash } }`,
			apis: []string{"costly", "hash"}, cost: 4, code: "PLAN_LIMIT_EXCEEDED", status: http.StatusForbidden, message: "allows 1 per query"},
		{name: "over the balance", plan: "pro", credits: 3, query: `{ costly { ok } hash(text: "x") { hash } }`,
			apis: []string{"costly", "hash"}, cost: 4, code: "INSUFFICIENT_CREDITS", status: http.StatusPaymentRequired, message: "costs 4 and 3 remain"},
		{name: "a file API", plan: "pro", credits: 100, query: `{ imageinfo(url: "https://example.com/a.png") { width } }`,
			apis: []string{"image-info"}, cost: 2, code: "FILE_UPLOAD_NOT_SUPPORTED", status: http.StatusBadRequest, message: "POST /v1/image-info"},
		{name: "different arguments to one API", plan: "pro", credits: 100, query: `{ a: hash(text: "x") { hash } b: hash(text: "y") { hash } }`,
			apis: []string{"hash"}, cost: 1, code: "BAD_USER_INPUT", status: http.StatusBadRequest, message: "several times with different arguments"},
		{name: "an argument the catalog refuses", plan: "pro", credits: 100, query: `{ uuidgenerator(count: 1000) { uuids } }`,
			apis: []string{"uuid-generator"}, cost: 1, code: "BAD_USER_INPUT", status: http.StatusBadRequest, message: "count"},
		{name: "an API the key may not call", plan: "pro", credits: 100, restrict: []string{"hash"}, query: `{ costly { ok } }`,
			apis: []string{"costly"}, cost: 3, code: "FORBIDDEN", status: http.StatusForbidden},
		{name: "a syntax error", plan: "pro", credits: 100, query: `{ hash(text: "x") { hash }`,
			code: "GRAPHQL_PARSE_FAILED", status: http.StatusBadRequest, message: "syntax error"},
		{name: "an unknown field", plan: "pro", credits: 100, query: `{ nosuchapi { x } }`,
			code: "GRAPHQL_VALIDATION_FAILED", status: http.StatusBadRequest, message: "nosuchapi"},
		{name: "a mutation", plan: "pro", credits: 100, query: `mutation { hash(text: "x") { hash } }`,
			code: "OPERATION_NOT_SUPPORTED", status: http.StatusBadRequest, message: "read-only"},
		{name: "a result four objects deep", plan: "pro", credits: 100, query: `{ nested { level1 { level2 { level3 { value } } } } }`,
			apis: []string{"nested"}, cost: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, config{})
			acct := h.newAccount(t, tt.plan, tt.credits)
			if tt.restrict != nil {
				acct = h.newSubKey(t, acct, "narrow", auth.RestrictionSpec{APIs: tt.restrict})
			}
			caller := tollgate.Caller{Credential: auth.Credential{Kind: auth.APIKeyHeader, Value: acct.Key}}
			e := h.handler.Estimate(t.Context(), caller, gql.Request{Query: tt.query, Variables: tt.vars})

			var ids []string
			for _, a := range e.APIs {
				ids = append(ids, a.ID)
				if a.Field != strings.ReplaceAll(a.ID, "-", "") {
					t.Errorf("API %s is named by the field %q", a.ID, a.Field)
				}
			}
			if strings.Join(ids, " ") != strings.Join(tt.apis, " ") || e.Credits != tt.cost {
				t.Errorf("estimate: APIs %v costing %d, want %v costing %d", ids, e.Credits, tt.apis, tt.cost)
			}
			if e.Plan.Name != tt.plan || e.Balance.Remaining != tt.credits {
				t.Errorf("estimate: plan %q balance %d, want %q %d", e.Plan.Name, e.Balance.Remaining, tt.plan, tt.credits)
			}
			switch {
			case tt.code == "" && e.Refusal != nil:
				t.Fatalf("estimate refuses: %+v", *e.Refusal)
			case tt.code != "" && e.Refusal == nil:
				t.Fatalf("estimate accepts, want %s", tt.code)
			case tt.code != "" && (e.Refusal.Code != tt.code || e.Refusal.Status != tt.status || !strings.Contains(e.Refusal.Message, tt.message)):
				t.Errorf("estimate refuses with %+v, want %d %s %q", *e.Refusal, tt.status, tt.code, tt.message)
			}
			if h.runs.total() != 0 || h.balance(t, acct.ID) != tt.credits {
				t.Fatalf("the estimate ran %d APIs and left a balance of %d", h.runs.total(), h.balance(t, acct.ID))
			}

			// The gateway's answer to the same query.
			r := h.query(t, acct.Key, tt.query, tt.vars)
			if tt.code != "" {
				wantError(t, r, tt.status, tt.code)
				return
			}
			wantOK(t, r)
			if got := r.Header.Get("X-Credits-Cost"); got != strconv.FormatInt(tt.cost, 10) {
				t.Errorf("the gateway charged %s, the estimate said %d", got, tt.cost)
			}
		})
	}
}

// TestEstimateCaller: an estimate for a caller the gateway would not serve says so,
// without a plan or balance; a key without the graphql channel is refused as on the
// gateway; a disabled gateway refuses every query.
func TestEstimateCaller(t *testing.T) {
	h := newHarness(t, config{})
	acct := h.newAccount(t, "pro", 100)
	restOnly := h.newSubKey(t, acct, "rest only", auth.RestrictionSpec{Channels: []string{"rest"}})
	q := gql.Request{Query: `{ hash(text: "x") { hash } }`}
	for _, tt := range []struct {
		name   string
		cred   auth.Credential
		status int
		code   string
	}{
		{"unknown key", auth.Credential{Kind: auth.APIKeyHeader, Value: "7c9e6679-7425-40de-944b-e07fc1f90ae7"}, http.StatusUnauthorized, "INVALID_API_KEY"},
		{"no credential", auth.Credential{}, http.StatusUnauthorized, "INVALID_API_KEY"},
		{"a key without the graphql channel", auth.Credential{Kind: auth.APIKeyHeader, Value: restOnly.Key}, http.StatusForbidden, "FORBIDDEN"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := h.handler.Estimate(t.Context(), tollgate.Caller{Credential: tt.cred}, q)
			if e.Refusal == nil || e.Refusal.Status != tt.status || e.Refusal.Code != tt.code {
				t.Fatalf("refusal %+v, want %d %s", e.Refusal, tt.status, tt.code)
			}
			if e.Plan.Name != "" || e.Credits != 0 || len(e.APIs) != 0 {
				t.Errorf("an estimate for a refused caller tells %+v", e)
			}
		})
	}
	off := newHarness(t, config{gql: gql.Options{Disabled: true}})
	e := off.handler.Estimate(t.Context(), tollgate.Caller{Credential: auth.Credential{Kind: auth.APIKeyHeader, Value: acct.Key}}, q)
	if e.Refusal == nil || e.Refusal.Code != "GRAPHQL_NOT_SUPPORTED" {
		t.Errorf("a disabled gateway estimates %+v", e)
	}
}

// TestEstimateIsNotACall: estimates take nothing from the plan: on a plan of two calls
// a minute, five estimates leave both calls to the queries that follow.
func TestEstimateIsNotACall(t *testing.T) {
	h := newHarness(t, config{})
	acct := h.newAccount(t, "tiny", -1)
	caller := tollgate.Caller{Credential: auth.Credential{Kind: auth.APIKeyHeader, Value: acct.Key}}
	const q = `{ hash(text: "x") { hash } }`
	for range 5 {
		if e := h.handler.Estimate(t.Context(), caller, gql.Request{Query: q}); e.Refusal != nil || e.Credits != 1 {
			t.Fatalf("estimate: %+v", e)
		}
	}
	for range 2 {
		wantOK(t, h.query(t, acct.Key, q, nil))
	}
	wantError(t, h.query(t, acct.Key, q, nil), http.StatusTooManyRequests, "RATE_LIMITED")
}
