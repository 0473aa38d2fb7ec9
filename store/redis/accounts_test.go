package redis_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/store/redis"
	"github.com/tollgate-dev/tollgate/store/storetest"
)

// TestAccountsOfAnOlderLayout checks accounts stored before the account lifecycle: a
// record without state, anchor, pending plan or revision, no revision in the keys
// hash, and no entry in the index of account ids. They read as active at revision 0,
// pass the key checks of revision 0, are listed once IndexAccounts has run, and are
// updated and deleted as new ones are.
func TestAccountsOfAnOlderLayout(t *testing.T) {
	testAccountsOfAnOlderLayout(t, client(t))
}

// TestClusterAccountsOfAnOlderLayout is TestAccountsOfAnOlderLayout on a Redis Cluster,
// where IndexAccounts scans every master.
func TestClusterAccountsOfAnOlderLayout(t *testing.T) {
	addr(t)
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	_, c := startCluster(t)
	testAccountsOfAnOlderLayout(t, c)
}

func testAccountsOfAnOlderLayout(t *testing.T, c goredis.UniversalClient) {
	s, prefix := newStorePrefix(t, c, nil)
	ctx := t.Context()
	t0 := time.Date(2030, time.January, 15, 0, 0, 0, 0, time.UTC)
	// Ids of every shape a hash tag takes: plain, and written in hexadecimal.
	ids := []string{"old-1", "old-2", "old}3", "~old4", "old-5"}
	hashes := map[string]auth.Hash{}
	for _, id := range ids {
		hashes[id] = newHash()
		must(t, s.CreateAccount(ctx, auth.Account{ID: id, Plan: "p", CreatedAt: t0},
			auth.Key{ID: id + "-primary", AccountID: id, Name: "primary", Primary: true, Hash: hashes[id], CreatedAt: t0}))
		rec := redis.AccountRecordKey(prefix, id)
		must(t, c.Set(ctx, rec, `{"plan":"p","restrictions":{},"created_at":"2030-01-15T00:00:00Z"}`, 0).Err())
	}
	// What an older store left: no index of account ids.
	must(t, c.Del(ctx, prefix+":accounts").Err())

	want := auth.Account{ID: "old-1", Plan: "p", CreatedAt: t0, State: auth.AccountActive}
	got, err := s.Account(ctx, "old-1")
	must(t, err)
	if got.ID != want.ID || got.Plan != want.Plan || !got.CreatedAt.Equal(t0) || got.State != auth.AccountActive ||
		got.Revision != 0 || !got.BillingAnchor.IsZero() || got.PendingPlan != "" || !got.PendingPlanAt.IsZero() || !got.StateChangedAt.IsZero() {
		t.Errorf("Account of the older layout: %+v, want %+v", got, want)
	}
	if _, a, err := s.Resolve(ctx, hashes["old-1"]); err != nil || a.State != auth.AccountActive || a.Revision != 0 {
		t.Errorf("Resolve of the older layout: %+v, %v", a, err)
	}
	check := driver.KeyCheck{Account: "old-1", KeyID: "old-1-primary", Hash: hashes["old-1"]}
	wantCheck(t, s, check, driver.KeyLive)
	wantCheck(t, s, driver.KeyCheck{Account: "old-1"}, driver.KeyLive)
	r, err := s.Admit(ctx, driver.Step{Account: "old-1", Request: newRequest(), Now: t0, Key: &check})
	must(t, err)
	if r.Denied != driver.NotDenied {
		t.Errorf("Admit with the key of an account of the older layout: %+v", r)
	}

	listed := func() []string {
		t.Helper()
		var all []string
		q := auth.AccountQuery{}
		for {
			page, err := s.Accounts(ctx, q)
			must(t, err)
			for _, a := range page.Accounts {
				all = append(all, a.ID)
			}
			if page.Next == "" {
				return all
			}
			q.After = page.Next
		}
	}
	if got := listed(); len(got) != 0 {
		t.Errorf("accounts listed before IndexAccounts: %q, want none", got)
	}
	n, err := s.IndexAccounts(ctx)
	must(t, err)
	if n != int64(len(ids)) {
		t.Errorf("IndexAccounts found %d accounts, want %d", n, len(ids))
	}
	wantIDs := slices.Sorted(slices.Values(ids))
	if got := listed(); !slices.Equal(got, wantIDs) {
		t.Errorf("accounts listed after IndexAccounts: %q, want %q", got, wantIDs)
	}
	if _, err := s.IndexAccounts(ctx); err != nil {
		t.Fatal(err)
	}
	// Entries that no record backs, as a creation that stopped half-way leaves them,
	// are skipped.
	must(t, c.ZAdd(ctx, prefix+":accounts", goredis.Z{Member: "old-1x"}, goredis.Z{Member: "old-9"}).Err())
	if got := listed(); !slices.Equal(got, wantIDs) {
		t.Errorf("accounts listed after a second IndexAccounts: %q, want %q", got, wantIDs)
	}

	u := got.Update()
	u.State, u.BillingAnchor = auth.AccountSuspended, t0
	suspended, err := s.UpdateAccount(ctx, u)
	must(t, err)
	if suspended.Revision != 1 || suspended.State != auth.AccountSuspended || !suspended.BillingAnchor.Equal(t0) {
		t.Errorf("UpdateAccount of the older layout: %+v", suspended)
	}
	wantCheck(t, s, check, driver.KeyUnknown)
	check.AccountRevision = 1
	wantCheck(t, s, check, driver.KeyLive)
	u = suspended.Update()
	u.State = auth.AccountClosed
	_, err = s.UpdateAccount(ctx, u)
	must(t, err)
	must(t, s.DeleteAccount(ctx, "old-1"))
	if _, err := s.Key(ctx, "old-1-primary"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Key after DeleteAccount: %v, want store.ErrNotFound", err)
	}
	if got := listed(); !slices.Equal(got, wantIDs[1:]) {
		t.Errorf("accounts listed after DeleteAccount: %q, want %q", got, wantIDs[1:])
	}
}

func wantCheck(t *testing.T, s *redis.Store, c driver.KeyCheck, want driver.KeyState) {
	t.Helper()
	got, err := s.CheckKey(t.Context(), c)
	must(t, err)
	if got != want {
		t.Errorf("CheckKey(%+v) = %d, want %d", c, got, want)
	}
}

// TestAccountPages runs the listing rows on stores whose pages examine three accounts
// at most, so that they hold on short pages too.
func TestAccountPages(t *testing.T) {
	storetest.TestAccountPages(t, func(t *testing.T) auth.KeyStore {
		s := newStore(t, nil)
		s.SetAccountScan(3)
		return s
	}, 3)
}
