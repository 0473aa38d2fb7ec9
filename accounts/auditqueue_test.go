package accounts_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// flakyAudit is a memory audit store that fails while it is down: it refuses every
// append, or, with lands set, stores it and then reports a timeout, as a database whose
// commit outlived the client's deadline.
type flakyAudit struct {
	*memory.AuditStore
	mu       sync.Mutex
	down     bool
	lands    bool
	attempts int
}

func newFlakyAudit() *flakyAudit { return &flakyAudit{AuditStore: memory.NewAuditStore()} }

func (f *flakyAudit) set(down, lands bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down, f.lands = down, lands
}

func (f *flakyAudit) tries() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.attempts
}

func (f *flakyAudit) Append(ctx context.Context, entries ...audit.Entry) error {
	f.mu.Lock()
	down, lands := f.down, f.lands
	f.attempts++
	f.mu.Unlock()
	switch {
	case !down:
		return f.AuditStore.Append(ctx, entries...)
	case lands:
		if err := f.AuditStore.Append(ctx, entries...); err != nil {
			return err
		}
		return fmt.Errorf("audit store: commit outlived the deadline: %w", context.DeadlineExceeded)
	}
	return fmt.Errorf("audit store down: %w", store.ErrUnavailable)
}

// auditActions returns the actions and targets of acct's audit log, oldest first, and
// checks that no entry is there twice.
func auditActions(t *testing.T, mgr *accounts.Manager, acct string) []string {
	t.Helper()
	page, err := mgr.AuditLog(context.Background(), audit.Query{Account: acct, Limit: audit.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	ids := map[string]bool{}
	for _, e := range slices.Backward(page.Entries) {
		if e.ID == "" || ids[e.ID] {
			t.Errorf("entry %s %s: id %q is empty or listed twice", e.Action, e.Target, e.ID)
		}
		ids[e.ID] = true
		got = append(got, string(e.Action)+" "+e.Target)
	}
	return got
}

// changes makes four changes to the harness account and returns the audit log's
// actions and targets they record, in order, and the key values they return.
func changes(t *testing.T, h *harness) (want, values []string) {
	t.Helper()
	ctx := context.Background()
	sub, v1, err := h.mgr.CreateKey(ctx, "acct", accounts.NewKey{Name: "ci"})
	if err != nil {
		t.Fatalf("CreateKey with the audit log down: %v", err)
	}
	_, v2, err := h.mgr.RotateKey(ctx, sub.ID)
	if err != nil || v2 == "" {
		t.Fatalf("RotateKey with the audit log down: %q, %v; want the new value", v2, err)
	}
	if _, err := h.mgr.RevokeKey(ctx, sub.ID); err != nil {
		t.Fatalf("RevokeKey with the audit log down: %v", err)
	}
	if _, err := h.mgr.AdjustCredits(ctx, "acct", 5, "goodwill", nil); err != nil {
		t.Fatalf("AdjustCredits with the audit log down: %v", err)
	}
	return []string{"key.create " + sub.ID, "key.rotate " + sub.ID, "key.revoke " + sub.ID, "credits.adjust "}, []string{v1, v2}
}

// noKeyValues fails if a key value is in the logs.
func noKeyValues(t *testing.T, logs *testenv.Logs, values ...string) {
	t.Helper()
	out := logs.String()
	for _, v := range values {
		if v != "" && strings.Contains(out, v) {
			t.Errorf("a key value is in the logs:\n%s", out)
		}
	}
}

// TestAuditQueueOutage checks that changes made while the audit log is down succeed at
// once, that their entries are queued and retried with backoff, and that they arrive
// once the log is back, in order and exactly once, also when the failed appends had
// landed (a timeout after the commit).
func TestAuditQueueOutage(t *testing.T) {
	for _, tt := range []struct {
		name  string
		lands bool
	}{{"refused", false}, {"landed then timed out", true}} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var logs testenv.Logs
				flaky := newFlakyAudit()
				// The relay of the journal is off: this test counts the audit queue's
				// own entries (TestJournalAuditOutage runs the two together).
				h := newHarness(t, harnessOptions{opts: tollgate.Options{Logger: logs.Logger()}, audit: flaky,
					accounts: accounts.Options{RelayInterval: -1}})
				before := auditActions(t, h.mgr, "acct") // the account's creation
				flaky.set(true, tt.lands)
				tried := flaky.tries()
				start := time.Now()
				want, values := changes(t, h)
				if took := time.Since(start); took != 0 {
					t.Errorf("the changes waited %v for the audit log", took)
				}
				// The first change tried the store; the others queued behind it.
				if n := flaky.tries() - tried; n != 1 {
					t.Errorf("%d appends tried while the calls ran, want 1: entries behind a queue must not try the store first", n)
				}
				if n := h.audit.Pending(); n != 4 {
					t.Errorf("Log.Pending = %d, want 4", n)
				}

				// Ten minutes of outage: the worker backs off (1s, 2s, 4s ... up to 30s).
				time.Sleep(10 * time.Minute)
				synctest.Wait()
				if n := flaky.tries() - tried; n < 5 || n > 30 {
					t.Errorf("%d appends tried in 10 minutes down, want a backoff (between 5 and 30)", n)
				}
				if n := h.audit.Pending(); n != 4 {
					t.Errorf("Log.Pending after 10 minutes down = %d, want 4", n)
				}

				flaky.set(false, false)
				time.Sleep(31 * time.Second)
				synctest.Wait()
				if n := h.audit.Pending(); n != 0 {
					t.Errorf("Log.Pending after recovery = %d, want 0", n)
				}
				if got := auditActions(t, h.mgr, "acct"); !slices.Equal(got, append(before, want...)) {
					t.Errorf("audit log after recovery:\n got %q\nwant %q", got, append(before, want...))
				}
				if n := h.audit.Dropped(); n != 0 {
					t.Errorf("Log.Dropped = %d, want 0", n)
				}
				var warned, recovered bool
				for _, r := range logs.Records(t) {
					warned = warned || r.Level == "WARN" && strings.Contains(r.Msg, "audit log is unavailable")
					recovered = recovered || r.Level == "INFO" && strings.Contains(r.Msg, "audit log is back") && r.Attrs["count"] == float64(4)
					if r.Level == "ERROR" {
						t.Errorf("an outage logged at ERROR: %s %v", r.Msg, r.Attrs)
					}
				}
				if !warned || !recovered {
					t.Errorf("logs do not say that entries were queued (WARN) and then taken (INFO):\n%s", logs.String())
				}
				noKeyValues(t, &logs, append(values, h.key)...)

				// The queue is empty: the next change goes to the store at once.
				if _, err := h.mgr.AdjustCredits(context.Background(), "acct", 1, "after", nil); err != nil {
					t.Fatal(err)
				}
				if got := auditActions(t, h.mgr, "acct"); len(got) != len(before)+5 {
					t.Errorf("a change after recovery is not in the log at once: %q", got)
				}
			})
		})
	}
}

// TestAuditQueueFull checks that entries recorded while the queue is full are dropped,
// counted and logged at WARN with what they held and without any key value, and that
// the queued ones arrive when the log is back.
func TestAuditQueueFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs testenv.Logs
		flaky := newFlakyAudit()
		h := newHarness(t, harnessOptions{opts: tollgate.Options{Logger: logs.Logger()}, audit: flaky, auditOpts: audit.LogOptions{Queue: 2}})
		flaky.set(true, false)
		want, values := changes(t, h)
		if n, d := h.audit.Pending(), h.audit.Dropped(); n != 2 || d != 2 {
			t.Errorf("Log.Pending %d, Log.Dropped %d; want 2 and 2", n, d)
		}
		var dropped []string
		for _, r := range logs.Records(t) {
			if r.Level == "WARN" && strings.Contains(r.Msg, "audit queue is full") {
				dropped = append(dropped, fmt.Sprint(r.Attrs["action"], " ", r.Attrs["target"]))
				if r.Attrs["id"] == "" || r.Attrs["account"] != "acct" || r.Attrs["actor"] != audit.Host || !strings.Contains(r.Msg, "LogOptions.Queue") {
					t.Errorf("the log of a dropped entry does not say what it held and what to do: %s %v", r.Msg, r.Attrs)
				}
			}
		}
		if !slices.Equal(dropped, want[2:]) {
			t.Errorf("logged drops %q, want %q", dropped, want[2:])
		}
		noKeyValues(t, &logs, append(values, h.key)...)

		flaky.set(false, false)
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := auditActions(t, h.mgr, "acct"); !slices.Equal(got[1:], want[:2]) {
			t.Errorf("audit log after recovery: %q, want the creation then %q", got, want[:2])
		}
	})
}

// TestAuditQueueClose checks that Log.Close makes a last attempt for the queued entries:
// they are stored if the log is back, and dropped, counted and logged if it is not.
func TestAuditQueueClose(t *testing.T) {
	for _, tt := range []struct {
		name string
		back bool
	}{{"log back", true}, {"log still down", false}} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var logs testenv.Logs
				flaky := newFlakyAudit()
				h := newHarness(t, harnessOptions{opts: tollgate.Options{Logger: logs.Logger()}, audit: flaky})
				flaky.set(true, false)
				want, _ := changes(t, h)
				flaky.set(!tt.back, false)
				start := time.Now()
				h.audit.Close() // before the worker's first retry
				if took := time.Since(start); took > 5*time.Second {
					t.Errorf("Close took %v, want at most its 5s bound", took)
				}
				got := auditActions(t, h.mgr, "acct")[1:]
				pending, dropped := h.audit.Pending(), h.audit.Dropped()
				lost := 0
				for _, r := range logs.Records(t) {
					if r.Level == "WARN" && strings.Contains(r.Msg, "before it closed") {
						lost++
					}
				}
				switch {
				case tt.back && (!slices.Equal(got, want) || pending != 0 || dropped != 0 || lost != 0):
					t.Errorf("Close with the log back: log %q, %d pending, %d dropped, %d logged; want %q and none", got, pending, dropped, lost, want)
				case !tt.back && (len(got) != 0 || pending != 0 || dropped != 4 || lost != 4):
					t.Errorf("Close with the log down: log %q, %d pending, %d dropped, %d logged; want none stored, 4 dropped and logged", got, pending, dropped, lost)
				}

				// After Close an entry is still appended, but no longer queued.
				flaky.set(true, false)
				if _, err := h.mgr.AdjustCredits(context.Background(), "acct", 1, "after close", nil); err != nil {
					t.Fatal(err)
				}
				if n := h.audit.Pending(); n != 0 {
					t.Errorf("Log.Pending after Close = %d, want 0", n)
				}
				if d := h.audit.Dropped(); d != dropped+1 {
					t.Errorf("Log.Dropped after a failed append after Close = %d, want %d", d, dropped+1)
				}
			})
		})
	}
}

// TestAuditInvalidEntry checks that an entry the audit log cannot hold (here an actor
// the host named with a NUL byte) is counted and logged at ERROR, and is not queued,
// while its change is stored.
func TestAuditInvalidEntry(t *testing.T) {
	var logs testenv.Logs
	h := newHarness(t, harnessOptions{opts: tollgate.Options{Logger: logs.Logger()}, audit: memory.NewAuditStore()})
	ctx := accounts.WithActor(context.Background(), event.Actor{ID: "bad\x00actor"})
	if _, err := h.mgr.AdjustCredits(ctx, "acct", 5, "goodwill", nil); err != nil {
		t.Fatalf("AdjustCredits: %v; the change must be stored whatever its entry", err)
	}
	if n, d := h.audit.Pending(), h.audit.Dropped(); n != 0 || d != 1 {
		t.Errorf("Log.Pending %d, Log.Dropped %d; want 0 and 1", n, d)
	}
	reported := false
	for _, r := range logs.Records(t) {
		reported = reported || r.Level == "ERROR" && strings.Contains(r.Msg, "cannot hold an entry") && r.Attrs["action"] == "credits.adjust"
	}
	if !reported {
		t.Errorf("the invalid entry is not logged at ERROR:\n%s", logs.String())
	}
}
