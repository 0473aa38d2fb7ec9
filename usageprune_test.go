package tollgate_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/usage"
)

// TestUsageRetention checks that the service prunes each resolution of the usage
// statistics on its own retention, at New and then every PruneInterval: the defaults
// keep minute buckets 2 days, hour buckets 32 days and day buckets 400 days, and a
// negative retention keeps a resolution for ever.
func TestUsageRetention(t *testing.T) {
	const day = 24 * time.Hour
	for _, tt := range []struct {
		name      string
		retention tollgate.UsageRetention
		// left are the rows each resolution still holds of the three recorded 3, 40 and
		// 500 days before the service started, a day after it started.
		left map[usage.Resolution]int64
	}{
		{"defaults", tollgate.UsageRetention{}, map[usage.Resolution]int64{usage.Minute: 0, usage.Hour: 1, usage.Day: 2}},
		{"minute buckets for ever", tollgate.UsageRetention{Minute: -1}, map[usage.Resolution]int64{usage.Minute: 3, usage.Hour: 1, usage.Day: 2}},
		{"hour buckets for 42 days", tollgate.UsageRetention{Hour: 42 * day}, map[usage.Resolution]int64{usage.Minute: 0, usage.Hour: 2, usage.Day: 2}},
		{"day buckets for 2 years", tollgate.UsageRetention{Day: 730 * day}, map[usage.Resolution]int64{usage.Minute: 0, usage.Hour: 1, usage.Day: 3}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				us := memory.NewUsageStore()
				start := time.Now()
				for _, age := range []time.Duration{3 * day, 40 * day, 500 * day} {
					if err := us.Add(context.Background(), []usage.Row{{Bucket: start.Add(-age), Account: "acct",
						API: "hash", Channel: "rest", Outcome: usage.OK, Calls: 1}}); err != nil {
						t.Fatal(err)
					}
				}
				h := newHarness(t, harnessOptions{opts: tollgate.Options{
					Logger: (&testenv.Logs{}).Logger(),
					Usage:  &tollgate.UsageOptions{Store: us, FlushInterval: -1, Retention: tt.retention}}})
				time.Sleep(day) // the prune at New, then one every hour
				synctest.Wait()
				h.svc.Close()
				// What is left, counted by deleting it.
				for _, res := range usage.Resolutions {
					n, err := us.Prune(context.Background(), res, start.Add(2*day))
					if err != nil {
						t.Fatal(err)
					}
					if n != tt.left[res] {
						t.Errorf("%s buckets: %d rows left, want %d", res, n, tt.left[res])
					}
				}
			})
		})
	}
}

// TestUsagePruneOff checks that a negative PruneInterval leaves the retention to
// PruneUsage, which applies it when called.
func TestUsagePruneOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		us := memory.NewUsageStore()
		start := time.Now()
		if err := us.Add(context.Background(), []usage.Row{{Bucket: start.Add(-72 * time.Hour), Account: "acct",
			API: "hash", Channel: "rest", Outcome: usage.OK, Calls: 1}}); err != nil {
			t.Fatal(err)
		}
		h := newHarness(t, harnessOptions{opts: tollgate.Options{
			Logger: (&testenv.Logs{}).Logger(),
			Usage:  &tollgate.UsageOptions{Store: us, FlushInterval: -1, PruneInterval: -1}}})
		time.Sleep(48 * time.Hour)
		synctest.Wait()
		n, err := h.svc.PruneUsage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n != 1 { // the minute row, 5 days old; the hour and day rows are kept
			t.Errorf("PruneUsage deleted %d rows, want 1 (nothing pruned before it)", n)
		}
		h.svc.Close()
	})
}
