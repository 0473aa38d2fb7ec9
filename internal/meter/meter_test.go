package meter_test

import (
	"context"
	"encoding/binary"
	"errors"
	"maps"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/internal/meter"
	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// fixture is a Meter over memory stores that the test can also inspect directly.
type fixture struct {
	meter  *meter.Meter
	ledger *memory.Ledger
	rates  *memory.RateLimiter
	slots  *memory.ConcurrencyLimiter
}

func newFixture(t testing.TB, opts *meter.Options) *fixture {
	t.Helper()
	f := &fixture{ledger: memory.NewLedger(nil), rates: memory.NewRateLimiter(), slots: memory.NewConcurrencyLimiter()}
	m, err := meter.New(f.ledger, f.rates, f.slots, opts)
	if err != nil {
		t.Fatal(err)
	}
	f.meter = m
	return f
}

// open gives account a balance in the month of now.
func (f *fixture) open(t testing.TB, account string, plan billing.Plan, balance int64, now time.Time) {
	t.Helper()
	err := f.ledger.Open(t.Context(), driver.Opening{
		Account: account, Balance: balance, Allowance: plan.Credits, Period: billing.MonthOf(now),
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) balance(t testing.TB, account string, plan billing.Plan, now time.Time) billing.Balance {
	t.Helper()
	b, err := f.ledger.Balance(t.Context(), account, now, billing.MonthOf(now), plan.Credits)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (f *fixture) usage(t testing.TB, account string, now time.Time) map[string]int64 {
	t.Helper()
	u, err := f.ledger.Usage(t.Context(), account, billing.MonthOf(now))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func (f *fixture) inUse(t testing.TB, account string, now time.Time) int {
	t.Helper()
	n, err := f.slots.InUse(t.Context(), account, now)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (f *fixture) peek(t testing.TB, account string, plan billing.Plan, now time.Time) billing.RateDecision {
	t.Helper()
	l, ok := plan.RateLimit()
	if !ok {
		t.Fatalf("plan %q has no rate limit", plan.Name)
	}
	d, err := f.rates.Peek(t.Context(), account, l, now)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// admit admits one call and fails the test if it is refused.
func (f *fixture) admit(t testing.TB, a meter.Admission) meter.Ticket {
	t.Helper()
	tk, err := f.meter.Admit(t.Context(), a)
	if err != nil {
		t.Fatalf("Admit(%s at %s): %v", a.Request, a.Now, err)
	}
	return tk
}

func (f *fixture) settle(t testing.TB, tk *meter.Ticket, o meter.Outcome) billing.Balance {
	t.Helper()
	b, err := f.meter.Settle(t.Context(), tk, o)
	if err != nil {
		t.Fatalf("Settle(%s): %v", tk.Request, err)
	}
	return b
}

// rid returns a distinct request id for each n.
func rid(n uint64) billing.RequestID {
	var id billing.RequestID
	binary.BigEndian.PutUint64(id[8:], n)
	return id
}

// limitError returns err as a *LimitError, failing the test if it is not one or does not
// match reason.
func limitError(t *testing.T, err, reason error) *meter.LimitError {
	t.Helper()
	var le *meter.LimitError
	if !errors.As(err, &le) {
		t.Fatalf("error %v (%T) is not a *meter.LimitError", err, err)
	}
	for _, r := range []error{meter.ErrRateLimited, meter.ErrConcurrencyLimited, billing.ErrInsufficientCredits} {
		if got, want := errors.Is(err, r), r == reason; got != want {
			t.Errorf("errors.Is(%v, %v) = %v, want %v", err, r, got, want)
		}
	}
	if le.Reason != reason || le.Unwrap() != reason {
		t.Errorf("Reason = %v, want %v", le.Reason, reason)
	}
	if le.Error() != le.Message {
		t.Errorf("Error() = %q, want the Message %q", le.Error(), le.Message)
	}
	return le
}

func TestNewRefusesNilStores(t *testing.T) {
	l, r, c := memory.NewLedger(nil), memory.NewRateLimiter(), memory.NewConcurrencyLimiter()
	tests := []struct {
		name   string
		ledger driver.Ledger
		rates  driver.RateLimiter
		slots  driver.ConcurrencyLimiter
	}{
		{"no ledger", nil, r, c},
		{"no rate limiter", l, nil, c},
		{"no concurrency limiter", l, r, nil},
		{"nothing", nil, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := meter.New(tt.ledger, tt.rates, tt.slots, nil)
			if err == nil || m != nil {
				t.Fatalf("New = %v, %v; want nil and an error", m, err)
			}
		})
	}
}

func TestMeterLease(t *testing.T) {
	tests := []struct {
		name string
		opts *meter.Options
		want time.Duration
	}{
		{"nil options", nil, meter.DefaultLease},
		{"zero lease", &meter.Options{}, meter.DefaultLease},
		{"negative lease", &meter.Options{Lease: -time.Second}, meter.DefaultLease},
		{"explicit lease", &meter.Options{Lease: 10 * time.Second}, 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.opts)
			if got := f.meter.Lease(); got != tt.want {
				t.Errorf("Lease() = %s, want %s", got, tt.want)
			}
			if f.meter.Ledger() != driver.Ledger(f.ledger) {
				t.Error("Ledger() is not the ledger given to New")
			}
		})
	}
	if meter.DefaultLease != 30*time.Second {
		t.Errorf("DefaultLease = %s, want 30s", meter.DefaultLease)
	}
}

func TestAdmitCharges(t *testing.T) {
	f := newFixture(t, nil)
	plan := billing.Plan{Name: "pro", Credits: 1000, RatePerMinute: 60, Concurrency: 2}
	f.open(t, "acct", plan, 1000, t0)

	tk := f.admit(t, meter.Admission{
		Account: "acct", Plan: plan, Request: rid(1), APIs: []string{"geo", "weather"}, Cost: 3, Now: t0,
	})
	wantBalance := billing.Balance{Remaining: 997, Used: 3, Allowance: 1000, Period: billing.MonthOf(t0), Charge: billing.Parts{Allowance: 3}}
	if tk.Balance != wantBalance {
		t.Errorf("Ticket.Balance = %+v, want %+v", tk.Balance, wantBalance)
	}
	if tk.Account != "acct" || tk.Request != rid(1) || tk.Cost != 3 || tk.Plan != plan || tk.Period != billing.MonthOf(t0) {
		t.Errorf("Ticket = %+v does not describe the admission", tk)
	}
	if want := (billing.RateDecision{Allowed: true, Remaining: 59, ResetAfter: time.Second}); tk.Rate != want {
		t.Errorf("Ticket.Rate = %+v, want %+v", tk.Rate, want)
	}
	if got := f.inUse(t, "acct", t0); got != 1 {
		t.Errorf("slots in use = %d, want 1", got)
	}
	if got, want := f.usage(t, "acct", t0), map[string]int64{"geo": 1, "weather": 1}; !maps.Equal(got, want) {
		t.Errorf("usage = %v, want %v", got, want)
	}
}

func TestAdmitRateLimited(t *testing.T) {
	f := newFixture(t, nil)
	plan := billing.Plan{Name: "starter", Credits: 100, RatePerMinute: 2, Concurrency: 3}
	f.open(t, "acct", plan, 100, t0)

	// Two calls empty the bucket (burst 2); the first one stays open.
	held := f.admit(t, meter.Admission{Account: "acct", Plan: plan, Request: rid(1), APIs: []string{"geo"}, Cost: 1, Now: t0})
	done := f.admit(t, meter.Admission{Account: "acct", Plan: plan, Request: rid(2), APIs: []string{"geo"}, Cost: 1, Now: t0})
	f.settle(t, &done, meter.Outcome{Now: t0})

	now := t0.Add(time.Second)
	before := f.balance(t, "acct", plan, now)
	rateBefore := f.peek(t, "acct", plan, now)
	tk, err := f.meter.Admit(t.Context(), meter.Admission{Account: "acct", Plan: plan, Request: rid(3), APIs: []string{"geo"}, Cost: 1, Now: now})
	le := limitError(t, err, meter.ErrRateLimited)

	// Interval 30s, bucket of 2 emptied at t0: the next token is back at t0+30s.
	if le.RetryAfter != 29*time.Second {
		t.Errorf("RetryAfter = %s, want 29s", le.RetryAfter)
	}
	for _, want := range []string{"starter plan", "2 calls per minute", "retry in 29s"} {
		if !strings.Contains(le.Message, want) {
			t.Errorf("message %q does not say %q", le.Message, want)
		}
	}
	if tk.Rate.Allowed || tk.Rate.RetryAfter != 29*time.Second {
		t.Errorf("Ticket.Rate = %+v, want the denial", tk.Rate)
	}
	if got := f.inUse(t, "acct", now); got != 1 {
		t.Errorf("slots in use = %d, want 1 (the held call's only)", got)
	}
	if got := f.balance(t, "acct", plan, now); got != before {
		t.Errorf("balance after a rate-limited call = %+v, want %+v", got, before)
	}
	if got, want := f.usage(t, "acct", now), map[string]int64{"geo": 2}; !maps.Equal(got, want) {
		t.Errorf("usage = %v, want %v", got, want)
	}
	if got := f.peek(t, "acct", plan, now); got != rateBefore {
		t.Errorf("a denied call changed the rate state: %+v, was %+v", got, rateBefore)
	}

	// Once the token is back, the call goes through.
	f.admit(t, meter.Admission{Account: "acct", Plan: plan, Request: rid(3), APIs: []string{"geo"}, Cost: 1, Now: t0.Add(30 * time.Second)})
	f.settle(t, &held, meter.Outcome{Now: now})
}

func TestAdmitRateLimitMessageRoundsUp(t *testing.T) {
	f := newFixture(t, nil)
	plan := billing.Plan{Name: "free", Credits: 10, RatePerMinute: 1}
	f.open(t, "acct", plan, 10, t0)
	f.admit(t, meter.Admission{Account: "acct", Plan: plan, Request: rid(1), Cost: 1, Now: t0})
	_, err := f.meter.Admit(t.Context(), meter.Admission{Account: "acct", Plan: plan, Request: rid(2), Cost: 1, Now: t0.Add(59*time.Second + 500*time.Millisecond)})
	le := limitError(t, err, meter.ErrRateLimited)
	if le.RetryAfter != 500*time.Millisecond {
		t.Errorf("RetryAfter = %s, want the exact 500ms", le.RetryAfter)
	}
	if !strings.Contains(le.Message, "the free plan allows 1 calls per minute; retry in 1s") {
		t.Errorf("message %q: want the wait rounded up to 1s", le.Message)
	}
}

func TestAdmitConcurrencyLimited(t *testing.T) {
	f := newFixture(t, nil)
	plan := billing.Plan{Name: "team", Credits: 100, RatePerMinute: 60, Concurrency: 1}
	f.open(t, "acct", plan, 100, t0)

	held := f.admit(t, meter.Admission{Account: "acct", Plan: plan, Request: rid(1), APIs: []string{"geo"}, Cost: 1, Now: t0})

	now := t0.Add(time.Second)
	before := f.balance(t, "acct", plan, now)
	rateBefore := f.peek(t, "acct", plan, now)
	tk, err := f.meter.Admit(t.Context(), meter.Admission{Account: "acct", Plan: plan, Request: rid(2), APIs: []string{"geo"}, Cost: 1, Now: now})
	le := limitError(t, err, meter.ErrConcurrencyLimited)
	if le.RetryAfter != time.Second {
		t.Errorf("RetryAfter = %s, want 1s", le.RetryAfter)
	}
	for _, want := range []string{"team plan", "1 concurrent calls"} {
		if !strings.Contains(le.Message, want) {
			t.Errorf("message %q does not say %q", le.Message, want)
		}
	}
	if got := f.balance(t, "acct", plan, now); got != before {
		t.Errorf("balance after a concurrency-limited call = %+v, want %+v", got, before)
	}
	if got, want := f.usage(t, "acct", now), map[string]int64{"geo": 1}; !maps.Equal(got, want) {
		t.Errorf("usage = %v, want %v", got, want)
	}
	if got := f.inUse(t, "acct", now); got != 1 {
		t.Errorf("slots in use = %d, want 1", got)
	}

	// Documented order: the rate limit is checked first, and only the slot is undone
	// on a later refusal, so the refused call's rate event stays consumed.
	if !tk.Rate.Allowed {
		t.Errorf("Ticket.Rate = %+v, want the allowed rate decision", tk.Rate)
	}
	if got := f.peek(t, "acct", plan, now); got.Remaining != rateBefore.Remaining-1 {
		t.Errorf("rate remaining after the refusal = %d, want %d (the event is consumed)", got.Remaining, rateBefore.Remaining-1)
	}

	// With the slot freed, the next call gets it.
	f.settle(t, &held, meter.Outcome{Now: now})
	tk = f.admit(t, meter.Admission{Account: "acct", Plan: plan, Request: rid(3), APIs: []string{"geo"}, Cost: 1, Now: now})
	f.settle(t, &tk, meter.Outcome{Now: now})
}

func TestAdmitInsufficientCredits(t *testing.T) {
	f := newFixture(t, nil)
	plan := billing.Plan{Name: "free", Credits: 3, Concurrency: 1}
	f.open(t, "acct", plan, 3, t0)

	tk := f.admit(t, meter.Admission{Account: "acct", Plan: plan, Request: rid(1), APIs: []string{"geo"}, Cost: 2, Now: t0})
	f.settle(t, &tk, meter.Outcome{Now: t0})

	before := f.balance(t, "acct", plan, t0)
	tk, err := f.meter.Admit(t.Context(), meter.Admission{Account: "acct", Plan: plan, Request: rid(2), APIs: []string{"geo"}, Cost: 2, Now: t0})
	le := limitError(t, err, billing.ErrInsufficientCredits)
	if want := "credits exhausted: this call costs 2 and 1 remain; the balance renews at 2025-04-01T00:00:00Z"; le.Message != want {
		t.Errorf("message = %q, want %q", le.Message, want)
	}
	if le.RetryAfter != 0 {
		t.Errorf("RetryAfter = %s, want 0", le.RetryAfter)
	}
	if tk.Balance != before {
		t.Errorf("Ticket.Balance = %+v, want the short balance %+v", tk.Balance, before)
	}
	if got := f.balance(t, "acct", plan, t0); got != before {
		t.Errorf("balance after a refused call = %+v, want %+v", got, before)
	}
	if got, want := f.usage(t, "acct", t0), map[string]int64{"geo": 1}; !maps.Equal(got, want) {
		t.Errorf("usage = %v, want %v", got, want)
	}
	if got := f.inUse(t, "acct", t0); got != 0 {
		t.Errorf("slots in use = %d, want 0: the slot taken for the refused call is released", got)
	}
	// The only slot is free for a call the balance covers.
	tk = f.admit(t, meter.Admission{Account: "acct", Plan: plan, Request: rid(3), APIs: []string{"geo"}, Cost: 1, Now: t0})
	if tk.Balance.Remaining != 0 {
		t.Errorf("balance after the last credit = %d, want 0", tk.Balance.Remaining)
	}
	f.settle(t, &tk, meter.Outcome{Now: t0})
}

func TestSettle(t *testing.T) {
	plan := billing.Plan{Name: "pro", Credits: 100, RatePerMinute: 60, Concurrency: 2}
	tests := []struct {
		name      string
		outcome   meter.Outcome
		want      billing.Balance
		wantUsage map[string]int64
	}{
		{"charge kept", meter.Outcome{},
			billing.Balance{Remaining: 95, Used: 5, Charge: billing.Parts{Allowance: 5}}, map[string]int64{"geo": 1, "weather": 1}},
		{"part refunded", meter.Outcome{Refund: 2, Failed: []string{"geo"}},
			billing.Balance{Remaining: 97, Used: 3, Charge: billing.Parts{Allowance: 3}}, map[string]int64{"geo": 0, "weather": 1}},
		{"all refunded", meter.Outcome{Refund: 5, Failed: []string{"geo", "weather"}},
			billing.Balance{Remaining: 100, Used: 0}, map[string]int64{"geo": 0, "weather": 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, nil)
			f.open(t, "acct", plan, 100, t0)
			tk := f.admit(t, meter.Admission{Account: "acct", Plan: plan, Request: rid(1), APIs: []string{"geo", "weather"}, Cost: 5, Now: t0})

			now := t0.Add(2 * time.Second)
			tt.outcome.Now = now
			want := tt.want
			want.Allowance, want.Period = 100, billing.MonthOf(t0)
			if got := f.settle(t, &tk, tt.outcome); got != want {
				t.Errorf("Settle = %+v, want %+v", got, want)
			}
			if tk.Balance != want {
				t.Errorf("Ticket.Balance = %+v, want %+v", tk.Balance, want)
			}
			// A read carries no charge.
			kept := want
			want.Charge = billing.Parts{}
			if got := f.balance(t, "acct", plan, now); got != want {
				t.Errorf("ledger balance = %+v, want %+v", got, want)
			}
			if got := f.usage(t, "acct", now); !maps.Equal(got, tt.wantUsage) {
				t.Errorf("usage = %v, want %v", got, tt.wantUsage)
			}
			if got := f.inUse(t, "acct", now); got != 0 {
				t.Errorf("slots in use = %d, want 0", got)
			}

			// Settling again changes nothing: no second refund.
			if got := f.settle(t, &tk, tt.outcome); got != kept {
				t.Errorf("second Settle = %+v, want %+v", got, kept)
			}
			if got := f.balance(t, "acct", plan, now); got != want {
				t.Errorf("ledger balance after a second Settle = %+v, want %+v", got, want)
			}
		})
	}
}

func TestSettleWithCanceledContext(t *testing.T) {
	f := newFixture(t, nil)
	plan := billing.Plan{Name: "pro", Credits: 100, Concurrency: 1}
	f.open(t, "acct", plan, 100, t0)
	tk := f.admit(t, meter.Admission{Account: "acct", Plan: plan, Request: rid(1), APIs: []string{"geo"}, Cost: 4, Now: t0})

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	// The memory stores refuse a canceled context, so the settlement below only goes
	// through because Settle detaches from the cancellation.
	if _, err := f.ledger.Balance(ctx, "acct", t0, billing.MonthOf(t0), plan.Credits); !errors.Is(err, context.Canceled) {
		t.Fatalf("memory ledger with a canceled context: %v, want context.Canceled", err)
	}
	b, err := f.meter.Settle(ctx, &tk, meter.Outcome{Refund: 4, Failed: []string{"geo"}, Now: t0.Add(time.Second)})
	if err != nil {
		t.Fatalf("Settle with a canceled context: %v", err)
	}
	if b.Remaining != 100 || b.Used != 0 {
		t.Errorf("Settle = %+v, want the refund applied", b)
	}
	if got := f.balance(t, "acct", plan, t0); got.Remaining != 100 || got.Used != 0 {
		t.Errorf("ledger balance = %+v, want the refund applied", got)
	}
	if got := f.inUse(t, "acct", t0); got != 0 {
		t.Errorf("slots in use = %d, want 0", got)
	}
}

func TestAdmitReleasesSlotOnCanceledContext(t *testing.T) {
	// A context canceled between the slot and the reservation makes the ledger fail;
	// the slot must still be released.
	f := newFixture(t, nil)
	plan := billing.Plan{Name: "pro", Credits: 100, Concurrency: 1}
	f.open(t, "acct", plan, 100, t0)
	ctx, cancel := context.WithCancel(t.Context())
	m, err := meter.New(cancelOnReserve{f.ledger, cancel}, f.rates, f.slots, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Admit(ctx, meter.Admission{Account: "acct", Plan: plan, Request: rid(1), Cost: 1, Now: t0}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Admit = %v, want context.Canceled", err)
	}
	if got := f.inUse(t, "acct", t0); got != 0 {
		t.Errorf("slots in use = %d, want 0", got)
	}
	if got := f.balance(t, "acct", plan, t0); got.Remaining != 100 {
		t.Errorf("balance = %+v, want untouched", got)
	}
}

// cancelOnReserve cancels the caller's context just before reserving.
type cancelOnReserve struct {
	driver.Ledger
	cancel context.CancelFunc
}

func (c cancelOnReserve) Reserve(ctx context.Context, r driver.Reservation) (billing.Balance, error) {
	c.cancel()
	return c.Ledger.Reserve(ctx, r)
}

func TestRenew(t *testing.T) {
	const lease = 10 * time.Second
	plan := billing.Plan{Name: "pro", Credits: 100, Concurrency: 1}
	tests := []struct {
		name    string
		renewAt time.Duration // 0: no renewal
		// A second call at t0+12s finds the first call's slot alive (renewed to
		// t0+18s) or expired (its lease ended at t0+10s).
		wantSecond error
	}{
		{"not renewed, the lease ends", 0, nil},
		{"renewed before the lease ends", 8 * time.Second, meter.ErrConcurrencyLimited},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, &meter.Options{Lease: lease})
			f.open(t, "acct", plan, 100, t0)
			first := f.admit(t, meter.Admission{Account: "acct", Plan: plan, Request: rid(1), Cost: 1, Now: t0})
			if tt.renewAt > 0 {
				if err := f.meter.Renew(t.Context(), &first, t0.Add(tt.renewAt)); err != nil {
					t.Fatalf("Renew: %v", err)
				}
			}
			at := t0.Add(12 * time.Second)
			second, err := f.meter.Admit(t.Context(), meter.Admission{Account: "acct", Plan: plan, Request: rid(2), Cost: 1, Now: at})
			if tt.wantSecond == nil {
				if err != nil {
					t.Fatalf("second call at +12s: %v, want admitted", err)
				}
				f.settle(t, &second, meter.Outcome{Now: at})
			} else {
				limitError(t, err, tt.wantSecond)
				if got := f.inUse(t, "acct", t0.Add(17*time.Second)); got != 1 {
					t.Errorf("slots in use at +17s = %d, want 1", got)
				}
				if got := f.inUse(t, "acct", t0.Add(18*time.Second)); got != 0 {
					t.Errorf("slots in use at +18s = %d, want 0 (renewed lease over)", got)
				}
			}
			// Renewing a lease that has ended fails: the slot may have been given away.
			if err := f.meter.Renew(t.Context(), &first, t0.Add(19*time.Second)); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Renew after the lease ended = %v, want store.ErrNotFound", err)
			}
		})
	}
}

func TestRenewWithoutSlot(t *testing.T) {
	f := newFixture(t, nil)
	unlimited := billing.Plan{Name: "unlimited", Credits: 100}
	limited := billing.Plan{Name: "pro", Credits: 100, Concurrency: 1}
	f.open(t, "acct", unlimited, 100, t0)

	tk := f.admit(t, meter.Admission{Account: "acct", Plan: unlimited, Request: rid(1), Cost: 1, Now: t0})
	if err := f.meter.Renew(t.Context(), &tk, t0.Add(time.Hour)); err != nil {
		t.Errorf("Renew of a call without a slot = %v, want nil", err)
	}
	// After Settle the slot is gone, and renewing is a no-op rather than an error.
	tk = f.admit(t, meter.Admission{Account: "acct", Plan: limited, Request: rid(2), Cost: 1, Now: t0})
	f.settle(t, &tk, meter.Outcome{Now: t0})
	if err := f.meter.Renew(t.Context(), &tk, t0.Add(time.Second)); err != nil {
		t.Errorf("Renew after Settle = %v, want nil", err)
	}
	if got := f.inUse(t, "acct", t0.Add(time.Second)); got != 0 {
		t.Errorf("slots in use = %d, want 0", got)
	}
}

func TestStatus(t *testing.T) {
	f := newFixture(t, nil)
	plan := billing.Plan{Name: "pro", Credits: 100, RatePerMinute: 60, Concurrency: 3}
	f.open(t, "acct", plan, 100, t0)

	done := f.admit(t, meter.Admission{Account: "acct", Plan: plan, Request: rid(1), APIs: []string{"geo", "weather"}, Cost: 3, Now: t0})
	f.settle(t, &done, meter.Outcome{Refund: 1, Failed: []string{"weather"}, Now: t0})
	held := f.admit(t, meter.Admission{Account: "acct", Plan: plan, Request: rid(2), APIs: []string{"geo"}, Cost: 2, Now: t0})

	now := t0.Add(500 * time.Millisecond)
	want := billing.Status{
		Balance: billing.Balance{Remaining: 96, Used: 4, Allowance: 100, Period: billing.MonthOf(t0)},
		Usage:   map[string]int64{"geo": 2, "weather": 0},
		// Two events at t0 put tat at t0+2s: at +500ms, after a third, 57.5 tokens.
		Rate:       billing.RateDecision{Allowed: true, Remaining: 57, ResetAfter: 2500 * time.Millisecond},
		SlotsInUse: 1,
	}
	for i := range 3 {
		got, err := f.meter.Status(t.Context(), "acct", plan, billing.Period{}, now)
		if err != nil {
			t.Fatal(err)
		}
		if got.Balance != want.Balance || !maps.Equal(got.Usage, want.Usage) || got.Rate != want.Rate || got.SlotsInUse != want.SlotsInUse {
			t.Fatalf("Status #%d = %+v, want %+v", i+1, got, want)
		}
	}
	// Nothing changed: the rate limiter still answers the same, and the held call's
	// slot and charge are as they were.
	if got := f.peek(t, "acct", plan, now); got != want.Rate {
		t.Errorf("rate after Status = %+v, want %+v", got, want.Rate)
	}
	if got := f.balance(t, "acct", plan, now); got != want.Balance {
		t.Errorf("balance after Status = %+v, want %+v", got, want.Balance)
	}
	f.settle(t, &held, meter.Outcome{Now: now})

	// A plan without limits reports no rate and no slots, even if the stores hold some
	// for the account.
	unlimited := billing.Plan{Name: "unlimited", Credits: 100}
	held = f.admit(t, meter.Admission{Account: "acct", Plan: plan, Request: rid(3), Cost: 0, Now: now})
	got, err := f.meter.Status(t.Context(), "acct", unlimited, billing.Period{}, now)
	if err != nil {
		t.Fatal(err)
	}
	if got.Rate != (billing.RateDecision{}) || got.SlotsInUse != 0 {
		t.Errorf("Status on a plan without limits = %+v, want no rate and no slots", got)
	}
	f.settle(t, &held, meter.Outcome{Now: now})
}

func TestStatusRenewsDuePeriod(t *testing.T) {
	f := newFixture(t, nil)
	plan := billing.Plan{Name: "pro", Credits: 100}
	f.open(t, "acct", plan, 100, t0)
	tk := f.admit(t, meter.Admission{Account: "acct", Plan: plan, Request: rid(1), APIs: []string{"geo"}, Cost: 30, Now: t0})
	f.settle(t, &tk, meter.Outcome{Now: t0})

	april := time.Date(2025, time.April, 1, 0, 0, 0, 0, time.UTC)
	got, err := f.meter.Status(t.Context(), "acct", plan, billing.Period{}, april)
	if err != nil {
		t.Fatal(err)
	}
	want := billing.Balance{Remaining: 100, Used: 0, Allowance: 100, Period: billing.MonthOf(april)}
	if got.Balance != want || len(got.Usage) != 0 {
		t.Errorf("Status in the next month = %+v, want balance %+v and no usage", got, want)
	}
}

func TestUnlimitedPlanSkipsLimiters(t *testing.T) {
	// Limiters that fail every call: a plan without rate limit and concurrency ceiling
	// never reaches them.
	rates := &failingRates{err: errConnRefused}
	slots := &failingSlots{err: errConnRefused}
	ledger := memory.NewLedger(nil)
	m, err := meter.New(ledger, rates, slots, nil)
	if err != nil {
		t.Fatal(err)
	}
	plan := billing.Plan{Name: "unlimited", Credits: 10}
	if err := ledger.Open(t.Context(), driver.Opening{Account: "acct", Balance: 10, Allowance: 10, Period: billing.MonthOf(t0)}); err != nil {
		t.Fatal(err)
	}
	tk, err := m.Admit(t.Context(), meter.Admission{Account: "acct", Plan: plan, Request: rid(1), Cost: 1, Now: t0})
	if err != nil {
		t.Fatalf("Admit: %v", err)
	}
	if tk.Rate != (billing.RateDecision{}) {
		t.Errorf("Ticket.Rate = %+v, want the zero decision", tk.Rate)
	}
	if err := m.Renew(t.Context(), &tk, t0); err != nil {
		t.Errorf("Renew: %v", err)
	}
	if _, err := m.Settle(t.Context(), &tk, meter.Outcome{Now: t0}); err != nil {
		t.Errorf("Settle: %v", err)
	}
	if _, err := m.Status(t.Context(), "acct", plan, billing.Period{}, t0); err != nil {
		t.Errorf("Status: %v", err)
	}
	if n := rates.calls.Load() + slots.calls.Load(); n != 0 {
		t.Errorf("the limiters were called %d times", n)
	}
}

func TestStoreFailures(t *testing.T) {
	plan := billing.Plan{Name: "pro", Credits: 100, RatePerMinute: 60, Concurrency: 1}
	tests := []struct {
		name string
		// wrap replaces some of the fixture's stores with failing ones.
		wrap func(f *fixture) (driver.Ledger, driver.RateLimiter, driver.ConcurrencyLimiter)
		// rateConsumed reports whether the call's rate event is spent, because the
		// failure came after the rate limiter allowed it.
		rateConsumed bool
	}{
		{"rate limiter", func(f *fixture) (driver.Ledger, driver.RateLimiter, driver.ConcurrencyLimiter) {
			return f.ledger, &failingRates{err: errConnRefused}, f.slots
		}, false},
		{"concurrency limiter", func(f *fixture) (driver.Ledger, driver.RateLimiter, driver.ConcurrencyLimiter) {
			return f.ledger, f.rates, &failingSlots{err: errConnRefused}
		}, true},
		{"ledger", func(f *fixture) (driver.Ledger, driver.RateLimiter, driver.ConcurrencyLimiter) {
			return failingLedger{Ledger: f.ledger, err: errConnRefused}, f.rates, f.slots
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, nil)
			f.open(t, "acct", plan, 100, t0)
			ledger, rates, slots := tt.wrap(f)
			m, err := meter.New(ledger, rates, slots, nil)
			if err != nil {
				t.Fatal(err)
			}
			before := f.balance(t, "acct", plan, t0)
			_, err = m.Admit(t.Context(), meter.Admission{Account: "acct", Plan: plan, Request: rid(1), APIs: []string{"geo"}, Cost: 1, Now: t0})
			if !errors.Is(err, errConnRefused) {
				t.Fatalf("Admit = %v, want the store's error", err)
			}
			if le := (*meter.LimitError)(nil); errors.As(err, &le) {
				t.Errorf("a store failure came back as a refusal: %v", le)
			}
			if got := f.balance(t, "acct", plan, t0); got != before {
				t.Errorf("balance = %+v, want %+v", got, before)
			}
			if got := f.inUse(t, "acct", t0); got != 0 {
				t.Errorf("slots in use = %d, want 0", got)
			}
			wantRemaining := 59
			if tt.rateConsumed {
				wantRemaining = 58
			}
			if got := f.peek(t, "acct", plan, t0); got.Remaining != wantRemaining {
				t.Errorf("rate remaining = %d, want %d", got.Remaining, wantRemaining)
			}
			// Nothing is held: the real stores admit the next call.
			tk := f.admit(t, meter.Admission{Account: "acct", Plan: plan, Request: rid(2), APIs: []string{"geo"}, Cost: 1, Now: t0})
			f.settle(t, &tk, meter.Outcome{Now: t0})
		})
	}
}

func TestSettleLedgerFailureReleasesSlot(t *testing.T) {
	f := newFixture(t, nil)
	plan := billing.Plan{Name: "pro", Credits: 100, Concurrency: 1}
	f.open(t, "acct", plan, 100, t0)
	failing := failingLedger{Ledger: f.ledger, err: errConnRefused, settleOnly: true}
	m, err := meter.New(failing, f.rates, f.slots, nil)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := m.Admit(t.Context(), meter.Admission{Account: "acct", Plan: plan, Request: rid(1), Cost: 5, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Settle(t.Context(), &tk, meter.Outcome{Refund: 5, Now: t0})
	if !errors.Is(err, errConnRefused) {
		t.Fatalf("Settle = %v, want the ledger's error", err)
	}
	if b != tk.Balance || b.Remaining != 95 {
		t.Errorf("Settle = %+v, want the balance from admission (95 remaining)", b)
	}
	if got := f.inUse(t, "acct", t0); got != 0 {
		t.Errorf("slots in use = %d, want 0: the slot is released even when the ledger fails", got)
	}
}

var errConnRefused = errors.New("connection refused")

type failingRates struct {
	err   error
	calls atomic.Int64
}

func (r *failingRates) Allow(context.Context, string, billing.Limit, time.Time) (billing.RateDecision, error) {
	r.calls.Add(1)
	return billing.RateDecision{}, r.err
}

func (r *failingRates) AllowN(context.Context, string, billing.Limit, int, time.Time) (billing.RateDecision, error) {
	r.calls.Add(1)
	return billing.RateDecision{}, r.err
}

func (r *failingRates) Peek(context.Context, string, billing.Limit, time.Time) (billing.RateDecision, error) {
	r.calls.Add(1)
	return billing.RateDecision{}, r.err
}

type failingSlots struct {
	err   error
	calls atomic.Int64
}

func (s *failingSlots) Acquire(context.Context, string, billing.RequestID, int, time.Duration, time.Time) (driver.SlotDecision, error) {
	s.calls.Add(1)
	return driver.SlotDecision{}, s.err
}

func (s *failingSlots) Release(context.Context, string, billing.RequestID) error {
	s.calls.Add(1)
	return s.err
}

func (s *failingSlots) Renew(context.Context, string, billing.RequestID, time.Duration, time.Time) error {
	s.calls.Add(1)
	return s.err
}

func (s *failingSlots) InUse(context.Context, string, time.Time) (int, error) {
	s.calls.Add(1)
	return 0, s.err
}

// failingLedger fails Reserve and Settle (or Settle only) and passes the rest through.
type failingLedger struct {
	driver.Ledger
	err        error
	settleOnly bool
}

func (l failingLedger) Reserve(ctx context.Context, r driver.Reservation) (billing.Balance, error) {
	if l.settleOnly {
		return l.Ledger.Reserve(ctx, r)
	}
	return billing.Balance{}, l.err
}

func (l failingLedger) Settle(context.Context, driver.Settlement) (billing.Balance, error) {
	return billing.Balance{}, l.err
}

// TestAdmitAccountPeriod: an admission in the account's own period (an anchored one,
// a yearly one) renews the balance when that period begins later than the ledger's,
// and its settlement applies to the reservation's period, even when it is made after
// the period ended.
func TestAdmitAccountPeriod(t *testing.T) {
	anchor := time.Date(2025, time.January, 31, 9, 30, 0, 0, time.UTC)
	tests := []struct {
		name   string
		renews billing.Cycle
	}{{"monthly", billing.Monthly}, {"yearly", billing.Yearly}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, nil)
			plan := billing.Plan{Name: "pro", Credits: 100, Renews: tt.renews}
			first := billing.PeriodAt(anchor, plan.Renews, anchor)
			if err := f.ledger.Open(t.Context(), driver.Opening{Account: "acct", Balance: 100, Allowance: 100, Period: first}); err != nil {
				t.Fatal(err)
			}
			// The last instant of the first period: no renewal, whatever the month.
			last := first.End.Add(-time.Nanosecond)
			tk := f.admit(t, meter.Admission{Account: "acct", Plan: plan, Period: billing.PeriodAt(anchor, plan.Renews, last),
				Request: rid(1), APIs: []string{"geo"}, Cost: 30, Now: last})
			if tk.Period != first || tk.Balance.Remaining != 70 || tk.Balance.Period != first {
				t.Fatalf("admitted at the end of the first period: ticket period %+v, balance %+v", tk.Period, tk.Balance)
			}
			// Settled after the period ended: the refund goes to the reservation's period.
			f.settle(t, &tk, meter.Outcome{Refund: 10, Failed: []string{"geo"}, Now: first.End})
			second := billing.PeriodAt(anchor, plan.Renews, first.End)
			st, err := f.meter.Status(t.Context(), "acct", plan, first, last)
			if err != nil || st.Balance.Remaining != 80 || st.Balance.Period != first {
				t.Fatalf("Status in the first period = %+v, %v; want 80 remaining", st.Balance, err)
			}
			// The first admission in the second period renews the allowance.
			tk = f.admit(t, meter.Admission{Account: "acct", Plan: plan, Period: second, Request: rid(2), Cost: 1, Now: first.End})
			if tk.Balance.Remaining != 99 || tk.Balance.Used != 1 || tk.Balance.Period != second {
				t.Errorf("admitted at the start of the second period: balance %+v, want 99 remaining in %+v", tk.Balance, second)
			}
			f.settle(t, &tk, meter.Outcome{Now: first.End})
		})
	}
}
