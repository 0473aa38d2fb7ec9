package accounts_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/store/postgres"
)

// reasonsOf returns the reasons of acct's audit entries, oldest first.
func reasonsOf(t *testing.T, s audit.Store, acct string) []string {
	t.Helper()
	page, err := s.List(context.Background(), audit.Query{Account: acct, Limit: audit.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range slices.Backward(page.Entries) {
		got = append(got, e.Reason)
	}
	return got
}

// TestAuditRetentionSchedule checks that, with a retention set, the audit log a host
// subscribes to the service's events prunes its store at NewLog and then on its
// schedule, deleting exactly the entries older than the retention, and that Close
// stops the schedule.
func TestAuditRetentionSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs testenv.Logs
		log := memory.NewAuditStore()
		start := time.Now()
		// Entries from before the service started: one past the retention, one within.
		for _, e := range []struct {
			age    time.Duration
			reason string
		}{{25 * time.Hour, "stale"}, {23 * time.Hour, "recent"}} {
			if err := log.Append(context.Background(), audit.Entry{At: start.Add(-e.age), Actor: audit.Host,
				Action: audit.CreditsAdjust, Account: "acct", Credits: 1, Reason: e.reason}); err != nil {
				t.Fatal(err)
			}
		}
		// A retention of a day prunes every hour (a tenth of it, at most an hour).
		h := newHarness(t, harnessOptions{opts: tollgate.Options{Logger: logs.Logger()},
			audit: log, auditOpts: audit.LogOptions{Retention: 24 * time.Hour}})
		synctest.Wait()
		if got, want := reasonsOf(t, log, "acct"), []string{"recent", ""}; !slices.Equal(got, want) {
			t.Fatalf("after New: %q, want %q (the stale entry pruned at once, the account's creation kept)", got, want)
		}
		if _, err := h.mgr.AdjustCredits(context.Background(), "acct", 1, "later", nil); err != nil {
			t.Fatal(err)
		}

		for _, step := range []struct {
			at   time.Duration // since start
			want []string
		}{
			{time.Hour, []string{"recent", "", "later"}}, // "recent" is 24h old now, not older
			{2*time.Hour - time.Second, []string{"recent", "", "later"}},
			{2 * time.Hour, []string{"", "later"}}, // due since 1h, pruned on the next hour
			{24 * time.Hour, []string{"", "later"}},
			{25 * time.Hour, nil},
		} {
			time.Sleep(time.Until(start.Add(step.at)))
			synctest.Wait()
			if got := reasonsOf(t, log, "acct"); !slices.Equal(got, step.want) {
				t.Errorf("at start+%v: %q, want %q", step.at, got, step.want)
			}
		}
		pruned := 0
		for _, r := range logs.Records(t) {
			if r.Level == "INFO" && strings.Contains(r.Msg, "pruned the audit log") {
				pruned += int(r.Attrs["count"].(float64))
			}
		}
		if pruned != 4 {
			t.Errorf("the logs report %d entries pruned, want 4:\n%s", pruned, logs.String())
		}

		h.audit.Close()
		if _, err := h.mgr.AdjustCredits(context.Background(), "acct", 1, "after close", nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(48 * time.Hour)
		synctest.Wait()
		if got := reasonsOf(t, log, "acct"); !slices.Equal(got, []string{"after close"}) {
			t.Errorf("after Close: %q, want the entry still there (nothing prunes)", got)
		}
	})
}

// TestAuditRetentionOff checks that without a retention nothing is pruned, and that
// Log.Prune does nothing then; and that a negative interval turns the schedule off,
// leaving Log.Prune to the host.
func TestAuditRetentionOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		forever := memory.NewAuditStore()
		h := newHarness(t, harnessOptions{audit: forever})
		manual := memory.NewAuditStore()
		m := newHarness(t, harnessOptions{audit: manual, auditOpts: audit.LogOptions{Retention: time.Hour, PruneInterval: -1}})
		time.Sleep(48 * time.Hour)
		synctest.Wait()
		if n, err := h.audit.Prune(context.Background()); n != 0 || err != nil {
			t.Errorf("Prune without a retention: %d, %v; want 0, nil", n, err)
		}
		for name, s := range map[string]audit.Store{"no retention": forever, "no schedule": manual} {
			if got := reasonsOf(t, s, "acct"); len(got) != 1 {
				t.Errorf("%s: %d entries after two days, want the account's creation", name, len(got))
			}
		}
		if n, err := m.audit.Prune(context.Background()); n != 1 || err != nil {
			t.Errorf("Prune with the schedule off: %d, %v; want 1, nil", n, err)
		}
	})
}

// downAudit is an audit store that cannot prune.
type downAudit struct{ audit.Store }

func (downAudit) Prune(context.Context, time.Time) (int64, error) {
	return 0, store.ErrUnavailable
}

// TestAuditRetentionStoreDown checks that a prune the store cannot do is logged at WARN
// and returned to a host that calls Log.Prune.
func TestAuditRetentionStoreDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs testenv.Logs
		h := newHarness(t, harnessOptions{opts: tollgate.Options{Logger: logs.Logger()},
			audit: downAudit{memory.NewAuditStore()}, auditOpts: audit.LogOptions{Retention: time.Hour}})
		synctest.Wait()
		if _, err := h.audit.Prune(context.Background()); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("Prune with the store down: %v, want store.ErrUnavailable", err)
		}
		warned := false
		for _, r := range logs.Records(t) {
			warned = warned || r.Level == "WARN" && strings.Contains(r.Msg, "cannot prune the audit log")
			if r.Level == "ERROR" {
				t.Errorf("logged at ERROR: %s", r.Msg)
			}
		}
		if !warned {
			t.Errorf("the failed prune is not logged at WARN:\n%s", logs.String())
		}
	})
}

// TestAuditRetentionPostgres checks retention on PostgreSQL: several instances (each a
// service with an audit log of its own) pruning one store at once delete exactly the
// entries older than the retention, each once.
func TestAuditRetentionPostgres(t *testing.T) {
	dsn := testenv.Var(t, testenv.Postgres)
	pool := testenv.PostgresPool(t, dsn, testenv.PostgresSchema(t, dsn), 8)
	if err := postgres.Migrate(t.Context(), pool); err != nil {
		t.Fatal(err)
	}
	log, err := postgres.NewAuditStore(pool)
	if err != nil {
		t.Fatal(err)
	}
	day0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := testenv.NewClock(day0)
	var instances []*harness
	for range 4 {
		instances = append(instances, newHarness(t, harnessOptions{opts: tollgate.Options{Now: clock.Now},
			audit: log, auditOpts: audit.LogOptions{Retention: 30 * 24 * time.Hour, PruneInterval: -1}}))
	}
	// Each instance's account creation is at day0; add entries 10 and 40 days later.
	for _, d := range []int{10, 40} {
		clock.Set(day0.Add(time.Duration(d) * 24 * time.Hour))
		if _, err := instances[0].mgr.AdjustCredits(context.Background(), "acct", 1, "day "+string(rune('0'+d/10)), nil); err != nil {
			t.Fatal(err)
		}
	}
	// Day 40: the creations (40 days old) are due; day 10 is exactly 30 days old, kept.
	var wg sync.WaitGroup
	counts := make([]int64, len(instances))
	for i, h := range instances {
		wg.Go(func() {
			var err error
			if counts[i], err = h.audit.Prune(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	var total int64
	for _, n := range counts {
		total += n
	}
	if total != 4 {
		t.Errorf("4 instances pruning at once deleted %v, %d in all; want the 4 creations, each once", counts, total)
	}
	if got := reasonsOf(t, log, "acct"); !slices.Equal(got, []string{"day 1", "day 4"}) {
		t.Errorf("after the prune: %q, want day 1 and day 4", got)
	}
}
