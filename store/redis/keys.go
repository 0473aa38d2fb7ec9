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
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/journal"
	"github.com/tollgate-dev/tollgate/store"
)

// The stored forms of records. Changing fields (hash, rotation, revocation, revision)
// are kept apart from these, so that scripts read and write them without decoding JSON.
// A key's fields in its account's hash are <id>:h (the hash in hexadecimal), <id>:rec
// (the JSON below), <id>:rot and <id>:rev (the moments of the last rotation and of the
// revocation) and <id>:v (the revision, absent for 0). The account's revision is both
// in its record and in the field arev of the hash (absent for 0), which the key checks
// read with the key's fields; update_account.lua writes both. A record written before
// the account lifecycle has no state (it is active), no anchor, no pending plan and no
// revision.
type accountRecord struct {
	Plan           string            `json:"plan"`
	Restrictions   auth.Restrictions `json:"restrictions"`
	CreatedAt      time.Time         `json:"created_at"`
	State          auth.AccountState `json:"state,omitempty"`
	StateChangedAt time.Time         `json:"state_changed_at,omitzero"`
	BillingAnchor  time.Time         `json:"billing_anchor,omitzero"`
	PendingPlan    string            `json:"pending_plan,omitempty"`
	PendingPlanAt  time.Time         `json:"pending_plan_at,omitzero"`
	Revision       int64             `json:"revision,omitempty"`
}

// recordOf returns the stored form of an account, at revision rev.
func recordOf(a *auth.Account, rev int64) accountRecord {
	return accountRecord{Plan: a.Plan, Restrictions: a.Restrictions, CreatedAt: a.CreatedAt, State: a.State.OrActive(),
		StateChangedAt: a.StateChangedAt, BillingAnchor: a.BillingAnchor, PendingPlan: a.PendingPlan,
		PendingPlanAt: a.PendingPlanAt, Revision: rev}
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
	var r accountRecord
	if err := json.Unmarshal([]byte(rec), &r); err != nil {
		return auth.Account{ID: id}, fmt.Errorf("redis: account %q: decoding the record: %w", id, err)
	}
	return auth.Account{ID: id, Plan: r.Plan, Restrictions: r.Restrictions, CreatedAt: r.CreatedAt.UTC(),
		State: r.State.OrActive(), StateChangedAt: utc(r.StateChangedAt), BillingAnchor: utc(r.BillingAnchor),
		PendingPlan: r.PendingPlan, PendingPlanAt: utc(r.PendingPlanAt), Revision: r.Revision}, nil
}

// utc returns t in UTC, and the zero time as it is.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

func encodeKey(k auth.Key) (string, error) {
	b, err := json.Marshal(keyRecord{Name: k.Name, Primary: k.Primary, Restrictions: k.Restrictions, CreatedAt: k.CreatedAt})
	return string(b), err
}

// claim takes an index entry for a new key: its id, then its hash. It returns a
// function that withdraws the claims, for when the record is refused.
func (s *Store) claim(ctx context.Context, k auth.Key) (undo func(), err error) {
	idKey, hKey, ref := s.keyIDIndex(k.ID), s.hashIndex(k.Hash), hashRef(k.AccountID, k.ID)
	ok, err := s.setNX(ctx, idKey, k.AccountID)
	if err != nil {
		return nil, fail(ctx, err, "key %q: claiming the id", k.ID)
	}
	if !ok {
		return nil, fmt.Errorf("redis: key %q: the id is taken: %w", k.ID, store.ErrConflict)
	}
	ok, err = s.setNX(ctx, hKey, ref)
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

// setNX sets key to value unless it exists, and reports whether it did, waiting for
// the replicas with Options.Replicas.
func (s *Store) setNX(ctx context.Context, key, value string) (bool, error) {
	if s.repl == nil {
		return s.c.SetNX(ctx, key, value, 0).Result()
	}
	_, err := s.writeCmd(ctx, "set", key, value, "nx")
	if errors.Is(err, goredis.Nil) {
		return false, nil
	}
	return err == nil, err
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
		{"account id", a.ID}, {"plan", a.Plan}, {"pending plan", a.PendingPlan}, {"key id", k.ID}, {"key name", k.Name},
	} {
		if err := store.CheckText("redis: "+f.what, f.value); err != nil {
			return err
		}
	}
	return nil
}

// CreateAccount stores a new account with its primary key. The key's id and hash are
// claimed in their indexes first (SET NX); the account's id is added to the index of
// account ids (ZADD); the account's record and key are then written in one script,
// which refuses a taken account id; the claims are withdrawn if it does. The id is
// added to the index of account ids again once the record is written (see
// DeleteAccount). The script records the journal entry ctx carries (see journal.go).
func (s *Store) CreateAccount(ctx context.Context, account auth.Account, primary auth.Key) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	entry, err := journal.From(ctx)
	if err != nil {
		return err
	}
	if primary.AccountID != account.ID {
		return fmt.Errorf("redis: key %q belongs to account %q, not %q: %w", primary.ID, primary.AccountID, account.ID, store.ErrConflict)
	}
	if err := checkText(account, primary); err != nil {
		return err
	}
	if !account.State.OrActive().Valid() {
		return fmt.Errorf("redis: account %q: %q is not an account state: %w", account.ID, account.State, store.ErrInvalid)
	}
	arec, err := json.Marshal(recordOf(&account, 0))
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
	if err := s.indexAccount(ctx, account.ID); err != nil {
		undo()
		return err
	}
	var expiries []string
	if m, ok := keyExpiry(&primary); ok {
		expiries = append(expiries, m)
	}
	if m, ok := accountExpiryOf(&account, primary.ID); ok {
		expiries = append(expiries, m)
	}
	if err := s.indexExpiries(ctx, expiries...); err != nil {
		undo()
		return err
	}
	a := s.account(account.ID)
	st, err := s.journalWrite(account.ID, entry).run(ctx, createAccountScript, []string{a.record(), a.keys(), a.korder()},
		string(arec), primary.ID, primary.Hash.String(), krec)
	if err != nil {
		// The outcome is unknown: the claims and the index entries stay (if the record
		// was not written, they refer to nothing and resolve nothing).
		return fail(ctx, err, "creating account %q", account.ID)
	}
	if asInt(st) == stConflict {
		undo()
		s.unindexExpiries(ctx, expiries...)
		return fmt.Errorf("redis: account %q: %w", account.ID, store.ErrConflict)
	}
	s.reindexAccount(ctx, account.ID)
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

// CreateKey stores a new key of an existing account, if limit lets it hold one more,
// claiming its id and hash first as CreateAccount does. The limit is judged in the
// script that writes the record, on the account's korder and krev, which records the
// journal entry ctx carries.
func (s *Store) CreateKey(ctx context.Context, key auth.Key, limit auth.KeyLimit) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	entry, err := journal.From(ctx)
	if err != nil {
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
	if m, ok := keyExpiry(&key); ok {
		if err := s.indexExpiries(ctx, m); err != nil {
			undo()
			return err
		}
		claimed := undo
		undo = func() {
			claimed()
			s.unindexExpiries(ctx, m)
		}
	}
	since := "-inf"
	if !limit.RevokedSince.IsZero() {
		since = strconv.FormatInt(limit.RevokedSince.UnixMicro(), 10)
	}
	a := s.account(key.AccountID)
	w := s.journalWrite(key.AccountID, entry)
	for indexed := false; ; indexed = true {
		st, err := w.run(ctx, createKeyScript, []string{a.record(), a.keys(), a.korder(), a.krev()},
			key.ID, key.Hash.String(), krec, max(limit.Max, 0), since)
		if err != nil {
			return fail(ctx, err, "creating key %q", key.ID)
		}
		switch asInt(st) {
		case stOK:
			return nil
		case stNotFound:
			undo()
			return fmt.Errorf("redis: account %q of key %q: %w", key.AccountID, key.ID, store.ErrNotFound)
		case stConflict:
			undo()
			return fmt.Errorf("redis: key %q: %w", key.ID, store.ErrConflict)
		case stKeyLimit:
			undo()
			return fmt.Errorf("account %q holds %d keys that count, the most it may: %w", key.AccountID, limit.Max, auth.ErrTooManyKeys)
		case stNotIndexed:
			if indexed {
				return errReply("creating key "+strconv.Quote(key.ID), st)
			}
			if err := s.indexRevoked(ctx, key.AccountID); err != nil {
				undo()
				return err
			}
		default:
			return errReply("creating key "+strconv.Quote(key.ID), st)
		}
	}
}

// The statuses of create_key.lua beyond stOK, stNotFound and stConflict.
const (
	stKeyLimit   = 3 // the limit refuses the key
	stNotIndexed = 4 // the account's revoked keys are not in krev yet
)

// indexRevoked indexes the revoked keys of an account created before krev was kept, in
// krev and in the index of revoked keys, once (see krev_init.lua).
func (s *Store) indexRevoked(ctx context.Context, account string) error {
	var args []any
	q := auth.KeyQuery{Account: account, Limit: auth.MaxKeyPage}
	for {
		page, err := s.Keys(ctx, q)
		if err != nil {
			return err
		}
		for _, k := range page.Keys {
			if k.Revoked() {
				args = append(args, k.ID, k.RevokedAt.UnixMicro())
				s.indexRevocation(ctx, k)
			}
		}
		if q.After = page.Next; q.After == "" {
			break
		}
	}
	a := s.account(account)
	if _, err := s.write(ctx, krevInitScript, []string{a.keys(), a.krev()}, args...); err != nil {
		return fail(ctx, err, "indexing the revoked keys of account %q", account)
	}
	return nil
}

// indexRevocation adds a revoked key, but a primary key, to the index of revoked keys,
// which PruneKeys reads. It is a command of its own, after the revocation: if Redis
// fails in between, the key is left out of the index, and kept (counted by the limits
// of CreateKey only until its revocation is older than their instant).
func (s *Store) indexRevocation(ctx context.Context, k auth.Key) {
	if k.Primary || !k.Revoked() {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	s.writeCmd(ctx, "zadd", s.revoked(), k.RevokedAt.UnixMicro(), hashRef(k.AccountID, k.ID))
}

// pruneBatch is the most entries of the index of revoked keys that PruneKeys reads at
// once.
const pruneBatch = 500

// PruneKeys deletes the keys revoked before before, but primary keys: it reads the
// index of revoked keys in batches, deletes each account's keys revoked before before
// in one script in the account's slot, then the index entries of the keys deleted
// (their id and hash), then the batch's entries of the index of revoked keys.
func (s *Store) PruneKeys(ctx context.Context, before time.Time) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	cut := strconv.FormatInt(before.UnixMicro(), 10)
	var total int64
	for {
		members, err := s.c.ZRangeByScore(ctx, s.revoked(), &goredis.ZRangeBy{Min: "-inf", Max: "(" + cut, Count: pruneBatch}).Result()
		if err != nil {
			return total, fail(ctx, err, "reading the revoked keys")
		}
		done := map[string]bool{}
		for _, m := range members {
			acct, _, ok := parseHashRef(m)
			if !ok || done[acct] {
				continue
			}
			done[acct] = true
			n, err := s.pruneAccount(ctx, acct, cut)
			total += n
			if err != nil {
				return total, err
			}
		}
		if len(members) > 0 {
			if err := s.c.ZRem(ctx, s.revoked(), anySlice(members)...).Err(); err != nil {
				return total, fail(ctx, err, "updating the index of revoked keys")
			}
		}
		if len(members) < pruneBatch {
			return total, nil
		}
	}
}

// pruneAccount deletes the keys of an account revoked before cut (Unix µs), and their
// index entries, and returns how many it deleted.
func (s *Store) pruneAccount(ctx context.Context, acct, cut string) (int64, error) {
	a := s.account(acct)
	reply, err := s.run(ctx, pruneKeysScript, []string{a.keys(), a.korder(), a.krev()}, cut)
	if err != nil {
		return 0, fail(ctx, err, "pruning the keys of account %q", acct)
	}
	r := asSlice(reply)
	var recs []any
	for i := 0; i+2 < len(r); i += 3 {
		id, h := asString(r[i]), asString(r[i+1])
		s.withdraw(ctx, s.keyIDIndex(id), acct)
		s.withdraw(ctx, s.prefix+":h:"+h, hashRef(acct, id))
		recs = append(recs, r[i], r[i+2])
	}
	s.unindexExpiries(ctx, expiriesOfRecords(acct, recs)...)
	return int64(len(r) / 3), nil
}

func anySlice(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
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

// Keys returns a page of the keys of an account in the order they were created, in one
// script: the cursor's key is found in korder (LPOS), and the page read after it.
func (s *Store) Keys(ctx context.Context, q auth.KeyQuery) (auth.KeyPage, error) {
	if err := ctx.Err(); err != nil {
		return auth.KeyPage{}, err
	}
	size, err := q.PageSize()
	if err != nil {
		return auth.KeyPage{}, err
	}
	a := s.account(q.Account)
	reply, err := s.run(ctx, listKeysScript, []string{a.record(), a.keys(), a.korder()}, q.After, size+1)
	if err != nil {
		return auth.KeyPage{}, fail(ctx, err, "reading the keys of account %q", q.Account)
	}
	r := asSlice(reply)
	if len(r) == 0 || (len(r)-1)%6 != 0 {
		return auth.KeyPage{}, errReply("keys of account "+strconv.Quote(q.Account), reply)
	}
	switch asInt(r[0]) {
	case stNotFound:
		return auth.KeyPage{}, fmt.Errorf("redis: account %q: %w", q.Account, store.ErrNotFound)
	case stConflict: // the cursor names no key of the account
		return auth.KeyPage{}, fmt.Errorf("%w: account %q has no key %q to list after", auth.ErrBadKeyQuery, q.Account, q.After)
	}
	page := auth.KeyPage{Keys: make([]auth.Key, 0, min(size, (len(r)-1)/6))}
	for i := 1; i < len(r); i += 6 {
		if len(page.Keys) == size {
			page.Next = page.Keys[size-1].ID
			break
		}
		k, err := decodeKey(asString(r[i]), q.Account, asString(r[i+1]), asString(r[i+2]), asString(r[i+3]), asString(r[i+4]), asString(r[i+5]))
		if err != nil {
			return auth.KeyPage{}, err
		}
		page.Keys = append(page.Keys, k)
	}
	return page, nil
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
// nothing; it only keeps that (random) hash from being used again. The script of step 2
// records the journal entry ctx carries.
func (s *Store) RotateKey(ctx context.Context, id string, rev int64, h auth.Hash, at time.Time) (auth.Key, error) {
	if err := ctx.Err(); err != nil {
		return auth.Key{}, err
	}
	entry, err := journal.From(ctx)
	if err != nil {
		return auth.Key{}, err
	}
	acct, err := s.accountOf(ctx, id)
	if err != nil {
		return auth.Key{}, err
	}
	hKey, ref := s.hashIndex(h), hashRef(acct, id)
	ok, err := s.setNX(ctx, hKey, ref)
	if err != nil {
		return auth.Key{}, fail(ctx, err, "key %q: claiming the new hash", id)
	}
	if !ok {
		return auth.Key{}, fmt.Errorf("redis: key %q: the new hash is taken: %w", id, store.ErrConflict)
	}
	moment := formatMoment(at)
	reply, err := s.journalWrite(acct, entry).run(ctx, rotateScript, []string{s.account(acct).keys()}, id, h.String(), moment, strconv.FormatInt(rev, 10))
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
// (unless rev is [auth.AnyRevision]), in one script that records the journal entry ctx
// carries (a revocation of a revoked key too).
func (s *Store) RevokeKey(ctx context.Context, id string, rev int64, at time.Time) (auth.Key, error) {
	if err := ctx.Err(); err != nil {
		return auth.Key{}, err
	}
	entry, err := journal.From(ctx)
	if err != nil {
		return auth.Key{}, err
	}
	acct, err := s.accountOf(ctx, id)
	if err != nil {
		return auth.Key{}, err
	}
	a := s.account(acct)
	reply, err := s.journalWrite(acct, entry).run(ctx, revokeScript, []string{a.keys(), a.krev()}, id, formatMoment(at), strconv.FormatInt(rev, 10), at.UnixMicro())
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
	k, err := decodeKey(id, acct, asString(r[1]), asString(r[2]), asString(r[3]), asString(r[4]), asString(r[5]))
	if err != nil {
		return auth.Key{}, err
	}
	s.indexRevocation(ctx, k)
	return k, nil
}

// CheckKey reports whether a key is still live (see [driver.KeyChecker]), in one
// script in the account's slot.
func (s *Store) CheckKey(ctx context.Context, c driver.KeyCheck) (driver.KeyState, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	a := s.account(c.Account)
	reply, err := s.run(ctx, checkKeyScript, []string{a.record(), a.keys()}, c.KeyID, auth.Hash(c.Hash).String(),
		strconv.FormatInt(c.Revision, 10), strconv.FormatInt(c.AccountRevision, 10))
	if err != nil {
		return 0, fail(ctx, err, "checking key %q of account %q", c.KeyID, c.Account)
	}
	return keyState(asInt(reply)), nil
}

// UpdateKey replaces the name and restrictions of a key that still has u.Revision, in
// one script in the account's slot, which records the journal entry ctx carries. The
// hash and its index are not touched.
func (s *Store) UpdateKey(ctx context.Context, u auth.KeyUpdate) (auth.Key, error) {
	if err := ctx.Err(); err != nil {
		return auth.Key{}, err
	}
	entry, err := journal.From(ctx)
	if err != nil {
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
	before, _ := keyExpiry(&old)
	old.Name, old.Restrictions = u.Name, u.Restrictions
	if m, ok := keyExpiry(&old); ok && m != before {
		// The entry of the old expiry stays: the listing deletes it when it passes it.
		if err := s.indexExpiries(ctx, m); err != nil {
			return auth.Key{}, err
		}
	}
	rec, err := encodeKey(old)
	if err != nil {
		return auth.Key{}, fmt.Errorf("redis: key %q: %w", u.ID, err)
	}
	reply, err := s.journalWrite(acct, entry).run(ctx, updateScript, []string{s.account(acct).keys()}, u.ID, strconv.FormatInt(u.Revision, 10), rec)
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

func keyState(n int64) driver.KeyState {
	switch n {
	case 0:
		return driver.KeyLive
	case 2:
		return driver.KeyRevoked
	}
	return driver.KeyUnknown
}
