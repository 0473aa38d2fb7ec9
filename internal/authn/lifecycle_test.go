package authn_test

import (
	"errors"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
)

// TestAuthorityAccountStates: a suspended account authenticates (its calls are refused
// by the service, not here, so that its holder may still sign in); every key of a
// closed account is refused as a revoked key is, with the same message, revoked or not,
// and a session of a closed account is no longer valid.
func TestAuthorityAccountStates(t *testing.T) {
	sessions := newSessions(t, testSecret)
	a, ks := newAuthority(t, sessions)
	ctx := t.Context()
	_, _, suspendedValue := seedAccount(t, ks, auth.Account{ID: "acct_s", State: auth.AccountSuspended})
	closed, _, closedValue := seedAccount(t, ks, auth.Account{ID: "acct_c", State: auth.AccountClosed})
	sub, subValue := seedKey(t, ks, closed.ID, "ci", auth.Restrictions{})
	revoke(t, ks, sub.ID, t0)

	p, err := a.Authenticate(ctx, apiKey(suspendedValue), t0)
	if err != nil || p.Account.State != auth.AccountSuspended {
		t.Fatalf("a key of a suspended account: %+v %v, want it authenticated, its state suspended", p, err)
	}
	live, err := a.Authenticate(ctx, apiKey(closedValue), t0)
	wantDenied(t, err, auth.ErrKeyRevoked)
	_, revokedErr := a.Authenticate(ctx, apiKey(subValue), t0)
	wantDenied(t, revokedErr, auth.ErrKeyRevoked)
	if err == nil || revokedErr == nil || err.Error() != revokedErr.Error() || live != (auth.Principal{}) {
		t.Errorf("a live key of a closed account: %v; a revoked key: %v; want the same answer", err, revokedErr)
	}
	if _, err := a.AuthenticateKeyID(ctx, sub.ID, t0); !errors.Is(err, auth.ErrKeyRevoked) {
		t.Errorf("by id: %v, want revoked", err)
	}

	for _, acct := range []string{"acct_s", "acct_c"} {
		tok, err := sessions.Issue(acct, t0, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		_, err = a.Authenticate(ctx, auth.Credential{Kind: auth.SessionHeader, Value: tok}, t0)
		if closed := acct == "acct_c"; closed != errors.Is(err, auth.ErrInvalidSession) || !closed && err != nil {
			t.Errorf("a session of %s: %v", acct, err)
		}
	}
}

// TestKeyCacheForgetsAccount: ForgetAccount drops every cached key of the account, and
// no other account's.
func TestKeyCacheForgetsAccount(t *testing.T) {
	a, cache, ks := newCachedAuthority(t, nil)
	ctx := t.Context()
	_, _, v1 := seedAccount(t, ks, auth.Account{ID: "acct_1"})
	_, v2 := seedKey(t, ks, "acct_1", "ci", auth.Restrictions{})
	_, _, other := seedAccount(t, ks, auth.Account{ID: "acct_2"})
	for _, v := range []string{v1, v2, other} {
		if _, err := a.Authenticate(ctx, apiKey(v), t0); err != nil {
			t.Fatal(err)
		}
	}
	if cache.Len() != 3 {
		t.Fatalf("%d records cached, want 3", cache.Len())
	}
	a.ForgetAccount("acct_1")
	if cache.Len() != 1 {
		t.Errorf("%d records cached after forgetting acct_1, want acct_2's", cache.Len())
	}
	if p, err := a.Authenticate(ctx, apiKey(other), t0); err != nil || !p.Cached {
		t.Errorf("acct_2 after forgetting acct_1: %+v %v, want still cached", p, err)
	}
	if p, err := a.Authenticate(ctx, apiKey(v1), t0); err != nil || p.Cached {
		t.Errorf("acct_1 after forgetting it: %+v %v, want read from the store", p, err)
	}
}
