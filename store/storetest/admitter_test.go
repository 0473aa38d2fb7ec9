package storetest_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/store/storetest"
)

// refAdmitter is a reference Admitter over the memory stores, serialized by one lock. It
// is here to prove the suite: it is correct by construction, not fast.
type refAdmitter struct {
	keys   *memory.KeyStore
	ledger *memory.Ledger
	rates  *memory.RateLimiter
	slots  *memory.ConcurrencyLimiter

	mu       sync.Mutex
	admitted map[driver.RequestID]bool
}

func (a *refAdmitter) Admit(ctx context.Context, s driver.Step) (driver.StepResult, error) {
	var r driver.StepResult
	if err := ctx.Err(); err != nil {
		return r, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.admitted[s.Request] {
		if s.Credits != nil {
			b, err := a.ledger.Balance(ctx, s.Account, s.Now, s.Credits.Period, s.Credits.Allowance)
			r.Balance = b
			return r, err
		}
		return r, nil
	}
	if s.Key != nil {
		state, err := a.keys.CheckKey(ctx, *s.Key)
		if s.Key.Account != s.Account {
			state = driver.KeyUnknown // a check naming another account (see driver.Step)
		}
		if err != nil || state != driver.KeyLive {
			r.Denied, r.Key = driver.DeniedKey, state
			return r, err
		}
	}
	if s.Rate != nil {
		d, err := a.rates.Peek(ctx, s.Account, *s.Rate, s.Now)
		if err != nil {
			return r, err
		}
		// The stored timestamp, as Peek's decision on one event implies it; then the
		// decision on the step's events.
		tat := s.Now.UnixNano() + int64(d.ResetAfter)
		if d.Allowed {
			tat -= int64(s.Rate.Interval())
		}
		d, _ = driver.GCRAN(*s.Rate, s.EventCount(), tat, s.Now.UnixNano())
		if r.Rate = d; !d.Allowed {
			r.Denied = driver.DeniedRate
			return r, nil
		}
	}
	if s.Slot != nil {
		d, err := a.slots.Acquire(ctx, s.Account, s.Request, s.Slot.Ceiling, s.Slot.Lease, s.Now)
		if err != nil {
			return r, err
		}
		if r.Slot = d; !d.Acquired {
			r.Denied = driver.DeniedSlot
			return r, nil
		}
	}
	if s.Credits != nil {
		b, err := a.ledger.Reserve(ctx, *s.Credits)
		r.Balance = b
		if err != nil {
			if s.Slot != nil {
				a.slots.Release(ctx, s.Account, s.Request)
			}
			if errors.Is(err, driver.ErrInsufficientCredits) {
				r.Denied = driver.DeniedCredits
				return r, nil
			}
			return r, err
		}
	}
	if s.Rate != nil {
		d, err := a.rates.AllowN(ctx, s.Account, *s.Rate, s.EventCount(), s.Now)
		if err != nil {
			return r, err
		}
		r.Rate = d
	}
	a.admitted[s.Request] = true
	return r, nil
}

func (a *refAdmitter) Close(ctx context.Context, c driver.Closing) (driver.Balance, error) {
	var b driver.Balance
	if err := ctx.Err(); err != nil {
		return b, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if c.Settlement != nil {
		var err error
		if b, err = a.ledger.Settle(ctx, *c.Settlement); err != nil {
			return b, err
		}
	}
	if c.ReleaseSlot {
		return b, a.slots.Release(ctx, c.Account, c.Request)
	}
	return b, nil
}

func TestAdmitterSuite(t *testing.T) {
	newRef := func() *refAdmitter {
		return &refAdmitter{keys: memory.NewKeyStore(), ledger: memory.NewLedger(nil), rates: memory.NewRateLimiter(),
			slots: memory.NewConcurrencyLimiter(), admitted: map[driver.RequestID]bool{}}
	}
	roles := []struct {
		name  string
		roles func(a *refAdmitter) storetest.AdmitterStores
	}{
		{"everything", func(a *refAdmitter) storetest.AdmitterStores {
			return storetest.AdmitterStores{Admitter: a, Keys: a.keys, Ledger: a.ledger, Rates: a.rates, Slots: a.slots}
		}},
		{"limits", func(a *refAdmitter) storetest.AdmitterStores {
			return storetest.AdmitterStores{Admitter: a, Rates: a.rates, Slots: a.slots}
		}},
		{"keys and credits", func(a *refAdmitter) storetest.AdmitterStores {
			return storetest.AdmitterStores{Admitter: a, Keys: a.keys, Ledger: a.ledger}
		}},
	}
	for _, r := range roles {
		t.Run(r.name, func(t *testing.T) {
			storetest.TestAdmitter(t, func(*testing.T) storetest.AdmitterStores { return r.roles(newRef()) })
		})
	}
}

var _ auth.KeyStore = (*memory.KeyStore)(nil)
