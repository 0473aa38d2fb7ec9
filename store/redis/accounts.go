package redis

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/journal"
	"github.com/tollgate-dev/tollgate/store"
)

// The index of account ids is one sorted set, every member at score 0, so that ZRANGE
// BYLEX reads it in the order of the ids, byte-wise. It is a global key, outside any
// account's slot, used only by commands of one key. An entry that no record backs (a
// creation that stopped half-way) is skipped by the listing.
func (s *Store) accountIndex() string { return s.prefix + ":accounts" }

// indexAccount adds an account id to the index of account ids.
func (s *Store) indexAccount(ctx context.Context, id string) error {
	if _, err := s.writeCmd(ctx, "zadd", s.accountIndex(), 0, id); err != nil {
		return fail(ctx, err, "indexing account %q", id)
	}
	return nil
}

// reindexAccount adds an account id to the index of account ids again, once its record
// is written, even if ctx was canceled meanwhile. If Redis cannot be reached, the entry
// added before the record was written stays.
func (s *Store) reindexAccount(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	s.writeCmd(ctx, "zadd", s.accountIndex(), 0, id)
}

// UpdateAccount replaces the mutable fields of an account that still has u.Revision and
// is not closed. The record is read first (for the fields an update keeps: the
// creation), then written, with the next revision, in one script in the account's slot
// that refuses a closed account or another revision, and records the journal entry
// ctx carries.
func (s *Store) UpdateAccount(ctx context.Context, u auth.AccountUpdate) (auth.Account, error) {
	if err := ctx.Err(); err != nil {
		return auth.Account{}, err
	}
	entry, err := journal.From(ctx)
	if err != nil {
		return auth.Account{}, err
	}
	for _, f := range []struct{ what, value string }{{"plan", u.Plan}, {"pending plan", u.PendingPlan}} {
		if err := store.CheckText("redis: "+f.what, f.value); err != nil {
			return auth.Account{}, err
		}
	}
	if !u.State.Valid() {
		return auth.Account{}, fmt.Errorf("redis: account %q: %q is not an account state: %w", u.ID, u.State, store.ErrInvalid)
	}
	old, err := s.Account(ctx, u.ID)
	if err != nil {
		return auth.Account{}, err
	}
	a := old
	a.Plan, a.Restrictions, a.State, a.StateChangedAt = u.Plan, u.Restrictions, u.State, u.StateChangedAt
	a.BillingAnchor, a.PendingPlan, a.PendingPlanAt, a.Revision = u.BillingAnchor, u.PendingPlan, u.PendingPlanAt, u.Revision+1
	rec, err := json.Marshal(recordOf(&a, a.Revision))
	if err != nil {
		return auth.Account{}, fmt.Errorf("redis: account %q: %w", u.ID, err)
	}
	if e := a.Restrictions.ExpiresAt(); !e.IsZero() && !e.Equal(old.Restrictions.ExpiresAt()) {
		// The entry of the old expiry stays: the listing deletes it when it passes it.
		primary, err := s.primaryOf(ctx, u.ID)
		if err != nil {
			return auth.Account{}, err
		}
		if m, ok := accountExpiryOf(&a, primary); ok && primary != "" {
			if err := s.indexExpiries(ctx, m); err != nil {
				return auth.Account{}, err
			}
		}
	}
	k := s.account(u.ID)
	reply, err := s.journalWrite(u.ID, entry).run(ctx, updateAccountScript, []string{k.record(), k.keys()}, strconv.FormatInt(u.Revision, 10), string(rec))
	if err != nil {
		return auth.Account{}, fail(ctx, err, "updating account %q", u.ID)
	}
	r := asSlice(reply)
	if len(r) == 0 {
		return auth.Account{}, errReply("update account", reply)
	}
	switch asInt(r[0]) {
	case stOK:
		return decodeAccount(u.ID, string(rec))
	case stNotFound:
		return auth.Account{}, fmt.Errorf("redis: account %q: %w", u.ID, store.ErrNotFound)
	case stConflict:
		return auth.Account{}, fmt.Errorf("redis: account %q: %w", u.ID, auth.ErrAccountClosed)
	case stChanged:
		now := "unknown"
		if len(r) == 2 {
			now = asString(r[1])
		}
		return auth.Account{}, fmt.Errorf("redis: account %q is at revision %s, not %d: %w", u.ID, now, u.Revision, auth.ErrAccountChanged)
	}
	return auth.Account{}, errReply("update account", reply)
}

// accountScan is the most accounts a page of Accounts examines, by default.
const accountScan = 1000

// Accounts returns a page of the accounts q selects, in the order of their ids. It reads
// the index of account ids after the cursor (and within the prefix) with ZRANGE BYLEX,
// a batch at a time, and the records of each batch in one pipeline, and examines at
// most accountScan of them: a page that is not full then has Next set, the last id
// examined. An account stored by a release before the index is not listed until
// [Store.IndexAccounts] has run.
func (s *Store) Accounts(ctx context.Context, q auth.AccountQuery) (auth.AccountPage, error) {
	if err := ctx.Err(); err != nil {
		return auth.AccountPage{}, err
	}
	size, err := q.PageSize()
	if err != nil {
		return auth.AccountPage{}, err
	}
	scan := s.scan
	if scan <= 0 {
		scan = accountScan
	}
	lo, hi := "-", "+"
	if q.After != "" {
		lo = "(" + q.After
	}
	if q.IDPrefix != "" {
		if q.IDPrefix > q.After {
			lo = "[" + q.IDPrefix
		}
		if end, ok := store.PrefixEnd(q.IDPrefix); ok {
			hi = "(" + end
		}
	}
	// Every account of the range is selected unless a filter other than the prefix is
	// set: the batches then need hold no more than the page.
	filtered := q.Plan != "" || q.State != "" || !q.CreatedFrom.IsZero() || !q.CreatedBefore.IsZero()
	page := auth.AccountPage{Accounts: []auth.Account{}}
	last, examined := "", 0
	for examined < scan {
		n := size + 1 - len(page.Accounts) // one more than the page needs: is there a next page?
		if filtered {
			n = max(n, 100)
		}
		n = min(n, scan-examined)
		ids, err := s.c.ZRangeArgs(ctx, goredis.ZRangeArgs{Key: s.accountIndex(), Start: lo, Stop: hi, ByLex: true, Count: int64(n)}).Result()
		if err != nil {
			return auth.AccountPage{}, fail(ctx, err, "reading the index of accounts")
		}
		accts, err := s.accountsOf(ctx, ids)
		if err != nil {
			return auth.AccountPage{}, err
		}
		for i := range ids {
			examined, last = examined+1, ids[i]
			a := accts[i]
			if a == nil || !q.Selects(a) {
				continue
			}
			if len(page.Accounts) == size {
				page.Next = page.Accounts[size-1].ID
				return page, nil
			}
			page.Accounts = append(page.Accounts, *a)
		}
		if len(ids) < n {
			return page, nil // the range is read to its end
		}
		lo = "(" + last
	}
	page.Next = last
	return page, nil
}

// accountsOf reads the records of the accounts ids, in one pipeline: nil for an id
// without a record.
func (s *Store) accountsOf(ctx context.Context, ids []string) ([]*auth.Account, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	cmds := make([]*goredis.StringCmd, len(ids))
	_, err := s.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.Get(ctx, s.account(id).record())
		}
		return nil
	})
	if err != nil && !errors.Is(err, goredis.Nil) {
		return nil, fail(ctx, err, "reading accounts")
	}
	out := make([]*auth.Account, len(ids))
	for i, c := range cmds {
		rec, err := c.Result()
		switch {
		case errors.Is(err, goredis.Nil):
			continue
		case err != nil:
			return nil, fail(ctx, err, "reading account %q", ids[i])
		}
		a, err := decodeAccount(ids[i], rec)
		if err != nil {
			return nil, err
		}
		out[i] = &a
	}
	return out, nil
}

// DeleteAccount deletes a closed account and its keys, in four steps:
//
//  1. read the account: none is store.ErrNotFound, one that is not closed
//     auth.ErrAccountNotClosed (closure is final: a closed account stays closed until
//     it is deleted);
//  2. take its id out of the index of account ids;
//  3. delete its record and its keys in one script in the account's slot, which
//     checks again that it exists and is closed, and records the journal entry ctx
//     carries (the journal is kept);
//  4. delete the index entries of its keys (their ids and hashes, and their entries in
//     the index of revoked keys).
//
// The index entry is taken out before the record, so that an account created with the
// same id once the record is gone, which adds its id to the index after writing its
// record, is never taken out of the index by this deletion. If the process stops
// between the steps, what is left is index entries that no record backs, which
// resolve nothing and are skipped by the listing.
func (s *Store) DeleteAccount(ctx context.Context, id string) error {
	entry, err := journal.From(ctx)
	if err != nil {
		return err
	}
	a, err := s.Account(ctx, id)
	if err != nil {
		return err
	}
	if a.State != auth.AccountClosed {
		return fmt.Errorf("redis: account %q is %s: %w", id, a.State, auth.ErrAccountNotClosed)
	}
	if _, err := s.writeCmd(ctx, "zrem", s.accountIndex(), id); err != nil {
		return fail(ctx, err, "deleting account %q from the index", id)
	}
	k := s.account(id)
	reply, err := s.journalWrite(id, entry).run(ctx, deleteAccountScript, []string{k.record(), k.keys(), k.korder(), k.krev()})
	if err != nil {
		return fail(ctx, err, "deleting account %q", id)
	}
	r := asSlice(reply)
	if len(r) == 0 || len(r)%3 != 1 {
		return errReply("delete account", reply)
	}
	switch asInt(r[0]) {
	case stNotFound: // deleted since step 1
		return fmt.Errorf("redis: account %q: %w", id, store.ErrNotFound)
	case stConflict: // deleted and created again since step 1
		s.reindexAccount(ctx, id)
		return fmt.Errorf("redis: account %q is not closed: %w", id, auth.ErrAccountNotClosed)
	case stOK:
	default:
		return errReply("delete account", reply)
	}
	var revoked, recs []any
	for i := 1; i+2 < len(r); i += 3 {
		keyID, h := asString(r[i]), asString(r[i+1])
		s.withdraw(ctx, s.keyIDIndex(keyID), id)
		s.withdraw(ctx, s.prefix+":h:"+h, hashRef(id, keyID))
		revoked = append(revoked, hashRef(id, keyID))
		recs = append(recs, r[i], r[i+2])
	}
	expiries := expiriesOfRecords(id, recs)
	if len(r) > 1 {
		if m, ok := accountExpiryOf(&a, asString(r[1])); ok { // the primary key is the first
			expiries = append(expiries, m)
		}
	}
	s.unindexExpiries(ctx, expiries...)
	if len(revoked) > 0 {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		s.c.ZRem(ctx, s.revoked(), revoked...)
	}
	return nil
}

// IndexAccounts adds every account to the index of account ids that Accounts reads,
// and the expiries of every account and key to the index of expiries that
// ExpiringKeys reads, and returns how many accounts it found. Accounts and keys
// created by this package add themselves; those created by a release from before an
// index (which Accounts, or ExpiringKeys, does not list) are added by running
// IndexAccounts once, after every instance runs this release. It scans the keys of the Store's prefix (SCAN, on every master of a
// Cluster), so it takes time in proportion to every key the prefix holds; running it
// again, or while accounts are created and deleted, is safe.
func (s *Store) IndexAccounts(ctx context.Context) (int64, error) {
	var total int64
	scanOne := func(ctx context.Context, c goredis.UniversalClient) error {
		it := c.Scan(ctx, 0, globEscape(s.prefix)+":{*}:"+kindRecord, 1000).Iterator()
		var ids []string
		flush := func() error {
			for _, id := range ids {
				if err := s.indexAccount(ctx, id); err != nil {
					return err
				}
				expiries, err := s.expiriesOfAccount(ctx, id)
				if errors.Is(err, store.ErrNotFound) {
					continue // deleted meanwhile
				}
				if err != nil {
					return err
				}
				if err := s.indexExpiries(ctx, expiries...); err != nil {
					return err
				}
			}
			total += int64(len(ids))
			ids = ids[:0]
			return nil
		}
		for it.Next(ctx) {
			if id, ok := s.accountOfRecord(it.Val()); ok {
				ids = append(ids, id)
			}
			if len(ids) == 1000 {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if err := it.Err(); err != nil {
			return fail(ctx, err, "scanning the accounts")
		}
		return flush()
	}
	if cc, ok := s.c.(*goredis.ClusterClient); ok {
		var mu sync.Mutex // the masters are scanned at once: one at a time adds to total
		err := cc.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			return scanOne(ctx, c)
		})
		return total, err
	}
	return total, scanOne(ctx, s.c)
}

// accountOfRecord returns the account id of the name of an account's record, if it
// is one (see [Store.account]).
func (s *Store) accountOfRecord(key string) (string, bool) {
	tag, ok := strings.CutPrefix(key, s.prefix+":{")
	if !ok {
		return "", false
	}
	tag, ok = strings.CutSuffix(tag, "}:"+kindRecord)
	if !ok || strings.Contains(tag, "}") {
		return "", false
	}
	if h, ok := strings.CutPrefix(tag, "~"); ok {
		b, err := hex.DecodeString(h)
		if err != nil {
			return "", false
		}
		return string(b), true
	}
	return tag, true
}

// globEscape escapes the characters that a SCAN MATCH pattern gives a meaning.
func globEscape(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if strings.IndexByte(`*?[]\`, c) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return b.String()
}
