package meter_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/blocks"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/internal/meter"
)

// waitingLimits is a limits store whose steps wait, up to 100 ms, for the money
// store to be sent the same request's step that only checks the key, and count the
// steps that saw it sent.
type waitingLimits struct {
	*stepStore
	money      *signallingMoney
	overlapped atomic.Int32
}

func (w *waitingLimits) Admit(ctx context.Context, st driver.Step) (driver.StepResult, error) {
	for deadline := time.Now().Add(100 * time.Millisecond); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if w.money.sent(st.Request) {
			w.overlapped.Add(1)
			break
		}
	}
	return w.stepStore.Admit(ctx, st)
}

// signallingMoney is a money store that records the requests it is sent a step that
// only checks a key for.
type signallingMoney struct {
	*stepStore
	mu      sync.Mutex
	keyOnly map[billing.RequestID]bool
}

func (s *signallingMoney) Admit(ctx context.Context, st driver.Step) (driver.StepResult, error) {
	if st.Key != nil && st.Rate == nil && st.Slot == nil && st.Credits == nil {
		s.mu.Lock()
		s.keyOnly[st.Request] = true
		s.mu.Unlock()
	}
	return s.stepStore.Admit(ctx, st)
}

func (s *signallingMoney) sent(id billing.RequestID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keyOnly[id]
}

// TestKeyCheckBesideLimits admits calls whose credits a block serves, on a composition
// whose key store holds the credits and whose limits are in another store: the step
// that only checks the key is sent beside the limits' step, not after it, and the
// answers are those of the steps in turn: the limits' refusal first, then the key's,
// with what the limits took given back.
func TestKeyCheckBesideLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		plan := billing.Plan{Name: "pro", Credits: 100_000, RatePerMinute: 6, Concurrency: 5}
		money := &signallingMoney{stepStore: newStepStore(), keyOnly: map[billing.RequestID]bool{}}
		limits := &waitingLimits{stepStore: newStepStore(), money: money}
		m, key := blockMeter(t, money.stepStore, money, limits, plan)
		defer m.Close()
		check := &driver.KeyCheck{Account: "a", KeyID: key.ID, Hash: key.Hash}
		var n byte
		admit := func() (meter.Ticket, error) {
			n++
			return m.Admit(t.Context(), meter.Admission{Account: "a", Plan: plan, Request: billing.RequestID{n}, APIs: []string{"geo"}, Cost: 1, Now: time.Now(), Key: check})
		}
		settle := func(tk meter.Ticket) {
			if _, err := m.Settle(t.Context(), &tk, meter.Outcome{Now: time.Now()}); err != nil {
				t.Fatal(err)
			}
		}
		// The first call is cold: its credits and its key go to the money store in one
		// step, after the limits'. The next takes a block: its key check goes alone.
		for range 3 {
			tk, err := admit()
			if err != nil {
				t.Fatal(err)
			}
			settle(tk)
		}
		if len(money.keyOnly) == 0 {
			t.Fatal("no step only checked the key: no block served the calls")
		}
		if got := limits.overlapped.Load(); got == 0 {
			t.Error("the key check waited for the limits' step")
		}

		// The plan's 6 a minute are spent: the rate refusal is the answer, with the key
		// live and with the key revoked (the limits' step comes first), though the key
		// check was sent beside it.
		for range 3 {
			tk, err := admit()
			if err != nil {
				t.Fatal(err)
			}
			settle(tk)
		}
		var le *meter.LimitError
		if _, err := admit(); !errors.As(err, &le) || !errors.Is(err, meter.ErrRateLimited) || !le.KeyLive {
			t.Fatalf("the seventh call in a minute: %v (%+v), want rate limited, the key found live", err, le)
		}
		if _, err := money.RevokeKey(t.Context(), key.ID, auth.AnyRevision, time.Now()); err != nil {
			t.Fatal(err)
		}
		sent := len(money.keyOnly)
		if _, err := admit(); !errors.As(err, &le) || !errors.Is(err, meter.ErrRateLimited) || le.KeyLive {
			t.Fatalf("the eighth call in a minute, its key revoked: %v (%+v), want rate limited, the key not found live", err, le)
		}
		synctest.Wait()
		if len(money.keyOnly) != sent+1 {
			t.Errorf("the refused call's key check was not sent beside the limits' step")
		}
		// A minute on: the key's refusal, and the slot the limits' step took is free
		// again.
		time.Sleep(time.Minute)
		_, err := admit()
		var ke *meter.KeyError
		if !errors.As(err, &ke) || ke.State != driver.KeyRevoked {
			t.Fatalf("a call with the revoked key: %v, want a KeyError with KeyRevoked", err)
		}
		if n, _ := limits.InUse(t.Context(), "a", time.Now()); n != 0 {
			t.Errorf("%d slots held after the key's refusal, want 0", n)
		}
	})
}

// moneyStore holds the keys and the credits, in one step (an Admitter).
type moneyStore interface {
	driver.Ledger
	driver.Admitter
	driver.KeyChecker
}

// limitStore holds the rate limits and the slots, in one step.
type limitStore interface {
	driver.RateLimiter
	driver.ConcurrencyLimiter
	driver.Admitter
}

// blockMeter gives account "a" a key and plan's credits in base, and returns a Meter
// with credit blocks over money (which serves base) and limits, and the key.
func blockMeter(t *testing.T, base *stepStore, money moneyStore, limits limitStore, plan billing.Plan) (*meter.Meter, auth.Key) {
	t.Helper()
	key := auth.Key{ID: "k", AccountID: "a", Hash: auth.HashKey(auth.NewKeyValue())}
	if err := base.KeyStore.CreateAccount(t.Context(), auth.Account{ID: "a", Plan: plan.Name}, key); err != nil {
		t.Fatal(err)
	}
	opening := driver.Opening{Account: "a", Balance: plan.Credits, Allowance: plan.Credits, Period: billing.MonthOf(time.Now())}
	if err := base.Ledger.Open(t.Context(), opening); err != nil {
		t.Fatal(err)
	}
	b, err := blocks.New(money, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := meter.New(money, limits, limits, &meter.Options{Keys: money, Blocks: b, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return m, key
}

// panickingMoney panics on a step that only checks a key.
type panickingMoney struct{ *stepStore }

func (p panickingMoney) Admit(ctx context.Context, st driver.Step) (driver.StepResult, error) {
	if st.Key != nil && st.Credits == nil {
		panic("the key store broke")
	}
	return p.stepStore.Admit(ctx, st)
}

// TestKeyCheckBesidePanics checks that a key check sent beside the limits' step that
// panics panics in the caller's goroutine, where the caller can recover it, and not in
// a goroutine of the Meter's, which would end the process.
func TestKeyCheckBesidePanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		plan := billing.Plan{Name: "pro", Credits: 100_000, Concurrency: 5}
		money, limits := panickingMoney{newStepStore()}, newStepStore()
		m, key := blockMeter(t, money.stepStore, money, limits, plan)
		defer m.Close()
		check := &driver.KeyCheck{Account: "a", KeyID: key.ID, Hash: key.Hash}
		var recovered any
		for i := range 3 {
			func() {
				defer func() { recovered = recover() }()
				tk, err := m.Admit(t.Context(), meter.Admission{Account: "a", Plan: plan, Request: billing.RequestID{byte(i + 1)}, APIs: []string{"geo"}, Cost: 1, Now: time.Now(), Key: check})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := m.Settle(t.Context(), &tk, meter.Outcome{Now: time.Now()}); err != nil {
					t.Fatal(err)
				}
			}()
			if recovered != nil {
				break
			}
		}
		if recovered != "the key store broke" {
			t.Fatalf("recovered %v, want the key store's panic", recovered)
		}
	})
}

// TestLimitErrorKeyLive checks LimitError.KeyLive where the key is checked in the step
// that refuses the call (one store holds every part: it checks the key first) and
// where no key check was asked for.
func TestLimitErrorKeyLive(t *testing.T) {
	s := newStepStore()
	key := prepare(t, s)
	m, err := meter.New(s, s, s, &meter.Options{Keys: s})
	if err != nil {
		t.Fatal(err)
	}
	plan := billing.Plan{Name: "pro", Credits: 10, Concurrency: 5}
	check := &driver.KeyCheck{Account: "a", KeyID: key.ID, Hash: key.Hash}
	for _, tc := range []struct {
		name string
		key  *driver.KeyCheck
		want bool
	}{{"key checked in the refusing step", check, true}, {"no key check", nil, false}} {
		var le *meter.LimitError
		_, err := m.Admit(t.Context(), meter.Admission{Account: "a", Plan: plan, Request: billing.RequestID{9}, Cost: 11, Now: jan15, Key: tc.key})
		if !errors.As(err, &le) || !errors.Is(err, billing.ErrInsufficientCredits) || le.KeyLive != tc.want {
			t.Errorf("%s: %v (%+v), want insufficient credits, KeyLive %v", tc.name, err, le, tc.want)
		}
	}
}
