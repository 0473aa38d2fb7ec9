package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store/postgres"
	"github.com/tollgate-dev/tollgate/store/storetest"
)

// sweepInstances returns n Stores over one fresh schema, each on a pool of its own, as
// n instances would be, and the count of the calls they make to the database.
func sweepInstances(t testing.TB, n int) storetest.SweepInstances {
	t.Helper()
	schema := newSchema(t)
	var dbs []*countingDB
	s := storetest.SweepInstances{RoundTrips: func() int64 {
		var n int64
		for _, db := range dbs {
			n += db.calls.Load()
		}
		return n
	}}
	for i := range n {
		pool, err := pgxpool.NewWithConfig(context.Background(), poolConfig(t, schema, 16))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		if i == 0 {
			if err := postgres.Migrate(context.Background(), pool); err != nil {
				t.Fatalf("Migrate: %v", err)
			}
		}
		db := &countingDB{DB: pool}
		dbs = append(dbs, db)
		st, err := postgres.New(db, nil)
		if err != nil {
			t.Fatal(err)
		}
		s.Ledgers = append(s.Ledgers, st)
	}
	return s
}

// TestSweepers runs the sweeps of three Stores, each on a pool of its own, over one
// schema, counting their calls to the database.
func TestSweepers(t *testing.T) {
	storetest.TestSweepers(t, func(t *testing.T, n int) storetest.SweepInstances { return sweepInstances(t, n) })
}

// TestSweepPassesHeldAccounts checks that a sweep never waits for an account that
// another transaction holds (another instance's sweep, or an operation voiding it
// itself): it voids the other accounts' expired reservations and leaves the held one's,
// which the next sweep voids once it is free.
func TestSweepPassesHeldAccounts(t *testing.T) {
	pool := newPool(t, 8)
	s, err := postgres.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	const accounts = 5
	accts := []string{"held"}
	for i := range accounts - 1 {
		accts = append(accts, "free"+string(rune('a'+i)))
	}
	for _, acct := range accts {
		if err := s.Open(ctx, driver.Opening{Account: acct, Balance: 10, Allowance: 10, Period: period}); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := s.Reserve(ctx, driver.Reservation{Account: acct, Request: newRequest(), Amount: 1, APIs: []string{"hash"},
				Period: period, Allowance: 10, Now: t0, Expires: t0.Add(time.Minute)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `SELECT 1 FROM tollgate_balances WHERE account_id = 'held' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	later := t0.Add(time.Hour)
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := s.Sweep(ctx, later, 100)
		done <- result{n, err}
	}()
	select {
	case r := <-done:
		if r.err != nil || r.n != 2*(accounts-1) {
			t.Errorf("a sweep beside a held account voided %d (%v), want the other accounts' %d", r.n, r.err, 2*(accounts-1))
		}
	case <-time.After(time.Minute):
		t.Fatal("a sweep waited a minute for an account another transaction holds")
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Sweep(ctx, later, 100); err != nil || n != 2 {
		t.Errorf("the sweep after the account was freed voided %d (%v), want its 2", n, err)
	}
	if n, err := s.Sweep(ctx, later, 100); err != nil || n != 0 {
		t.Errorf("the last sweep voided %d (%v), want 0", n, err)
	}
}

// BenchmarkSweepIdle measures a sweep that finds nothing due with 10,000 accounts
// active (see storetest.BenchmarkSweepIdle):
//
//	go test -run='^$' -bench=SweepIdle -benchtime=20x ./store/postgres/
func BenchmarkSweepIdle(b *testing.B) {
	storetest.BenchmarkSweepIdle(b, sweepInstances(b, 1), 10000)
}

// BenchmarkSweepers measures one and three Stores sweeping 10,000 expired reservations
// of as many accounts (see storetest.BenchmarkSweepers):
//
//	go test -run='^$' -bench=Sweepers -benchtime=1x ./store/postgres/
func BenchmarkSweepers(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("instances=%d", n), func(b *testing.B) {
			storetest.BenchmarkSweepers(b, sweepInstances(b, n), 10000)
		})
	}
}

// TestSweepStepsOverHeldAccount holds the balance row of an account with 1,000
// reservations due, interleaved (by expiry) with the 2 due of each of 4 other accounts:
// a sweep voids the others' in a number of index scans bounded by the accounts, not by
// the held account's reservations, and reads each due entry of the index a bounded
// number of times (both counted by the sweep transaction's statistics, an exact count);
// once the account is free, the next sweep voids its reservations.
func TestSweepStepsOverHeldAccount(t *testing.T) {
	pool := newPool(t, 8)
	s, err := postgres.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	const held, others, each = 1000, 4, 2
	due := t0.Add(time.Minute)
	reserve := func(acct string, expires time.Time) {
		t.Helper()
		if _, err := s.Reserve(ctx, driver.Reservation{Account: acct, Request: newRequest(), Amount: 1, APIs: []string{"hash"},
			Period: period, Allowance: 10, Now: t0, Expires: expires}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Open(ctx, driver.Opening{Account: "held", Balance: 2 * held, Allowance: 10, Period: period}); err != nil {
		t.Fatal(err)
	}
	for i := range held {
		reserve("held", due.Add(time.Duration(i)*time.Millisecond))
	}
	for k := range others {
		acct := fmt.Sprintf("free%d", k)
		if err := s.Open(ctx, driver.Opening{Account: acct, Balance: 10, Allowance: 10, Period: period}); err != nil {
			t.Fatal(err)
		}
		for j := range each {
			// Among the held account's, from the middle of them to their end.
			reserve(acct, due.Add(time.Duration(held/2+(k*each+j)*held/(2*others*each))*time.Millisecond+time.Microsecond))
		}
	}

	holder, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(context.Background())
	if _, err := holder.Exec(ctx, `SELECT 1 FROM tollgate_balances WHERE account_id = 'held' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	later := t0.Add(time.Hour)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	in, err := postgres.New(tx, nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := in.Sweep(ctx, later, 100)
	if err != nil || n != others*each {
		t.Fatalf("a sweep beside the held account voided %d (%v), want the other accounts' %d", n, err, others*each)
	}
	var scans, read int64
	if err := tx.QueryRow(ctx, `
		SELECT pg_stat_get_xact_numscans('tollgate_reservations_by_expiry'::regclass),
		       pg_stat_get_xact_tuples_returned('tollgate_reservations_by_expiry'::regclass)`).Scan(&scans, &read); err != nil {
		t.Fatal(err)
	}
	t.Logf("the sweep (2 calls of tollgate_sweep) beside a held account with %d reservations due made %d scans of the expiry index and read %d of its entries", held, scans, read)
	if scans > 16*others {
		t.Errorf("the sweep made %d scans of the expiry index to void %d reservations of %d accounts beside a held account with %d due: it probes the held account's reservations one by one", scans, others*each, others, held)
	}
	if read > 2*2*(held+others*each) {
		t.Errorf("the sweep read %d entries of the expiry index, more than twice each of the %d due per call", read, held+others*each)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Sweep(ctx, later, 2*held); err != nil || n != held {
		t.Errorf("the sweep after the account was freed voided %d (%v), want its %d", n, err, held)
	}
}
