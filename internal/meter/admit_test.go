package meter_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/internal/meter"
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

func (s *stepStore) Admit(ctx context.Context, st driver.Step) (driver.StepResult, error) {
	s.steps.Add(1)
	var r driver.StepResult
	if st.Key != nil {
		if r.Key, _ = s.KeyStore.CheckKey(ctx, *st.Key); r.Key != driver.KeyLive {
			r.Denied = driver.DeniedKey
			return r, nil
		}
	}
	if st.Rate != nil {
		if r.Rate, _ = s.RateLimiter.AllowN(ctx, st.Account, *st.Rate, st.EventCount(), st.Now); !r.Rate.Allowed {
			r.Denied = driver.DeniedRate
			return r, nil
		}
	}
	if st.Slot != nil {
		if r.Slot, _ = s.ConcurrencyLimiter.Acquire(ctx, st.Account, st.Request, st.Slot.Ceiling, st.Slot.Lease, st.Now); !r.Slot.Acquired {
			r.Denied = driver.DeniedSlot
			return r, nil
		}
	}
	if st.Credits != nil {
		var err error
		if r.Balance, err = s.Ledger.Reserve(ctx, *st.Credits); errors.Is(err, billing.ErrInsufficientCredits) {
			if st.Slot != nil {
				s.ConcurrencyLimiter.Release(ctx, st.Account, st.Request)
			}
			r.Denied = driver.DeniedCredits
			return r, nil
		}
	}
	return r, nil
}

func (s *stepStore) Close(ctx context.Context, c driver.Closing) (billing.Balance, error) {
	s.closes.Add(1)
	var (
		b   billing.Balance
		err error
	)
	if c.Settlement != nil {
		b, err = s.Ledger.Settle(ctx, *c.Settlement)
	}
	if c.ReleaseSlot {
		s.ConcurrencyLimiter.Release(ctx, c.Account, c.Request)
	}
	return b, err
}

// The plain methods the Meter may call, counted.
func (s *stepStore) Allow(ctx context.Context, key string, l billing.Limit, now time.Time) (billing.RateDecision, error) {
	s.plain.Add(1)
	return s.RateLimiter.Allow(ctx, key, l, now)
}

func (s *stepStore) AllowN(ctx context.Context, key string, l billing.Limit, n int, now time.Time) (billing.RateDecision, error) {
	s.plain.Add(1)
	return s.RateLimiter.AllowN(ctx, key, l, n, now)
}

func (s *stepStore) Reserve(ctx context.Context, r driver.Reservation) (billing.Balance, error) {
	s.plain.Add(1)
	return s.Ledger.Reserve(ctx, r)
}

func (s *stepStore) CheckKey(ctx context.Context, c driver.KeyCheck) (driver.KeyState, error) {
	s.plain.Add(1)
	return s.KeyStore.CheckKey(ctx, c)
}

func (s *stepStore) Acquire(ctx context.Context, key string, holder billing.RequestID, ceiling int, lease time.Duration, now time.Time) (driver.SlotDecision, error) {
	s.plain.Add(1)
	return s.ConcurrencyLimiter.Acquire(ctx, key, holder, ceiling, lease, now)
}

func (s *stepStore) Release(ctx context.Context, key string, holder billing.RequestID) error {
	s.plain.Add(1)
	return s.ConcurrencyLimiter.Release(ctx, key, holder)
}

func (s *stepStore) Settle(ctx context.Context, st driver.Settlement) (billing.Balance, error) {
	s.plain.Add(1)
	return s.Ledger.Settle(ctx, st)
}

var roundTripPlan = billing.Plan{Name: "pro", Credits: 10, RatePerMinute: 600, Concurrency: 5}

// prepare gives account "a" a key and a balance in s.
func prepare(t *testing.T, s *stepStore) auth.Key {
	t.Helper()
	key := auth.Key{ID: "k", AccountID: "a", Hash: auth.HashKey(auth.NewKeyValue())}
	if err := s.KeyStore.CreateAccount(t.Context(), auth.Account{ID: "a", Plan: "pro"}, key); err != nil {
		t.Fatal(err)
	}
	if err := s.Ledger.Open(t.Context(), driver.Opening{Account: "a", Balance: 10, Allowance: 10, Period: billing.MonthOf(jan15)}); err != nil {
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
		stores         func(one, two *stepStore) (driver.Ledger, driver.RateLimiter, driver.ConcurrencyLimiter, driver.KeyChecker)
		admit, settle  [2]int32 // round trips to one and two
		withKeyCheck   bool
		ledgerInTwo    bool
		keysInTwoStore bool
	}{
		{"one store", func(one, _ *stepStore) (driver.Ledger, driver.RateLimiter, driver.ConcurrencyLimiter, driver.KeyChecker) {
			return one, one, one, one
		}, [2]int32{1, 0}, [2]int32{1, 0}, true, false, false},
		{"limits apart from keys and credits", func(one, two *stepStore) (driver.Ledger, driver.RateLimiter, driver.ConcurrencyLimiter, driver.KeyChecker) {
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
			m, err := meter.New(ledger, rates, slots, &meter.Options{Keys: keys})
			if err != nil {
				t.Fatal(err)
			}
			a := meter.Admission{Account: "a", Plan: roundTripPlan, Request: billing.RequestID{1}, APIs: []string{"x"}, Cost: 1, Now: jan15,
				Key: &driver.KeyCheck{Account: "a", KeyID: key.ID, Hash: key.Hash}}
			tk, err := m.Admit(t.Context(), a)
			if err != nil {
				t.Fatal(err)
			}
			if got := [2]int32{one.trips(), two.trips()}; got != tt.admit {
				t.Errorf("admission took %v round trips, want %v", got, tt.admit)
			}
			b, err := m.Settle(t.Context(), &tk, meter.Outcome{Now: jan15})
			if err != nil || b.Remaining != 9 {
				t.Fatalf("Settle: %v, remaining %d", err, b.Remaining)
			}
			if got := [2]int32{one.trips(), two.trips()}; got != [2]int32{tt.admit[0] + tt.settle[0], tt.admit[1] + tt.settle[1]} {
				t.Errorf("settlement took %v round trips in all, want %v more than admission", got, tt.settle)
			}
		})
	}
}

// TestAdmitStepRateDenied checks that a rate denial answered by an Admitter's one
// step is a refusal: a LimitError for the rate with the store's wait, a ticket that
// holds nothing, and neither a slot nor credits taken, whether the limits share the
// store with the credits or not. Once the wait is over, the call is admitted.
func TestAdmitStepRateDenied(t *testing.T) {
	plan := billing.Plan{Name: "slow", Credits: 10, RatePerMinute: 1, Concurrency: 2}
	tests := []struct {
		name   string
		stores func(one, two *stepStore) (driver.Ledger, driver.RateLimiter, driver.ConcurrencyLimiter, driver.KeyChecker)
	}{
		{"one store", func(one, _ *stepStore) (driver.Ledger, driver.RateLimiter, driver.ConcurrencyLimiter, driver.KeyChecker) {
			return one, one, one, one
		}},
		{"limits apart from keys and credits", func(one, two *stepStore) (driver.Ledger, driver.RateLimiter, driver.ConcurrencyLimiter, driver.KeyChecker) {
			return two, one, one, two
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			one, two := newStepStore(), newStepStore()
			ledger, rates, slots, keys := tt.stores(one, two)
			key := prepare(t, ledger.(*stepStore))
			m, err := meter.New(ledger, rates, slots, &meter.Options{Keys: keys})
			if err != nil {
				t.Fatal(err)
			}
			admission := func(n byte, now time.Time) meter.Admission {
				return meter.Admission{Account: "a", Plan: plan, Request: billing.RequestID{n}, APIs: []string{"x"}, Cost: 1, Now: now,
					Key: &driver.KeyCheck{Account: "a", KeyID: key.ID, Hash: key.Hash}}
			}
			first, err := m.Admit(t.Context(), admission(1, jan15))
			if err != nil {
				t.Fatal(err)
			}
			plain := one.plain.Load() + two.plain.Load()

			later := jan15.Add(20 * time.Second)
			tk, err := m.Admit(t.Context(), admission(2, later))
			le := limitError(t, err, meter.ErrRateLimited)
			if le.RetryAfter != 40*time.Second || !strings.Contains(le.Message, "the slow plan allows 1 calls per minute; retry in 40s") {
				t.Errorf("refusal %q, RetryAfter %v; want the store's wait of 40s", le.Message, le.RetryAfter)
			}
			if tk.Rate.Allowed || tk.Rate.RetryAfter != 40*time.Second || tk.HoldsSlot() {
				t.Errorf("ticket: rate %+v, holds a slot %v; want the denial and nothing held", tk.Rate, tk.HoldsSlot())
			}
			if n := one.plain.Load() + two.plain.Load(); n != plain {
				t.Errorf("the refusal made %d calls of the plain interfaces, want none: the step decides", n-plain)
			}
			if n, _ := one.ConcurrencyLimiter.InUse(t.Context(), "a", later); n != 1 {
				t.Errorf("%d slots in use after the refusal, want the first call's only", n)
			}
			b, _ := ledger.Balance(t.Context(), "a", later, billing.MonthOf(later), 10)
			if b.Remaining != 9 || b.Used != 1 {
				t.Errorf("balance after the refusal %+v, want 9 remaining and 1 used: the refused call took nothing", b)
			}
			if u, _ := ledger.Usage(t.Context(), "a", billing.MonthOf(later)); u["x"] != 1 {
				t.Errorf("usage after the refusal %v, want the first call's only", u)
			}

			if _, err := m.Settle(t.Context(), &first, meter.Outcome{Now: jan15}); err != nil {
				t.Fatal(err)
			}
			tk, err = m.Admit(t.Context(), admission(3, jan15.Add(time.Minute)))
			if err != nil || !tk.Rate.Allowed {
				t.Fatalf("a minute after the first call: %v, rate %+v; want it admitted", err, tk.Rate)
			}
		})
	}
}

// TestAdmitUndoesEarlierStores checks that a refusal by a later store frees what an
// earlier store took, and that a stale key is a KeyError.
func TestAdmitUndoesEarlierStores(t *testing.T) {
	limits, money := newStepStore(), newStepStore()
	key := prepare(t, money)
	m, err := meter.New(money, limits, limits, &meter.Options{Keys: money})
	if err != nil {
		t.Fatal(err)
	}
	check := &driver.KeyCheck{Account: "a", KeyID: key.ID, Hash: key.Hash}
	// Credits short: the slot taken by the limits store is released.
	_, err = m.Admit(t.Context(), meter.Admission{Account: "a", Plan: roundTripPlan, Request: billing.RequestID{1}, Cost: 11, Now: jan15, Key: check})
	if !errors.Is(err, billing.ErrInsufficientCredits) {
		t.Fatalf("Admit: %v, want insufficient credits", err)
	}
	if n, _ := limits.InUse(t.Context(), "a", jan15); n != 0 {
		t.Errorf("%d slots held after the refusal, want 0", n)
	}
	// A revoked key: a KeyError, and again nothing held.
	if _, err := money.RevokeKey(t.Context(), key.ID, auth.AnyRevision, jan15); err != nil {
		t.Fatal(err)
	}
	_, err = m.Admit(t.Context(), meter.Admission{Account: "a", Plan: roundTripPlan, Request: billing.RequestID{2}, Cost: 1, Now: jan15, Key: check})
	var ke *meter.KeyError
	if !errors.As(err, &ke) || ke.State != driver.KeyRevoked || !errors.Is(err, meter.ErrKeyChanged) {
		t.Fatalf("Admit with a revoked key: %v, want a KeyError with KeyRevoked", err)
	}
	if n, _ := limits.InUse(t.Context(), "a", jan15); n != 0 {
		t.Errorf("%d slots held after the refusal, want 0", n)
	}
	if b, _ := money.Balance(t.Context(), "a", jan15, billing.MonthOf(jan15), 10); b.Remaining != 10 {
		t.Errorf("remaining %d, want 10", b.Remaining)
	}
}

// TestAdmitKeyCheckNeedsAChecker checks that an admission with a key check and no key
// checker is an error, not a silent pass.
func TestAdmitKeyCheckNeedsAChecker(t *testing.T) {
	m, err := meter.New(memory.NewLedger(nil), memory.NewRateLimiter(), memory.NewConcurrencyLimiter(), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Admit(t.Context(), meter.Admission{Account: "a", Plan: roundTripPlan, Cost: 1, Now: jan15, Key: &driver.KeyCheck{Account: "a"}})
	if err == nil {
		t.Error("an admission with a key check passed without a key checker")
	}
}

// flakyStore is an Admitter whose Admit applies the step and then reports an error, as a
// connection that breaks after the store committed does, and whose Close fails while
// broken.
type flakyStore struct {
	*stepStore
	admitFails, broken atomic.Bool
}

func (f *flakyStore) Admit(ctx context.Context, st driver.Step) (driver.StepResult, error) {
	r, err := f.stepStore.Admit(ctx, st)
	if f.admitFails.Load() {
		return driver.StepResult{}, errors.New("connection reset by peer")
	}
	return r, err
}

func (f *flakyStore) Close(ctx context.Context, c driver.Closing) (billing.Balance, error) {
	if f.broken.Load() {
		return billing.Balance{}, errors.New("connection refused")
	}
	return f.stepStore.Close(ctx, c)
}

// meterOver returns a Meter over f whose clock is the bubble's, holding reservations a
// minute and slots for a lease of 30s.
func meterOver(t *testing.T, f *flakyStore, retries int) *meter.Meter {
	t.Helper()
	m, err := meter.New(f, f, f, &meter.Options{Hold: time.Minute, Lease: 30 * time.Second, Retries: retries})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// TestAdmissionInDoubtExpires checks that an admission whose answer was lost (the store
// took the credits and the slot, then the connection broke) costs nothing in the end
// and leaves no work behind: the reservation is voided at its expiry and the slot comes
// back when its lease ends.
func TestAdmissionInDoubtExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &flakyStore{stepStore: newStepStore()}
		f.admitFails.Store(true)
		prepare(t, f.stepStore)
		m := meterOver(t, f, 0)
		now := time.Now()
		_, err := m.Admit(t.Context(), meter.Admission{Account: "a", Plan: roundTripPlan, Request: billing.RequestID{9}, APIs: []string{"x"}, Cost: 4, Now: now})
		if err == nil {
			t.Fatal("Admit succeeded over a broken connection")
		}
		if b, _ := f.Ledger.Balance(t.Context(), "a", now, billing.MonthOf(now), 10); b.Remaining != 6 {
			t.Fatalf("remaining %d: the store should have taken the credits before the error", b.Remaining)
		}
		if m.Pending() != 0 {
			t.Errorf("%d closings queued for an admission in doubt, want none", m.Pending())
		}
		time.Sleep(time.Minute)
		later := time.Now()
		b, _ := f.Ledger.Balance(t.Context(), "a", later, billing.MonthOf(later), 10)
		n, _ := f.ConcurrencyLimiter.InUse(t.Context(), "a", later)
		if b.Remaining != 10 || n != 0 {
			t.Errorf("a minute later: remaining %d, %d slots; want 10 and 0", b.Remaining, n)
		}
	})
}

// admitThenBreak admits a call of 4 credits through a Meter over a flaky store, and then
// breaks the store's closings. It returns the store, the Meter, the call's ticket and
// the admission's instant.
func admitThenBreak(t *testing.T) (*flakyStore, *meter.Meter, meter.Ticket, time.Time) {
	t.Helper()
	f := &flakyStore{stepStore: newStepStore()}
	prepare(t, f.stepStore)
	m := meterOver(t, f, 0)
	now := time.Now()
	tk, err := m.Admit(t.Context(), meter.Admission{Account: "a", Plan: roundTripPlan, Request: billing.RequestID{9}, APIs: []string{"x"}, Cost: 4, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	f.broken.Store(true)
	return f, m, tk, now
}

// TestSettlementRetried checks that a settlement the store could not take is retried in
// the background and taken once the store answers again, within the reservation's life:
// the charge of a call that succeeded is kept, once.
func TestSettlementRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, m, tk, now := admitThenBreak(t)
		if _, err := m.Settle(t.Context(), &tk, meter.Outcome{Now: now}); err == nil {
			t.Fatal("Settle succeeded over a broken connection")
		}
		time.Sleep(10 * time.Second) // the store is still down: retries fail
		if m.Pending() != 1 {
			t.Fatalf("%d settlements pending, want 1", m.Pending())
		}
		f.broken.Store(false)
		time.Sleep(20 * time.Second)
		synctest.Wait()
		if m.Pending() != 0 {
			t.Errorf("%d settlements pending after the store came back, want 0", m.Pending())
		}
		time.Sleep(time.Hour) // long after the expiry: the charge was kept, not voided
		later := time.Now()
		b, _ := f.Ledger.Balance(t.Context(), "a", later, billing.MonthOf(later), 10)
		n, _ := f.ConcurrencyLimiter.InUse(t.Context(), "a", later)
		if b.Remaining != 6 || b.Used != 4 || n != 0 {
			t.Errorf("after the retry: remaining %d, used %d, %d slots; want 6, 4 and 0", b.Remaining, b.Used, n)
		}
	})
}

// TestSettlementLeftToExpiry checks that a settlement the store never takes is dropped
// from the retries when its reservation expires, and that the expiry then voids the
// reservation: the call is not charged, and nothing stays queued.
func TestSettlementLeftToExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, m, tk, now := admitThenBreak(t)
		m.Settle(t.Context(), &tk, meter.Outcome{Now: now})
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if m.Pending() != 0 {
			t.Errorf("%d settlements still pending after the reservation expired, want 0", m.Pending())
		}
		f.broken.Store(false)
		later := time.Now()
		b, _ := f.Ledger.Balance(t.Context(), "a", later, billing.MonthOf(later), 10)
		if b.Remaining != 10 || b.Used != 0 {
			t.Errorf("after the expiry: remaining %d, used %d; want 10 and 0", b.Remaining, b.Used)
		}
	})
}

// TestRetriesBounded checks that the retries hold at most Options.Retries
// settlements, whatever the number that fail, and use one goroutine: an outage adds no
// goroutine per request.
func TestRetriesBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &flakyStore{stepStore: newStepStore()}
		prepare(t, f.stepStore)
		if _, err := f.Ledger.Adjust(t.Context(), driver.Adjustment{Account: "a", Request: billing.RequestID{0xad}, Amount: 1000,
			Reason: "test", Period: billing.MonthOf(time.Now()), Allowance: 10, Now: time.Now()}); err != nil {
			t.Fatal(err)
		}
		m := meterOver(t, f, 3)
		plan := roundTripPlan
		plan.Concurrency = 0
		var tickets []meter.Ticket
		for i := range 50 {
			tk, err := m.Admit(t.Context(), meter.Admission{Account: "a", Plan: plan, Request: billing.RequestID{byte(i)}, Cost: 1, Now: time.Now()})
			if err != nil {
				t.Fatal(err)
			}
			tickets = append(tickets, tk)
		}
		before := runtime.NumGoroutine()
		f.broken.Store(true)
		for i := range tickets {
			m.Settle(t.Context(), &tickets[i], meter.Outcome{Now: time.Now()})
		}
		if m.Pending() != 3 {
			t.Errorf("%d settlements pending, want the bound of 3", m.Pending())
		}
		if n := runtime.NumGoroutine(); n > before+1 {
			t.Errorf("%d goroutines after 50 failed settlements, %d before: want at most one more", n, before)
		}
	})
}

// TestAdmitEvents checks an admission of several rate-limit events (a batch), through
// the plain interfaces and through an Admitter's one step: it records them all or none,
// a refusal says how many calls it judged and when they fit, more events than the
// burst is an error that takes nothing, and Hold sets the reservation's expiry.
func TestAdmitEvents(t *testing.T) {
	plan := billing.Plan{Name: "team", Credits: 100, RatePerMinute: 60, Burst: 5, Concurrency: 2}
	tests := []struct {
		name   string
		stores func(s *stepStore) (driver.Ledger, driver.RateLimiter, driver.ConcurrencyLimiter)
		steps  bool // the store admits in one step
	}{
		{"plain interfaces", func(s *stepStore) (driver.Ledger, driver.RateLimiter, driver.ConcurrencyLimiter) {
			return s.Ledger, s.RateLimiter, s.ConcurrencyLimiter
		}, false},
		{"one step", func(s *stepStore) (driver.Ledger, driver.RateLimiter, driver.ConcurrencyLimiter) {
			return s, s, s
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStepStore()
			ledger, rates, slots := tt.stores(s)
			m, err := meter.New(ledger, rates, slots, &meter.Options{Hold: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Ledger.Open(t.Context(), driver.Opening{Account: "a", Balance: 100, Allowance: 100, Period: billing.MonthOf(jan15)}); err != nil {
				t.Fatal(err)
			}
			admission := func(n byte, events int, hold time.Duration) meter.Admission {
				return meter.Admission{Account: "a", Plan: plan, Request: billing.RequestID{n}, APIs: []string{"x", "x", "x"},
					Cost: 3, Events: events, Hold: hold, Now: jan15}
			}
			tk, err := m.Admit(t.Context(), admission(1, 3, 10*time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			if !tk.Rate.Allowed || tk.Rate.Remaining != 2 || !tk.Expires.Equal(jan15.Add(10*time.Minute)) {
				t.Errorf("ticket of 3 events: rate %+v, expires %s; want 2 remaining and the admission's hold of 10m", tk.Rate, tk.Expires)
			}
			_, err = m.Admit(t.Context(), admission(2, 3, 0))
			le := limitError(t, err, meter.ErrRateLimited)
			if le.RetryAfter != time.Second || !strings.Contains(le.Message, "these 3 calls would pass the team plan's 60 calls per minute; retry in 1s") {
				t.Errorf("refusal %q, RetryAfter %v; want 3 calls judged together, fitting in 1s", le.Message, le.RetryAfter)
			}
			_, err = m.Admit(t.Context(), admission(3, 6, 0))
			if err == nil || errors.As(err, &le) || !strings.Contains(err.Error(), "the burst, 5") {
				t.Errorf("6 events with a burst of 5: %v; want an error that is no refusal to retry", err)
			}
			two, err := m.Admit(t.Context(), admission(4, 2, 0))
			if err != nil {
				t.Fatal(err)
			}
			if !two.Expires.Equal(jan15.Add(time.Minute)) {
				t.Errorf("expires %s without a hold of its own, want the Meter's minute", two.Expires)
			}
			if n, _ := s.ConcurrencyLimiter.InUse(t.Context(), "a", jan15); n != 2 {
				t.Errorf("%d slots in use, want one per admitted call, whatever its events", n)
			}
			if b, _ := s.Ledger.Balance(t.Context(), "a", jan15, billing.MonthOf(jan15), 100); b.Remaining != 94 {
				t.Errorf("balance %+v, want 94: the refusals took nothing", b)
			}
			if got := s.steps.Load() > 0; got != tt.steps {
				t.Errorf("admitted in one step: %v, want %v", got, tt.steps)
			}
		})
	}
}
