package redis_test

import (
	"errors"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/store"
)

// TestRevokedKeysOfAnOlderLayout checks an account stored before the store kept its
// revoked keys in krev (and in the index of revoked keys): the first creation under a
// limit indexes them, at their own revocation moments, so that they count for the
// limit only within its instant, and a prune then finds and deletes them.
func TestRevokedKeysOfAnOlderLayout(t *testing.T) {
	c := client(t)
	s, prefix := newStorePrefix(t, c, nil)
	ctx := t.Context()
	t0 := time.Date(2030, time.January, 15, 0, 0, 0, 0, time.UTC)
	must(t, s.CreateAccount(ctx, auth.Account{ID: "old", Plan: "p", CreatedAt: t0},
		auth.Key{ID: "old-primary", AccountID: "old", Name: "primary", Primary: true, Hash: newHash(), CreatedAt: t0}))
	keys := []auth.Key{
		{ID: "old-a", AccountID: "old", Name: "a", Hash: newHash(), CreatedAt: t0},
		{ID: "old-b", AccountID: "old", Name: "b", Hash: newHash(), CreatedAt: t0},
	}
	for i, k := range keys {
		must(t, s.CreateKey(ctx, k, auth.KeyLimit{}))
		_, err := s.RevokeKey(ctx, k.ID, auth.AnyRevision, t0.Add(time.Duration(i+1)*time.Hour))
		must(t, err)
	}
	// What an older store left: no krev, no field krev, no entries in the index of
	// revoked keys.
	must(t, c.Del(ctx, prefix+":{old}:krev", prefix+":revoked").Err())
	must(t, c.HDel(ctx, prefix+":{old}:keys", "krev").Err())

	// Three keys, a revoked at t0+1h, b at t0+2h: with revocations from t0+90m
	// counting, two count, so a third fits and a fourth does not.
	limit := auth.KeyLimit{Max: 3, RevokedSince: t0.Add(90 * time.Minute)}
	must(t, s.CreateKey(ctx, auth.Key{ID: "old-c", AccountID: "old", Name: "c", Hash: newHash(), CreatedAt: t0}, limit))
	if err := s.CreateKey(ctx, auth.Key{ID: "old-d", AccountID: "old", Name: "d", Hash: newHash(), CreatedAt: t0}, limit); !errors.Is(err, auth.ErrTooManyKeys) {
		t.Errorf("CreateKey past the limit: %v, want auth.ErrTooManyKeys", err)
	}
	n, err := s.PruneKeys(ctx, t0.Add(90*time.Minute))
	must(t, err)
	if n != 1 {
		t.Errorf("PruneKeys: %d, want 1 (a)", n)
	}
	if _, err := s.Key(ctx, "old-a"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Key of the pruned key: %v, want store.ErrNotFound", err)
	}
	if _, _, err := s.Resolve(ctx, keys[0].Hash); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Resolve of the pruned key: %v, want store.ErrNotFound", err)
	}
	if _, err := s.Key(ctx, "old-b"); err != nil {
		t.Errorf("Key of the key revoked after the instant: %v", err)
	}
}
