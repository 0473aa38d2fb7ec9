package meter_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/internal/meter"
)

// decorated decorates a whole store as a metrics wrapper does: one value that embeds
// the store, so that it plays every role the store plays, counts the steps it forwards
// and says what it wraps.
type decorated struct {
	*stepStore
	admits, closes atomic.Int32
}

func (d *decorated) Admit(ctx context.Context, s driver.Step) (driver.StepResult, error) {
	d.admits.Add(1)
	return d.stepStore.Admit(ctx, s)
}

func (d *decorated) Close(ctx context.Context, c driver.Closing) (billing.Balance, error) {
	d.closes.Add(1)
	return d.stepStore.Close(ctx, c)
}

func (d *decorated) Unwrap() any { return d.stepStore }

// Wrappers per role: each decorates one interface of the store, and says what it wraps.
type (
	ledgerOnly struct{ driver.Ledger }
	ratesOnly  struct{ driver.RateLimiter }
	slotsOnly  struct{ driver.ConcurrencyLimiter }
	keysOnly   struct{ driver.KeyChecker }
)

func (w *ledgerOnly) Unwrap() any { return w.Ledger }
func (w *ratesOnly) Unwrap() any  { return w.RateLimiter }
func (w *slotsOnly) Unwrap() any  { return w.ConcurrencyLimiter }
func (w *keysOnly) Unwrap() any   { return w.KeyChecker }

// Wrappers per role that forward the store's Admitter too: each one is an Admitter,
// but a distinct value.
type (
	ledgerStep struct {
		driver.Ledger
		driver.Admitter
	}
	ratesStep struct {
		driver.RateLimiter
		driver.Admitter
	}
	slotsStep struct {
		driver.ConcurrencyLimiter
		driver.Admitter
	}
	keysStep struct {
		driver.KeyChecker
		driver.Admitter
	}
)

func (w *ledgerStep) Unwrap() any { return w.Ledger }
func (w *ratesStep) Unwrap() any  { return w.RateLimiter }
func (w *slotsStep) Unwrap() any  { return w.ConcurrencyLimiter }
func (w *keysStep) Unwrap() any   { return w.KeyChecker }

// TestDecoratedStore checks how a decorated store admits: a decorator of the whole
// store, one value in every role, keeps its admission in one step (one round trip) and
// its settlement in another, and the Meter says nothing; wrappers per role cost a round
// trip per part, and the Meter, seeing through their Unwrap that they are one store,
// logs a warning once, when it is made.
func TestDecoratedStore(t *testing.T) {
	type roles struct {
		ledger driver.Ledger
		rates  driver.RateLimiter
		slots  driver.ConcurrencyLimiter
		keys   driver.KeyChecker
	}
	tests := []struct {
		name  string
		roles func(s *stepStore, d *decorated) roles
		// round trips to the store to admit and to settle; steps through the
		// decorator; warnings logged.
		admit, settle, steps int32
		warnings             int
	}{
		{"the store itself", func(s *stepStore, _ *decorated) roles {
			return roles{s, s, s, s}
		}, 1, 1, 0, 0},
		{"one decorator in every role", func(_ *stepStore, d *decorated) roles {
			return roles{d, d, d, d}
		}, 1, 1, 2, 0},
		{"a wrapper per role", func(s *stepStore, _ *decorated) roles {
			return roles{&ledgerOnly{s}, &ratesOnly{s}, &slotsOnly{s}, &keysOnly{s}}
		}, 4, 2, 0, 1},
		{"a wrapper per role, each an Admitter", func(s *stepStore, _ *decorated) roles {
			return roles{&ledgerStep{s, s}, &ratesStep{s, s}, &slotsStep{s, s}, &keysStep{s, s}}
		}, 4, 2, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStepStore()
			d := &decorated{stepStore: s}
			key := prepare(t, s)
			r := tt.roles(s, d)
			var logs bytes.Buffer
			m, err := meter.New(r.ledger, r.rates, r.slots, &meter.Options{Keys: r.keys,
				Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(m.Close)
			warnings := strings.Count(logs.String(), "level=WARN")
			if warnings != tt.warnings {
				t.Errorf("New logged %d warnings, want %d:\n%s", warnings, tt.warnings, logs.String())
			}
			if tt.warnings > 0 && !strings.Contains(logs.String(), "each admission takes 4 round trips to it instead of 1") {
				t.Errorf("the warning does not say what the split costs:\n%s", logs.String())
			}
			for i := range 2 {
				before := s.trips()
				a := meter.Admission{Account: "a", Plan: roundTripPlan, Request: billing.RequestID{byte(i + 1)}, APIs: []string{"x"}, Cost: 1, Now: jan15,
					Key: &billing.KeyCheck{Account: "a", KeyID: key.ID, Hash: key.Hash}}
				tk, err := m.Admit(t.Context(), a)
				if err != nil {
					t.Fatal(err)
				}
				admitted := s.trips()
				if n := admitted - before; n != tt.admit {
					t.Errorf("admission %d took %d round trips, want %d", i+1, n, tt.admit)
				}
				if _, err := m.Settle(t.Context(), &tk, meter.Outcome{Now: jan15}); err != nil {
					t.Fatal(err)
				}
				if n := s.trips() - admitted; n != tt.settle {
					t.Errorf("settlement %d took %d round trips, want %d", i+1, n, tt.settle)
				}
			}
			if n := d.admits.Load() + d.closes.Load(); n != 2*tt.steps {
				t.Errorf("%d steps through the decorator, want %d: it must see every admission and settlement", n, 2*tt.steps)
			}
			if n := strings.Count(logs.String(), "level=WARN"); n != warnings {
				t.Errorf("%d more warnings after the calls, want none: the Meter warns when it is made", n-warnings)
			}
		})
	}
}
