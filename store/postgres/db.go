package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DB is the part of pgx that the store uses: a *pgxpool.Pool, a *pgx.Conn and a pgx.Tx
// all satisfy it.
//
// Give [New] a pool in production: it is safe for concurrent use and reconnects after
// an outage. A *pgx.Conn is not safe for concurrent use, so a Store on one connection
// must be used by one goroutine at a time. A Store on a pgx.Tx runs every call inside
// that transaction (its admissions and settlements then commit, and their locks are
// released, only when the host commits it).
//
// [Migrate] needs Begin; the store's other methods use Exec, Query and QueryRow, one
// call per method.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Interface guards.
var (
	_ DB = (*pgxpool.Pool)(nil)
	_ DB = (*pgx.Conn)(nil)
	_ DB = pgx.Tx(nil)
)
