package memory_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store/memory"
)

func ExampleNewLedger() {
	ctx := context.Background()
	ledger := memory.NewLedger(nil)
	now := time.Date(2030, time.January, 15, 9, 30, 0, 0, time.UTC)
	period := driver.MonthOf(now)
	// Every reservation expires: one still open a minute after it was made (its call
	// and its instance died, say) is voided and its credits given back.
	expires := now.Add(time.Minute)

	// Open the account with its plan's monthly allowance.
	err := ledger.Open(ctx, driver.Opening{Account: "acme", Balance: 100, Allowance: 100, Period: period})
	if err != nil {
		panic(err)
	}

	// A call to "hash" (1 credit) succeeds: reserve its cost, then keep the charge.
	hash := driver.RequestID{1}
	_, err = ledger.Reserve(ctx, driver.Reservation{Account: "acme", Request: hash, APIs: []string{"hash"}, Amount: 1,
		Period: period, Allowance: 100, Now: now, Expires: expires})
	if err != nil {
		panic(err)
	}
	_, err = ledger.Settle(ctx, driver.Settlement{Account: "acme", Request: hash, Period: period, Allowance: 100, Now: now})
	if err != nil {
		panic(err)
	}

	// A call to "image-info" (2 credits) fails on the service's side: refund it.
	img := driver.RequestID{2}
	b, err := ledger.Reserve(ctx, driver.Reservation{Account: "acme", Request: img, APIs: []string{"image-info"}, Amount: 2,
		Period: period, Allowance: 100, Now: now, Expires: expires})
	if err != nil {
		panic(err)
	}
	fmt.Println("while image-info runs:", b.Remaining)
	b, err = ledger.Settle(ctx, driver.Settlement{Account: "acme", Request: img, Refund: 2, Uncount: []string{"image-info"},
		Period: period, Allowance: 100, Now: now})
	if err != nil {
		panic(err)
	}
	fmt.Printf("remaining %d, used %d of %d, renewed on %s\n", b.Remaining, b.Used, b.Allowance, b.Period.End.Format(time.DateOnly))

	usage, err := ledger.Usage(ctx, "acme", period)
	if err != nil {
		panic(err)
	}
	fmt.Printf("calls counted: hash %d, image-info %d\n", usage["hash"], usage["image-info"])

	// A third call's settlement never comes: the reservation is voided at its expiry.
	lost := driver.RequestID{3}
	_, err = ledger.Reserve(ctx, driver.Reservation{Account: "acme", Request: lost, APIs: []string{"hash"}, Amount: 1,
		Period: period, Allowance: 100, Now: now, Expires: expires})
	if err != nil {
		panic(err)
	}
	b, err = ledger.Balance(ctx, "acme", expires, period, 100)
	if err != nil {
		panic(err)
	}
	fmt.Println("after the expiry:", b.Remaining)
	_, err = ledger.Settle(ctx, driver.Settlement{Account: "acme", Request: lost, Period: period, Allowance: 100, Now: expires})
	fmt.Println(err)
	// Output:
	// while image-info runs: 97
	// remaining 99, used 1 of 100, renewed on 2030-02-01
	// calls counted: hash 1, image-info 0
	// after the expiry: 99
	// memory: reservation 03000000000000000000000000000000: billing: the reservation expired and was voided
}
