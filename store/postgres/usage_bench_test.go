package postgres_test

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/store/postgres"
	"github.com/tollgate-dev/tollgate/usage"
)

// usageRecords is how many records BenchmarkUsageQuery seeds. The default keeps CI
// cheap; the figure of the closing note is taken with -usage.records=1000000.
var usageRecords = flag.Int("usage.records", 20_000, "records BenchmarkUsageQuery and TestUsageQuerySeeded seed")

// seedUsage records n calls of one account, spread at random over the 30 days from
// day0 (5 APIs, 3 keys, 3 channels, 1 in 20 rejected), through a Recorder flushing
// every 50,000 records into s, as instances would. It returns the calls and credits
// per API.
func seedUsage(tb testing.TB, s usage.Store, account string, day0 time.Time, n int) (calls, credits map[string]int64) {
	tb.Helper()
	rec, err := usage.NewRecorder(s, &usage.RecorderOptions{FlushInterval: -1})
	if err != nil {
		tb.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	calls, credits = map[string]int64{}, map[string]int64{}
	for i := range n {
		api := fmt.Sprint("api", rng.IntN(5))
		r := usage.Record{
			At:      day0.Add(time.Duration(rng.Int64N(int64(30 * 24 * time.Hour)))),
			Account: account, Key: fmt.Sprint("key", rng.IntN(3)), API: api,
			Channel: []string{"rest", "graphql", "mcp"}[rng.IntN(3)],
			Outcome: usage.OK, Credits: 1, Duration: time.Duration(rng.Int64N(int64(200 * time.Millisecond))),
		}
		if rng.IntN(20) == 0 {
			r.Outcome = "rejected"
		}
		rec.Record(r)
		calls[api]++
		credits[api] += r.Credits
		if i%50_000 == 49_999 {
			if err := rec.Flush(tb.Context()); err != nil {
				tb.Fatal(err)
			}
		}
	}
	if err := rec.Close(tb.Context()); err != nil {
		tb.Fatal(err)
	}
	return calls, credits
}

// query30Days is the dashboard's query: 30 days, per API, per day.
func query30Days(account string, day0 time.Time) usage.Query {
	return usage.Query{Account: account, From: day0, To: day0.Add(30 * 24 * time.Hour), Interval: usage.Day, By: usage.ByAPI}
}

// checkSeeded checks that res counts exactly the calls and credits seeded.
func checkSeeded(tb testing.TB, res usage.Result, calls, credits map[string]int64) {
	tb.Helper()
	if len(res.Series) != len(calls) {
		tb.Fatalf("%d series, want %d", len(res.Series), len(calls))
	}
	for _, s := range res.Series {
		var c, cr int64
		for _, p := range s.Points {
			c += p.Calls
			cr += p.Credits
		}
		if c != calls[s.Group] || cr != credits[s.Group] || len(s.Points) != 30 {
			tb.Errorf("%s: %d calls, %d credits in %d points; want %d, %d in 30", s.Group, c, cr, len(s.Points), calls[s.Group], credits[s.Group])
		}
	}
}

// BenchmarkUsageQuery measures the 30-day, per-API, per-day query of an account whose
// usage is -usage.records records (seeded before the timer starts, through a Recorder).
//
//	go test -run='^$' -bench=UsageQuery -usage.records=1000000 ./store/postgres/
func BenchmarkUsageQuery(b *testing.B) {
	s, err := postgres.NewUsageStore(newPool(b, 4))
	if err != nil {
		b.Fatal(err)
	}
	day0 := usage.Day.Start(t0)
	start := time.Now()
	calls, credits := seedUsage(b, s, "acme", day0, *usageRecords)
	b.Logf("seeded %d records in %s", *usageRecords, time.Since(start).Round(time.Millisecond))
	var res usage.Result
	for b.Loop() {
		if res, err = usage.Run(b.Context(), s, query30Days("acme", day0)); err != nil {
			b.Fatal(err)
		}
	}
	checkSeeded(b, res, calls, credits)
}

// TestUsageQuerySeeded runs BenchmarkUsageQuery's seeding and query once, so that CI
// checks what the benchmark measures: every seeded call is counted once.
func TestUsageQuerySeeded(t *testing.T) {
	s, err := postgres.NewUsageStore(newPool(t, 4))
	if err != nil {
		t.Fatal(err)
	}
	day0 := usage.Day.Start(t0)
	calls, credits := seedUsage(t, s, "acme", day0, min(*usageRecords, 20_000))
	res, err := usage.Run(t.Context(), s, query30Days("acme", day0))
	if err != nil {
		t.Fatal(err)
	}
	checkSeeded(t, res, calls, credits)
}

// BenchmarkUsageFlush measures the flush of 10,000 calls made within one minute by
// one account over 5 APIs, 4 keys and 2 outcomes (40 rows of each resolution): the
// store's cost of usage recording per 10,000 calls. Each op records the 10,000 calls
// and flushes them.
//
//	go test -run='^$' -bench=UsageFlush ./store/postgres/
func BenchmarkUsageFlush(b *testing.B) {
	s, err := postgres.NewUsageStore(newPool(b, 4))
	if err != nil {
		b.Fatal(err)
	}
	rec, err := usage.NewRecorder(s, &usage.RecorderOptions{FlushInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	minute := 0
	for b.Loop() {
		at := t0.Add(time.Duration(minute) * time.Minute)
		minute++
		for i := range 10_000 {
			rec.Record(usage.Record{At: at, Account: "acme", Key: fmt.Sprint("key", i%4), API: fmt.Sprint("api", i%5),
				Channel: "rest", Outcome: []string{usage.OK, "rejected"}[i%2], Credits: 1, Duration: time.Millisecond})
		}
		if err := rec.Flush(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
}
