package memory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/journal"
	"github.com/tollgate-dev/tollgate/store"
)

// KeyStore is the in-memory [auth.KeyStore]. It keeps its records in pointer-free
// tables (see [names]), so that a store of a million keys adds nothing to what the
// garbage collector scans: account and key ids, plan and key names are numbered
// strings, times are kept to the nanosecond and given back in UTC, and only the
// restrictions of the accounts and keys that have some are kept aside as values. Its
// zero value is not usable; call [NewKeyStore].
type KeyStore struct {
	mu         sync.RWMutex
	accountIDs names // account i is numbered i in accountIDs
	accounts   []accountRecord
	keyIDs     names // key i is numbered i in keyIDs
	keys       []keyRecord
	labels     names                     // plan and key names
	seed       maphash.Seed              // of hashOf
	byHash     hashIndex                 // hashOf(the current hash of key i) -> i
	restricted map[ref]auth.Restrictions // of the accounts and keys that have some
	// dead counts the records of keys that PruneKeys or DeleteAccount deleted:
	// unlinked from their account and from every index, but still in keys until the
	// tables are rebuilt. deadAccounts counts the records of deleted accounts.
	dead, deadAccounts int

	// byID lists the account numbers in the order of their ids, for Accounts: those
	// numbered below sorted, some of which may have been deleted since. Accounts merges
	// the ones added since into it, under orderMu (and the read lock).
	orderMu sync.Mutex
	byID    []uint32
	sorted  uint32

	// journal keeps the entries that writes are given (journal.With), each recorded
	// under mu with the change (see journal.go).
	journal changeJournal
}

// accountRecord is an account, but for its restrictions.
type accountRecord struct {
	id          uint64 // offset in accountIDs
	plan        uint64 // offset in labels
	pendingPlan uint64 // offset in labels
	created     stamp
	// The account's keys, oldest first, are first-1, then each key's nextOfAccount-1,
	// to last-1.
	first, last                       uint32
	state                             stateCode
	deleted                           bool
	stateChanged, anchor, pendingFrom stamp
	revision                          int64
}

// A stateCode is an [auth.AccountState] in an accountRecord.
type stateCode uint8

const (
	stateActive stateCode = iota
	stateSuspended
	stateClosed
)

var stateNames = [...]auth.AccountState{stateActive: auth.AccountActive, stateSuspended: auth.AccountSuspended, stateClosed: auth.AccountClosed}

// codeOf returns the code of a state, the empty state being active; ok is false for
// any other text.
func codeOf(st auth.AccountState) (c stateCode, ok bool) {
	switch st {
	case "", auth.AccountActive:
		return stateActive, true
	case auth.AccountSuspended:
		return stateSuspended, true
	case auth.AccountClosed:
		return stateClosed, true
	}
	return 0, false
}

// keyRecord is a key, but for its restrictions.
type keyRecord struct {
	hash                      auth.Hash
	id                        uint64 // offset in keyIDs
	name                      uint64 // offset in labels
	account                   uint32
	nextOfAccount             uint32 // 1 + the account's next key, 0 for none
	primary                   bool
	revision                  int64
	created, rotated, revoked stamp
}

// A ref names an account or a key record of a KeyStore.
type ref struct {
	key bool
	i   uint32
}

// Interface guards.
var (
	_ auth.KeyStore     = (*KeyStore)(nil)
	_ driver.KeyChecker = (*KeyStore)(nil)
	_ auth.KeyExpiries  = (*KeyStore)(nil)
)

// NewKeyStore returns an empty KeyStore.
func NewKeyStore() *KeyStore {
	s := &KeyStore{
		seed:       maphash.MakeSeed(),
		restricted: make(map[ref]auth.Restrictions),
	}
	// An account's id and its primary key's are added together, and read together by
	// Resolve.
	s.accountIDs.share(&s.keyIDs)
	return s
}

// hashOf returns the index hash of a key's hash: seeded, so that nobody can pick key
// values whose hashes crowd one part of the index.
func (s *KeyStore) hashOf(h auth.Hash) uint64 { return maphash.Bytes(s.seed, h[:]) }

// withHash returns the key whose current hash is h, and its slot in byHash.
func (s *KeyStore) withHash(h auth.Hash) (i uint32, slot int, ok bool) {
	v, slot, ok := s.byHash.find(s.hashOf(h), func(v uint64) bool { return s.keys[v].hash == h })
	return uint32(v), slot, ok
}

// account returns account i.
func (s *KeyStore) account(i uint32) auth.Account {
	r := &s.accounts[i]
	return auth.Account{ID: s.accountIDs.at(r.id), Plan: s.labels.at(r.plan),
		Restrictions: s.restricted[ref{i: i}], CreatedAt: r.created.time(),
		State: stateNames[r.state], StateChangedAt: r.stateChanged.time(), BillingAnchor: r.anchor.time(),
		PendingPlan: s.labels.at(r.pendingPlan), PendingPlanAt: r.pendingFrom.time(), Revision: r.revision}
}

// key returns key i.
func (s *KeyStore) key(i uint32) auth.Key {
	r := &s.keys[i]
	return auth.Key{ID: s.keyIDs.at(r.id), AccountID: s.accountIDs.at(s.accounts[r.account].id), Name: s.labels.at(r.name),
		Primary: r.primary, Hash: r.hash, Restrictions: s.restricted[ref{key: true, i: i}],
		CreatedAt: r.created.time(), RotatedAt: r.rotated.time(), RevokedAt: r.revoked.time(), Revision: r.revision}
}

// restrict keeps the restrictions of the record at rf (none deletes them).
func (s *KeyStore) restrict(rf ref, r auth.Restrictions) {
	if r.IsZero() {
		delete(s.restricted, rf)
		return
	}
	s.restricted[rf] = r
}

// CreateAccount stores an account with its primary key, and records the journal entry
// ctx carries with it.
func (s *KeyStore) CreateAccount(ctx context.Context, account auth.Account, primary auth.Key) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	rec, err := journal.From(ctx)
	if err != nil {
		return err
	}
	if err := checkText(account, primary); err != nil {
		return err
	}
	if _, ok := codeOf(account.State); !ok {
		return fmt.Errorf("memory: account %q: %q is not an account state: %w", account.ID, account.State, store.ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.journal.recordIf(rec, &err)
	if _, ok := s.accountIDs.lookup(account.ID); ok {
		return fmt.Errorf("memory: account %q: %w", account.ID, store.ErrConflict)
	}
	if err := s.checkNewKey(&primary); err != nil {
		return err
	}
	if primary.AccountID != account.ID {
		return fmt.Errorf("memory: key %q belongs to account %q, not %q: %w", primary.ID, primary.AccountID, account.ID, store.ErrConflict)
	}
	s.insertKey(s.insertAccount(&account), &primary)
	return nil
}

// insertAccount adds account, without keys, at revision 0, and returns its number.
func (s *KeyStore) insertAccount(account *auth.Account) uint32 {
	a := s.accountIDs.add(account.ID)
	st, _ := codeOf(account.State)
	s.accounts = append(s.accounts, accountRecord{id: a.off, plan: s.labels.intern(account.Plan).off,
		pendingPlan: s.labels.intern(account.PendingPlan).off, created: stampOf(account.CreatedAt), state: st,
		stateChanged: stampOf(account.StateChangedAt), anchor: stampOf(account.BillingAnchor), pendingFrom: stampOf(account.PendingPlanAt)})
	s.restrict(ref{i: a.i}, account.Restrictions)
	return a.i
}

// Account returns the account with the given id.
func (s *KeyStore) Account(ctx context.Context, id string) (auth.Account, error) {
	if err := ctx.Err(); err != nil {
		return auth.Account{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	a, ok := s.accountIDs.lookup(id)
	if !ok {
		return auth.Account{}, fmt.Errorf("memory: account %q: %w", id, store.ErrNotFound)
	}
	return s.account(a.i), nil
}

// CreateKey stores a new key of an existing account, if limit lets it hold one more,
// and records the journal entry ctx carries with it.
func (s *KeyStore) CreateKey(ctx context.Context, key auth.Key, limit auth.KeyLimit) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkText(auth.Account{ID: key.AccountID, Plan: "-"}, key); err != nil {
		return err
	}
	rec, err := journal.From(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.journal.recordIf(rec, &err)
	a, ok := s.accountIDs.lookup(key.AccountID)
	if !ok {
		return fmt.Errorf("memory: account %q: %w", key.AccountID, store.ErrNotFound)
	}
	if err := s.checkNewKey(&key); err != nil {
		return err
	}
	if limit.Max > 0 && s.counted(a.i, stampOf(limit.RevokedSince), limit.Max) >= limit.Max {
		return fmt.Errorf("account %q holds %d keys that count, the most it may: %w", key.AccountID, limit.Max, auth.ErrTooManyKeys)
	}
	s.insertKey(a.i, &key)
	return nil
}

// counted returns the number of keys of account a that count for a [auth.KeyLimit]
// (live, or revoked at or after since), counting no further than upTo.
func (s *KeyStore) counted(a uint32, since stamp, upTo int) int {
	n := 0
	for i := s.accounts[a].first; i != 0 && n < upTo; i = s.keys[i-1].nextOfAccount {
		if r := s.keys[i-1].revoked; r == (stamp{}) || !r.before(since) {
			n++
		}
	}
	return n
}

// checkText refuses text that a store cannot hold (see [store.CheckText]), as every
// store does.
func checkText(a auth.Account, k auth.Key) error {
	for _, f := range []struct{ what, value string }{
		{"account id", a.ID}, {"plan", a.Plan}, {"pending plan", a.PendingPlan}, {"key id", k.ID}, {"key name", k.Name},
	} {
		if err := store.CheckText("memory: "+f.what, f.value); err != nil {
			return err
		}
	}
	return nil
}

func (s *KeyStore) checkNewKey(k *auth.Key) error {
	if _, ok := s.keyIDs.lookup(k.ID); ok {
		return fmt.Errorf("memory: key %q: %w", k.ID, store.ErrConflict)
	}
	if _, _, ok := s.withHash(k.Hash); ok {
		return fmt.Errorf("memory: key %q: the hash is taken: %w", k.ID, store.ErrConflict)
	}
	return nil
}

// insertKey adds k as the newest key of account a.
func (s *KeyStore) insertKey(a uint32, k *auth.Key) {
	id := s.keyIDs.add(k.ID)
	i := id.i
	s.keys = append(s.keys, keyRecord{hash: k.Hash, id: id.off, account: a, name: s.labels.intern(k.Name).off, primary: k.Primary,
		created: stampOf(k.CreatedAt), rotated: stampOf(k.RotatedAt), revoked: stampOf(k.RevokedAt)})
	s.restrict(ref{key: true, i: i}, k.Restrictions)
	s.byHash.put(s.hashOf(k.Hash), uint64(i))
	acct := &s.accounts[a]
	if acct.last == 0 {
		acct.first = i + 1
	} else {
		s.keys[acct.last-1].nextOfAccount = i + 1
	}
	acct.last = i + 1
}

// Key returns the key with the given id.
func (s *KeyStore) Key(ctx context.Context, id string) (auth.Key, error) {
	if err := ctx.Err(); err != nil {
		return auth.Key{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	k, ok := s.keyIDs.lookup(id)
	if !ok {
		return auth.Key{}, fmt.Errorf("memory: key %q: %w", id, store.ErrNotFound)
	}
	return s.key(k.i), nil
}

// Keys returns a page of the keys of an account, oldest first.
func (s *KeyStore) Keys(ctx context.Context, q auth.KeyQuery) (auth.KeyPage, error) {
	if err := ctx.Err(); err != nil {
		return auth.KeyPage{}, err
	}
	size, err := q.PageSize()
	if err != nil {
		return auth.KeyPage{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	a, ok := s.accountIDs.lookup(q.Account)
	if !ok {
		return auth.KeyPage{}, fmt.Errorf("memory: account %q: %w", q.Account, store.ErrNotFound)
	}
	i := s.accounts[a.i].first
	if q.After != "" {
		k, ok := s.keyIDs.lookup(q.After)
		if !ok || s.keys[k.i].account != a.i {
			return auth.KeyPage{}, fmt.Errorf("%w: account %q has no key %q to list after", auth.ErrBadKeyQuery, q.Account, q.After)
		}
		i = s.keys[k.i].nextOfAccount
	}
	page := auth.KeyPage{Keys: []auth.Key{}}
	for ; i != 0; i = s.keys[i-1].nextOfAccount {
		if len(page.Keys) == size {
			page.Next = page.Keys[size-1].ID
			break
		}
		page.Keys = append(page.Keys, s.key(i-1))
	}
	return page, nil
}

// PruneKeys deletes the keys revoked before before, but primary keys. It walks every
// key under the write lock; the records it frees are reclaimed by rebuilding the
// tables once they are as many as the live ones (and at least minDead), so that a
// store where keys come and go keeps a size in proportion to the keys it holds.
func (s *KeyStore) PruneKeys(ctx context.Context, before time.Time) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	cut := stampOf(before)
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for ai := range s.accounts {
		acct := &s.accounts[ai]
		var prev uint32 // 1 + the last key kept, 0 for none
		for i := acct.first; i != 0; {
			k := &s.keys[i-1]
			next := k.nextOfAccount
			if k.primary || k.revoked == (stamp{}) || !k.revoked.before(cut) {
				prev, i = i, next
				continue
			}
			if prev == 0 {
				acct.first = next
			} else {
				s.keys[prev-1].nextOfAccount = next
			}
			if acct.last == i {
				acct.last = prev
			}
			s.forget(i - 1)
			n++
			i = next
		}
	}
	s.dead += int(n)
	s.reclaim()
	return n, nil
}

// reclaim rebuilds the tables once the records of deleted keys, or of deleted
// accounts, are as many as the live ones (and at least minDead).
func (s *KeyStore) reclaim() {
	if s.dead >= minDead && s.dead >= len(s.keys)-s.dead ||
		s.deadAccounts >= minDead && s.deadAccounts >= len(s.accounts)-s.deadAccounts {
		s.rebuild()
	}
}

// minDead is the fewest records of deleted keys (or accounts) for which the tables are
// rebuilt.
const minDead = 1024

// forget takes key i, unlinked from its account, out of every index.
func (s *KeyStore) forget(i uint32) {
	k := &s.keys[i]
	s.keyIDs.remove(s.keyIDs.at(k.id))
	if _, slot, ok := s.withHash(k.hash); ok {
		s.byHash.remove(slot)
	}
	delete(s.restricted, ref{key: true, i: i})
	k.nextOfAccount = 0
}

// rebuild replaces the tables with new ones that hold only the accounts not deleted
// and the keys still linked to them, in the same order, each with its revision.
func (s *KeyStore) rebuild() {
	n := NewKeyStore()
	for ai := range s.accounts {
		if s.accounts[ai].deleted {
			continue
		}
		acct := s.account(uint32(ai))
		a := n.insertAccount(&acct)
		n.accounts[a].revision = acct.Revision
		for i := s.accounts[ai].first; i != 0; i = s.keys[i-1].nextOfAccount {
			k := s.key(i - 1)
			n.insertKey(a, &k)
			n.keys[len(n.keys)-1].revision = k.Revision
		}
	}
	s.accountIDs, s.accounts, s.keyIDs, s.keys, s.labels = n.accountIDs, n.accounts, n.keyIDs, n.keys, n.labels
	s.seed, s.byHash, s.restricted, s.dead, s.deadAccounts = n.seed, n.byHash, n.restricted, 0, 0
	s.byID, s.sorted = nil, 0
}

// Resolve returns the key whose current hash is h, with its account.
func (s *KeyStore) Resolve(ctx context.Context, h auth.Hash) (auth.Key, auth.Account, error) {
	if err := ctx.Err(); err != nil {
		return auth.Key{}, auth.Account{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	i, _, ok := s.withHash(h)
	if !ok {
		return auth.Key{}, auth.Account{}, fmt.Errorf("memory: key hash %.8s: %w", h, store.ErrNotFound)
	}
	return s.key(i), s.account(s.keys[i].account), nil
}

// change applies a change to the record of key id, under the write lock: check
// refuses it (the key missing, revoked, at another revision; errUnchanged leaves the
// key as it is, without an error), apply makes it to key i. The journal entry ctx
// carries is recorded when it succeeds.
func (s *KeyStore) change(ctx context.Context, id string, check func(auth.Key) error, apply func(i uint32, k *keyRecord)) (_ auth.Key, err error) {
	if err := ctx.Err(); err != nil {
		return auth.Key{}, err
	}
	rec, err := journal.From(ctx)
	if err != nil {
		return auth.Key{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.journal.recordIf(rec, &err)
	k, ok := s.keyIDs.lookup(id)
	if !ok {
		return auth.Key{}, fmt.Errorf("memory: key %q: %w", id, store.ErrNotFound)
	}
	i := k.i
	switch err := check(s.key(i)); {
	case errors.Is(err, errUnchanged):
		return s.key(i), nil
	case err != nil:
		return auth.Key{}, err
	}
	apply(i, &s.keys[i])
	return s.key(i), nil
}

// errUnchanged tells change that the key is left as it is, and is not an error.
var errUnchanged = errors.New("unchanged")

// RotateKey replaces the hash of a key (that still has revision rev, unless rev is
// [auth.AnyRevision]).
func (s *KeyStore) RotateKey(ctx context.Context, id string, rev int64, h auth.Hash, at time.Time) (auth.Key, error) {
	return s.change(ctx, id, func(old auth.Key) error {
		switch {
		case old.Revoked():
			return fmt.Errorf("memory: key %q is revoked: %w", id, store.ErrConflict)
		case rev != auth.AnyRevision && old.Revision != rev:
			return changed(id, rev, old.Revision)
		}
		if _, _, taken := s.withHash(h); taken {
			return fmt.Errorf("memory: key %q: the new hash is taken: %w", id, store.ErrConflict)
		}
		return nil
	}, func(i uint32, k *keyRecord) {
		_, slot, _ := s.withHash(k.hash)
		s.byHash.remove(slot)
		s.byHash.put(s.hashOf(h), uint64(i))
		k.hash, k.rotated = h, stampOf(at)
		k.revision++
	})
}

// RevokeKey marks a key revoked (if it still has revision rev, unless rev is
// [auth.AnyRevision]).
func (s *KeyStore) RevokeKey(ctx context.Context, id string, rev int64, at time.Time) (auth.Key, error) {
	return s.change(ctx, id, func(old auth.Key) error {
		switch {
		case rev != auth.AnyRevision && old.Revision != rev:
			return changed(id, rev, old.Revision)
		case old.Revoked():
			return errUnchanged
		}
		return nil
	}, func(_ uint32, k *keyRecord) {
		k.revoked = stampOf(at)
		k.revision++
	})
}

// UpdateKey replaces the name and restrictions of a key that still has u.Revision.
func (s *KeyStore) UpdateKey(ctx context.Context, u auth.KeyUpdate) (auth.Key, error) {
	if err := store.CheckText("memory: key name", u.Name); err != nil {
		return auth.Key{}, err
	}
	return s.change(ctx, u.ID, func(old auth.Key) error {
		switch {
		case old.Revoked():
			return fmt.Errorf("memory: key %q is revoked: %w", u.ID, store.ErrConflict)
		case old.Revision != u.Revision:
			return changed(u.ID, u.Revision, old.Revision)
		}
		return nil
	}, func(i uint32, k *keyRecord) {
		k.name = s.labels.intern(u.Name).off
		s.restrict(ref{key: true, i: i}, u.Restrictions)
		k.revision++
	})
}

// changed is the conflict of a change decided on revision rev of a key now at revision
// now.
func changed(id string, rev, now int64) error {
	return fmt.Errorf("memory: key %q changed since revision %d (it is at %d): %w", id, rev, now, store.ErrConflict)
}

// CheckKey reports whether a key is still live (see [driver.KeyChecker]).
func (s *KeyStore) CheckKey(ctx context.Context, c driver.KeyCheck) (driver.KeyState, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	a, ok := s.accountIDs.lookup(c.Account)
	if !ok || s.accounts[a.i].revision != c.AccountRevision {
		return driver.KeyUnknown, nil // gone, or changed since the caller read it
	}
	if c.KeyID == "" {
		return driver.KeyLive, nil
	}
	kr, ok := s.keyIDs.lookup(c.KeyID)
	if !ok {
		return driver.KeyUnknown, nil
	}
	switch k := &s.keys[kr.i]; {
	case k.account != a.i || k.hash != auth.Hash(c.Hash):
		return driver.KeyUnknown, nil
	case k.revoked != stamp{}:
		return driver.KeyRevoked, nil
	case k.revision != c.Revision:
		return driver.KeyUnknown, nil // changed since the caller read it
	}
	return driver.KeyLive, nil
}

// ExpiringKeys returns a page of the expiries of keys in q's window (see
// [auth.KeyExpiries]). It walks the records that have restrictions under the read
// lock, and sorts those in the window: a memory store's listing costs in proportion
// to its restricted keys and accounts.
func (s *KeyStore) ExpiringKeys(ctx context.Context, q auth.ExpiryQuery) (auth.ExpiryPage, error) {
	if err := ctx.Err(); err != nil {
		return auth.ExpiryPage{}, err
	}
	q, size, err := q.Check()
	if err != nil {
		return auth.ExpiryPage{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	// The keys that may expire: those restricted, and the primary keys of the
	// accounts restricted.
	seen := map[uint32]bool{}
	var found []auth.Expiry
	for rf, r := range s.restricted {
		if r.ExpiresAt().IsZero() {
			continue
		}
		i := rf.i
		if !rf.key {
			first := s.accounts[i].first
			if first == 0 || !s.keys[first-1].primary {
				continue
			}
			i = first - 1
		}
		if seen[i] {
			continue
		}
		seen[i] = true
		r := &s.keys[i]
		k := auth.Key{ID: s.keyIDs.at(r.id), Primary: r.primary, Restrictions: s.restricted[ref{key: true, i: i}]}
		at := auth.ExpiryOf(&k, s.restricted[ref{i: r.account}])
		if q.Expires(k.ID, at, r.revoked.time()) {
			found = append(found, auth.Expiry{Key: s.key(i), At: at})
		}
	}
	slices.SortFunc(found, func(a, b auth.Expiry) int {
		return cmp.Or(a.At.Compare(b.At), strings.Compare(a.Key.ID, b.Key.ID))
	})
	page := auth.ExpiryPage{Expiries: found[:min(size, len(found))]}
	if len(found) > size {
		last := page.Expiries[size-1]
		page.Next = auth.ExpiryCursor{At: last.At, Key: last.Key.ID}
	}
	return page, nil
}
