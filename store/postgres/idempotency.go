package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/idempotency"
)

// IdempotencyStore is the PostgreSQL [idempotency.Store]: the records of requests sent
// with an idempotency key, in the table tollgate_idempotency, shared by every instance
// on the database. A claim is one call of the function tollgate_idem_claim (which also
// deletes a few records past their expiry); marking, completing or abandoning a record
// is one statement.
//
// It holds no state besides its DB and is safe for concurrent use when its DB is.
// Create it with [NewIdempotencyStore], after [Migrate] has run.
type IdempotencyStore struct {
	db DB
}

// Interface guard.
var _ idempotency.Store = (*IdempotencyStore)(nil)

// NewIdempotencyStore returns an IdempotencyStore on db. It does not touch the
// database: run [Migrate] first.
func NewIdempotencyStore(db DB) (*IdempotencyStore, error) {
	if db == nil {
		return nil, errors.New("postgres: NewIdempotencyStore needs a DB (a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx)")
	}
	return &IdempotencyStore{db: db}, nil
}

// Claim claims the record of c.ID (see [idempotency.Store]).
func (s *IdempotencyStore) Claim(ctx context.Context, c idempotency.Claim) (idempotency.Record, error) {
	var (
		rec   idempotency.Record
		state int
		run   *[16]byte
	)
	err := s.db.QueryRow(ctx, `SELECT o_state, o_run, o_answer FROM tollgate_idem_claim($1, $2, $3, $4, $5, $6, $7)`,
		c.ID[:], c.Fingerprint[:], uuidArg(c.Run), uuidArg(c.Token),
		c.Now.UnixNano(), c.Lease.UnixNano(), c.Expires.UnixNano()).Scan(&state, &run, &rec.Answer)
	if err != nil {
		return idempotency.Record{}, wrapErr(ctx, err, "idempotency record %s", c.ID)
	}
	rec.State = idempotency.State(state)
	if run != nil {
		rec.Run = *run
	}
	return rec, nil
}

// Preview returns what a claim c would get, in one read that changes nothing (see
// [idempotency.Store]).
func (s *IdempotencyStore) Preview(ctx context.Context, c idempotency.Claim) (idempotency.Record, error) {
	var (
		st          idempotency.Stored
		fingerprint []byte
		run         [16]byte
	)
	err := s.db.QueryRow(ctx, `SELECT fingerprint, run, done, settling, lease, expires, answer FROM tollgate_idempotency WHERE id = $1`,
		c.ID[:]).Scan(&fingerprint, &run, &st.Done, &st.Settling, &st.Lease, &st.Expires, &st.Answer)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return (*idempotency.Stored)(nil).Preview(c), nil
	case err != nil:
		return idempotency.Record{}, wrapErr(ctx, err, "idempotency record %s", c.ID)
	}
	copy(st.Fingerprint[:], fingerprint)
	st.Run = run
	return st.Preview(c), nil
}

// MarkSettling marks a record its token holds, and that has not expired at now, as
// settling, in one statement. (The row lock it takes orders it with
// tollgate_idem_claim, which locks the row it decides on.)
func (s *IdempotencyStore) MarkSettling(ctx context.Context, id idempotency.ID, token idempotency.Token, now time.Time) error {
	tag, err := s.db.Exec(ctx, `UPDATE tollgate_idempotency SET settling = true WHERE id = $1 AND token = $2 AND NOT done AND expires > $3`,
		id[:], uuidArg(token), now.UnixNano())
	if err != nil {
		return wrapErr(ctx, err, "idempotency record %s", id)
	}
	if tag.RowsAffected() == 0 {
		return idempotency.ErrNotHeld
	}
	return nil
}

// Complete keeps the answer of a record its token holds, in one statement.
func (s *IdempotencyStore) Complete(ctx context.Context, id idempotency.ID, token idempotency.Token, answer []byte) error {
	if answer == nil {
		answer = []byte{}
	}
	_, err := s.db.Exec(ctx, `UPDATE tollgate_idempotency SET done = true, answer = $3 WHERE id = $1 AND token = $2 AND NOT done`,
		id[:], uuidArg(token), answer)
	if err != nil {
		return wrapErr(ctx, err, "idempotency record %s", id)
	}
	return nil
}

// Abandon forgets a record its token holds, unless it is marked settling, in one
// statement.
func (s *IdempotencyStore) Abandon(ctx context.Context, id idempotency.ID, token idempotency.Token) error {
	_, err := s.db.Exec(ctx, `DELETE FROM tollgate_idempotency WHERE id = $1 AND token = $2 AND NOT done AND NOT settling`,
		id[:], uuidArg(token))
	if err != nil {
		return wrapErr(ctx, err, "idempotency record %s", id)
	}
	return nil
}
