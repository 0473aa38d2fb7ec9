package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store/postgres"
)

// TestMigrateLedgerRetention upgrades a schema of version 28 whose ledger holds calls of
// two periods and a reservation open across the renewal: version 29 drops seq and
// knows the periods from the entries already there, so that a compaction folds the
// calls of the first period, keeps the open reservation (which then settles as before)
// and the calls of the current period, and changes no balance; a renewal after the
// upgrade ends the second period, whose calls the next compaction folds.
func TestMigrateLedgerRetention(t *testing.T) {
	pool, _ := emptyPool(t)
	ctx := t.Context()
	migrateTo(t, pool, 28)
	s, err := postgres.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	p1 := driver.MonthOf(period.End)
	p2 := driver.MonthOf(p1.End)
	const acct, allowance = "acme", 1000
	if err := s.Open(ctx, driver.Opening{Account: acct, Balance: allowance, Allowance: allowance, Period: period}); err != nil {
		t.Fatal(err)
	}
	call := func(p driver.Period, refund int64) driver.RequestID {
		t.Helper()
		id := newRequest()
		now := p.Start.Add(24 * time.Hour)
		if _, err := s.Reserve(ctx, driver.Reservation{Account: acct, Request: id, APIs: []string{"search"}, Amount: 5,
			Period: p, Allowance: allowance, Now: now, Expires: now.Add(90 * 24 * time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if refund >= 0 {
			if _, err := s.Settle(ctx, driver.Settlement{Account: acct, Request: id, Refund: refund, Period: p, Allowance: allowance, Now: now}); err != nil {
				t.Fatal(err)
			}
		}
		return id
	}
	call(period, 0)
	call(period, 2)
	open := call(period, -1) // open across the renewal
	for range 2 {
		call(p1, 0)
	}
	now1 := p1.Start.Add(48 * time.Hour)
	before, err := s.Balance(ctx, acct, now1, p1, allowance)
	if err != nil {
		t.Fatal(err)
	}

	if err := postgres.Migrate(ctx, pool); err != nil {
		t.Fatalf("Migrate from version 28: %v", err)
	}
	var seq bool
	if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = 'tollgate_ledger' AND column_name = 'seq')`).Scan(&seq); err != nil || seq {
		t.Errorf("tollgate_ledger still has seq (%v)", err)
	}
	if n, err := s.Compact(ctx, p1.Start.Add(-time.Second), 100); err != nil || n != 0 {
		t.Errorf("Compact before the first period ended: %d (%v), want none", n, err)
	}
	if n, err := s.Compact(ctx, p1.Start, 100); err != nil || n != 2 {
		t.Errorf("Compact at the end of the first period: %d (%v), want its 2 settled calls", n, err)
	}
	after, err := s.Balance(ctx, acct, now1, p1, allowance)
	if err != nil || after != before {
		t.Errorf("Balance after the upgrade and the compaction: %+v (%v), want %+v", after, err, before)
	}
	if _, err := s.Settle(ctx, driver.Settlement{Account: acct, Request: open, Period: p1, Allowance: allowance, Now: now1}); err != nil {
		t.Errorf("Settle of the reservation open across the renewal: %v", err)
	}
	// A renewal after the upgrade: the second period ends, and what is left folds.
	if _, err := s.Balance(ctx, acct, p2.Start.Add(time.Hour), p2, allowance); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Compact(ctx, p2.Start, 100); err != nil || n != 3 {
		t.Errorf("Compact at the end of the second period: %d (%v), want 3 (its 2 calls and the reservation settled in it)", n, err)
	}
	var entries, totals int64
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM tollgate_ledger WHERE request_id IS NOT NULL),
		(SELECT sum(entries) FROM tollgate_ledger_totals)`).Scan(&entries, &totals); err != nil {
		t.Fatal(err)
	}
	if entries != 0 || totals != 10 {
		t.Errorf("after both compactions: %d entries of requests left and %d folded; want none left and 10 folded", entries, totals)
	}
}

// reads returns what the transaction tx has read so far of table and its indexes: the
// scans started (sequential and index scans) and the rows and index entries they
// returned, from the transaction's own statistics (pg_stat_get_xact_*), which count
// what the statements of functions read too.
func reads(t *testing.T, tx pgx.Tx, table string) (scans, rows int64) {
	t.Helper()
	err := tx.QueryRow(t.Context(), `
		SELECT coalesce(sum(pg_stat_get_xact_numscans(r)), 0)::bigint, coalesce(sum(pg_stat_get_xact_tuples_returned(r)), 0)::bigint
		  FROM (SELECT $1::regclass::oid AS r UNION ALL SELECT i.indexrelid FROM pg_index i WHERE i.indrelid = $1::regclass) x`,
		table).Scan(&scans, &rows)
	if err != nil {
		t.Fatal(err)
	}
	return scans, rows
}

// TestCompactReadsThePeriodOnly compacts an account whose current period holds 20,000
// calls and whose ended period holds 3: folding the 3 reads the ended period's entries
// and not the account's whole history, and a call of the account reads its own entries,
// whether or not the ledger has statistics (the entries of the ledger a compaction or
// a call reads are counted by the transaction's statistics, an exact count, whatever
// the machine).
func TestCompactReadsThePeriodOnly(t *testing.T) {
	pool := newPool(t, 4)
	ctx := t.Context()
	s, err := postgres.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	const acct, allowance, current = "hot", 1000, 20000
	p1 := driver.MonthOf(period.End)
	if err := s.Open(ctx, driver.Opening{Account: acct, Balance: allowance, Allowance: allowance, Period: period}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		id := newRequest()
		if _, err := s.Reserve(ctx, driver.Reservation{Account: acct, Request: id, APIs: []string{"search"}, Amount: 1,
			Period: period, Allowance: allowance, Now: t0, Expires: t0.Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Settle(ctx, driver.Settlement{Account: acct, Request: id, Period: period, Allowance: allowance, Now: t0}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Balance(ctx, acct, p1.Start.Add(time.Hour), p1, allowance); err != nil {
		t.Fatal(err)
	}
	// The current period's calls, written as the calls write them ('reserve', then
	// 'settle'), in one statement.
	if _, err := pool.Exec(ctx, `
		WITH r AS (INSERT INTO tollgate_ledger (account_id, request_id, kind, amount, period_start, shard, generation, apis)
		           SELECT $1, gen_random_uuid(), 'reserve', -1, $2, 0, 0, '{search}' FROM generate_series(1, $3)
		           RETURNING request_id)
		INSERT INTO tollgate_ledger (account_id, request_id, kind, amount, period_start)
		SELECT $1, r.request_id, 'settle', 0, $2 FROM r`, acct, p1.Start, current); err != nil {
		t.Fatal(err)
	}
	// A call of the account reads its own entries by request id, never the account's
	// history through the index of periods, with the statistics of the ledger as they
	// were before the insert (none) and after an ANALYZE.
	callReads := func(stats string) {
		t.Helper()
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(context.Background())
		in, err := postgres.New(tx, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, before := reads(t, tx, "tollgate_ledger")
		id, now := newRequest(), p1.Start.Add(2*time.Hour)
		if _, err := in.Reserve(ctx, driver.Reservation{Account: acct, Request: id, APIs: []string{"search"}, Amount: 1,
			Period: p1, Allowance: allowance, Now: now, Expires: now.Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		if _, err := in.Settle(ctx, driver.Settlement{Account: acct, Request: id, Period: p1, Allowance: allowance, Now: now}); err != nil {
			t.Fatal(err)
		}
		_, read := reads(t, tx, "tollgate_ledger")
		t.Logf("%s: a call of the account read %d entries of the ledger", stats, read-before)
		if read-before > 100 {
			t.Errorf("%s: a call of an account with %d entries read %d of them", stats, 2*current, read-before)
		}
	}
	// The compaction of the ended period, with the plans PL/pgSQL makes for the first
	// calls of a session (custom) and those it may keep afterwards (generic), each
	// rolled back, once the ledger has statistics (as autovacuum gives it: without
	// them, the planner takes every scan of the account for one row and may read its
	// entries in any index, as it did before version 32).
	compactReads := func(stats string) {
		t.Helper()
		for _, plans := range []string{"force_custom_plan", "force_generic_plan"} {
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(context.Background()) // a no-op once rolled back
			if _, err := tx.Exec(ctx, `SELECT set_config('plan_cache_mode', $1, true)`, plans); err != nil {
				t.Fatal(err)
			}
			in, err := postgres.New(tx, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, before := reads(t, tx, "tollgate_ledger")
			n, err := in.Compact(ctx, p1.Start, 1000)
			if err != nil || n != 3 {
				t.Fatalf("Compact at the end of the first period (%s, %s): %d (%v), want its 3 calls", stats, plans, n, err)
			}
			_, read := reads(t, tx, "tollgate_ledger")
			read -= before
			t.Logf("%s, %s: the compaction of 3 calls beside %d in the current period read %d entries of the ledger", stats, plans, current, read)
			if read > 100 {
				t.Errorf("%s, %s: the compaction of 3 calls read %d entries of the ledger, with %d in the current period: it reads the account's history, not the ended period's", stats, plans, read, 2*current)
			}
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	callReads("no statistics")
	if _, err := pool.Exec(ctx, `ANALYZE tollgate_ledger`); err != nil {
		t.Fatal(err)
	}
	callReads("analyzed")
	compactReads("analyzed")
}

// TestMigrateLedgerByPeriodBuiltBefore upgrades schemas of version 31 whose ledger an
// operator indexed beforehand as version 32 says (CREATE INDEX CONCURRENTLY), once
// valid and once left invalid by a build that failed: version 32 keeps the valid index
// and builds the invalid one again.
func TestMigrateLedgerByPeriodBuiltBefore(t *testing.T) {
	for _, invalid := range []bool{false, true} {
		pool, _ := emptyPool(t)
		ctx := t.Context()
		migrateTo(t, pool, 31)
		if _, err := pool.Exec(ctx, `CREATE INDEX CONCURRENTLY tollgate_ledger_by_period ON tollgate_ledger (account_id, period_start)
			WHERE kind IN ('reserve', 'adjust', 'void') AND period_start > '-infinity'`); err != nil {
			t.Fatal(err)
		}
		var oid uint32
		if err := pool.QueryRow(ctx, `SELECT 'tollgate_ledger_by_period'::regclass::oid`).Scan(&oid); err != nil {
			t.Fatal(err)
		}
		if invalid { // as a concurrent build that failed leaves it
			if _, err := pool.Exec(ctx, `UPDATE pg_index SET indisvalid = false WHERE indexrelid = $1`, oid); err != nil {
				if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == "42501" {
					t.Skip("marking an index invalid takes a superuser:", err)
				}
				t.Fatal(err)
			}
		}
		if err := postgres.Migrate(ctx, pool); err != nil {
			t.Fatalf("Migrate with the index built before (invalid: %v): %v", invalid, err)
		}
		var now uint32
		var valid bool
		if err := pool.QueryRow(ctx, `SELECT i.indexrelid::oid, i.indisvalid FROM pg_index i
			WHERE i.indexrelid = 'tollgate_ledger_by_period'::regclass`).Scan(&now, &valid); err != nil {
			t.Fatal(err)
		}
		if !valid || (now == oid) == invalid {
			t.Errorf("the index built before (invalid: %v): valid %v, kept %v; want it valid, kept only if it was", invalid, valid, now == oid)
		}
	}
}

// TestMigrateLedgerRetentionOpenDuringBackfill upgrades a schema of version 28 while a
// transaction opens an account and renews another, each with a call: version 29 reads
// the ledger's periods before that transaction commits and creates its trigger after
// (it waits for it), so that neither period is in the rows it fills. After the upgrade
// a compaction still folds the calls of both accounts' first period once it ended, as
// it does those of an account opened before the upgrade.
func TestMigrateLedgerRetentionOpenDuringBackfill(t *testing.T) {
	pool, _ := emptyPool(t)
	ctx := t.Context()
	migrateTo(t, pool, 28)
	s, err := postgres.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	p1 := driver.MonthOf(period.End)
	p2 := driver.MonthOf(p1.End)
	const allowance = 1000
	call := func(s *postgres.Store, acct string, p driver.Period) {
		t.Helper()
		id := newRequest()
		now := p.Start.Add(24 * time.Hour)
		if _, err := s.Reserve(ctx, driver.Reservation{Account: acct, Request: id, APIs: []string{"search"}, Amount: 5,
			Period: p, Allowance: allowance, Now: now, Expires: now.Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Settle(ctx, driver.Settlement{Account: acct, Request: id, Period: p, Allowance: allowance, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	open := func(s *postgres.Store, acct string) {
		t.Helper()
		if err := s.Open(ctx, driver.Opening{Account: acct, Balance: allowance, Allowance: allowance, Period: period}); err != nil {
			t.Fatal(err)
		}
	}
	for _, acct := range []string{"before", "renewed"} {
		open(s, acct)
		call(s, acct, period)
	}

	// The transaction that the backfill misses: "late" opened, with a call, and
	// "renewed" renewed into p1, with a call.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	in, err := postgres.New(tx, nil)
	if err != nil {
		t.Fatal(err)
	}
	open(in, "late")
	call(in, "late", period)
	call(in, "renewed", p1)
	migrated := make(chan error, 1)
	go func() { migrated <- postgres.Migrate(ctx, pool) }()
	// Version 29 has read the ledger once it waits for the transaction's lock on it.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		var waiting bool
		if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks
			WHERE relation = 'tollgate_ledger'::regclass AND NOT granted)`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the migration did not wait for the transaction's lock on the ledger within a minute")
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-migrated; err != nil {
		t.Fatalf("Migrate from version 28: %v", err)
	}

	// "before" and "late" renew into p1 with a call, as "renewed" did: the first
	// period's calls fold once p1 started, and p1's once p2 did.
	for _, acct := range []string{"before", "late"} {
		call(s, acct, p1)
	}
	if n, err := s.Compact(ctx, p1.Start, 100); err != nil || n != 3 {
		t.Errorf("Compact at the end of the first period: %d (%v), want the 3 calls of its 3 accounts", n, err)
	}
	for _, acct := range []string{"before", "late", "renewed"} {
		if _, err := s.Balance(ctx, acct, p2.Start.Add(time.Hour), p2, allowance); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.Compact(ctx, p2.Start, 100); err != nil || n != 3 {
		t.Errorf("Compact at the end of the second period: %d (%v), want the 3 calls of its 3 accounts", n, err)
	}
	var left int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM tollgate_ledger WHERE request_id IS NOT NULL`).Scan(&left); err != nil || left != 0 {
		t.Errorf("%d entries of calls left after both compactions (%v), want none", left, err)
	}
}
