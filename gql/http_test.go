package gql_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/gql"
	"github.com/tollgate-dev/tollgate/internal/doortest"
	"github.com/tollgate-dev/tollgate/wire"
)

// TestMethods: POST only; every other method is 405 with Allow: POST (with or without
// a key), except the CORS preflight, which needs no key.
func TestMethods(t *testing.T) {
	h := newHarness(t, config{})
	acct := h.newAccount(t, "pro", -1)
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete, http.MethodPatch} {
		for _, hdrs := range [][]header{{apiKey(acct.Key)}, nil} {
			req := newRequest(t.Context(), m, "", hdrs...)
			if m == http.MethodGet {
				req.URL.RawQuery = "query=%7B__typename%7D"
			}
			rec, _ := serveRecorded(h.handler, req)
			if rec.Status != http.StatusMethodNotAllowed || rec.Header.Get("Allow") != "POST" {
				t.Errorf("%s: %d, Allow %q; want 405, Allow: POST", m, rec.Status, rec.Header.Get("Allow"))
			}
			if m == http.MethodHead {
				continue
			}
			r := h.serve(t, req)
			wantGatewayError(t, r, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "POST")
		}
	}

	req := newRequest(t.Context(), http.MethodOptions, "",
		header{"Origin", "https://app.example"}, header{"Access-Control-Request-Method", "POST"},
		header{"Access-Control-Request-Headers", "x-api-key, content-type"})
	r := h.serve(t, req)
	if r.Header.Get("Access-Control-Allow-Origin") != "*" ||
		!strings.Contains(r.Header.Get("Access-Control-Allow-Methods"), "POST") ||
		!strings.Contains(strings.ToLower(r.Header.Get("Access-Control-Allow-Headers")), "x-api-key") ||
		!strings.Contains(strings.ToLower(r.Header.Get("Access-Control-Allow-Headers")), "content-type") {
		t.Errorf("preflight headers %v", r.Header)
	}
	if h.runs.total() != 0 || h.balance(t, acct.ID) != 100000 {
		t.Error("a method refusal cost something")
	}
}

// TestContentType: the body must be application/json (UTF-8); other types are 415,
// after the key check.
func TestContentType(t *testing.T) {
	h := newHarness(t, config{})
	acct := h.newAccount(t, "pro", -1)
	body := gqlBody(t, `{ __typename }`, nil)
	tests := []struct {
		ct       string
		status   int
		fragment string
	}{
		{"", http.StatusUnsupportedMediaType, "application/json"},
		{"text/plain", http.StatusUnsupportedMediaType, "application/json"},
		{"application/graphql", http.StatusUnsupportedMediaType, "application/json"},
		{"application/x-www-form-urlencoded", http.StatusUnsupportedMediaType, "application/json"},
		{"application/json; charset=latin1", http.StatusUnsupportedMediaType, "UTF-8"},
		{"not a media type", http.StatusUnsupportedMediaType, "application/json"},
		{"application/json", http.StatusOK, ""},
		{"application/json; charset=utf-8", http.StatusOK, ""},
		{"Application/JSON; charset=UTF-8", http.StatusOK, ""},
	}
	for _, tt := range tests {
		t.Run(tt.ct, func(t *testing.T) {
			hdrs := []header{apiKey(acct.Key)}
			if tt.ct != "" {
				hdrs = append(hdrs, contentType(tt.ct))
			}
			r := h.serve(t, newRequest(t.Context(), http.MethodPost, body, hdrs...))
			if tt.status == http.StatusOK {
				wantOK(t, r)
				return
			}
			wantGatewayError(t, r, tt.status, "BAD_REQUEST", tt.fragment)
			wantCredits(t, r, "pro", 0, 100000)
		})
	}
}

// TestBodyShape: bodies that are not a GraphQL-over-HTTP request are 400 with either
// media type; null members are absent members.
func TestBodyShape(t *testing.T) {
	h := newHarness(t, config{})
	acct := h.newAccount(t, "pro", -1)
	bad := []struct{ name, body, fragment string }{
		{"not JSON", `{`, "JSON object"},
		{"empty", ``, "JSON object"},
		{"a list", `[{"query": "{ __typename }"}]`, "JSON object"},
		{"a string", `"{ __typename }"`, "JSON object"},
		{"null", `null`, "JSON object"},
		{"no query", `{}`, "query"},
		{"query null", `{"query": null}`, "query"},
		{"query a number", `{"query": 5}`, "query must be a string"},
		{"query an object", `{"query": {"a": 1}}`, "query must be a string"},
		{"variables a list", `{"query": "{ __typename }", "variables": [7]}`, "variables must be an object"},
		{"variables a string", `{"query": "{ __typename }", "variables": "{}"}`, "variables must be an object"},
		{"operationName a number", `{"query": "{ __typename }", "operationName": 1}`, "operationName must be a string"},
		{"extensions a list", `{"query": "{ __typename }", "extensions": []}`, "extensions must be an object"},
		{"trailing garbage", `{"query": "{ __typename }"} x`, "JSON object"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			for _, media := range []string{mediaGraphQL, mediaJSON} {
				r := h.post(t, acct.Key, tt.body, accept(media))
				wantGatewayError(t, r, http.StatusBadRequest, "BAD_REQUEST", tt.fragment)
				wantCredits(t, r, "pro", 0, 100000)
			}
		})
	}
	good := []string{
		`{"query": "{ __typename }", "variables": null, "operationName": null, "extensions": null}`,
		`{"query": "{ __typename }", "variables": {}, "extensions": {"persistedQuery": {}}}`,
		`{"query": "query Q { __typename }", "operationName": "Q"}`,
		`{"query": "{ __typename }", "unknown": 1}`,
	}
	for _, body := range good {
		data := wantOK(t, h.post(t, acct.Key, body))
		if data["__typename"] != "Query" {
			t.Errorf("%s: data %v", body, data)
		}
	}
}

// TestAcceptNegotiation: the answer is application/graphql-response+json when it is
// accepted or nothing is said, application/json when only that (or a wildcard) is;
// anything else is 406.
func TestAcceptNegotiation(t *testing.T) {
	h := newHarness(t, config{})
	acct := h.newAccount(t, "pro", -1)
	tests := []struct {
		accept []string
		want   string // "" for 406
	}{
		{nil, mediaGraphQL},
		{[]string{mediaGraphQL}, mediaGraphQL},
		{[]string{mediaJSON}, mediaJSON},
		{[]string{"*/*"}, mediaJSON},
		{[]string{"application/*"}, mediaJSON},
		{[]string{mediaJSON + ", " + mediaGraphQL}, mediaGraphQL},
		{[]string{mediaGraphQL + ";charset=utf-8, application/json;q=0.9"}, mediaGraphQL},
		{[]string{mediaJSON, mediaGraphQL}, mediaGraphQL},
		{[]string{mediaGraphQL + ";q=0, application/json"}, mediaJSON},
		{[]string{"text/html, */*;q=0.8"}, mediaJSON},
		{[]string{"text/html"}, ""},
		{[]string{"text/html, application/xml"}, ""},
		{[]string{"application/json;q=0"}, ""},
		{[]string{"application/json;q=0.0, text/html"}, ""},
		{[]string{mediaGraphQL + ";q=0.000, application/json;q=0.5"}, mediaJSON},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.accept, " | "), func(t *testing.T) {
			hdrs := []header{apiKey(acct.Key), contentType(mediaJSON)}
			for _, a := range tt.accept {
				hdrs = append(hdrs, accept(a))
			}
			r := h.serve(t, newRequest(t.Context(), http.MethodPost, gqlBody(t, hashQuery, nil), hdrs...))
			if tt.want == "" {
				wantGatewayError(t, r, http.StatusNotAcceptable, "NOT_ACCEPTABLE", mediaGraphQL, mediaJSON)
				wantCredits(t, r, "pro", 0, h.balance(t, acct.ID))
				return
			}
			wantOK(t, r)
			if got := r.Header.Get("Content-Type"); got != tt.want {
				t.Errorf("Content-Type %q, want %q", got, tt.want)
			}
		})
	}
}

// TestCORS: JSON answers to cross-origin requests carry the CORS headers, exposing the
// error code and credit headers, and answers to requests without an Origin none; with a
// list of origins, only those are allowed.
func TestCORS(t *testing.T) {
	h := newHarness(t, config{})
	acct := h.newAccount(t, "pro", -1)
	for _, q := range []string{hashQuery, `{ nope }`} {
		r := h.query(t, acct.Key, q, nil, header{"Origin", "https://anywhere.example"})
		expose := r.Header.Get("Access-Control-Expose-Headers")
		if r.Header.Get("Access-Control-Allow-Origin") != "*" || !strings.Contains(expose, "X-Credits-Remaining") || !strings.Contains(expose, wire.HeaderErrorCode) {
			t.Errorf("CORS headers %v", r.Header)
		}
		r = h.query(t, acct.Key, q, nil)
		if r.Header.Get("Access-Control-Allow-Origin") != "" || r.Header.Get("Access-Control-Expose-Headers") != "" {
			t.Errorf("without an Origin: CORS headers %v", r.Header)
		}
	}

	h = newHarness(t, config{gql: gql.Options{Edge: doortest.NewEdge(t, edge.Options{AllowedOrigins: []string{"https://app.example"}})}})
	acct = h.newAccount(t, "pro", -1)
	for _, c := range []struct {
		origin, want string
	}{{"https://app.example", "https://app.example"}, {"https://evil.example", ""}} {
		req := newRequest(t.Context(), http.MethodPost, gqlBody(t, hashQuery, nil), contentType(mediaJSON), apiKey(acct.Key), header{"Origin", c.origin})
		r, _ := serveRecorded(h.handler, req)
		if r.Status != http.StatusOK || r.Header.Get("Access-Control-Allow-Origin") != c.want || r.Header.Get("Vary") != "Origin" {
			t.Errorf("origin %s: %d, Allow-Origin %q, Vary %q", c.origin, r.Status, r.Header.Get("Access-Control-Allow-Origin"), r.Header.Get("Vary"))
		}
		pre, _ := serveRecorded(h.handler, newRequest(t.Context(), http.MethodOptions, "", header{"Origin", c.origin}, header{"Access-Control-Request-Method", "POST"}))
		if pre.Status != http.StatusNoContent || pre.Header.Get("Access-Control-Allow-Origin") != c.want {
			t.Errorf("preflight from %s: %d, Allow-Origin %q", c.origin, pre.Status, pre.Header.Get("Access-Control-Allow-Origin"))
		}
	}
}

// TestCreditHeadersEverywhere: every answer to an authenticated request carries the
// credit headers, whatever it says.
func TestCreditHeadersEverywhere(t *testing.T) {
	h := newHarness(t, config{})
	acct := h.newAccount(t, "pro", 10)
	cases := []struct {
		name string
		hdrs []header
		body string
		cost int64
	}{
		{"success", nil, gqlBody(t, hashQuery, nil), 1},
		{"introspection", nil, gqlBody(t, `{ __typename }`, nil), 0},
		{"parse error", nil, gqlBody(t, `{`, nil), 0},
		{"validation error", []header{accept(mediaJSON)}, gqlBody(t, `{ nope }`, nil), 0},
		{"bad body", nil, `[]`, 0},
		{"406", []header{accept("text/html")}, gqlBody(t, hashQuery, nil), 0},
		{"partial failure", nil, gqlBody(t, `{ fail { never } hash(text: "x") { hash } }`, nil), 1},
		{"plan refusal", nil, gqlBody(t, imageInfoURL, nil), 0},
	}
	balance := int64(10)
	for _, c := range cases {
		r := h.post(t, acct.Key, c.body, c.hdrs...)
		balance -= c.cost
		t.Run(c.name, func(t *testing.T) { wantCredits(t, r, "pro", c.cost, balance) })
	}
	r := h.serve(t, newRequest(t.Context(), http.MethodPost, gqlBody(t, hashQuery, nil), contentType("text/plain"), apiKey(acct.Key)))
	wantCredits(t, r, "pro", 0, balance)
}
