package postgres_test

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/store/postgres"
	"github.com/tollgate-dev/tollgate/store/storetest"
)

// TestMigrateAccountLifecycle upgrades a schema of the version before the account
// lifecycle (20) that holds accounts and keys, written as that release wrote them: the
// accounts read as active, at revision 0, with no anchor and no pending plan; they are
// listed, updated, checked and deleted as new ones are; and a key check as an instance
// of the earlier release sends it, without the account's revision, is judged as before.
func TestMigrateAccountLifecycle(t *testing.T) {
	pool, _ := emptyPool(t)
	ctx := t.Context()
	migrateTo(t, pool, 19)
	keyHash := auth.HashKey(auth.NewKeyValue())
	revokedHash := auth.HashKey(auth.NewKeyValue())
	for _, id := range []string{"acme", "globex", "initech"} {
		if _, err := pool.Exec(ctx, `INSERT INTO tollgate_accounts (id, plan, restrictions, created_at) VALUES ($1, 'pro', NULL, $2)`,
			id, t0); err != nil {
			t.Fatal(err)
		}
		h := auth.HashKey(auth.NewKeyValue())
		if id == "acme" {
			h = keyHash
		}
		if _, err := pool.Exec(ctx, `INSERT INTO tollgate_keys (id, account_id, name, is_primary, hash, created_at)
			VALUES ($1, $2, 'primary', true, $3, $4)`, "key_"+id, id, h[:], t0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `INSERT INTO tollgate_keys (id, account_id, name, is_primary, hash, created_at, revoked_at, revision)
		VALUES ('key_old', 'acme', 'old', false, $1, $2, $2, 1)`, revokedHash[:], t0); err != nil {
		t.Fatal(err)
	}

	if err := postgres.Migrate(ctx, pool); err != nil {
		t.Fatalf("Migrate from version 19: %v", err)
	}
	s, err := postgres.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := auth.Account{ID: "acme", Plan: "pro", CreatedAt: t0, State: auth.AccountActive}
	got, err := s.Account(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if !sameAccount(got, want) {
		t.Errorf("Account after the upgrade: %+v, want %+v", got, want)
	}
	_, ra, err := s.Resolve(ctx, keyHash)
	if err != nil || !sameAccount(ra, want) {
		t.Errorf("Resolve after the upgrade: %+v, %v; want %+v", ra, err, want)
	}
	page, err := s.Accounts(ctx, auth.AccountQuery{State: auth.AccountActive})
	if err != nil {
		t.Fatal(err)
	}
	if ids := idsOf(page.Accounts); !slices.Equal(ids, []string{"acme", "globex", "initech"}) || page.Next != "" {
		t.Errorf("active accounts after the upgrade: %q, next %q", ids, page.Next)
	}

	check := driver.KeyCheck{Account: "acme", KeyID: "key_acme", Hash: keyHash}
	oldCheck := func() int { // as the earlier release checks a key: hash and key revision
		t.Helper()
		p := binary.BigEndian.AppendUint64(slices.Clone(keyHash[:]), 0)
		var st int
		if err := pool.QueryRow(ctx, `SELECT tollgate_key_state('acme', 'key_acme', $1)`, p).Scan(&st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	wantState(t, s, check, driver.KeyLive)
	if st := oldCheck(); st != 0 {
		t.Errorf("a key check of the earlier release: state %d, want 0 (live)", st)
	}
	u := got.Update()
	u.State, u.StateChangedAt, u.BillingAnchor = auth.AccountSuspended, t0.Add(time.Hour), t0
	suspended, err := s.UpdateAccount(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	if suspended.Revision != 1 || suspended.State != auth.AccountSuspended || !suspended.BillingAnchor.Equal(t0) {
		t.Errorf("UpdateAccount of an upgraded account: %+v", suspended)
	}
	wantState(t, s, check, driver.KeyUnknown)
	check.AccountRevision = 1
	wantState(t, s, check, driver.KeyLive)
	if st := oldCheck(); st != 0 {
		t.Errorf("a key check of the earlier release, after an update of the account: state %d, want 0 (live)", st)
	}

	u = suspended.Update()
	u.State = auth.AccountClosed
	if _, err := s.UpdateAccount(ctx, u); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteAccount(ctx, "acme"); err != nil {
		t.Fatalf("DeleteAccount of an upgraded account: %v", err)
	}
	for _, id := range []string{"key_acme", "key_old"} {
		if _, err := s.Key(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Key(%q) after DeleteAccount: %v, want store.ErrNotFound", id, err)
		}
	}
	wantState(t, s, check, driver.KeyUnknown)
}

func sameAccount(a, b auth.Account) bool {
	return a.ID == b.ID && a.Plan == b.Plan && a.CreatedAt.Equal(b.CreatedAt) && a.State == b.State &&
		a.StateChangedAt.Equal(b.StateChangedAt) && a.BillingAnchor.Equal(b.BillingAnchor) && a.PendingPlan == b.PendingPlan &&
		a.PendingPlanAt.Equal(b.PendingPlanAt) && a.Revision == b.Revision && a.Restrictions.IsZero() == b.Restrictions.IsZero()
}

func idsOf(accts []auth.Account) []string {
	ids := make([]string, len(accts))
	for i, a := range accts {
		ids[i] = a.ID
	}
	return ids
}

func wantState(t *testing.T, s *postgres.Store, c driver.KeyCheck, want driver.KeyState) {
	t.Helper()
	got, err := s.CheckKey(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
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
