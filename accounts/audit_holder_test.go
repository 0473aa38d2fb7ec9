package accounts_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// TestOwnAuditLogOperator checks what an account holder sees of an operator's changes
// in their audit log: what changed, when, and that the operator made it, but not the
// operator's name, their address, nor the reason they gave a credit adjustment; the
// operator's own view keeps everything, and the holder's own changes are shown whole.
func TestOwnAuditLogOperator(t *testing.T) {
	log := memory.NewAuditStore()
	h := newHarness(t, harnessOptions{audit: log})
	office := netip.MustParseAddr("203.0.113.7")
	operator := accounts.WithActor(context.Background(), event.Actor{ID: audit.Operator + ":alice", Addr: office})
	if _, err := h.mgr.AdjustCredits(operator, "acct", 50, "goodwill for ticket #4411, customer angry", nil); err != nil {
		t.Fatal(err)
	}
	sub, _, err := h.mgr.CreateKey(operator, "acct", accounts.NewKey{Name: "from support"})
	if err != nil {
		t.Fatal(err)
	}
	name := "renamed by support"
	if _, err := h.mgr.UpdateKey(operator, sub.ID, accounts.KeyChange{Name: &name}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.mgr.AdjustCredits(context.Background(), "acct", 1, "host's batch job", nil); err != nil { // the host's code
		t.Fatal(err)
	}
	home := netip.MustParseAddr("192.0.2.10")
	if _, _, err := h.mgr.CreateOwnKey(context.Background(), keyCaller(h.key, home), accounts.NewKey{Name: "laptop"}); err != nil {
		t.Fatal(err)
	}

	type row struct {
		actor  string
		action audit.Action
		addr   netip.Addr
		reason string
	}
	rows := func(page audit.Page) []row {
		var out []row
		for _, e := range page.Entries[:len(page.Entries)-1] { // all but the account's creation
			out = append(out, row{e.Actor, e.Action, e.Addr, e.Reason})
		}
		return out
	}
	held, err := h.mgr.OwnAuditLog(context.Background(), keyCaller(h.key, home), audit.Query{})
	if err != nil {
		t.Fatal(err)
	}
	primaryID := held.Entries[0].Actor
	want := []row{
		{primaryID, audit.KeyCreate, home, ""},
		{audit.Host, audit.CreditsAdjust, netip.Addr{}, ""},
		{audit.Operator, audit.KeyUpdate, netip.Addr{}, "name: from support -> renamed by support"},
		{audit.Operator, audit.KeyCreate, netip.Addr{}, ""},
		{audit.Operator, audit.CreditsAdjust, netip.Addr{}, ""},
	}
	if got := rows(held); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the holder's view:\n got %v\nwant %v", got, want)
	}
	if held.Entries[len(held.Entries)-2].Credits != 50 {
		t.Errorf("the holder sees the credits granted: %+v", held.Entries)
	}
	all, err := h.mgr.AuditLog(context.Background(), audit.Query{Account: "acct"})
	if err != nil {
		t.Fatal(err)
	}
	want = []row{
		{primaryID, audit.KeyCreate, home, ""},
		{audit.Host, audit.CreditsAdjust, netip.Addr{}, "host's batch job"},
		{"operator:alice", audit.KeyUpdate, office, "name: from support -> renamed by support"},
		{"operator:alice", audit.KeyCreate, office, ""},
		{"operator:alice", audit.CreditsAdjust, office, "goodwill for ticket #4411, customer angry"},
	}
	if got := rows(all); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the operator's view:\n got %v\nwant %v", got, want)
	}
}
