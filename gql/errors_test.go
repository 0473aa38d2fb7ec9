package gql_test

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/gql"
	"github.com/tollgate-dev/tollgate/wire"
)

const (
	hashQuery    = `{ hash(text: "hello") { hash } }`
	helloSHA256  = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
	threeAPIs    = `{ hash(text: "a") { hash } uuidgenerator { count } echo(message: "m") { message } }`
	unknownKey   = "9b2d7a4e-3c1f-4e8a-b5d6-0123456789ab"
	imageInfoURL = `{ imageinfo(url: "https://example.com/a.png") { format width } }`
)

// TestEdgeRejections sends requests without a well-formed key: the edge's bare HTML
// 403 (no JSON, no CORS, no credit header), whatever the rest of the request is.
func TestEdgeRejections(t *testing.T) {
	h := newHarness(t, config{})
	body := gqlBody(t, hashQuery, nil)
	tests := []struct {
		name string
		hdrs []header
	}{
		{"no key", nil},
		{"empty key", []header{apiKey("")}},
		{"the text undefined", []header{apiKey("undefined")}},
		{"a placeholder", []header{apiKey("YOUR_API_KEY")}},
		{"a truncated UUID", []header{apiKey(unknownKey[:30])}},
		{"a bearer placeholder", []header{{"Authorization", "Bearer <API_KEY>"}}},
		{"no key and no Content-Type", []header{{"Content-Type", ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hdrs := append([]header{contentType(mediaJSON)}, tt.hdrs...)
			r := h.serve(t, newRequest(t.Context(), http.MethodPost, body, hdrs...))
			if !r.Edge {
				t.Fatalf("got %d %s, want the edge 403", r.Status, truncate(r.Body))
			}
		})
	}
	if n := h.runs.total(); n != 0 {
		t.Errorf("%d APIs ran", n)
	}
}

// TestUnreadableLiterals: a string literal graphql-go's lexer took with a sign before
// it, which made graphql-go panic when it compared the arguments of two fields of one
// name, is refused as an invalid query, before anything runs, as it is alone.
func TestUnreadableLiterals(t *testing.T) {
	h := newHarness(t, config{})
	acct := h.newAccount(t, "pro", -1)
	for _, q := range []string{
		`{ hash(text: -"") { hash } }`,
		`{ hash(text: -"") { hash } hash(text: "") { hash } }`,
		`{ a: hash(text: -"x") { hash } a: hash(text: -"x") { algorithm } }`,
	} {
		for _, media := range []string{mediaGraphQL, mediaJSON} {
			r := h.query(t, acct.Key, q, nil, accept(media))
			if r.Status != map[string]int{mediaGraphQL: http.StatusBadRequest, mediaJSON: http.StatusOK}[media] || r.HasData ||
				len(r.Errors) != 1 || r.Errors[0].Code() != "GRAPHQL_VALIDATION_FAILED" {
				t.Errorf("%s: %d %s; want a validation error", q, r.Status, r.Body)
			}
			wantCredits(t, r, "pro", 0, 100000)
		}
	}
	if n := h.runs.total(); n != 0 {
		t.Errorf("%d APIs ran", n)
	}
}

// TestInvalidAPIKey: a well-formed key that matches no account is 401 INVALID_API_KEY
// (with either media type), and only that.
func TestInvalidAPIKey(t *testing.T) {
	h := newHarness(t, config{})
	for _, media := range []string{mediaGraphQL, mediaJSON} {
		for _, hd := range []header{apiKey(unknownKey), {"Authorization", "Bearer " + unknownKey}} {
			r := h.serve(t, newRequest(t.Context(), http.MethodPost, gqlBody(t, hashQuery, nil), contentType(mediaJSON), accept(media), hd))
			wantGatewayError(t, r, http.StatusUnauthorized, "INVALID_API_KEY", "unauthorized")
			wantNoCredits(t, r)
		}
	}
	// Even a query that needs no API, or an invalid one, is answered by the key check.
	for _, q := range []string{`{ __typename }`, `{`} {
		wantGatewayError(t, h.query(t, unknownKey, q, nil), http.StatusUnauthorized, "INVALID_API_KEY")
	}
}

// TestForbidden: a valid key blocked by its restrictions is 403 FORBIDDEN, and nothing
// is charged or run.
func TestForbidden(t *testing.T) {
	h := newHarness(t, config{})
	acct := h.newAccount(t, "pro", -1)
	soon := t0.Add(time.Hour)
	restOnly := h.newSubKey(t, acct, "rest-only", auth.RestrictionSpec{Channels: []string{"rest"}})
	mcpRest := h.newSubKey(t, acct, "not-graphql", auth.RestrictionSpec{Channels: []string{"rest", "mcp"}})
	hashOnly := h.newSubKey(t, acct, "hash-only", auth.RestrictionSpec{APIs: []string{"hash"}})
	graphqlOnly := h.newSubKey(t, acct, "graphql-only", auth.RestrictionSpec{Channels: []string{"graphql"}})
	office := h.newSubKey(t, acct, "office", auth.RestrictionSpec{AllowedIPs: []string{"10.0.0.0/8"}})
	expired := h.newSubKey(t, acct, "expired", auth.RestrictionSpec{ExpiresAt: &soon})
	h.clock.Advance(2 * time.Hour) // the expired key's hour is over
	revoked := h.newSubKey(t, acct, "revoked", auth.RestrictionSpec{})
	if _, err := h.mgr.RevokeKey(context.Background(), revoked.KeyID); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name     string
		key      string
		query    string
		fragment string
		// authenticated answers (the key is fine, the call is not) carry credit headers.
		authenticated bool
	}{
		{"key limited to the rest channel", restOnly.Key, hashQuery, "graphql", false},
		{"key limited to rest and mcp", mcpRest.Key, `{ __typename }`, "graphql", false},
		{"key limited to hash, asking for echo", hashOnly.Key, `{ echo(message: "m") { message } }`, "echo", true},
		{"key limited to hash, asking for hash and echo", hashOnly.Key, `{ hash(text: "x") { hash } echo(message: "m") { message } }`, "echo", true},
		{"address outside the allow-list", office.Key, hashQuery, "", false},
		{"expired key", expired.Key, hashQuery, "expired", false},
		{"revoked key", revoked.Key, hashQuery, "revoked", false},
		{"revoked key, introspection only", revoked.Key, `{ __typename }`, "revoked", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.query(t, tt.key, tt.query, nil)
			wantGatewayError(t, r, http.StatusForbidden, "FORBIDDEN", tt.fragment)
			if tt.authenticated {
				wantCredits(t, r, "pro", 0, 100000)
			} else {
				wantNoCredits(t, r)
			}
		})
	}
	// The same keys where their restrictions allow the call.
	wantOK(t, h.query(t, hashOnly.Key, hashQuery, nil))
	wantOK(t, h.query(t, graphqlOnly.Key, hashQuery, nil))
	wantOK(t, h.query(t, hashOnly.Key, `{ __typename }`, nil))
	req := newRequest(t.Context(), http.MethodPost, gqlBody(t, hashQuery, nil), contentType(mediaJSON), apiKey(office.Key))
	req.RemoteAddr = "10.1.2.3:4567"
	wantOK(t, h.serve(t, req))
	if got := h.balance(t, acct.ID); got != 100000-3 {
		t.Errorf("balance %d, want %d: only the three allowed queries are charged", got, 100000-3)
	}
	if got := h.runs.get("echo"); got != 0 {
		t.Errorf("echo ran %d times", got)
	}
}

// TestPlanLimitExceeded: a free key may name one API per query. Two are 403
// PLAN_LIMIT_EXCEEDED naming the ceiling and the number, before anything runs; the same
// API twice is one API.
func TestPlanLimitExceeded(t *testing.T) {
	h := newHarness(t, config{})
	free := h.newAccount(t, "free", -1)
	pro := h.newAccount(t, "pro", -1)
	for _, media := range []string{mediaGraphQL, mediaJSON} {
		r := h.query(t, free.Key, `{ hash(text: "a") { hash } echo(message: "b") { message } }`, nil, accept(media))
		e := wantGatewayError(t, r, http.StatusForbidden, "PLAN_LIMIT_EXCEEDED", "2 APIs", "allows 1", "free")
		wantCredits(t, r, "free", 0, 50)
		t.Logf("message: %s", e.Message)
	}
	r := h.query(t, free.Key, threeAPIs, nil)
	wantGatewayError(t, r, http.StatusForbidden, "PLAN_LIMIT_EXCEEDED", "3 APIs", "allows 1")
	if n := h.runs.total(); n != 0 {
		t.Errorf("%d APIs ran", n)
	}
	if got := h.balance(t, free.ID); got != 50 {
		t.Errorf("balance %d, want 50", got)
	}

	// One API under two aliases: one API.
	data := wantOK(t, h.query(t, free.Key, `{ a: hash(text: "a") { hash } b: hash(text: "a") { algorithm } }`, nil))
	if len(data) != 2 {
		t.Errorf("data %v", data)
	}
	if got := h.balance(t, free.ID); got != 49 {
		t.Errorf("balance %d, want 49", got)
	}
	// A paid plan takes several.
	wantOK(t, h.query(t, pro.Key, threeAPIs, nil))
}

// TestFileUploadNotSupported: a query naming a file API is 400
// FILE_UPLOAD_NOT_SUPPORTED naming it, before anything runs; so is a multipart request.
func TestFileUploadNotSupported(t *testing.T) {
	h := newHarness(t, config{})
	acct := h.newAccount(t, "pro", -1)
	for _, q := range []string{
		imageInfoURL,
		`{ imageinfo { format } }`,
		`{ hash(text: "a") { hash } imageinfo(url: "https://example.com/a.png") { format } }`,
		`{ a: imageinfo(url: "https://example.com/a.png") { format } b: imageinfo(url: "https://example.com/b.png") { bytes } }`,
	} {
		for _, media := range []string{mediaGraphQL, mediaJSON} {
			r := h.query(t, acct.Key, q, nil, accept(media))
			e := wantGatewayError(t, r, http.StatusBadRequest, "FILE_UPLOAD_NOT_SUPPORTED", "imageinfo", "image-info", "REST")
			if strings.Count(e.Message, "imageinfo") != 1 {
				t.Errorf("the message names the API more than once: %q", e.Message)
			}
			wantCredits(t, r, "pro", 0, 100000)
		}
	}

	body, ct := multipartBody(t)
	r := h.serve(t, newRequest(t.Context(), http.MethodPost, body, contentType(ct), apiKey(acct.Key)))
	wantGatewayError(t, r, http.StatusBadRequest, "FILE_UPLOAD_NOT_SUPPORTED", "REST")
	wantCredits(t, r, "pro", 0, 100000)

	if n := h.runs.total(); n != 0 {
		t.Errorf("%d APIs ran", n)
	}
	if got := h.balance(t, acct.ID); got != 100000 {
		t.Errorf("balance %d, want 100000", got)
	}
}

// multipartBody returns a GraphQL multipart request (the graphql-multipart-request
// convention) and its Content-Type.
func multipartBody(t testing.TB) (string, string) {
	t.Helper()
	const boundary = "tollgateboundary"
	var b strings.Builder
	part := func(name, filename, content string) {
		b.WriteString("--" + boundary + "\r\nContent-Disposition: form-data; name=\"" + name + "\"")
		if filename != "" {
			b.WriteString("; filename=\"" + filename + "\"\r\nContent-Type: image/png")
		}
		b.WriteString("\r\n\r\n" + content + "\r\n")
	}
	part("operations", "", `{"query": "query($f: Upload) { imageinfo(image: $f) { format } }", "variables": {"f": null}}`)
	part("map", "", `{"0": ["variables.f"]}`)
	part("0", "a.png", "\x89PNG\r\n\x1a\n")
	b.WriteString("--" + boundary + "--\r\n")
	return b.String(), "multipart/form-data; boundary=" + boundary
}

// TestInsufficientCredits: a balance that does not cover the whole query is 402
// INSUFFICIENT_CREDITS, and no API runs (the counting handlers prove it).
func TestInsufficientCredits(t *testing.T) {
	h := newHarness(t, config{})
	acct := h.newAccount(t, "pro", 2)
	for _, media := range []string{mediaGraphQL, mediaJSON} {
		r := h.query(t, acct.Key, threeAPIs, nil, accept(media))
		wantGatewayError(t, r, http.StatusPaymentRequired, "INSUFFICIENT_CREDITS", "credit")
		wantCredits(t, r, "pro", 0, 2)
	}
	// costly alone costs 3.
	wantGatewayError(t, h.query(t, acct.Key, `{ costly { ok } }`, nil), http.StatusPaymentRequired, "INSUFFICIENT_CREDITS")
	if n := h.runs.total(); n != 0 {
		t.Errorf("%d APIs ran after a 402", n)
	}
	if got := h.balance(t, acct.ID); got != 2 {
		t.Errorf("balance %d, want 2", got)
	}
	// Two APIs fit exactly, and leave nothing.
	r := h.query(t, acct.Key, `{ hash(text: "a") { hash } echo(message: "m") { message } }`, nil)
	wantOK(t, r)
	wantCredits(t, r, "pro", 2, 0)
	r = h.query(t, acct.Key, hashQuery, nil)
	wantGatewayError(t, r, http.StatusPaymentRequired, "INSUFFICIENT_CREDITS")
	wantCredits(t, r, "pro", 0, 0)
	// A query that needs no API still works at zero.
	wantOK(t, h.query(t, acct.Key, `{ __typename }`, nil))
	if n := h.runs.total(); n != 2 {
		t.Errorf("%d APIs ran, want 2", n)
	}
}

// TestQueryTooComplex: queries beyond the limits are 400 QUERY_TOO_COMPLEX before
// anything runs; queries at the limits pass.
func TestQueryTooComplex(t *testing.T) {
	limits := gql.Limits{MaxRootFields: 3, MaxDepth: 3, MaxQueryBytes: 400, MaxSelections: 8}
	h := newHarness(t, config{gql: gql.Options{Limits: limits}})
	acct := h.newAccount(t, "pro", -1)
	aliases := func(n int) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			b.WriteString(" h" + strconv.Itoa(i) + `: hash(text: "x") { hash }`)
		}
		return b.String() + " }"
	}
	tests := []struct {
		name, query string
		fragments   []string
	}{
		{"too many aliases", aliases(4), []string{"4 API fields", "at most 3"}},
		{"too many API fields", `{ hash(text: "a") { hash } echo(message: "b") { message } uuidgenerator { count } dateinfo(date: "2024-01-01") { date } }`, []string{"4 API fields"}},
		{"too deep", `{ nested { level1 { level2 { level3 { value } } } } }`, []string{"5 levels", "at most 3"}},
		{"too deep by one", `{ nested { level1 { level2 { level3 { __typename } } } } }`, []string{"4 levels"}},
		{"too deep through an inline fragment", `{ nested { level1 { ... on NestedResultLevel1 { level2 { level3 { value } } } } } }`, []string{"levels"}},
		{"too deep through a fragment", `fragment L on NestedResultLevel1 { level2 { level3 { value } } } { nested { level1 { ...L } } }`, []string{"levels"}},
		{"too many selections", `{ a: hash(text: "a") { hash algorithm } b: hash(text: "a") { hash algorithm } c: hash(text: "a") { hash algorithm } }`, []string{"selects 9 fields", "at most 8"}},
		{"too long", `{ hash(text: "` + strings.Repeat("x", 400) + `") { hash } }`, []string{"bytes", "at most 400"}},
		{"too long, whitespace", "{" + strings.Repeat(" ", 400) + "__typename }", []string{"bytes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, media := range []string{mediaGraphQL, mediaJSON} {
				r := h.query(t, acct.Key, tt.query, nil, accept(media))
				wantGatewayError(t, r, http.StatusBadRequest, "QUERY_TOO_COMPLEX", tt.fragments...)
				wantCredits(t, r, "pro", 0, 100000)
			}
		})
	}
	if n := h.runs.total(); n != 0 {
		t.Errorf("%d APIs ran", n)
	}
	// At the limits.
	for _, q := range []string{
		aliases(3),
		`{ nested { level1 { level2 { __typename } } } }`,
		`{ a: hash(text: "a") { hash algorithm } b: hash(text: "a") { hash algorithm } c: hash(text: "a") { hash } }`,
	} {
		wantOK(t, h.query(t, acct.Key, q, nil))
	}

	// A body larger than the gateway reads at all.
	big := `{"query": "{ __typename }", "variables": {"pad": "` + strings.Repeat("x", 1<<20) + `"}}`
	r := h.post(t, acct.Key, big)
	wantGatewayError(t, r, http.StatusBadRequest, "QUERY_TOO_COMPLEX", "bytes")
}

// TestBadUserInput: arguments the catalog refuses, and variables of the wrong type, are
// 400 BAD_USER_INPUT naming the field and parameter, never charged, nothing run.
func TestBadUserInput(t *testing.T) {
	h := newHarness(t, config{})
	acct := h.newAccount(t, "pro", -1)
	tests := []struct {
		name, query string
		vars        map[string]any
		fragments   []string
	}{
		{"empty required string", `{ hash(text: "") { hash } }`, nil, []string{"hash", `"text"`}},
		{"above the maximum", `{ uuidgenerator(count: 101) { count } }`, nil, []string{"uuidgenerator", `"count"`, "100"}},
		{"below the minimum", `{ echo(message: "m", delay_ms: -1) { message } }`, nil, []string{"echo", `"delay_ms"`}},
		{"too long", `{ echo(message: "` + strings.Repeat("m", 1001) + `") { message } }`, nil, []string{"echo", `"message"`}},
		{"date of the wrong shape", `{ dateinfo(date: "29/02/2024") { date } }`, nil, []string{"dateinfo", `"date"`}},
		{"string variable for an Int", `query($c: Int) { uuidgenerator(count: $c) { count } }`, map[string]any{"c": "three"}, []string{"uuidgenerator", `"count"`, "integer"}},
		{"fractional variable for an Int", `query($c: Int) { uuidgenerator(count: $c) { count } }`, map[string]any{"c": 1.5}, []string{`"count"`}},
		{"number variable for a String", `query($t: String!) { hash(text: $t) { hash } }`, map[string]any{"t": 42}, []string{`"text"`, "string"}},
		{"one bad call beside a good one", `{ hash(text: "ok") { hash } uuidgenerator(count: 0) { count } }`, nil, []string{"uuidgenerator"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.query(t, acct.Key, tt.query, tt.vars)
			wantGatewayError(t, r, http.StatusBadRequest, "BAD_USER_INPUT", tt.fragments...)
			wantCredits(t, r, "pro", 0, 100000)
		})
	}
	if n := h.runs.total(); n != 0 {
		t.Errorf("%d APIs ran", n)
	}
}

// TestRateLimited: past the plan's rate, 429 RATE_LIMITED with Retry-After, nothing
// charged; once the clock moves on, the next query passes. Queries that run no API do
// not count.
func TestRateLimited(t *testing.T) {
	h := newHarness(t, config{})
	acct := h.newAccount(t, "tiny", -1) // 2 per minute, 5 credits
	for range 2 {
		wantOK(t, h.query(t, acct.Key, hashQuery, nil))
		wantOK(t, h.query(t, acct.Key, `{ __typename }`, nil))
	}
	for _, media := range []string{mediaGraphQL, mediaJSON} {
		r := h.query(t, acct.Key, hashQuery, nil, accept(media))
		wantGatewayError(t, r, http.StatusTooManyRequests, "RATE_LIMITED")
		ra, err := strconv.Atoi(r.Header.Get("Retry-After"))
		if err != nil || ra < 1 || ra > 60 {
			t.Errorf("Retry-After %q, want 1..60 seconds", r.Header.Get("Retry-After"))
		}
		wantCredits(t, r, "tiny", 0, 3)
		if r.Header.Get(wire.HeaderRateLimit) != "2" {
			t.Errorf("%s = %q, want 2", wire.HeaderRateLimit, r.Header.Get(wire.HeaderRateLimit))
		}
	}
	if got := h.balance(t, acct.ID); got != 3 {
		t.Errorf("balance %d, want 3", got)
	}
	h.clock.Advance(time.Minute)
	wantOK(t, h.query(t, acct.Key, hashQuery, nil))
	if got := h.runs.get("hash"); got != 3 {
		t.Errorf("hash ran %d times, want 3", got)
	}
}

// TestConcurrencyLimited: while one query holds the plan's only slot, the next is 429
// CONCURRENCY_LIMITED, not charged; the first finishes normally.
func TestConcurrencyLimited(t *testing.T) {
	h := newHarness(t, config{})
	acct := h.newAccount(t, "solo", -1) // one call at a time, 100 credits
	first := h.goQuery(t, acct.Key, `{ block { released } }`)
	h.block.WaitEntered(t)
	for _, media := range []string{mediaGraphQL, mediaJSON} {
		r := h.query(t, acct.Key, hashQuery, nil, accept(media))
		wantGatewayError(t, r, http.StatusTooManyRequests, "CONCURRENCY_LIMITED", "concurren")
		wantCredits(t, r, "solo", 0, 99)
	}
	h.block.Release()
	r := <-first
	if r.Status != http.StatusOK || string(r.Data) != `{"block":{"released":true}}` {
		t.Errorf("the blocked query: %d %s", r.Status, r.Body)
	}
	wantOK(t, h.query(t, acct.Key, hashQuery, nil))
	if got := h.balance(t, acct.ID); got != 98 {
		t.Errorf("balance %d, want 98", got)
	}
	if got := h.runs.get("hash"); got != 1 {
		t.Errorf("hash ran %d times, want 1", got)
	}
}

// TestGraphQLNotSupported: with Options.Disabled every request is 403
// GRAPHQL_NOT_SUPPORTED, with or without a key, whatever the method.
func TestGraphQLNotSupported(t *testing.T) {
	h := newHarness(t, config{gql: gql.Options{Disabled: true}})
	acct := h.newAccount(t, "pro", -1)
	reqs := []*http.Request{
		newRequest(t.Context(), http.MethodPost, gqlBody(t, hashQuery, nil), contentType(mediaJSON), apiKey(acct.Key)),
		newRequest(t.Context(), http.MethodPost, gqlBody(t, `{ __typename }`, nil), contentType(mediaJSON), apiKey(acct.Key), accept(mediaJSON)),
		newRequest(t.Context(), http.MethodPost, gqlBody(t, hashQuery, nil), contentType(mediaJSON)),
		newRequest(t.Context(), http.MethodGet, "", apiKey(acct.Key)),
	}
	for _, req := range reqs {
		r := h.serve(t, req)
		wantGatewayError(t, r, http.StatusForbidden, "GRAPHQL_NOT_SUPPORTED", "REST")
	}
	if got := h.balance(t, acct.ID); got != 100000 || h.runs.total() != 0 {
		t.Errorf("balance %d, %d runs", got, h.runs.total())
	}
}

// TestAPIError: an API that fails on the service's side is null beside an API_ERROR
// error with its path, in a 200; it is refunded, and its internal error is not shown.
func TestAPIError(t *testing.T) {
	h := newHarness(t, config{})
	acct := h.newAccount(t, "pro", -1)
	tests := []struct {
		name, query string
		failing     []string
		cost        int64
	}{
		{"alone", `{ fail { never } }`, []string{"fail"}, 0},
		{"panic", `{ panic { never } }`, []string{"panic"}, 0},
		{"beside a good call", `{ fail { never } hash(text: "hello") { hash } }`, []string{"fail"}, 1},
		{"two failing, one good", `{ fail { never } panic { never } echo(message: "m") { message } }`, []string{"fail", "panic"}, 1},
	}
	balance := int64(100000)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, media := range []string{mediaGraphQL, mediaJSON} {
				r := h.query(t, acct.Key, tt.query, nil, accept(media))
				if r.Status != http.StatusOK || !r.HasData || len(r.Errors) != len(tt.failing) {
					t.Fatalf("got %d %s, want 200 with data and %d errors", r.Status, r.Body, len(tt.failing))
				}
				data := r.DataMap(t)
				// The errors come in the order the calls end.
				byPath := map[any]gqlError{}
				for _, e := range r.Errors {
					if len(e.Path) == 1 {
						byPath[e.Path[0]] = e
					}
				}
				for _, name := range tt.failing {
					e, ok := byPath[name]
					if !ok || e.Code() != "API_ERROR" {
						t.Errorf("no API_ERROR at [%s] in %+v", name, r.Errors)
					}
					if strings.Contains(e.Message, "secret") || !strings.Contains(e.Message, "not charged") {
						t.Errorf("message %q", e.Message)
					}
					if v, ok := data[name]; !ok || v != nil {
						t.Errorf("data.%s = %v, want null", name, v)
					}
				}
				if r.Header.Get(wire.HeaderErrorCode) != "" {
					t.Errorf("a partial answer carries X-Error-Code %s", r.Header.Get(wire.HeaderErrorCode))
				}
				balance -= tt.cost
				wantCredits(t, r, "pro", tt.cost, balance)
			}
		})
	}
	if got := h.balance(t, acct.ID); got != balance {
		t.Errorf("balance %d, want %d", got, balance)
	}
}

// TestRequestErrors: documents graphql-go cannot parse or validate, and operations the
// gateway does not offer, are answered with errors and no data: 400 for
// graphql-response+json, 200 for application/json, as GraphQL over HTTP says. Nothing
// is charged or run, and the credit headers are there.
func TestRequestErrors(t *testing.T) {
	h := newHarness(t, config{})
	acct := h.newAccount(t, "pro", -1)
	tests := []struct {
		name, query string
		vars        map[string]any
		op          string
		code        string
		fragments   []string
	}{
		{"unclosed brace", `{`, nil, "", "GRAPHQL_PARSE_FAILED", []string{"syntax"}},
		{"garbage", `hello world`, nil, "", "GRAPHQL_PARSE_FAILED", nil},
		{"empty document", ``, nil, "", "GRAPHQL_VALIDATION_FAILED", []string{"no operations"}},
		{"unterminated string", `{ hash(text: "x) { hash } }`, nil, "", "GRAPHQL_PARSE_FAILED", nil},
		{"unknown field", `{ nope }`, nil, "", "GRAPHQL_VALIDATION_FAILED", []string{"nope"}},
		{"unknown result field", `{ hash(text: "x") { nope } }`, nil, "", "GRAPHQL_VALIDATION_FAILED", []string{"nope"}},
		{"missing selection", `{ hash(text: "x") }`, nil, "", "GRAPHQL_VALIDATION_FAILED", nil},
		{"missing required argument", `{ hash { hash } }`, nil, "", "GRAPHQL_VALIDATION_FAILED", []string{"text"}},
		{"unknown argument", `{ hash(text: "x", salt: "y") { hash } }`, nil, "", "GRAPHQL_VALIDATION_FAILED", []string{"salt"}},
		{"literal of the wrong type", `{ hash(text: 5) { hash } }`, nil, "", "GRAPHQL_VALIDATION_FAILED", nil},
		{"value outside the enum", `{ hash(text: "x", algorithm: sha3) { hash } }`, nil, "", "GRAPHQL_VALIDATION_FAILED", []string{"sha3"}},
		{"enum as a string", `{ hash(text: "x", algorithm: "md5") { hash } }`, nil, "", "GRAPHQL_VALIDATION_FAILED", nil},
		{"missing required variable", `query($t: String!) { hash(text: $t) { hash } }`, nil, "", "GRAPHQL_VALIDATION_FAILED", []string{`"t"`, "String!"}},
		{"null for a required variable", `query($t: String!) { hash(text: $t) { hash } }`, map[string]any{"t": nil}, "", "GRAPHQL_VALIDATION_FAILED", nil},
		{"undeclared variable", `{ hash(text: $t) { hash } }`, nil, "", "GRAPHQL_VALIDATION_FAILED", []string{"$t"}},
		{"unknown fragment", `{ ...Nope }`, nil, "", "GRAPHQL_VALIDATION_FAILED", []string{"Nope"}},
		{"two operations, none chosen", `query A { __typename } query B { __typename }`, nil, "", "GRAPHQL_VALIDATION_FAILED", nil},
		{"unknown operation name", `query A { hash(text: "x") { hash } }`, nil, "B", "GRAPHQL_VALIDATION_FAILED", nil},
		{"mutation", `mutation { hash(text: "x") { hash } }`, nil, "", "OPERATION_NOT_SUPPORTED", []string{"mutation", "not supported"}},
		{"mutation, typename", `mutation { __typename }`, nil, "", "OPERATION_NOT_SUPPORTED", []string{"mutation"}},
		{"subscription", `subscription { hash(text: "x") { hash } }`, nil, "", "OPERATION_NOT_SUPPORTED", []string{"subscription", "not supported"}},
		{"named subscription", `subscription S { echo(message: "m") { message } }`, nil, "", "OPERATION_NOT_SUPPORTED", []string{"subscription"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := map[string]any{"query": tt.query}
			if tt.vars != nil {
				body["variables"] = tt.vars
			}
			if tt.op != "" {
				body["operationName"] = tt.op
			}
			for _, c := range []struct {
				media  string
				status int
			}{{mediaGraphQL, http.StatusBadRequest}, {mediaJSON, http.StatusOK}, {"", http.StatusBadRequest}} {
				var hdrs []header
				if c.media != "" {
					hdrs = append(hdrs, accept(c.media))
				}
				r := h.post(t, acct.Key, mustJSON(t, body), hdrs...)
				e := wantError(t, r, c.status, tt.code, tt.fragments...)
				if c.media == mediaJSON && e.Message == "" {
					t.Error("no message")
				}
				wantCredits(t, r, "pro", 0, 100000)
			}
		})
	}
	if n := h.runs.total(); n != 0 {
		t.Errorf("%d APIs ran", n)
	}
	if got := h.balance(t, acct.ID); got != 100000 {
		t.Errorf("balance %d, want 100000", got)
	}
}

// TestSelectionBackstop: a query that graphql-go refuses for expanding to too many
// selections (aliases of one result field, which the gateway's own count of result
// fields sees once) is 400 QUERY_TOO_COMPLEX like the gateway's own limits, under both
// media types, and nothing runs.
func TestSelectionBackstop(t *testing.T) {
	limits := gql.Limits{MaxQueryBytes: 64 << 10, MaxSelections: 8}
	h := newHarness(t, config{gql: gql.Options{Limits: limits}})
	acct := h.newAccount(t, "pro", -1)
	var b strings.Builder
	b.WriteString(`{ hash(text: "x") {`)
	for i := range 2001 {
		b.WriteString(" a" + strconv.Itoa(i) + ": hash")
	}
	b.WriteString(" } }")
	for _, media := range []string{mediaGraphQL, mediaJSON} {
		r := h.query(t, acct.Key, b.String(), nil, accept(media))
		wantGatewayError(t, r, http.StatusBadRequest, "QUERY_TOO_COMPLEX", "more than 2000 selections")
		wantCredits(t, r, "pro", 0, 100000)
	}
	if n := h.runs.total(); n != 0 {
		t.Errorf("%d APIs ran", n)
	}
}

// TestMessagesAreCleanText: graphql-go's messages that it formats badly (a fragment on
// an unknown type: "%!q(<nil>)"), breaks over lines, repeats, or that echo control
// characters are answered as clean text, once each (checkResponse checks every message
// of every test).
func TestMessagesAreCleanText(t *testing.T) {
	h := newHarness(t, config{extra: richAPIs()})
	acct := h.newAccount(t, "pro", -1)
	tests := []struct {
		name, query string
		vars        map[string]any
		want        []string // the messages, in order
	}{
		{"a fragment on an unknown type", `fragment F on Nope { x } { ...F }`, nil, []string{
			`Fragment "F" cannot be spread here as objects of type "Query" can never be of an unknown type.`,
			`Unknown type "Nope".`}},
		{"a fragment on an unknown type, in an unknown field", `{ nope { ...F } } fragment F on Nope { value }`, nil, []string{
			`Cannot query field "nope" on type "Query".`,
			`Fragment "F" cannot be spread here as objects of an unknown type can never be of an unknown type.`,
			`Unknown type "Nope".`}},
		{"an unknown list type, reported twice", `query($v: [Nope]) { hash(text: $v) { hash } }`, nil, []string{
			`Unknown type "Nope".`}},
		{"an invalid variable, over two lines", `query($p: RichtypesPointInput) { richtypes(tags: [], point: $p) { echo } }`,
			map[string]any{"p": map[string]any{"z": 1}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.query(t, acct.Key, tt.query, tt.vars)
			if r.Status != http.StatusBadRequest || len(r.Errors) == 0 {
				t.Fatalf("%d %s", r.Status, r.Body)
			}
			var got []string
			for _, e := range r.Errors {
				got = append(got, e.Message)
				if strings.ContainsAny(e.Message, "\n%") {
					t.Errorf("message %q", e.Message)
				}
			}
			if tt.want != nil && !slices.Equal(got, tt.want) {
				t.Errorf("messages\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

// TestNumbersOutOfRange: numbers graphql-go cannot read, which made it panic when it
// compared the arguments of two fields of one name, are refused as invalid queries,
// before anything runs.
func TestNumbersOutOfRange(t *testing.T) {
	h := newHarness(t, config{})
	acct := h.newAccount(t, "pro", -1)
	for _, q := range []string{
		`{ a: uuidgenerator(count: 99999999999999999999) { count } a: uuidgenerator(count: 99999999999999999999) { count } }`,
		`{ uuidgenerator(count: 99999999999999999999) { count } uuidgenerator(count: 99999999999999999999) { uuids } }`,
		`{ echo(message: "m", delay_ms: 1e400) { message } echo(message: "m", delay_ms: 1e400) { message } }`,
		`{ uuidgenerator(count: 99999999999999999999) { count } }`,
		`query($n: Int = 99999999999999999999) { uuidgenerator(count: $n) { count } }`,
	} {
		for _, media := range []string{mediaGraphQL, mediaJSON} {
			r := h.query(t, acct.Key, q, nil, accept(media))
			if r.Status == http.StatusOK && media == mediaGraphQL || len(r.Errors) == 0 || r.HasData {
				t.Errorf("%s: %d %s; want a validation error", q, r.Status, r.Body)
			}
			wantCredits(t, r, "pro", 0, 100000)
		}
	}
	if n := h.runs.total(); n != 0 {
		t.Errorf("%d APIs ran", n)
	}
}
