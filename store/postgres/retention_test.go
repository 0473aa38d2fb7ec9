package postgres_test

import (
	"testing"
	"time"

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
