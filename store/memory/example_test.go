package memory_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/store/memory"
)

func ExampleNewLedger() {
	ctx := context.Background()
	ledger := memory.NewLedger(nil)
	period := billing.MonthOf(time.Date(2030, time.January, 15, 9, 30, 0, 0, time.UTC))

	// Open the account with its plan's monthly allowance.
	err := ledger.Open(ctx, billing.Opening{Account: "acme", Balance: 100, Allowance: 100, Period: period})
	if err != nil {
		panic(err)
	}

	// A call to "hash" (1 credit) succeeds: reserve its cost, then keep the charge.
	hash := billing.RequestID{1}
	_, err = ledger.Reserve(ctx, billing.Reservation{Account: "acme", Request: hash, APIs: []string{"hash"}, Amount: 1, Period: period, Allowance: 100})
	if err != nil {
		panic(err)
	}
	_, err = ledger.Settle(ctx, billing.Settlement{Account: "acme", Request: hash, Period: period, Allowance: 100})
	if err != nil {
		panic(err)
	}

	// A call to "image-info" (2 credits) fails on the service's side: refund it.
	img := billing.RequestID{2}
	b, err := ledger.Reserve(ctx, billing.Reservation{Account: "acme", Request: img, APIs: []string{"image-info"}, Amount: 2, Period: period, Allowance: 100})
	if err != nil {
		panic(err)
	}
	fmt.Println("while image-info runs:", b.Remaining)
	b, err = ledger.Settle(ctx, billing.Settlement{Account: "acme", Request: img, Refund: 2, Uncount: []string{"image-info"}, Period: period, Allowance: 100})
	if err != nil {
		panic(err)
	}
	fmt.Printf("remaining %d, used %d of %d, renewed on %s\n", b.Remaining, b.Used, b.Allowance, b.Period.End.Format(time.DateOnly))

	usage, err := ledger.Usage(ctx, "acme", period)
	if err != nil {
		panic(err)
	}
	fmt.Printf("calls counted: hash %d, image-info %d\n", usage["hash"], usage["image-info"])
	// Output:
	// while image-info runs: 97
	// remaining 99, used 1 of 100, renewed on 2030-02-01
	// calls counted: hash 1, image-info 0
}
