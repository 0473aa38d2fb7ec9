package blocks_test

import (
	"context"
	"crypto/rand"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/blocks"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/internal/meter"
	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// counting is a memory ledger that counts the reservations and rolls it is sent, and
// fails the rolls it is told to.
type counting struct {
	*memory.Ledger
	reserves, rolls atomic.Int64
	failRolls       atomic.Int64 // the next rolls that fail as an outage would
}

func (c *counting) Reserve(ctx context.Context, r driver.Reservation) (driver.Balance, error) {
	c.reserves.Add(1)
	return c.Ledger.Reserve(ctx, r)
}

func (c *counting) Roll(ctx context.Context, r driver.Roll) (driver.RollResult, error) {
	c.rolls.Add(1)
	if c.failRolls.Add(-1) >= 0 {
		return driver.RollResult{}, errors.New("the ledger is down")
	}
	c.failRolls.Store(0)
	return c.Ledger.Roll(ctx, r)
}

// An instance is a service instance's meter with credit blocks.
type instance struct {
	blocks *blocks.Blocks
	meter  *meter.Meter
}

func newInstance(t testing.TB, l driver.Ledger, opts *blocks.Options) instance {
	t.Helper()
	b, err := blocks.New(l, opts)
	if err != nil {
		t.Fatal(err)
	}
	m, err := meter.New(l, memory.NewRateLimiter(), memory.NewConcurrencyLimiter(), &meter.Options{Blocks: b})
	if err != nil {
		t.Fatal(err)
	}
	return instance{b, m}
}

func open(t testing.TB, l driver.Ledger, account string, plan billing.Plan, now time.Time) {
	t.Helper()
	err := l.Open(t.Context(), driver.Opening{Account: account, Balance: plan.Credits, Allowance: plan.Credits, Period: billing.MonthOf(now)})
	if err != nil {
		t.Fatal(err)
	}
}

func newRequest() billing.RequestID {
	var id billing.RequestID
	rand.Read(id[:])
	return id
}

// call makes one call of cost credits that gives back refund (a failed call when it
// is the whole cost), and returns whether it was admitted and whether its settlement
// was recorded.
func (in instance) call(t testing.TB, account string, plan billing.Plan, cost, refund int64, now time.Time) (admitted, settled bool) {
	t.Helper()
	ctx := context.Background()
	tk, err := in.meter.Admit(ctx, meter.Admission{Account: account, Plan: plan, Request: newRequest(), APIs: []string{"hash"}, Cost: cost, Now: now})
	if errors.Is(err, billing.ErrInsufficientCredits) {
		return false, false
	}
	if err != nil {
		t.Errorf("Admit: %v", err)
		return false, false
	}
	var failed []string
	if refund == cost {
		failed = []string{"hash"}
	}
	if _, err := in.meter.Settle(ctx, &tk, meter.Outcome{Refund: refund, Failed: failed, Now: now}); err != nil {
		return true, false
	}
	return true, true
}

func wantLedger(t *testing.T, l driver.Ledger, account string, plan billing.Plan, now time.Time, used, calls int64) {
	t.Helper()
	b, err := l.Balance(t.Context(), account, now, billing.MonthOf(now), plan.Credits)
	if err != nil {
		t.Fatal(err)
	}
	if b.Remaining != plan.Credits-used || b.Used != used {
		t.Errorf("ledger balance: %d remaining, %d used; want %d and %d", b.Remaining, b.Used, plan.Credits-used, used)
	}
	u, err := l.Usage(t.Context(), account, billing.MonthOf(now))
	if err != nil {
		t.Fatal(err)
	}
	if u["hash"] != calls {
		t.Errorf("ledger usage: %d calls, want %d", u["hash"], calls)
	}
}

// TestExactAcrossInstances runs one account's calls through three instances at once,
// each with its blocks, beside the calls of a fourth without blocks: once they are
// closed, the ledger holds exactly what the calls kept and counts each call that
// counted, and most calls took no reservation of their own.
func TestExactAcrossInstances(t *testing.T) {
	l := &counting{Ledger: memory.NewLedger(nil)}
	plan := billing.Plan{Name: "bulk", Credits: 10_000_000}
	now := time.Now()
	open(t, l, "acct", plan, now)
	ins := []instance{newInstance(t, l, nil), newInstance(t, l, &blocks.Options{Size: 50}), newInstance(t, l, &blocks.Options{Size: 7})}
	plain, err := meter.New(l, memory.NewRateLimiter(), memory.NewConcurrencyLimiter(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ins = append(ins, instance{meter: plain})
	const workers, calls = 8, 300
	var used, counted, total atomic.Int64
	var wg sync.WaitGroup
	for i, in := range ins {
		for w := range workers {
			wg.Go(func() {
				for c := range calls {
					cost := int64(1 + (w+c)%3)
					refund := []int64{0, 0, cost, 1}[(i+w+c)%4] % (cost + 1)
					admitted, settled := in.call(t, "acct", plan, cost, refund, time.Now())
					if !admitted || !settled {
						t.Errorf("a call was not admitted or settled: %v %v", admitted, settled)
						return
					}
					total.Add(1)
					used.Add(cost - refund)
					if refund != cost {
						counted.Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	for _, in := range ins {
		in.meter.Close()
	}
	wantLedger(t, l, "acct", plan, time.Now(), used.Load(), counted.Load())
	if r := l.reserves.Load(); r > total.Load()/2 {
		t.Errorf("%d reservations for %d calls: the blocks served few of them", r, total.Load())
	}
	t.Logf("%d calls: %d reservations, %d rolls", total.Load(), l.reserves.Load(), l.rolls.Load())
}

// TestKilledInstance kills an instance with calls open and charges not yet given
// back: at its blocks' expiry the sweep voids them, and the ledger holds what the
// answered calls kept, no more and no less.
func TestKilledInstance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := memory.NewLedger(nil)
		plan := billing.Plan{Name: "bulk", Credits: 100_000}
		open(t, l, "acct", plan, time.Now())
		in := newInstance(t, l, &blocks.Options{Hold: time.Minute})
		var used, counted int64
		for c := range 50 {
			cost, refund := int64(3), int64(c%4)
			if admitted, settled := in.call(t, "acct", plan, cost, refund, time.Now()); !admitted || !settled {
				t.Fatalf("call %d: admitted %v, settled %v", c, admitted, settled)
			}
			used += cost - refund
			if refund != cost {
				counted++
			}
		}
		// Calls open at the kill: admitted, never answered.
		for range 5 {
			if _, err := in.meter.Admit(t.Context(), meter.Admission{Account: "acct", Plan: plan, Request: newRequest(),
				APIs: []string{"hash"}, Cost: 3, Now: time.Now()}); err != nil {
				t.Fatal(err)
			}
		}
		if in.blocks.Unspent("acct") == 0 {
			t.Fatal("no block held credits at the kill")
		}
		in.blocks.Kill()
		time.Sleep(2 * time.Minute)
		if _, err := l.Sweep(t.Context(), time.Now(), 100); err != nil {
			t.Fatal(err)
		}
		wantLedger(t, l, "acct", plan, time.Now(), used, counted)
	})
}

// TestRefusalsNearExhaustion spends an account to nothing through one instance: as
// many calls are admitted as there were credits, every charge is recorded, and what
// the blocks held comes back before the ledger refuses a call.
func TestRefusalsNearExhaustion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := memory.NewLedger(nil)
		plan := billing.Plan{Name: "small", Credits: 1000}
		open(t, l, "acct", plan, time.Now())
		in := newInstance(t, l, nil)
		admitted := 0
		for range 1100 {
			ok, settled := in.call(t, "acct", plan, 1, 0, time.Now())
			if ok {
				admitted++
				if !settled {
					t.Fatal("a call's settlement failed")
				}
			}
			time.Sleep(time.Millisecond)
		}
		if admitted != 1000 {
			t.Errorf("%d calls admitted, want 1000", admitted)
		}
		in.meter.Close()
		wantLedger(t, l, "acct", plan, time.Now(), 1000, 1000)
	})
}

// TestStatusCountsUnspent reads an account's status while its block holds credits:
// the balance counts them as remaining.
func TestStatusCountsUnspent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := memory.NewLedger(nil)
		plan := billing.Plan{Name: "bulk", Credits: 100_000}
		open(t, l, "acct", plan, time.Now())
		in := newInstance(t, l, nil)
		for range 10 {
			in.call(t, "acct", plan, 2, 0, time.Now())
		}
		if in.blocks.Unspent("acct") == 0 {
			t.Fatal("no block holds credits")
		}
		s, err := in.meter.Status(t.Context(), "acct", plan, billing.Period{}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if s.Balance.Remaining != plan.Credits-20 || s.Balance.Used != 20 || s.Usage["hash"] < 1 {
			t.Errorf("status: %d remaining, %d used, usage %v; want %d, 20", s.Balance.Remaining, s.Balance.Used, s.Usage, plan.Credits-20)
		}
		in.meter.Close()
		wantLedger(t, l, "acct", plan, time.Now(), 20, 10)
	})
}

// TestColdAccount serves calls that come further apart than Idle one by one: no block
// holds the account's credits.
func TestColdAccount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &counting{Ledger: memory.NewLedger(nil)}
		plan := billing.Plan{Name: "bulk", Credits: 100_000}
		open(t, l, "acct", plan, time.Now())
		in := newInstance(t, l, &blocks.Options{Idle: time.Second})
		for range 5 {
			in.call(t, "acct", plan, 2, 0, time.Now())
			if u := in.blocks.Unspent("acct"); u != 0 {
				t.Errorf("a block holds %d credits of a cold account", u)
			}
			time.Sleep(2 * time.Second)
		}
		if l.reserves.Load() != 5 || l.rolls.Load() != 0 {
			t.Errorf("%d reservations and %d rolls for 5 cold calls, want 5 and 0", l.reserves.Load(), l.rolls.Load())
		}
		in.meter.Close()
	})
}

// TestIdleBlockGivenBack leaves a block unused for Idle: its unspent credits go back
// to the ledger, and its charges are there.
func TestIdleBlockGivenBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := memory.NewLedger(nil)
		plan := billing.Plan{Name: "bulk", Credits: 100_000}
		open(t, l, "acct", plan, time.Now())
		in := newInstance(t, l, &blocks.Options{Idle: time.Second})
		defer in.meter.Close()
		for range 10 {
			in.call(t, "acct", plan, 1, 0, time.Now())
		}
		if in.blocks.Unspent("acct") == 0 {
			t.Fatal("no block holds credits")
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if u := in.blocks.Unspent("acct"); u != 0 {
			t.Errorf("an idle block still holds %d credits", u)
		}
		wantLedger(t, l, "acct", plan, time.Now(), 10, 10)
	})
}

// TestRollOutage fails rolls as an outage would: the calls' settlements fail, the
// meter retries them, and once the ledger answers, every charge is recorded once.
func TestRollOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &counting{Ledger: memory.NewLedger(nil)}
		plan := billing.Plan{Name: "bulk", Credits: 100_000}
		open(t, l, "acct", plan, time.Now())
		in := newInstance(t, l, nil)
		in.call(t, "acct", plan, 1, 0, time.Now()) // cold: one by one
		l.failRolls.Store(3)
		failed := 0
		for range 10 {
			if admitted, settled := in.call(t, "acct", plan, 1, 0, time.Now()); !admitted {
				t.Fatal("a call was refused")
			} else if !settled {
				failed++
			}
		}
		if failed == 0 {
			t.Error("no settlement failed while the rolls failed")
		}
		time.Sleep(10 * time.Second) // the retries
		synctest.Wait()
		in.meter.Close()
		wantLedger(t, l, "acct", plan, time.Now(), 11, 11)
	})
}

// TestSettleErrors covers what a settlement of a block's call refuses.
func TestSettleErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := memory.NewLedger(nil)
		plan := billing.Plan{Name: "bulk", Credits: 100_000}
		open(t, l, "acct", plan, time.Now())
		in := newInstance(t, l, nil)
		defer in.meter.Close()
		in.call(t, "acct", plan, 1, 0, time.Now())
		id := newRequest()
		tk, err := in.meter.Admit(t.Context(), meter.Admission{Account: "acct", Plan: plan, Request: id, APIs: []string{"hash"}, Cost: 2, Now: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		_, err = in.blocks.Settle(t.Context(), driver.Settlement{Account: "acct", Request: id, Refund: 3})
		if !errors.Is(err, store.ErrConflict) {
			t.Errorf("a refund above the cost: %v, want store.ErrConflict", err)
		}
		if _, err := in.meter.Settle(t.Context(), &tk, meter.Outcome{Now: time.Now()}); err != nil {
			t.Errorf("Settle: %v", err)
		}
	})
}

// TestNeedsRoller refuses a ledger that cannot roll.
func TestNeedsRoller(t *testing.T) {
	type plain struct{ driver.Ledger }
	if _, err := blocks.New(plain{memory.NewLedger(nil)}, nil); err == nil {
		t.Error("New accepted a ledger that is no driver.Roller")
	}
}

// TestSlotFreedDuringRoll settles a call that took its credits from a block and holds
// the account's one concurrency slot while the block's roll is slow: the slot is free
// before the roll answers (the settlement waits for both at once, not one after the
// other), and the settlement returns only once the roll has recorded the charge.
func TestSlotFreedDuringRoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &gated{Ledger: memory.NewLedger(nil)}
		plan := billing.Plan{Name: "one", Credits: 100_000, Concurrency: 1}
		open(t, l, "acct", plan, time.Now())
		in := newInstance(t, l, nil)
		defer in.meter.Close()
		for range 3 { // the first is cold; the next take a block
			in.call(t, "acct", plan, 1, 0, time.Now())
		}
		if in.blocks.Unspent("acct") == 0 {
			t.Fatal("no block holds credits")
		}
		ctx := context.Background()
		admission := func() meter.Admission {
			return meter.Admission{Account: "acct", Plan: plan, Request: newRequest(), APIs: []string{"hash"}, Cost: 1, Now: time.Now()}
		}
		tk, err := in.meter.Admit(ctx, admission())
		if err != nil {
			t.Fatal(err)
		}
		release := l.holdRoll()
		var once sync.Once
		t.Cleanup(func() { once.Do(func() { release(nil) }) }) // a failure below leaves no roll held
		settled := make(chan error, 1)
		go func() {
			_, err := in.meter.Settle(ctx, &tk, meter.Outcome{Now: time.Now()})
			settled <- err
		}()
		synctest.Wait() // the settlement waits for the roll
		select {
		case err := <-settled:
			t.Fatalf("the settlement returned before its roll: %v", err)
		default:
		}
		next, err := in.meter.Admit(ctx, admission())
		if err != nil {
			t.Fatalf("the next call, while the roll is on its way: %v (the slot was not freed)", err)
		}
		once.Do(func() { release(nil) })
		if err := <-settled; err != nil {
			t.Fatal(err)
		}
		if _, err := in.meter.Settle(ctx, &next, meter.Outcome{Now: time.Now()}); err != nil {
			t.Fatal(err)
		}
		in.meter.Close()
		wantLedger(t, l, "acct", plan, time.Now(), 5, 5)
	})
}
