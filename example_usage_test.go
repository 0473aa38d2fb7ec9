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
	now := time.Date(2030, time.January, 15, 12, 0, 0, 0, time.UTC)
	svc := usageExampleService(now)
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

// Service.OwnUsage is the account holder's read of the usage: the account is the
// caller's, and a sub-key sees only its own calls (naming another key is refused).
func ExampleService_OwnUsage() {
	ctx := context.Background()
	now := time.Date(2030, time.January, 15, 12, 0, 0, 0, time.UTC)
	svc := usageExampleService(now) // the sample catalog on memory stores, with Options.Usage
	defer svc.Close()
	acct, primary, primaryValue, _ := svc.CreateAccount(ctx, tollgate.AccountSpec{Plan: "pro"})
	_, subValue, _ := svc.CreateKey(ctx, acct.ID, auth.NewKey{Name: "ci"})
	as := func(value string) tollgate.Caller {
		return tollgate.Caller{Credential: auth.Credential{Kind: auth.APIKeyHeader, Value: value}, Channel: auth.ChannelREST}
	}
	for _, value := range []string{primaryValue, primaryValue, subValue} {
		svc.Call(ctx, as(value), "date-info", func(*catalog.API) (tollgate.Input, error) {
			return tollgate.Input{JSON: map[string]any{"date": "2024-02-29"}}, nil
		})
	}
	_ = svc.FlushUsage(ctx)
	day := usage.Query{From: now.Add(-24 * time.Hour), To: now.Add(time.Minute), Interval: usage.Day}
	for _, c := range []struct {
		who   string
		value string
	}{{"primary", primaryValue}, {"sub-key", subValue}} {
		res, err := svc.OwnUsage(ctx, as(c.value), day)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(c.who, "sees", res.Series[0].Points[0].Calls, "calls")
	}
	q := day
	q.Key = primary.ID
	_, err := svc.OwnUsage(ctx, as(subValue), q)
	fmt.Println(tollgate.CodeOf(err))
	// Output:
	// primary sees 3 calls
	// sub-key sees 1 calls
	// forbidden
}

// usageExampleService returns a service of the sample catalog on memory stores, with a
// "pro" plan and usage statistics, whose clock stands at now.
func usageExampleService(now time.Time) *tollgate.Service {
	reg := &catalog.Registry{}
	if err := apis.Register(reg); err != nil {
		log.Fatal(err)
	}
	plans, _ := billing.NewPlans(billing.Plan{Name: "pro", Credits: 1000})
	svc, err := tollgate.New(reg, tollgate.Stores{Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
		Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter()}, plans, &tollgate.Options{
		Now:   func() time.Time { return now },
		Usage: &tollgate.UsageOptions{Store: memory.NewUsageStore()},
	})
	if err != nil {
		log.Fatal(err)
	}
	return svc
}
