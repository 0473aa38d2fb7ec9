package meter_test

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/internal/meter"
)

// TestConcurrentAdmitNeverOverspends races 200 cost-1 calls for 100 credits.
func TestConcurrentAdmitNeverOverspends(t *testing.T) {
	const callers, credits = 200, 100
	f := newFixture(t, nil)
	plan := billing.Plan{Name: "bulk", Credits: credits}
	f.open(t, "acct", plan, credits, t0)

	var admitted, refused atomic.Int64
	tickets := make([]meter.Ticket, callers)
	ok := make([]bool, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			tk, err := f.meter.Admit(t.Context(), meter.Admission{
				Account: "acct", Plan: plan, Request: rid(uint64(i + 1)), APIs: []string{"geo"}, Cost: 1, Now: t0,
			})
			switch {
			case err == nil:
				admitted.Add(1)
				tickets[i], ok[i] = tk, true
			case errors.Is(err, billing.ErrInsufficientCredits):
				refused.Add(1)
			default:
				t.Errorf("Admit #%d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if admitted.Load() != credits || refused.Load() != callers-credits {
		t.Errorf("admitted %d and refused %d, want %d and %d", admitted.Load(), refused.Load(), credits, callers-credits)
	}
	want := billing.Balance{Remaining: 0, Used: credits, Allowance: credits, Period: billing.MonthOf(t0)}
	if got := f.balance(t, "acct", plan, t0); got != want {
		t.Errorf("balance = %+v, want %+v", got, want)
	}
	if got := f.usage(t, "acct", t0)["geo"]; got != credits {
		t.Errorf("usage = %d, want %d", got, credits)
	}

	// Settling every admitted call concurrently, keeping the charge, changes nothing.
	for i := range tickets {
		if ok[i] {
			wg.Go(func() {
				if _, err := f.meter.Settle(t.Context(), &tickets[i], meter.Outcome{Now: t0}); err != nil {
					t.Errorf("Settle #%d: %v", i, err)
				}
			})
		}
	}
	wg.Wait()
	if got := f.balance(t, "acct", plan, t0); got != want {
		t.Errorf("balance after settling = %+v, want %+v", got, want)
	}
}

// TestConcurrentAdmitCeiling holds calls open and checks the concurrency ceiling.
func TestConcurrentAdmitCeiling(t *testing.T) {
	const ceiling = 5
	plan := billing.Plan{Name: "team", Credits: 1_000_000, Concurrency: ceiling}

	t.Run("all admitted first, settled later", func(t *testing.T) {
		const callers = 50
		f := newFixture(t, nil)
		f.open(t, "acct", plan, plan.Credits, t0)
		var (
			mu      sync.Mutex
			held    []meter.Ticket
			limited atomic.Int64
			wg      sync.WaitGroup
		)
		for i := range callers {
			wg.Go(func() {
				tk, err := f.meter.Admit(t.Context(), meter.Admission{
					Account: "acct", Plan: plan, Request: rid(uint64(i + 1)), Cost: 1, Now: t0,
				})
				switch {
				case err == nil:
					mu.Lock()
					held = append(held, tk)
					mu.Unlock()
				case errors.Is(err, meter.ErrConcurrencyLimited):
					limited.Add(1)
				default:
					t.Errorf("Admit #%d: %v", i, err)
				}
			})
		}
		wg.Wait()
		if len(held) != ceiling || limited.Load() != callers-ceiling {
			t.Fatalf("admitted %d and limited %d, want %d and %d", len(held), limited.Load(), ceiling, callers-ceiling)
		}
		if got := f.inUse(t, "acct", t0); got != ceiling {
			t.Errorf("slots in use = %d, want %d", got, ceiling)
		}
		// Refused calls were charged nothing.
		if got := f.balance(t, "acct", plan, t0); got.Used != ceiling {
			t.Errorf("used = %d, want %d", got.Used, ceiling)
		}
		for i := range held {
			wg.Go(func() {
				if _, err := f.meter.Settle(t.Context(), &held[i], meter.Outcome{Now: t0}); err != nil {
					t.Errorf("Settle: %v", err)
				}
			})
		}
		wg.Wait()
		if got := f.inUse(t, "acct", t0); got != 0 {
			t.Errorf("slots in use after settling = %d, want 0", got)
		}
	})

	t.Run("admit and settle churn", func(t *testing.T) {
		const workers, rounds = 20, 50
		f := newFixture(t, nil)
		f.open(t, "acct", plan, plan.Credits, t0)
		var (
			running, peak, admitted atomic.Int64
			next                    atomic.Uint64
			wg                      sync.WaitGroup
		)
		for range workers {
			wg.Go(func() {
				for r := range rounds {
					now := t0.Add(time.Duration(r) * time.Millisecond)
					tk, err := f.meter.Admit(t.Context(), meter.Admission{
						Account: "acct", Plan: plan, Request: rid(next.Add(1)), Cost: 1, Now: now,
					})
					if errors.Is(err, meter.ErrConcurrencyLimited) {
						continue
					}
					if err != nil {
						t.Errorf("Admit: %v", err)
						return
					}
					// Counted between admission and settlement, so never more than
					// the slots actually held.
					n := running.Add(1)
					for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
					}
					admitted.Add(1)
					if n, err := f.slots.InUse(t.Context(), "acct", now); err != nil || n > ceiling {
						t.Errorf("slots in use = %d (%v), want at most %d", n, err, ceiling)
					}
					runtime.Gosched()
					running.Add(-1)
					if _, err := f.meter.Settle(t.Context(), &tk, meter.Outcome{Now: now}); err != nil {
						t.Errorf("Settle: %v", err)
						return
					}
				}
			})
		}
		wg.Wait()
		if p := peak.Load(); p > ceiling || p < 1 {
			t.Errorf("peak of calls admitted at once = %d, want 1..%d", p, ceiling)
		}
		if got := f.balance(t, "acct", plan, t0); got.Used != admitted.Load() {
			t.Errorf("used = %d, want one credit per admitted call (%d)", got.Used, admitted.Load())
		}
		if got := f.inUse(t, "acct", t0.Add(time.Second)); got != 0 {
			t.Errorf("slots in use at the end = %d, want 0", got)
		}
	})
}
