package billing_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// stepStore is an Admitter over memory stores that counts its round trips: one per
// Admit or Close, and one per call of a plain method. It holds the parts it is given.
type stepStore struct {
	*memory.KeyStore
	*memory.Ledger
	*memory.RateLimiter
	*memory.ConcurrencyLimiter
	steps, closes, plain atomic.Int32
}

func newStepStore() *stepStore {
	return &stepStore{KeyStore: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
		RateLimiter: memory.NewRateLimiter(), ConcurrencyLimiter: memory.NewConcurrencyLimiter()}
}

func (s *stepStore) trips() int32 { return s.steps.Load() + s.closes.Load() + s.plain.Load() }

func (s *stepStore) Admit(ctx context.Context, st billing.Step) (billing.StepResult, error) {
	s.steps.Add(1)
	var r billing.StepResult
	if st.Key != nil {
		if r.Key, _ = s.KeyStore.CheckKey(ctx, *st.Key); r.Key != billing.KeyLive {
			r.Denied = billing.DeniedKey
			return r, nil
		}
	}
	if st.Rate != nil {
		if r.Rate, _ = s.RateLimiter.Allow(ctx, st.Account, *st.Rate, st.Now); !r.Rate.Allowed {
			r.Denied = billing.DeniedRate
			return r, nil
		}
	}
	if st.Slot != nil {
		if r.Slot, _ = s.ConcurrencyLimiter.Acquire(ctx, st.Account, st.Request, st.Slot.Ceiling, st.Slot.Lease, st.Now); !r.Slot.Acquired {
			r.Denied = billing.DeniedSlot
			return r, nil
		}
	}
	if st.Credits != nil {
		var err error
		if r.Balance, err = s.Ledger.Reserve(ctx, *st.Credits); errors.Is(err, billing.ErrInsufficientCredits) {
			if st.Slot != nil {
				s.ConcurrencyLimiter.Release(ctx, st.Account, st.Request)
			}
			r.Denied = billing.DeniedCredits
			return r, nil
		}
	}
	return r, nil
}

func (s *stepStore) Close(ctx context.Context, c billing.Closing) (billing.Balance, error) {
	s.closes.Add(1)
	var b billing.Balance
	if c.Settlement != nil {
		b, _ = s.Ledger.Settle(ctx, *c.Settlement)
	}
	if c.ReleaseSlot {
		s.ConcurrencyLimiter.Release(ctx, c.Account, c.Request)
	}
	return b, nil
}

// The plain methods the Meter may call, counted.
func (s *stepStore) Allow(ctx context.Context, key string, l billing.Limit, now time.Time) (billing.RateDecision, error) {
	s.plain.Add(1)
	return s.RateLimiter.Allow(ctx, key, l, now)
}

func (s *stepStore) Reserve(ctx context.Context, r billing.Reservation) (billing.Balance, error) {
	s.plain.Add(1)
	return s.Ledger.Reserve(ctx, r)
}

func (s *stepStore) CheckKey(ctx context.Context, c billing.KeyCheck) (billing.KeyState, error) {
	s.plain.Add(1)
	return s.KeyStore.CheckKey(ctx, c)
}

var roundTripPlan = billing.Plan{Name: "pro", Credits: 10, RatePerMinute: 600, Concurrency: 5}

// prepare gives account "a" a key and a balance in s.
func prepare(t *testing.T, s *stepStore) auth.Key {
	t.Helper()
	key := auth.Key{ID: "k", AccountID: "a", Hash: auth.HashKey(auth.NewKeyValue())}
	if err := s.KeyStore.CreateAccount(t.Context(), auth.Account{ID: "a", Plan: "pro"}, key); err != nil {
		t.Fatal(err)
	}
	if err := s.Ledger.Open(t.Context(), billing.Opening{Account: "a", Balance: 10, Allowance: 10, Period: billing.MonthOf(jan15)}); err != nil {
		t.Fatal(err)
	}
	return key
}

var jan15 = time.Date(2030, 1, 15, 0, 0, 0, 0, time.UTC)

// TestOneRoundTripPerStore checks that the Meter sends every part a store holds in one
// step: a deployment on one store admits in one round trip and settles in one; limits
// on one store and keys and credits on another take one each.
func TestOneRoundTripPerStore(t *testing.T) {
	tests := []struct {
		name string
		// stores returns ledger, rates, slots, keys and the stores to count.
		stores         func(one, two *stepStore) (billing.Ledger, billing.RateLimiter, billing.ConcurrencyLimiter, billing.KeyChecker)
		admit, settle  [2]int32 // round trips to one and two
		withKeyCheck   bool
		ledgerInTwo    bool
		keysInTwoStore bool
	}{
		{"one store", func(one, _ *stepStore) (billing.Ledger, billing.RateLimiter, billing.ConcurrencyLimiter, billing.KeyChecker) {
			return one, one, one, one
		}, [2]int32{1, 0}, [2]int32{1, 0}, true, false, false},
		{"limits apart from keys and credits", func(one, two *stepStore) (billing.Ledger, billing.RateLimiter, billing.ConcurrencyLimiter, billing.KeyChecker) {
			return two, one, one, two
		}, [2]int32{1, 1}, [2]int32{1, 1}, true, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			one, two := newStepStore(), newStepStore()
			ledger, rates, slots, keys := tt.stores(one, two)
			keyStore := one
			if tt.keysInTwoStore {
				keyStore = two
			}
			key := prepare(t, keyStore)
			if tt.ledgerInTwo && !tt.keysInTwoStore {
				prepare(t, two)
			}
			m, err := billing.NewMeter(ledger, rates, slots, &billing.MeterOptions{Keys: keys})
			if err != nil {
				t.Fatal(err)
			}
			a := billing.Admission{Account: "a", Plan: roundTripPlan, Request: billing.RequestID{1}, APIs: []string{"x"}, Cost: 1, Now: jan15,
				Key: &billing.KeyCheck{Account: "a", KeyID: key.ID, Hash: key.Hash}}
			tk, err := m.Admit(t.Context(), a)
			if err != nil {
				t.Fatal(err)
			}
			if got := [2]int32{one.trips(), two.trips()}; got != tt.admit {
				t.Errorf("admission took %v round trips, want %v", got, tt.admit)
			}
			b, err := m.Settle(t.Context(), &tk, billing.Outcome{Now: jan15})
			if err != nil || b.Remaining != 9 {
				t.Fatalf("Settle: %v, remaining %d", err, b.Remaining)
			}
			if got := [2]int32{one.trips(), two.trips()}; got != [2]int32{tt.admit[0] + tt.settle[0], tt.admit[1] + tt.settle[1]} {
				t.Errorf("settlement took %v round trips in all, want %v more than admission", got, tt.settle)
			}
		})
	}
}

// TestAdmitUndoesEarlierStores checks that a refusal by a later store frees what an
// earlier store took, and that a stale key is a KeyError.
func TestAdmitUndoesEarlierStores(t *testing.T) {
	limits, money := newStepStore(), newStepStore()
	key := prepare(t, money)
	m, err := billing.NewMeter(money, limits, limits, &billing.MeterOptions{Keys: money})
	if err != nil {
		t.Fatal(err)
	}
	check := &billing.KeyCheck{Account: "a", KeyID: key.ID, Hash: key.Hash}
	// Credits short: the slot taken by the limits store is released.
	_, err = m.Admit(t.Context(), billing.Admission{Account: "a", Plan: roundTripPlan, Request: billing.RequestID{1}, Cost: 11, Now: jan15, Key: check})
	if !errors.Is(err, billing.ErrInsufficientCredits) {
		t.Fatalf("Admit: %v, want insufficient credits", err)
	}
	if n, _ := limits.InUse(t.Context(), "a", jan15); n != 0 {
		t.Errorf("%d slots held after the refusal, want 0", n)
	}
	// A revoked key: a KeyError, and again nothing held.
	if _, err := money.RevokeKey(t.Context(), key.ID, jan15); err != nil {
		t.Fatal(err)
	}
	_, err = m.Admit(t.Context(), billing.Admission{Account: "a", Plan: roundTripPlan, Request: billing.RequestID{2}, Cost: 1, Now: jan15, Key: check})
	var ke *billing.KeyError
	if !errors.As(err, &ke) || ke.State != billing.KeyRevoked || !errors.Is(err, billing.ErrKeyChanged) {
		t.Fatalf("Admit with a revoked key: %v, want a KeyError with KeyRevoked", err)
	}
	if n, _ := limits.InUse(t.Context(), "a", jan15); n != 0 {
		t.Errorf("%d slots held after the refusal, want 0", n)
	}
	if b, _ := money.Balance(t.Context(), "a", billing.MonthOf(jan15), 10); b.Remaining != 10 {
		t.Errorf("remaining %d, want 10", b.Remaining)
	}
}

// TestAdmitKeyCheckNeedsAChecker checks that an admission with a key check and no key
// checker is an error, not a silent pass.
func TestAdmitKeyCheckNeedsAChecker(t *testing.T) {
	m, err := billing.NewMeter(memory.NewLedger(nil), memory.NewRateLimiter(), memory.NewConcurrencyLimiter(), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Admit(t.Context(), billing.Admission{Account: "a", Plan: roundTripPlan, Cost: 1, Now: jan15, Key: &billing.KeyCheck{Account: "a"}})
	if err == nil {
		t.Error("an admission with a key check passed without a key checker")
	}
}

// flakyStore is an Admitter whose Admit applies the step and then reports an error, as a
// connection that breaks after the store committed does, and whose Close fails until
// healed.
type flakyStore struct {
	*stepStore
	broken atomic.Bool
}

func (f *flakyStore) Admit(ctx context.Context, st billing.Step) (billing.StepResult, error) {
	f.stepStore.Admit(ctx, st)
	return billing.StepResult{}, errors.New("connection reset by peer")
}

func (f *flakyStore) Close(ctx context.Context, c billing.Closing) (billing.Balance, error) {
	if f.broken.Load() {
		return billing.Balance{}, errors.New("connection refused")
	}
	return f.stepStore.Close(ctx, c)
}

// TestAdmissionInDoubtIsUndone checks that an admission whose answer was lost (the
// store took the credits and the slot, then the connection broke) is undone in the
// background once the store answers again: the account is not charged for a call that
// was answered with an error.
func TestAdmissionInDoubtIsUndone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &flakyStore{stepStore: newStepStore()}
		f.broken.Store(true)
		prepare(t, f.stepStore)
		m, err := billing.NewMeter(f, f, f, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = m.Admit(t.Context(), billing.Admission{Account: "a", Plan: roundTripPlan, Request: billing.RequestID{9}, APIs: []string{"x"}, Cost: 4, Now: jan15})
		if err == nil {
			t.Fatal("Admit succeeded over a broken connection")
		}
		if b, _ := f.Ledger.Balance(t.Context(), "a", billing.MonthOf(jan15), 10); b.Remaining != 6 {
			t.Fatalf("remaining %d: the store should have taken the credits before the error", b.Remaining)
		}
		time.Sleep(10 * time.Second) // the store is still down: retries fail
		if m.Pending() != 1 {
			t.Fatalf("%d settlements pending, want 1", m.Pending())
		}
		f.broken.Store(false)
		time.Sleep(time.Minute)
		synctest.Wait()
		if m.Pending() != 0 {
			t.Errorf("%d settlements pending after the store came back, want 0", m.Pending())
		}
		b, _ := f.Ledger.Balance(t.Context(), "a", billing.MonthOf(jan15), 10)
		n, _ := f.ConcurrencyLimiter.InUse(t.Context(), "a", jan15)
		if b.Remaining != 10 || n != 0 {
			t.Errorf("after the undo: remaining %d, %d slots; want 10 and 0", b.Remaining, n)
		}
	})
}
