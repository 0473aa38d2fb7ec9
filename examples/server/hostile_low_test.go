package main

import (
	"encoding/json"
	"maps"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The black-box cases of the hostile run's smaller findings: each attacks the example
// server as assembled, and each failed before its fix.

// TestHostileSubKeySummary checks that the summary form of GET /v1/analytics counts a
// sub-key's own calls only, as its time-series form does, while the primary key sees
// the whole account's. A sub-key limited to hash, which made one call of it (and was
// refused twice), once saw every API its account had called.
func TestHostileSubKeySummary(t *testing.T) {
	s := start(t, "-fixtures", "testdata/hostile.json")
	for _, c := range []struct {
		key, path, body string
		status          int
	}{
		{keyAlpha, "/v1/hash?text=a", "", http.StatusOK},
		{keyAlpha, "/v1/hash?text=b", "", http.StatusOK},
		{keyAlpha, "/v1/hmac", `{"message":"m","secret":"s"}`, http.StatusOK},
		{keyAlpha, "/v1/date-info?date=2024-02-29", "", http.StatusOK},
		{keyHashOnly, "/v1/hash?text=c", "", http.StatusOK},
		{keyHashOnly, "/v1/hash", "", http.StatusBadRequest},                            // refused: no text
		{keyHashOnly, "/v1/hmac", `{"message":"m","secret":"s"}`, http.StatusForbidden}, // refused: not its API
	} {
		method := http.MethodGet
		if c.body != "" {
			method = http.MethodPost
		}
		if r := s.call(method, c.path, c.body, "x-api-key", c.key); r.status != c.status {
			t.Fatalf("%s %s: %d %s, want %d", method, c.path, r.status, r.body, c.status)
		}
	}
	// The usage statistics are flushed every 5 seconds: wait until the sub-key's own
	// time series shows its call.
	deadline := time.Now().Add(90 * time.Second)
	for {
		r := s.call(http.MethodGet, "/v1/analytics?by=api&api=hash", "", "x-api-key", keyHashOnly)
		var env struct {
			Data struct {
				Series []struct {
					Points []struct{ Calls int64 } `json:"points"`
				} `json:"series"`
			} `json:"data"`
		}
		if r.status != http.StatusOK || json.Unmarshal(r.body, &env) != nil {
			t.Fatalf("the sub-key's time series: %d %s", r.status, r.body)
		}
		if len(env.Data.Series) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sub-key's call is not in its time series after 90 s: %s", r.body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	calls := func(key string) map[string]int64 {
		t.Helper()
		r := s.call(http.MethodGet, "/v1/analytics", "", "x-api-key", key)
		var env struct {
			Data struct {
				Calls map[string]int64 `json:"calls"`
			} `json:"data"`
		}
		if r.status != http.StatusOK || json.Unmarshal(r.body, &env) != nil {
			t.Fatalf("analytics: %d %s", r.status, r.body)
		}
		return env.Data.Calls
	}
	if got, want := calls(keyHashOnly), map[string]int64{"hash": 1}; !maps.Equal(got, want) {
		t.Errorf("the sub-key's calls: %v, want only its own, %v", got, want)
	}
	if got, want := calls(keyAlpha), map[string]int64{"hash": 3, "hmac": 1, "date-info": 1}; !maps.Equal(got, want) {
		t.Errorf("the primary key's calls: %v, want the whole account's, %v", got, want)
	}
}

// TestHostileBatchRateHeaders checks that with -ietf-rate-headers a batch's answer
// carries the IETF RateLimit and RateLimit-Policy headers, as a single call's does:
// a batch once carried X-RateLimit-* only.
func TestHostileBatchRateHeaders(t *testing.T) {
	s := start(t, "-ietf-rate-headers")
	key := s.apiKey(1)
	single := s.call(http.MethodGet, "/v1/hash?text=a", "", "x-api-key", key)
	batch := s.call(http.MethodPost, "/v1/hash/batch", `{"items":[{"text":"b"},{"text":"c"}]}`, "x-api-key", key)
	for name, r := range map[string]reply{"single call": single, "batch": batch} {
		if r.status != http.StatusOK {
			t.Fatalf("%s: %d %s", name, r.status, r.body)
		}
		if got := r.header.Get("RateLimit-Policy"); got != `"default";q=600;w=60` {
			t.Errorf("%s: RateLimit-Policy %q", name, got)
		}
		if got, want := r.header.Get("RateLimit"), `"default";r=`+r.header.Get("X-RateLimit-Remaining")+";t="; got == "" || !strings.HasPrefix(got, want) {
			t.Errorf("%s: RateLimit %q, want it to begin %q", name, got, want)
		}
	}
}

// implementation matches what an error message must never show: Go's names of types
// and packages, encoding/json's own words, a store's name, and a duration that
// overflowed (time.Duration's largest, 2562047h47m16.854775807s).
var implementation = regexp.MustCompile(`Go (struct|value)|\bu?int(8|16|32|64)\b|float64|\*?\b(mcp|manage|auth|tollgate|oauth)\.[A-Z]|\bjson:|UnmarshalJSON|unmarshaling|parsing time|\b(memory|postgres|redis|store|audit|multipart|strconv|bufio):|2562047h`)

// TestHostileErrorMessages sends the requests whose error messages once showed Go type
// names, a store's name or an overflowed duration, and checks that each message names
// the field and the rule instead.
func TestHostileErrorMessages(t *testing.T) {
	s := start(t, "-fixtures", "testdata/hostile.json", "-admin-token", testAdminToken)
	admin := []string{"Authorization", "Bearer " + testAdminToken}
	for _, c := range []struct {
		method, path, body string
		hdr                []string
		status             int
		want               string // the message's beginning
	}{
		{"POST", "/admin/v1/accounts", `{"id":1,"plan":"open"}`, admin, 400, "id must be a string, not a number"},
		{"POST", "/admin/v1/accounts", `{"id":"x","plan":"open","credits":"a"}`, admin, 400, "credits must be a whole number, not a string"},
		{"POST", "/admin/v1/accounts", `{"id":"alpha","plan":"tiny"}`, admin, 409, `account "alpha" exists with another definition (its plan is "open", not "tiny")`},
		{"POST", "/admin/v1/accounts/alpha/credits", `{"amount":1e30,"reason":"x"}`, admin, 400, "amount must be a whole number, not 1e30"},
		{"POST", "/admin/v1/accounts/alpha/keys", `{"name":"x","apis":[1]}`, admin, 400, "apis must be an array of strings: an item is a number"},
		{"POST", "/admin/v1/accounts/alpha/keys", `{"name":"x","expires_at":"99999-01-01"}`, admin, 400, "expires_at must be an RFC 3339 time"},
		{"POST", "/v1/account/keys", `{"name":{"a":1}}`, []string{"x-api-key", keyAlpha}, 400, "name must be a string, not an object"},
		{"PATCH", "/v1/account/keys/key_x", `{"restrictions":{"expires_at":5}}`, []string{"x-api-key", keyAlpha}, 400, "restrictions.expires_at must be an RFC 3339 time"},
		{"PATCH", "/v1/account/keys/key_x", `{"restrictions":[]}`, []string{"x-api-key", keyAlpha}, 400, "restrictions must be an object, not an array"},
		{"GET", "/v1/analytics?interval=minute&from=2026-01-01&to=9999-01-01", "", []string{"x-api-key", keyAlpha}, 400, "to: "},
		{"GET", "/v1/account/usage?from=0001-01-01", "", []string{"x-api-key", keyAlpha}, 400, "from: "},
		{"GET", "/v1/account/audit?cursor=garbage", "", []string{"x-api-key", keyAlpha}, 400, "cursor is not one a page of the audit log returned"},
		{"GET", "/admin/v1/accounts/alpha/audit?cursor=garbage", "", admin, 400, "cursor is not one a page of the audit log returned"},
		{"POST", "/v1/image-info", "xx", []string{"x-api-key", keyAlpha, "Content-Type", "multipart/form-data; boundary=zz"}, 400,
			"the multipart body cannot be read: it ends too soon"},
	} {
		r := s.call(c.method, c.path, c.body, c.hdr...)
		msgs := errorMessages(r.body)
		if r.status != c.status || len(msgs) != 1 || !strings.HasPrefix(msgs[0], c.want) || implementation.MatchString(msgs[0]) {
			t.Errorf("%s %s %s: %d %s; want %d with a message beginning %q", c.method, c.path, c.body, r.status, r.body, c.status, c.want)
		}
	}
	// MCP params of the wrong type, which the SDK's own message answered.
	hdr := []string{"X-Api-Key", keyBeta, "Accept", "application/json, text/event-stream"}
	r := s.call(http.MethodPost, "/v1/mcp", mcpInit, hdr...)
	hdr = append(hdr, "Mcp-Session-Id", r.header.Get("Mcp-Session-Id"))
	s.call(http.MethodPost, "/v1/mcp", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, hdr...)
	for body, want := range map[string]string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}}`:    `the params of "tools/call": name must be a string, not a number`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"cursor":5}}`:  `the params of "tools/list": cursor must be a string, not a number`,
		`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":5}}`: `the params of "resources/read": uri must be a string, not a number`,
	} {
		r := s.call(http.MethodPost, "/v1/mcp", body, hdr...)
		if msgs := errorMessages(r.body); len(msgs) != 1 || msgs[0] != want || implementation.MatchString(msgs[0]) {
			t.Errorf("%s: %d %s; want %q", body, r.status, r.body, want)
		}
	}
}

// TestHostileReusedKeyInvalidBody checks that an Idempotency-Key used for one batch,
// sent again with another body none of whose items is valid, is answered 422 as any
// other body is, not 200 with the items' errors; and that the first batch's answer is
// still replayed.
func TestHostileReusedKeyInvalidBody(t *testing.T) {
	s := start(t, "-fixtures", "testdata/hostile.json")
	hdr := []string{"x-api-key", keyAlpha, "Idempotency-Key", "order-42"}
	if r := s.call(http.MethodPost, "/v1/hash/batch", `{"items":[{"text":"a"}]}`, hdr...); r.status != http.StatusOK {
		t.Fatalf("the first batch: %d %s", r.status, r.body)
	}
	r := s.call(http.MethodPost, "/v1/hash/batch", `{"items":[{"algorithm":"sha1"}]}`, hdr...)
	if r.status != http.StatusUnprocessableEntity || r.header.Get("X-Error-Code") != "idempotency_key_reused" {
		t.Errorf("the key again with only invalid items: %d %s; want 422 idempotency_key_reused", r.status, r.body)
	}
	if r := s.call(http.MethodPost, "/v1/hash/batch", `{"items":[{"text":"a"}]}`, hdr...); r.status != http.StatusOK || r.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("the first batch again: %d %v; want its answer replayed", r.status, r.header)
	}
}

// TestHostileAuditOperatorNotes checks what an account holder reads of an operator's
// credit grant in GET /v1/account/audit: the grant, its time and that the operator made
// it, but neither the operator's address nor the reason they gave, which the admin
// API's audit log keeps.
func TestHostileAuditOperatorNotes(t *testing.T) {
	s := start(t, "-fixtures", "testdata/hostile.json", "-admin-token", testAdminToken)
	const reason = "goodwill: ticket 4411, the customer threatened to leave"
	admin := []string{"Authorization", "Bearer " + testAdminToken}
	if r := s.call(http.MethodPost, "/admin/v1/accounts/alpha/credits", `{"amount":100,"reason":"`+reason+`"}`, admin...); r.status != http.StatusOK {
		t.Fatalf("the grant: %d %s", r.status, r.body)
	}
	entry := func(r reply) map[string]any {
		t.Helper()
		var env struct {
			Data struct {
				Entries []map[string]any `json:"entries"`
			} `json:"data"`
		}
		if r.status != http.StatusOK || json.Unmarshal(r.body, &env) != nil {
			t.Fatalf("the audit log: %d %s", r.status, r.body)
		}
		for _, e := range env.Data.Entries {
			if e["action"] == "credits.adjust" {
				return e
			}
		}
		t.Fatalf("no credits.adjust entry in %s", r.body)
		return nil
	}
	held := entry(s.call(http.MethodGet, "/v1/account/audit", "", "x-api-key", keyAlpha))
	if held["actor"] != "operator" || held["address"] != nil || held["reason"] != nil || held["credits"] != 100.0 {
		t.Errorf("the holder's entry %v: want actor operator, credits 100, no address and no reason", held)
	}
	kept := entry(s.call(http.MethodGet, "/admin/v1/accounts/alpha/audit", "", admin...))
	if kept["actor"] != "operator" || kept["address"] == nil || kept["reason"] != reason {
		t.Errorf("the operator's entry %v: want the address and the reason", kept)
	}
}
