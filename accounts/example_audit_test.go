package accounts_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// This example keeps an audit log for 90 days: an audit.Log subscribed to the
// service's events records the manager's changes, and the manager reads the log's
// store. The log prunes it on a schedule (here turned off, to prune by hand); an entry
// the store cannot take while it is down waits in a bounded queue, which the log's
// Pending and Dropped report.
func ExampleManager_AuditLog() {
	ctx := context.Background()
	now := time.Date(2030, time.January, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	plans, err := billing.NewPlans(billing.Plan{Name: "pro", Credits: 1000, RatePerMinute: 60, Concurrency: 2})
	if err != nil {
		log.Fatal(err)
	}
	stores := tollgate.Stores{
		Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
		Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter(),
	}
	svc, err := tollgate.New(&catalog.Registry{}, stores, plans, &tollgate.Options{Now: clock})
	if err != nil {
		log.Fatal(err)
	}
	defer svc.Close()
	auditStore := memory.NewAuditStore()
	auditLog := audit.NewLog(auditStore, &audit.LogOptions{
		Now:           clock,
		Retention:     90 * 24 * time.Hour,
		PruneInterval: -1,   // the default prunes every hour (a tenth of the retention, at most an hour)
		Queue:         1000, // entries kept while the store is down (default 10,000)
	})
	defer auditLog.Close() // a last attempt for queued entries
	svc.Events().Subscribe(auditLog, auditLog.Kinds()...)
	mgr, err := accounts.New(svc, &accounts.Options{Audit: auditStore})
	if err != nil {
		log.Fatal(err)
	}
	defer mgr.Close()

	if _, _, _, err := mgr.CreateAccount(ctx, accounts.Spec{ID: "acme", Plan: "pro"}); err != nil {
		log.Fatal(err)
	}
	now = now.Add(100 * 24 * time.Hour)
	if _, err := mgr.AdjustCredits(ctx, "acme", 50, "goodwill", nil); err != nil {
		log.Fatal(err)
	}
	pruned, err := auditLog.Prune(ctx)
	if err != nil {
		log.Fatal(err)
	}
	page, err := mgr.AuditLog(ctx, audit.Query{Account: "acme"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("pruned", pruned)
	for _, e := range page.Entries {
		fmt.Println(e.Action, e.Credits, e.Reason)
	}
	fmt.Println("pending", auditLog.Pending(), "dropped", auditLog.Dropped())
	// Output:
	// pruned 1
	// credits.adjust 50 goodwill
	// pending 0 dropped 0
}
