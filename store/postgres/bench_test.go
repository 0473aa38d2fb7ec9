package postgres_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store/postgres"
	"github.com/tollgate-dev/tollgate/store/storetest"
)

// BenchmarkAdmitClose measures a paid call's store traffic as the Meter sends it to one
// Store: an Admit (key check and reservation of 1 credit, one function call) followed by
// a Close (settlement keeping the charge, one function call), with durable commits.
//
//   - accounts=1 puts every call on one hot account; accounts=256 spreads them.
//   - shards is the number of sub-balances of each account (Options.Shards): 1 is a
//     single balance row, 16 splits it.
//   - batch is Options.Batch: 1 sends every call alone, 64 (the default) lets concurrent
//     calls of one account share a function call.
//   - serial runs one call at a time; parallel runs 64 goroutines over a pool of 32
//     connections.
//
// Besides ns/op it reports calls/s (admissions and settlements per second) and
// WAL-bytes/call, the write-ahead log the database wrote during the loop divided by the
// calls (on a server that only this benchmark uses, the WAL the store writes per call).
// Run it with TOLLGATE_TEST_POSTGRES set:
//
//	go test -run='^$' -bench=. -benchtime=3s ./store/postgres/
func BenchmarkAdmitClose(b *testing.B) {
	cases := []struct {
		accounts, shards, batch int
	}{
		{1, 1, 1},    // the hot account, one balance row, no batching
		{1, 16, 1},   // the hot account, split into 16 sub-balances
		{1, 1, 64},   // the hot account, with batching (the default)
		{256, 1, 1},  // the same load spread over many accounts
		{256, 16, 1}, // spread, with sub-balances (their cost without a hot account)
		{256, 1, 64}, // spread, with batching (the default)
	}
	for _, c := range cases {
		for _, parallel := range []bool{false, true} {
			mode := "serial"
			if parallel {
				mode = "parallel"
			}
			b.Run(fmt.Sprintf("accounts=%d/shards=%d/batch=%d/%s", c.accounts, c.shards, c.batch, mode), func(b *testing.B) {
				benchAdmitClose(b, c.accounts, &postgres.Options{Shards: c.shards, Batch: c.batch}, parallel)
			})
		}
	}
}

func benchAdmitClose(b *testing.B, accounts int, opts *postgres.Options, parallel bool) {
	pool := newPool(b, 32)
	s, err := postgres.New(pool, opts)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	const credits = 1 << 50
	type fixture struct {
		account string
		key     auth.Key
	}
	fx := make([]fixture, accounts)
	for i := range fx {
		id := fmt.Sprintf("bench-%d", i)
		key := auth.Key{ID: id + "-key", AccountID: id, Name: "primary", Primary: true, Hash: auth.HashKey(auth.NewKeyValue()), CreatedAt: t0}
		if err := s.CreateAccount(ctx, auth.Account{ID: id, Plan: "pro", CreatedAt: t0}, key); err != nil {
			b.Fatal(err)
		}
		if err := s.Open(ctx, driver.Opening{Account: id, Balance: credits, Allowance: credits, Period: period}); err != nil {
			b.Fatal(err)
		}
		fx[i] = fixture{id, key}
	}
	var next atomic.Int64
	call := func() error {
		f := fx[int(next.Add(1))%accounts]
		var req driver.RequestID
		rand.Read(req[:])
		r, err := s.Admit(ctx, driver.Step{
			Account: f.account, Request: req, Now: t0,
			Key:     &driver.KeyCheck{Account: f.account, KeyID: f.key.ID, Hash: f.key.Hash},
			Credits: &driver.Reservation{Account: f.account, Request: req, APIs: []string{"hash"}, Amount: 1, Period: period, Allowance: credits, Now: t0, Expires: t0.Add(time.Hour)},
		})
		if err != nil {
			return err
		}
		if r.Denied != driver.NotDenied {
			return fmt.Errorf("admission denied: %+v", r)
		}
		_, err = s.Close(ctx, driver.Closing{Account: f.account, Request: req,
			Settlement: &driver.Settlement{Account: f.account, Request: req, Period: period, Allowance: credits}})
		return err
	}
	walBefore := walLSN(b, pool)
	b.ResetTimer()
	if parallel {
		b.SetParallelism(32) // 64 goroutines on 2 CPUs
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := call(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	} else {
		for b.Loop() {
			if err := call(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
	var wal float64
	if err := pool.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn)`, walBefore).Scan(&wal); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(wal/float64(b.N), "WAL-bytes/call")
}

// walLSN returns the database's current WAL insert position.
func walLSN(b *testing.B, db postgres.DB) string {
	var lsn string
	if err := db.QueryRow(context.Background(), `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn); err != nil {
		b.Fatal(err)
	}
	return lsn
}

// BenchmarkSweep measures voiding 100,000 expired reservations of 1,000 accounts.
func BenchmarkSweep(b *testing.B) {
	storetest.BenchmarkSweep(b, func(b *testing.B) driver.Ledger { return newStore(b, nil) }, 1000, 100_000)
}
