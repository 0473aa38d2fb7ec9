package postgres

import (
	"context"
	"errors"
	"net/netip"
	"time"

	"github.com/tollgate-dev/tollgate/audit"
)

// AuditStore is the PostgreSQL [audit.Store]: the audit log, in the table
// tollgate_audit. Append is one INSERT of every entry (all or none, skipping the ids
// already stored); List is one
// SELECT on an index of (account, time, sequence), so a page costs the same however
// long the log; Prune is one DELETE.
//
// Like [Store], it holds no state besides its DB and is safe for concurrent use when
// its DB is. Create it with [NewAuditStore], after [Migrate] has run.
type AuditStore struct {
	db DB
}

// Interface guard.
var _ audit.Store = (*AuditStore)(nil)

// NewAuditStore returns an AuditStore on db. It does not touch the database: run
// [Migrate] first.
func NewAuditStore(db DB) (*AuditStore, error) {
	if db == nil {
		return nil, errors.New("postgres: NewAuditStore needs a DB (a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx)")
	}
	return &AuditStore{db: db}, nil
}

// Append stores entries in one statement, all or none.
func (s *AuditStore) Append(ctx context.Context, entries ...audit.Entry) error {
	if len(entries) == 0 {
		return nil
	}
	n := len(entries)
	var (
		ats                                    = make([]time.Time, n)
		actors, actions, accounts, targets, rs = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		befores, afters, addrs, ids            = make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n)
		credits                                = make([]int64, n)
	)
	for i, e := range entries {
		if err := e.Validate(); err != nil {
			return err
		}
		ats[i], actors[i], actions[i], accounts[i], targets[i], rs[i], credits[i] =
			e.At, e.Actor, string(e.Action), e.Account, e.Target, e.Reason, e.Credits
		if e.Before != nil {
			befores[i] = ptr(string(e.Before))
		}
		if e.After != nil {
			afters[i] = ptr(string(e.After))
		}
		if e.Addr.IsValid() {
			addrs[i] = ptr(e.Addr.WithZone("").String()) // inet holds no zone
		}
		if e.ID != "" {
			ids[i] = ptr(e.ID)
		}
	}
	// unnest keeps the arrays' order (WITH ORDINALITY makes it explicit), so Seq
	// increases in the order of entries. An id already stored, or twice in entries, is
	// skipped by the unique index tollgate_audit_by_id (a NULL id never conflicts); a
	// concurrent Append of the same id waits for this one, then skips it.
	_, err := s.db.Exec(ctx, `INSERT INTO tollgate_audit (at, actor, action, account_id, target, before, after, credits, addr, reason, id)
		SELECT at, actor, action, account_id, target, before::json, after::json, credits, addr::inet, reason, id
		FROM unnest($1::timestamptz[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[], $9::text[], $10::text[], $11::text[])
			WITH ORDINALITY AS e(at, actor, action, account_id, target, before, after, credits, addr, reason, id, n)
		ORDER BY n
		ON CONFLICT (id) DO NOTHING`,
		ats, actors, actions, accounts, targets, befores, afters, credits, addrs, rs, ids)
	if err != nil {
		return wrapErr(ctx, err, "audit: append %d entries for account %q", n, entries[0].Account)
	}
	return nil
}

// List returns the entries q selects, newest first, in one statement.
func (s *AuditStore) List(ctx context.Context, q audit.Query) (audit.Page, error) {
	limit, pos, after, err := audit.ParseQuery(q)
	if err != nil {
		return audit.Page{}, err
	}
	var from, to, posAt *time.Time
	if !q.From.IsZero() {
		from = &q.From
	}
	if !q.To.IsZero() {
		to = &q.To
	}
	if after {
		posAt = &pos.At
	}
	// A listing of one account is a plain equality, which the planner matches with
	// tollgate_audit_by_account; one of every account reads tollgate_audit_by_time.
	account := `account_id = $1`
	if q.Account == "" {
		account = `$1::text = ''`
	}
	sql := `SELECT seq, at, actor, action, account_id, target, before::text, after::text, credits, host(addr), reason, coalesce(id, '')
		FROM tollgate_audit
		WHERE ` + account + `
		  AND ($2::timestamptz IS NULL OR at >= $2) AND ($3::timestamptz IS NULL OR at < $3)
		  AND ($4::timestamptz IS NULL OR (at, seq) < ($4, $5))
		ORDER BY at DESC, seq DESC
		LIMIT $6`
	args := []any{q.Account, from, to, posAt, pos.Seq, limit + 1}
	rows, err := s.db.Query(ctx, sql, args...)
	if err != nil {
		return audit.Page{}, wrapErr(ctx, err, "audit: list account %q", q.Account)
	}
	var page audit.Page
	for rows.Next() {
		var (
			e                   audit.Entry
			action              string
			before, after, addr *string
		)
		if err := rows.Scan(&e.Seq, &e.At, &e.Actor, &action, &e.Account, &e.Target, &before, &after, &e.Credits, &addr, &e.Reason, &e.ID); err != nil {
			rows.Close()
			return audit.Page{}, wrapErr(ctx, err, "audit: list account %q", q.Account)
		}
		e.At, e.Action = e.At.UTC(), audit.Action(action)
		if before != nil {
			e.Before = []byte(*before)
		}
		if after != nil {
			e.After = []byte(*after)
		}
		if addr != nil {
			if e.Addr, err = netip.ParseAddr(*addr); err != nil {
				rows.Close()
				return audit.Page{}, wrapErr(ctx, err, "audit: list account %q: address %q", q.Account, *addr)
			}
		}
		page.Entries = append(page.Entries, e)
	}
	if err := rows.Err(); err != nil {
		return audit.Page{}, wrapErr(ctx, err, "audit: list account %q", q.Account)
	}
	if len(page.Entries) > limit {
		page.Entries = page.Entries[:limit]
		last := page.Entries[limit-1]
		page.Next = audit.Position{At: last.At, Seq: last.Seq}.Cursor()
	}
	return page, nil
}

// Prune deletes the entries before before, in one statement.
func (s *AuditStore) Prune(ctx context.Context, before time.Time) (int64, error) {
	tag, err := s.db.Exec(ctx, `DELETE FROM tollgate_audit WHERE at < $1`, before)
	if err != nil {
		return 0, wrapErr(ctx, err, "audit: prune before %s", before.Format(time.RFC3339Nano))
	}
	return tag.RowsAffected(), nil
}

// ptr returns a pointer to a copy of v.
func ptr[T any](v T) *T { return &v }
