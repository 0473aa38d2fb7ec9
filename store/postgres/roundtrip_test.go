package postgres_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store/postgres"
)

// countingDB counts the calls made through it: each is one round trip to the server
// (once a connection has prepared the statement; pgx prepares a statement the first
// time a connection runs it).
type countingDB struct {
	postgres.DB
	calls atomic.Int64
}

func (c *countingDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c.calls.Add(1)
	return c.DB.Exec(ctx, sql, args...)
}

func (c *countingDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	c.calls.Add(1)
	return c.DB.Query(ctx, sql, args...)
}

func (c *countingDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c.calls.Add(1)
	return c.DB.QueryRow(ctx, sql, args...)
}

func (c *countingDB) Begin(ctx context.Context) (pgx.Tx, error) {
	c.calls.Add(1)
	return c.DB.Begin(ctx)
}

// TestRoundTrips checks the round-trip budget: exactly one call to the database per
// Admit (with every part: key check, rate limit, slot, credits) and per Close (settle and
// release), whether the step is admitted, denied or replayed, and batching on or off
// for a lone call; and one per method of the plain interfaces.
func TestRoundTrips(t *testing.T) {
	for _, opts := range []*postgres.Options{nil, {Shards: 4}, {Batch: 1}} {
		t.Run(optsName(opts), func(t *testing.T) {
			db := &countingDB{DB: newPool(t, 4)}
			s, err := postgres.New(db, opts)
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			once := func(what string, f func() error) {
				t.Helper()
				before := db.calls.Load()
				if err := f(); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if n := db.calls.Load() - before; n != 1 {
					t.Errorf("%s made %d calls to the database, want 1", what, n)
				}
			}
			acct, key := fixture("acct")
			other := key
			other.ID, other.Name, other.Primary, other.Hash = "acct-ci", "ci", false, auth.HashKey(auth.NewKeyValue())
			req := driver.RequestID{1}
			limit := driver.Limit{Rate: 60, Per: time.Minute, Burst: 10}

			once("CreateAccount", func() error { return s.CreateAccount(ctx, acct, key) })
			once("CreateKey", func() error { return s.CreateKey(ctx, other, auth.KeyLimit{}) })
			once("Account", func() error { _, err := s.Account(ctx, acct.ID); return err })
			once("Key", func() error { _, err := s.Key(ctx, key.ID); return err })
			once("Keys", func() error { _, err := s.Keys(ctx, auth.KeyQuery{Account: acct.ID}); return err })
			once("Resolve", func() error { _, _, err := s.Resolve(ctx, key.Hash); return err })
			once("CheckKey", func() error {
				_, err := s.CheckKey(ctx, driver.KeyCheck{Account: acct.ID, KeyID: key.ID, Hash: key.Hash})
				return err
			})
			once("Open", func() error {
				return s.Open(ctx, driver.Opening{Account: acct.ID, Balance: 100, Allowance: 100, Period: period})
			})

			step := driver.Step{Account: acct.ID, Request: req, Now: t0,
				Key:     &driver.KeyCheck{Account: acct.ID, KeyID: key.ID, Hash: key.Hash},
				Rate:    &limit,
				Slot:    &driver.SlotClaim{Ceiling: 2, Lease: time.Minute},
				Credits: &driver.Reservation{Account: acct.ID, Request: req, APIs: []string{"hash"}, Amount: 3, Period: period, Allowance: 100, Now: t0, Expires: t0.Add(time.Hour)}}
			admit := func(what string, st driver.Step, want driver.Denial) {
				t.Helper()
				once(what, func() error {
					r, err := s.Admit(ctx, st)
					if err == nil && r.Denied != want {
						t.Errorf("%s: denied %d, want %d", what, r.Denied, want)
					}
					return err
				})
			}
			admit("Admit", step, driver.NotDenied)
			admit("Admit replayed", step, driver.NotDenied)
			short := step
			short.Request = driver.RequestID{2}
			short.Credits = &driver.Reservation{Account: acct.ID, Request: short.Request, Amount: 1000, Period: period, Allowance: 100, Now: t0, Expires: t0.Add(time.Hour)}
			admit("Admit denied", short, driver.DeniedCredits)
			once("Close", func() error {
				_, err := s.Close(ctx, driver.Closing{Account: acct.ID, Request: req, ReleaseSlot: true,
					Settlement: &driver.Settlement{Account: acct.ID, Request: req, Refund: 1, Period: period, Allowance: 100}})
				return err
			})
			once("Close again", func() error {
				_, err := s.Close(ctx, driver.Closing{Account: acct.ID, Request: req, ReleaseSlot: true,
					Settlement: &driver.Settlement{Account: acct.ID, Request: req, Refund: 1, Period: period, Allowance: 100}})
				return err
			})

			r2 := driver.RequestID{3}
			once("Reserve", func() error {
				_, err := s.Reserve(ctx, driver.Reservation{Account: acct.ID, Request: r2, Amount: 1, Period: period, Allowance: 100, Now: t0, Expires: t0.Add(time.Hour)})
				return err
			})
			once("Settle", func() error {
				_, err := s.Settle(ctx, driver.Settlement{Account: acct.ID, Request: r2, Period: period, Allowance: 100})
				return err
			})
			once("Adjust", func() error {
				_, err := s.Adjust(ctx, driver.Adjustment{Account: acct.ID, Request: driver.RequestID{4}, Amount: 5, Period: period, Allowance: 100})
				return err
			})
			once("Balance", func() error { _, err := s.Balance(ctx, acct.ID, t0, period, 100); return err })
			once("Usage", func() error { _, err := s.Usage(ctx, acct.ID, period); return err })
			once("SetShards", func() error { return s.SetShards(ctx, acct.ID, 2) })
			once("Allow", func() error { _, err := s.Allow(ctx, "k", limit, t0); return err })
			once("Peek", func() error { _, err := s.Peek(ctx, "k", limit, t0); return err })
			h := driver.RequestID{5}
			once("Acquire", func() error { _, err := s.Acquire(ctx, "k", h, 2, time.Minute, t0); return err })
			once("Renew", func() error { return s.Renew(ctx, "k", h, time.Minute, t0) })
			once("InUse", func() error { _, err := s.InUse(ctx, "k", t0); return err })
			once("Release", func() error { return s.Release(ctx, "k", h) })
			once("RotateKey", func() error {
				_, err := s.RotateKey(ctx, other.ID, auth.AnyRevision, auth.HashKey(auth.NewKeyValue()), t0.Add(time.Hour))
				return err
			})
			once("RevokeKey", func() error { _, err := s.RevokeKey(ctx, other.ID, auth.AnyRevision, t0.Add(time.Hour)); return err })

			b, err := s.Balance(ctx, acct.ID, t0, period, 100)
			if err != nil || b.Remaining != 100-3+1-1+5 {
				t.Errorf("balance %+v, %v; want 102 remaining", b, err)
			}
		})
	}
}

func optsName(o *postgres.Options) string {
	switch {
	case o == nil:
		return "default"
	case o.Shards > 1:
		return "shards"
	case o.Batch == 1:
		return "unbatched"
	}
	return "options"
}
