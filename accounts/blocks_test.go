package accounts_test

import (
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/blocks"
)

// TestBalanceCountsBlocksUnspent: with credit blocks on, a busy account's balance as
// the account holder and the operator read it counts only what its calls were charged:
// the credits a block holds unspent are remaining, not used, though the ledger counts
// them as held until the block goes back.
func TestBalanceCountsBlocksUnspent(t *testing.T) {
	h := newHarness(t, harnessOptions{
		plan: billing.Plan{Name: "p", Credits: 10_000, RatePerMinute: 60_000, Concurrency: 10},
		opts: tollgate.Options{CreditBlocks: &blocks.Options{Size: 500, Idle: time.Minute}},
	})
	ctx := t.Context()
	const calls = 20
	for i := range calls {
		if r := h.call(ctx, []string{"ok"}); r.Err != nil {
			t.Fatalf("call %d: %v", i, r.Err)
		}
	}
	unspent := h.svc.Unspent("acct")
	if unspent <= 0 {
		t.Fatalf("Unspent = %d after %d calls in a row, want a block's credits", unspent, calls)
	}
	p, err := h.svc.Authenticate(ctx, h.caller())
	if err != nil {
		t.Fatal(err)
	}
	plan, _ := h.svc.Plans().Lookup("p")
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
