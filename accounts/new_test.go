package accounts_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/journal"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/usage"
)

// TestNewRefusesLogsNothingWrites checks that a manager is not made to read an audit
// log or usage statistics that nothing subscribed to the service's events writes:
// every change would be missing from the log, and every call from the statistics,
// without an error anywhere. Once the writer is subscribed, New accepts it.
func TestNewRefusesLogsNothingWrites(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	auditStore, usageStore := memory.NewAuditStore(), memory.NewUsageStore()
	for _, tt := range []struct {
		name     string
		opts     accounts.Options
		fragment string
	}{
		{"audit", accounts.Options{Audit: auditStore}, "Options.Audit is set but nothing records changes"},
		{"usage", accounts.Options{Usage: usageStore}, "Options.Usage is set but nothing records calls"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := accounts.New(h.svc, &tt.opts); err == nil || !strings.Contains(err.Error(), tt.fragment) {
				t.Fatalf("New: %v, want an error saying %q", err, tt.fragment)
			}
		})
	}

	log := audit.NewLog(auditStore, nil)
	t.Cleanup(log.Close)
	h.svc.Events().Subscribe(log, log.Kinds()...)
	rec, err := usage.NewRecorder(usageStore, &usage.RecorderOptions{FlushInterval: -1, PruneInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rec.Close(context.Background()) })
	h.svc.Events().Subscribe(rec, rec.Kinds()...)
	mgr, err := accounts.New(h.svc, &accounts.Options{Audit: auditStore, Usage: usageStore})
	if err != nil {
		t.Fatalf("New with both subscribed: %v", err)
	}
	mgr.Close()
}

// TestNewRelaysTheJournal checks that a manager on stores that keep a journal relays it
// on a schedule unless told not to, when it warns that the journal would grow without a
// relay; and that it refuses a relay whose MaxAge outlasts the outbox's memory of an ID.
func TestNewRelaysTheJournal(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	for _, tt := range []struct {
		interval time.Duration
		warned   bool
	}{{0, false}, {time.Minute, false}, {-1, true}} {
		var logs testenv.Logs
		mgr, err := accounts.New(h.svc, &accounts.Options{RelayInterval: tt.interval, Logger: logs.Logger()})
		if err != nil {
			t.Fatal(err)
		}
		mgr.Close()
		warned := false
		for _, r := range logs.Records(t) {
			warned = warned || r.Level == "WARN" && strings.Contains(r.Msg, "RelayInterval is negative")
		}
		if warned != tt.warned {
			t.Errorf("RelayInterval %s: warned %v, want %v: %s", tt.interval, warned, tt.warned, logs.String())
		}
	}
	if _, err := accounts.New(h.svc, &accounts.Options{Relay: &journal.RelayOptions{MaxAge: journal.DedupWindow}}); err == nil {
		t.Error("New accepted a relay whose MaxAge is journal.DedupWindow")
	}
}
