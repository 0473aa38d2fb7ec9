package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// The migrations, applied in the order of their version: migrations/NNNN_name.sql.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// A migration is one versioned schema change.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations, oldest first.
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, e := range entries {
		name := strings.TrimSuffix(e.Name(), ".sql")
		num, label, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("postgres: migration file %q is not named NNNN_name.sql", e.Name())
		}
		b, err := migrationFiles.ReadFile(path.Join("migrations", e.Name()))
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: label, sql: string(b)})
	}
	slices.SortFunc(ms, func(a, b migration) int { return a.version - b.version })
	for i := 1; i < len(ms); i++ {
		if ms[i].version == ms[i-1].version {
			return nil, fmt.Errorf("postgres: two migrations have version %d", ms[i].version)
		}
	}
	return ms, nil
}

// SchemaVersion is the schema version this package's migrations bring a database to.
const SchemaVersion = 4

// Migrate brings the schema that db's search_path selects (its first schema,
// current_schema()) to [SchemaVersion], applying the embedded migrations that it lacks, in
// order, in one transaction. It records them in the table tollgate_schema_migrations, so
// running it again does nothing, and it takes a transaction-level advisory lock first,
// so that instances starting together apply each migration once: the others wait, then
// find nothing to do. Versions newer than this package knows (applied by a newer
// release) are left alone.
//
// Migrate is never called by [New]: the host runs it, at deployment or at start-up, with
// a role allowed to create tables and functions in the schema. db must support Begin
// (a pool, a connection, or a transaction, in which Migrate uses a savepoint and the
// lock is held until the host's transaction ends).
func Migrate(ctx context.Context, db DB) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return wrapErr(ctx, err, "migrate: begin")
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // a no-op after Commit
	// The lock is per schema, so that deployments in other schemas do not wait; it is
	// taken before anything else, so that two instances never race to create the table.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('tollgate_migrate'), hashtext(coalesce(current_schema(), '')))`); err != nil {
		return wrapErr(ctx, err, "migrate: lock")
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS tollgate_schema_migrations (
		version integer NOT NULL PRIMARY KEY,
		name    text    NOT NULL)`); err != nil {
		return wrapErr(ctx, err, "migrate: create tollgate_schema_migrations")
	}
	applied := make(map[int]bool)
	rows, err := tx.Query(ctx, `SELECT version FROM tollgate_schema_migrations`)
	if err != nil {
		return wrapErr(ctx, err, "migrate: read applied versions")
	}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return wrapErr(ctx, err, "migrate: read applied versions")
		}
		applied[v] = true
	}
	if err := rows.Err(); err != nil {
		return wrapErr(ctx, err, "migrate: read applied versions")
	}
	for _, m := range ms {
		if applied[m.version] {
			continue
		}
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			return wrapErr(ctx, err, "migrate: apply version %d (%s)", m.version, m.name)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO tollgate_schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
			return wrapErr(ctx, err, "migrate: record version %d", m.version)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return wrapErr(ctx, err, "migrate: commit")
	}
	return nil
}
