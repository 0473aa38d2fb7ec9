package accounts_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// sessionOptions are options with sessions that can be ended.
func sessionOptions(t *testing.T, o tollgate.Options) tollgate.Options {
	t.Helper()
	sessions, err := auth.NewSessions([]byte(strings.Repeat("s", auth.MinSessionSecret)))
	if err != nil {
		t.Fatal(err)
	}
	o.Sessions, o.SessionStore = sessions, memory.NewSessionStore()
	return o
}

// wantCode reports an error unless err has the code want.
func wantCode(t *testing.T, what string, err error, want tollgate.Code) {
	t.Helper()
	if got := tollgate.CodeOf(err); err == nil && want != success || err != nil && got != want {
		t.Errorf("%s: %v (code %v), want code %v", what, err, got, want)
	}
}

// TestSelfServiceBudget checks the per-account self-service budget: session starts and
// the keys self-service creates, rotates and changes spend it; beyond it they are
// refused with CodeRateLimited and a RetryAfter that says when the next one fits;
// revocations and sign-outs are never refused; another account and the account's API
// calls are untouched; the bucket refills at its rate.
func TestSelfServiceBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		addr := netip.MustParseAddr("192.0.2.1")
		h := newHarness(t, harnessOptions{opts: sessionOptions(t, tollgate.Options{}),
			accounts: accounts.Options{SelfServiceLimit: driver.Limit{Rate: 1, Per: time.Hour, Burst: 3}}})
		primary := keyCaller(h.key, addr)
		ses, err := h.mgr.StartSession(ctx, primary)
		wantCode(t, "StartSession, 1 of 3", err, success)
		k, _, err := h.mgr.CreateOwnKey(ctx, primary, accounts.NewKey{Name: "ci"})
		wantCode(t, "CreateOwnKey, 2 of 3", err, success)
		_, _, err = h.mgr.RotateOwnKey(ctx, primary, k.ID)
		wantCode(t, "RotateOwnKey, 3 of 3", err, success)

		name := "renamed"
		_, err = h.mgr.UpdateOwnKey(ctx, primary, k.ID, accounts.KeyChange{Name: &name})
		wantCode(t, "UpdateOwnKey past the budget", err, tollgate.CodeRateLimited)
		var e *tollgate.Error
		if errors.As(err, &e); e == nil || e.RetryAfter <= 0 || e.RetryAfter > time.Hour || !strings.Contains(e.Message, "try again in") {
			t.Errorf("the refusal %+v: want a RetryAfter within the hour and a message saying when to try again", e)
		}
		_, err = h.mgr.StartSession(ctx, primary)
		wantCode(t, "StartSession past the budget", err, tollgate.CodeRateLimited)
		_, err = h.mgr.StartLoginSession(ctx, "acct", addr)
		wantCode(t, "StartLoginSession past the budget", err, tollgate.CodeRateLimited)
		_, _, err = h.mgr.CreateOwnKey(ctx, primary, accounts.NewKey{Name: "more"})
		wantCode(t, "CreateOwnKey past the budget", err, tollgate.CodeRateLimited)

		_, err = h.mgr.RevokeOwnKey(ctx, primary, k.ID)
		wantCode(t, "RevokeOwnKey past the budget", err, success)
		wantCode(t, "EndSession past the budget", h.mgr.EndSession(ctx, ses.Token, addr), success)
		if r := h.call(ctx, []string{"ok"}); r.Err != nil {
			t.Errorf("an API call of the account past its budget: %v", r.Err)
		}
		_, _, otherValue, err := h.mgr.CreateAccount(ctx, accounts.Spec{ID: "other", Plan: "p"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = h.mgr.StartSession(ctx, keyCaller(otherValue, addr))
		wantCode(t, "StartSession of another account", err, success)

		time.Sleep(time.Hour)
		_, err = h.mgr.StartSession(ctx, primary)
		wantCode(t, "StartSession an hour later", err, success)
		_, err = h.mgr.StartSession(ctx, primary)
		wantCode(t, "StartSession again", err, tollgate.CodeRateLimited)
	})
}

// TestSelfServiceBudgetRefusalsSpendNothing checks that a request refused before it
// would change anything spends nothing of the budget.
func TestSelfServiceBudgetRefusalsSpendNothing(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, harnessOptions{accounts: accounts.Options{SelfServiceLimit: driver.Limit{Rate: 1, Per: time.Hour, Burst: 1}}})
	primary := keyCaller(h.key, netip.Addr{})
	for range 5 {
		_, _, err := h.mgr.CreateOwnKey(ctx, primary, accounts.NewKey{Name: "x", Value: auth.NewKeyValue()})
		wantCode(t, "CreateOwnKey with a value", err, tollgate.CodeInvalidInput)
		_, _, err = h.mgr.CreateOwnKey(ctx, keyCaller(auth.NewKeyValue(), netip.Addr{}), accounts.NewKey{Name: "x"})
		wantCode(t, "CreateOwnKey with an unknown key", err, tollgate.CodeUnauthorized)
	}
	_, _, err := h.mgr.CreateOwnKey(ctx, primary, accounts.NewKey{Name: "x"})
	wantCode(t, "CreateOwnKey after the refusals", err, success)
}

// TestSelfServiceBudgetOptions checks that a negative Rate sets no budget and that a
// budget given in part is refused at New.
func TestSelfServiceBudgetOptions(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, harnessOptions{opts: sessionOptions(t, tollgate.Options{}), accounts: accounts.Options{SelfServiceLimit: driver.Limit{Rate: -1}}})
	for i := range accounts.DefaultSelfServiceLimit.Burst + 10 {
		if _, err := h.mgr.StartSession(ctx, keyCaller(h.key, netip.Addr{})); err != nil {
			t.Fatalf("StartSession %d without a budget: %v", i, err)
		}
	}
	_, err := accounts.New(h.svc, &accounts.Options{SelfServiceLimit: driver.Limit{Per: time.Hour, Burst: 3}})
	if err == nil || !strings.Contains(err.Error(), "SelfServiceLimit") {
		t.Errorf("New with a budget without a rate: %v, want an error naming SelfServiceLimit", err)
	}
	// The default budget: Burst session starts, then a refusal.
	d := newHarness(t, harnessOptions{opts: sessionOptions(t, tollgate.Options{})})
	for i := range accounts.DefaultSelfServiceLimit.Burst {
		if _, err := d.mgr.StartSession(ctx, keyCaller(d.key, netip.Addr{})); err != nil {
			t.Fatalf("StartSession %d within the default budget: %v", i, err)
		}
	}
	_, err = d.mgr.StartSession(ctx, keyCaller(d.key, netip.Addr{}))
	wantCode(t, "StartSession past the default budget", err, tollgate.CodeRateLimited)
}

// TestOwnKeysPaged checks that every listing of keys is a page: OwnKeys, OwnAccount and
// AccountKeys answer at most the page asked for (the default when none is), with a
// cursor that continues it, for the primary key and for a sub-key that sees only
// some keys; a limit out of bounds and a cursor that names no key are refused.
func TestOwnKeysPaged(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, harnessOptions{accounts: accounts.Options{SubKeysManageKeys: true}})
	primary := keyCaller(h.key, netip.Addr{})
	okOnly := mustRestrictions(t, auth.RestrictionSpec{APIs: []string{"ok"}})
	sub, subValue, err := h.mgr.CreateKey(ctx, "acct", accounts.NewKey{Name: "sub", Restrictions: okOnly})
	if err != nil {
		t.Fatal(err)
	}
	narrow := []string{sub.ID}
	for i := range 120 { // every other key within the sub-key
		spec := accounts.NewKey{Name: fmt.Sprintf("k%03d", i)}
		if i%2 == 0 {
			spec.Restrictions = okOnly
		}
		k, _, err := h.mgr.CreateKey(ctx, "acct", spec)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			narrow = append(narrow, k.ID)
		}
	}
	// All 122 keys of the account: pages of 50, 50, 22.
	var sizes []int
	q := auth.KeyQuery{}
	for {
		page, err := h.mgr.OwnKeys(ctx, primary, q)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(page.Keys))
		if q.After = page.Next; q.After == "" {
			break
		}
	}
	if fmt.Sprint(sizes) != "[50 50 22]" {
		t.Errorf("the primary key's pages: %v keys, want [50 50 22]", sizes)
	}
	info, err := h.mgr.OwnAccount(ctx, primary)
	if err != nil || len(info.Keys) != auth.DefaultKeyPage || info.KeysNext != info.Keys[len(info.Keys)-1].ID {
		t.Errorf("OwnAccount: %d keys, next %q, %v; want the first page of %d and its cursor", len(info.Keys), info.KeysNext, err, auth.DefaultKeyPage)
	}
	// The sub-key sees itself and the 60 keys within it: pages of 25 are full ones.
	var seen []string
	q = auth.KeyQuery{Limit: 25}
	for {
		page, err := h.mgr.OwnKeys(ctx, keyCaller(subValue, netip.Addr{}), q)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Keys) != 25 && page.Next != "" {
			t.Errorf("a page of the sub-key's keys holds %d keys and has a next page", len(page.Keys))
		}
		for _, k := range page.Keys {
			seen = append(seen, k.ID)
		}
		if q.After = page.Next; q.After == "" {
			break
		}
	}
	if strings.Join(seen, " ") != strings.Join(narrow, " ") {
		t.Errorf("the sub-key's pages list %d keys, want the %d within it", len(seen), len(narrow))
	}
	for _, tc := range []struct {
		q     auth.KeyQuery
		field string
	}{
		{auth.KeyQuery{Limit: auth.MaxKeyPage + 1}, "limit"},
		{auth.KeyQuery{Limit: -1}, "limit"},
		{auth.KeyQuery{After: "key_nope"}, "cursor"},
		{auth.KeyQuery{After: "key\x00"}, "cursor"},
	} {
		_, err := h.mgr.OwnKeys(ctx, primary, tc.q)
		if tollgate.CodeOf(err) != tollgate.CodeInvalidInput || !strings.HasPrefix(err.Error(), tc.field) {
			t.Errorf("OwnKeys(%+v): %v, want CodeInvalidInput naming %s", tc.q, err, tc.field)
		}
	}
	page, err := h.mgr.AccountKeys(ctx, auth.KeyQuery{Account: "acct", Limit: auth.MaxKeyPage})
	if err != nil || len(page.Keys) != 122 || page.Next != "" {
		t.Errorf("AccountKeys of the largest page: %d keys, next %q, %v; want all 122", len(page.Keys), page.Next, err)
	}
	_, err = h.mgr.AccountKeys(ctx, auth.KeyQuery{Account: "nope"})
	wantCode(t, "AccountKeys of an unknown account", err, tollgate.CodeNotFound)
}

// TestOwnKeyCapCountsRevoked checks that the cap of self-service counts the keys revoked
// within the retention, that a key older than that counts no more, and that PruneKeys
// deletes it (never the primary key), on schedule and when called.
func TestOwnKeyCapCountsRevoked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		var logs testenv.Logs
		h := newHarness(t, harnessOptions{accounts: accounts.Options{MaxOwnKeys: 3, RevokedKeyRetention: 24 * time.Hour, Logger: logs.Logger()}})
		primary := keyCaller(h.key, netip.Addr{})
		a, _, err := h.mgr.CreateOwnKey(ctx, primary, accounts.NewKey{Name: "a"})
		wantCode(t, "CreateOwnKey a", err, success)
		_, _, err = h.mgr.CreateOwnKey(ctx, primary, accounts.NewKey{Name: "b"})
		wantCode(t, "CreateOwnKey b", err, success)
		_, _, err = h.mgr.CreateOwnKey(ctx, primary, accounts.NewKey{Name: "c"})
		wantCode(t, "CreateOwnKey c, past the cap", err, tollgate.CodeConflict)
		if _, err := h.mgr.RevokeOwnKey(ctx, primary, a.ID); err != nil {
			t.Fatal(err)
		}
		_, _, err = h.mgr.CreateOwnKey(ctx, primary, accounts.NewKey{Name: "c"})
		wantCode(t, "CreateOwnKey c, a revoked within the retention", err, tollgate.CodeConflict)
		if err == nil || !strings.Contains(err.Error(), "revoked within the last day") {
			t.Errorf("the refusal %q does not say that revoked keys count", err)
		}

		time.Sleep(24*time.Hour + time.Second)
		_, _, err = h.mgr.CreateOwnKey(ctx, primary, accounts.NewKey{Name: "c"})
		wantCode(t, "CreateOwnKey c, a revoked a day ago", err, success)
		// The schedule, every tenth of the retention, prunes it within one interval.
		time.Sleep(24 * time.Hour / 10)
		synctest.Wait()
		if _, err := h.mgr.OwnKey(ctx, primary, a.ID); tollgate.CodeOf(err) != tollgate.CodeNotFound {
			t.Errorf("OwnKey of the key revoked a day ago: %v, want CodeNotFound (pruned)", err)
		}
		if !strings.Contains(logs.String(), "deleted the keys revoked longer ago than the retention") {
			t.Errorf("no prune was logged:\n%s", logs.String())
		}
		if n, err := h.mgr.PruneKeys(ctx); n != 0 || err != nil {
			t.Errorf("PruneKeys after the schedule's: %d, %v; want 0, nil", n, err)
		}
		page, err := h.mgr.OwnKeys(ctx, primary, auth.KeyQuery{})
		if err != nil || len(page.Keys) != 3 || !page.Keys[0].Primary {
			t.Errorf("OwnKeys after the prune: %d keys, %v; want the primary key, b and c", len(page.Keys), err)
		}
	})
}

// TestRevokedKeysKeptForEver checks that a negative retention keeps revoked keys, which
// then count for the cap for ever, and that PruneKeys does nothing.
func TestRevokedKeysKeptForEver(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, harnessOptions{accounts: accounts.Options{MaxOwnKeys: 2, RevokedKeyRetention: -1}})
	primary := keyCaller(h.key, netip.Addr{})
	a, _, err := h.mgr.CreateOwnKey(ctx, primary, accounts.NewKey{Name: "a"})
	wantCode(t, "CreateOwnKey a", err, success)
	if _, err := h.mgr.RevokeOwnKey(ctx, primary, a.ID); err != nil {
		t.Fatal(err)
	}
	_, _, err = h.mgr.CreateOwnKey(ctx, primary, accounts.NewKey{Name: "b"})
	wantCode(t, "CreateOwnKey b, a revoked", err, tollgate.CodeConflict)
	if n, err := h.mgr.PruneKeys(ctx); n != 0 || err != nil {
		t.Errorf("PruneKeys without a retention: %d, %v; want 0, nil", n, err)
	}
}
