package main

import (
	"encoding/json"
	"maps"
	"net/http"
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
