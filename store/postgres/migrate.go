package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
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
const SchemaVersion = 38

// Migrate brings the schema that db's search_path selects (its first schema,
// current_schema()) to [SchemaVersion], applying the embedded migrations that it lacks, in
// order, each in a transaction of its own (so that an upgrade over several versions
// locks the tables of one at a time, and calls running meanwhile, which take the
// ledger and the reservations in either order, cannot deadlock with it; an upgrade cut
// short keeps the versions it applied). It records them in the table
// tollgate_schema_migrations, so running it again does nothing, and each transaction
// takes an advisory lock first, so that instances starting together apply each
// migration once: the others wait, then find it applied. Versions newer than this package knows (applied by a newer
// release) are left alone. The migrations learn which versions the run applies from
// the transaction's setting tollgate.migrate_applying (a migration whose data change
// depends on where the schema comes from reads it).
//
// Migrate lifts the statement timeout for its transaction (SET LOCAL statement_timeout
// = 0), so that neither a long migration nor the wait for another instance's is cut
// short by the pool's statement_timeout (or the role's): ctx is its only bound. In a
// host's transaction, the host's timeout is back once Migrate returns.
//
// Migrate is never called by [New]: the host runs it, at deployment or at start-up, with
// a role allowed to create tables and functions in the schema. db must support Begin
// (a pool, a connection, or a transaction, in which Migrate uses a savepoint and the
// lock is held until the host's transaction ends).
//
// Migrate creates no schema: the schema must exist. When search_path selects no schema
// that exists (or that the role may use), or the role lacks a privilege it needs there,
// Migrate returns an error wrapping [ErrNotSetUp] that says what to do, and not
// store.ErrUnavailable: a setup mistake is not an outage, and retrying does not fix it.
func Migrate(ctx context.Context, db DB) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	return migrate(ctx, db, ms)
}

// migrate applies the migrations ms that the schema lacks, as Migrate says: a first
// transaction creates the table of versions and learns which are missing, then each
// missing migration is applied and recorded in a transaction of its own, under the
// lock, if no other instance applied it meanwhile.
func migrate(ctx context.Context, db DB, ms []migration) error {
	var env setup
	var applying []string
	err := migrateStep(ctx, db, &env, func(tx pgx.Tx, applied map[int]bool) error {
		for _, m := range ms {
			if !applied[m.version] {
				applying = append(applying, strconv.Itoa(m.version))
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, m := range ms {
		if !slices.Contains(applying, strconv.Itoa(m.version)) {
			continue
		}
		err := migrateStep(ctx, db, &env, func(tx pgx.Tx, applied map[int]bool) error {
			if applied[m.version] { // by another instance, since the first step
				return nil
			}
			// The migrations this run applies, for those that change data depending on
			// where the schema comes from (version 23 reads it).
			if _, err := tx.Exec(ctx, `SELECT set_config('tollgate.migrate_applying', $1, true)`, strings.Join(applying, ",")); err != nil {
				return env.wrapErr(ctx, err, "migrate: note the versions to apply")
			}
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return env.wrapErr(ctx, err, "migrate: apply version %d (%s)", m.version, m.name)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO tollgate_schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
				return env.wrapErr(ctx, err, "migrate: record version %d", m.version)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// migrateStep runs f in a transaction of db that holds the schema's migration lock,
// with no statement timeout, after creating the table of versions if need be; f gets
// the versions applied. It commits if f returns nil.
func migrateStep(ctx context.Context, db DB, env *setup, f func(tx pgx.Tx, applied map[int]bool) error) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return wrapErr(ctx, err, "migrate: begin")
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // a no-op after Commit
	var timeout string
	if err := tx.QueryRow(ctx, `SELECT current_schema(), current_setting('search_path'), current_user, current_setting('statement_timeout')`).
		Scan(&env.schema, &env.searchPath, &env.user, &timeout); err != nil {
		return wrapErr(ctx, err, "migrate: read search_path")
	}
	if env.schema == nil {
		return env.noSchema()
	}
	// A migration, and the wait for another instance's, may outlast the sessions'
	// statement timeout: none for this transaction (SET LOCAL, which a pooler's server
	// session keeps nothing of), ctx bounds it.
	if _, err := tx.Exec(ctx, `SET LOCAL statement_timeout = 0`); err != nil {
		return env.wrapErr(ctx, err, "migrate: lift the statement timeout")
	}
	// The lock is per schema, so that deployments in other schemas do not wait; it is
	// taken before anything else, so that two instances never race to create the table.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('tollgate_migrate'), hashtext(coalesce(current_schema(), '')))`); err != nil {
		return env.wrapErr(ctx, err, "migrate: lock")
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS tollgate_schema_migrations (
		version integer NOT NULL PRIMARY KEY,
		name    text    NOT NULL)`); err != nil {
		return env.wrapErr(ctx, err, "migrate: create tollgate_schema_migrations")
	}
	applied := make(map[int]bool)
	rows, err := tx.Query(ctx, `SELECT version FROM tollgate_schema_migrations`)
	if err != nil {
		return env.wrapErr(ctx, err, "migrate: read applied versions")
	}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return env.wrapErr(ctx, err, "migrate: read applied versions")
		}
		applied[v] = true
	}
	if err := rows.Err(); err != nil {
		return env.wrapErr(ctx, err, "migrate: read applied versions")
	}
	if err := f(tx, applied); err != nil {
		return err
	}
	// In a host's transaction (a savepoint), the setting would outlive Migrate: the
	// host's statements get their timeout back.
	if _, err := tx.Exec(ctx, `SELECT set_config('statement_timeout', $1, true)`, timeout); err != nil {
		return env.wrapErr(ctx, err, "migrate: restore the statement timeout")
	}
	if err := tx.Commit(ctx); err != nil {
		return env.wrapErr(ctx, err, "migrate: commit")
	}
	return nil
}

// ErrNotSetUp reports that the database is not set up for [Migrate]: the session's
// search_path selects no schema that exists, or the role lacks a privilege Migrate needs
// in it. The error's message says what to do. It is the host's to fix, and retrying does
// not fix it, so it never wraps store.ErrUnavailable.
var ErrNotSetUp = errors.New("postgres: the database is not set up for the store")

// setup is what Migrate knows of the session it migrates in.
type setup struct {
	schema     *string // current_schema(): nil when search_path selects no usable schema
	searchPath string
	user       string
}

// noSchema is the error of a search_path that selects no schema: PostgreSQL's own is
// "no schema has been selected to create in" (SQLSTATE 3F000), at the first CREATE.
func (e setup) noSchema() error {
	name := strings.TrimSpace(strings.Split(e.searchPath, ",")[0])
	switch {
	case name == `"$user"` || name == "$user":
		name = e.user
	case len(name) > 1 && name[0] == '"' && name[len(name)-1] == '"':
		name = strings.ReplaceAll(name[1:len(name)-1], `""`, `"`)
	}
	if name == "" {
		name = "tollgate"
	}
	return fmt.Errorf("postgres: migrate: search_path is %q, and none of its schemas exists (or the role %q may not use it): "+
		"create the schema first (CREATE SCHEMA %s), or point search_path at a schema that exists: %w",
		e.searchPath, e.user, pgx.Identifier{name}.Sanitize(), ErrNotSetUp)
}

// wrapErr is the package's wrapErr, but for a missing schema or privilege, which it
// reports as the setup mistakes they are.
func (e setup) wrapErr(ctx context.Context, err error, format string, args ...any) error {
	switch {
	case isCode(err, invalidSchemaName): // the schema was dropped since Migrate looked
		return e.noSchema()
	case isCode(err, insufficientPrivilege):
		schema := pgx.Identifier{*e.schema}.Sanitize()
		return fmt.Errorf("postgres: %s: the role %q lacks a privilege Migrate needs in schema %s: "+
			"grant it CREATE on the schema (GRANT CREATE ON SCHEMA %s TO %s), or run Migrate as the owner "+
			"of the schema and its tables: %w: %w",
			fmt.Sprintf(format, args...), e.user, schema, schema, pgx.Identifier{e.user}.Sanitize(), ErrNotSetUp, err)
	}
	return wrapErr(ctx, err, format, args...)
}

// ErrSchemaOutdated reports that the schema lacks migrations this package needs: run
// [Migrate] (tollgate-server migrate) first.
var ErrSchemaOutdated = errors.New("postgres: the schema is not migrated to this release's version")

// CheckSchema reports whether the schema that db's search_path selects has every
// migration up to [SchemaVersion]: nil if it has, an error wrapping
// [ErrSchemaOutdated] that names the versions it lacks if not, and one wrapping
// [ErrNotSetUp] if no schema is selected or the store was never migrated there. It
// changes nothing, so an instance that may not migrate (its role cannot create tables)
// checks with it at start, after a deployment step ran Migrate.
func CheckSchema(ctx context.Context, db DB) error {
	var schema *string
	if err := db.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return wrapErr(ctx, err, "check schema: read search_path")
	}
	if schema == nil {
		return fmt.Errorf("%w: the search_path selects no schema that exists; create the schema and run the migrations", ErrNotSetUp)
	}
	var exists bool
	if err := db.QueryRow(ctx, `SELECT to_regclass('tollgate_schema_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return wrapErr(ctx, err, "check schema: find tollgate_schema_migrations")
	}
	if !exists {
		return fmt.Errorf("%w: schema %q has no migrations applied; run the migrations (tollgate-server migrate) first", ErrNotSetUp, *schema)
	}
	applied := map[int]bool{}
	rows, err := db.Query(ctx, `SELECT version FROM tollgate_schema_migrations`)
	if err != nil {
		return wrapErr(ctx, err, "check schema: read applied versions")
	}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return wrapErr(ctx, err, "check schema: read applied versions")
		}
		applied[v] = true
	}
	if err := rows.Err(); err != nil {
		return wrapErr(ctx, err, "check schema: read applied versions")
	}
	ms, err := migrations()
	if err != nil {
		return err
	}
	var missing []string
	for _, m := range ms {
		if !applied[m.version] {
			missing = append(missing, strconv.Itoa(m.version))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: schema %q lacks migrations %s of %d; run the migrations (tollgate-server migrate) first",
			ErrSchemaOutdated, *schema, strings.Join(missing, ", "), SchemaVersion)
	}
	return nil
}
