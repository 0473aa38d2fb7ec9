package redis_test

import (
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
)

// TestExpiryIndex checks the index of expiries beyond the suite: the entries a change
// leaves behind are deleted by the listing that passes them, PruneKeys and
// DeleteAccount delete the entries of their keys, and IndexAccounts indexes the
// expiries of keys stored before the index.
func TestExpiryIndex(t *testing.T) {
	ctx, c := t.Context(), client(t)
	s, prefix := newStorePrefix(t, c, nil)
	index := prefix + ":expiries"
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	h := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Hour) }
	restricted := func(e time.Time) auth.Restrictions {
		r, err := auth.NewRestrictions(auth.RestrictionSpec{ExpiresAt: &e})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	entries := func() int64 {
		n, err := c.ZCard(ctx, index).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	listed := func(to time.Time) []string {
		page, err := s.ExpiringKeys(ctx, auth.ExpiryQuery{To: to})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, e := range page.Expiries {
			ids = append(ids, e.Key.ID+"@"+e.At.Sub(t0).String())
		}
		return ids
	}

	a := auth.Account{ID: "acme", Plan: "pro", CreatedAt: t0, Restrictions: restricted(h(10))}
	primary := auth.Key{ID: "key_primary", AccountID: "acme", Name: "primary", Primary: true, Hash: auth.HashKey(auth.NewKeyValue()), CreatedAt: t0}
	if err := s.CreateAccount(ctx, a, primary); err != nil {
		t.Fatal(err)
	}
	k := auth.Key{ID: "key_ci", AccountID: "acme", Name: "ci", Hash: auth.HashKey(auth.NewKeyValue()), CreatedAt: t0, Restrictions: restricted(h(1))}
	if err := s.CreateKey(ctx, k, auth.KeyLimit{}); err != nil {
		t.Fatal(err)
	}
	if n := entries(); n != 2 {
		t.Fatalf("%d entries after the account and a key, want 2", n)
	}
	// Moved to a later expiry, the key leaves its old entry, which the listing that
	// passes it deletes.
	if _, err := s.UpdateKey(ctx, auth.KeyUpdate{ID: k.ID, Name: k.Name, Restrictions: restricted(h(2)), Revision: k.Revision}); err != nil {
		t.Fatal(err)
	}
	if n := entries(); n != 3 {
		t.Fatalf("%d entries after the update, want 3", n)
	}
	if got := listed(h(1)); len(got) != 0 {
		t.Errorf("listed up to 1h: %q, want none", got)
	}
	if n := entries(); n != 2 {
		t.Errorf("%d entries after the listing passed the old one, want 2", n)
	}
	if got := listed(h(20)); len(got) != 2 || got[0] != "key_ci@2h0m0s" || got[1] != "key_primary@10h0m0s" {
		t.Errorf("listed up to 20h: %q", got)
	}

	// An older version's keys: no entries until IndexAccounts.
	if err := c.Del(ctx, index).Err(); err != nil {
		t.Fatal(err)
	}
	if got := listed(h(20)); len(got) != 0 {
		t.Errorf("listed without the index: %q", got)
	}
	if _, err := s.IndexAccounts(ctx); err != nil {
		t.Fatal(err)
	}
	if got := listed(h(20)); len(got) != 2 {
		t.Errorf("listed after IndexAccounts: %q, want both keys", got)
	}

	// A pruned key and a deleted account take their entries with them.
	if _, err := s.RevokeKey(ctx, k.ID, auth.AnyRevision, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PruneKeys(ctx, h(1)); err != nil {
		t.Fatal(err)
	}
	if n := entries(); n != 1 {
		t.Errorf("%d entries after the prune, want the account's", n)
	}
	acct, err := s.Account(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	u := acct.Update()
	u.State = auth.AccountClosed
	if _, err := s.UpdateAccount(ctx, u); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteAccount(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	if n := entries(); n != 0 {
		t.Errorf("%d entries after the deletion of the account, want none", n)
	}
}
