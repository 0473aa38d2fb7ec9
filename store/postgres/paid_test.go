package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store/postgres"
)

// The paid calls of one hot account that the hot-account benchmarks and
// TestHotAccountWorkFlat make: an Admit with key check and a 1-credit reservation, then
// a Close keeping the charge, against a balance that never runs short.

// paidCredits is the hot account's balance and allowance.
const paidCredits = 1 << 50

// openPaid creates account with a primary key and a balance of paidCredits through s,
// and returns the key.
func openPaid(tb testing.TB, s *postgres.Store, account string) auth.Key {
	tb.Helper()
	ctx := context.Background()
	key := auth.Key{ID: account + "-key", AccountID: account, Name: "primary", Primary: true, Hash: auth.HashKey(auth.NewKeyValue()), CreatedAt: t0}
	if err := s.CreateAccount(ctx, auth.Account{ID: account, Plan: "pro", CreatedAt: t0}, key); err != nil {
		tb.Fatal(err)
	}
	if err := s.Open(ctx, driver.Opening{Account: account, Balance: paidCredits, Allowance: paidCredits, Period: period}); err != nil {
		tb.Fatal(err)
	}
	return key
}

// paidStep returns the admission of the paid call req of key's account.
func paidStep(key auth.Key, req driver.RequestID) driver.Step {
	return driver.Step{
		Account: key.AccountID, Request: req, Now: t0,
		Key: &driver.KeyCheck{Account: key.AccountID, KeyID: key.ID, Hash: key.Hash},
		Credits: &driver.Reservation{Account: key.AccountID, Request: req, APIs: []string{"hash"}, Amount: 1,
			Period: period, Allowance: paidCredits, Now: t0, Expires: t0.Add(time.Hour)},
	}
}

// paidClosing returns the closing of the paid call req of account, keeping the charge.
func paidClosing(account string, req driver.RequestID) driver.Closing {
	return driver.Closing{Account: account, Request: req,
		Settlement: &driver.Settlement{Account: account, Request: req, Period: period, Allowance: paidCredits}}
}

// paidCall makes one paid call of key's account through s.
func paidCall(ctx context.Context, s *postgres.Store, key auth.Key) error {
	req := newRequest()
	r, err := s.Admit(ctx, paidStep(key, req))
	if err != nil {
		return err
	}
	if r.Denied != driver.NotDenied {
		return fmt.Errorf("admission denied: %+v", r)
	}
	_, err = s.Close(ctx, paidClosing(key.AccountID, req))
	return err
}

// drivePaid makes n paid calls of key's account from goroutines, goroutine g through
// stores[g%len(stores)], and returns the calls per second. A call's error fails tb and
// stops its goroutine.
func drivePaid(tb testing.TB, stores []*postgres.Store, key auth.Key, goroutines, n int) float64 {
	ctx := context.Background()
	var (
		left atomic.Int64
		wg   sync.WaitGroup
	)
	left.Store(int64(n))
	start := time.Now()
	for g := range goroutines {
		s := stores[g%len(stores)]
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				if err := paidCall(ctx, s, key); err != nil {
					tb.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return float64(n) / time.Since(start).Seconds()
}

// schemaReads returns what the sessions of the server have read of schema's tables, as
// far as their statistics are flushed: the index entries returned and the rows of
// sequential scans (idx_tup_read and seq_tup_read), and the blocks found in shared
// buffers or read (pg_statio).
func schemaReads(tb testing.TB, db postgres.DB, schema string) (rows, blocks int64) {
	tb.Helper()
	if err := db.QueryRow(context.Background(), `
		SELECT (SELECT coalesce(sum(idx_tup_read), 0) FROM pg_stat_all_indexes WHERE schemaname = $1)
		     + (SELECT coalesce(sum(seq_tup_read), 0) FROM pg_stat_all_tables WHERE schemaname = $1),
		       (SELECT coalesce(sum(coalesce(heap_blks_hit, 0) + coalesce(heap_blks_read, 0)
		                          + coalesce(idx_blks_hit, 0) + coalesce(idx_blks_read, 0)), 0)
		          FROM pg_statio_all_tables WHERE schemaname = $1)`, schema).Scan(&rows, &blocks); err != nil {
		tb.Fatal(err)
	}
	return rows, blocks
}
