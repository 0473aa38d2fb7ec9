package meter_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/internal/meter"
	"github.com/tollgate-dev/tollgate/store/memory"
)

func ExampleMeter() {
	ctx := context.Background()
	m, err := meter.New(memory.NewLedger(nil), memory.NewRateLimiter(), memory.NewConcurrencyLimiter(), nil)
	if err != nil {
		log.Fatal(err)
	}
	plan := billing.Plan{Name: "pro", Credits: 1000, RatePerMinute: 600, Concurrency: 10}
	now := time.Date(2025, time.March, 14, 12, 0, 0, 0, time.UTC)

	// The account starts the month with the plan's allowance.
	err = m.Ledger().Open(ctx, driver.Opening{
		Account: "acct_42", Balance: plan.Credits, Allowance: plan.Credits, Period: billing.MonthOf(now),
	})
	if err != nil {
		log.Fatal(err)
	}

	// Admit a call to two APIs costing 3 credits in all...
	ticket, err := m.Admit(ctx, meter.Admission{
		Account: "acct_42", Plan: plan, Request: billing.RequestID{1},
		APIs: []string{"geo", "weather"}, Cost: 3, Now: now,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("admitted, remaining:", ticket.Balance.Remaining)

	// ...run it; "weather" (1 credit) failed on the service's side and is refunded.
	b, err := m.Settle(ctx, &ticket, meter.Outcome{Refund: 1, Failed: []string{"weather"}, Now: now.Add(time.Second)})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("settled, remaining:", b.Remaining, "used:", b.Used, "renews:", b.Period.End.Format(time.RFC3339))
	// Output:
	// admitted, remaining: 997
	// settled, remaining: 998 used: 2 renews: 2025-04-01T00:00:00Z
}
