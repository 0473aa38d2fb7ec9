package accounts_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// TestAuditLogActors checks that each management method records one entry once its
// change is stored, with the actor and address the context names (the host when it
// names none), and that a refused change records nothing.
func TestAuditLogActors(t *testing.T) {
	log := memory.NewAuditStore()
	h := newHarness(t, harnessOptions{audit: log})
	addr := netip.MustParseAddr("192.0.2.7")
	ctx := accounts.WithActor(context.Background(), event.Actor{ID: "key_self", Addr: addr})

	sub, _, err := h.mgr.CreateKey(ctx, "acct", accounts.NewKey{Name: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.mgr.RotateKey(ctx, sub.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := h.mgr.RevokeKey(ctx, sub.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := h.mgr.AdjustCredits(ctx, "acct", 5, "goodwill", nil); err != nil {
		t.Fatal(err)
	}
	// Refused: nothing is recorded.
	if _, err := h.mgr.RevokeKey(ctx, "key_missing"); tollgate.CodeOf(err) != tollgate.CodeNotFound {
		t.Fatalf("revoking a missing key: %v", err)
	}
	if _, err := h.mgr.AdjustCredits(ctx, "acct", -1000, "too much", nil); tollgate.CodeOf(err) != tollgate.CodeConflict {
		t.Fatalf("taking more than the balance: %v", err)
	}

	page, err := h.mgr.AuditLog(context.Background(), audit.Query{Account: "acct"})
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		actor  string
		action audit.Action
		target string
		addr   netip.Addr
	}
	var got []row
	for _, e := range page.Entries {
		got = append(got, row{e.Actor, e.Action, e.Target, e.Addr})
	}
	primary := page.Entries[len(page.Entries)-1].Target
	want := []row{
		{"key_self", audit.CreditsAdjust, "", addr},
		{"key_self", audit.KeyRevoke, sub.ID, addr},
		{"key_self", audit.KeyRotate, sub.ID, addr},
		{"key_self", audit.KeyCreate, sub.ID, addr},
		{audit.Host, audit.AccountCreate, primary, netip.Addr{}},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("audit log:\n got %v\nwant %v", got, want)
	}
	if e := page.Entries[0]; e.Credits != 5 || e.Reason != "goodwill" {
		t.Errorf("credits entry: %+v, want 5 credits for goodwill", e)
	}
	if e := page.Entries[4]; e.Credits != 100 || primary == "" {
		t.Errorf("account entry: %+v, want the primary key and the plan's 100 credits", e)
	}

	for _, q := range []audit.Query{{Account: "acct", Limit: audit.MaxLimit + 1}, {Account: "acct", Cursor: "x"}, {Account: "a\x00"}} {
		if _, err := h.mgr.AuditLog(context.Background(), q); tollgate.CodeOf(err) != tollgate.CodeInvalidInput {
			t.Errorf("AuditLog(%+v): %v, want invalid input", q, err)
		}
	}
}

// TestAuditLogOff checks that a service without an audit log manages keys as before
// and says so when asked for the log.
func TestAuditLogOff(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	if _, _, err := h.mgr.CreateKey(context.Background(), "acct", accounts.NewKey{Name: "ci"}); err != nil {
		t.Fatal(err)
	}
	_, err := h.mgr.AuditLog(context.Background(), audit.Query{Account: "acct"})
	if tollgate.CodeOf(err) != tollgate.CodeNotFound || !strings.Contains(err.Error(), "Options.Audit") {
		t.Errorf("AuditLog without an audit log: %v, want not found naming Options.Audit", err)
	}
}

// TestAuditCreditsReplay checks that a credits adjustment retried with its idempotency
// key, which changes nothing, is recorded once.
func TestAuditCreditsReplay(t *testing.T) {
	log := memory.NewAuditStore()
	h := newHarness(t, harnessOptions{audit: log})
	for range 3 {
		if _, err := h.mgr.AdjustCredits(context.Background(), "acct", 5, "goodwill", &accounts.CreditOptions{IdempotencyKey: "ticket-12"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.mgr.AdjustCredits(context.Background(), "acct", 5, "goodwill", &accounts.CreditOptions{IdempotencyKey: "ticket-13"}); err != nil {
		t.Fatal(err)
	}
	page, err := h.mgr.AuditLog(context.Background(), audit.Query{Account: "acct"})
	if err != nil {
		t.Fatal(err)
	}
	adjusts := 0
	for _, e := range page.Entries {
		if e.Action == audit.CreditsAdjust {
			adjusts++
		}
	}
	if info, _ := h.mgr.Account(context.Background(), "acct"); adjusts != 2 || info.Balance.Remaining != 110 {
		t.Errorf("%d credits entries and a balance of %d after three replays of one adjustment and another; want 2 and 110", adjusts, info.Balance.Remaining)
	}
}
