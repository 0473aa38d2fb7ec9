package usage_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/usage"
)

const day = 24 * time.Hour

// pruneCall is one call of a store's Prune.
type pruneCall struct {
	res    usage.Resolution
	before time.Time
}

// pruneStore is a memory store that keeps the calls of its Prune, and fails the prunes
// of the resolution failRes while failing is set.
type pruneStore struct {
	*memory.UsageStore
	failRes usage.Resolution

	mu      sync.Mutex // guards failing and calls
	failing bool
	calls   []pruneCall
}

func (s *pruneStore) Prune(ctx context.Context, res usage.Resolution, before time.Time) (int64, error) {
	s.mu.Lock()
	s.calls = append(s.calls, pruneCall{res, before})
	fail := s.failing && res == s.failRes
	s.mu.Unlock()
	if fail {
		return 0, errDown
	}
	return s.UsageStore.Prune(ctx, res, before)
}

// prunes returns the calls of Prune so far.
func (s *pruneStore) prunes() []pruneCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]pruneCall(nil), s.calls...)
}

// addAged adds one call to s, in a bucket age before at, of every resolution.
func addAged(t *testing.T, s usage.Store, at time.Time, age time.Duration) {
	t.Helper()
	if err := s.Add(context.Background(), []usage.Row{{Bucket: at.Add(-age), Account: "acme",
		API: "hash", Channel: "rest", Outcome: usage.OK, Calls: 1}}); err != nil {
		t.Fatal(err)
	}
}

// left returns the rows s holds of each resolution, counted by deleting them.
func left(t *testing.T, s *memory.UsageStore, now time.Time) map[usage.Resolution]int64 {
	t.Helper()
	out := map[usage.Resolution]int64{}
	for _, res := range usage.Resolutions {
		n, err := s.Prune(context.Background(), res, now.Add(day))
		if err != nil {
			t.Fatal(err)
		}
		out[res] = n
	}
	return out
}

// TestRecorderRetention checks that a recorder prunes each resolution on its own
// retention: the defaults keep minute buckets 2 days, hour buckets 32 days and day
// buckets 400 days, a field set replaces its default, and a negative one keeps that
// resolution for ever. The rows are 47 hours, 3, 40 and 500 days old when the recorder
// starts, and counted a day later: the minute row of 47 hours is deleted by one of the
// hourly prunes, not the first.
func TestRecorderRetention(t *testing.T) {
	for _, tt := range []struct {
		name      string
		retention usage.Retention
		left      map[usage.Resolution]int64
	}{
		{"defaults", usage.Retention{}, map[usage.Resolution]int64{usage.Minute: 0, usage.Hour: 2, usage.Day: 3}},
		{"minute buckets for ever", usage.Retention{Minute: -1}, map[usage.Resolution]int64{usage.Minute: 4, usage.Hour: 2, usage.Day: 3}},
		{"hour buckets for 42 days", usage.Retention{Hour: 42 * day}, map[usage.Resolution]int64{usage.Minute: 0, usage.Hour: 3, usage.Day: 3}},
		{"day buckets for 2 years", usage.Retention{Day: 730 * day}, map[usage.Resolution]int64{usage.Minute: 0, usage.Hour: 2, usage.Day: 4}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := memory.NewUsageStore()
				start := time.Now()
				for _, age := range []time.Duration{47 * time.Hour, 3 * day, 40 * day, 500 * day} {
					addAged(t, s, start, age)
				}
				rec, err := usage.NewRecorder(s, &usage.RecorderOptions{FlushInterval: -1, Retention: tt.retention,
					Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(day) // the prune at NewRecorder, then one every hour
				synctest.Wait()
				if err := rec.Close(context.Background()); err != nil {
					t.Fatal(err)
				}
				got := left(t, s, time.Now())
				for _, res := range usage.Resolutions {
					if got[res] != tt.left[res] {
						t.Errorf("%s buckets: %d rows left, want %d", res, got[res], tt.left[res])
					}
				}
			})
		})
	}
}

// TestRecorderPruneSchedule checks when a recorder prunes by default: every resolution
// at NewRecorder, then again every DefaultPruneInterval, each with the cutoff of its
// retention at that time; and never after Close.
func TestRecorderPruneSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &pruneStore{UsageStore: memory.NewUsageStore()}
		start := time.Now()
		rec, err := usage.NewRecorder(s, &usage.RecorderOptions{FlushInterval: -1, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		want := func(now time.Time) []pruneCall {
			return []pruneCall{{usage.Minute, now.Add(-usage.DefaultMinuteRetention)},
				{usage.Hour, now.Add(-usage.DefaultHourRetention)}, {usage.Day, now.Add(-usage.DefaultDayRetention)}}
		}
		check := func(what string, want []pruneCall) {
			t.Helper()
			got := s.prunes()
			if len(got) != len(want) {
				t.Fatalf("%s: %d prunes %v, want %d %v", what, len(got), got, len(want), want)
			}
			for i := range got {
				if got[i].res != want[i].res || !got[i].before.Equal(want[i].before) {
					t.Errorf("%s: prune %d is %s before %v, want %s before %v", what, i, got[i].res, got[i].before, want[i].res, want[i].before)
				}
			}
		}
		synctest.Wait()
		check("at NewRecorder", want(start))
		time.Sleep(usage.DefaultPruneInterval - time.Second)
		synctest.Wait()
		check("before an interval", want(start))
		time.Sleep(time.Second)
		synctest.Wait()
		check("after an interval", append(want(start), want(start.Add(usage.DefaultPruneInterval))...))
		if err := rec.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * usage.DefaultPruneInterval)
		synctest.Wait()
		check("after Close", append(want(start), want(start.Add(usage.DefaultPruneInterval))...))
	})
}

// TestRecorderPruneOff checks that a negative PruneInterval leaves the retention to
// Prune, which applies it at the time of RecorderOptions.Now and returns the rows it
// deleted.
func TestRecorderPruneOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &pruneStore{UsageStore: memory.NewUsageStore()}
		start := time.Now()
		addAged(t, s, start, 3*day)
		rec, err := usage.NewRecorder(s, &usage.RecorderOptions{FlushInterval: -1, PruneInterval: -1,
			Now: func() time.Time { return start.Add(30 * day) }, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * day)
		synctest.Wait()
		if got := s.prunes(); len(got) != 0 {
			t.Fatalf("with PruneInterval -1 the recorder pruned %v", got)
		}
		// At Now, 30 days after the start, the rows are 33 days old: the minute and hour
		// rows are past their retention; the day row is kept.
		n, err := rec.Prune(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n != 2 {
			t.Errorf("Prune deleted %d rows, want 2 (the minute and hour rows)", n)
		}
		if err := rec.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := left(t, s.UsageStore, start); got[usage.Minute] != 0 || got[usage.Hour] != 0 || got[usage.Day] != 1 {
			t.Errorf("rows left %v, want only the day row", got)
		}
	})
}

// TestRecorderPruneFails checks that a prune the store fails stops at the failed
// resolution: Prune returns the rows deleted before it and the store's error naming the
// resolution, the coarser resolutions are left for the next prune, and the background
// prune logs the failure at WARN and tries again at the next interval.
func TestRecorderPruneFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &pruneStore{UsageStore: memory.NewUsageStore(), failing: true, failRes: usage.Hour}
		start := time.Now()
		addAged(t, s, start, 500*day)
		logs := &testenv.Logs{}
		rec, err := usage.NewRecorder(s, &usage.RecorderOptions{FlushInterval: -1, Logger: logs.Logger()})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		warned := 0
		for _, r := range logs.Records(t) {
			if r.Level == "WARN" && strings.Contains(r.Msg, "cannot prune the usage statistics") {
				warned++
			}
		}
		if warned != 1 {
			t.Errorf("the failed prune at NewRecorder logged %d warnings, want 1: %v", warned, logs.Records(t))
		}
		if got := s.prunes(); len(got) != 2 || got[0].res != usage.Minute || got[1].res != usage.Hour {
			t.Errorf("prunes %v, want minute then hour, and no day after the failure", got)
		}

		addAged(t, s, start, 500*day) // a minute row again
		n, err := rec.Prune(context.Background())
		if !errors.Is(err, errDown) || !strings.Contains(err.Error(), "hour") {
			t.Errorf("Prune with a failing store: %v, want the store's error naming the hour buckets", err)
		}
		if n != 1 {
			t.Errorf("Prune deleted %d rows before the failure, want 1 (the minute row)", n)
		}

		// The store is back: the next background prune deletes the rest.
		s.mu.Lock()
		s.failing = false
		s.mu.Unlock()
		time.Sleep(usage.DefaultPruneInterval)
		synctest.Wait()
		if err := rec.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := left(t, s.UsageStore, time.Now()); got[usage.Minute] != 0 || got[usage.Hour] != 0 || got[usage.Day] != 0 {
			t.Errorf("rows left after the store came back %v, want none", got)
		}
	})
}
