package memory

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/store"
)

// KeyStore is the in-memory [auth.KeyStore]. Records are immutable values replaced on
// every change, so lookups return them without copying. Its zero value is not usable;
// call [NewKeyStore].
type KeyStore struct {
	mu        sync.RWMutex
	accounts  map[string]*auth.Account
	keys      map[string]*auth.Key    // by id
	byHash    map[auth.Hash]*auth.Key // current hashes only
	byAccount map[string][]string     // key ids, oldest first
}

// Interface guards.
var (
	_ auth.KeyStore   = (*KeyStore)(nil)
	_ auth.KeyChecker = (*KeyStore)(nil)
)

// NewKeyStore returns an empty KeyStore.
func NewKeyStore() *KeyStore {
	return &KeyStore{
		accounts:  make(map[string]*auth.Account),
		keys:      make(map[string]*auth.Key),
		byHash:    make(map[auth.Hash]*auth.Key),
		byAccount: make(map[string][]string),
	}
}

// CreateAccount stores an account with its primary key.
func (s *KeyStore) CreateAccount(ctx context.Context, account auth.Account, primary auth.Key) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkText(account, primary); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.accounts[account.ID]; ok {
		return fmt.Errorf("memory: account %q: %w", account.ID, store.ErrConflict)
	}
	if err := s.checkNewKey(&primary); err != nil {
		return err
	}
	if primary.AccountID != account.ID {
		return fmt.Errorf("memory: key %q belongs to account %q, not %q: %w", primary.ID, primary.AccountID, account.ID, store.ErrConflict)
	}
	s.accounts[account.ID] = &account
	s.insertKey(&primary)
	return nil
}

// Account returns the account with the given id.
func (s *KeyStore) Account(ctx context.Context, id string) (auth.Account, error) {
	if err := ctx.Err(); err != nil {
		return auth.Account{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	a, ok := s.accounts[id]
	if !ok {
		return auth.Account{}, fmt.Errorf("memory: account %q: %w", id, store.ErrNotFound)
	}
	return *a, nil
}

// CreateKey stores a new key of an existing account.
func (s *KeyStore) CreateKey(ctx context.Context, key auth.Key) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkText(auth.Account{ID: key.AccountID, Plan: "-"}, key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.accounts[key.AccountID]; !ok {
		return fmt.Errorf("memory: account %q: %w", key.AccountID, store.ErrNotFound)
	}
	if err := s.checkNewKey(&key); err != nil {
		return err
	}
	s.insertKey(&key)
	return nil
}

// checkText refuses text that a store cannot hold (see [store.CheckText]), as every
// store does.
func checkText(a auth.Account, k auth.Key) error {
	for _, f := range []struct{ what, value string }{
		{"account id", a.ID}, {"plan", a.Plan}, {"key id", k.ID}, {"key name", k.Name},
	} {
		if err := store.CheckText("memory: "+f.what, f.value); err != nil {
			return err
		}
	}
	return nil
}

func (s *KeyStore) checkNewKey(k *auth.Key) error {
	if _, ok := s.keys[k.ID]; ok {
		return fmt.Errorf("memory: key %q: %w", k.ID, store.ErrConflict)
	}
	if _, ok := s.byHash[k.Hash]; ok {
		return fmt.Errorf("memory: key %q: the hash is taken: %w", k.ID, store.ErrConflict)
	}
	return nil
}

func (s *KeyStore) insertKey(k *auth.Key) {
	s.keys[k.ID] = k
	s.byHash[k.Hash] = k
	s.byAccount[k.AccountID] = append(s.byAccount[k.AccountID], k.ID)
}

// Key returns the key with the given id.
func (s *KeyStore) Key(ctx context.Context, id string) (auth.Key, error) {
	if err := ctx.Err(); err != nil {
		return auth.Key{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	k, ok := s.keys[id]
	if !ok {
		return auth.Key{}, fmt.Errorf("memory: key %q: %w", id, store.ErrNotFound)
	}
	return *k, nil
}

// Keys returns the keys of an account, oldest first.
func (s *KeyStore) Keys(ctx context.Context, accountID string) ([]auth.Key, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if _, ok := s.accounts[accountID]; !ok {
		return nil, fmt.Errorf("memory: account %q: %w", accountID, store.ErrNotFound)
	}
	ids := s.byAccount[accountID]
	out := make([]auth.Key, len(ids))
	for i, id := range ids {
		out[i] = *s.keys[id]
	}
	return out, nil
}

// Resolve returns the key whose current hash is h, with its account.
func (s *KeyStore) Resolve(ctx context.Context, h auth.Hash) (auth.Key, auth.Account, error) {
	if err := ctx.Err(); err != nil {
		return auth.Key{}, auth.Account{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	k, ok := s.byHash[h]
	if !ok {
		return auth.Key{}, auth.Account{}, fmt.Errorf("memory: key hash %.8s: %w", h, store.ErrNotFound)
	}
	return *k, *s.accounts[k.AccountID], nil
}

// RotateKey replaces the hash of a key (that still has revision rev, unless rev is
// [auth.AnyRevision]).
func (s *KeyStore) RotateKey(ctx context.Context, id string, rev int64, h auth.Hash, at time.Time) (auth.Key, error) {
	if err := ctx.Err(); err != nil {
		return auth.Key{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.keys[id]
	switch {
	case !ok:
		return auth.Key{}, fmt.Errorf("memory: key %q: %w", id, store.ErrNotFound)
	case old.Revoked():
		return auth.Key{}, fmt.Errorf("memory: key %q is revoked: %w", id, store.ErrConflict)
	case rev != auth.AnyRevision && old.Revision != rev:
		return auth.Key{}, changed(id, rev, old.Revision)
	}
	if _, taken := s.byHash[h]; taken {
		return auth.Key{}, fmt.Errorf("memory: key %q: the new hash is taken: %w", id, store.ErrConflict)
	}
	k := *old
	k.Hash, k.RotatedAt = h, at
	k.Revision++
	delete(s.byHash, old.Hash)
	s.keys[id], s.byHash[h] = &k, &k
	return k, nil
}

// RevokeKey marks a key revoked (if it still has revision rev, unless rev is
// [auth.AnyRevision]).
func (s *KeyStore) RevokeKey(ctx context.Context, id string, rev int64, at time.Time) (auth.Key, error) {
	if err := ctx.Err(); err != nil {
		return auth.Key{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.keys[id]
	switch {
	case !ok:
		return auth.Key{}, fmt.Errorf("memory: key %q: %w", id, store.ErrNotFound)
	case rev != auth.AnyRevision && old.Revision != rev:
		return auth.Key{}, changed(id, rev, old.Revision)
	case old.Revoked():
		return *old, nil
	}
	k := *old
	k.RevokedAt = at
	k.Revision++
	s.keys[id], s.byHash[k.Hash] = &k, &k
	return k, nil
}

// UpdateKey replaces the name and restrictions of a key that still has u.Revision.
func (s *KeyStore) UpdateKey(ctx context.Context, u auth.KeyUpdate) (auth.Key, error) {
	if err := ctx.Err(); err != nil {
		return auth.Key{}, err
	}
	if err := store.CheckText("memory: key name", u.Name); err != nil {
		return auth.Key{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.keys[u.ID]
	switch {
	case !ok:
		return auth.Key{}, fmt.Errorf("memory: key %q: %w", u.ID, store.ErrNotFound)
	case old.Revoked():
		return auth.Key{}, fmt.Errorf("memory: key %q is revoked: %w", u.ID, store.ErrConflict)
	case old.Revision != u.Revision:
		return auth.Key{}, changed(u.ID, u.Revision, old.Revision)
	}
	k := *old
	k.Name, k.Restrictions = u.Name, u.Restrictions
	k.Revision++
	s.keys[u.ID], s.byHash[k.Hash] = &k, &k
	return k, nil
}

// changed is the conflict of a change decided on revision rev of a key now at revision
// now.
func changed(id string, rev, now int64) error {
	return fmt.Errorf("memory: key %q changed since revision %d (it is at %d): %w", id, rev, now, store.ErrConflict)
}

// CheckKey reports whether a key is still live (see [auth.KeyChecker]).
func (s *KeyStore) CheckKey(ctx context.Context, c auth.KeyCheck) (auth.KeyState, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if _, ok := s.accounts[c.Account]; !ok {
		return auth.KeyUnknown, nil
	}
	if c.KeyID == "" {
		return auth.KeyLive, nil
	}
	k, ok := s.keys[c.KeyID]
	switch {
	case !ok || k.AccountID != c.Account || k.Hash != auth.Hash(c.Hash):
		return auth.KeyUnknown, nil
	case k.Revoked():
		return auth.KeyRevoked, nil
	case k.Revision != c.Revision:
		return auth.KeyUnknown, nil // changed since the caller read it
	}
	return auth.KeyLive, nil
}
