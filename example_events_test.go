package tollgate_test

import (
	"context"
	"fmt"
	"log"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// This example hears of the keys rotated and revoked through the service's account
// manager, as docs/library.md shows: an observer subscribed to the kinds it wants, in one line.
func ExampleService_Events() {
	ctx := accounts.WithActor(context.Background(), event.Actor{ID: "operator:ann"})
	plans, err := billing.NewPlans(billing.Plan{Name: "pro", Credits: 1000})
	if err != nil {
		log.Fatal(err)
	}
	stores := tollgate.Stores{
		Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
		Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter(),
	}
	svc, err := tollgate.New(&catalog.Registry{}, stores, plans, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer svc.Close()
	mgr, err := accounts.New(svc, nil) // publishes its changes on svc.Events()
	if err != nil {
		log.Fatal(err)
	}
	defer mgr.Close()

	svc.Events().Subscribe(event.ObserverFunc(func(ctx context.Context, e event.Event) {
		if c, ok := e.(*event.Change); ok {
			fmt.Printf("%s: account %s, by %s\n", c.Kind(), c.Account, c.Actor.ID)
		}
	}), event.KeyRotated, event.KeyRevoked)

	_, key, _, err := mgr.CreateAccount(ctx, accounts.Spec{ID: "acme", Plan: "pro"})
	if err != nil {
		log.Fatal(err)
	}
	if _, _, err := mgr.RotateKey(ctx, key.ID); err != nil {
		log.Fatal(err)
	}
	if _, err := mgr.RevokeKey(ctx, key.ID); err != nil {
		log.Fatal(err)
	}
	// Output:
	// key.rotated: account acme, by operator:ann
	// key.revoked: account acme, by operator:ann
}
