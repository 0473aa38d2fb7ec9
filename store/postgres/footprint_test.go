package postgres_test

import (
	"context"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store/postgres"
)

// TestLedgerFootprint measures what paid calls leave in tollgate_ledger: it makes
// TOLLGATE_LEDGER_FOOTPRINT calls (400 by default; Reserve, then Settle) over 100
// accounts from 16 goroutines, reports the rows and bytes per call, then moves the
// accounts to the next period, compacts and reports the sizes again, after a VACUUM and
// after a VACUUM FULL. It checks the counts: two entries per call, every request
// folded, and the 'open' and 'renewal' entries left. docs/postgres.md gives its figures
// and the commands.
func TestLedgerFootprint(t *testing.T) {
	calls := envCount("TOLLGATE_LEDGER_FOOTPRINT", 400)
	ctx := t.Context()
	pool := newPool(t, 16)
	s, err := postgres.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	const accounts, workers = 100, 16
	next := driver.MonthOf(period.End)
	for i := range accounts {
		if err := s.Open(ctx, driver.Opening{Account: "fp" + strconv.Itoa(i), Balance: 1 << 40, Allowance: 1 << 40, Period: period}); err != nil {
			t.Fatal(err)
		}
	}
	sizes := func(label string) (rows, bytes int64) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT count(*), pg_total_relation_size('tollgate_ledger') FROM tollgate_ledger`).Scan(&rows, &bytes); err != nil {
			t.Fatal(err)
		}
		var heap, indexes, totals, periods int64
		if err := pool.QueryRow(ctx, `SELECT pg_relation_size('tollgate_ledger'), pg_indexes_size('tollgate_ledger'),
			coalesce(pg_total_relation_size(to_regclass('tollgate_ledger_totals')), 0),
			coalesce(pg_total_relation_size(to_regclass('tollgate_ledger_periods')), 0)`).Scan(&heap, &indexes, &totals, &periods); err != nil {
			t.Fatal(err)
		}
		t.Logf("%-22s tollgate_ledger: %8d rows, %11d bytes (heap %d, indexes %d); totals %d, periods %d bytes",
			label, rows, bytes, heap, indexes, totals, periods)
		return rows, bytes
	}
	// long runs a statement without the pool's statement timeout: a copy, a VACUUM.
	long := func(sql string, args ...any) {
		t.Helper()
		conn, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Release()
		if _, err := conn.Exec(ctx, `SET statement_timeout = 0`); err != nil {
			t.Fatal(err)
		}
		defer conn.Exec(context.WithoutCancel(ctx), `RESET statement_timeout`) //nolint:errcheck
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	rows0, bytes0 := sizes("after the openings")
	var done atomic.Int64
	var wg sync.WaitGroup
	began := time.Now()
	for w := range workers {
		wg.Go(func() {
			for i := w; i < calls; i += workers {
				acct := "fp" + strconv.Itoa(i%accounts)
				id := newRequest()
				now := t0.Add(time.Duration(i) * time.Millisecond)
				r := driver.Reservation{Account: acct, Request: id, APIs: []string{"search"}, Amount: 1, Period: period,
					Allowance: 1 << 40, Now: now, Expires: now.Add(time.Hour)}
				if _, err := s.Reserve(ctx, r); err != nil {
					t.Error(err)
					return
				}
				if _, err := s.Settle(ctx, driver.Settlement{Account: acct, Request: id, Period: period, Allowance: 1 << 40, Now: now}); err != nil {
					t.Error(err)
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	t.Logf("%d paid calls in %s", done.Load(), time.Since(began).Round(time.Second))
	rows, bytes := sizes("after the calls")
	if want := rows0 + 2*int64(calls); rows != want {
		t.Errorf("%d ledger entries after %d paid calls, want %d (two a call)", rows, calls, want)
	}
	n := float64(done.Load())
	t.Logf("per paid call: %.2f rows, %.0f bytes", float64(rows-rows0)/n, float64(bytes-bytes0)/n)
	widths, err := pool.Query(ctx, `SELECT kind, avg(pg_column_size(l.*))::int FROM tollgate_ledger l GROUP BY kind ORDER BY kind`)
	if err != nil {
		t.Fatal(err)
	}
	for widths.Next() {
		var kind string
		var width int
		if err := widths.Scan(&kind, &width); err != nil {
			t.Fatal(err)
		}
		t.Logf("a %q entry: %d bytes of row data (plus a 4-byte line pointer)", kind, width)
	}
	if err := widths.Err(); err != nil {
		t.Fatal(err)
	}
	// TOLLGATE_LEDGER_FOOTPRINT_COPIES=k copies the calls' entries k-1 times, each
	// request under a new id, so that the table holds k times the calls.
	requests := calls
	if k, _ := strconv.Atoi(os.Getenv("TOLLGATE_LEDGER_FOOTPRINT_COPIES")); k > 1 {
		requests = calls * k
		began := time.Now()
		long(`INSERT INTO tollgate_ledger (account_id, request_id, kind, amount, period_start, shard, generation, apis)
			SELECT l.account_id, md5(l.request_id::text || g)::uuid, l.kind, l.amount, l.period_start, l.shard, l.generation, l.apis
			  FROM tollgate_ledger l, generate_series(1, $1 - 1) g
			 WHERE l.request_id IS NOT NULL AND l.kind IN ('reserve', 'settle')`, k)
		t.Logf("copied the calls' entries %d times in %s", k-1, time.Since(began).Round(time.Second))
		rows, bytes = sizes("with the copies")
		t.Logf("per paid call: %.2f rows, %.0f bytes", float64(rows-rows0)/(n*float64(k)), float64(bytes-bytes0)/(n*float64(k)))
	}
	long(`VACUUM ANALYZE tollgate_ledger`)
	sizes("after VACUUM")

	for i := range accounts {
		if _, err := s.Balance(ctx, "fp"+strconv.Itoa(i), next.Start.Add(time.Hour), next, 1<<40); err != nil {
			t.Fatal(err)
		}
	}
	began, folded := time.Now(), 0
	for {
		k, err := s.Compact(ctx, next.Start, 5000)
		if err != nil {
			t.Fatal(err)
		}
		folded += k
		if k < 5000 {
			break
		}
	}
	t.Logf("compacted %d requests in %s", folded, time.Since(began).Round(time.Second))
	if folded != requests {
		t.Errorf("compacted %d requests, want every one of the %d", folded, requests)
	}
	if rows, _ := sizes("after the compaction"); rows != 2*accounts {
		t.Errorf("%d ledger entries after the compaction, want %d (each account's 'open' and 'renewal')", rows, 2*accounts)
	}
	long(`VACUUM ANALYZE tollgate_ledger`)
	sizes("after VACUUM")
	long(`VACUUM FULL tollgate_ledger`)
	sizes("after VACUUM FULL")
}
