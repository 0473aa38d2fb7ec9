package accounts_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/blocks"
	"github.com/tollgate-dev/tollgate/catalog"
)

// TestBalanceCountsBlocksUnspent: with credit blocks on, a busy account's balance as
// the account holder and the operator read it counts only what its calls were charged:
// the credits a block holds unspent are remaining, not used, though the ledger counts
// them as held until the block goes back.
func TestBalanceCountsBlocksUnspent(t *testing.T) {
	h := newHarness(t, harnessOptions{
		plan:   billing.Plan{Name: "p", Credits: 10_000, RatePerMinute: 60_000, Concurrency: 10},
		blocks: &blocks.Options{Size: 5, Idle: time.Minute},
		apis: []catalog.API{{ID: "dear", Method: "GET", Cost: 7,
			Handler: catalog.HandlerFunc(func(context.Context, *catalog.Request) (any, error) { return map[string]any{}, nil })},
			{ID: "free", Method: "GET", Cost: 0,
				Handler: catalog.HandlerFunc(func(context.Context, *catalog.Request) (any, error) { return map[string]any{}, nil })}},
	})
	ctx := t.Context()
	// Each call's receipt (its credit headers, its events) counts what the instance's
	// blocks hold unspent as remaining too, whether the call took its credits from a
	// block or, as the first does and one of more credits than a block holds would,
	// from the ledger (a block holds at most 5 credits here, "dear" costs 7).
	plan, _ := h.svc.Plans().Lookup("p")
	var charged int64
	for i, id := range []string{"ok", "ok", "ok", "dear", "ok", "dear", "ok"} {
		r := h.call(ctx, []string{id})
		if r.Err != nil {
			t.Fatalf("call %d: %v", i, r.Err)
		}
		charged += r.Receipt.Charged
		if b := r.Receipt.Balance; b.Used != charged || b.Remaining != plan.Credits-charged {
			t.Errorf("call %d: the receipt says %d used, %d remaining; want %d and %d (%d unspent in blocks)",
				i, b.Used, b.Remaining, charged, plan.Credits-charged, h.blocks.Unspent("acct"))
		}
	}
	// A free call goes to the ledger, never to a block: while a block holds credits
	// unspent, its receipt counts them back too.
	if h.blocks.Unspent("acct") == 0 {
		if r := h.call(ctx, []string{"ok"}); r.Err != nil {
			t.Fatal(r.Err)
		}
		charged++
	}
	if h.blocks.Unspent("acct") == 0 {
		t.Fatal("no credits unspent in a block after calls in a row")
	}
	r := h.call(ctx, []string{"free"})
	if r.Err != nil || r.Receipt.Charged != 0 {
		t.Fatalf("free: charged %d, %v", r.Receipt.Charged, r.Err)
	}
	if b := r.Receipt.Balance; b.Used != charged || b.Remaining != plan.Credits-charged {
		t.Errorf("free: the receipt says %d used, %d remaining; want %d and %d", b.Used, b.Remaining, charged, plan.Credits-charged)
	}
	// More calls, until a block holds credits unspent (a block of 5 credits may be
	// spent to the last, its next not taken yet).
	calls, unspent := charged, int64(0)
	for i := 0; unspent == 0; i++ {
		if i == 20 {
			t.Fatalf("Unspent = 0 after each of 20 calls in a row, want a block's credits")
		}
		if r := h.call(ctx, []string{"ok"}); r.Err != nil {
			t.Fatalf("call %d: %v", i, r.Err)
		}
		calls++
		unspent = h.blocks.Unspent("acct")
	}
	p, err := h.svc.Authenticate(ctx, h.caller())
	if err != nil {
		t.Fatal(err)
	}
	raw, err := h.stores.Ledger.Balance(ctx, "acct", h.svc.Now(), billing.PeriodAt(p.Account.BillingAnchor, plan.Renews, h.svc.Now()), plan.Credits)
	if err != nil {
		t.Fatal(err)
	}
	if raw.Used != calls+unspent {
		t.Fatalf("the ledger counts %d used, want the %d calls and the block's %d unspent", raw.Used, calls, unspent)
	}
	own, err := h.mgr.OwnAccount(ctx, h.caller())
	if err != nil {
		t.Fatal(err)
	}
	op, err := h.mgr.Account(ctx, "acct")
	if err != nil {
		t.Fatal(err)
	}
	st, err := h.svc.Status(ctx, &p)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string]billing.Balance{"OwnAccount": own.Balance, "Account": op.Balance, "Status": st.Balance} {
		if b.Used != calls || b.Remaining != plan.Credits-calls {
			t.Errorf("%s: used %d, remaining %d; want %d and %d", name, b.Used, b.Remaining, calls, plan.Credits-calls)
		}
	}
}
