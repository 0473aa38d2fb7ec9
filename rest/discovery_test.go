package rest_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/wire"
)

// TestCORS proves the CORS policy: JSON answers (successes and errors) to cross-origin
// requests carry Access-Control-Allow-Origin * and expose the credit, rate and error
// headers; answers to requests without an Origin (not cross-origin) carry no CORS
// header, and a cacheable one varies by Origin; a preflight needs no key and answers
// 204 with the allowed methods and headers.
func TestCORS(t *testing.T) {
	h := newHarness(t, config{})
	acct := h.newAccount(t, "pro")
	origin := header{"Origin", "https://app.example.com"}
	for _, c := range []struct {
		name   string
		r      func(t *testing.T, hdrs ...header) *response
		status int
	}{
		{"success", func(t *testing.T, hdrs ...header) *response {
			return h.do(t, http.MethodGet, "/v1/hash?text=hello", nil, append(hdrs, key(acct.Key))...)
		}, 200},
		{"401", func(t *testing.T, hdrs ...header) *response {
			return h.do(t, http.MethodGet, "/v1/hash?text=hello", nil, append(hdrs, key("00000000-0000-4000-8000-000000000000"))...)
		}, 401},
		{"400", func(t *testing.T, hdrs ...header) *response {
			return h.do(t, http.MethodGet, "/v1/hash", nil, append(hdrs, key(acct.Key))...)
		}, 400},
		{"catalog", func(t *testing.T, hdrs ...header) *response {
			return h.do(t, http.MethodGet, "/v1/catalog", nil, hdrs...)
		}, 200},
		{"openapi", func(t *testing.T, hdrs ...header) *response {
			return h.do(t, http.MethodGet, "/v1/openapi.json", nil, hdrs...)
		}, 200},
		{"analytics", func(t *testing.T, hdrs ...header) *response {
			return h.do(t, http.MethodGet, "/v1/analytics", nil, append(hdrs, key(acct.Key))...)
		}, 200},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := c.r(t, origin)
			if r.Status != c.status {
				t.Fatalf("status %d, want %d", r.Status, c.status)
			}
			if got := r.Header.Get("Access-Control-Allow-Origin"); got != "*" {
				t.Errorf("Access-Control-Allow-Origin = %q, want *", got)
			}
			exposed := strings.Split(r.Header.Get("Access-Control-Expose-Headers"), ", ")
			for _, name := range []string{
				wire.HeaderCreditsCost, wire.HeaderCreditsRemaining, wire.HeaderCreditsUsed,
				wire.HeaderCreditsLimit, wire.HeaderCreditsRenewal, wire.HeaderPlan,
				wire.HeaderRateLimit, wire.HeaderRateLimitRemaining, wire.HeaderRetryAfter,
				wire.HeaderErrorCode,
			} {
				if !slices.Contains(exposed, name) {
					t.Errorf("Access-Control-Expose-Headers %q does not list %s", exposed, name)
				}
			}

			// The same request without an Origin: no CORS header (the harness checks
			// it), and the same answer otherwise.
			same := c.r(t)
			if same.Status != c.status {
				t.Fatalf("without an Origin: status %d, want %d", same.Status, c.status)
			}
			cacheable := !strings.Contains(same.Header.Get("Cache-Control"), "no-store")
			if varies := slices.Contains(same.Header.Values("Vary"), "Origin"); varies != cacheable {
				t.Errorf("without an Origin: Cache-Control %q, Vary %q; a cacheable answer must vary by Origin, others need not",
					same.Header.Get("Cache-Control"), same.Header.Values("Vary"))
			}
		})
	}

	for _, path := range []string{"/v1/hash", "/v1/echo", "/v1/analytics", "/v1/nope"} {
		t.Run("preflight "+path, func(t *testing.T) {
			r := h.do(t, http.MethodOptions, path, nil,
				header{"Origin", "https://app.example.com"},
				header{"Access-Control-Request-Method", "POST"},
				header{"Access-Control-Request-Headers", "x-api-key, content-type"})
			if r.Status != http.StatusNoContent {
				t.Fatalf("status %d, want 204", r.Status)
			}
			if got := r.Header.Get("Access-Control-Allow-Origin"); got != "*" {
				t.Errorf("Access-Control-Allow-Origin = %q", got)
			}
			methods := r.Header.Get("Access-Control-Allow-Methods")
			for _, m := range []string{"GET", "POST"} {
				if !strings.Contains(methods, m) {
					t.Errorf("Access-Control-Allow-Methods %q lacks %s", methods, m)
				}
			}
			allowed := strings.ToLower(r.Header.Get("Access-Control-Allow-Headers"))
			for _, name := range []string{"x-api-key", "authorization", "x-jwt", "content-type"} {
				if !strings.Contains(allowed, name) {
					t.Errorf("Access-Control-Allow-Headers %q lacks %s", allowed, name)
				}
			}
		})
	}
	if b := h.balance(t, acct.ID); b.Used != 2 {
		t.Errorf("used %d, want 2 (only the successful hash calls, with and without an Origin)", b.Used)
	}
}

// TestCORSAllowedOrigins proves edge.Options.AllowedOrigins: an allowed Origin is echoed
// with Vary: Origin; another gets no Allow-Origin (answer and preflight alike); the edge
// 403 carries no CORS header whatever the Origin.
func TestCORSAllowedOrigins(t *testing.T) {
	const app, evil = "https://app.example.com", "https://evil.example.net"
	h := newHarness(t, config{edge: edge.Options{AllowedOrigins: []string{app, "https://admin.example.com/"}}})
	acct := h.newAccount(t, "pro")

	r := h.do(t, http.MethodGet, "/v1/hash?text=a", nil, key(acct.Key), header{"Origin", app})
	wantOK(t, r)
	if got := r.Header.Get("Access-Control-Allow-Origin"); got != app {
		t.Errorf("allowed origin: Access-Control-Allow-Origin = %q, want %q", got, app)
	}
	if !slices.Contains(r.Header.Values("Vary"), "Origin") {
		t.Errorf("Vary = %q, want Origin", r.Header.Values("Vary"))
	}
	if r.Header.Get("Access-Control-Expose-Headers") == "" {
		t.Error("allowed origin: no Access-Control-Expose-Headers")
	}
	r = h.do(t, http.MethodGet, "/v1/hash?text=a", nil, key(acct.Key), header{"Origin", "https://admin.example.com"})
	if got := r.Header.Get("Access-Control-Allow-Origin"); got != "https://admin.example.com" {
		t.Errorf("origin configured with a trailing slash: Access-Control-Allow-Origin = %q", got)
	}

	for _, origin := range []string{evil, "", "null", app + ".evil.net"} {
		r := h.do(t, http.MethodGet, "/v1/hash?text=a", nil, key(acct.Key), header{"Origin", origin})
		wantOK(t, r)
		if got := r.Header.Get("Access-Control-Allow-Origin"); got != "" {
			t.Errorf("origin %q: Access-Control-Allow-Origin = %q, want none", origin, got)
		}
		if !slices.Contains(r.Header.Values("Vary"), "Origin") {
			t.Errorf("origin %q: Vary = %q, want Origin (the answer depends on it)", origin, r.Header.Values("Vary"))
		}
	}

	r = h.do(t, http.MethodOptions, "/v1/hash", nil, header{"Origin", app}, header{"Access-Control-Request-Method", "GET"})
	if r.Header.Get("Access-Control-Allow-Origin") != app || r.Header.Get("Access-Control-Allow-Methods") == "" {
		t.Errorf("allowed preflight headers: %v", r.Header)
	}
	r = h.do(t, http.MethodOptions, "/v1/hash", nil, header{"Origin", evil}, header{"Access-Control-Request-Method", "GET"})
	if r.Header.Get("Access-Control-Allow-Origin") != "" || r.Header.Get("Access-Control-Allow-Methods") != "" {
		t.Errorf("refused preflight grants access: %v", r.Header)
	}

	r = h.do(t, http.MethodGet, "/v1/hash?text=a", nil, key("undefined"), header{"Origin", app})
	if !r.Edge {
		t.Fatalf("got %d, want the edge 403", r.Status)
	}
}

// TestAnalytics proves GET /v1/analytics: any valid key gets 200 with the plan, the
// credits (used, remaining, limit, renewal), the rate limit, the concurrency, the
// GraphQL cap and the calls per API this period; it is never billed and uses no
// rate-limit event; with a session token the key is null.
func TestAnalytics(t *testing.T) {
	h := newHarness(t, config{sessions: true})
	acct := h.newAccount(t, "pro")
	wantOK(t, h.hash(t, acct.Key))
	wantOK(t, h.do(t, http.MethodGet, "/v1/hash?text=b&algorithm=sha1", nil, bearer(acct.Key)))
	last := h.do(t, http.MethodPost, "/v1/echo", strings.NewReader(`{"message":"x"}`), key(acct.Key), jsonType)
	wantOK(t, last)
	rateAfterCalls := int(last.Int(wire.HeaderRateLimitRemaining))

	var first analytics
	for i := range 5 {
		r := h.do(t, http.MethodGet, "/v1/analytics", nil, key(acct.Key))
		wantOK(t, r)
		var a analytics
		if err := json.Unmarshal(r.Data, &a); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = a
		} else if !analyticsEqual(a, first) {
			t.Errorf("analytics call %d changed the account: %+v, then %+v", i+1, first, a)
		}
		if r.Int(wire.HeaderCreditsCost) != 0 || r.Int(wire.HeaderCreditsRemaining) != 99997 {
			t.Errorf("analytics credit headers: cost %q remaining %q", r.Header.Get(wire.HeaderCreditsCost), r.Header.Get(wire.HeaderCreditsRemaining))
		}
	}
	a := first
	if a.Account != acct.ID || a.Plan != "pro" {
		t.Errorf("account %q plan %q", a.Account, a.Plan)
	}
	if a.Key == nil || a.Key.ID != acct.KeyID || a.Key.Name != "primary" || !a.Key.Primary {
		t.Errorf("key %+v, want the primary key %s", a.Key, acct.KeyID)
	}
	if c := a.Credits; c.Used != 3 || c.Remaining != 99997 || c.Limit != 100000 || !c.Renewal.Equal(feb15) {
		t.Errorf("credits %+v", c)
	}
	if a.RateLimit == nil || a.RateLimit.PerMinute != 600 || a.RateLimit.Burst != 600 || a.RateLimit.Remaining != rateAfterCalls {
		t.Errorf("rate_limit %+v, want 600/min with %d remaining", a.RateLimit, rateAfterCalls)
	}
	if a.Concurrency.Limit != 10 || a.Concurrency.InUse != 0 {
		t.Errorf("concurrency %+v", a.Concurrency)
	}
	if a.GraphQLMaxAPIs != 10 {
		t.Errorf("graphql_max_apis %d, want 10", a.GraphQLMaxAPIs)
	}
	if want := map[string]int64{"hash": 2, "echo": 1}; !mapsEqual(a.Calls, want) {
		t.Errorf("calls %v, want %v", a.Calls, want)
	}
	if b := h.balance(t, acct.ID); b.Used != 3 {
		t.Errorf("used %d after analytics, want 3", b.Used)
	}
	// The next real call sees the rate limit exactly where the last one left it.
	if r := h.hash(t, acct.Key); int(r.Int(wire.HeaderRateLimitRemaining)) != rateAfterCalls-1 {
		t.Errorf("X-RateLimit-Remaining %d, want %d", r.Int(wire.HeaderRateLimitRemaining), rateAfterCalls-1)
	}

	// A session token: the same account, and key null.
	r := h.do(t, http.MethodGet, "/v1/analytics", nil, jwt(h.session(t, acct.ID, time.Hour)))
	wantOK(t, r)
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(r.Data, &raw); err != nil {
		t.Fatal(err)
	}
	if string(raw["key"]) != "null" || !strings.Contains(string(raw["account"]), acct.ID) {
		t.Errorf("session analytics: key %s account %s, want null and %s", raw["key"], raw["account"], acct.ID)
	}
	for _, field := range []string{"plan", "credits", "rate_limit", "concurrency", "graphql_max_apis", "calls"} {
		if _, ok := raw[field]; !ok {
			t.Errorf("analytics lacks %q", field)
		}
	}

	// A plan without a rate limit reports null; a fresh account reports no calls.
	open := h.newAccount(t, "open")
	if a := h.analytics(t, key(open.Key)); a.RateLimit != nil || a.Calls == nil || len(a.Calls) != 0 || a.Concurrency.Limit != 0 {
		t.Errorf("open plan analytics: rate %+v calls %v concurrency %+v", a.RateLimit, a.Calls, a.Concurrency)
	}

	r = h.do(t, http.MethodPost, "/v1/analytics", nil, key(acct.Key))
	wantError(t, r, http.StatusMethodNotAllowed, "method_not_allowed", "GET")
	if allow := r.Header.Get("Allow"); !strings.Contains(allow, "GET") {
		t.Errorf("Allow = %q", allow)
	}
}

func analyticsEqual(a, b analytics) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return true
}

// sampleIDs are the ids of the sample catalog.
var sampleIDs = []string{"date-info", "echo", "hash", "hmac", "image-info", "uuid-generator"}

// TestCatalog proves GET /v1/catalog: no key needed, the six sample APIs with their
// parameters and input schemas, never billed; POST is 405.
func TestCatalog(t *testing.T) {
	h := newHarness(t, config{sampleOnly: true})
	acct := h.newAccount(t, "pro")
	for _, hdrs := range [][]header{nil, {key(acct.Key)}, {key("undefined")}} {
		r := h.do(t, http.MethodGet, "/v1/catalog", nil, hdrs...)
		wantOK(t, r)
		var data struct {
			APIs []struct {
				ID          string `json:"id"`
				Method      string `json:"method"`
				Cost        int64  `json:"cost"`
				Params      []struct{ Name string }
				File        *struct{ Name string }
				InputSchema json.RawMessage `json:"input_schema"`
			} `json:"apis"`
		}
		if err := json.Unmarshal(r.Data, &data); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, a := range data.APIs {
			ids = append(ids, a.ID)
			var schema map[string]any
			if err := json.Unmarshal(a.InputSchema, &schema); err != nil || schema["type"] != "object" {
				t.Errorf("%s: input_schema %s is not an object schema", a.ID, a.InputSchema)
			}
			switch a.ID {
			case "hash":
				if a.Method != "GET" || a.Cost != 1 || len(a.Params) != 2 || a.Params[0].Name != "text" || a.Params[1].Name != "algorithm" {
					t.Errorf("hash: %+v", a)
				}
			case "image-info":
				if a.Method != "POST" || a.Cost != 2 || a.File == nil || a.File.Name != "image" {
					t.Errorf("image-info: %+v", a)
				}
			case "echo":
				if len(a.Params) != 2 || a.Params[0].Name != "message" || a.Params[1].Name != "delay_ms" {
					t.Errorf("echo: %+v", a)
				}
			}
		}
		slices.Sort(ids)
		if !slices.Equal(ids, sampleIDs) {
			t.Errorf("catalog ids %v, want %v", ids, sampleIDs)
		}
	}
	r := h.do(t, http.MethodPost, "/v1/catalog", strings.NewReader("{}"), jsonType)
	wantError(t, r, http.StatusMethodNotAllowed, "method_not_allowed", "GET")
	if allow := r.Header.Get("Allow"); !strings.Contains(allow, "GET") {
		t.Errorf("Allow = %q", allow)
	}
	if b := h.balance(t, acct.ID); b.Used != 0 {
		t.Errorf("the catalog was billed: used %d", b.Used)
	}
}

// TestOpenAPIDocument proves GET /v1/openapi.json: no key needed, valid JSON, OpenAPI
// 3.1.0, one path per API with its method; POST is 405.
func TestOpenAPIDocument(t *testing.T) {
	h := newHarness(t, config{sampleOnly: true})
	r := h.do(t, http.MethodGet, "/v1/openapi.json", nil)
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(r.Body, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi %q, want 3.1.0", doc.OpenAPI)
	}
	methods := map[string]string{"hash": "get", "hmac": "post", "uuid-generator": "get", "date-info": "get", "echo": "post", "image-info": "post"}
	for id, m := range methods {
		if _, ok := doc.Paths["/v1/"+id][m]; !ok {
			t.Errorf("paths lack %s /v1/%s", m, id)
		}
	}
	if _, ok := doc.Paths["/v1/analytics"]["get"]; !ok {
		t.Error("paths lack GET /v1/analytics")
	}
	// Served from memory: a second read gives the same bytes.
	if r2 := h.do(t, http.MethodGet, "/v1/openapi.json", nil); string(r2.Body) != string(r.Body) {
		t.Error("the second read of the document differs")
	}
	r = h.do(t, http.MethodPost, "/v1/openapi.json", strings.NewReader("{}"), jsonType)
	wantError(t, r, http.StatusMethodNotAllowed, "method_not_allowed", "GET")
}
