package memory

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/journal"
	"github.com/tollgate-dev/tollgate/store"
)

// UpdateAccount replaces the mutable fields of an account that still has u.Revision,
// and records the journal entry ctx carries with it.
func (s *KeyStore) UpdateAccount(ctx context.Context, u auth.AccountUpdate) (_ auth.Account, err error) {
	if err := ctx.Err(); err != nil {
		return auth.Account{}, err
	}
	if err := checkUpdate(u); err != nil {
		return auth.Account{}, err
	}
	rec, err := journal.From(ctx)
	if err != nil {
		return auth.Account{}, err
	}
	st, _ := codeOf(u.State)
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.journal.recordIf(rec, &err)
	a, ok := s.accountIDs.lookup(u.ID)
	if !ok {
		return auth.Account{}, fmt.Errorf("memory: account %q: %w", u.ID, store.ErrNotFound)
	}
	r := &s.accounts[a.i]
	switch {
	case r.state == stateClosed:
		return auth.Account{}, fmt.Errorf("memory: account %q: %w", u.ID, auth.ErrAccountClosed)
	case r.revision != u.Revision:
		return auth.Account{}, fmt.Errorf("memory: account %q is at revision %d, not %d: %w", u.ID, r.revision, u.Revision, auth.ErrAccountChanged)
	}
	r.plan, r.pendingPlan = s.labels.intern(u.Plan).off, s.labels.intern(u.PendingPlan).off
	r.state, r.stateChanged, r.anchor, r.pendingFrom = st, stampOf(u.StateChangedAt), stampOf(u.BillingAnchor), stampOf(u.PendingPlanAt)
	r.revision++
	s.restrict(ref{i: a.i}, u.Restrictions)
	return s.account(a.i), nil
}

// checkUpdate refuses an update that no store can hold: text a store cannot hold (see
// [store.CheckText]), or a state that is not one.
func checkUpdate(u auth.AccountUpdate) error {
	for _, f := range []struct{ what, value string }{{"plan", u.Plan}, {"pending plan", u.PendingPlan}} {
		if err := store.CheckText("memory: "+f.what, f.value); err != nil {
			return err
		}
	}
	if !u.State.Valid() {
		return fmt.Errorf("memory: account %q: %q is not an account state: %w", u.ID, u.State, store.ErrInvalid)
	}
	return nil
}

// Accounts returns a page of the accounts q selects, in the order of their ids. It
// examines every account after q.After until the page is full and one more account
// that q selects is found (then Next is set) or none is left: a page is never short.
func (s *KeyStore) Accounts(ctx context.Context, q auth.AccountQuery) (auth.AccountPage, error) {
	if err := ctx.Err(); err != nil {
		return auth.AccountPage{}, err
	}
	size, err := q.PageSize()
	if err != nil {
		return auth.AccountPage{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.orderMu.Lock()
	defer s.orderMu.Unlock()
	s.sortAccounts()
	from := q.After
	if q.IDPrefix > from {
		from = q.IDPrefix // no id before the prefix has it
	}
	i, _ := slices.BinarySearchFunc(s.byID, from, func(a uint32, id string) int {
		return strings.Compare(s.accountIDs.at(s.accounts[a].id), id)
	})
	page := auth.AccountPage{Accounts: []auth.Account{}}
	for ; i < len(s.byID); i++ {
		r := &s.accounts[s.byID[i]]
		if r.deleted {
			continue
		}
		id := s.accountIDs.at(r.id)
		if q.After != "" && id <= q.After {
			continue // i is the cursor's own account
		}
		if !strings.HasPrefix(id, q.IDPrefix) {
			break // past the ids with the prefix
		}
		a := s.account(s.byID[i])
		if !q.Selects(&a) {
			continue
		}
		if len(page.Accounts) == size {
			page.Next = page.Accounts[size-1].ID
			break
		}
		page.Accounts = append(page.Accounts, a)
	}
	return page, nil
}

// sortAccounts merges the accounts added since the last call into byID, and drops the
// deleted ones. The caller holds the read lock and orderMu.
func (s *KeyStore) sortAccounts() {
	n := uint32(len(s.accounts))
	if s.sorted == n {
		return
	}
	idOf := func(a uint32) string { return s.accountIDs.at(s.accounts[a].id) }
	added := make([]uint32, 0, n-s.sorted)
	for a := s.sorted; a < n; a++ {
		if !s.accounts[a].deleted {
			added = append(added, a)
		}
	}
	slices.SortFunc(added, func(a, b uint32) int { return strings.Compare(idOf(a), idOf(b)) })
	merged := make([]uint32, 0, len(s.byID)+len(added))
	old := s.byID
	for len(old) > 0 || len(added) > 0 {
		switch {
		case len(old) > 0 && s.accounts[old[0]].deleted:
			old = old[1:]
		case len(added) == 0 || len(old) > 0 && cmp.Less(idOf(old[0]), idOf(added[0])):
			merged, old = append(merged, old[0]), old[1:]
		default:
			merged, added = append(merged, added[0]), added[1:]
		}
	}
	s.byID, s.sorted = merged, n
}

// DeleteAccount deletes a closed account with its keys, and records the journal entry
// ctx carries with it. Its records are unlinked from every index at once, and
// reclaimed when the tables are rebuilt (see PruneKeys); its id may be taken again at
// once.
func (s *KeyStore) DeleteAccount(ctx context.Context, id string) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	rec, err := journal.From(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.journal.recordIf(rec, &err)
	a, ok := s.accountIDs.lookup(id)
	if !ok {
		return fmt.Errorf("memory: account %q: %w", id, store.ErrNotFound)
	}
	r := &s.accounts[a.i]
	if r.state != stateClosed {
		return fmt.Errorf("memory: account %q is %s: %w", id, stateNames[r.state], auth.ErrAccountNotClosed)
	}
	for i := r.first; i != 0; {
		next := s.keys[i-1].nextOfAccount
		s.forget(i - 1)
		s.dead++
		i = next
	}
	r.first, r.last, r.deleted = 0, 0, true
	s.accountIDs.remove(id)
	delete(s.restricted, ref{i: a.i})
	s.deadAccounts++
	s.reclaim()
	return nil
}
