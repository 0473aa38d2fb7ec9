package postgres

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/journal"
	"github.com/tollgate-dev/tollgate/store"
)

// The columns of a key and of an account, in the order scanKey and scanAccount read them.
const (
	keyColumns     = `k.id, k.account_id, k.name, k.is_primary, k.hash, k.restrictions, k.created_at, k.rotated_at, k.revoked_at, k.revision`
	accountColumns = `a.id, a.plan, a.restrictions, a.created_at, a.state, a.state_changed_at, a.billing_anchor, a.pending_plan, a.pending_plan_at, a.revision`
)

// keyRow receives the columns of a key.
type keyRow struct {
	id, account, name  string
	primary            bool
	hash, restrictions []byte
	created            time.Time
	rotated, revoked   *time.Time
	revision           int64
}

func (r *keyRow) dest() []any {
	return []any{&r.id, &r.account, &r.name, &r.primary, &r.hash, &r.restrictions, &r.created, &r.rotated, &r.revoked, &r.revision}
}

func (r *keyRow) key() (auth.Key, error) {
	k := auth.Key{ID: r.id, AccountID: r.account, Name: r.name, Primary: r.primary, CreatedAt: r.created.UTC(), Revision: r.revision}
	if len(r.hash) != len(k.Hash) {
		return auth.Key{}, fmt.Errorf("postgres: key %q: the stored hash has %d bytes", r.id, len(r.hash))
	}
	copy(k.Hash[:], r.hash)
	if err := decodeRestrictions(r.restrictions, &k.Restrictions); err != nil {
		return auth.Key{}, fmt.Errorf("postgres: key %q: %w", r.id, err)
	}
	if r.rotated != nil {
		k.RotatedAt = r.rotated.UTC()
	}
	if r.revoked != nil {
		k.RevokedAt = r.revoked.UTC()
	}
	return k, nil
}

// nullableKeyRow receives the columns of a key from an outer join, where they may all
// be NULL.
type nullableKeyRow struct {
	id, account, name  *string
	primary            *bool
	hash, restrictions []byte
	created            *time.Time
	rotated, revoked   *time.Time
	revision           *int64
}

func (n *nullableKeyRow) dest() []any {
	return []any{&n.id, &n.account, &n.name, &n.primary, &n.hash, &n.restrictions, &n.created, &n.rotated, &n.revoked, &n.revision}
}

// row returns the key's columns, and false if there is no key.
func (n *nullableKeyRow) row() (keyRow, bool) {
	if n.id == nil || n.account == nil || n.name == nil || n.primary == nil || n.created == nil || n.revision == nil {
		return keyRow{}, false
	}
	return keyRow{id: *n.id, account: *n.account, name: *n.name, primary: *n.primary, hash: n.hash,
		restrictions: n.restrictions, created: *n.created, rotated: n.rotated, revoked: n.revoked, revision: *n.revision}, true
}

// accountRow receives the columns of an account.
type accountRow struct {
	id, plan, state, pendingPlan    string
	restrictions                    []byte
	created                         time.Time
	stateChanged, anchor, pendingAt *time.Time
	revision                        int64
}

func (r *accountRow) dest() []any {
	return []any{&r.id, &r.plan, &r.restrictions, &r.created, &r.state, &r.stateChanged, &r.anchor, &r.pendingPlan, &r.pendingAt, &r.revision}
}

func (r *accountRow) account() (auth.Account, error) {
	a := auth.Account{ID: r.id, Plan: r.plan, CreatedAt: r.created.UTC(), State: auth.AccountState(r.state).OrActive(),
		StateChangedAt: timeOf(r.stateChanged), BillingAnchor: timeOf(r.anchor), PendingPlan: r.pendingPlan,
		PendingPlanAt: timeOf(r.pendingAt), Revision: r.revision}
	if err := decodeRestrictions(r.restrictions, &a.Restrictions); err != nil {
		return auth.Account{}, fmt.Errorf("postgres: account %q: %w", r.id, err)
	}
	return a, nil
}

// nullableAccountRow receives the columns of an account from an outer join, where they
// may all be NULL.
type nullableAccountRow struct {
	id, plan, state, pendingPlan    *string
	restrictions                    []byte
	created                         *time.Time
	stateChanged, anchor, pendingAt *time.Time
	revision                        *int64
}

func (n *nullableAccountRow) dest() []any {
	return []any{&n.id, &n.plan, &n.restrictions, &n.created, &n.state, &n.stateChanged, &n.anchor, &n.pendingPlan, &n.pendingAt, &n.revision}
}

// row returns the account's columns, and false if there is no account.
func (n *nullableAccountRow) row() (accountRow, bool) {
	if n.id == nil || n.plan == nil || n.state == nil || n.pendingPlan == nil || n.created == nil || n.revision == nil {
		return accountRow{}, false
	}
	return accountRow{id: *n.id, plan: *n.plan, state: *n.state, pendingPlan: *n.pendingPlan, restrictions: n.restrictions,
		created: *n.created, stateChanged: n.stateChanged, anchor: n.anchor, pendingAt: n.pendingAt, revision: *n.revision}, true
}

// timeOf returns *t in UTC, or the zero time for nil (SQL NULL).
func timeOf(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// encodeRestrictions returns restrictions as JSON, or nil (SQL NULL) for none. It is a
// json.RawMessage, which pgx sends as JSON in every exec mode (a []byte is bytea to
// the modes that do not ask the server the parameter's type: exec, simple_protocol).
func encodeRestrictions(r auth.Restrictions) (json.RawMessage, error) {
	if r.IsZero() {
		return nil, nil
	}
	return json.Marshal(r)
}

func decodeRestrictions(b []byte, r *auth.Restrictions) error {
	if b == nil {
		return nil
	}
	if err := json.Unmarshal(b, r); err != nil {
		return fmt.Errorf("stored restrictions: %w", err)
	}
	return nil
}

// nullTime returns t, or nil (SQL NULL) for the zero time.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// keyArgs returns the values of a key's columns, in the order of insertKeyColumns.
func keyArgs(k *auth.Key) ([]any, error) {
	r, err := encodeRestrictions(k.Restrictions)
	if err != nil {
		return nil, fmt.Errorf("postgres: key %q: %w", k.ID, err)
	}
	return []any{k.ID, k.AccountID, k.Name, k.Primary, k.Hash[:], r, k.CreatedAt, nullTime(k.RotatedAt), nullTime(k.RevokedAt)}, nil
}

// keyConflict names what a unique violation on the keys table was about.
func keyConflict(err error, k *auth.Key, accountID string) error {
	switch constraint(err) {
	case "tollgate_accounts_pkey":
		return fmt.Errorf("postgres: account %q: %w", accountID, store.ErrConflict)
	case "tollgate_keys_hash_key":
		return fmt.Errorf("postgres: key %q: the hash is taken: %w", k.ID, store.ErrConflict)
	}
	return fmt.Errorf("postgres: key %q: %w", k.ID, store.ErrConflict)
}

// CreateAccount stores an account with its primary key, with the journal entry ctx
// carries, in one statement.
func (s *Store) CreateAccount(ctx context.Context, account auth.Account, primary auth.Key) error {
	if err := ctx.Err(); err != nil {
		return wrapErr(ctx, err, "account %q", account.ID)
	}
	rec, err := journal.From(ctx)
	if err != nil {
		return err
	}
	if primary.AccountID != account.ID {
		return fmt.Errorf("postgres: key %q belongs to account %q, not %q: %w", primary.ID, primary.AccountID, account.ID, store.ErrConflict)
	}
	state := account.State.OrActive()
	if !state.Valid() {
		return fmt.Errorf("postgres: account %q: %q is not an account state: %w", account.ID, account.State, store.ErrInvalid)
	}
	ar, err := encodeRestrictions(account.Restrictions)
	if err != nil {
		return fmt.Errorf("postgres: account %q: %w", account.ID, err)
	}
	kargs, err := keyArgs(&primary)
	if err != nil {
		return err
	}
	args := append([]any{account.ID, account.Plan, ar, account.CreatedAt, string(state), nullTime(account.StateChangedAt),
		nullTime(account.BillingAnchor), account.PendingPlan, nullTime(account.PendingPlanAt)}, kargs[:1]...)
	args = append(args, kargs[2:]...)
	args = append(args, journalArgs(rec)...)
	_, err = s.db.Exec(ctx, `
		WITH a AS (
			INSERT INTO tollgate_accounts (id, plan, restrictions, created_at, state, state_changed_at, billing_anchor,
				pending_plan, pending_plan_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
			RETURNING id),
		`+journalWith(18, "a", "true")+`
		INSERT INTO tollgate_keys (id, account_id, name, is_primary, hash, restrictions, created_at, rotated_at, revoked_at)
		SELECT $10, a.id, $11, $12, $13, $14, $15, $16, $17 FROM a`, args...)
	if isCode(err, uniqueViolation) {
		return keyConflict(err, &primary, account.ID)
	}
	if err != nil {
		return wrapErr(ctx, err, "account %q", account.ID)
	}
	return nil
}

// Account returns the account with the given id.
func (s *Store) Account(ctx context.Context, id string) (auth.Account, error) {
	if err := ctx.Err(); err != nil {
		return auth.Account{}, wrapErr(ctx, err, "account %q", id)
	}
	var r accountRow
	if err := s.db.QueryRow(ctx, `SELECT `+accountColumns+` FROM tollgate_accounts a WHERE a.id = $1`, id).Scan(r.dest()...); err != nil {
		return auth.Account{}, wrapErr(ctx, err, "account %q", id)
	}
	return r.account()
}

// CreateKey stores a new key of an existing account, if limit lets it hold one more,
// with the journal entry ctx carries, in one statement: tollgate_create_key counts the
// account's keys and inserts the new one under a lock of the account (see migration
// 16).
func (s *Store) CreateKey(ctx context.Context, key auth.Key, limit auth.KeyLimit) error {
	if err := ctx.Err(); err != nil {
		return wrapErr(ctx, err, "key %q", key.ID)
	}
	rec, err := journal.From(ctx)
	if err != nil {
		return err
	}
	args, err := keyArgs(&key)
	if err != nil {
		return err
	}
	args = append(args, max(limit.Max, 0), limit.RevokedSince)
	var st int
	err = s.db.QueryRow(ctx, `
		WITH c AS (SELECT tollgate_create_key($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) AS st),
		`+journalWith(12, "c", "c.st = 0")+`
		SELECT st FROM c`, append(args, journalArgs(rec)...)...).Scan(&st)
	switch {
	case isCode(err, foreignKeyViolation) || err == nil && st == 1:
		return fmt.Errorf("postgres: account %q of key %q: %w", key.AccountID, key.ID, store.ErrNotFound)
	case isCode(err, uniqueViolation):
		return keyConflict(err, &key, key.AccountID)
	case err != nil:
		return wrapErr(ctx, err, "key %q", key.ID)
	case st == 2:
		return fmt.Errorf("account %q holds %d keys that count, the most it may: %w", key.AccountID, limit.Max, auth.ErrTooManyKeys)
	}
	return nil
}

// Key returns the key with the given id.
func (s *Store) Key(ctx context.Context, id string) (auth.Key, error) {
	if err := ctx.Err(); err != nil {
		return auth.Key{}, wrapErr(ctx, err, "key %q", id)
	}
	var r keyRow
	if err := s.db.QueryRow(ctx, `SELECT `+keyColumns+` FROM tollgate_keys k WHERE k.id = $1`, id).Scan(r.dest()...); err != nil {
		return auth.Key{}, wrapErr(ctx, err, "key %q", id)
	}
	return r.key()
}

// Keys returns a page of the keys of an account, in the order they were created, in
// one statement. The cursor's key is looked up in the account (by the index of its id),
// and the page read on the index of the account's keys in creation order.
func (s *Store) Keys(ctx context.Context, q auth.KeyQuery) (auth.KeyPage, error) {
	if err := ctx.Err(); err != nil {
		return auth.KeyPage{}, wrapErr(ctx, err, "keys of account %q", q.Account)
	}
	size, err := q.PageSize()
	if err != nil {
		return auth.KeyPage{}, err
	}
	// The account is joined so that an account without keys (there is none:
	// CreateAccount stores the primary key with it) and a missing account are told
	// apart; c.seq is NULL when the cursor names no key of the account.
	rows, err := s.db.Query(ctx, `
		WITH c AS (SELECT CASE WHEN $2 = '' THEN 0::bigint
			ELSE (SELECT x.seq FROM tollgate_keys x WHERE x.id = $2 AND x.account_id = $1) END AS seq)
		SELECT a.id IS NOT NULL, c.seq IS NOT NULL, `+keyColumns+`
		FROM c LEFT JOIN tollgate_accounts a ON a.id = $1
		LEFT JOIN LATERAL (
			SELECT * FROM tollgate_keys k WHERE k.account_id = a.id AND k.seq > c.seq ORDER BY k.seq LIMIT $3) k ON true
		ORDER BY k.seq`, q.Account, q.After, size+1)
	if err != nil {
		return auth.KeyPage{}, wrapErr(ctx, err, "keys of account %q", q.Account)
	}
	defer rows.Close()
	var (
		page          = auth.KeyPage{Keys: []auth.Key{}}
		found, cursor bool
	)
	for rows.Next() {
		var n nullableKeyRow
		if err := rows.Scan(append([]any{&found, &cursor}, n.dest()...)...); err != nil {
			return auth.KeyPage{}, wrapErr(ctx, err, "keys of account %q", q.Account)
		}
		r, ok := n.row()
		if !ok {
			continue // no key on the page
		}
		if len(page.Keys) == size {
			page.Next = page.Keys[size-1].ID
			continue
		}
		k, err := r.key()
		if err != nil {
			return auth.KeyPage{}, err
		}
		page.Keys = append(page.Keys, k)
	}
	if err := rows.Err(); err != nil {
		return auth.KeyPage{}, wrapErr(ctx, err, "keys of account %q", q.Account)
	}
	switch {
	case !found:
		return auth.KeyPage{}, fmt.Errorf("postgres: account %q: %w", q.Account, store.ErrNotFound)
	case !cursor:
		return auth.KeyPage{}, fmt.Errorf("%w: account %q has no key %q to list after", auth.ErrBadKeyQuery, q.Account, q.After)
	}
	return page, nil
}

// PruneKeys deletes the keys revoked before before, but primary keys, in one statement
// on the index of the keys a prune may delete.
func (s *Store) PruneKeys(ctx context.Context, before time.Time) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, wrapErr(ctx, err, "prune keys")
	}
	tag, err := s.db.Exec(ctx, `DELETE FROM tollgate_keys WHERE revoked_at IS NOT NULL AND revoked_at < $1 AND NOT is_primary`, before)
	if err != nil {
		return 0, wrapErr(ctx, err, "prune keys")
	}
	return tag.RowsAffected(), nil
}

// Resolve returns the key whose current hash is h, with its account.
func (s *Store) Resolve(ctx context.Context, h auth.Hash) (auth.Key, auth.Account, error) {
	if err := ctx.Err(); err != nil {
		return auth.Key{}, auth.Account{}, wrapErr(ctx, err, "key hash %.8s", h)
	}
	var kr keyRow
	var ar accountRow
	err := s.db.QueryRow(ctx, `
		SELECT `+keyColumns+`, `+accountColumns+`
		FROM tollgate_keys k JOIN tollgate_accounts a ON a.id = k.account_id
		WHERE k.hash = $1`, h[:]).Scan(append(kr.dest(), ar.dest()...)...)
	if err != nil {
		return auth.Key{}, auth.Account{}, wrapErr(ctx, err, "key hash %.8s", h)
	}
	k, err := kr.key()
	if err != nil {
		return auth.Key{}, auth.Account{}, err
	}
	a, err := ar.account()
	if err != nil {
		return auth.Key{}, auth.Account{}, err
	}
	return k, a, nil
}

// RotateKey replaces the hash of a key (that still has revision rev, unless rev is
// [auth.AnyRevision]), with the journal entry ctx carries, in one statement.
func (s *Store) RotateKey(ctx context.Context, id string, rev int64, h auth.Hash, at time.Time) (auth.Key, error) {
	if err := ctx.Err(); err != nil {
		return auth.Key{}, wrapErr(ctx, err, "key %q", id)
	}
	rec, err := journal.From(ctx)
	if err != nil {
		return auth.Key{}, err
	}
	// old reads the key as of the statement's snapshot, to tell why nothing was
	// updated; k updates it unless it is revoked or changed (re-checked on the latest
	// version).
	var (
		exists, revoked bool
		revision        *int64
		n               nullableKeyRow
	)
	err = s.db.QueryRow(ctx, `
		WITH old AS (SELECT k.id, k.revoked_at IS NOT NULL AS revoked, k.revision FROM tollgate_keys k WHERE k.id = $1),
		k AS (
			UPDATE tollgate_keys SET hash = $2, rotated_at = $3, revision = revision + 1
			WHERE id = $1 AND revoked_at IS NULL AND ($4::bigint < 0 OR revision = $4::bigint)
			RETURNING *),
		`+journalWith(5, "k", "true")+`
		SELECT old.id IS NOT NULL, coalesce(old.revoked, false), old.revision, `+keyColumns+`
		FROM (SELECT 1) one LEFT JOIN old ON true LEFT JOIN k ON true`, append([]any{id, h[:], at, rev}, journalArgs(rec)...)...).
		Scan(append([]any{&exists, &revoked, &revision}, n.dest()...)...)
	if isCode(err, uniqueViolation) {
		return auth.Key{}, fmt.Errorf("postgres: key %q: the new hash is taken: %w", id, store.ErrConflict)
	}
	if err != nil {
		return auth.Key{}, wrapErr(ctx, err, "key %q", id)
	}
	r, updated := n.row()
	if !updated && exists && revoked {
		return auth.Key{}, fmt.Errorf("postgres: key %q is revoked: %w", id, store.ErrConflict)
	}
	return changedKey(id, rev, r, updated, exists, revision)
}

// RevokeKey marks a key revoked (if it still has revision rev, unless rev is
// [auth.AnyRevision]), keeping the first revocation's moment, with the journal entry
// ctx carries, in one statement.
func (s *Store) RevokeKey(ctx context.Context, id string, rev int64, at time.Time) (auth.Key, error) {
	if err := ctx.Err(); err != nil {
		return auth.Key{}, wrapErr(ctx, err, "key %q", id)
	}
	rec, err := journal.From(ctx)
	if err != nil {
		return auth.Key{}, err
	}
	// As in RotateKey, old tells a missing key from a changed one.
	var (
		exists   bool
		revision *int64
		n        nullableKeyRow
	)
	err = s.db.QueryRow(ctx, `
		WITH old AS (SELECT k.id, k.revision FROM tollgate_keys k WHERE k.id = $1),
		k AS (
			UPDATE tollgate_keys k SET revoked_at = coalesce(k.revoked_at, $2),
				revision = k.revision + CASE WHEN k.revoked_at IS NULL THEN 1 ELSE 0 END
			WHERE k.id = $1 AND ($3::bigint < 0 OR k.revision = $3::bigint)
			RETURNING *),
		`+journalWith(4, "k", "true")+`
		SELECT old.id IS NOT NULL, old.revision, `+keyColumns+`
		FROM (SELECT 1) one LEFT JOIN old ON true LEFT JOIN k ON true`, append([]any{id, at, rev}, journalArgs(rec)...)...).
		Scan(append([]any{&exists, &revision}, n.dest()...)...)
	if err != nil {
		return auth.Key{}, wrapErr(ctx, err, "key %q", id)
	}
	r, updated := n.row()
	return changedKey(id, rev, r, updated, exists, revision)
}

// changedKey is the result of a statement that changed key id if it still had
// revision rev: the key r as updated, or why nothing was: no such key (exists false),
// or a change since rev (see changed).
func changedKey(id string, rev int64, r keyRow, updated, exists bool, revision *int64) (auth.Key, error) {
	switch {
	case updated:
		return r.key()
	case !exists:
		return auth.Key{}, fmt.Errorf("postgres: key %q: %w", id, store.ErrNotFound)
	}
	return auth.Key{}, changed(id, rev, revision)
}

// changed is the conflict of a change decided on revision rev of a key that, as the
// statement's snapshot read it, is at revision now (nil if unknown). When the snapshot
// saw rev, the key was changed by a statement that committed while this one waited
// for it: the snapshot was taken before, while the update re-checks its condition on
// the row that statement left (READ COMMITTED).
func changed(id string, rev int64, now *int64) error {
	if now != nil && *now != rev {
		return fmt.Errorf("postgres: key %q changed since revision %d (it is at %d): %w", id, rev, *now, store.ErrConflict)
	}
	return fmt.Errorf("postgres: key %q changed since revision %d, by a change that committed while this one waited for it: %w", id, rev, store.ErrConflict)
}

// CheckKey reports whether a key is still live (see [driver.KeyChecker]), in one
// statement.
func (s *Store) CheckKey(ctx context.Context, c driver.KeyCheck) (driver.KeyState, error) {
	if err := ctx.Err(); err != nil {
		return 0, wrapErr(ctx, err, "key %q of account %q", c.KeyID, c.Account)
	}
	if s.admits != nil {
		// As a step that checks the key and nothing else: concurrent checks and steps
		// of the account share one statement (a busy account's refusals each check a
		// cached key).
		p := &admitParams{request: uuidArg(newRequestID()), keyAccount: &c.Account, keyID: &c.KeyID, keyHash: checkHash(&c)}
		row, err := s.admits.Do(ctx, c.Account, p)
		if err != nil {
			return 0, wrapErr(ctx, err, "key %q of account %q", c.KeyID, c.Account)
		}
		if row.keyState == nil {
			return 0, fmt.Errorf("postgres: the check of key %q of account %q answered no state", c.KeyID, c.Account)
		}
		return driver.KeyState(*row.keyState), nil
	}
	states, err := s.keyStates(ctx, c.Account, []string{c.KeyID}, [][]byte{checkHash(&c)})
	if err != nil {
		return 0, wrapErr(ctx, err, "key %q of account %q", c.KeyID, c.Account)
	}
	return driver.KeyState(states[0]), nil
}

// newRequestID returns a random request id, for a key check that belongs to no call.
func newRequestID() [16]byte {
	var id [16]byte
	rand.Read(id[:])
	return id
}

// keyStates returns the states of key checks of account (key ids and p_hash
// arguments, see checkHash), in their order: one statement, tollgate_key_states.
func (s *Store) keyStates(ctx context.Context, account string, ids []string, hashes [][]byte) ([]int, error) {
	rows, err := s.db.Query(ctx, `SELECT k.state FROM tollgate_key_states($1, $2::text[], $3::bytea[]) k ORDER BY k.i`, account, ids, hashes)
	if err != nil {
		return nil, err
	}
	return scanRows(rows, len(ids), func(v *int) []any { return []any{v} })
}

// checkHash is the p_hash argument of tollgate_key_state for a key check: the key's
// hash followed by its revision and its account's, 8 bytes each in big-endian order
// (see migrations 7 and 20).
func checkHash(c *driver.KeyCheck) []byte {
	b := make([]byte, 0, len(c.Hash)+16)
	b = append(b, c.Hash[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(c.Revision))
	return binary.BigEndian.AppendUint64(b, uint64(c.AccountRevision))
}

// UpdateKey replaces the name and restrictions of a key that still has u.Revision,
// with the journal entry ctx carries, in one statement, as RotateKey does.
func (s *Store) UpdateKey(ctx context.Context, u auth.KeyUpdate) (auth.Key, error) {
	if err := ctx.Err(); err != nil {
		return auth.Key{}, wrapErr(ctx, err, "key %q", u.ID)
	}
	rec, err := journal.From(ctx)
	if err != nil {
		return auth.Key{}, err
	}
	if err := store.CheckText("postgres: key name", u.Name); err != nil {
		return auth.Key{}, err
	}
	r, err := encodeRestrictions(u.Restrictions)
	if err != nil {
		return auth.Key{}, fmt.Errorf("postgres: key %q: %w", u.ID, err)
	}
	// old reads the key as of the statement's snapshot, to tell why nothing was
	// updated; k updates it unless it is revoked or changed (re-checked on the latest
	// version).
	var (
		exists, revoked bool
		revision        *int64
		n               nullableKeyRow
	)
	err = s.db.QueryRow(ctx, `
		WITH old AS (SELECT k.id, k.revoked_at IS NOT NULL AS revoked, k.revision FROM tollgate_keys k WHERE k.id = $1),
		k AS (
			UPDATE tollgate_keys SET name = $2, restrictions = $3, revision = revision + 1
			WHERE id = $1 AND revoked_at IS NULL AND revision = $4
			RETURNING *),
		`+journalWith(5, "k", "true")+`
		SELECT old.id IS NOT NULL, coalesce(old.revoked, false), old.revision, `+keyColumns+`
		FROM (SELECT 1) one LEFT JOIN old ON true LEFT JOIN k ON true`, append([]any{u.ID, u.Name, r, u.Revision}, journalArgs(rec)...)...).
		Scan(append([]any{&exists, &revoked, &revision}, n.dest()...)...)
	if err != nil {
		return auth.Key{}, wrapErr(ctx, err, "key %q", u.ID)
	}
	row, updated := n.row()
	switch {
	case updated:
		return row.key()
	case !exists:
		return auth.Key{}, fmt.Errorf("postgres: key %q: %w", u.ID, store.ErrNotFound)
	case revoked:
		return auth.Key{}, fmt.Errorf("postgres: key %q is revoked: %w", u.ID, store.ErrConflict)
	}
	return auth.Key{}, changed(u.ID, u.Revision, revision)
}

// ExpiringKeys returns a page of the expiries of keys in q's window (see
// [auth.KeyExpiries]), in one statement: the keys of the window by their own expiry
// (tollgate_keys_by_expiry), and the primary keys of the accounts of the window that
// expire with them (tollgate_accounts_by_expiry), each read in the listing's order,
// then merged. The expiries are the columns that migration 27's trigger keeps from
// the restrictions, to the microsecond.
func (s *Store) ExpiringKeys(ctx context.Context, q auth.ExpiryQuery) (auth.ExpiryPage, error) {
	if err := ctx.Err(); err != nil {
		return auth.ExpiryPage{}, wrapErr(ctx, err, "expiring keys")
	}
	q, size, err := q.Check()
	if err != nil {
		return auth.ExpiryPage{}, err
	}
	after := q.After
	if after.IsZero() {
		after.At = q.From
	}
	rows, err := s.db.Query(ctx, `
		SELECT id, account_id, name, is_primary, hash, restrictions, created_at, rotated_at, revoked_at, revision, e
		FROM (
			(SELECT `+keyColumns+`, k.expires_at AS e FROM tollgate_keys k
			WHERE k.expires_at > $1 AND k.expires_at <= $2 AND (k.expires_at, k.id COLLATE "C") > ($3, $4)
				AND (k.revoked_at IS NULL OR k.revoked_at > k.expires_at)
				AND NOT (k.is_primary AND EXISTS (
					SELECT 1 FROM tollgate_accounts a WHERE a.id = k.account_id AND a.expires_at < k.expires_at))
			ORDER BY k.expires_at, k.id COLLATE "C" LIMIT $5)
			UNION ALL
			(SELECT `+keyColumns+`, a.expires_at AS e FROM tollgate_accounts a
			JOIN tollgate_keys k ON k.account_id = a.id AND k.is_primary
			WHERE a.expires_at > $1 AND a.expires_at <= $2 AND (a.expires_at, k.id COLLATE "C") > ($3, $4)
				AND (k.expires_at IS NULL OR k.expires_at > a.expires_at)
				AND (k.revoked_at IS NULL OR k.revoked_at > a.expires_at)
			ORDER BY a.expires_at, k.id COLLATE "C" LIMIT $5)
		) x
		ORDER BY e, id COLLATE "C" LIMIT $5`, q.From, q.To, after.At, after.Key, size+1)
	if err != nil {
		return auth.ExpiryPage{}, wrapErr(ctx, err, "expiring keys")
	}
	defer rows.Close()
	page := auth.ExpiryPage{Expiries: []auth.Expiry{}}
	for rows.Next() {
		var r keyRow
		var e time.Time
		if err := rows.Scan(append(r.dest(), &e)...); err != nil {
			return auth.ExpiryPage{}, wrapErr(ctx, err, "expiring keys")
		}
		if len(page.Expiries) == size {
			last := page.Expiries[size-1]
			page.Next = auth.ExpiryCursor{At: last.At, Key: last.Key.ID}
			break
		}
		k, err := r.key()
		if err != nil {
			return auth.ExpiryPage{}, err
		}
		page.Expiries = append(page.Expiries, auth.Expiry{Key: k, At: e.UTC()})
	}
	if err := rows.Err(); err != nil {
		return auth.ExpiryPage{}, wrapErr(ctx, err, "expiring keys")
	}
	return page, nil
}
