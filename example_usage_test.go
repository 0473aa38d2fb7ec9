package tollgate_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/examples/apis"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/usage"
)

// With Options.Usage set, every call is recorded; Service.Usage reads an account's
// usage back as series, here per API and day.
func ExampleService_Usage() {
	ctx := context.Background()
	reg := &catalog.Registry{}
	if err := apis.Register(reg); err != nil {
		log.Fatal(err)
	}
	plans, _ := billing.NewPlans(billing.Plan{Name: "pro", Credits: 1000})
	now := time.Date(2030, time.January, 15, 12, 0, 0, 0, time.UTC)
	svc, err := tollgate.New(reg, tollgate.Stores{Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
		Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter()}, plans, &tollgate.Options{
		Now:   func() time.Time { return now },
		Usage: &tollgate.UsageOptions{Store: memory.NewUsageStore()},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer svc.Close()
	acct, _, key, _ := svc.CreateAccount(ctx, tollgate.AccountSpec{Plan: "pro"})
	caller := tollgate.Caller{Credential: auth.Credential{Kind: auth.APIKeyHeader, Value: key}, Channel: auth.ChannelREST}
	for _, date := range []string{"2024-02-29", "2024-02-30"} { // the second is rejected
		svc.Call(ctx, caller, "date-info", func(*catalog.API) (tollgate.Input, error) {
			return tollgate.Input{JSON: map[string]any{"date": date}}, nil
		})
	}
	_ = svc.FlushUsage(ctx) // or wait for UsageOptions.FlushInterval
	res, err := svc.Usage(ctx, usage.Query{Account: acct.ID, From: now.Add(-24 * time.Hour), To: now.Add(time.Minute),
		Interval: usage.Day, By: usage.ByAPI})
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range res.Series {
		for _, p := range s.Points {
			fmt.Println(s.Group, p.Start.Format(time.DateOnly), p.Calls, "calls,", p.Credits, "credits, errors", p.Errors)
		}
	}
	// Output:
	// date-info 2030-01-15 2 calls, 2 credits, errors map[rejected:1]
}
