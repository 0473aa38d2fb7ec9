package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/store"
)

// SessionStore is the PostgreSQL [auth.SessionStore]: the ids of the sessions ended
// before their expiry, in the table tollgate_ended_sessions, shared by every instance
// on the database. SessionEnded is one lookup by primary key; EndSession is one
// statement that also deletes the rows whose expiry has passed.
//
// It holds no state besides its DB and is safe for concurrent use when its DB is.
// Create it with [NewSessionStore], after [Migrate] has run.
type SessionStore struct {
	db DB
}

// Interface guard.
var _ auth.SessionStore = (*SessionStore)(nil)

// NewSessionStore returns a SessionStore on db. It does not touch the database: run
// [Migrate] first.
func NewSessionStore(db DB) (*SessionStore, error) {
	if db == nil {
		return nil, errors.New("postgres: NewSessionStore needs a DB (a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx)")
	}
	return &SessionStore{db: db}, nil
}

// EndSession records that the session id is ended until expires, and deletes the
// records whose expiry is not after now, in one statement.
func (s *SessionStore) EndSession(ctx context.Context, id string, expires, now time.Time) error {
	if err := store.CheckSessionID(id); err != nil {
		return err
	}
	// The record of id itself is left to the INSERT, which may only lengthen it: one
	// statement must not both delete and update a row.
	_, err := s.db.Exec(ctx, `WITH gone AS (
			DELETE FROM tollgate_ended_sessions WHERE expires <= $3 AND id <> $1
		)
		INSERT INTO tollgate_ended_sessions (id, expires)
		SELECT $1, $2 WHERE $2 > $3
		ON CONFLICT (id) DO UPDATE SET expires = GREATEST(tollgate_ended_sessions.expires, EXCLUDED.expires)`,
		id, expires, now)
	if err != nil {
		return wrapErr(ctx, err, "ending session %q", id)
	}
	return nil
}

// SessionEnded reports whether the session id was ended.
func (s *SessionStore) SessionEnded(ctx context.Context, id string) (bool, error) {
	if err := store.CheckSessionID(id); err != nil {
		return false, err
	}
	var ended bool
	err := s.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM tollgate_ended_sessions WHERE id = $1)`, id).Scan(&ended)
	if err != nil {
		return false, wrapErr(ctx, err, "reading session %q", id)
	}
	return ended, nil
}
