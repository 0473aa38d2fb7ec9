package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

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
// rather than probing each request's reads more with every call (until version 36 the
// closings' lookups of their reservation rows did: 27.2 rows a call after 512 calls,
// 111.2 after 3,200; 4.2 and 4.2 since). It counts reads, not time: the server's
// statistics (idx_tup_read, seq_tup_read) of the schema's tables, on a connection of
// its own, flushed by pg_stat_force_next_flush (PostgreSQL 15). TOLLGATE_HISTORY_CALLS
// sets the calls made in all (3,200 by default).
func TestHotAccountWorkFlat(t *testing.T) {
	calls := envCount("TOLLGATE_HISTORY_CALLS", 3200)
	const (
		batch   = 64 // calls per batch, as many as Options.Batch sends by default
		warm    = 8  // rounds before the first measure: the plans PL/pgSQL keeps are generic from the sixth call on
		measure = 8  // rounds per measure
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
	var schema string
	if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	key := openPaid(t, s, "history")
	account := key.AccountID
	round := func() {
		t.Helper()
		steps := make([]driver.Step, batch)
		closings := make([]driver.Closing, batch)
		for i := range steps {
			req := newRequest()
			steps[i], closings[i] = paidStep(key, req), paidClosing(account, req)
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
	// reads returns what the calls have read so far (schemaReads).
	reads := func() (rows, blocks int64) {
		t.Helper()
		if _, err := pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
			t.Fatal(err)
		}
		// Flushed as the session went idle, before it answered; read in the same session.
		return schemaReads(t, pool, schema)
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

// BenchmarkHotHistory measures how one hot account's paid calls cost as its history
// grows, as BenchmarkHotInstances sends them through one instance (64 goroutines, one
// Store on a pool of 33 connections): of its b.N calls, the first and the last 1,000
// (window) go through a pool of their own, closed after them so that its sessions'
// statistics are flushed, and are measured: the calls per second, and per call the
// index entries and rows read and the blocks of shared buffers (see schemaReads), which
// ought not to grow. Fix the number of calls, as the set-up is made once per run:
//
//	go test -run='^$' -bench=BenchmarkHotHistory -benchtime=30000x ./store/postgres/
func BenchmarkHotHistory(b *testing.B) {
	const (
		goroutines = 64
		window     = 1000
	)
	if b.N < 2*window {
		return // the run with b.N = 1 that precedes the fixed number of calls, or too few
	}
	ctx := context.Background()
	schema := newSchema(b)
	reader, err := pgxpool.NewWithConfig(ctx, poolConfig(b, schema, 1))
	if err != nil {
		b.Fatal(err)
	}
	defer reader.Close()
	pools := 0
	// session runs f on a pool of 33 connections of its own, then closes the pool and
	// waits until its sessions have ended, their statistics flushed.
	session := func(f func(p *pgxpool.Pool)) {
		pools++
		cfg := poolConfig(b, schema, 33)
		app := fmt.Sprintf("%s_%d", schema, pools)
		cfg.ConnConfig.RuntimeParams["application_name"] = app
		p, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		f(p)
		p.Close()
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
			var n int
			if err := reader.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n); err != nil {
				b.Fatal(err)
			}
			if n == 0 {
				return
			}
			if time.Now().After(deadline) {
				b.Fatalf("%d sessions of a closed pool still open after a minute", n)
			}
		}
	}
	store := func(p *pgxpool.Pool) *postgres.Store {
		s, err := postgres.New(p, nil)
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	var key auth.Key
	session(func(p *pgxpool.Pool) {
		if err := postgres.Migrate(ctx, p); err != nil {
			b.Fatal(err)
		}
		key = openPaid(b, store(p), "hot")
	})
	drive := func(p *pgxpool.Pool, n int) float64 {
		return drivePaid(b, []*postgres.Store{store(p)}, key, goroutines, n)
	}
	// measure makes n calls in a session of their own and returns their rate and what
	// they read per call.
	measure := func(n int) (rate, rows, blocks float64) {
		r0, b0 := schemaReads(b, reader, schema)
		session(func(p *pgxpool.Pool) { rate = drive(p, n) })
		r1, b1 := schemaReads(b, reader, schema)
		return rate, float64(r1-r0) / float64(n), float64(b1-b0) / float64(n)
	}
	b.ResetTimer()
	firstRate, firstRows, firstBlocks := measure(window)
	if mid := b.N - 2*window; mid > 0 {
		session(func(p *pgxpool.Pool) { drive(p, mid) })
	}
	lastRate, lastRows, lastBlocks := measure(window)
	b.StopTimer()
	b.ReportMetric(firstRate, "first-calls/s")
	b.ReportMetric(lastRate, "last-calls/s")
	b.ReportMetric(firstRows, "first-rows/call")
	b.ReportMetric(lastRows, "last-rows/call")
	b.ReportMetric(firstBlocks, "first-blocks/call")
	b.ReportMetric(lastBlocks, "last-blocks/call")
}
