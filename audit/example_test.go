package audit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// An audit store is appended to, listed newest first a page at a time, and pruned by
// the host's retention.
func Example() {
	ctx := context.Background()
	log := memory.NewAuditStore()
	t0 := time.Date(2030, time.January, 15, 12, 0, 0, 0, time.UTC)
	_ = log.Append(ctx,
		audit.Entry{At: t0, Actor: audit.Operator, Action: audit.AccountCreate, Account: "acme", Target: "key_1"},
		audit.Entry{At: t0.Add(time.Hour), Actor: "key_1", Action: audit.KeyRotate, Account: "acme", Target: "key_1"},
		audit.Entry{At: t0.Add(2 * time.Hour), Actor: audit.Operator, Action: audit.CreditsAdjust, Account: "acme", Credits: 50, Reason: "goodwill"},
	)
	q := audit.Query{Account: "acme", Limit: 2}
	for {
		page, _ := log.List(ctx, q)
		for _, e := range page.Entries {
			fmt.Println(e.At.Format(time.Kitchen), e.Actor, e.Action, e.Reason+e.Target)
		}
		if page.Next == "" {
			break
		}
		q.Cursor = page.Next
	}
	pruned, _ := log.Prune(ctx, t0.Add(time.Hour)) // keep what is newer than an hour after t0
	fmt.Println("pruned", pruned)
	// Output:
	// 2:00PM operator credits.adjust goodwill
	// 1:00PM key_1 key.rotate key_1
	// 12:00PM operator account.create key_1
	// pruned 1
}
