package postgres_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/blocks"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/internal/meter"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store/postgres"
	"github.com/tollgate-dev/tollgate/store/storetest"
)

// TestRollerSharded runs the roll suite with every account split into sub-balances.
func TestRollerSharded(t *testing.T) {
	testenv.SkipUnlessFull(t, "the roll suite again, on sharded balances")
	storetest.TestRoller(t, func(t *testing.T) driver.Ledger { return newStore(t, &postgres.Options{Shards: 8}) })
}

// TestHotRolls drives one account with chains of rolls, as credit blocks of several
// instances make them, beside plain paid calls, with each mitigation and through one
// Store and three: each roll is sent twice at once, through two Stores, and exactly
// one of the two settles while the other is a replay that reports what the next block
// holds. The account's allowance is less than the calls spend, so that blocks reach
// the grants and their rolls take the path that holds every shard, while the others
// hold one. No roll deadlocks, and the balance, the counts and the ledger are exact.
func TestHotRolls(t *testing.T) { eachHot(t, testHotRolls) }

func testHotRolls(t *testing.T, opts *postgres.Options, n int) {
	stores, pool := hotStores(t, opts, n)
	ctx := t.Context()
	const (
		acct                 = "rolled"
		workers, rolls, size = 16, 12, 100
		allowance, balance   = 1000, 3000
		expiry               = 90 * 24 * time.Hour
	)
	if err := stores[0].Open(ctx, driver.Opening{Account: acct, Balance: balance, Allowance: allowance, Period: period}); err != nil {
		t.Fatal(err)
	}
	block := func(id driver.RequestID, amount int64) driver.Reservation {
		return driver.Reservation{Account: acct, Request: id, Amount: amount, Period: period, Allowance: allowance, Now: t0, Expires: t0.Add(expiry)}
	}
	keep := func(w, i int) int64 { return int64((w+i)%5 + 1) }
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			id, held := newRequest(), int64(size)
			if _, err := stores[w%n].Reserve(ctx, block(id, held)); err != nil {
				t.Errorf("Reserve: %v", err)
				return
			}
			for i := range rolls {
				k := keep(w, i)
				next := block(newRequest(), held-k)
				r := driver.Roll{
					Settlement: driver.Settlement{Account: acct, Request: id, Refund: held - k, Period: period, Allowance: allowance, Now: t0},
					Counts:     map[string]int64{"hash": k},
					Next:       &next,
				}
				var (
					got  [2]driver.RollResult
					errs [2]error
					both sync.WaitGroup
				)
				for j := range 2 {
					both.Go(func() { got[j], errs[j] = stores[(w+j)%n].Roll(ctx, r) })
				}
				both.Wait()
				if err := errors.Join(errs[:]...); err != nil {
					t.Errorf("Roll: %v", err)
					return
				}
				if got[0].Replay == got[1].Replay || got[0].Next != held-k || got[1].Next != held-k {
					t.Errorf("a roll sent twice: %+v and %+v; want one replay, and the next block holding %d in both", got[0], got[1], held-k)
					return
				}
				id, held = next.Request, held-k
				// A paid call beside it.
				c := newRequest()
				step := driver.Step{Account: acct, Request: c, Now: t0, Credits: &driver.Reservation{Account: acct, Request: c, APIs: []string{"echo"},
					Amount: 1, Period: period, Allowance: allowance, Now: t0, Expires: t0.Add(expiry)}}
				if res, err := stores[(w+i)%n].Admit(ctx, step); err != nil || res.Denied != driver.NotDenied {
					t.Errorf("Admit: %+v, %v", res, err)
					return
				}
				if _, err := stores[(w+i+1)%n].Close(ctx, driver.Closing{Account: acct, Request: c,
					Settlement: &driver.Settlement{Account: acct, Request: c, Period: period, Allowance: allowance, Now: t0}}); err != nil {
					t.Errorf("Close: %v", err)
					return
				}
			}
			if _, err := stores[w%n].Settle(ctx, driver.Settlement{Account: acct, Request: id, Refund: held, Period: period, Allowance: allowance, Now: t0}); err != nil {
				t.Errorf("Settle of the last block: %v", err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	var spent, hashes int64
	for w := range workers {
		for i := range rolls {
			spent += keep(w, i) + 1
			hashes += keep(w, i)
		}
	}
	wantBalance(t, stores[0], acct, period, allowance, balance-spent, spent, hashes)
	u, err := stores[0].Usage(ctx, acct, period)
	if err != nil || u["echo"] != workers*rolls {
		t.Errorf("usage %v, %v; want %d calls of echo", u, err, workers*rolls)
	}
	checkLedger(t, stores[0], pool, acct, period, allowance)
	wantOpen(t, pool, acct, 0)
	// Both paths were taken: blocks that reached the grants, and blocks that did not.
	var granted, plain int
	err = pool.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE granted > 0), count(*) FILTER (WHERE granted IS NULL)
		FROM tollgate_ledger WHERE account_id = $1 AND kind = 'reserve' AND apis IS NULL`, acct).Scan(&granted, &plain)
	if err != nil || granted == 0 || plain == 0 {
		t.Errorf("%d blocks reached the grants and %d did not (%v); want some of each", granted, plain, err)
	}
}

// TestRollRechecksWhatItHolds checks that a roll on the fast path reads the balance row
// again once it holds its shard: a void that ran while the roll waited for the shard
// moved the account's next expiry past the next reservation's, so the roll must write
// it (taking the slow path, the balance row first), or the next reservation would not
// be voided at its expiry.
func TestRollRechecksWhatItHolds(t *testing.T) {
	pool, s, reserve := lockTest(t)
	ctx := t.Context()
	reserve(t0, t0.Add(30*time.Minute)) // sets the account's next expiry; voided below
	block := reserve(t0, t0.Add(3*time.Hour))

	gate, err := pool.Begin(ctx)
	must(t, err)
	defer gate.Rollback(context.Background())
	_, err = gate.Exec(ctx, `SELECT 1 FROM tollgate_balances WHERE account_id = 'a' FOR UPDATE`)
	must(t, err)
	_, err = gate.Exec(ctx, `SELECT 1 FROM tollgate_balance_shards WHERE account_id = 'a' FOR UPDATE`)
	must(t, err)

	now := t0.Add(10 * time.Minute)
	next := driver.Reservation{Account: "a", Request: newRequest(), Amount: 6, Period: period, Allowance: 100, Now: now, Expires: t0.Add(2 * time.Hour)}
	done := make(chan error, 1)
	go func() {
		_, err := s.Roll(context.Background(), driver.Roll{
			Settlement: driver.Settlement{Account: "a", Request: block, Refund: 6, Period: period, Allowance: 100, Now: now},
			Counts:     map[string]int64{"hash": 1},
			Next:       &next})
		done <- err
	}()
	waitFor(t, pool, 1)
	_, err = gate.Exec(ctx, `SELECT tollgate_void('a', $1, 64)`, t0.Add(30*time.Minute).UnixNano())
	must(t, err)
	must(t, gate.Commit(ctx))
	must(t, <-done)

	b, err := s.Balance(ctx, "a", t0.Add(2*time.Hour+time.Minute), period, 100)
	must(t, err)
	if b.Remaining != 96 || b.Used != 4 {
		t.Errorf("after the next reservation's expiry: %d remaining, %d used; want 96 and 4 (it was voided)", b.Remaining, b.Used)
	}
	wantOpen(t, pool, "a", 0)
}

// TestCreditBlocks runs one account's paid calls through three instances whose meters
// serve them from credit blocks (billing/blocks) over Stores on pools of their own,
// beside a fourth instance without blocks, with one balance row and with 16 shards:
// once the meters are closed (their blocks given back), the ledger holds exactly what
// the calls kept and counts each call that counted, no reservation open holds credits,
// and the blocks served most calls.
func TestCreditBlocks(t *testing.T) {
	for _, opts := range []*postgres.Options{nil, {Shards: 16}} {
		t.Run(optsName(opts), func(t *testing.T) {
			t.Parallel()
			stores, pool := hotStores(t, opts, 4)
			ctx := t.Context()
			plan := billing.Plan{Name: "bulk", Credits: 10_000_000}
			now := time.Now()
			p := billing.MonthOf(now)
			if err := stores[0].Open(ctx, driver.Opening{Account: "acct", Balance: plan.Credits, Allowance: plan.Credits, Period: p}); err != nil {
				t.Fatal(err)
			}
			meters := make([]*meter.Meter, len(stores))
			for i, s := range stores {
				var o *meter.Options
				if i < 3 {
					b, err := blocks.New(s, &blocks.Options{Size: []int64{50, 7, 200}[i]})
					if err != nil {
						t.Fatal(err)
					}
					o = &meter.Options{Blocks: b}
				}
				m, err := meter.New(s, s, s, o)
				if err != nil {
					t.Fatal(err)
				}
				meters[i] = m
			}
			const workers, calls = 6, 60
			var used, counted atomic.Int64
			var wg sync.WaitGroup
			for i, m := range meters {
				for w := range workers {
					wg.Go(func() {
						for c := range calls {
							cost := int64(1 + (w+c)%3)
							refund := []int64{0, 0, cost, 1}[(i+w+c)%4] % (cost + 1)
							tk, err := m.Admit(ctx, meter.Admission{Account: "acct", Plan: plan, Request: newRequest(), APIs: []string{"hash"}, Cost: cost, Now: time.Now()})
							if err != nil {
								t.Errorf("Admit: %v", err)
								return
							}
							var failed []string
							if refund == cost {
								failed = []string{"hash"}
							}
							if _, err := m.Settle(ctx, &tk, meter.Outcome{Refund: refund, Failed: failed, Now: time.Now()}); err != nil {
								t.Errorf("Settle: %v", err)
								return
							}
							used.Add(cost - refund)
							if refund != cost {
								counted.Add(1)
							}
						}
					})
				}
			}
			wg.Wait()
			for _, m := range meters {
				m.Close()
			}
			b, err := stores[0].Balance(ctx, "acct", time.Now(), p, plan.Credits)
			if err != nil {
				t.Fatal(err)
			}
			u, err := stores[0].Usage(ctx, "acct", p)
			if err != nil {
				t.Fatal(err)
			}
			if b.Remaining != plan.Credits-used.Load() || b.Used != used.Load() || u["hash"] != counted.Load() {
				t.Errorf("ledger: %d remaining, %d used, %d calls counted; want %d, %d and %d",
					b.Remaining, b.Used, u["hash"], plan.Credits-used.Load(), used.Load(), counted.Load())
			}
			// What a block still holds is given back (an empty block may stay open until
			// its expiry, holding nothing).
			var open, holding int
			err = pool.QueryRow(ctx, `
				SELECT count(*), count(*) FILTER (WHERE l.amount <> 0)
				FROM tollgate_reservations r JOIN tollgate_ledger l
				  ON l.account_id = r.account_id AND l.request_id = r.request_id AND l.kind = 'reserve'
				WHERE r.account_id = 'acct'`).Scan(&open, &holding)
			if err != nil || holding != 0 {
				t.Errorf("%d reservations open, %d of them holding credits (%v); want none holding any", open, holding, err)
			}
			var reserves, rolls int
			err = pool.QueryRow(ctx, `
				SELECT count(*) FILTER (WHERE apis IS NOT NULL), count(*) FILTER (WHERE apis IS NULL)
				FROM tollgate_ledger WHERE account_id = 'acct' AND kind = 'reserve'`).Scan(&reserves, &rolls)
			if err != nil {
				t.Fatal(err)
			}
			if total := len(meters) * workers * calls; reserves > total/2 {
				t.Errorf("%d reservations of calls for %d calls: the blocks served few of them", reserves, total)
			}
			t.Logf("%d calls: %d reservations of calls, %d of blocks", len(meters)*workers*calls, reserves, rolls)
		})
	}
}
