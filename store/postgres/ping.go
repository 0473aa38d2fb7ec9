package postgres

import (
	"context"

	"github.com/tollgate-dev/tollgate/health"
)

// Every store of the package answers health.Pinger.
var (
	_ health.Pinger = (*Store)(nil)
	_ health.Pinger = (*AuditStore)(nil)
	_ health.Pinger = (*IdempotencyStore)(nil)
	_ health.Pinger = (*OAuthStore)(nil)
	_ health.Pinger = (*SessionStore)(nil)
	_ health.Pinger = (*UsageStore)(nil)
	_ health.Pinger = (*WebhookStore)(nil)
)

// ping runs SELECT 1 on db: one round trip on a connection of the pool (opened if the
// pool has none), in the simple protocol (a statement without arguments), so that no
// prepared statement and no session state is involved and it works the same behind a
// pooler in transaction mode. It reads no table: a Store whose schema is missing still
// answers (Migrate reports that).
func ping(ctx context.Context, db DB) error {
	if _, err := db.Exec(ctx, "SELECT 1"); err != nil {
		return wrapErr(ctx, err, "ping")
	}
	return nil
}

// Ping returns nil when the database answers a query, and otherwise an error that
// wraps store.ErrUnavailable (see health.Pinger): a round trip of SELECT 1 on one of
// the pool's connections, which waits for one while all are taken.
func (s *Store) Ping(ctx context.Context) error { return ping(ctx, s.db) }

// Ping returns nil when the database answers a query, as [Store.Ping] does.
func (s *AuditStore) Ping(ctx context.Context) error { return ping(ctx, s.db) }

// Ping returns nil when the database answers a query, as [Store.Ping] does.
func (s *IdempotencyStore) Ping(ctx context.Context) error { return ping(ctx, s.db) }

// Ping returns nil when the database answers a query, as [Store.Ping] does.
func (s *OAuthStore) Ping(ctx context.Context) error { return ping(ctx, s.db) }

// Ping returns nil when the database answers a query, as [Store.Ping] does.
func (s *SessionStore) Ping(ctx context.Context) error { return ping(ctx, s.db) }

// Ping returns nil when the database answers a query, as [Store.Ping] does.
func (s *UsageStore) Ping(ctx context.Context) error { return ping(ctx, s.db) }

// Ping returns nil when the database answers a query, as [Store.Ping] does.
func (s *WebhookStore) Ping(ctx context.Context) error { return ping(ctx, s.db) }
