package postgres

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/journal"
)

// The journal of changes (migration 28): the statement of each write of the key store
// and of Adjust carries a WITH item that inserts the journal entry its context carries
// (journal.From) when the write makes its change, so that the change and its entry
// commit together; without an entry, the item inserts nothing.

// Interface guards.
var (
	_ journal.KeyStore = (*Store)(nil)
	_ journal.Ledger   = (*Store)(nil)
)

// journalWith is the WITH item, named j, that inserts the journal entry given as the
// parameters $n (its id, NULL for none), $n+1 (its time) and $n+2 (the change), once
// for each row of the WITH item from that holds cond: the row the write returns when
// it made its change. An entry whose id is taken is kept as it is.
func journalWith(n int, from, cond string) string {
	return fmt.Sprintf(`j AS (
			INSERT INTO tollgate_change_journal (id, at, change)
			SELECT $%d::text, $%d::timestamptz, $%d::bytea FROM %s WHERE %s AND $%[1]d::text IS NOT NULL
			ON CONFLICT (id) DO NOTHING)`, n, n+1, n+2, from, cond)
}

// journalArgs returns the parameters of journalWith for rec: NULLs for none.
func journalArgs(rec *journal.Entry) []any {
	if rec == nil {
		return []any{nil, nil, nil}
	}
	return []any{rec.ID, rec.At, rec.Change}
}

// Claim holds and returns the entries of the journal that a relay may publish (see
// [journal.Store]), in one statement that skips the entries another claim holds
// locked.
func (s *Store) Claim(ctx context.Context, before, now time.Time, lease time.Duration, limit int) ([]journal.Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, wrapErr(ctx, err, "journal")
	}
	if err := journal.CheckClaim(lease, limit); err != nil {
		return nil, err
	}
	rows, err := s.db.Query(ctx, `
		UPDATE tollgate_change_journal j SET claimed_until = $3
		FROM (SELECT id FROM tollgate_change_journal
		      WHERE at < $1 AND (claimed_until IS NULL OR claimed_until <= $2)
		      ORDER BY at, id LIMIT $4
		      FOR UPDATE SKIP LOCKED) c
		WHERE j.id = c.id
		RETURNING j.id, j.at, j.change`, before, now, now.Add(lease), limit)
	if err != nil {
		return nil, wrapErr(ctx, err, "journal")
	}
	es, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (journal.Entry, error) {
		var e journal.Entry
		err := row.Scan(&e.ID, &e.At, &e.Change)
		e.At = e.At.UTC()
		return e, err
	})
	if err != nil {
		return nil, wrapErr(ctx, err, "journal")
	}
	slices.SortFunc(es, func(a, b journal.Entry) int { return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.ID, b.ID)) })
	return es, nil
}

// Remove deletes entries of the journal (see [journal.Store]), in one statement.
func (s *Store) Remove(ctx context.Context, ids ...string) error {
	if err := ctx.Err(); err != nil {
		return wrapErr(ctx, err, "journal")
	}
	if len(ids) == 0 {
		return nil
	}
	if _, err := s.db.Exec(ctx, `DELETE FROM tollgate_change_journal WHERE id = ANY($1::text[])`, ids); err != nil {
		return wrapErr(ctx, err, "journal")
	}
	return nil
}
