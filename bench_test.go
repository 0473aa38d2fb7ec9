package tollgate

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/internal/meter"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// BenchmarkAdmission measures the pipeline's work around a call on the memory stores:
// key hashing and lookup, the restriction checks, the account's plan and period, the
// rate limit, a concurrency slot, the credit reservation and the settlement. The
// handler is not run; see rest's benchmarks for whole calls.
//
//	go test -run='^$' -bench=Admission -benchmem -count=10 . | tee new.txt
func BenchmarkAdmission(b *testing.B) {
	for _, bc := range []struct {
		name     string
		parallel bool
	}{{"serial", false}, {"parallel", true}} {
		b.Run(bc.name, func(b *testing.B) {
			s, key := benchService(b)
			cred, err := auth.CredentialFrom(map[string][]string{"X-Api-Key": {key}})
			if err != nil {
				b.Fatal(err)
			}
			caller := Caller{Credential: cred, Channel: auth.ChannelREST, Addr: netip.MustParseAddr("203.0.113.7")}
			apis := []string{"hash"}
			admit := func(ctx context.Context) {
				p, err := s.Authenticate(ctx, caller)
				if err != nil {
					b.Fatal(err)
				}
				if err := p.CheckAPI("hash"); err != nil {
					b.Fatal(err)
				}
				now := s.now()
				plan, period := s.terms(&p, now)
				t, err := s.meter.Admit(ctx, meter.Admission{
					Account: p.Account.ID, Plan: plan, Period: period, Request: s.ids.next(), APIs: apis, Cost: 1, Now: now,
				})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.meter.Settle(ctx, &t, meter.Outcome{Now: now}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			if !bc.parallel {
				ctx := context.Background()
				for b.Loop() {
					admit(ctx)
				}
				return
			}
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					admit(ctx)
				}
			})
		})
	}
}

// benchService returns a service on memory stores with one account on a plan that has
// every limit (so every step runs) but never denies, and the account's key.
func benchService(b *testing.B) (*Service, string) {
	b.Helper()
	reg := &catalog.Registry{}
	err := reg.Register(catalog.API{ID: "hash", Method: "GET", Cost: 1,
		Handler: catalog.HandlerFunc(func(context.Context, *catalog.Request) (any, error) { return nil, nil })})
	if err != nil {
		b.Fatal(err)
	}
	plans, err := billing.NewPlans(billing.Plan{Name: "bench", Credits: billing.MaxCredits, RatePerMinute: 1 << 30, Concurrency: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Date(2030, 1, 15, 0, 0, 0, 0, time.UTC)
	keys, ledger := memory.NewKeyStore(), memory.NewLedger(nil)
	s, err := New(reg, Stores{
		Keys: keys, Ledger: ledger,
		Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter(),
	}, plans, &Options{Now: func() time.Time { return now }})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Close)
	// The account is made as package accounts makes it (which this package cannot
	// import): the account and its key in the key store, its balance in the ledger.
	ctx := context.Background()
	primary := auth.Key{ID: auth.KeyIDPrefix + "primary", AccountID: "acct", Name: "primary", Primary: true,
		Hash: auth.HashKey(auth.NewKeyValue()), CreatedAt: now}
	// Anchored as accounts are anchored at their creation, so that its period is its
	// own rather than the calendar month.
	created := now.AddDate(0, 0, -20).Add(-5 * time.Hour)
	if err := keys.CreateAccount(ctx, auth.Account{ID: "acct", Plan: "bench", CreatedAt: created, BillingAnchor: created}, primary); err != nil {
		b.Fatal(err)
	}
	if err := ledger.Open(ctx, driver.Opening{Account: "acct", Balance: billing.MaxCredits, Allowance: billing.MaxCredits,
		Period: billing.PeriodAt(created, billing.Monthly, now)}); err != nil {
		b.Fatal(err)
	}
	rs, err := auth.NewRestrictions(auth.RestrictionSpec{APIs: []string{"hash", "echo"}, Channels: []string{"rest"}, AllowedIPs: []string{"203.0.113.0/24"}})
	if err != nil {
		b.Fatal(err)
	}
	value := auth.NewKeyValue()
	if err := keys.CreateKey(ctx, auth.Key{ID: auth.KeyIDPrefix + "bench", AccountID: "acct", Name: "bench",
		Hash: auth.HashKey(value), Restrictions: rs, CreatedAt: now}, auth.KeyLimit{}); err != nil {
		b.Fatal(err)
	}
	return s, value
}
