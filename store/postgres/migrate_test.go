package postgres_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/idempotency"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/oauth/oauthstore"
	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/store/postgres"
	"github.com/tollgate-dev/tollgate/usage"
	"github.com/tollgate-dev/tollgate/webhook"
)

// emptyPool returns a pool on a fresh schema that has not been migrated.
func emptyPool(t *testing.T) (*pgxpool.Pool, string) {
	t.Helper()
	schema := newSchema(t)
	pool, err := pgxpool.NewWithConfig(context.Background(), poolConfig(t, schema, 16))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, schema
}

// tables returns the number of tables in schema.
func tables(t *testing.T, db postgres.DB, schema string) int {
	t.Helper()
	var n int
	err := db.QueryRow(t.Context(), `SELECT count(*) FROM information_schema.tables WHERE table_schema = $1`, schema).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// applied returns the versions recorded in tollgate_schema_migrations.
// allVersions returns the versions of the migration files, in order: what Migrate
// applies to an empty schema. The last is SchemaVersion. (Versions need not be
// contiguous: a branch may add a later migration before an earlier one is merged.)
func allVersions(t *testing.T) []int {
	t.Helper()
	files, err := os.ReadDir("migrations")
	if err != nil {
		t.Fatal(err)
	}
	var vs []int
	for _, f := range files {
		num, _, _ := strings.Cut(f.Name(), "_")
		v, err := strconv.Atoi(num)
		if err != nil {
			t.Fatalf("migration file %s: %v", f.Name(), err)
		}
		vs = append(vs, v)
	}
	slices.Sort(vs)
	if len(vs) == 0 || vs[len(vs)-1] != postgres.SchemaVersion {
		t.Fatalf("migration versions %v: the last is not SchemaVersion %d", vs, postgres.SchemaVersion)
	}
	return vs
}

func applied(t *testing.T, db postgres.DB) []int {
	t.Helper()
	rows, err := db.Query(t.Context(), `SELECT version FROM tollgate_schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

// TestMigrateConcurrentAndIdempotent starts eight instances' migrations at once on an
// empty schema, as a deployment's instances do at start-up: the advisory lock makes one
// of them apply each migration and the others find nothing to do. Running Migrate again
// changes nothing.
func TestMigrateConcurrentAndIdempotent(t *testing.T) {
	pool, schema := emptyPool(t)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = postgres.Migrate(t.Context(), pool) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Migrate #%d: %v", i, err)
		}
	}
	if got := applied(t, pool); !slices.Equal(got, allVersions(t)) {
		t.Fatalf("applied versions %v, want %v", got, allVersions(t))
	}
	n := tables(t, pool, schema)
	if err := postgres.Migrate(t.Context(), pool); err != nil {
		t.Fatalf("Migrate again: %v", err)
	}
	if got := applied(t, pool); !slices.Equal(got, allVersions(t)) {
		t.Errorf("applied versions after a second Migrate: %v", got)
	}
	if m := tables(t, pool, schema); m != n || n == 0 {
		t.Errorf("the schema has %d tables after the first Migrate and %d after the second", n, m)
	}

	// The migrated schema works.
	s, err := postgres.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	acct, key := fixture("acct")
	if err := s.CreateAccount(t.Context(), acct, key); err != nil {
		t.Fatal(err)
	}
}

// TestMigrateFromVersion2 upgrades a schema that a release with migrations 1 and 2
// brought up, with a code redeemed under version 2's function: Migrate applies only
// version 3, and replaying that code now revokes its approval in the store.
func TestMigrateFromVersion2(t *testing.T) {
	pool, _ := emptyPool(t)
	ctx := t.Context()
	for _, file := range []string{"migrations/0001_schema.sql", "migrations/0002_oauth.sql"} {
		sql, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, string(sql)); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE tollgate_schema_migrations (version integer NOT NULL PRIMARY KEY, name text NOT NULL);
		INSERT INTO tollgate_schema_migrations VALUES (1, 'schema'), (2, 'oauth')`); err != nil {
		t.Fatal(err)
	}
	s, err := postgres.NewOAuthStore(pool)
	if err != nil {
		t.Fatal(err)
	}
	a := oauthstore.Approval{ID: "apv", ClientID: "client", KeyID: "key", AccountID: "acct", Resource: "https://api.example.com/v1/mcp",
		Scopes: []string{"mcp"}, CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
	c := oauthstore.Code{Hash: oauthstore.HashSecret("tgac_code"), ApprovalID: a.ID, RedirectURI: "http://127.0.0.1/cb",
		Challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM", ExpiresAt: t0.Add(time.Minute)}
	if err := s.CreateApproval(ctx, a, c); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.RedeemCode(ctx, c.Hash, t0); err != nil {
		t.Fatalf("RedeemCode under version 2: %v", err)
	}

	if err := postgres.Migrate(ctx, pool); err != nil {
		t.Fatalf("Migrate from version 2: %v", err)
	}
	if got := applied(t, pool); !slices.Equal(got, allVersions(t)) {
		t.Fatalf("applied versions %v, want %v", got, allVersions(t))
	}
	_, got, err := s.RedeemCode(ctx, c.Hash, t0.Add(time.Second))
	if !errors.Is(err, store.ErrConflict) || !got.RevokedAt.Equal(t0.Add(time.Second)) {
		t.Errorf("replay after the upgrade: %v, approval revoked at %v; want store.ErrConflict and the approval revoked", err, got.RevokedAt)
	}
	if err := s.IssueTokens(ctx, a.ID, []oauthstore.Token{{Hash: oauthstore.HashSecret("tgat_x"), Kind: oauthstore.AccessToken, ExpiresAt: t0.Add(time.Hour)}}, t0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("IssueTokens after a replay: %v, want store.ErrNotFound (the approval is revoked)", err)
	}
}

// TestNewDoesNotMigrate checks that New touches nothing: a Store on an unmigrated
// schema creates no table, and its calls fail as "store unavailable", naming what they
// were about.
func TestNewDoesNotMigrate(t *testing.T) {
	pool, schema := emptyPool(t)
	s, err := postgres.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := tables(t, pool, schema); n != 0 {
		t.Fatalf("New created %d tables", n)
	}
	_, err = s.Key(t.Context(), "some-key")
	if !errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrNotFound) {
		t.Errorf("Key on an unmigrated schema: %v, want an error wrapping store.ErrUnavailable", err)
	}
	wantMessage(t, err, `postgres: key "some-key"`)
}

// TestMigrateInTransaction runs Migrate in a host's transaction (a pgx.Tx as the DB):
// it applies in a savepoint, and rolling the host's transaction back leaves nothing.
func TestMigrateInTransaction(t *testing.T) {
	pool, schema := emptyPool(t)
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if err := postgres.Migrate(t.Context(), tx); err != nil {
		t.Fatalf("Migrate in a transaction: %v", err)
	}
	if n := tables(t, tx, schema); n == 0 {
		t.Fatal("no tables inside the transaction after Migrate")
	}
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := tables(t, pool, schema); n != 0 {
		t.Errorf("%d tables after the host's transaction was rolled back", n)
	}
}

// TestNewOptions checks the constructor's validation.
func TestNewOptions(t *testing.T) {
	if _, err := postgres.New(nil, nil); err == nil {
		t.Error("New(nil) succeeded")
	}
	pool := newPool(t, 2)
	for _, bad := range []postgres.Options{{Shards: -1}, {Shards: postgres.MaxShards + 1}, {Batch: -1}} {
		if _, err := postgres.New(pool, &bad); err == nil {
			t.Errorf("New with %+v succeeded", bad)
		}
	}
	for _, good := range []*postgres.Options{nil, {}, {Shards: 1}, {Shards: postgres.MaxShards}, {Batch: 1}, {Batch: 64}} {
		if _, err := postgres.New(pool, good); err != nil {
			t.Errorf("New with %+v: %v", good, err)
		}
	}
	s, _ := postgres.New(pool, nil)
	for _, n := range []int{0, postgres.MaxShards + 1} {
		if err := s.SetShards(t.Context(), "any", n); err == nil {
			t.Errorf("SetShards(%d) succeeded", n)
		}
	}
	if err := s.SetShards(t.Context(), "ghost", 4); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("SetShards of an account without a balance: %v, want store.ErrNotFound", err)
	}
}

// fixture returns an account and its primary key, created at t0.
func fixture(id string) (auth.Account, auth.Key) {
	a := auth.Account{ID: id, Plan: "pro", CreatedAt: t0}
	k := auth.Key{ID: id + "-key", AccountID: id, Name: "primary", Primary: true, Hash: auth.HashKey(auth.NewKeyValue()), CreatedAt: t0}
	return a, k
}

// wantMessage reports an error unless err's message starts with prefix.
func wantMessage(t *testing.T, err error, prefix string) {
	t.Helper()
	if err == nil || len(err.Error()) < len(prefix) || err.Error()[:len(prefix)] != prefix {
		t.Errorf("error %v does not start with %q", err, prefix)
	}
}

// TestMigrateOpenReservations upgrades a schema of version 3 that holds reservations an
// earlier version left open, one settled and one refunded: Migrate marks the open ones
// expired, so that the first sweep gives their credits back, once, and leaves the
// others alone.
func TestMigrateOpenReservations(t *testing.T) {
	pool, _ := emptyPool(t)
	ctx := t.Context()
	for _, file := range []string{"migrations/0001_schema.sql", "migrations/0002_oauth.sql", "migrations/0003_oauth_replay.sql"} {
		sql, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, string(sql)); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE tollgate_schema_migrations (version integer NOT NULL PRIMARY KEY, name text NOT NULL);
		INSERT INTO tollgate_schema_migrations VALUES (1, 'schema'), (2, 'oauth'), (3, 'oauth_replay')`); err != nil {
		t.Fatal(err)
	}
	// Version 3's functions: an account of 100 credits, four reservations of 10, one
	// settled keeping its charge, one refunded, two left open.
	if _, err := pool.Exec(ctx, `SELECT tollgate_open('acct', 100, 100, $1, $2, 1)`, period.Start, period.End); err != nil {
		t.Fatal(err)
	}
	ids := []driver.RequestID{{1}, {2}, {3}, {4}}
	for _, id := range ids {
		if _, err := pool.Exec(ctx, `SELECT tollgate_reserve('acct', $1, 10, ARRAY['hash'], $2, $3, 100)`, [16]byte(id), period.Start, period.End); err != nil {
			t.Fatal(err)
		}
	}
	for i, refund := range []int64{0, 10} {
		if _, err := pool.Exec(ctx, `SELECT tollgate_settle('acct', $1, $2, ARRAY['hash'], $3, $4, 100)`, [16]byte(ids[i]), refund, period.Start, period.End); err != nil {
			t.Fatal(err)
		}
	}

	if err := postgres.Migrate(ctx, pool); err != nil {
		t.Fatalf("Migrate from version 3: %v", err)
	}
	s, err := postgres.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := s.Sweep(ctx, t0, 100); err != nil {
			t.Fatal(err)
		}
	}
	b, err := s.Balance(ctx, "acct", t0, period, 100)
	if err != nil || b.Remaining != 90 || b.Used != 10 {
		t.Errorf("after the upgrade and a sweep: %+v, %v; want 90 remaining and 10 used (the settled charge)", b, err)
	}
	for i, id := range ids {
		_, err := s.Settle(ctx, driver.Settlement{Account: "acct", Request: id, Period: period, Allowance: 100, Now: t0})
		if voided := errors.Is(err, driver.ErrVoided); voided != (i >= 2) || (!voided && err != nil) {
			t.Errorf("settling reservation %d after the upgrade: %v", i, err)
		}
	}
}

// TestMigrateSetupMistakes checks that Migrate reports a database that is not set up for
// it as the host's mistake (postgres.ErrNotSetUp), saying what to do, and never as an
// outage: a search_path whose schemas do not exist (PostgreSQL's "no schema has been
// selected to create in"), and a role that may use the schema but not create in it.
// Doing what the message says makes the next Migrate succeed.
func TestMigrateSetupMistakes(t *testing.T) {
	su, err := pgxpool.New(context.Background(), dsn(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(su.Close)
	exec := func(t *testing.T, sql string) {
		t.Helper()
		if _, err := su.Exec(context.Background(), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	wantSetupError := func(t *testing.T, err error, advice string) {
		t.Helper()
		if !errors.Is(err, postgres.ErrNotSetUp) || errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("Migrate: %v; want an error wrapping postgres.ErrNotSetUp and not store.ErrUnavailable", err)
		}
		if !strings.Contains(err.Error(), advice) {
			t.Errorf("Migrate: %v; want the advice %q", err, advice)
		}
	}

	for _, tt := range []struct {
		name       string
		searchPath func(schema string) string
	}{
		{"schema missing", func(s string) string { return s }},
		{"quoted schema missing, and the next one", func(s string) string { return `"` + s + `", ` + s + `_next` }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			schema := newSchema(t)
			quoted := pgx.Identifier{schema}.Sanitize()
			exec(t, "DROP SCHEMA "+quoted)
			cfg := poolConfig(t, schema, 2)
			cfg.ConnConfig.RuntimeParams["search_path"] = tt.searchPath(schema)
			pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)

			err = postgres.Migrate(t.Context(), pool)
			wantSetupError(t, err, "create the schema first (CREATE SCHEMA "+quoted+")")
			wantMessage(t, err, fmt.Sprintf("postgres: migrate: search_path is %q", tt.searchPath(schema)))

			exec(t, "CREATE SCHEMA "+quoted)
			if err := postgres.Migrate(t.Context(), pool); err != nil {
				t.Fatalf("Migrate once the schema exists: %v", err)
			}
			if got := applied(t, pool); !slices.Equal(got, allVersions(t)) {
				t.Errorf("applied versions %v, want %v", got, allVersions(t))
			}
		})
	}

	t.Run("no CREATE on the schema", func(t *testing.T) {
		role := "tollgate_test_" + strings.ToLower(rand.Text())
		quotedRole := pgx.Identifier{role}.Sanitize()
		exec(t, "CREATE ROLE "+quotedRole+" LOGIN")
		t.Cleanup(func() { exec(t, "DROP ROLE "+quotedRole) }) // after the schema, and what the role made in it, is dropped
		schema := newSchema(t)
		quoted := pgx.Identifier{schema}.Sanitize()
		exec(t, "GRANT USAGE ON SCHEMA "+quoted+" TO "+quotedRole)
		cfg := poolConfig(t, schema, 2)
		cfg.ConnConfig.User = role
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)

		err = postgres.Migrate(t.Context(), pool)
		wantSetupError(t, err, "GRANT CREATE ON SCHEMA "+quoted+" TO "+quotedRole)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "42501" {
			t.Errorf("Migrate: %v; want the server's error (SQLSTATE 42501) kept in the chain", err)
		}

		exec(t, "GRANT CREATE ON SCHEMA "+quoted+" TO "+quotedRole)
		if err := postgres.Migrate(t.Context(), pool); err != nil {
			t.Fatalf("Migrate once the role may create in the schema: %v", err)
		}
	})
}

// migrateTo brings an empty schema to version last, as a release whose last migration
// it was did: the migration files up to it, applied in order and recorded.
func migrateTo(t *testing.T, pool *pgxpool.Pool, last int) {
	t.Helper()
	ctx := t.Context()
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	var versions []string
	for _, file := range files {
		v, err := strconv.Atoi(strings.SplitN(filepath.Base(file), "_", 2)[0])
		if err != nil {
			t.Fatal(err)
		}
		if v > last {
			continue
		}
		sql, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, string(sql)); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		versions = append(versions, fmt.Sprintf("(%d, 'v%d')", v, v))
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE tollgate_schema_migrations (version integer NOT NULL PRIMARY KEY, name text NOT NULL);
		INSERT INTO tollgate_schema_migrations VALUES `+strings.Join(versions, ", ")); err != nil {
		t.Fatal(err)
	}
}

// TestMigrateUsageRollups upgrades a schema of version 10 that holds usage: version 11
// fills the narrowed tables from the full ones, so every query reads the same sums as
// before the upgrade, whichever table answers it.
func TestMigrateUsageRollups(t *testing.T) {
	pool, _ := emptyPool(t)
	ctx := t.Context()
	migrateTo(t, pool, 10)
	// Usage as version 10 kept it: full rows of two keys, two APIs and two channels.
	for _, table := range []string{"tollgate_usage_hour", "tollgate_usage_day"} {
		if _, err := pool.Exec(ctx, `INSERT INTO `+table+`
			SELECT 'acme', $1::timestamptz, k, a, c, 'ok', 2, 3, ARRAY[0, 1, 1]::bigint[], $1::timestamptz + interval '1 minute'
			FROM unnest(ARRAY['k1', 'k2']) k, unnest(ARRAY['echo', 'hash']) a, unnest(ARRAY['rest', 'mcp']) c`, t0.Truncate(24*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if err := postgres.Migrate(ctx, pool); err != nil {
		t.Fatalf("Migrate from version 10: %v", err)
	}
	s, err := postgres.NewUsageStore(pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range []usage.Resolution{usage.Hour, usage.Day} {
		for _, by := range []usage.Dimension{usage.ByAPI, usage.ByKey} {
			q, err := usage.Query{Account: "acme", From: t0.Truncate(24 * time.Hour), To: t0.Truncate(24 * time.Hour).Add(time.Hour),
				Interval: res, By: by}.Normalized()
			if err != nil {
				t.Fatal(err)
			}
			rows, err := s.Sum(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != 2 {
				t.Fatalf("%s by %s after the upgrade: %d rows, want 2: %+v", res, by, len(rows), rows)
			}
			for _, r := range rows {
				if r.Calls != 8 || r.Credits != 12 || r.Latency != (usage.Histogram{0, 4, 4}) {
					t.Errorf("%s by %s after the upgrade: %+v; want 8 calls, 12 credits, latency {0, 4, 4}", res, by, r)
				}
			}
		}
	}
}

// TestMigrateIdempotencySettling upgrades a schema of version 13 that holds idempotency
// records, one running and one done: version 14 keeps both as they were (the running
// one, unmarked, is taken over after its lease, under the taker's run id since version
// 17; the done one answers), and marks and claims then work as the store documents.
func TestMigrateIdempotencySettling(t *testing.T) {
	pool, _ := emptyPool(t)
	ctx := t.Context()
	migrateTo(t, pool, 13)
	s, err := postgres.NewIdempotencyStore(pool)
	if err != nil {
		t.Fatal(err)
	}
	claim := func(key string, now time.Time) (idempotency.Claim, idempotency.Record) {
		t.Helper()
		c := idempotency.Claim{ID: idempotency.NewID("acct", key), Now: now, Lease: now.Add(time.Minute), Expires: now.Add(time.Hour)}
		rand.Read(c.Run[:])
		rand.Read(c.Token[:])
		rec, err := s.Claim(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		return c, rec
	}
	running, _ := claim("running", t0)
	done, _ := claim("done", t0)
	if err := s.Complete(ctx, done.ID, done.Token, []byte("kept")); err != nil {
		t.Fatal(err)
	}

	if err := postgres.Migrate(ctx, pool); err != nil {
		t.Fatalf("Migrate from version 13: %v", err)
	}
	if got := applied(t, pool); !slices.Equal(got, allVersions(t)) {
		t.Fatalf("applied versions %v, want %v", got, allVersions(t))
	}
	later := t0.Add(2 * time.Minute)
	if taker, rec := claim("running", later); rec.State != idempotency.Claimed || rec.Run != taker.Run || rec.Run == running.Run {
		t.Errorf("the running record after its lease: %+v, want it taken over under the taker's run id %x", rec, taker.Run)
	}
	if _, rec := claim("done", later); rec.State != idempotency.Done || string(rec.Answer) != "kept" {
		t.Errorf("the done record: %+v, want its answer", rec)
	}
	if err := s.MarkSettling(ctx, done.ID, done.Token, later); !errors.Is(err, idempotency.ErrNotHeld) {
		t.Errorf("MarkSettling of the done record: %v, want ErrNotHeld", err)
	}
	fresh, _ := claim("fresh", later)
	if err := s.MarkSettling(ctx, fresh.ID, fresh.Token, later); err != nil {
		t.Fatal(err)
	}
	if _, rec := claim("fresh", later.Add(2*time.Minute)); rec.State != idempotency.AnswerLost || rec.Run != fresh.Run {
		t.Errorf("a marked record after its lease: %+v, want AnswerLost with its run id", rec)
	}
}

// A sqlStep is a statement of an earlier version's functions, with its arguments.
type sqlStep struct {
	sql  string
	args []any
}

// execSteps runs the steps in order.
func execSteps(t *testing.T, pool *pgxpool.Pool, steps []sqlStep) {
	t.Helper()
	for _, st := range steps {
		if _, err := pool.Exec(t.Context(), st.sql, st.args...); err != nil {
			t.Fatalf("%s: %v", st.sql, err)
		}
	}
}

// migrated migrates the schema of pool, at version from, and returns a Store on it.
func migrated(t *testing.T, pool *pgxpool.Pool, from int) *postgres.Store {
	t.Helper()
	if err := postgres.Migrate(t.Context(), pool); err != nil {
		t.Fatalf("Migrate from version %d: %v", from, err)
	}
	s, err := postgres.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestMigrateGrantLots upgrades a schema of version 18 that holds balances: version 19
// keeps each account's remaining credits exactly, and what the allowance does not
// explain becomes a grant that never lapses, which a renewal leaves.
func TestMigrateGrantLots(t *testing.T) {
	pool, _ := emptyPool(t)
	ctx := t.Context()
	migrateTo(t, pool, 18)
	now := t0.UnixNano()
	far := t0.Add(time.Hour).UnixNano()
	// Version 18's functions (those of the ledger as version 5 to 17 left them).
	execSteps(t, pool, []sqlStep{
		// plain: 100 of 100, 30 spent: the allowance explains the 70 left.
		{`SELECT tollgate_open('plain', 100, 100, $1, $2, 1)`, []any{period.Start, period.End}},
		{`SELECT tollgate_reserve('plain', $1, 30, ARRAY['hash'], $2, $3, 100, $4, $5)`, []any{[16]byte{1}, period.Start, period.End, now, far}},
		{`SELECT tollgate_settle('plain', $1, 0, NULL, $2, $3, 100, $4)`, []any{[16]byte{1}, period.Start, period.End, now}},
		// granted: 100 of 100, 50 granted, 20 spent: 50 above what the allowance explains.
		{`SELECT tollgate_open('granted', 100, 100, $1, $2, 1)`, []any{period.Start, period.End}},
		{`SELECT tollgate_adjust('granted', $1, 50, 'top-up', $2, $3, 100, $4, 9007199254740991)`, []any{[16]byte{2}, period.Start, period.End, now}},
		{`SELECT tollgate_reserve('granted', $1, 20, ARRAY['hash'], $2, $3, 100, $4, $5)`, []any{[16]byte{3}, period.Start, period.End, now, far}},
		{`SELECT tollgate_settle('granted', $1, 0, NULL, $2, $3, 100, $4)`, []any{[16]byte{3}, period.Start, period.End, now}},
		// sharded: opened with 300 over 3 shards on an allowance of 100.
		{`SELECT tollgate_open('sharded', 300, 100, $1, $2, 3)`, []any{period.Start, period.End}},
		// open: 40 granted, a reservation of 120 still open, more than the allowance.
		{`SELECT tollgate_open('open', 100, 100, $1, $2, 1)`, []any{period.Start, period.End}},
		{`SELECT tollgate_adjust('open', $1, 40, 'top-up', $2, $3, 100, $4, 9007199254740991)`, []any{[16]byte{4}, period.Start, period.End, now}},
		{`SELECT tollgate_reserve('open', $1, 120, ARRAY['hash'], $2, $3, 100, $4, $5)`, []any{[16]byte{5}, period.Start, period.End, now, far}},
	})
	s := migrated(t, pool, 18)
	next := driver.MonthOf(period.End)
	for _, c := range []struct {
		account                  string
		remaining, granted, used int64
		renewed                  int64
	}{
		{"plain", 70, 0, 30, 100},
		{"granted", 130, 50, 20, 150},
		{"sharded", 300, 200, 0, 300},
		{"open", 20, 20, 120, 140},
	} {
		b, err := s.Balance(ctx, c.account, t0, period, 100)
		if err != nil || b.Remaining != c.remaining || b.Granted != c.granted || b.Used != c.used || !b.GrantsLapse.IsZero() {
			t.Errorf("%s after the upgrade: %+v, %v; want %d remaining, %d of them granted (never lapsing), %d used",
				c.account, b, err, c.remaining, c.granted, c.used)
		}
		if c.account == "open" {
			// The reservation made before the upgrade gives back as if its refund had come
			// before it: the allowance explains 100 of the 140, the rest is a grant.
			b, err = s.Settle(ctx, driver.Settlement{Account: "open", Request: driver.RequestID{5}, Refund: 120, Period: period, Allowance: 100, Now: t0})
			if err != nil || b.Remaining != 140 || b.Granted != 40 || b.Used != 0 {
				t.Errorf("open: the refund of the reservation made before the upgrade: %+v, %v; want 140 remaining, 40 granted", b, err)
			}
		}
		b, err = s.Balance(ctx, c.account, next.Start, next, 100)
		if err != nil || b.Remaining != c.renewed || b.Granted != c.renewed-100 || b.Used != 0 {
			t.Errorf("%s at the next renewal: %+v, %v; want %d remaining, %d granted", c.account, b, err, c.renewed, c.renewed-100)
		}
	}
}

// TestMigrateAllowanceRevision upgrades a schema of version 21 that holds balances, one
// sharded, one with a reservation open: version 22 keeps each balance exactly, and
// every balance, at revision 0, takes the first change of the allowance made after the
// upgrade, counted from the allowance it holds. An instance of version 21 still calls
// the ledger during a rolling upgrade: its grant is made, and its change of the
// allowance adds its difference as before, the balance then holding the new plan's
// allowance, from which a later change counts.
func TestMigrateAllowanceRevision(t *testing.T) {
	pool, _ := emptyPool(t)
	ctx := t.Context()
	migrateTo(t, pool, 21)
	now := t0.UnixNano()
	far := t0.Add(time.Hour).UnixNano()
	// Version 21's functions.
	adjust21 := `SELECT tollgate_adjust($1, $2, $3, $4, 0, 'upgrade', $5, $6, $7, $8, 9007199254740991, 64)`
	execSteps(t, pool, []sqlStep{
		// plain: 100 of 100, 30 spent.
		{`SELECT tollgate_open('plain', 100, 100, $1, $2, 1)`, []any{period.Start, period.End}},
		{`SELECT tollgate_reserve('plain', $1, 30, ARRAY['hash'], $2, $3, 100, $4, $5)`, []any{[16]byte{1}, period.Start, period.End, now, far}},
		{`SELECT tollgate_settle('plain', $1, 0, NULL, $2, $3, 100, $4)`, []any{[16]byte{1}, period.Start, period.End, now}},
		// sharded: 300 of 300 over 3 shards, 40 held by an open reservation.
		{`SELECT tollgate_open('sharded', 300, 300, $1, $2, 3)`, []any{period.Start, period.End}},
		{`SELECT tollgate_reserve('sharded', $1, 40, ARRAY['hash'], $2, $3, 300, $4, $5)`, []any{[16]byte{2}, period.Start, period.End, now, far}},
		// changed: 100 of 100, raised by 900 by version 21 (a plan of 1000).
		{`SELECT tollgate_open('changed', 100, 100, $1, $2, 1)`, []any{period.Start, period.End}},
		{adjust21, []any{"changed", [16]byte{3}, 900, 1, period.Start, period.End, 1000, now}},
	})
	s := migrated(t, pool, 21)
	check := func(what string, b driver.Balance, err error, remaining, used, allowance int64) {
		t.Helper()
		if err != nil || b.Remaining != remaining || b.Used != used || b.Allowance != allowance || b.Period != period {
			t.Errorf("%s: %+v, %v; want %d remaining, %d used, an allowance of %d, in %v", what, b, err, remaining, used, allowance, period)
		}
	}
	for _, c := range []struct {
		account                    string
		remaining, used, allowance int64
	}{
		{"plain", 70, 30, 100},
		{"sharded", 260, 40, 300},
		{"changed", 1000, 0, 100}, // version 21 left the allowance it renewed to
	} {
		b, err := s.Balance(ctx, c.account, t0, period, c.allowance)
		check(c.account+" after the upgrade", b, err, c.remaining, c.used, c.allowance)
	}
	change := func(account string, id byte, to, revision int64) (driver.Balance, error) {
		return s.Adjust(ctx, driver.Adjustment{Account: account, Request: driver.RequestID{id}, Part: driver.PartAllowance,
			Revision: revision, Reason: "upgraded", Period: period, Allowance: to, Now: t0})
	}
	b, err := change("plain", 10, 1000, 1)
	check("plain raised to 1000 at revision 1", b, err, 970, 30, 1000)
	b, err = change("plain", 11, 100, 1)
	check("plain lowered at revision 1 again", b, err, 970, 30, 1000)
	b, err = change("sharded", 12, 100, 1)
	check("sharded lowered to 100", b, err, 60, 40, 100)
	b, err = s.Settle(ctx, driver.Settlement{Account: "sharded", Request: driver.RequestID{2}, Refund: 40, Period: period, Allowance: 100, Now: t0})
	check("sharded: the reservation made before the upgrade refunded", b, err, 100, 0, 100)

	// An instance of version 21: a grant, and a change of the allowance to 2000.
	for _, st := range []struct {
		amount, part, allowance int64
	}{{50, 0, 1000}, {1000, 1, 2000}} {
		if _, err := pool.Exec(ctx, adjust21, "plain", [16]byte{byte(20 + st.part)}, st.amount, st.part, period.Start, period.End, st.allowance, now); err != nil {
			t.Fatalf("version 21's adjustment after the upgrade: %v", err)
		}
	}
	b, err = s.Balance(ctx, "plain", t0, period, 2000)
	check("plain after version 21's grant and raise", b, err, 2020, 30, 2000)
	b, err = change("plain", 13, 100, 2)
	check("plain lowered to 100 at revision 2", b, err, 120, 30, 100) // 70 of the allowance, 50 granted
}

// TestMigrateGrantLotsOpenReservations upgrades a schema of version 18 whose accounts
// have reservations open (most on an allowance of 10 and a balance of 1010 before them): a
// reservation open at the upgrade to version 19 gives back as if its refund had come
// just before that upgrade, to the allowance what it explains and the rest to the lot
// that never lapses, whether it is refunded in part or in full, voided, or refunded
// after a renewal (the allowance's share is then lost, as for any refund after a
// renewal). No credit the upgrade made a grant lapses at the next renewal.
func TestMigrateGrantLotsOpenReservations(t *testing.T) {
	pool, _ := emptyPool(t)
	ctx := t.Context()
	migrateTo(t, pool, 18)
	next := driver.MonthOf(period.End)
	now, far := t0.UnixNano(), t0.Add(time.Hour)
	type reservation struct {
		amount  int64
		expires time.Time
	}
	cases := []struct {
		account            string
		balance, allowance int64
		shards             int
		open               []reservation
		// settle settles the reservations, in order, with these refunds (none: they are
		// voided at their expiry); at the next period's start when later.
		refunds []int64
		later   bool
		// What the balance is then, and at the next renewal.
		remaining, granted, used int64
		renewed                  int64
	}{
		{"refund", 1010, 10, 1, []reservation{{500, far}}, []int64{500}, false, 1010, 1000, 0, 1010},
		{"partial", 1010, 10, 1, []reservation{{500, far}}, []int64{100}, false, 610, 610, 400, 620},
		{"two", 1010, 10, 1, []reservation{{300, far}, {300, far}}, []int64{300, 300}, false, 1010, 1000, 0, 1010},
		{"kept", 1010, 10, 1, []reservation{{300, far}, {300, far}}, []int64{0, 300}, false, 710, 710, 300, 720},
		{"sharded", 1010, 10, 3, []reservation{{500, far}}, []int64{500}, false, 1010, 1000, 0, 1010},
		{"within", 1000, 1000, 1, []reservation{{500, far}}, []int64{500}, false, 1000, 0, 0, 1000},
		{"renewed", 1010, 10, 1, []reservation{{500, next.Start.Add(24 * time.Hour)}}, []int64{500}, true, 1010, 1000, 0, 1010},
		// Last: the sweep voids every reservation expired by far.
		{"void", 1010, 10, 1, []reservation{{500, far}}, nil, false, 1010, 1000, 0, 1010},
	}
	for _, c := range cases {
		if _, err := pool.Exec(ctx, `SELECT tollgate_open($1, $2, $3, $4, $5, $6)`, c.account, c.balance, c.allowance, period.Start, period.End, c.shards); err != nil {
			t.Fatal(err)
		}
		for i, r := range c.open {
			if _, err := pool.Exec(ctx, `SELECT tollgate_reserve($1, $2, $3, ARRAY['hash'], $4, $5, $6, $7, $8)`,
				c.account, [16]byte{byte(i + 1)}, r.amount, period.Start, period.End, c.allowance, now, r.expires.UnixNano()); err != nil {
				t.Fatal(err)
			}
		}
	}

	if err := postgres.Migrate(ctx, pool); err != nil {
		t.Fatalf("Migrate from version 18: %v", err)
	}
	s, err := postgres.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		at, p := t0, period
		if c.later {
			at, p = next.Start.Add(time.Hour), next
		}
		var b driver.Balance
		for i, refund := range c.refunds {
			b, err = s.Settle(ctx, driver.Settlement{Account: c.account, Request: driver.RequestID{byte(i + 1)}, Refund: refund,
				Uncount: []string{"hash"}, Period: p, Allowance: c.allowance, Now: at})
			if err != nil {
				t.Fatalf("%s: settling reservation %d: %v", c.account, i+1, err)
			}
		}
		if c.refunds == nil {
			at = far
			if n, err := s.Sweep(ctx, at, 100); err != nil || n == 0 {
				t.Fatalf("%s: Sweep: %d, %v", c.account, n, err)
			}
		}
		b, err = s.Balance(ctx, c.account, at, p, c.allowance)
		if err != nil || b.Remaining != c.remaining || b.Granted != c.granted || b.Used != c.used {
			t.Errorf("%s after the upgrade and the settlements: %+v, %v; want %d remaining, %d granted, %d used",
				c.account, b, err, c.remaining, c.granted, c.used)
		}
		b, err = s.Balance(ctx, c.account, next.Start.Add(2*time.Hour), next, c.allowance)
		if err != nil || b.Remaining != c.renewed || b.Granted != c.renewed-c.allowance {
			t.Errorf("%s at the next renewal: %+v, %v; want %d remaining, %d granted", c.account, b, err, c.renewed, c.renewed-c.allowance)
		}
	}
}

// TestMigrateWebhookShards upgrades a schema of version 25 that holds webhook
// endpoints with pending deliveries and a success: version 26 keeps each endpoint's
// count of pending deliveries and its last success (in its shards), says of its
// endpoints disabled before that nobody knows who disabled them, and an instance of
// version 25 still creates endpoints, which get their shards.
func TestMigrateWebhookShards(t *testing.T) {
	pool, _ := emptyPool(t)
	ctx := t.Context()
	migrateTo(t, pool, 25)
	ns := func(d time.Duration) int64 { return t0.Add(d).UnixNano() }
	create25 := `SELECT tollgate_webhook_create_endpoint($1, $2, 'https://example.com/', '{}', 'whsec_x', '', NULL, $3, $4, $5, 16)`
	steps := []sqlStep{
		{create25, []any{"ep-op", "", nil, "", ns(0)}},
		{create25, []any{"ep-a", "acme", ns(time.Minute), "disabled by the account holder", ns(0)}},
	}
	for i := range 3 {
		steps = append(steps, sqlStep{`SELECT tollgate_webhook_enqueue($1, 'key.rotated', 'acme', $2, '\x7b7d', -1, ARRAY['ep-op', 'ep-a'], $2, 10000)`,
			[]any{fmt.Sprint("m", i), ns(time.Duration(i) * time.Second)}})
	}
	steps = append(steps,
		sqlStep{`UPDATE tollgate_webhook_deliveries SET claim = 'c0' WHERE endpoint_id = 'ep-op' AND message_id = 'm0'`, nil},
		sqlStep{`SELECT tollgate_webhook_record('ep-op', 'm0', 'c0', 2::smallint, NULL, $1, 200, '')`, []any{ns(time.Hour)}})
	execSteps(t, pool, steps)
	if err := postgres.Migrate(ctx, pool); err != nil {
		t.Fatalf("Migrate from version 25: %v", err)
	}
	s, err := postgres.NewWebhookStore(pool, &postgres.WebhookOptions{MaxPending: 4})
	if err != nil {
		t.Fatal(err)
	}
	op, err := s.Endpoint(ctx, "ep-op")
	if err != nil || !op.LastDelivered.Equal(t0.Add(time.Hour)) || !op.Disabled.IsZero() {
		t.Errorf("the operator's endpoint after the upgrade: %+v, %v; want its last success at %v", op, err, t0.Add(time.Hour))
	}
	a, err := s.Endpoint(ctx, "ep-a")
	if err != nil || !a.Disabled.Equal(t0.Add(time.Minute)) || a.DisabledBy != "" || a.DisabledReason != "disabled by the account holder" {
		t.Errorf("the disabled endpoint after the upgrade: %+v, %v; want it disabled, by nobody known", a, err)
	}
	if n, err := s.Pending(ctx); err != nil || n != 5 {
		t.Errorf("Pending after the upgrade: %d, %v; want 5", n, err)
	}
	var shards []int
	for _, id := range []string{"ep-op", "ep-a"} {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM tollgate_webhook_endpoint_shards WHERE endpoint_id = $1`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		shards = append(shards, n)
	}
	if !slices.Equal(shards, []int{16, 4}) {
		t.Errorf("shards of the operator's and the account's endpoints: %v, want [16 4]", shards)
	}
	// ep-a has 3 pending of 4: one more is taken, the next dropped.
	for i, want := range [][]string{nil, {"ep-a"}} {
		m := webhook.Message{ID: fmt.Sprint("n", i), Type: "key.rotated", Account: "acme", At: t0, Body: []byte("{}")}
		if _, dropped, err := s.Enqueue(ctx, m, []string{"ep-a"}, t0); err != nil || !slices.Equal(dropped, want) {
			t.Errorf("Enqueue %d after the upgrade: dropped %q, %v; want %q", i, dropped, err, want)
		}
	}
	// The deliveries of version 25 are uncounted when they end.
	ds, err := s.Claim(ctx, t0.Add(2*time.Hour), time.Minute, webhook.MaxClaim)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if err := s.Record(ctx, webhook.Outcome{Endpoint: d.Endpoint, Message: d.Message.ID, Claim: d.Claim, State: webhook.Delivered,
			Attempt: webhook.Attempt{At: t0.Add(2 * time.Hour), Status: 200}}); err != nil {
			t.Errorf("Record of %s to %s: %v", d.Message.ID, d.Endpoint, err)
		}
	}
	if n, err := s.Pending(ctx); err != nil || len(ds) != 6 || n != 0 {
		t.Errorf("Pending once the %d deliveries claimed are delivered: %d, %v; want 6 delivered and none pending", len(ds), n, err)
	}
	// An instance of version 25 creates an endpoint: it has its shards.
	execSteps(t, pool, []sqlStep{{create25, []any{"ep-b", "beta", nil, "", ns(0)}}})
	m := webhook.Message{ID: "b0", Type: "key.rotated", Account: "beta", At: t0, Body: []byte("{}")}
	if _, dropped, err := s.Enqueue(ctx, m, []string{"ep-b"}, t0); err != nil || len(dropped) != 0 {
		t.Errorf("Enqueue for an endpoint that version 25 created: dropped %q, %v", dropped, err)
	}
}

// TestMigrateOutlastsStatementTimeout migrates on pools whose sessions have a
// statement timeout of one second: Migrate lifts it for its transaction, so that
// neither a migration that takes longer (a test step of pg_sleep) nor the wait for
// another instance's migration is cut short, and the sessions (or the host's
// transaction) keep their timeout afterwards. (With 50ms, the statement that reads
// the settings before lifting the timeout was cut short on a busy machine.)
func TestMigrateOutlastsStatementTimeout(t *testing.T) {
	const timeout = time.Second
	tinyTimeout := func(t *testing.T) (*pgxpool.Pool, string) {
		t.Helper()
		schema := newSchema(t)
		cfg := poolConfig(t, schema, 4)
		cfg.ConnConfig.RuntimeParams["statement_timeout"] = timeout.String()
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return pool, schema
	}
	wantTimeout := func(t *testing.T, db postgres.DB) {
		t.Helper()
		var got string
		if err := db.QueryRow(t.Context(), "SHOW statement_timeout").Scan(&got); err != nil || got != "1s" {
			t.Errorf("statement_timeout after Migrate: %q, %v; want 1s", got, err)
		}
	}

	t.Run("SlowStep", func(t *testing.T) {
		pool, _ := tinyTimeout(t)
		if err := postgres.MigrateWithSlowStep(t.Context(), pool, 2*timeout); err != nil {
			t.Fatalf("Migrate with a step of %s: %v", 2*timeout, err)
		}
		if got := applied(t, pool); len(got) != len(allVersions(t))+1 {
			t.Errorf("applied versions %v; want the package's and the slow step", got)
		}
		wantTimeout(t, pool)
	})

	t.Run("WaitForAnotherInstance", func(t *testing.T) {
		pool, schema := tinyTimeout(t)
		// Another instance's migration: a transaction that holds Migrate's lock.
		other, err := pgx.Connect(t.Context(), dsn(t))
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close(context.Background())
		tx, err := other.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(context.Background())
		if _, err := tx.Exec(t.Context(), `SELECT pg_advisory_xact_lock(hashtext('tollgate_migrate'), hashtext($1))`, schema); err != nil {
			t.Fatal(err)
		}
		// Watched from a session of its own: pg_stat_activity keeps what it showed first
		// until the transaction ends.
		watch, err := pgx.Connect(t.Context(), dsn(t))
		if err != nil {
			t.Fatal(err)
		}
		defer watch.Close(context.Background())
		done := make(chan error, 1)
		go func() { done <- postgres.Migrate(context.Background(), pool) }()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		if err := testenv.Wait(ctx, func() error {
			select {
			case err := <-done:
				t.Fatalf("Migrate returned %v while another instance held its lock", err)
			default:
			}
			var waiting bool
			// The pool's sessions carry the schema as their application_name.
			if err := watch.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_locks l JOIN pg_stat_activity a USING (pid)
				WHERE l.locktype = 'advisory' AND NOT l.granted AND a.application_name = $1)`, schema).
				Scan(&waiting); err != nil || !waiting {
				return fmt.Errorf("Migrate does not wait for the lock: %v", err)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * timeout) // the wait outlasts the statement timeout
		if err := tx.Commit(t.Context()); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Migrate after waiting for another instance's: %v", err)
			}
		case <-ctx.Done():
			t.Fatal("Migrate did not return once the lock was free")
		}
		wantTimeout(t, pool)
	})

	t.Run("HostTransaction", func(t *testing.T) {
		pool, _ := tinyTimeout(t)
		tx, err := pool.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(context.Background())
		if err := postgres.MigrateWithSlowStep(t.Context(), tx, 2*timeout); err != nil {
			t.Fatalf("Migrate in a host's transaction, with a step of %s: %v", 2*timeout, err)
		}
		wantTimeout(t, tx)
		if err := tx.Commit(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}

// TestMigrateWithClosingInFlight upgrades a schema of version 28 while a closing is in
// flight, as tollgate_close_set makes one: its transaction has deleted the
// reservation's row and is about to record the settlement in the ledger. Version 29
// takes tollgate_ledger (ACCESS EXCLUSIVE, DROP COLUMN seq), version 30 builds an index
// on tollgate_reservations, which waits for the closing, whose insert into the ledger
// would wait for Migrate had it kept 29's lock to the end (one transaction for every
// version deadlocked here). Both must succeed: the upgrade of a live deployment must
// neither fail nor fail a call.
func TestMigrateWithClosingInFlight(t *testing.T) {
	pool, schema := emptyPool(t)
	ctx := t.Context()
	migrateTo(t, pool, 28)
	s, err := postgres.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	const acct = "acme"
	if err := s.Open(ctx, driver.Opening{Account: acct, Balance: 100, Allowance: 100, Period: period}); err != nil {
		t.Fatal(err)
	}
	id := newRequest()
	now := t0
	if _, err := s.Reserve(ctx, driver.Reservation{Account: acct, Request: id, APIs: []string{"search"}, Amount: 5,
		Period: period, Allowance: 100, Now: now, Expires: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}

	// The closing: its first statements.
	call, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer call.Rollback(context.Background())
	if _, err := call.Exec(ctx, `DELETE FROM tollgate_reservations WHERE account_id = $1 AND request_id = $2`, acct, id.String()); err != nil {
		t.Fatal(err)
	}

	watch, err := pgx.Connect(ctx, dsn(t))
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close(context.Background())
	done := make(chan error, 1)
	go func() { done <- postgres.Migrate(context.Background(), pool) }()
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := testenv.Wait(wctx, func() error {
		var waiting bool
		if err := watch.QueryRow(wctx, `SELECT EXISTS (SELECT FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
			JOIN pg_stat_activity a USING (pid)
			WHERE NOT l.granted AND c.relname = 'tollgate_reservations' AND a.application_name = $1)`, schema).
			Scan(&waiting); err != nil || !waiting {
			return fmt.Errorf("Migrate does not wait for tollgate_reservations: %v", err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The closing goes on: its settlement entry.
	_, callErr := call.Exec(ctx, `INSERT INTO tollgate_ledger (account_id, request_id, kind, amount, period_start)
		VALUES ($1, $2, 'settle', 0, $3)`, acct, id.String(), period.Start)
	if callErr == nil {
		callErr = call.Commit(ctx)
	} else {
		call.Rollback(ctx) //nolint:errcheck
	}
	migErr := <-done
	if callErr != nil {
		t.Errorf("the closing in flight during Migrate: %v", callErr)
	}
	if migErr != nil {
		t.Errorf("Migrate from version 28 with a closing in flight: %v", migErr)
	}
}
