package gql_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/auth"
)

// TestKeyCacheRevocation: a gateway whose service caches key records, and a second
// service on the same stores (another instance). A key revoked or rotated through the
// second is refused by the first's very next GraphQL request, whatever it is: a paid
// query (403, nothing charged, nothing run), an introspection-only query, an invalid
// one, one refused for its body or its Accept header.
func TestKeyCacheRevocation(t *testing.T) {
	h := newHarness(t, config{svc: tollgate.Options{KeyCache: &auth.KeyCacheOptions{}}})
	other := h.newManager(t, h.newService(t, tollgate.Options{}))
	acct := h.newAccount(t, "pro", 100)
	sub := h.newSubKey(t, acct, "sub", auth.RestrictionSpec{})
	wantOK(t, h.query(t, acct.Key, hashQuery, nil))

	tests := []struct {
		name string
		body string
		hdrs []header
	}{
		{"introspection only", gqlBody(t, `{ __typename }`, nil), nil},
		{"full introspection", gqlBody(t, introspectionQuery(t), nil), nil},
		{"invalid", gqlBody(t, `{ nope }`, nil), nil},
		{"unparsable", gqlBody(t, `{`, nil), []header{accept(mediaJSON)}},
		{"refused by the gateway's checks", gqlBody(t, imageInfoURL, nil), nil},
		{"bad body", `[]`, nil},
		{"not acceptable", gqlBody(t, hashQuery, nil), []header{accept("text/html")}},
		{"paid", gqlBody(t, threeAPIs, nil), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A key of its own, in the first instance's cache, revoked through the
			// other instance.
			k := h.newSubKey(t, acct, "k", auth.RestrictionSpec{})
			wantOK(t, h.query(t, k.Key, `{ __typename }`, nil))
			if _, err := other.RevokeKey(context.Background(), k.KeyID); err != nil {
				t.Fatal(err)
			}
			runs := h.runs.total()
			r := h.post(t, k.Key, tt.body, tt.hdrs...)
			wantGatewayError(t, r, http.StatusForbidden, "FORBIDDEN", "revoked")
			wantNoCredits(t, r)
			// And the next request, which the cache no longer answers.
			wantGatewayError(t, h.post(t, k.Key, tt.body, tt.hdrs...), http.StatusForbidden, "FORBIDDEN", "revoked")
			if got := h.runs.total(); got != runs {
				t.Errorf("%d APIs ran after the revocation", got-runs)
			}
		})
	}
	if got := h.balance(t, acct.ID); got != 99 {
		t.Errorf("balance %d, want 99: nothing charged after the revocations", got)
	}

	// A rotation through the other instance: the old value is unknown at once, the new
	// one works.
	wantOK(t, h.query(t, sub.Key, `{ __typename }`, nil))
	_, value, err := other.RotateKey(context.Background(), sub.KeyID)
	if err != nil {
		t.Fatal(err)
	}
	wantGatewayError(t, h.query(t, sub.Key, `{ __typename }`, nil), http.StatusUnauthorized, "INVALID_API_KEY")
	wantGatewayError(t, h.query(t, sub.Key, hashQuery, nil), http.StatusUnauthorized, "INVALID_API_KEY")
	r := h.query(t, value, hashQuery, nil)
	wantOK(t, r)
	wantCredits(t, r, "pro", 1, 98)
}
