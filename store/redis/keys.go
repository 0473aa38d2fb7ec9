package redis

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/store"
)

// The stored forms of records. Changing fields (hash, rotation, revocation, revision)
// are kept apart from these, so that scripts read and write them without decoding JSON.
// A key's fields in its account's hash are <id>:h (the hash in hexadecimal), <id>:rec
// (the JSON below), <id>:rot and <id>:rev (the moments of the last rotation and of the
// revocation) and <id>:v (the revision, absent for 0).
type accountRecord struct {
	Plan         string            `json:"plan"`
	Restrictions auth.Restrictions `json:"restrictions"`
	CreatedAt    time.Time         `json:"created_at"`
}

type keyRecord struct {
	Name         string            `json:"name"`
	Primary      bool              `json:"primary,omitempty"`
	Restrictions auth.Restrictions `json:"restrictions"`
	CreatedAt    time.Time         `json:"created_at"`
}

// hashRef is the value of a hash index entry: the account and the key id, the
// account's length first so that neither needs escaping.
func hashRef(account, keyID string) string {
	return strconv.Itoa(len(account)) + ":" + account + keyID
}

func parseHashRef(v string) (account, keyID string, ok bool) {
	for i := 0; i < len(v); i++ {
		if v[i] == ':' {
			n, err := strconv.Atoi(v[:i])
			if err != nil || n < 0 || i+1+n > len(v) {
				return "", "", false
			}
			return v[i+1 : i+1+n], v[i+1+n:], true
		}
	}
	return "", "", false
}

func formatMoment(t time.Time) string { return t.Format(time.RFC3339Nano) }

func parseMoment(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	return time.Parse(time.RFC3339Nano, s)
}

// decodeKey builds a key from its stored fields.
func decodeKey(id, account, hash, rec, rotated, revoked, revision string) (auth.Key, error) {
	k := auth.Key{ID: id, AccountID: account}
	if revision != "" {
		v, err := strconv.ParseInt(revision, 10, 64)
		if err != nil {
			return k, fmt.Errorf("redis: key %q: the stored revision %q is malformed", id, revision)
		}
		k.Revision = v
	}
	var r keyRecord
	if err := json.Unmarshal([]byte(rec), &r); err != nil {
		return k, fmt.Errorf("redis: key %q: decoding the record: %w", id, err)
	}
	if n, err := hex.Decode(k.Hash[:], []byte(hash)); err != nil || n != len(k.Hash) {
		return k, fmt.Errorf("redis: key %q: the stored hash %q is malformed", id, hash)
	}
	k.Name, k.Primary, k.Restrictions, k.CreatedAt = r.Name, r.Primary, r.Restrictions, r.CreatedAt
	var err1, err2 error
	k.RotatedAt, err1 = parseMoment(rotated)
	k.RevokedAt, err2 = parseMoment(revoked)
	if err := errors.Join(err1, err2); err != nil {
		return k, fmt.Errorf("redis: key %q: %w", id, err)
	}
	return k, nil
}

func decodeAccount(id, rec string) (auth.Account, error) {
	a := auth.Account{ID: id}
	var r accountRecord
	if err := json.Unmarshal([]byte(rec), &r); err != nil {
		return a, fmt.Errorf("redis: account %q: decoding the record: %w", id, err)
	}
	a.Plan, a.Restrictions, a.CreatedAt = r.Plan, r.Restrictions, r.CreatedAt
	return a, nil
}

func encodeKey(k auth.Key) (string, error) {
	b, err := json.Marshal(keyRecord{Name: k.Name, Primary: k.Primary, Restrictions: k.Restrictions, CreatedAt: k.CreatedAt})
	return string(b), err
}

// claim takes an index entry for a new key: its id, then its hash. It returns a
// function that withdraws the claims, for when the record is refused.
func (s *Store) claim(ctx context.Context, k auth.Key) (undo func(), err error) {
	idKey, hKey, ref := s.keyIDIndex(k.ID), s.hashIndex(k.Hash), hashRef(k.AccountID, k.ID)
	ok, err := s.c.SetNX(ctx, idKey, k.AccountID, 0).Result()
	if err != nil {
		return nil, fail(ctx, err, "key %q: claiming the id", k.ID)
	}
	if !ok {
		return nil, fmt.Errorf("redis: key %q: the id is taken: %w", k.ID, store.ErrConflict)
	}
	ok, err = s.c.SetNX(ctx, hKey, ref, 0).Result()
	if err != nil || !ok {
		s.withdraw(ctx, idKey, k.AccountID)
		if err != nil {
			return nil, fail(ctx, err, "key %q: claiming the hash", k.ID)
		}
		return nil, fmt.Errorf("redis: key %q: the hash is taken: %w", k.ID, store.ErrConflict)
	}
	return func() {
		s.withdraw(ctx, idKey, k.AccountID)
		s.withdraw(ctx, hKey, ref)
	}, nil
}

// withdraw deletes an index entry if it still holds value. It runs even if ctx was
// canceled meanwhile; if Redis cannot be reached, the entry stays, pointing at a record
// that does not exist, which resolves nothing.
func (s *Store) withdraw(ctx context.Context, key, value string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	s.run(ctx, delIfScript, []string{key}, value)
}

// checkText refuses text that a store cannot hold (see [store.CheckText]): Redis could
// hold any bytes, but the records are JSON, which would replace invalid UTF-8, and
// every store refuses the same values.
func checkText(a auth.Account, k auth.Key) error {
	for _, f := range []struct{ what, value string }{
		{"account id", a.ID}, {"plan", a.Plan}, {"key id", k.ID}, {"key name", k.Name},
	} {
		if err := store.CheckText("redis: "+f.what, f.value); err != nil {
			return err
		}
	}
	return nil
}

// CreateAccount stores a new account with its primary key. The key's id and hash are
// claimed in their indexes first (SET NX); the account's record and key are then
// written in one script, which refuses a taken account id; the claims are withdrawn
// if it does.
func (s *Store) CreateAccount(ctx context.Context, account auth.Account, primary auth.Key) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if primary.AccountID != account.ID {
		return fmt.Errorf("redis: key %q belongs to account %q, not %q: %w", primary.ID, primary.AccountID, account.ID, store.ErrConflict)
	}
	if err := checkText(account, primary); err != nil {
		return err
	}
	arec, err := json.Marshal(accountRecord{Plan: account.Plan, Restrictions: account.Restrictions, CreatedAt: account.CreatedAt})
	if err != nil {
		return fmt.Errorf("redis: account %q: %w", account.ID, err)
	}
	krec, err := encodeKey(primary)
	if err != nil {
		return fmt.Errorf("redis: key %q: %w", primary.ID, err)
	}
	undo, err := s.claim(ctx, primary)
	if err != nil {
		return err
	}
	a := s.account(account.ID)
	st, err := s.run(ctx, createAccountScript, []string{a.record(), a.keys(), a.korder()},
		string(arec), primary.ID, primary.Hash.String(), krec)
	if err != nil {
		// The outcome is unknown: the claims stay (if the record was not written,
		// they refer to nothing and resolve nothing).
		return fail(ctx, err, "creating account %q", account.ID)
	}
	if asInt(st) == stConflict {
		undo()
		return fmt.Errorf("redis: account %q: %w", account.ID, store.ErrConflict)
	}
	return nil
}

// Account returns the account with the given id.
func (s *Store) Account(ctx context.Context, id string) (auth.Account, error) {
	if err := ctx.Err(); err != nil {
		return auth.Account{}, err
	}
	rec, err := s.c.Get(ctx, s.account(id).record()).Result()
	if errors.Is(err, goredis.Nil) {
		return auth.Account{}, fmt.Errorf("redis: account %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return auth.Account{}, fail(ctx, err, "reading account %q", id)
	}
	return decodeAccount(id, rec)
}

// CreateKey stores a new key of an existing account, claiming its id and hash first
// as CreateAccount does.
func (s *Store) CreateKey(ctx context.Context, key auth.Key) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkText(auth.Account{ID: key.AccountID, Plan: "-"}, key); err != nil {
		return err
	}
	krec, err := encodeKey(key)
	if err != nil {
		return fmt.Errorf("redis: key %q: %w", key.ID, err)
	}
	undo, err := s.claim(ctx, key)
	if err != nil {
		return err
	}
	a := s.account(key.AccountID)
	st, err := s.run(ctx, createKeyScript, []string{a.record(), a.keys(), a.korder()}, key.ID, key.Hash.String(), krec)
	if err != nil {
		return fail(ctx, err, "creating key %q", key.ID)
	}
	switch asInt(st) {
	case stNotFound:
		undo()
		return fmt.Errorf("redis: account %q of key %q: %w", key.AccountID, key.ID, store.ErrNotFound)
	case stConflict:
		undo()
		return fmt.Errorf("redis: key %q: %w", key.ID, store.ErrConflict)
	}
	return nil
}

// accountOf looks a key id up in its index.
func (s *Store) accountOf(ctx context.Context, id string) (string, error) {
	acct, err := s.c.Get(ctx, s.keyIDIndex(id)).Result()
	if errors.Is(err, goredis.Nil) {
		return "", fmt.Errorf("redis: key %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return "", fail(ctx, err, "looking up key %q", id)
	}
	return acct, nil
}

// Key returns the key with the given id: its account from the id index, then its
// record. An index entry whose record does not exist (a creation that failed half-way)
// is not a key.
func (s *Store) Key(ctx context.Context, id string) (auth.Key, error) {
	if err := ctx.Err(); err != nil {
		return auth.Key{}, err
	}
	acct, err := s.accountOf(ctx, id)
	if err != nil {
		return auth.Key{}, err
	}
	f, err := s.c.HMGet(ctx, s.account(acct).keys(), id+":h", id+":rec", id+":rot", id+":rev", id+":v").Result()
	if err != nil {
		return auth.Key{}, fail(ctx, err, "reading key %q", id)
	}
	if len(f) != 5 || asString(f[0]) == "" {
		return auth.Key{}, fmt.Errorf("redis: key %q: %w", id, store.ErrNotFound)
	}
	return decodeKey(id, acct, asString(f[0]), asString(f[1]), asString(f[2]), asString(f[3]), asString(f[4]))
}

// Keys returns the keys of an account in the order they were created.
func (s *Store) Keys(ctx context.Context, accountID string) ([]auth.Key, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	a := s.account(accountID)
	reply, err := s.run(ctx, listKeysScript, []string{a.record(), a.keys(), a.korder()})
	if err != nil {
		return nil, fail(ctx, err, "reading the keys of account %q", accountID)
	}
	r := asSlice(reply)
	if len(r) == 0 || (len(r)-1)%6 != 0 {
		return nil, errReply("keys of account "+strconv.Quote(accountID), reply)
	}
	if asInt(r[0]) == stNotFound {
		return nil, fmt.Errorf("redis: account %q: %w", accountID, store.ErrNotFound)
	}
	keys := make([]auth.Key, 0, (len(r)-1)/6)
	for i := 1; i < len(r); i += 6 {
		k, err := decodeKey(asString(r[i]), accountID, asString(r[i+1]), asString(r[i+2]), asString(r[i+3]), asString(r[i+4]), asString(r[i+5]))
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// Resolve returns the key whose current hash is h, with its account. The hash index
// names a candidate; the key's record, read in its account's slot, must still have
// the hash, so an index entry left behind by a rotation never resolves.
func (s *Store) Resolve(ctx context.Context, h auth.Hash) (auth.Key, auth.Account, error) {
	if err := ctx.Err(); err != nil {
		return auth.Key{}, auth.Account{}, err
	}
	notFound := fmt.Errorf("redis: key hash %.8s: %w", h, store.ErrNotFound)
	ref, err := s.c.Get(ctx, s.hashIndex(h)).Result()
	if errors.Is(err, goredis.Nil) {
		return auth.Key{}, auth.Account{}, notFound
	}
	if err != nil {
		return auth.Key{}, auth.Account{}, fail(ctx, err, "looking up key hash %.8s", h)
	}
	acct, id, ok := parseHashRef(ref)
	if !ok {
		return auth.Key{}, auth.Account{}, notFound
	}
	a := s.account(acct)
	reply, err := s.run(ctx, resolveScript, []string{a.record(), a.keys()}, id, h.String())
	if err != nil {
		return auth.Key{}, auth.Account{}, fail(ctx, err, "reading key %q", id)
	}
	r := asSlice(reply)
	if len(r) == 0 {
		return auth.Key{}, auth.Account{}, errReply("resolve", reply)
	}
	if asInt(r[0]) != stOK || len(r) != 6 {
		return auth.Key{}, auth.Account{}, notFound
	}
	k, err := decodeKey(id, acct, h.String(), asString(r[1]), asString(r[2]), asString(r[3]), asString(r[5]))
	if err != nil {
		return auth.Key{}, auth.Account{}, err
	}
	account, err := decodeAccount(acct, asString(r[4]))
	if err != nil {
		return auth.Key{}, auth.Account{}, err
	}
	return k, account, nil
}

// RotateKey replaces the hash of a key, in three steps:
//
//  1. claim the new hash in the index (SET NX; ErrConflict if it is taken);
//  2. replace the hash in the key's record, in one script in the account's slot,
//     which refuses a revoked or missing key, or one that no longer has revision rev
//     (unless rev is [auth.AnyRevision]); the claim is then withdrawn;
//  3. delete the old hash's index entry.
//
// The old value is dead from the moment step 2 runs, not step 3: every reader of a
// hash (Resolve, CheckKey, the admission step) compares it with the record's current
// hash in the account's slot, so the old index entry, while it lasts, resolves nothing.
// The new value works from that same moment, because its index entry was written
// before. If the process stops between the steps, an index entry is left that resolves
// nothing; it only keeps that (random) hash from being used again.
func (s *Store) RotateKey(ctx context.Context, id string, rev int64, h auth.Hash, at time.Time) (auth.Key, error) {
	if err := ctx.Err(); err != nil {
		return auth.Key{}, err
	}
	acct, err := s.accountOf(ctx, id)
	if err != nil {
		return auth.Key{}, err
	}
	hKey, ref := s.hashIndex(h), hashRef(acct, id)
	ok, err := s.c.SetNX(ctx, hKey, ref, 0).Result()
	if err != nil {
		return auth.Key{}, fail(ctx, err, "key %q: claiming the new hash", id)
	}
	if !ok {
		return auth.Key{}, fmt.Errorf("redis: key %q: the new hash is taken: %w", id, store.ErrConflict)
	}
	moment := formatMoment(at)
	reply, err := s.run(ctx, rotateScript, []string{s.account(acct).keys()}, id, h.String(), moment, strconv.FormatInt(rev, 10))
	if err != nil {
		return auth.Key{}, fail(ctx, err, "rotating key %q", id)
	}
	r := asSlice(reply)
	if len(r) == 0 {
		return auth.Key{}, errReply("rotate", reply)
	}
	switch asInt(r[0]) {
	case stNotFound:
		s.withdraw(ctx, hKey, ref)
		return auth.Key{}, fmt.Errorf("redis: key %q: %w", id, store.ErrNotFound)
	case stConflict:
		s.withdraw(ctx, hKey, ref)
		return auth.Key{}, fmt.Errorf("redis: key %q is revoked: %w", id, store.ErrConflict)
	case stChanged:
		s.withdraw(ctx, hKey, ref)
		return auth.Key{}, changed(id, rev, r)
	}
	if len(r) != 4 {
		return auth.Key{}, errReply("rotate", reply)
	}
	var old auth.Hash
	if n, err := hex.Decode(old[:], []byte(asString(r[1]))); err == nil && n == len(old) {
		s.withdraw(ctx, s.hashIndex(old), ref)
	}
	return decodeKey(id, acct, h.String(), asString(r[2]), moment, "", asString(r[3]))
}

// RevokeKey marks a key revoked at the given moment, once, if it still has revision rev
// (unless rev is [auth.AnyRevision]).
func (s *Store) RevokeKey(ctx context.Context, id string, rev int64, at time.Time) (auth.Key, error) {
	if err := ctx.Err(); err != nil {
		return auth.Key{}, err
	}
	acct, err := s.accountOf(ctx, id)
	if err != nil {
		return auth.Key{}, err
	}
	reply, err := s.run(ctx, revokeScript, []string{s.account(acct).keys()}, id, formatMoment(at), strconv.FormatInt(rev, 10))
	if err != nil {
		return auth.Key{}, fail(ctx, err, "revoking key %q", id)
	}
	r := asSlice(reply)
	if len(r) == 0 {
		return auth.Key{}, errReply("revoke", reply)
	}
	switch {
	case asInt(r[0]) == stChanged:
		return auth.Key{}, changed(id, rev, r)
	case asInt(r[0]) == stNotFound || len(r) != 6:
		return auth.Key{}, fmt.Errorf("redis: key %q: %w", id, store.ErrNotFound)
	}
	return decodeKey(id, acct, asString(r[1]), asString(r[2]), asString(r[3]), asString(r[4]), asString(r[5]))
}

// CheckKey reports whether a key is still live (see [auth.KeyChecker]), in one
// script in the account's slot.
func (s *Store) CheckKey(ctx context.Context, c auth.KeyCheck) (auth.KeyState, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	a := s.account(c.Account)
	reply, err := s.run(ctx, checkKeyScript, []string{a.record(), a.keys()}, c.KeyID, auth.Hash(c.Hash).String(), strconv.FormatInt(c.Revision, 10))
	if err != nil {
		return 0, fail(ctx, err, "checking key %q of account %q", c.KeyID, c.Account)
	}
	return keyState(asInt(reply)), nil
}

// UpdateKey replaces the name and restrictions of a key that still has u.Revision, in
// one script in the account's slot. The hash and its index are not touched.
func (s *Store) UpdateKey(ctx context.Context, u auth.KeyUpdate) (auth.Key, error) {
	if err := ctx.Err(); err != nil {
		return auth.Key{}, err
	}
	if err := store.CheckText("redis: key name", u.Name); err != nil {
		return auth.Key{}, err
	}
	acct, err := s.accountOf(ctx, u.ID)
	if err != nil {
		return auth.Key{}, err
	}
	// The record's other fields (primary, created) are read with the key, then written
	// back with the new name and restrictions; the revision guards against a change in
	// between.
	old, err := s.Key(ctx, u.ID)
	if err != nil {
		return auth.Key{}, err
	}
	old.Name, old.Restrictions = u.Name, u.Restrictions
	rec, err := encodeKey(old)
	if err != nil {
		return auth.Key{}, fmt.Errorf("redis: key %q: %w", u.ID, err)
	}
	reply, err := s.run(ctx, updateScript, []string{s.account(acct).keys()}, u.ID, strconv.FormatInt(u.Revision, 10), rec)
	if err != nil {
		return auth.Key{}, fail(ctx, err, "updating key %q", u.ID)
	}
	r := asSlice(reply)
	if len(r) == 0 {
		return auth.Key{}, errReply("update", reply)
	}
	switch asInt(r[0]) {
	case stNotFound:
		return auth.Key{}, fmt.Errorf("redis: key %q: %w", u.ID, store.ErrNotFound)
	case stConflict:
		return auth.Key{}, fmt.Errorf("redis: key %q is revoked: %w", u.ID, store.ErrConflict)
	case stChanged:
		return auth.Key{}, changed(u.ID, u.Revision, r)
	}
	if asInt(r[0]) != stOK || len(r) != 4 {
		return auth.Key{}, errReply("update", reply)
	}
	return decodeKey(u.ID, acct, asString(r[1]), rec, asString(r[2]), "", asString(r[3]))
}

// stChanged is the status of the rotate, revoke and update scripts for a key that no
// longer has the revision asked for; the reply's second element is its revision.
const stChanged = 3

// changed is the conflict of a change decided on revision rev of a key that a script
// (reply r) found at another revision.
func changed(id string, rev int64, r []any) error {
	now := "unknown"
	if len(r) == 2 {
		now = asString(r[1])
	}
	return fmt.Errorf("redis: key %q changed since revision %d (it is at %s): %w", id, rev, now, store.ErrConflict)
}

func keyState(n int64) auth.KeyState {
	switch n {
	case 0:
		return auth.KeyLive
	case 2:
		return auth.KeyRevoked
	}
	return auth.KeyUnknown
}
