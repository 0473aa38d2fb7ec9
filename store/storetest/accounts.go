package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/store"
)

// The account lifecycle: states, revisions and the other fields of an account's record,
// their update, the listing of accounts and the deletion of closed ones.

var accountRows = []behaviour[auth.KeyStore]{
	{"AccountFields",
		"CreateAccount stores State, StateChangedAt, BillingAnchor, PendingPlan and PendingPlanAt as given (an empty state as active) at revision 0, whatever Revision the account says; Account, Resolve and Accounts return them.",
		acAccountFields},
	{"CreateAccountBadState",
		"CreateAccount with a state that is neither empty nor valid returns store.ErrInvalid and stores nothing.",
		acCreateAccountBadState},
	{"UpdateAccount",
		"UpdateAccount replaces the mutable fields of an account at its revision, keeps its id, creation and keys, increases the revision, returns the account as stored, and the very next Account, Resolve and Accounts return the change.",
		acUpdateAccount},
	{"UpdateAccountStale",
		"UpdateAccount naming a revision the account no longer has returns auth.ErrAccountChanged (which wraps store.ErrConflict) and changes nothing.",
		acUpdateAccountStale},
	{"UpdateAccountMissing",
		"UpdateAccount of an unknown account id returns store.ErrNotFound, naming the id, and creates nothing.",
		acUpdateAccountMissing},
	{"UpdateAccountInvalid",
		"UpdateAccount with text a store cannot hold (plan, pending plan) or a state that is not valid (empty included) returns store.ErrInvalid and changes nothing.",
		acUpdateAccountInvalid},
	{"UpdateClosedAccount",
		"An account can be closed by UpdateAccount; a closed account can be changed no more: UpdateAccount returns auth.ErrAccountClosed (which wraps store.ErrConflict), at its revision or any other, and changes nothing.",
		acUpdateClosedAccount},
	{"UpdateAccountConcurrent",
		"Of many goroutines updating an account from the same revision at once, exactly one succeeds; the others get auth.ErrAccountChanged, and the winner's change is stored.",
		acUpdateAccountConcurrent},
	{"AccountsPaged",
		"Accounts lists every account once, in the order of the ids, whatever the page size (the default for Limit 0, auth.DefaultAccountPage, included): no page holds more than its limit, and Next, the last id of its page when set, leads to the rest.",
		acAccountsPaged},
	{"AccountsAfter",
		"Accounts lists the accounts after After, which need not name an account: the page starts with the first id greater than After, byte-wise.",
		acAccountsAfter},
	{"AccountsFilters",
		"Accounts lists the accounts every filter set selects: Plan, State (an account created with the empty state counts as active), CreatedFrom (inclusive), CreatedBefore (exclusive) and IDPrefix, alone and together.",
		acAccountsFilters},
	{"AccountsPrefixLiteral",
		"An IDPrefix is matched literally: %, _ and \\ in it match themselves only.",
		acAccountsPrefixLiteral},
	{"AccountsBadQuery",
		"Accounts with a Limit below 0 or above auth.MaxAccountPage, or a State that is not valid, returns auth.ErrBadAccountQuery, which wraps store.ErrInvalid.",
		acAccountsBadQuery},
	{"AccountsWhileCreating",
		"A listing made while accounts are being created lists every account that existed when it started exactly once, and no account twice.",
		acAccountsWhileCreating},
	{"DeleteAccount",
		"DeleteAccount deletes a closed account and all its keys: Account, Key, Keys, Resolve and Accounts find them no more; the id, and the ids of its keys, may be used again, by a new account at revision 0.",
		acDeleteAccount},
	{"DeleteAccountNotClosed",
		"DeleteAccount of an account that is not closed returns auth.ErrAccountNotClosed (which wraps store.ErrConflict), naming the id, and deletes nothing.",
		acDeleteAccountNotClosed},
	{"DeleteAccountMissing",
		"DeleteAccount of an unknown account id, or of one deleted already, returns store.ErrNotFound, naming the id.",
		acDeleteAccountMissing},
	{"AccountsCanceledContext",
		"UpdateAccount, Accounts and DeleteAccount given a canceled context return an error matching context.Canceled and change nothing.",
		acCanceledContext},
}

// lifecycleAccount returns an account, with restrictions, in a state with every
// lifecycle field set, and its primary key.
func lifecycleAccount(t *testing.T, n ids, label string) (auth.Account, auth.Key) {
	t.Helper()
	a, k := newAccount(t, n, label)
	a.State, a.StateChangedAt = auth.AccountSuspended, at(time.Minute)
	a.BillingAnchor = time.Date(2029, time.March, 31, 8, 30, 0, 0, time.UTC)
	a.PendingPlan, a.PendingPlanAt = "team", at(30*24*time.Hour)
	return a, k
}

// listAccounts lists every account q selects, a page at a time, until Next is empty. It
// checks that each page holds at most the limit, that Next is the last id of a full
// page (and no id before the last of a short one, which a store that bounds what a
// page examines returns), and that the ids go up.
func listAccounts(t *testing.T, ctx context.Context, s auth.KeyStore, q auth.AccountQuery) []auth.Account {
	t.Helper()
	limit := q.Limit
	if limit == 0 {
		limit = auth.DefaultAccountPage
	}
	var all []auth.Account
	for pages := 0; ; pages++ {
		if pages > 100000 {
			t.Fatalf("Accounts(%+v): the listing does not end", q)
		}
		page, err := s.Accounts(ctx, q)
		must(t, "Accounts", err)
		if len(page.Accounts) > limit {
			t.Fatalf("Accounts(%+v): a page of %d accounts, more than the limit %d", q, len(page.Accounts), limit)
		}
		for _, a := range page.Accounts {
			if a.ID <= q.After || len(all) > 0 && a.ID <= all[len(all)-1].ID {
				t.Fatalf("Accounts(%+v): account %q is out of order (after %q)", q, a.ID, q.After)
			}
			all = append(all, a)
		}
		if page.Next == "" {
			return all
		}
		if len(page.Accounts) > 0 && page.Next < page.Accounts[len(page.Accounts)-1].ID {
			t.Fatalf("Accounts(%+v): Next %q is before the page's last account %q", q, page.Next, page.Accounts[len(page.Accounts)-1].ID)
		}
		if len(page.Accounts) == limit && page.Next != page.Accounts[limit-1].ID {
			t.Fatalf("Accounts(%+v): Next %q of a full page is not the id of its last account %q", q, page.Next, page.Accounts[limit-1].ID)
		}
		if page.Next <= q.After {
			t.Fatalf("Accounts(%+v): Next %q does not move past After", q, page.Next)
		}
		q.After = page.Next
	}
}

// mine returns the accounts whose ids n made, so that a row's checks hold on a store
// shared with other rows.
func mine(n ids, accts []auth.Account) []auth.Account {
	var out []auth.Account
	for _, a := range accts {
		if strings.HasPrefix(a.ID, n.prefix+"-") {
			out = append(out, a)
		}
	}
	return out
}

func accountIDs(accts []auth.Account) []string {
	out := make([]string, len(accts))
	for i, a := range accts {
		out[i] = a.ID
	}
	return out
}

// wantListed checks that a listing with q, of the accounts n made, is exactly want (in
// id order, each account intact), and that q selects every account listed.
func wantListed(t *testing.T, s auth.KeyStore, n ids, what string, q auth.AccountQuery, want []auth.Account) {
	t.Helper()
	all := listAccounts(t, t.Context(), s, q)
	for _, a := range all {
		if !q.Selects(&a) {
			t.Errorf("%s: account %q is listed, but the query does not select it: %+v", what, a.ID, a)
		}
	}
	got := mine(n, all)
	want = slices.Clone(want)
	slices.SortFunc(want, func(a, b auth.Account) int { return strings.Compare(a.ID, b.ID) })
	if !slices.Equal(accountIDs(got), accountIDs(want)) {
		t.Errorf("%s: listed %d accounts %q, want %d %q", what, len(got), accountIDs(got), len(want), accountIDs(want))
		return
	}
	for i := range got {
		if d := diffAccount(got[i], want[i]); d != "" {
			t.Errorf("%s: account %q differs: %s", what, want[i].ID, d)
		}
	}
}

// wantAccount checks that Account(want.ID) returns want.
func wantAccount(t *testing.T, s auth.KeyStore, want auth.Account) {
	t.Helper()
	got, err := s.Account(t.Context(), want.ID)
	if err != nil {
		t.Errorf("Account(%q): %v", want.ID, err)
		return
	}
	checkAccount(t, "Account", got, want)
}

// update applies u, which must succeed, and returns the account as stored.
func update(t *testing.T, s auth.KeyStore, u auth.AccountUpdate) auth.Account {
	t.Helper()
	a, err := s.UpdateAccount(t.Context(), u)
	must(t, "UpdateAccount", err)
	return a
}

// closeAccount closes acct (at its revision) and returns it as stored.
func closeAccount(t *testing.T, s auth.KeyStore, acct auth.Account) auth.Account {
	t.Helper()
	u := acct.Update()
	u.State, u.StateChangedAt = auth.AccountClosed, at(2*time.Hour)
	return update(t, s, u)
}

func acAccountFields(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, primary := lifecycleAccount(t, n, "acct")
	given := acct
	given.Revision = 7
	must(t, "CreateAccount", s.CreateAccount(ctx, given, primary))
	wantAccount(t, s, acct)
	wantResolve(t, s, primary.Hash, primary, acct)

	plain, plainKey := plainAccount(n, "plain")
	must(t, "CreateAccount", s.CreateAccount(ctx, plain, plainKey))
	got, err := s.Account(ctx, plain.ID)
	must(t, "Account", err)
	if got.State != auth.AccountActive {
		t.Errorf("an account created with the empty state has State %q, want %q", got.State, auth.AccountActive)
	}
	checkAccount(t, "Account", got, plain)

	closed, closedKey := plainAccount(n, "closed")
	closed.State, closed.StateChangedAt = auth.AccountClosed, at(time.Hour)
	must(t, "CreateAccount", s.CreateAccount(ctx, closed, closedKey))
	wantAccount(t, s, closed)
	wantListed(t, s, n, "Accounts", auth.AccountQuery{IDPrefix: n.prefix}, []auth.Account{acct, plain, closed})
}

func acCreateAccountBadState(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, primary := plainAccount(n, "acct")
	acct.State = "frozen"
	wantErr(t, "CreateAccount in state \"frozen\"", s.CreateAccount(ctx, acct, primary), store.ErrInvalid)
	wantNoAccount(t, s, acct.ID)
	wantNoKey(t, s, primary.ID)
	wantUnresolved(t, s, primary.Hash, "hash of the refused account's key")
}

func acUpdateAccount(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, primary := createAccount(t, s, n, "acct")
	k := createKey(t, s, n, acct, "ci", at(time.Minute))

	u := acct.Update()
	u.Plan = "enterprise"
	u.Restrictions = restrictions(t, auth.RestrictionSpec{APIs: []string{"echo"}, Channels: []string{"rest"}})
	u.State, u.StateChangedAt = auth.AccountSuspended, at(time.Hour)
	u.BillingAnchor = at(-24 * time.Hour)
	u.PendingPlan, u.PendingPlanAt = "pro", at(40*24*time.Hour)
	got, err := s.UpdateAccount(ctx, u)
	must(t, "UpdateAccount", err)
	want := acct
	want.Plan, want.Restrictions, want.State, want.StateChangedAt = u.Plan, u.Restrictions, u.State, u.StateChangedAt
	want.BillingAnchor, want.PendingPlan, want.PendingPlanAt = u.BillingAnchor, u.PendingPlan, u.PendingPlanAt
	want.Revision = 1
	checkAccount(t, "UpdateAccount result", got, want)
	wantAccount(t, s, want)
	wantResolve(t, s, primary.Hash, primary, want)
	wantResolve(t, s, k.Hash, k, want)
	wantKey(t, s, k)
	keys, err := allKeys(ctx, s, acct.ID)
	must(t, "Keys", err)
	checkKeys(t, "Keys after UpdateAccount", keys, []auth.Key{primary, k})
	wantListed(t, s, n, "Accounts", auth.AccountQuery{IDPrefix: n.prefix}, []auth.Account{want})

	// Back to active, with the restrictions, the anchor and the pending plan cleared.
	u = got.Update()
	u.Restrictions, u.State, u.StateChangedAt = auth.Restrictions{}, auth.AccountActive, at(2*time.Hour)
	u.BillingAnchor, u.PendingPlan, u.PendingPlanAt = time.Time{}, "", time.Time{}
	got = update(t, s, u)
	want.Restrictions, want.State, want.StateChangedAt = auth.Restrictions{}, auth.AccountActive, at(2*time.Hour)
	want.BillingAnchor, want.PendingPlan, want.PendingPlanAt = time.Time{}, "", time.Time{}
	want.Revision = 2
	checkAccount(t, "second UpdateAccount result", got, want)
	wantAccount(t, s, want)
	wantResolve(t, s, primary.Hash, primary, want)

	// An update that changes nothing still counts as a change.
	got = update(t, s, got.Update())
	want.Revision = 3
	checkAccount(t, "UpdateAccount that writes the account back as it is", got, want)
	wantAccount(t, s, want)
}

func acUpdateAccountStale(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, primary := createAccount(t, s, n, "acct")
	u := acct.Update()
	u.Plan, u.State = "first", auth.AccountActive
	first := update(t, s, u)

	u = acct.Update()
	u.Plan, u.State = "stale", auth.AccountSuspended
	_, err := s.UpdateAccount(ctx, u)
	if wantErr(t, "UpdateAccount from the revision before the first update", err, auth.ErrAccountChanged) {
		wantErr(t, "UpdateAccount from the revision before the first update", err, store.ErrConflict)
		wantNamed(t, "UpdateAccount from the revision before the first update", err, auth.ErrAccountChanged, acct.ID)
	}
	u.Revision = first.Revision + 1
	_, err = s.UpdateAccount(ctx, u)
	wantErr(t, "UpdateAccount from a revision the account never had", err, auth.ErrAccountChanged)
	wantAccount(t, s, first)
	wantResolve(t, s, primary.Hash, primary, first)
}

func acUpdateAccountMissing(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	createAccount(t, s, n, "acct")
	ghost := n.id("ghost")
	_, err := s.UpdateAccount(ctx, auth.AccountUpdate{ID: ghost, Plan: "pro", State: auth.AccountActive})
	wantNamed(t, "UpdateAccount of a missing account", err, store.ErrNotFound, ghost)
	wantNoAccount(t, s, ghost)
}

func acUpdateAccountInvalid(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, _ := createAccount(t, s, n, "acct")
	for _, c := range []struct {
		what   string
		change func(*auth.AccountUpdate)
	}{
		{"a plan with a NUL byte", func(u *auth.AccountUpdate) { u.Plan = "nul\x00plan" }},
		{"a plan of invalid UTF-8", func(u *auth.AccountUpdate) { u.Plan = "bad\xffutf8" }},
		{"a pending plan with a NUL byte", func(u *auth.AccountUpdate) { u.PendingPlan = "nul\x00plan" }},
		{"a pending plan of invalid UTF-8", func(u *auth.AccountUpdate) { u.PendingPlan = "bad\xffutf8" }},
		{"the state \"frozen\"", func(u *auth.AccountUpdate) { u.State = "frozen" }},
		{"the empty state", func(u *auth.AccountUpdate) { u.State = "" }},
	} {
		u := acct.Update()
		u.State = auth.AccountActive
		c.change(&u)
		_, err := s.UpdateAccount(ctx, u)
		wantErr(t, "UpdateAccount with "+c.what, err, store.ErrInvalid)
	}
	wantAccount(t, s, acct)
}

func acUpdateClosedAccount(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, primary := createAccount(t, s, n, "acct")
	closed := closeAccount(t, s, acct)
	want := acct
	want.State, want.StateChangedAt, want.Revision = auth.AccountClosed, at(2*time.Hour), 1
	checkAccount(t, "UpdateAccount closing the account", closed, want)

	for _, rev := range []int64{closed.Revision, acct.Revision} {
		u := closed.Update()
		u.Revision, u.State, u.StateChangedAt = rev, auth.AccountActive, at(3*time.Hour)
		_, err := s.UpdateAccount(ctx, u)
		what := fmt.Sprintf("UpdateAccount reopening the closed account at revision %d", rev)
		if wantErr(t, what, err, auth.ErrAccountClosed) {
			wantErr(t, what, err, store.ErrConflict)
			wantNamed(t, what, err, auth.ErrAccountClosed, acct.ID)
		}
	}
	u := closed.Update()
	u.Plan = "other"
	_, err := s.UpdateAccount(ctx, u)
	wantErr(t, "UpdateAccount of a closed account's plan", err, auth.ErrAccountClosed)
	wantAccount(t, s, want)
	wantResolve(t, s, primary.Hash, primary, want)
}

func acUpdateAccountConcurrent(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, _ := createAccount(t, s, n, "acct")
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			u := acct.Update()
			u.Plan, u.State = fmt.Sprintf("plan-%02d", i), auth.AccountSuspended
			_, errs[i] = s.UpdateAccount(ctx, u)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil && !errors.Is(err, auth.ErrAccountChanged) {
			t.Errorf("UpdateAccount, candidate %d: got %v, want nil or auth.ErrAccountChanged", i, err)
		}
	}
	w := oneWinner(t, "UpdateAccount", errs)
	if w < 0 {
		return
	}
	want := acct
	want.Plan, want.State, want.Revision = fmt.Sprintf("plan-%02d", w), auth.AccountSuspended, 1
	wantAccount(t, s, want)
}

// createAccounts stores count plain accounts labeled label000, label001, ..., created
// a second apart from t0, and returns them.
func createAccounts(t *testing.T, s auth.KeyStore, n ids, label string, count int) []auth.Account {
	t.Helper()
	accts := make([]auth.Account, count)
	for i := range accts {
		a, k := plainAccount(n, fmt.Sprintf("%s%03d", label, i))
		a.CreatedAt = at(time.Duration(i) * time.Second)
		must(t, "CreateAccount", s.CreateAccount(t.Context(), a, k))
		accts[i] = a
	}
	return accts
}

func acAccountsPaged(t *testing.T, s auth.KeyStore) {
	n := newIDs()
	accts := createAccounts(t, s, n, "a", 250)
	for _, limit := range []int{0, 1, 7, auth.MaxAccountPage} {
		wantListed(t, s, n, fmt.Sprintf("Accounts with Limit %d", limit), auth.AccountQuery{Limit: limit}, accts)
		wantListed(t, s, n, fmt.Sprintf("Accounts of the prefix with Limit %d", limit), auth.AccountQuery{IDPrefix: n.prefix, Limit: limit}, accts)
	}
	// A first page of the default size holds the 50 first accounts of the prefix, if
	// the store fills it.
	page, err := s.Accounts(t.Context(), auth.AccountQuery{IDPrefix: n.prefix})
	must(t, "Accounts", err)
	if got := accountIDs(page.Accounts); len(got) > auth.DefaultAccountPage || !slices.Equal(got, accountIDs(accts[:len(got)])) || page.Next == "" {
		t.Errorf("first page of the default size: %q, next %q; want at most %d accounts from %q on, and a next page", got, page.Next, auth.DefaultAccountPage, accts[0].ID)
	}
}

func acAccountsAfter(t *testing.T, s auth.KeyStore) {
	n := newIDs()
	accts := createAccounts(t, s, n, "a", 12)
	q := auth.AccountQuery{IDPrefix: n.prefix, Limit: 5}
	q.After = accts[3].ID
	wantListed(t, s, n, "Accounts after an account", q, accts[4:])
	q.After = accts[3].ID + "-" // between accts[3] and accts[4]
	wantListed(t, s, n, "Accounts after an id between two accounts", q, accts[4:])
	q.After = n.id("a")
	wantListed(t, s, n, "Accounts after an id before every account", q, accts)
	q.After = accts[11].ID
	wantListed(t, s, n, "Accounts after the last account", q, nil)
	q.After = n.id("b")
	wantListed(t, s, n, "Accounts after an id past every account", q, nil)
	q.After, q.IDPrefix = accts[5].ID, ""
	wantListed(t, s, n, "Accounts after an account, without a prefix", q, accts[6:])
}

func acAccountsFilters(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	var all []auth.Account
	plans := []string{"free", "pro", "team"}
	for i := range 24 {
		a, k := plainAccount(n, fmt.Sprintf("%c%02d", "xy"[i%2], i))
		a.Plan = plans[i%3]
		switch i % 4 {
		case 0: // the empty state: active
		case 1:
			a.State = auth.AccountActive
		case 2:
			a.State = auth.AccountSuspended
		case 3:
			a.State = auth.AccountClosed
		}
		a.CreatedAt = at(time.Duration(i) * time.Hour)
		must(t, "CreateAccount", s.CreateAccount(ctx, a, k))
		all = append(all, a)
	}
	// One account is suspended by an update, one closed.
	for _, i := range []int{4, 9} {
		u := all[i].Update()
		u.State = auth.AccountSuspended
		if i == 9 {
			u.State = auth.AccountClosed
		}
		all[i] = update(t, s, u)
	}
	where := func(keep func(a auth.Account) bool) []auth.Account {
		var out []auth.Account
		for _, a := range all {
			if keep(a) {
				out = append(out, a)
			}
		}
		return out
	}
	for _, c := range []struct {
		what string
		q    auth.AccountQuery
		keep func(a auth.Account) bool
	}{
		{"no filter", auth.AccountQuery{}, func(auth.Account) bool { return true }},
		{"Plan", auth.AccountQuery{Plan: "pro"}, func(a auth.Account) bool { return a.Plan == "pro" }},
		{"a Plan no account has", auth.AccountQuery{Plan: "gold"}, func(auth.Account) bool { return false }},
		{"State active", auth.AccountQuery{State: auth.AccountActive}, func(a auth.Account) bool { return a.State.OrActive() == auth.AccountActive }},
		{"State suspended", auth.AccountQuery{State: auth.AccountSuspended}, func(a auth.Account) bool { return a.State == auth.AccountSuspended }},
		{"State closed", auth.AccountQuery{State: auth.AccountClosed}, func(a auth.Account) bool { return a.State == auth.AccountClosed }},
		{"CreatedFrom", auth.AccountQuery{CreatedFrom: at(10 * time.Hour)}, func(a auth.Account) bool { return !a.CreatedAt.Before(at(10 * time.Hour)) }},
		{"CreatedBefore", auth.AccountQuery{CreatedBefore: at(10 * time.Hour)}, func(a auth.Account) bool { return a.CreatedAt.Before(at(10 * time.Hour)) }},
		{"CreatedFrom and CreatedBefore", auth.AccountQuery{CreatedFrom: at(5 * time.Hour), CreatedBefore: at(12 * time.Hour)},
			func(a auth.Account) bool {
				return !a.CreatedAt.Before(at(5*time.Hour)) && a.CreatedAt.Before(at(12*time.Hour))
			}},
		{"CreatedFrom equal to CreatedBefore", auth.AccountQuery{CreatedFrom: at(5 * time.Hour), CreatedBefore: at(5 * time.Hour)},
			func(auth.Account) bool { return false }},
		{"CreatedFrom in another zone", auth.AccountQuery{CreatedFrom: at(20 * time.Hour).In(time.FixedZone("UTC-5", -5*3600))},
			func(a auth.Account) bool { return !a.CreatedAt.Before(at(20 * time.Hour)) }},
		{"IDPrefix", auth.AccountQuery{IDPrefix: n.id("y")}, func(a auth.Account) bool { return strings.HasPrefix(a.ID, n.id("y")) }},
		{"IDPrefix of one account", auth.AccountQuery{IDPrefix: n.id("x10")}, func(a auth.Account) bool { return a.ID == n.id("x10") }},
		{"IDPrefix of no account", auth.AccountQuery{IDPrefix: n.id("z")}, func(auth.Account) bool { return false }},
		{"Plan and State", auth.AccountQuery{Plan: "free", State: auth.AccountActive},
			func(a auth.Account) bool { return a.Plan == "free" && a.State.OrActive() == auth.AccountActive }},
		{"every filter", auth.AccountQuery{Plan: "team", State: auth.AccountActive, CreatedFrom: at(2 * time.Hour), CreatedBefore: at(20 * time.Hour), IDPrefix: n.id("x")},
			func(a auth.Account) bool {
				return a.Plan == "team" && a.State.OrActive() == auth.AccountActive && !a.CreatedAt.Before(at(2*time.Hour)) &&
					a.CreatedAt.Before(at(20*time.Hour)) && strings.HasPrefix(a.ID, n.id("x"))
			}},
	} {
		want := where(c.keep)
		if len(want) == len(all) && c.what != "no filter" {
			t.Fatalf("%s: the fixture has no account the filter leaves out", c.what)
		}
		for _, limit := range []int{0, 3} {
			q := c.q
			q.Limit = limit
			wantListed(t, s, n, fmt.Sprintf("Accounts with %s, Limit %d", c.what, limit), q, want)
		}
	}
}

func acAccountsPrefixLiteral(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	// Account ids are checked by the service, not by the stores: the prefix must be
	// taken literally whatever the ids hold.
	labels := []string{"a%b", "axb", "a_c", "ayc", `a\d`, `a\\d`, "azd", "a%", "a_", `a\`, "ab"}
	made := map[string]auth.Account{}
	for _, l := range labels {
		a, k := plainAccount(n, l)
		must(t, "CreateAccount", s.CreateAccount(ctx, a, k))
		made[l] = a
	}
	for _, c := range []struct {
		prefix string
		want   []string
	}{
		{"a%", []string{"a%b", "a%"}},
		{"a_", []string{"a_c", "a_"}},
		{`a\`, []string{`a\d`, `a\\d`, `a\`}},
		{`a\\`, []string{`a\\d`}},
		{"a%b", []string{"a%b"}},
		{"a", labels},
	} {
		var want []auth.Account
		for _, l := range c.want {
			want = append(want, made[l])
		}
		wantListed(t, s, n, fmt.Sprintf("Accounts with IDPrefix %q", n.id(c.prefix)), auth.AccountQuery{IDPrefix: n.id(c.prefix), Limit: 2}, want)
	}
}

func acAccountsBadQuery(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	createAccount(t, s, n, "acct")
	for _, q := range []auth.AccountQuery{
		{Limit: -1},
		{Limit: auth.MaxAccountPage + 1},
		{State: "frozen"},
		{State: "Active"},
	} {
		_, err := s.Accounts(ctx, q)
		what := fmt.Sprintf("Accounts(%+v)", q)
		if wantErr(t, what, err, auth.ErrBadAccountQuery) {
			wantErr(t, what, err, store.ErrInvalid)
		}
	}
}

func acAccountsWhileCreating(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	before := createAccounts(t, s, n, "b", 120)
	var created atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				// Labels that sort among the accounts listed, before and after them.
				for _, l := range []string{"a", "b", "c"} {
					a, k := plainAccount(n, fmt.Sprintf("%s%d-%04d", l, w, i))
					if err := s.CreateAccount(ctx, a, k); err != nil {
						t.Errorf("CreateAccount(%q): %v", a.ID, err)
						return
					}
					created.Add(1)
				}
			}
		})
	}
	var listings [][]auth.Account
	for _, limit := range []int{7, 0} {
		listings = append(listings, mine(n, listAccounts(t, ctx, s, auth.AccountQuery{Limit: limit})))
		listings = append(listings, listAccounts(t, ctx, s, auth.AccountQuery{IDPrefix: n.prefix, Limit: limit}))
	}
	close(stop)
	wg.Wait()
	if created.Load() == 0 {
		t.Log("no account was created during the listings")
	}
	for li, listed := range listings {
		seen := map[string]int{}
		for _, a := range listed {
			seen[a.ID]++
			if seen[a.ID] == 2 {
				t.Errorf("listing %d: account %q listed twice", li, a.ID)
			}
		}
		for _, a := range before {
			if seen[a.ID] == 0 {
				t.Errorf("listing %d: account %q, created before the listing, is not listed", li, a.ID)
			}
		}
	}
}

func acDeleteAccount(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, primary := createAccount(t, s, n, "acct")
	other, otherPrimary := createAccount(t, s, n, "other")
	k := createKey(t, s, n, acct, "ci", at(time.Minute))
	revoked := createKey(t, s, n, acct, "old", at(time.Minute))
	_, err := s.RevokeKey(ctx, revoked.ID, auth.AnyRevision, at(time.Hour))
	must(t, "RevokeKey", err)
	closed := closeAccount(t, s, acct)

	must(t, "DeleteAccount", s.DeleteAccount(ctx, acct.ID))
	wantNoAccount(t, s, acct.ID)
	for _, key := range []auth.Key{primary, k, revoked} {
		wantNoKey(t, s, key.ID)
		wantUnresolved(t, s, key.Hash, "hash of a key of the deleted account")
	}
	_, err = allKeys(ctx, s, acct.ID)
	wantErr(t, "Keys of the deleted account", err, store.ErrNotFound)
	_, err = s.UpdateAccount(ctx, closed.Update())
	wantErr(t, "UpdateAccount of the deleted account", err, store.ErrNotFound)
	wantListed(t, s, n, "Accounts after the deletion", auth.AccountQuery{IDPrefix: n.prefix}, []auth.Account{other})
	wantResolve(t, s, otherPrimary.Hash, otherPrimary, other)

	// The id, and the ids of the deleted keys, may be used again: by a new account,
	// at revision 0, that has only its own keys.
	again, againKey := plainAccount(n, "acct")
	againKey.ID = primary.ID
	must(t, "CreateAccount with the deleted account's id", s.CreateAccount(ctx, again, againKey))
	wantAccount(t, s, again)
	wantResolve(t, s, againKey.Hash, againKey, again)
	wantUnresolved(t, s, primary.Hash, "hash of the deleted account's primary key")
	k2 := newKey(n, again, "ci", at(3*time.Hour))
	must(t, "CreateKey with a deleted key's id", s.CreateKey(ctx, k2, auth.KeyLimit{}))
	keys, err := allKeys(ctx, s, again.ID)
	must(t, "Keys", err)
	checkKeys(t, "Keys of the new account", keys, []auth.Key{againKey, k2})
	wantListed(t, s, n, "Accounts after the id was taken again", auth.AccountQuery{IDPrefix: n.prefix}, []auth.Account{again, other})
}

func acDeleteAccountNotClosed(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, primary := createAccount(t, s, n, "acct")
	susp, suspKey := createAccount(t, s, n, "susp")
	u := susp.Update()
	u.State = auth.AccountSuspended
	susp = update(t, s, u)
	for _, a := range []auth.Account{acct, susp} {
		err := s.DeleteAccount(ctx, a.ID)
		what := fmt.Sprintf("DeleteAccount of a %s account", a.State.OrActive())
		if wantErr(t, what, err, auth.ErrAccountNotClosed) {
			wantErr(t, what, err, store.ErrConflict)
			wantNamed(t, what, err, auth.ErrAccountNotClosed, a.ID)
		}
		wantAccount(t, s, a)
	}
	wantResolve(t, s, primary.Hash, primary, acct)
	wantResolve(t, s, suspKey.Hash, suspKey, susp)
	wantListed(t, s, n, "Accounts", auth.AccountQuery{IDPrefix: n.prefix}, []auth.Account{acct, susp})
}

func acDeleteAccountMissing(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, _ := createAccount(t, s, n, "acct")
	ghost := n.id("ghost")
	wantNamed(t, "DeleteAccount of a missing account", s.DeleteAccount(ctx, ghost), store.ErrNotFound, ghost)
	closeAccount(t, s, acct)
	must(t, "DeleteAccount", s.DeleteAccount(ctx, acct.ID))
	wantNamed(t, "DeleteAccount of a deleted account", s.DeleteAccount(ctx, acct.ID), store.ErrNotFound, acct.ID)
}

func acCanceledContext(t *testing.T, s auth.KeyStore) {
	ctx, n := canceled(t), newIDs()
	acct, primary := createAccount(t, s, n, "acct")
	closedAcct, _ := createAccount(t, s, n, "closed")
	closedAcct = closeAccount(t, s, closedAcct)

	u := acct.Update()
	u.Plan = "changed"
	_, err := s.UpdateAccount(ctx, u)
	wantErr(t, "UpdateAccount", err, context.Canceled)
	_, err = s.Accounts(ctx, auth.AccountQuery{})
	wantErr(t, "Accounts", err, context.Canceled)
	wantErr(t, "DeleteAccount", s.DeleteAccount(ctx, closedAcct.ID), context.Canceled)

	wantAccount(t, s, acct)
	wantAccount(t, s, closedAcct)
	wantResolve(t, s, primary.Hash, primary, acct)
}

// TestAccountPages checks the listing of an [auth.KeyStore] that bounds the accounts
// one page of Accounts examines (see [auth.KeyStore.Accounts]), set to examine at
// most examined accounts (1 to auth.MaxAccountPage-1): no page holds more, a listing
// whose limit is larger returns short pages with Next set, and the pages of a listing
// together hold every account it selects, once, in order. A store that bounds its
// pages runs TestKeyStore as it is, and TestAccountPages with a small bound, so that
// the suite's listings, which its bound does not reach, are checked on short pages
// too.
//
// newStore is called once per subtest and must return an empty store set so; it
// registers any teardown with t.Cleanup. The subtests run in parallel.
func TestAccountPages(t *testing.T, newStore func(t *testing.T) auth.KeyStore, examined int) {
	t.Helper()
	if examined < 1 || examined >= auth.MaxAccountPage {
		t.Fatalf("storetest.TestAccountPages: examined is %d; give 1 to %d", examined, auth.MaxAccountPage-1)
	}
	rows := []behaviour[auth.KeyStore]{
		{"ShortPages",
			"A store that examines at most a number of accounts a page returns no more than that, with Next set while more may follow, and its pages together hold every account the query selects, once, in order.",
			func(t *testing.T, s auth.KeyStore) { acShortPages(t, s, examined) }},
	}
	for _, row := range accountRows {
		if strings.HasPrefix(row.name, "Accounts") {
			rows = append(rows, row)
		}
	}
	run(t, newStore, rows)
}

func acShortPages(t *testing.T, s auth.KeyStore, examined int) {
	ctx, n := t.Context(), newIDs()
	accts := createAccounts(t, s, n, "a", 3*examined+5)
	var pro []auth.Account
	for i := range accts {
		if i%4 != 0 {
			u := accts[i].Update()
			u.Plan, u.State = "pro", auth.AccountActive
			accts[i] = update(t, s, u)
			pro = append(pro, accts[i])
		}
	}
	for _, c := range []struct {
		what string
		q    auth.AccountQuery
		want []auth.Account
	}{
		{"every account", auth.AccountQuery{IDPrefix: n.prefix, Limit: examined + 1}, accts},
		{"a plan", auth.AccountQuery{IDPrefix: n.prefix, Plan: "pro", Limit: examined + 1}, pro},
		{"a plan, a page at most as large as the bound", auth.AccountQuery{IDPrefix: n.prefix, Plan: "pro", Limit: max(examined/2, 1)}, pro},
	} {
		short := false
		q := c.q
		var got []auth.Account
		for pages := 0; ; pages++ {
			if pages > 10*len(accts) {
				t.Fatalf("%s: the listing does not end", c.what)
			}
			page, err := s.Accounts(ctx, q)
			must(t, "Accounts", err)
			if len(page.Accounts) > examined {
				t.Errorf("%s: a page of %d accounts, more than the %d a page examines", c.what, len(page.Accounts), examined)
			}
			if page.Next != "" && len(page.Accounts) < q.Limit {
				short = true
			}
			got = append(got, page.Accounts...)
			if page.Next == "" {
				break
			}
			q.After = page.Next
		}
		if !slices.Equal(accountIDs(got), accountIDs(c.want)) {
			t.Errorf("%s: listed %q, want %q", c.what, accountIDs(got), accountIDs(c.want))
		}
		if c.q.Limit > examined && !short {
			t.Errorf("%s: no page was short, with a limit of %d and at most %d accounts examined a page", c.what, c.q.Limit, examined)
		}
	}
	wantListed(t, s, n, "Accounts", auth.AccountQuery{Limit: examined + 1}, accts)
}
