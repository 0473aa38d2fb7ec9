package gql_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/internal/doortest"
)

// fuzzStatuses are the statuses a POST with a good key and a JSON body may get.
var fuzzStatuses = map[int]bool{200: true, 400: true, 402: true, 403: true, 429: true}

// FuzzQuery posts random query documents, with random variables, through the handler:
// it never panics, the answer is always a well-formed GraphQL result (valid JSON with
// data and/or errors, each error with a code; see checkResponse), the status is one of
// 200, 400, 402, 403 and 429, and an answer other than 200 never changes the balance.
//
//	go test -run='^$' -fuzz=FuzzQuery -fuzztime=30s ./gql/
func FuzzQuery(f *testing.F) {
	seeds := []struct{ query, vars string }{
		{`{ __typename }`, ``},
		{hashQuery, ``},
		{threeAPIs, ``},
		{`{ a: hash(text: "x") { hash } b: hash(text: "x") { algorithm } c: hash(text: "y") { hash } }`, ``},
		{`{ dateinfo(date: "2024-02-29") { date day_of_week iso_week unix_seconds quarter_year _1st_of_month isleapyear } }`, ``},
		{`{ dateinfo(date: "2026-02-30") { date } hash(text: "hello") { hash } }`, ``},
		{`query Q($t: String!, $alg: HashAlgorithm = md5) { hash(text: $t, algorithm: $alg) { algorithm hash } }`, `{"t": "hello"}`},
		{`query($n: Int) { uuidgenerator(count: $n) { uuids count } }`, `{"n": "three"}`},
		{`query($n: Int) { uuidgenerator(count: $n) { uuids count } }`, `{"n": 1e300}`},
		{`query($s: Boolean!) { hash(text: "x") @skip(if: $s) { hash } echo(message: "m") @include(if: $s) { message } }`, `{"s": true}`},
		{`fragment H on HashResult { hash ...A } fragment A on HashResult { algorithm } { hash(text: "x") { ...H ... on HashResult { __typename } } }`, ``},
		{`fragment Q on Query { ...Q } { ...Q }`, ``},
		{`{ nested { level1 { level2 { level3 { value } } } } }`, ``},
		{`{ richtypes(tags: "one", ids: 7, points: {x: 3}, point: {x: 1, label: "p"}) { echo summary { first_tag } items { value_x sub { ok } } big } }`, ``},
		{`query($p: RichtypesPointInput) { richtypes(tags: [], point: $p) { echo } }`, `{"p": {"x": "nan", "z": 1}}`},
		{`{ imageinfo(url: "https://example.com/a.png") { format } }`, ``},
		{`{ fail { never } costly { ok } freeform }`, ``},
		{`{ echo(message: "slow", delay_ms: 5000) { message } }`, ``},
		{`mutation { hash(text: "x") { hash } }`, ``},
		{`subscription { echo(message: "m") { message } }`, ``},
		{`query A { __typename } query B { hash(text: "x") { hash } }`, ``},
		{`{ __schema { types { name fields { name args { name defaultValue } } } } }`, ``},
		{`{ __type(name: "Query") { fields { name type { ofType { name } } } } }`, ``},
		{"{" + strings.Repeat(" a: hash(text: \"x\") { hash }", 30) + "}", ``},
		{strings.Repeat("{ nested { level1 ", 40) + strings.Repeat("} ", 80), ``},
		{`{ hash(text: "\u0000\uffff\\") { hash } }`, `{"": null}`},
		{`{`, ``},
		{`}}}{{{`, `[]`},
		{"\x00\xff garbage \"", `null`},
		{`query($v: [[Int!]!]) { __typename }`, `{"v": [[1], 2, null]}`},
		{`{ uuidgenerator(count: 99999999999999999999) { count } uuidgenerator(count: 99999999999999999999) { uuids } }`, ``},
		{`{ echo(message: "m", delay_ms: 1e400) { message } echo(message: "m", delay_ms: 1e400) { message } }`, ``},
	}
	for _, s := range seeds {
		f.Add(s.query, s.vars)
	}
	extra := richAPIs()
	for _, a := range testAPIs(doortest.NewBlocker()) {
		if a.ID != "block" { // it would wait for the test to release it
			extra = append(extra, a)
		}
	}
	h := newHarness(f, config{
		sampleOnly: true, extra: extra,
		plans: []billing.Plan{{Name: "fuzz", Credits: 1 << 50, GraphQLMaxAPIs: 3}},
		svc:   tollgate.Options{CallTimeout: 20 * time.Millisecond},
	})
	acct := h.newAccount(f, "fuzz", -1)
	f.Fuzz(func(t *testing.T, query, vars string) {
		body := map[string]any{"query": query}
		if json.Valid([]byte(vars)) {
			body["variables"] = json.RawMessage(vars)
		}
		raw, err := json.Marshal(body) // invalid UTF-8 in query is replaced, not refused
		if err != nil {
			t.Fatal(err)
		}
		media := mediaGraphQL
		if len(query)%2 == 1 {
			media = mediaJSON
		}
		before := h.balance(t, acct.ID)
		req := newRequest(t.Context(), http.MethodPost, string(raw), contentType(mediaJSON), apiKey(acct.Key), accept(media))
		r, _ := serveRecorded(h.handler, req)
		if err := checkResponse(req, r); err != nil {
			t.Fatalf("%v\nquery %q vars %q\nanswer %d %s", err, query, vars, r.Status, truncate(r.Body))
		}
		if !fuzzStatuses[r.Status] || r.Edge {
			t.Fatalf("status %d for query %q vars %q: %s", r.Status, query, vars, truncate(r.Body))
		}
		if r.Status != http.StatusOK {
			if after := h.balance(t, acct.ID); after != before {
				t.Fatalf("a %d answer changed the balance from %d to %d: query %q vars %q: %s", r.Status, before, after, query, vars, truncate(r.Body))
			}
		}
	})
}

// FuzzRequestBody posts arbitrary bytes, with arbitrary Content-Type and Accept
// headers, through the handler: the parsing of the request itself (media types, the
// JSON body, its query, operationName and variables). The answer is always a
// well-formed GraphQL result (see checkResponse) with a status the gateway gives, and
// a refused request never changes the balance.
//
//	go test -run='^$' -fuzz=FuzzRequestBody -fuzztime=30s ./gql/
func FuzzRequestBody(f *testing.F) {
	for _, s := range []struct{ body, contentType, accept string }{
		{`{"query":"{ __typename }"}`, mediaJSON, mediaGraphQL},
		{`{"query":"{ hash(text: \"x\") { hash } }","operationName":null,"variables":null,"extensions":{}}`, mediaJSON, ""},
		{`{"query":"query Q($t: String!) { hash(text: $t) { hash } }","operationName":"Q","variables":{"t":"x"}}`, "application/json; charset=utf-8", "application/json;q=0.9, */*;q=0.1"},
		{`{"query":5}`, mediaJSON, mediaJSON},
		{`{"query":"{ __typename }","variables":[]}`, mediaJSON, mediaJSON},
		{`{"query":"{ __typename }","operationName":{}}`, mediaJSON, mediaJSON},
		{`{"query":"{ __typename }"}{"query":"x"}`, mediaJSON, mediaJSON},
		{`{"Query":"{ __typename }"}`, mediaJSON, mediaJSON},
		{`[{"query":"{ __typename }"}]`, mediaJSON, mediaJSON},
		{`{"query":"{ __typename }"}`, "application/json; charset=latin1", mediaJSON},
		{`{"query":"{ __typename }"}`, "multipart/form-data; boundary=x", mediaJSON},
		{`{"query":"{ __typename }"}`, "application/graphql", mediaJSON},
		{`{"query":"{ __typename }"}`, "", "text/html"},
		{`{"query":"{ __typename }"}`, ";;;", "application/json;q=0, application/graphql-response+json;q=0.000"},
		{"{\"query\":\"{ __typename }\",\"variables\":{\"\xff\":\"\x00\"}}", mediaJSON, mediaJSON},
		{`{"query":"` + strings.Repeat(`{ a `, 5000) + `"}`, mediaJSON, mediaJSON},
		{``, mediaJSON, mediaJSON},
		{`null`, mediaJSON, mediaJSON},
	} {
		f.Add([]byte(s.body), s.contentType, s.accept)
	}
	h := newHarness(f, config{sampleOnly: true,
		plans: []billing.Plan{{Name: "fuzz", Credits: 1 << 50, GraphQLMaxAPIs: 3}},
		svc:   tollgate.Options{CallTimeout: 20 * time.Millisecond}})
	acct := h.newAccount(f, "fuzz", -1)
	f.Fuzz(func(t *testing.T, body []byte, contentType, accept string) {
		before := h.balance(t, acct.ID)
		req := newRequest(t.Context(), http.MethodPost, string(body), apiKey(acct.Key))
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		r, _ := serveRecorded(h.handler, req)
		if err := checkResponse(req, r); err != nil {
			t.Fatalf("%v\nbody %q Content-Type %q Accept %q\nanswer %d %s", err, body, contentType, accept, r.Status, truncate(r.Body))
		}
		if !fuzzStatuses[r.Status] && r.Status != http.StatusNotAcceptable && r.Status != http.StatusUnsupportedMediaType || r.Edge {
			t.Fatalf("status %d for body %q Content-Type %q Accept %q: %s", r.Status, body, contentType, accept, truncate(r.Body))
		}
		if r.Status != http.StatusOK && h.balance(t, acct.ID) != before {
			t.Fatalf("a %d answer changed the balance: body %q", r.Status, body)
		}
	})
}
