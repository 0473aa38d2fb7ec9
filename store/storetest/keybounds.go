package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/store"
)

// The bounds on what an account can make a key store keep: paged listings, a limit on
// the keys an account holds, and the prune of revoked keys.

var keyBoundRows = []behaviour[auth.KeyStore]{
	{"KeysPaged",
		"Keys returns an account's keys a page at a time, oldest first: at most Limit keys, Next the id of the page's last key when a key follows it (empty at the end, also when the last page is full), and the page after the key After names; revoked keys are listed.",
		ksKeysPaged},
	{"KeysDefaultPage",
		"Keys with Limit 0 returns auth.DefaultKeyPage keys and a Next; auth.MaxKeyPage keys fit one page.",
		ksKeysDefaultPage},
	{"KeysBadQuery",
		"Keys with a Limit below 0 or above auth.MaxKeyPage, or an After that names no key of the account (unknown, or another account's), returns auth.ErrBadKeyQuery, which wraps store.ErrInvalid; an unknown account is store.ErrNotFound.",
		ksKeysBadQuery},
	{"CreateKeyLimit",
		"CreateKey with a KeyLimit refuses a key (auth.ErrTooManyKeys, which wraps store.ErrConflict, storing nothing) when the account holds Max keys that count: live keys, and keys revoked at or after RevokedSince; keys revoked before it do not count; the zero KeyLimit sets no bound; an unknown account is store.ErrNotFound.",
		ksCreateKeyLimit},
	{"CreateKeyLimitConcurrent",
		"Of many goroutines creating keys of one account at once under a KeyLimit, exactly as many succeed as the limit leaves room for; the others get auth.ErrTooManyKeys.",
		ksCreateKeyLimitConcurrent},
	{"PruneKeys",
		"PruneKeys deletes exactly the keys revoked before the instant given, primary keys excepted, of every account, and reports how many: Key, Keys and Resolve find them no more, a cursor naming one is invalid, and they no longer count for a KeyLimit; pruning again deletes nothing.",
		ksPruneKeys},
	{"PruneKeysConcurrent",
		"Many goroutines pruning at once delete each key once: their counts add up to the keys revoked before the instant.",
		ksPruneKeysConcurrent},
	{"PruneKeysCanceled",
		"PruneKeys given a canceled context returns an error matching context.Canceled and deletes nothing.",
		ksPruneKeysCanceled},
}

// past returns the instant d after a moment long before t0: the prunes revoke keys
// then and prune before instants then, so that they never delete the keys that other
// rows revoke (at t0 or later), should their store be shared.
func past(d time.Duration) time.Time { return at(d - 1000*time.Hour) }

// allKeys returns every key of an account, reading it a page at a time.
func allKeys(ctx context.Context, s auth.KeyStore, account string) ([]auth.Key, error) {
	var all []auth.Key
	q := auth.KeyQuery{Account: account, Limit: auth.MaxKeyPage}
	for {
		page, err := s.Keys(ctx, q)
		if err != nil {
			return nil, err
		}
		all = append(all, page.Keys...)
		if page.Next == "" {
			return all, nil
		}
		if q.After == page.Next {
			return nil, fmt.Errorf("the page after %q has the same cursor", page.Next)
		}
		q.After = page.Next
	}
}

// createKeys stores n further keys of acct, created a second apart from t0+1s, and
// returns them.
func createKeys(t *testing.T, s auth.KeyStore, n ids, acct auth.Account, label string, count int) []auth.Key {
	t.Helper()
	keys := make([]auth.Key, count)
	for i := range keys {
		keys[i] = newKey(n, acct, fmt.Sprintf("%s%03d", label, i), at(time.Duration(i+1)*time.Second))
		must(t, "CreateKey", s.CreateKey(t.Context(), keys[i], auth.KeyLimit{}))
	}
	return keys
}

// wantPage reports an error unless page holds the keys with the ids want and the cursor
// next.
func wantPage(t *testing.T, what string, page auth.KeyPage, want []string, next string) {
	t.Helper()
	if got := keyIDs(page.Keys); !slices.Equal(got, want) || page.Next != next {
		t.Errorf("%s: keys %q, next %q; want %q, next %q", what, got, page.Next, want, next)
	}
}

func ksKeysPaged(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, primary := createAccount(t, s, n, "acct")
	other, _ := createAccount(t, s, n, "other")
	keys := append([]auth.Key{primary}, createKeys(t, s, n, acct, "k", 7)...)
	createKeys(t, s, n, other, "o", 2)
	_, err := s.RevokeKey(ctx, keys[2].ID, auth.AnyRevision, at(time.Hour))
	must(t, "RevokeKey", err)
	ids := keyIDs(keys)

	page, err := s.Keys(ctx, auth.KeyQuery{Account: acct.ID, Limit: 3})
	must(t, "Keys, first page", err)
	wantPage(t, "first page of 3", page, ids[0:3], ids[2])
	if !page.Keys[2].Revoked() {
		t.Errorf("first page: key %q is listed as live; it is revoked", page.Keys[2].ID)
	}
	page, err = s.Keys(ctx, auth.KeyQuery{Account: acct.ID, After: page.Next, Limit: 3})
	must(t, "Keys, second page", err)
	wantPage(t, "second page of 3", page, ids[3:6], ids[5])
	page, err = s.Keys(ctx, auth.KeyQuery{Account: acct.ID, After: page.Next, Limit: 3})
	must(t, "Keys, last page", err)
	wantPage(t, "last page of 3", page, ids[6:8], "")

	// A last page that is full has no next page either.
	page, err = s.Keys(ctx, auth.KeyQuery{Account: acct.ID, Limit: 4})
	must(t, "Keys, first page of 4", err)
	wantPage(t, "first page of 4", page, ids[0:4], ids[3])
	page, err = s.Keys(ctx, auth.KeyQuery{Account: acct.ID, After: page.Next, Limit: 4})
	must(t, "Keys, second page of 4", err)
	wantPage(t, "second page of 4", page, ids[4:8], "")
	page, err = s.Keys(ctx, auth.KeyQuery{Account: acct.ID, After: ids[7]})
	must(t, "Keys after the newest key", err)
	wantPage(t, "page after the newest key", page, []string{}, "")
	page, err = s.Keys(ctx, auth.KeyQuery{Account: acct.ID})
	must(t, "Keys with the default limit", err)
	wantPage(t, "default page", page, ids, "")
}

func ksKeysDefaultPage(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, primary := createAccount(t, s, n, "acct")
	keys := append([]auth.Key{primary}, createKeys(t, s, n, acct, "k", auth.DefaultKeyPage)...)
	ids := keyIDs(keys)
	page, err := s.Keys(ctx, auth.KeyQuery{Account: acct.ID})
	must(t, "Keys", err)
	wantPage(t, "default page", page, ids[:auth.DefaultKeyPage], ids[auth.DefaultKeyPage-1])
	page, err = s.Keys(ctx, auth.KeyQuery{Account: acct.ID, Limit: auth.MaxKeyPage})
	must(t, "Keys of the largest page", err)
	wantPage(t, "largest page", page, ids, "")
}

func ksKeysBadQuery(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, _ := createAccount(t, s, n, "acct")
	_, otherPrimary := createAccount(t, s, n, "other")
	for _, q := range []auth.KeyQuery{
		{Account: acct.ID, Limit: -1},
		{Account: acct.ID, Limit: auth.MaxKeyPage + 1},
		{Account: acct.ID, After: n.id("ghost")},
		{Account: acct.ID, After: otherPrimary.ID},
	} {
		_, err := s.Keys(ctx, q)
		if wantErr(t, fmt.Sprintf("Keys(%+v)", q), err, auth.ErrBadKeyQuery) {
			wantErr(t, fmt.Sprintf("Keys(%+v)", q), err, store.ErrInvalid)
		}
	}
	_, err := s.Keys(ctx, auth.KeyQuery{Account: n.id("ghost")})
	wantErr(t, "Keys of an unknown account", err, store.ErrNotFound)
}

func ksCreateKeyLimit(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, _ := createAccount(t, s, n, "acct")
	limit := auth.KeyLimit{Max: 3}
	k1, k2 := newKey(n, acct, "k1", at(time.Second)), newKey(n, acct, "k2", at(2*time.Second))
	must(t, "CreateKey k1", s.CreateKey(ctx, k1, limit))
	must(t, "CreateKey k2", s.CreateKey(ctx, k2, limit))

	refused := newKey(n, acct, "refused", at(3*time.Second))
	err := s.CreateKey(ctx, refused, limit)
	if wantErr(t, "CreateKey past the limit", err, auth.ErrTooManyKeys) {
		wantErr(t, "CreateKey past the limit", err, store.ErrConflict)
	}
	wantNoKey(t, s, refused.ID)
	wantUnresolved(t, s, refused.Hash, "hash of the refused key")

	// A key revoked at or after RevokedSince counts; one revoked before it does not.
	_, err = s.RevokeKey(ctx, k1.ID, auth.AnyRevision, at(time.Hour))
	must(t, "RevokeKey k1", err)
	err = s.CreateKey(ctx, refused, auth.KeyLimit{Max: 3, RevokedSince: at(time.Hour)})
	wantErr(t, "CreateKey with k1 revoked at RevokedSince", err, auth.ErrTooManyKeys)
	err = s.CreateKey(ctx, refused, auth.KeyLimit{Max: 3})
	wantErr(t, "CreateKey with the zero RevokedSince", err, auth.ErrTooManyKeys)
	must(t, "CreateKey with k1 revoked before RevokedSince",
		s.CreateKey(ctx, refused, auth.KeyLimit{Max: 3, RevokedSince: at(2 * time.Hour)}))

	// The zero KeyLimit sets no bound.
	must(t, "CreateKey without a limit", s.CreateKey(ctx, newKey(n, acct, "free", at(4*time.Second)), auth.KeyLimit{}))
	keys, err := allKeys(ctx, s, acct.ID)
	must(t, "Keys", err)
	if len(keys) != 5 {
		t.Errorf("Keys: %d keys %q, want 5", len(keys), keyIDs(keys))
	}
	err = s.CreateKey(ctx, newKey(n, auth.Account{ID: n.id("ghost")}, "orphan", t0), limit)
	wantErr(t, "CreateKey of an unknown account under a limit", err, store.ErrNotFound)
}

func ksCreateKeyLimitConcurrent(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, _ := createAccount(t, s, n, "acct")
	const limit = 5
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for i := range workers {
		k := newKey(n, acct, fmt.Sprintf("k%02d", i), t0)
		wg.Go(func() { errs[i] = s.CreateKey(ctx, k, auth.KeyLimit{Max: limit}) })
	}
	wg.Wait()
	created := 0
	for i, err := range errs {
		switch {
		case err == nil:
			created++
		case !errors.Is(err, auth.ErrTooManyKeys):
			t.Errorf("CreateKey %d: %v, want nil or auth.ErrTooManyKeys", i, err)
		}
	}
	if created != limit-1 {
		t.Errorf("%d keys created at once under a limit of %d with the primary key: want %d", created, limit, limit-1)
	}
	keys, err := allKeys(ctx, s, acct.ID)
	must(t, "Keys", err)
	if len(keys) != limit {
		t.Errorf("Keys: %d keys, want %d", len(keys), limit)
	}
}

func ksPruneKeys(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, primary := createAccount(t, s, n, "acct")
	other, otherPrimary := createAccount(t, s, n, "other")
	keys := createKeys(t, s, n, acct, "k", 3)
	otherKeys := createKeys(t, s, n, other, "o", 2)
	for _, r := range []struct {
		id string
		at time.Time
	}{
		{primary.ID, past(time.Hour)}, {keys[0].ID, past(time.Hour)}, {keys[1].ID, past(3 * time.Hour)},
		{otherKeys[0].ID, past(time.Hour)}, {otherPrimary.ID, past(time.Hour)},
	} {
		_, err := s.RevokeKey(ctx, r.id, auth.AnyRevision, r.at)
		must(t, "RevokeKey "+r.id, err)
	}
	got, err := s.PruneKeys(ctx, past(2*time.Hour))
	must(t, "PruneKeys", err)
	if got != 2 {
		t.Errorf("PruneKeys before the instant: %d deleted, want 2 (k000 and o000)", got)
	}
	for _, k := range []auth.Key{keys[0], otherKeys[0]} {
		wantNoKey(t, s, k.ID)
		wantUnresolved(t, s, k.Hash, "hash of pruned key "+k.ID)
	}
	for _, want := range []struct {
		acct string
		ids  []string
	}{
		{acct.ID, []string{primary.ID, keys[1].ID, keys[2].ID}},
		{other.ID, []string{otherPrimary.ID, otherKeys[1].ID}},
	} {
		all, err := allKeys(ctx, s, want.acct)
		must(t, "Keys", err)
		if ids := keyIDs(all); !slices.Equal(ids, want.ids) {
			t.Errorf("Keys of %s after PruneKeys: %q, want %q (revoked primary keys and later revocations kept)", want.acct, ids, want.ids)
		}
	}
	k, _, err := s.Resolve(ctx, keys[1].Hash)
	if must(t, "Resolve of a key revoked after the instant", err); !k.Revoked() {
		t.Errorf("Resolve of %q after PruneKeys: not revoked", k.ID)
	}
	_, err = s.Keys(ctx, auth.KeyQuery{Account: acct.ID, After: keys[0].ID})
	wantErr(t, "Keys after a pruned key", err, auth.ErrBadKeyQuery)

	got, err = s.PruneKeys(ctx, past(2*time.Hour))
	must(t, "PruneKeys again", err)
	if got != 0 {
		t.Errorf("PruneKeys again: %d deleted, want 0", got)
	}

	// Counted for a limit: primary (revoked), k001 (revoked), k002; with k001 pruned,
	// two.
	limit := auth.KeyLimit{Max: 3}
	next := newKey(n, acct, "next", at(4*time.Hour))
	wantErr(t, "CreateKey before the prune", s.CreateKey(ctx, next, limit), auth.ErrTooManyKeys)
	got, err = s.PruneKeys(ctx, past(4*time.Hour))
	must(t, "PruneKeys before the later instant", err)
	if got != 1 {
		t.Errorf("PruneKeys before the later instant: %d deleted, want 1 (k001)", got)
	}
	must(t, "CreateKey after the prune", s.CreateKey(ctx, next, limit))
}

func ksPruneKeysConcurrent(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	const accounts, each = 4, 8
	for a := range accounts {
		acct, _ := createAccount(t, s, n, fmt.Sprintf("a%d", a))
		for _, k := range createKeys(t, s, n, acct, fmt.Sprintf("a%dk", a), each) {
			_, err := s.RevokeKey(ctx, k.ID, auth.AnyRevision, past(time.Hour))
			must(t, "RevokeKey", err)
		}
	}
	counts := make([]int64, 8)
	var wg sync.WaitGroup
	for i := range counts {
		wg.Go(func() {
			var err error
			if counts[i], err = s.PruneKeys(ctx, past(2*time.Hour)); err != nil {
				t.Errorf("PruneKeys %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	var total int64
	for _, c := range counts {
		total += c
	}
	if total != accounts*each {
		t.Errorf("concurrent PruneKeys deleted %d keys in all (%v), want %d", total, counts, accounts*each)
	}
}

func ksPruneKeysCanceled(t *testing.T, s auth.KeyStore) {
	n := newIDs()
	acct, _ := createAccount(t, s, n, "acct")
	k := createKeys(t, s, n, acct, "k", 1)[0]
	_, err := s.RevokeKey(t.Context(), k.ID, auth.AnyRevision, past(time.Hour))
	must(t, "RevokeKey", err)
	_, err = s.PruneKeys(canceled(t), past(2*time.Hour))
	wantErr(t, "PruneKeys", err, context.Canceled)
	if _, err := s.Key(t.Context(), k.ID); err != nil {
		t.Errorf("Key %q after a canceled PruneKeys: %v; want it kept", k.ID, err)
	}
}
