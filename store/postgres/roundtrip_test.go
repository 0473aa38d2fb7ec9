package postgres_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/internal/meter"
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
			// A credit block rolled into the next (and the roll replayed), then settled,
			// all of it given back.
			b1, b2 := driver.RequestID{8}, driver.RequestID{9}
			once("Reserve a block", func() error {
				_, err := s.Reserve(ctx, driver.Reservation{Account: acct.ID, Request: b1, Amount: 2, Period: period, Allowance: 100, Now: t0, Expires: t0.Add(time.Hour)})
				return err
			})
			roll := driver.Roll{Settlement: driver.Settlement{Account: acct.ID, Request: b1, Refund: 2, Period: period, Allowance: 100, Now: t0},
				Counts: map[string]int64{"hash": 1},
				Next:   &driver.Reservation{Account: acct.ID, Request: b2, Amount: 2, Period: period, Allowance: 100, Now: t0, Expires: t0.Add(time.Hour)}}
			once("Roll", func() error { _, err := s.Roll(ctx, roll); return err })
			once("Roll replayed", func() error { _, err := s.Roll(ctx, roll); return err })
			once("Settle the block", func() error {
				_, err := s.Settle(ctx, driver.Settlement{Account: acct.ID, Request: b2, Refund: 2, Period: period, Allowance: 100, Now: t0})
				return err
			})
			once("Adjust", func() error {
				_, err := s.Adjust(ctx, driver.Adjustment{Account: acct.ID, Request: driver.RequestID{4}, Amount: 5, Period: period, Allowance: 100})
				return err
			})
			// A step that reaches the grants (the 5 just granted, lapsing in a day), and a
			// closing that gives a refund back to them: one call each too.
			once("Adjust, a grant that lapses", func() error {
				_, err := s.Adjust(ctx, driver.Adjustment{Account: acct.ID, Request: driver.RequestID{6}, Amount: 4, Expires: t0.Add(24 * time.Hour),
					Reason: "top-up", Period: period, Allowance: 100, Now: t0})
				return err
			})
			granted := step
			granted.Request = driver.RequestID{7}
			granted.Slot = nil
			granted.Credits = &driver.Reservation{Account: acct.ID, Request: granted.Request, Amount: 100, Period: period, Allowance: 100, Now: t0, Expires: t0.Add(time.Hour)}
			admit("Admit reaching the grants", granted, driver.NotDenied)
			once("Close refunding to the grants", func() error {
				b, err := s.Close(ctx, driver.Closing{Account: acct.ID, Request: granted.Request,
					Settlement: &driver.Settlement{Account: acct.ID, Request: granted.Request, Refund: 100, Period: period, Allowance: 100, Now: t0}})
				if err == nil && (b.Granted != 9 || b.Charge != (driver.Parts{})) {
					t.Errorf("after the refund: %+v, want the 9 granted back and nothing kept", b)
				}
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
			if err != nil || b.Remaining != 100-3+1-1+5+4 || b.Granted != 9 {
				t.Errorf("balance %+v, %v; want 106 remaining, 9 of them granted", b, err)
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

// decorated decorates the whole Store, as a metrics wrapper does (see driver.Wrapper):
// it embeds it, so that it plays every role the Store plays, and counts the steps it
// forwards.
type decorated struct {
	*postgres.Store
	steps atomic.Int64
}

func (d *decorated) Admit(ctx context.Context, s driver.Step) (driver.StepResult, error) {
	d.steps.Add(1)
	return d.Store.Admit(ctx, s)
}

func (d *decorated) Close(ctx context.Context, c driver.Closing) (driver.Balance, error) {
	d.steps.Add(1)
	return d.Store.Close(ctx, c)
}

func (d *decorated) Unwrap() any { return d.Store }

// TestDecoratedRoundTrips checks that a decorator of the whole Store, given to a
// meter.Meter in every role, keeps the round-trip budget of a paid call: one call to
// the database to admit it (key check, rate, slot, credits) and one to settle it, both
// through the decorator.
func TestDecoratedRoundTrips(t *testing.T) {
	db := &countingDB{DB: newPool(t, 4)}
	s, err := postgres.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := &decorated{Store: s}
	ctx := t.Context()
	acct, key := fixture("acct")
	if err := s.CreateAccount(ctx, acct, key); err != nil {
		t.Fatal(err)
	}
	if err := s.Open(ctx, driver.Opening{Account: acct.ID, Balance: 100, Allowance: 100, Period: period}); err != nil {
		t.Fatal(err)
	}
	m, err := meter.New(d, d, d, &meter.Options{Keys: d})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	plan := billing.Plan{Name: "pro", Credits: 100, RatePerMinute: 600, Concurrency: 10}
	for i := range 3 {
		before := db.calls.Load()
		tk, err := m.Admit(ctx, meter.Admission{Account: acct.ID, Plan: plan, Request: driver.RequestID{byte(i + 1)}, APIs: []string{"hash"}, Cost: 1, Now: t0,
			Key: &billing.KeyCheck{Account: acct.ID, KeyID: key.ID, Hash: key.Hash}})
		if err != nil {
			t.Fatal(err)
		}
		admitted := db.calls.Load()
		if _, err := m.Settle(ctx, &tk, meter.Outcome{Now: t0}); err != nil {
			t.Fatal(err)
		}
		if a, s := admitted-before, db.calls.Load()-admitted; a != 1 || s != 1 {
			t.Errorf("call %d: %d calls to the database to admit and %d to settle, want 1 and 1", i+1, a, s)
		}
	}
	if n := d.steps.Load(); n != 6 {
		t.Errorf("%d steps through the decorator, want 6: it sees every admission and settlement", n)
	}
}
