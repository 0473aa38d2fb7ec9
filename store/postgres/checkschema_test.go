package postgres_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate-dev/tollgate/store/postgres"
)

// TestCheckSchema: a schema never migrated is not set up, one that lacks a migration
// is outdated and names it, and a migrated one passes.
func TestCheckSchema(t *testing.T) {
	schema := newSchema(t)
	pool, err := pgxpool.NewWithConfig(t.Context(), poolConfig(t, schema, 2))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := postgres.CheckSchema(t.Context(), pool); !errors.Is(err, postgres.ErrNotSetUp) {
		t.Fatalf("a fresh schema: %v, want ErrNotSetUp", err)
	}
	if err := postgres.Migrate(t.Context(), pool); err != nil {
		t.Fatal(err)
	}
	if err := postgres.CheckSchema(t.Context(), pool); err != nil {
		t.Fatalf("a migrated schema: %v", err)
	}
	if _, err := pool.Exec(t.Context(), `DELETE FROM tollgate_schema_migrations WHERE version = $1`, postgres.SchemaVersion); err != nil {
		t.Fatal(err)
	}
	if err := postgres.CheckSchema(t.Context(), pool); !errors.Is(err, postgres.ErrSchemaOutdated) {
		t.Fatalf("a schema without its last migration: %v, want ErrSchemaOutdated", err)
	}
}
