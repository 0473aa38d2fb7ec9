package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/journal"
	"github.com/tollgate-dev/tollgate/store"
)

// UpdateAccount replaces the mutable fields of an account that still has u.Revision
// and is not closed, with the journal entry ctx carries, in one statement, as UpdateKey
// does.
func (s *Store) UpdateAccount(ctx context.Context, u auth.AccountUpdate) (auth.Account, error) {
	if err := ctx.Err(); err != nil {
		return auth.Account{}, wrapErr(ctx, err, "account %q", u.ID)
	}
	rec, err := journal.From(ctx)
	if err != nil {
		return auth.Account{}, err
	}
	for _, f := range []struct{ what, value string }{{"plan", u.Plan}, {"pending plan", u.PendingPlan}} {
		if err := store.CheckText("postgres: "+f.what, f.value); err != nil {
			return auth.Account{}, err
		}
	}
	if !u.State.Valid() {
		return auth.Account{}, fmt.Errorf("postgres: account %q: %q is not an account state: %w", u.ID, u.State, store.ErrInvalid)
	}
	r, err := encodeRestrictions(u.Restrictions)
	if err != nil {
		return auth.Account{}, fmt.Errorf("postgres: account %q: %w", u.ID, err)
	}
	// old reads the account as of the statement's snapshot, to tell why nothing was
	// updated; a updates it unless it is closed or changed (re-checked on the latest
	// version).
	var (
		exists   bool
		state    *string
		revision *int64
		n        nullableAccountRow
	)
	err = s.db.QueryRow(ctx, `
		WITH old AS (SELECT a.id, a.state, a.revision FROM tollgate_accounts a WHERE a.id = $1),
		a AS (
			UPDATE tollgate_accounts SET plan = $2, restrictions = $3, state = $4, state_changed_at = $5,
				billing_anchor = $6, pending_plan = $7, pending_plan_at = $8, revision = revision + 1
			WHERE id = $1 AND state <> 'closed' AND revision = $9
			RETURNING *),
		`+journalWith(10, "a", "true")+`
		SELECT old.id IS NOT NULL, old.state, old.revision, `+accountColumns+`
		FROM (SELECT 1) one LEFT JOIN old ON true LEFT JOIN a ON true`,
		append([]any{u.ID, u.Plan, r, string(u.State), nullTime(u.StateChangedAt), nullTime(u.BillingAnchor), u.PendingPlan,
			nullTime(u.PendingPlanAt), u.Revision}, journalArgs(rec)...)...).
		Scan(append([]any{&exists, &state, &revision}, n.dest()...)...)
	if err != nil {
		return auth.Account{}, wrapErr(ctx, err, "account %q", u.ID)
	}
	row, updated := n.row()
	switch {
	case updated:
		return row.account()
	case !exists:
		return auth.Account{}, fmt.Errorf("postgres: account %q: %w", u.ID, store.ErrNotFound)
	case state != nil && *state == string(auth.AccountClosed):
		return auth.Account{}, fmt.Errorf("postgres: account %q: %w", u.ID, auth.ErrAccountClosed)
	case revision != nil && *revision != u.Revision:
		return auth.Account{}, fmt.Errorf("postgres: account %q is at revision %d, not %d: %w", u.ID, *revision, u.Revision, auth.ErrAccountChanged)
	}
	return auth.Account{}, fmt.Errorf("postgres: account %q changed since revision %d, by a change that committed while this one waited for it: %w",
		u.ID, u.Revision, auth.ErrAccountChanged)
}

// accountScan is the most accounts a page of Accounts examines, by default.
const accountScan = 5000

// Accounts returns a page of the accounts q selects, in the order of their ids, in one
// statement on the index of the ids in byte-wise order (tollgate_accounts_by_id, see
// migration 20). The cursor and the prefix bound the index range; the other filters are
// checked on the rows the range holds, of which a page examines at most accountScan
// (then, if the page is not full, its Next is the last id examined). A page examines
// no more rows than it returns, and one, when no other filter is set.
func (s *Store) Accounts(ctx context.Context, q auth.AccountQuery) (auth.AccountPage, error) {
	if err := ctx.Err(); err != nil {
		return auth.AccountPage{}, wrapErr(ctx, err, "accounts")
	}
	size, err := q.PageSize()
	if err != nil {
		return auth.AccountPage{}, err
	}
	scan := s.scan
	if scan <= 0 {
		scan = accountScan
	}
	var (
		args          []any
		ranged, where []string
	)
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if q.After != "" {
		ranged = append(ranged, `a.id COLLATE "C" > `+arg(q.After))
	}
	if q.IDPrefix != "" {
		// The ids that begin with the prefix are those from the prefix up to the
		// first string after all of them (byte-wise): no LIKE pattern, so nothing in
		// the prefix needs escaping.
		ranged = append(ranged, `a.id COLLATE "C" >= `+arg(q.IDPrefix))
		if end, ok := store.PrefixEnd(q.IDPrefix); ok {
			ranged = append(ranged, `a.id COLLATE "C" < `+arg(end))
		}
	}
	if q.Plan != "" {
		where = append(where, `a.plan = `+arg(q.Plan))
	}
	if q.State != "" {
		where = append(where, `a.state = `+arg(string(q.State)))
	}
	if !q.CreatedFrom.IsZero() {
		where = append(where, `a.created_at >= `+arg(q.CreatedFrom))
	}
	if !q.CreatedBefore.IsZero() {
		where = append(where, `a.created_at < `+arg(q.CreatedBefore))
	}
	rangeSQL := ""
	if len(ranged) > 0 {
		rangeSQL = ` WHERE ` + strings.Join(ranged, ` AND `)
	}
	const order = ` ORDER BY a.id COLLATE "C"`
	var sql string
	if len(where) == 0 {
		// Every row of the range is selected: the page is its first rows (and one more,
		// to tell whether a page follows), or its first scan rows.
		sql = `SELECT NULL::text, ` + accountColumns + ` FROM tollgate_accounts a` + rangeSQL + order + ` LIMIT ` + arg(min(size+1, scan))
	} else {
		// last is the scan-th id of the range, if there is one: the last a page that is
		// not full has examined. Both parts read the statement's one snapshot.
		sql = `SELECT b.last, ` + accountColumns + `
			FROM (SELECT (SELECT a.id FROM tollgate_accounts a` + rangeSQL + order + ` OFFSET ` + arg(scan-1) + ` LIMIT 1) AS last) b
			LEFT JOIN LATERAL (
				SELECT a.* FROM (SELECT * FROM tollgate_accounts a` + rangeSQL + order + ` LIMIT ` + arg(scan) + `) a
				WHERE ` + strings.Join(where, ` AND `) + order + ` LIMIT ` + arg(size+1) + `) a ON true` + order
	}
	rows, err := s.db.Query(ctx, sql, args...)
	if err != nil {
		return auth.AccountPage{}, wrapErr(ctx, err, "accounts")
	}
	defer rows.Close()
	var (
		page = auth.AccountPage{Accounts: []auth.Account{}}
		last *string
		more bool
	)
	for rows.Next() {
		var n nullableAccountRow
		if err := rows.Scan(append([]any{&last}, n.dest()...)...); err != nil {
			return auth.AccountPage{}, wrapErr(ctx, err, "accounts")
		}
		r, ok := n.row()
		if !ok {
			continue // no account on the page
		}
		if len(page.Accounts) == size {
			more = true
			continue
		}
		a, err := r.account()
		if err != nil {
			return auth.AccountPage{}, err
		}
		page.Accounts = append(page.Accounts, a)
	}
	if err := rows.Err(); err != nil {
		return auth.AccountPage{}, wrapErr(ctx, err, "accounts")
	}
	switch {
	case more:
		page.Next = page.Accounts[size-1].ID
	case last != nil:
		page.Next = *last
	case len(where) == 0 && len(page.Accounts) == scan:
		page.Next = page.Accounts[scan-1].ID
	}
	return page, nil
}

// DeleteAccount deletes a closed account and its keys, in one call of
// tollgate_delete_account (see migration 20), with the journal entry ctx carries, in
// one statement.
func (s *Store) DeleteAccount(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return wrapErr(ctx, err, "account %q", id)
	}
	rec, err := journal.From(ctx)
	if err != nil {
		return err
	}
	var st int
	if err := s.db.QueryRow(ctx, `
		WITH d AS (SELECT tollgate_delete_account($1) AS st),
		`+journalWith(2, "d", "d.st = 0")+`
		SELECT st FROM d`, append([]any{id}, journalArgs(rec)...)...).Scan(&st); err != nil {
		return wrapErr(ctx, err, "account %q", id)
	}
	switch st {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("postgres: account %q: %w", id, store.ErrNotFound)
	}
	return fmt.Errorf("postgres: account %q: %w", id, auth.ErrAccountNotClosed)
}
