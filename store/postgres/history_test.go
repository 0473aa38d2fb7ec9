package postgres_test

import (
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store/postgres"
)

// TestHotAccountWorkFlat checks that a hot account's calls do not read more as its
// history grows: the index entries and table rows that a paid call reads (a batch of
// admissions with key check and a 1-credit reservation, then a batch of closings keeping
// the charge, as Options.Batch sends them) after many calls of the account are within a
// small factor of what they are after a few. Every closed reservation leaves a dead
// entry in the reservations' primary key until a vacuum removes it (autovacuum may be
// off, and runs once a minute at best), so a statement that scans the account's entries
// rather than probing each request's reads more with every call (until version 33 the
// closings' lookups of their reservation rows did: 27.2 rows a call after 512 calls,
// 111.2 after 3,200; 4.2 and 4.2 since). It counts reads, not time: the server's
// statistics (idx_tup_read, seq_tup_read) of the schema's tables, on a connection of
// its own, flushed by pg_stat_force_next_flush (PostgreSQL 15). TOLLGATE_HISTORY_CALLS
// sets the calls made in all (3,200 by default).
func TestHotAccountWorkFlat(t *testing.T) {
	calls := envCount("TOLLGATE_HISTORY_CALLS", 3200)
	const (
		batch   = 64      // calls per batch, as many as Options.Batch sends by default
		warm    = 8       // rounds before the first measure: the plans PL/pgSQL keeps are generic from the sixth call on
		measure = 8       // rounds per measure
		credits = 1 << 50 // never short
		account = "history"
	)
	ctx := t.Context()
	pool := newPool(t, 1) // one connection: its statistics are the calls'
	var version int
	if err := pool.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version < 150000 {
		testenv.Unavailable(t, "server version %d: the test reads the statistics that PostgreSQL 15 flushes on demand (pg_stat_force_next_flush)", version)
	}
	s, err := postgres.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	key := auth.Key{ID: account + "-key", AccountID: account, Name: "primary", Primary: true, Hash: auth.HashKey(auth.NewKeyValue()), CreatedAt: t0}
	if err := s.CreateAccount(ctx, auth.Account{ID: account, Plan: "pro", CreatedAt: t0}, key); err != nil {
		t.Fatal(err)
	}
	if err := s.Open(ctx, driver.Opening{Account: account, Balance: credits, Allowance: credits, Period: period}); err != nil {
		t.Fatal(err)
	}
	round := func() {
		t.Helper()
		steps := make([]driver.Step, batch)
		closings := make([]driver.Closing, batch)
		for i := range steps {
			req := newRequest()
			steps[i] = driver.Step{
				Account: account, Request: req, Now: t0,
				Key:     &driver.KeyCheck{Account: account, KeyID: key.ID, Hash: key.Hash},
				Credits: &driver.Reservation{Account: account, Request: req, APIs: []string{"hash"}, Amount: 1, Period: period, Allowance: credits, Now: t0, Expires: t0.Add(time.Hour)},
			}
			closings[i] = driver.Closing{Account: account, Request: req,
				Settlement: &driver.Settlement{Account: account, Request: req, Period: period, Allowance: credits}}
		}
		res, errs, err := s.AdmitBatch(ctx, account, steps)
		if err != nil {
			t.Fatal(err)
		}
		for i := range res {
			if errs[i] != nil || res[i].Denied != driver.NotDenied {
				t.Fatalf("admission %d of the batch: %+v, %v", i, res[i], errs[i])
			}
		}
		_, errs, err = s.CloseBatch(ctx, account, closings)
		if err != nil {
			t.Fatal(err)
		}
		for i, err := range errs {
			if err != nil {
				t.Fatalf("closing %d of the batch: %v", i, err)
			}
		}
	}
	// reads returns the index entries and the rows of sequential scans read in the
	// schema so far, and the blocks found in shared buffers or read.
	reads := func() (rows, blocks int64) {
		t.Helper()
		if _, err := pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
			t.Fatal(err)
		}
		// Flushed as the session went idle, before it answered; read in the same session.
		if err := pool.QueryRow(ctx, `
			SELECT (SELECT coalesce(sum(idx_tup_read), 0) FROM pg_stat_all_indexes WHERE schemaname = current_schema())
			     + (SELECT coalesce(sum(seq_tup_read), 0) FROM pg_stat_all_tables WHERE schemaname = current_schema()),
			       (SELECT coalesce(sum(coalesce(heap_blks_hit, 0) + coalesce(heap_blks_read, 0)
			                          + coalesce(idx_blks_hit, 0) + coalesce(idx_blks_read, 0)), 0)
			          FROM pg_statio_all_tables WHERE schemaname = current_schema())`).Scan(&rows, &blocks); err != nil {
			t.Fatal(err)
		}
		return rows, blocks
	}
	// perCall returns the rows and blocks read per call over measure rounds.
	perCall := func() (rows, blocks float64) {
		t.Helper()
		r0, b0 := reads()
		for range measure {
			round()
		}
		r1, b1 := reads()
		n := float64(measure * batch)
		return float64(r1-r0) / n, float64(b1-b0) / n
	}
	for range warm {
		round()
	}
	earlyRows, earlyBlocks := perCall()
	made := (warm + measure) * batch
	for ; made < calls; made += batch {
		round()
	}
	lateRows, lateBlocks := perCall()
	t.Logf("per call, after %d calls: %.1f rows read, %.1f blocks; after %d: %.1f rows read, %.1f blocks",
		warm*batch, earlyRows, earlyBlocks, made, lateRows, lateBlocks)
	// Generous: a call reads a few entries (one probe per request and table); the
	// indexes' height may grow by a level.
	if lateRows > 2*earlyRows+4 {
		t.Errorf("a call reads %.1f index entries and rows after %d calls of the account, %.1f after %d: the work grows with the account's history",
			lateRows, made, earlyRows, warm*batch)
	}
}
