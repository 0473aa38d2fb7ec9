package blocks_test

import (
	"context"
	"errors"
	"fmt"
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

// gated is a memory ledger whose next roll or reservation can be held at a gate, as
// a slow ledger holds it, and then answered with an error instead of the ledger's
// answer.
type gated struct {
	*memory.Ledger
	mu          sync.Mutex
	rollGate    chan struct{}
	rollErr     error
	reserveGate chan struct{}
}

// holdRoll holds the next roll until the returned function is called with the error
// to answer it with (nil: the ledger's answer).
func (g *gated) holdRoll() func(error) {
	gate := make(chan struct{})
	g.mu.Lock()
	g.rollGate = gate
	g.mu.Unlock()
	return func(err error) {
		g.mu.Lock()
		g.rollErr = err
		g.mu.Unlock()
		close(gate)
	}
}

// holdReserve holds the next reservation until the returned function is called.
func (g *gated) holdReserve() func() {
	gate := make(chan struct{})
	g.mu.Lock()
	g.reserveGate = gate
	g.mu.Unlock()
	return func() { close(gate) }
}

func (g *gated) Roll(ctx context.Context, r driver.Roll) (driver.RollResult, error) {
	g.mu.Lock()
	gate := g.rollGate
	g.rollGate = nil
	g.mu.Unlock()
	if gate != nil {
		<-gate
		g.mu.Lock()
		err := g.rollErr
		g.rollErr = nil
		g.mu.Unlock()
		if err != nil {
			return driver.RollResult{}, err
		}
	}
	return g.Ledger.Roll(context.Background(), r)
}

func (g *gated) Reserve(ctx context.Context, r driver.Reservation) (driver.Balance, error) {
	g.mu.Lock()
	gate := g.reserveGate
	g.reserveGate = nil
	g.mu.Unlock()
	if gate != nil {
		<-gate
	}
	return g.Ledger.Reserve(context.Background(), r)
}

// warm makes account hot for b: a first call (served by the ledger, as a cold
// account's) at now, whose balance b is told.
func warm(t *testing.T, b *blocks.Blocks, l driver.Ledger, account string, plan billing.Plan, p driver.Period, now time.Time) {
	t.Helper()
	if _, ok := b.Take(t.Context(), blocks.Take{Account: account, Request: newRequest(), Amount: 1, Period: p, Allowance: plan.Credits, Now: now}); ok {
		t.Fatal("the first call of an account was served by a block")
	}
	bal, err := l.Balance(t.Context(), account, now, p, plan.Credits)
	if err != nil {
		t.Fatal(err)
	}
	b.Note(account, bal)
}

// take serves a call of cost from a block, or fails the test.
func take(t *testing.T, b *blocks.Blocks, account string, plan billing.Plan, p driver.Period, cost int64, now time.Time) driver.Settlement {
	t.Helper()
	id := newRequest()
	if _, ok := b.Take(t.Context(), blocks.Take{Account: account, Request: id, Amount: cost, APIs: []string{"hash"}, Period: p, Allowance: plan.Credits, Now: now}); !ok {
		t.Fatal("a hot account's call was not served by a block")
	}
	return driver.Settlement{Account: account, Request: id, Period: p, Allowance: plan.Credits, Now: now}
}

// settling settles s in the background; the returned function reports whether it
// returned, and its error.
type settling struct {
	done chan struct{}
	err  error
}

func settle(ctx context.Context, b *blocks.Blocks, s driver.Settlement) *settling {
	st := &settling{done: make(chan struct{})}
	go func() {
		defer close(st.done)
		_, st.err = b.Settle(ctx, s)
	}()
	return st
}

func (st *settling) returned() bool {
	select {
	case <-st.done:
		return true
	default:
		return false
	}
}

// TestSettleDuringVoidedRoll settles a call while the block's roll is in flight, and
// the roll comes back ErrVoided (the block's reservation expired during an outage):
// both settlements must return, with ErrVoided, not wait for a roll that never comes.
func TestSettleDuringVoidedRoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &gated{Ledger: memory.NewLedger(nil)}
		plan := billing.Plan{Name: "bulk", Credits: 100_000}
		now := time.Now()
		p := billing.MonthOf(now)
		open(t, l, "acct", plan, now)
		b, err := blocks.New(l, &blocks.Options{Hold: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Kill()
		warm(t, b, l, "acct", plan, p, now)
		c1, c2 := take(t, b, "acct", plan, p, 5, now), take(t, b, "acct", plan, p, 5, now)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		release := l.holdRoll()
		s1 := settle(ctx, b, c1)
		synctest.Wait() // c1's roll is at the gate
		s2 := settle(ctx, b, c2)
		synctest.Wait() // c2 waits for the roll after it
		release(fmt.Errorf("the ledger: %w", driver.ErrVoided))
		time.Sleep(time.Minute)
		synctest.Wait()
		for i, s := range []*settling{s1, s2} {
			if !s.returned() {
				t.Errorf("settlement %d still waits a minute after its block was voided", i+1)
			} else if !errors.Is(s.err, driver.ErrVoided) {
				t.Errorf("settlement %d: %v, want driver.ErrVoided", i+1, s.err)
			}
		}
		cancel()
		<-s1.done
		<-s2.done
	})
}

// TestSettleAfterCloseDuringFailedRoll settles a call after Close while another
// call's roll is in flight, and that roll fails: the settlement must return (with an
// error, for the meter to retry), not wait for a roll that no tick will start.
func TestSettleAfterCloseDuringFailedRoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &gated{Ledger: memory.NewLedger(nil)}
		plan := billing.Plan{Name: "bulk", Credits: 100_000}
		now := time.Now()
		p := billing.MonthOf(now)
		open(t, l, "acct", plan, now)
		b, err := blocks.New(l, &blocks.Options{Hold: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		warm(t, b, l, "acct", plan, p, now)
		c1, c2 := take(t, b, "acct", plan, p, 5, now), take(t, b, "acct", plan, p, 5, now)
		if err := b.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		release := l.holdRoll()
		s1 := settle(ctx, b, c1)
		synctest.Wait()
		s2 := settle(ctx, b, c2)
		synctest.Wait()
		release(errors.New("the ledger is down"))
		time.Sleep(time.Minute)
		synctest.Wait()
		for i, s := range []*settling{s1, s2} {
			if !s.returned() {
				t.Errorf("settlement %d still waits a minute after the roll failed", i+1)
			} else if s.err == nil {
				t.Errorf("settlement %d returned no error, though no roll recorded it", i+1)
			}
		}
		cancel()
		<-s1.done
		<-s2.done
	})
}

// TestTakeWaitsForLastRoll takes near exhaustion while the roll that gives back the
// account's old block is in flight, and it is its last: the call must go to the
// ledger once it ends, not wait for a roll that never comes.
func TestTakeWaitsForLastRoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &gated{Ledger: memory.NewLedger(nil)}
		plan := billing.Plan{Name: "small", Credits: 1000}
		now := time.Now()
		p := billing.MonthOf(now)
		open(t, l, "acct", plan, now)
		b, err := blocks.New(l, &blocks.Options{Hold: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Kill()
		warm(t, b, l, "acct", plan, p, now)
		c0 := take(t, b, "acct", plan, p, 1, now)
		if _, err := b.Settle(t.Context(), c0); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		type result struct {
			ok   bool
			done chan struct{}
		}
		takeBig := func() *result {
			r := &result{done: make(chan struct{})}
			go func() {
				defer close(r.done)
				_, r.ok = b.Take(ctx, blocks.Take{Account: "acct", Request: newRequest(), Amount: 200, APIs: []string{"hash"},
					Period: p, Allowance: plan.Credits, Now: now})
			}()
			return r
		}
		release := l.holdRoll()
		x := takeBig() // gives the block up: its roll waits at the gate
		synctest.Wait()
		y := takeBig() // comes while that roll is in flight
		synctest.Wait()
		release(nil)
		time.Sleep(time.Minute)
		synctest.Wait()
		for i, r := range []*result{x, y} {
			select {
			case <-r.done:
				if r.ok {
					t.Errorf("take %d was served by a block near exhaustion", i+1)
				}
			default:
				t.Errorf("take %d still waits a minute after the block's last roll", i+1)
			}
		}
		cancel()
		<-x.done
		<-y.done
	})
}

// TestCloseWhileReserving closes Blocks while a call reserves a block: Close gives
// everything back, so the block reserved meanwhile must be given back too once its
// call is settled.
func TestCloseWhileReserving(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &gated{Ledger: memory.NewLedger(nil)}
		plan := billing.Plan{Name: "bulk", Credits: 100_000}
		now := time.Now()
		p := billing.MonthOf(now)
		open(t, l, "acct", plan, now)
		b, err := blocks.New(l, &blocks.Options{Hold: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		warm(t, b, l, "acct", plan, p, now)
		release := l.holdReserve()
		var c driver.Settlement
		taken := make(chan struct{})
		go func() {
			defer close(taken)
			c = take(t, b, "acct", plan, p, 5, now)
		}()
		synctest.Wait() // the block's reservation is at the gate
		if err := b.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		release()
		<-taken
		if _, err := b.Settle(t.Context(), c); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if u := b.Unspent("acct"); u != 0 {
			t.Errorf("after Close and the last call's settlement, a block holds %d unspent credits", u)
		}
		wantLedger(t, l.Ledger, "acct", plan, now, 5, 1)
	})
}

// TestVoidedBlockForgotten voids a given-up block that still holds an open call: once
// the call is settled (ErrVoided), nothing of the account is kept.
func TestVoidedBlockForgotten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &gated{Ledger: memory.NewLedger(nil)}
		plan := billing.Plan{Name: "bulk", Credits: 100_000}
		now := time.Now()
		p := billing.MonthOf(now)
		open(t, l, "acct", plan, now)
		b, err := blocks.New(l, &blocks.Options{Hold: time.Minute, Idle: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Kill()
		warm(t, b, l, "acct", plan, p, now)
		c := take(t, b, "acct", plan, p, 5, now)
		time.Sleep(2 * time.Second) // idle: the block is given up, carrying the open call
		synctest.Wait()
		release := l.holdRoll()
		time.Sleep(20 * time.Second) // its refresh waits at the gate
		synctest.Wait()
		release(fmt.Errorf("the ledger: %w", driver.ErrVoided))
		synctest.Wait()
		if _, err := b.Settle(t.Context(), c); !errors.Is(err, driver.ErrVoided) {
			t.Fatalf("settlement of a voided block's call: %v, want driver.ErrVoided", err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := b.Accounts(); n != 0 {
			t.Errorf("%d accounts kept a minute after their last block was voided and its last call settled", n)
		}
	})
}

// TestUnsettledCallExpires admits a call from a block and never settles it (a
// handler that panicked, a lost ticket): as a reservation of its own would be voided
// at its expiry, what it holds must come back, not be carried by its block for as
// long as the instance lives.
func TestUnsettledCallExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := memory.NewLedger(nil)
		plan := billing.Plan{Name: "bulk", Credits: 100_000}
		open(t, l, "acct", plan, time.Now())
		in := newInstance(t, l, nil)
		defer in.meter.Close()
		in.call(t, "acct", plan, 1, 0, time.Now()) // cold: one by one
		tk, err := in.meter.Admit(t.Context(), meter.Admission{Account: "acct", Plan: plan, Request: newRequest(),
			APIs: []string{"hash"}, Cost: 5, Now: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		if time.Until(tk.Expires) > 2*time.Minute {
			t.Fatalf("the ticket expires in %s", time.Until(tk.Expires))
		}
		time.Sleep(100 * time.Second) // past the ticket's expiry (a minute)
		synctest.Wait()
		if _, err := l.Sweep(t.Context(), time.Now(), 100); err != nil {
			t.Fatal(err)
		}
		wantLedger(t, l, "acct", plan, time.Now(), 1, 1)
		if _, err := in.meter.Settle(t.Context(), &tk, meter.Outcome{Now: time.Now()}); !errors.Is(err, billing.ErrVoided) {
			t.Errorf("the settlement of a call past its expiry: %v, want billing.ErrVoided", err)
		}
	})
}

// ledgerState returns the balance of account "acct" of l at now in period p, of
// allowance, and the calls it counts in p.
func ledgerState(t *testing.T, l driver.Ledger, p driver.Period, allowance int64) (driver.Balance, map[string]int64) {
	t.Helper()
	bal, err := l.Balance(t.Context(), "acct", time.Now(), p, allowance)
	if err != nil {
		t.Fatal(err)
	}
	usage, err := l.Usage(t.Context(), "acct", p)
	if err != nil {
		t.Fatal(err)
	}
	return bal, usage
}

// grantOnly opens account "acct" of l on a plan of no allowance, with a grant of 1,000
// credits that lapses in 10 minutes, and returns the plan, now and the period.
func grantOnly(t *testing.T, l driver.Ledger) (billing.Plan, time.Time, driver.Period) {
	t.Helper()
	now := time.Now()
	p := billing.MonthOf(now)
	if err := l.Open(t.Context(), driver.Opening{Account: "acct", Period: p}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Adjust(t.Context(), driver.Adjustment{Account: "acct", Request: newRequest(), Amount: 1000, Reason: "grant",
		Expires: now.Add(10 * time.Minute), Period: p, Now: now}); err != nil {
		t.Fatal(err)
	}
	return billing.Plan{Name: "grants", Credits: 0}, now, p
}

// TestShortfallLosesCharge serves a call from a block whose credits come from a grant
// that lapses while the call is open: a reservation of its own keeps its charge (it
// took the credits before the lapse). The block's call must not be answered as
// recorded while its charge is not in the ledger.
func TestShortfallLosesCharge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := memory.NewLedger(nil)
		plan, now, p := grantOnly(t, l)
		b, err := blocks.New(l, &blocks.Options{Hold: time.Minute, Idle: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Kill()
		warm(t, b, l, "acct", plan, p, now)
		c := take(t, b, "acct", plan, p, 10, now)
		// The same call with a reservation of its own, for reference.
		ref := driver.Reservation{Account: "acct", Request: newRequest(), APIs: []string{"hash"}, Amount: 10, Period: p,
			Now: now, Expires: now.Add(time.Hour)}
		if _, err := l.Reserve(t.Context(), ref); err != nil {
			t.Fatal(err)
		}
		time.Sleep(11 * time.Minute) // the grant lapses while both calls are open
		synctest.Wait()
		if _, err := l.Settle(t.Context(), driver.Settlement{Account: "acct", Request: ref.Request, Period: p, Now: time.Now()}); err != nil {
			t.Fatal(err)
		}
		c.Now = time.Now()
		_, err = b.Settle(t.Context(), c)
		bal, berr := l.Balance(t.Context(), "acct", time.Now(), p, 0)
		if berr != nil {
			t.Fatal(berr)
		}
		if err == nil && bal.Used != 20 {
			t.Errorf("both calls settled without error, but the ledger holds %d used, want 20 (10 each)", bal.Used)
		}
	})
}

// TestPeriodChangeWithOpenCall keeps a call of one period open in a block across the
// renewal of the balance to the next: the call must not be charged to the next
// period (a reservation of its own is not), nor counted in its usage.
func TestPeriodChangeWithOpenCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := memory.NewLedger(nil)
		plan := billing.Plan{Name: "bulk", Credits: 1000}
		t0 := time.Now()
		p1 := driver.Period{Start: t0, End: t0.Add(time.Hour)}
		p2 := driver.Period{Start: p1.End, End: p1.End.Add(time.Hour)}
		if err := l.Open(t.Context(), driver.Opening{Account: "acct", Balance: 1000, Allowance: 1000, Period: p1}); err != nil {
			t.Fatal(err)
		}
		b, err := blocks.New(l, &blocks.Options{Hold: time.Minute, Idle: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Kill()
		warm(t, b, l, "acct", plan, p1, t0)
		c := take(t, b, "acct", plan, p1, 10, t0)
		// The same call with a reservation of its own, for reference.
		ref := driver.Reservation{Account: "acct", Request: newRequest(), APIs: []string{"hash"}, Amount: 10, Period: p1,
			Allowance: 1000, Now: t0, Expires: t0.Add(2 * time.Hour)}
		if _, err := l.Reserve(t.Context(), ref); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Hour + time.Minute)
		// A call of the next period renews the balance.
		if _, err := l.Balance(t.Context(), "acct", time.Now(), p2, 1000); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Second) // the block's refresh
		synctest.Wait()
		if _, err := l.Settle(t.Context(), driver.Settlement{Account: "acct", Request: ref.Request, Period: p1, Allowance: 1000, Now: time.Now()}); err != nil {
			t.Fatal(err)
		}
		c.Now = time.Now()
		if _, err := b.Settle(t.Context(), c); err != nil {
			t.Fatal(err)
		}
		if err := b.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		bal, u := ledgerState(t, l, p2, 1000)
		if bal.Used != 0 || bal.Remaining != 1000 || u["hash"] != 0 {
			t.Errorf("the next period: %d used, %d remaining, %d calls counted; want 0, 1000, 0 (the calls were of the period before)",
				bal.Used, bal.Remaining, u["hash"])
		}
	})
}

// TestLateCallGivesBlockBackFirst sends a call a little more than Idle after the
// last, before the tick gives the block up, and costing more than the block holds:
// the block's unspent credits must be back in the ledger before the ledger decides
// the call, as the package's rules say.
func TestLateCallGivesBlockBackFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &gated{Ledger: memory.NewLedger(nil)}
		plan := billing.Plan{Name: "small", Credits: 1000}
		t0 := time.Now()
		p := billing.MonthOf(t0)
		open(t, l, "acct", plan, t0)
		b, err := blocks.New(l, &blocks.Options{Hold: time.Minute, Idle: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Kill()
		time.Sleep(600 * time.Millisecond) // between two ticks (every Idle/2)
		now := time.Now()
		warm(t, b, l, "acct", plan, p, now)
		c := take(t, b, "acct", plan, p, 1, now) // a block of 125
		if _, err := b.Settle(t.Context(), c); err != nil {
			t.Fatal(err)
		}
		// The rest of the ledger's credits go elsewhere.
		if _, err := l.Adjust(t.Context(), driver.Adjustment{Account: "acct", Request: newRequest(), Amount: -870, Reason: "spent",
			Period: p, Allowance: plan.Credits, Now: now}); err != nil {
			t.Fatal(err)
		}
		unspent := b.Unspent("acct")
		time.Sleep(1050 * time.Millisecond) // more than Idle, before the tick that gives the block up
		release := l.holdRoll()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan bool, 1)
		go func() {
			_, ok := b.Take(ctx, blocks.Take{Account: "acct", Request: newRequest(), Amount: unspent + 1, APIs: []string{"hash"},
				Period: p, Allowance: plan.Credits, Now: time.Now()})
			done <- ok
		}()
		synctest.Wait()
		select {
		case ok := <-done:
			done <- ok
			bal, err := l.Balance(t.Context(), "acct", time.Now(), p, plan.Credits)
			if err != nil {
				t.Fatal(err)
			}
			t.Errorf("the call went to the ledger (%d remaining) while its block still held %d unspent credits", bal.Remaining, b.Unspent("acct"))
		default:
		}
		release(nil)
		<-done
	})
}

// TestSettleWhileClosing settles calls while Close waits for the blocks' rolls, as a
// shutdown does with calls still running: the settlements start rolls of their own
// while Close waits for those in flight.
func TestSettleWhileClosing(t *testing.T) {
	l := memory.NewLedger(nil)
	plan := billing.Plan{Name: "bulk", Credits: 100_000}
	now := time.Now()
	p := billing.MonthOf(now)
	const accounts, calls = 20, 10
	for round := range 20 {
		b, err := blocks.New(l, nil)
		if err != nil {
			t.Fatal(err)
		}
		var open []driver.Settlement
		for i := range accounts {
			name := fmt.Sprintf("acct-%d-%d", round, i)
			if err := l.Open(t.Context(), driver.Opening{Account: name, Balance: plan.Credits, Allowance: plan.Credits, Period: p}); err != nil {
				t.Fatal(err)
			}
			warm(t, b, l, name, plan, p, now)
			for range calls {
				open = append(open, take(t, b, name, plan, p, 1, now))
			}
		}
		var wg sync.WaitGroup
		for _, s := range open {
			wg.Go(func() { b.Settle(context.Background(), s) })
		}
		wg.Go(func() { b.Close(context.Background()) })
		wg.Wait()
	}
}

// flaky is a memory ledger whose rolls fail now and then, some after the ledger
// applied them (the answer lost).
type flaky struct {
	*memory.Ledger
	n atomic.Int64
}

func (f *flaky) Roll(ctx context.Context, r driver.Roll) (driver.RollResult, error) {
	switch f.n.Add(1) % 7 {
	case 3:
		return driver.RollResult{}, errors.New("the ledger is down")
	case 5:
		f.Ledger.Roll(ctx, r)
		return driver.RollResult{}, errors.New("the answer was lost")
	}
	return f.Ledger.Roll(ctx, r)
}

// TestExactWithFlakyRolls runs calls through two instances whose rolls fail now and
// then: every call answered without error is charged and counted, and no call is
// charged or counted more than once.
func TestExactWithFlakyRolls(t *testing.T) {
	l := &flaky{Ledger: memory.NewLedger(nil)}
	plan := billing.Plan{Name: "bulk", Credits: 10_000_000}
	open(t, l, "acct", plan, time.Now())
	opts := &blocks.Options{Size: 40, Idle: 20 * time.Millisecond, Hold: 4 * time.Second}
	ins := []instance{newInstance(t, l, opts), newInstance(t, l, opts)}
	var okUsed, allUsed, okCalls, allCalls atomic.Int64
	var wg sync.WaitGroup
	for i, in := range ins {
		for w := range 6 {
			wg.Go(func() {
				for c := range 200 {
					cost := int64(1 + (w+c)%4)
					refund := []int64{0, 0, cost, 1}[(i+w+c)%4] % (cost + 1)
					admitted, settled := in.call(t, "acct", plan, cost, refund, time.Now())
					if !admitted {
						t.Error("a call was refused")
						return
					}
					allUsed.Add(cost - refund)
					if refund != cost {
						allCalls.Add(1)
					}
					if settled {
						okUsed.Add(cost - refund)
						if refund != cost {
							okCalls.Add(1)
						}
					}
					if c%50 == 0 {
						time.Sleep(30 * time.Millisecond) // idle: blocks given up
					}
				}
			})
		}
	}
	wg.Wait()
	deadline := time.Now().Add(30 * time.Second)
	for _, in := range ins {
		for in.meter.Pending() > 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		in.meter.Close()
	}
	// What the blocks still held comes back at their expiry.
	time.Sleep(opts.Hold + time.Second)
	if _, err := l.Sweep(t.Context(), time.Now(), 1000); err != nil {
		t.Fatal(err)
	}
	b, err := l.Balance(t.Context(), "acct", time.Now(), billing.MonthOf(time.Now()), plan.Credits)
	if err != nil {
		t.Fatal(err)
	}
	u, err := l.Usage(t.Context(), "acct", billing.MonthOf(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("used %d (answered %d, all %d), calls %d (answered %d, all %d)", b.Used, okUsed.Load(), allUsed.Load(), u["hash"], okCalls.Load(), allCalls.Load())
	if b.Used < okUsed.Load() || b.Used > allUsed.Load() {
		t.Errorf("the ledger holds %d used; the calls answered kept %d, all calls %d", b.Used, okUsed.Load(), allUsed.Load())
	}
	if u["hash"] < okCalls.Load() || u["hash"] > allCalls.Load() {
		t.Errorf("the ledger counts %d calls; %d answered calls counted, %d in all", u["hash"], okCalls.Load(), allCalls.Load())
	}
	if b.Remaining+b.Used != plan.Credits {
		t.Errorf("%d remaining + %d used != %d: credits still held", b.Remaining, b.Used, plan.Credits)
	}
}

// TestCloseReportsFailedRolls closes Blocks while the ledger fails its last roll: the
// block's unspent credits are not given back, and Close must say so.
func TestCloseReportsFailedRolls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &gated{Ledger: memory.NewLedger(nil)}
		plan := billing.Plan{Name: "bulk", Credits: 100_000}
		now := time.Now()
		p := billing.MonthOf(now)
		open(t, l, "acct", plan, now)
		b, err := blocks.New(l, &blocks.Options{Hold: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		warm(t, b, l, "acct", plan, p, now)
		if _, err := b.Settle(t.Context(), take(t, b, "acct", plan, p, 5, now)); err != nil {
			t.Fatal(err)
		}
		release := l.holdRoll()
		closed := make(chan error, 1)
		go func() { closed <- b.Close(t.Context()) }()
		synctest.Wait()
		release(errors.New("the ledger is down"))
		if err := <-closed; err == nil {
			t.Errorf("Close returned no error, while a block holds %d unspent credits it could not give back", b.Unspent("acct"))
		}
	})
}

// refusing is a memory ledger that refuses every roll for good (store.ErrConflict),
// as a ledger refuses a roll it will never take, and counts them.
type refusing struct {
	*memory.Ledger
	rolls atomic.Int64
}

func (r *refusing) Roll(ctx context.Context, _ driver.Roll) (driver.RollResult, error) {
	r.rolls.Add(1)
	return driver.RollResult{}, fmt.Errorf("the ledger: the roll is refused: %w", store.ErrConflict)
}

// TestRollRefusedForGood has the ledger refuse a block's roll with a definite answer
// (store.ErrConflict): a roll is sent again only until a definite answer, so the
// block must not send it again and again (and serve calls whose charges it can never
// record); the settlement's error must be one the meter does not retry.
func TestRollRefusedForGood(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &refusing{Ledger: memory.NewLedger(nil)}
		plan := billing.Plan{Name: "bulk", Credits: 100_000}
		now := time.Now()
		p := billing.MonthOf(now)
		open(t, l, "acct", plan, now)
		b, err := blocks.New(l, &blocks.Options{Hold: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Kill()
		warm(t, b, l, "acct", plan, p, now)
		c := take(t, b, "acct", plan, p, 5, now)
		_, err = b.Settle(t.Context(), c)
		if !errors.Is(err, driver.ErrVoided) && !errors.Is(err, store.ErrConflict) {
			t.Errorf("settlement whose roll was refused for good: %v, want an error the meter does not retry", err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := l.rolls.Load(); n > 3 {
			t.Errorf("a roll refused for good was sent %d times in a minute", n)
		}
	})
}

// TestBatchCounts settles a batch whose APIs repeat, one of them failed, from a block
// and with a reservation of its own: both count the same calls.
func TestBatchCounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := memory.NewLedger(nil)
		plan := billing.Plan{Name: "bulk", Credits: 100_000}
		now := time.Now()
		p := billing.MonthOf(now)
		open(t, l, "blocks", plan, now)
		open(t, l, "plain", plan, now)
		b, err := blocks.New(l, nil)
		if err != nil {
			t.Fatal(err)
		}
		warm(t, b, l, "blocks", plan, p, now)
		apis := []string{"a", "a", "b", "c"}
		id := newRequest()
		if _, ok := b.Take(t.Context(), blocks.Take{Account: "blocks", Request: id, Amount: 4, APIs: apis, Period: p, Allowance: plan.Credits, Now: now}); !ok {
			t.Fatal("not served by a block")
		}
		s := driver.Settlement{Account: "blocks", Request: id, Refund: 2, Uncount: []string{"a", "c"}, Period: p, Allowance: plan.Credits, Now: now}
		if _, err := b.Settle(t.Context(), s); err != nil {
			t.Fatal(err)
		}
		if err := b.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		r := driver.Reservation{Account: "plain", Request: newRequest(), Amount: 4, APIs: apis, Period: p, Allowance: plan.Credits, Now: now, Expires: now.Add(time.Minute)}
		if _, err := l.Reserve(t.Context(), r); err != nil {
			t.Fatal(err)
		}
		s.Account, s.Request = "plain", r.Request
		if _, err := l.Settle(t.Context(), s); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"blocks", "plain"} {
			u, err := l.Usage(t.Context(), name, p)
			if err != nil {
				t.Fatal(err)
			}
			bal, err := l.Balance(t.Context(), name, now, p, plan.Credits)
			if err != nil {
				t.Fatal(err)
			}
			if u["a"] != 1 || u["b"] != 1 || u["c"] != 0 || bal.Used != 2 {
				t.Errorf("%s: usage %v, %d used; want a:1 b:1 and 2", name, u, bal.Used)
			}
		}
	})
}

// TestShortfallDuringRoll settles a call while its block's roll is in flight, and the
// grant lot that the block's credits came from lapses before the roll reaches the
// ledger: the roll's refund to the lapsed lot is lost, so the next reservation gets
// nothing, and the call settled meanwhile cannot be recorded. Its settlement must say
// it was not charged (ErrVoided) rather than succeed while the ledger holds no charge
// for it; the call the roll carried is charged and counted.
func TestShortfallDuringRoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &gated{Ledger: memory.NewLedger(nil)}
		plan, now, p := grantOnly(t, l)
		b, err := blocks.New(l, &blocks.Options{Hold: time.Hour, Idle: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Kill()
		warm(t, b, l, "acct", plan, p, now)
		carried := take(t, b, "acct", plan, p, 10, now)
		late := take(t, b, "acct", plan, p, 10, now)
		release := l.holdRoll()
		first := settle(t.Context(), b, carried)
		synctest.Wait() // the roll that records it waits at the gate
		second := settle(t.Context(), b, late)
		synctest.Wait()
		time.Sleep(11 * time.Minute)
		// Another call, or instance, reads the balance: the grant lot lapses.
		if bal, err := l.Balance(t.Context(), "acct", time.Now(), p, 0); err != nil || bal.Granted != 0 {
			t.Fatalf("after the grant's expiry: %+v, %v", bal, err)
		}
		release(nil)
		<-first.done
		<-second.done
		if first.err != nil {
			t.Errorf("the call the roll carried: %v, want it charged", first.err)
		}
		if !errors.Is(second.err, driver.ErrVoided) {
			t.Errorf("the call settled during the short roll: %v, want driver.ErrVoided (its charge is not in the ledger)", second.err)
		}
		if err := b.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		// The ledger holds the carried call's charge and count, and nothing of the other.
		bal, usage := ledgerState(t, l, p, 0)
		if bal.Used != 10 || usage["hash"] != 1 {
			t.Errorf("the ledger holds %d used and %d calls, want 10 and 1", bal.Used, usage["hash"])
		}
	})
}
