package gql_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"testing"

	"github.com/tollgate-dev/tollgate/auth"
)

// TestPlanCacheKeepsEveryCheck: a query whose plan is cached is still authenticated,
// checked against the key's scope and the plan's ceiling, charged and run every time, and
// its variables still decide what runs.
func TestPlanCacheKeepsEveryCheck(t *testing.T) {
	h := newHarness(t, config{})
	pro := h.newAccount(t, "pro", -1)
	free := h.newAccount(t, "free", -1)
	hashOnly := h.newSubKey(t, pro, "hash-only", auth.RestrictionSpec{APIs: []string{"hash"}})
	const twoAPIs = `{ hash(text: "a") { hash } echo(message: "m") { message } }`
	const byVariable = `query($t: String!) { hash(text: $t) { hash } }`

	// Warm the cache with the full key.
	for range 3 {
		wantOK(t, h.query(t, pro.Key, twoAPIs, nil))
	}
	if got := h.runs.get("hash"); got != 3 {
		t.Errorf("hash ran %d times for 3 identical queries, want 3", got)
	}
	// The same text from keys that may not run it.
	wantGatewayError(t, h.query(t, hashOnly.Key, twoAPIs, nil), http.StatusForbidden, "FORBIDDEN", "echo")
	wantGatewayError(t, h.query(t, free.Key, twoAPIs, nil), http.StatusForbidden, "PLAN_LIMIT_EXCEEDED")
	wantGatewayError(t, h.query(t, unknownKey, twoAPIs, nil), http.StatusUnauthorized, "INVALID_API_KEY")
	if got := h.runs.get("echo"); got != 3 {
		t.Errorf("echo ran %d times, want 3: refused queries must not run", got)
	}

	// Variables are part of what is cached: each value gets its own answer.
	for i := range 4 {
		text := fmt.Sprintf("text-%d", i%2)
		data := wantOK(t, h.query(t, hashOnly.Key, byVariable, map[string]any{"t": text}))
		if got, want := field(t, data, "hash", "hash"), sha256Hex(text); got != want {
			t.Errorf("hash(%q) = %v, want %v", text, got, want)
		}
	}
	if got, want := h.balance(t, pro.ID), int64(100000-3*2-4); got != want {
		t.Errorf("balance %d, want %d: every query is charged, cached or not", got, want)
	}

	// An answer cached for a query that names no API is still refused to a revoked key.
	wantOK(t, h.query(t, pro.Key, `{ __typename }`, nil))
	if _, err := h.mgr.RevokeKey(t.Context(), hashOnly.KeyID); err != nil {
		t.Fatal(err)
	}
	wantGatewayError(t, h.query(t, hashOnly.Key, `{ __typename }`, nil), http.StatusForbidden, "FORBIDDEN", "revoked")
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
