package tollgate_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// This example keeps an audit log for 90 days. The service prunes it on a schedule
// (here turned off, to prune by hand); an entry the audit log cannot take while it is
// down waits in a bounded queue, which Stats().AuditPending and AuditDropped
// report.
func ExampleService_PruneAuditLog() {
	ctx := context.Background()
	now := time.Date(2030, time.January, 1, 12, 0, 0, 0, time.UTC)
	plans, err := billing.NewPlans(billing.Plan{Name: "pro", Credits: 1000, RatePerMinute: 60, Concurrency: 2})
	if err != nil {
		log.Fatal(err)
	}
	auditLog := memory.NewAuditStore()
	svc, err := tollgate.New(&catalog.Registry{}, tollgate.Stores{
		Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
		Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter(),
	}, plans, &tollgate.Options{
		Now:                func() time.Time { return now },
		Audit:              auditLog,
		AuditRetention:     90 * 24 * time.Hour,
		AuditPruneInterval: -1,   // the default prunes every hour (a tenth of the retention, at most an hour)
		AuditQueue:         1000, // entries kept while the audit log is down (default 10,000)
	})
	if err != nil {
		log.Fatal(err)
	}
	defer svc.Close() // a last attempt for queued entries

	if _, _, _, err := svc.CreateAccount(ctx, tollgate.AccountSpec{ID: "acme", Plan: "pro"}); err != nil {
		log.Fatal(err)
	}
	now = now.Add(100 * 24 * time.Hour)
	if _, err := svc.AdjustCredits(ctx, "acme", 50, "goodwill", ""); err != nil {
		log.Fatal(err)
	}
	pruned, err := svc.PruneAuditLog(ctx)
	if err != nil {
		log.Fatal(err)
	}
	page, err := svc.AuditLog(ctx, audit.Query{Account: "acme"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("pruned", pruned)
	for _, e := range page.Entries {
		fmt.Println(e.Action, e.Credits, e.Reason)
	}
	fmt.Println("pending", svc.Stats().AuditPending, "dropped", svc.Stats().AuditDropped)
	// Output:
	// pruned 1
	// credits.adjust 50 goodwill
	// pending 0 dropped 0
}
