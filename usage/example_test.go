package usage_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/usage"
)

// A Recorder sums records in memory and flushes them to a store; Run reads them back
// as series of points, here one per API and hour.
func Example() {
	ctx := context.Background()
	s := memory.NewUsageStore()
	rec, _ := usage.NewRecorder(s, &usage.RecorderOptions{FlushInterval: -1, PruneInterval: -1}) // flush by hand, never prune
	t0 := time.Date(2030, time.January, 15, 12, 0, 0, 0, time.UTC)
	for i := range 10 {
		outcome, credits := usage.OK, int64(2)
		if i == 9 {
			outcome, credits = "timeout", 0
		}
		rec.Record(usage.Record{At: t0.Add(time.Duration(i) * 10 * time.Minute), Account: "acme", Key: "key_1",
			API: "geocode", Channel: "rest", Outcome: outcome, Credits: credits, Duration: 40 * time.Millisecond})
	}
	_ = rec.Close(ctx) // flushes
	res, _ := usage.Run(ctx, s, usage.Query{Account: "acme", From: t0, To: t0.Add(24 * time.Hour), Interval: usage.Hour, By: usage.ByAPI})
	for _, series := range res.Series {
		for _, p := range series.Points {
			fmt.Println(series.Group, p.Start.Format("15:04"), p.Calls, "calls", p.Credits, "credits", p.Errors, "p50", p.P50.Round(time.Millisecond))
		}
	}
	last, _ := s.LastUsed(ctx, "acme")
	fmt.Println("key_1 last used", last["key_1"].Format("15:04"))
	// Output:
	// geocode 12:00 6 calls 12 credits map[] p50 39ms
	// geocode 13:00 4 calls 6 credits map[timeout:1] p50 39ms
	// key_1 last used 13:30
}
