package accounts_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/examples/apis"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/usage"
)

// With a usage.Recorder subscribed to the service's events, every call is recorded;
// with its store in Options.Usage, Manager.Usage reads an account's usage back as
// series, here per API and day.
func ExampleManager_Usage() {
	ctx := context.Background()
	now := time.Date(2030, time.January, 15, 12, 0, 0, 0, time.UTC)
	svc, mgr, rec := usageExample(now)
	defer svc.Close()
	defer rec.Close(ctx) // flushes what is left
	defer mgr.Close()
	acct, _, key, _ := mgr.CreateAccount(ctx, accounts.Spec{Plan: "pro"})
	caller := tollgate.Caller{Credential: auth.Credential{Kind: auth.APIKeyHeader, Value: key}, Channel: auth.ChannelREST}
	for _, date := range []string{"2024-02-29", "2024-02-30"} { // the second is rejected
		svc.Call(ctx, caller, "date-info", func(*catalog.API) (tollgate.Input, error) {
			return tollgate.Input{JSON: map[string]any{"date": date}}, nil
		})
	}
	_ = rec.Flush(ctx) // or wait for RecorderOptions.FlushInterval
	res, err := mgr.Usage(ctx, usage.Query{Account: acct.ID, From: now.Add(-24 * time.Hour), To: now.Add(time.Minute),
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

// Manager.OwnUsage is the account holder's read of the usage: the account is the
// caller's, and a sub-key sees only its own calls (naming another key is refused).
func ExampleManager_OwnUsage() {
	ctx := context.Background()
	now := time.Date(2030, time.January, 15, 12, 0, 0, 0, time.UTC)
	svc, mgr, rec := usageExample(now) // the sample catalog on memory stores, with usage statistics
	defer svc.Close()
	defer rec.Close(ctx)
	defer mgr.Close()
	acct, primary, primaryValue, _ := mgr.CreateAccount(ctx, accounts.Spec{Plan: "pro"})
	_, subValue, _ := mgr.CreateKey(ctx, acct.ID, accounts.NewKey{Name: "ci"})
	as := func(value string) tollgate.Caller {
		return tollgate.Caller{Credential: auth.Credential{Kind: auth.APIKeyHeader, Value: value}, Channel: auth.ChannelREST}
	}
	for _, value := range []string{primaryValue, primaryValue, subValue} {
		svc.Call(ctx, as(value), "date-info", func(*catalog.API) (tollgate.Input, error) {
			return tollgate.Input{JSON: map[string]any{"date": "2024-02-29"}}, nil
		})
	}
	_ = rec.Flush(ctx)
	day := usage.Query{From: now.Add(-24 * time.Hour), To: now.Add(time.Minute), Interval: usage.Day}
	for _, c := range []struct {
		who   string
		value string
	}{{"primary", primaryValue}, {"sub-key", subValue}} {
		res, err := mgr.OwnUsage(ctx, as(c.value), day)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(c.who, "sees", res.Series[0].Points[0].Calls, "calls")
	}
	q := day
	q.Key = primary.ID
	_, err := mgr.OwnUsage(ctx, as(subValue), q)
	fmt.Println(tollgate.CodeOf(err))
	// Output:
	// primary sees 3 calls
	// sub-key sees 1 calls
	// forbidden
}

// usageExample returns a service of the sample catalog on memory stores, with a "pro"
// plan, whose clock stands at now; the manager of its accounts; and the recorder of its
// usage statistics, subscribed to its events, whose store the manager reads.
func usageExample(now time.Time) (*tollgate.Service, *accounts.Manager, *usage.Recorder) {
	reg := &catalog.Registry{}
	if err := apis.Register(reg); err != nil {
		log.Fatal(err)
	}
	plans, _ := billing.NewPlans(billing.Plan{Name: "pro", Credits: 1000})
	clock := func() time.Time { return now }
	stores := tollgate.Stores{Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
		Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter()}
	svc, err := tollgate.New(reg, stores, plans, &tollgate.Options{Now: clock})
	if err != nil {
		log.Fatal(err)
	}
	usageStore := memory.NewUsageStore()
	rec, err := usage.NewRecorder(usageStore, &usage.RecorderOptions{Now: clock})
	if err != nil {
		log.Fatal(err)
	}
	svc.Events().Subscribe(rec, rec.Kinds()...)
	mgr, err := accounts.New(svc, &accounts.Options{Usage: usageStore})
	if err != nil {
		log.Fatal(err)
	}
	return svc, mgr, rec
}
