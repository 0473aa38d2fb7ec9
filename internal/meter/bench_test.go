package meter_test

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/internal/meter"
)

// benchPlan is a pro-like plan whose rate limit never denies within a benchmark.
var benchPlan = billing.Plan{Name: "pro", Credits: billing.MaxCredits, RatePerMinute: 1_000_000_000, Concurrency: 10}

// BenchmarkAdmitSettle admits and settles one call at a time for one account, on the
// memory stores.
func BenchmarkAdmitSettle(b *testing.B) {
	f := newFixture(b, nil)
	f.open(b, "acct", benchPlan, benchPlan.Credits, t0)
	apis := []string{"weather"}
	// The caller gives the account's period (the service computes it when it
	// authenticates the call).
	period := billing.MonthOf(t0)
	ctx := b.Context()
	b.ReportAllocs()
	var n uint64
	for b.Loop() {
		n++
		now := t0.Add(time.Duration(n) * time.Microsecond)
		tk, err := f.meter.Admit(ctx, meter.Admission{
			Account: "acct", Plan: benchPlan, Period: period, Request: rid(n), APIs: apis, Cost: 1, Now: now,
		})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.meter.Settle(ctx, &tk, meter.Outcome{Now: now}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAdmitSettleParallel admits and settles calls from parallel goroutines, each
// on its own account.
func BenchmarkAdmitSettleParallel(b *testing.B) {
	const accounts = 1024
	f := newFixture(b, nil)
	names := make([]string, accounts)
	for i := range names {
		names[i] = "acct-" + strconv.Itoa(i)
		f.open(b, names[i], benchPlan, benchPlan.Credits, t0)
	}
	apis := []string{"weather"}
	period := billing.MonthOf(t0)
	ctx := b.Context()
	var goroutines, requests atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		account := names[goroutines.Add(1)%accounts]
		for pb.Next() {
			n := requests.Add(1)
			now := t0.Add(time.Duration(n) * time.Microsecond)
			tk, err := f.meter.Admit(ctx, meter.Admission{
				Account: account, Plan: benchPlan, Period: period, Request: rid(n), APIs: apis, Cost: 1, Now: now,
			})
			if err != nil {
				b.Error(err)
				return
			}
			if _, err := f.meter.Settle(ctx, &tk, meter.Outcome{Now: now}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
