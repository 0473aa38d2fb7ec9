package storetest

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/usage"
)

// TestUsageStore checks that a [usage.Store] behaves as its documentation says: rows
// added at the minute come back summed per minute, hour and day, and the rollups are
// exact; flushes from several recorders at once add up; retention deletes exactly the
// buckets due, of the resolution asked for only; queries cover whole buckets of a
// half-open range, one account only, with their filters and grouping; last use per key;
// an invalid row or query is store.ErrInvalid. Totals across accounts rank every
// grouping in every order, page by position, read the coarsest buckets that cover the
// range, and refuse bad queries and cursors.
//
// newStore is called once per subtest and must return an empty store; it registers any
// teardown with t.Cleanup. The subtests run in parallel. Run the suite with -race.
func TestUsageStore(t *testing.T, newStore func(t *testing.T) usage.Store) {
	t.Helper()
	run(t, newStore, slices.Concat(usageRows, totalsRows))
}

var usageRows = []behaviour[usage.Store]{
	{"AddThenSum",
		"Rows added come back in Sum, summed per bucket, group and outcome, with every figure intact.",
		usAddThenSum},
	{"RollupsExact",
		"Every minute row is added to its hour and day buckets in the same Add: over a range, the minute, hour and day sums (calls, credits, latency histograms, last use) are equal.",
		usRollupsExact},
	{"AddsUp",
		"Add is additive: rows of the same bucket and group from several Adds (several flushes, several instances) sum.",
		usAddsUp},
	{"ConcurrentRecorders",
		"Recorders flushing into one store at the same time lose nothing and count nothing twice.",
		usConcurrentRecorders},
	{"Retention",
		"Prune deletes exactly the buckets of its resolution that start before the instant given, reports how many, and leaves the other resolutions alone.",
		usRetention},
	{"BucketBoundaries",
		"A query covers whole buckets of the half-open range [From, To): a record at To is out, one a nanosecond before To is in, and an unaligned From takes in its whole bucket.",
		usBucketBoundaries},
	{"FiltersAndGroups",
		"A query reads one account only, keeps the API, key and channel it filters on, and groups by the dimension asked for.",
		usFiltersAndGroups},
	{"EveryShape",
		"Every query shape (each interval, each grouping, each filter and pair of filters) sums exactly the rows added, also after Prune: a store that keeps narrower tables for some shapes keeps them exact.",
		usEveryShape},
	{"Percentiles",
		"The latency percentiles of a point come from the histograms summed over its rows, within the documented error.",
		usPercentiles},
	{"LastUsed",
		"LastUsed gives the latest use of each key of the account, whichever flush brought it, and leaves out session calls and other accounts.",
		usLastUsed},
	{"InvalidRows",
		"A row with text a store cannot hold, a missing field or a negative figure is store.ErrInvalid, and nothing of its Add is stored.",
		usInvalidRows},
	{"InvalidQueries",
		"A query without account or range, with an unknown interval or grouping, a range too long for its interval, or text a store cannot hold is store.ErrInvalid; so is Prune of an unknown resolution.",
		usInvalidQueries},
}

// usageRow returns a minute row of account at t0+d with n calls of latency lat, each
// charged credits.
func usageRow(account string, d time.Duration, key, api, channel, outcome string, n, credits int64, lat time.Duration) usage.Row {
	r := usage.Row{Bucket: usage.Minute.Start(at(d)), Account: account, Key: key, API: api, Channel: channel, Outcome: outcome,
		Calls: n, Credits: n * credits, Last: at(d)}
	r.Latency[usage.BucketOf(lat)] = n
	return r
}

// sum runs q on s and returns its result.
func sum(t *testing.T, s usage.Store, q usage.Query) usage.Result {
	t.Helper()
	res, err := usage.Run(t.Context(), s, q)
	must(t, fmt.Sprintf("Run(%+v)", q), err)
	return res
}

// totals returns the calls, credits and merged latency of every row Sum returns for q.
func totals(t *testing.T, s usage.Store, q usage.Query) (calls, credits int64, lat usage.Histogram) {
	t.Helper()
	q, err := q.Normalized()
	must(t, "Normalized", err)
	rows, err := s.Sum(t.Context(), q)
	must(t, "Sum", err)
	for i := range rows {
		calls += rows[i].Calls
		credits += rows[i].Credits
		lat.Merge(&rows[i].Latency)
	}
	return calls, credits, lat
}

func usAddThenSum(t *testing.T, s usage.Store) {
	acct := newIDs().id("a")
	rows := []usage.Row{
		usageRow(acct, 0, "k1", "echo", "rest", usage.OK, 3, 2, time.Millisecond),
		usageRow(acct, 10*time.Second, "k1", "echo", "rest", "rejected", 1, 2, 3*time.Millisecond),
		usageRow(acct, 0, "k2", "hash", "mcp", "rate_limited", 2, 0, 0),
	}
	rows[2].Latency = usage.Histogram{} // refused: no latency
	must(t, "Add", s.Add(t.Context(), rows))
	res := sum(t, s, usage.Query{Account: acct, From: at(0), To: at(time.Minute), Interval: usage.Minute, By: usage.ByAPI})
	var lat usage.Histogram
	lat[usage.BucketOf(time.Millisecond)] = 3
	lat[usage.BucketOf(3*time.Millisecond)] = 1
	want := []usage.Series{
		{Group: "echo", Points: []usage.Point{{Start: at(0), Calls: 4, Credits: 8, Errors: map[string]int64{"rejected": 1},
			P50: lat.Quantile(.5), P95: lat.Quantile(.95), P99: lat.Quantile(.99)}}},
		{Group: "hash", Points: []usage.Point{{Start: at(0), Calls: 2, Errors: map[string]int64{"rate_limited": 2}}}},
	}
	if !reflect.DeepEqual(res.Series, want) {
		t.Errorf("Run by api:\n got %+v\nwant %+v", res.Series, want)
	}
	q, _ := usage.Query{Account: acct, From: at(0), To: at(time.Minute), Interval: usage.Minute, By: usage.ByKey}.Normalized()
	got, err := s.Sum(t.Context(), q)
	must(t, "Sum", err)
	if len(got) != 3 {
		t.Fatalf("Sum by key: %d rows, want 3 (k1 ok, k1 rejected, k2 rate_limited): %+v", len(got), got)
	}
	for _, r := range got {
		if r.API != "" || r.Channel != "" || r.Account != acct || !r.Bucket.Equal(at(0)) {
			t.Errorf("Sum by key: row %+v: want account %s, bucket %v, no API or channel", r, acct, at(0))
		}
		if r.Key == "k1" && r.Outcome == usage.OK && (r.Calls != 3 || r.Credits != 6 || !r.Last.Equal(at(0)) || r.Latency.Count() != 3) {
			t.Errorf("Sum by key: k1 ok row %+v: want 3 calls, 6 credits, last %v, 3 latencies", r, at(0))
		}
		if r.Key == "k1" && r.Outcome == "rejected" && !r.Last.Equal(at(10*time.Second)) {
			t.Errorf("Sum by key: k1 rejected row's Last %v, want %v", r.Last, at(10*time.Second))
		}
	}
}

// randomRows returns n minute rows of account spread over three days from t0, with
// random groups and figures.
func randomRows(rng *rand.Rand, account string, n int) []usage.Row {
	rows := make([]usage.Row, n)
	for i := range rows {
		d := time.Duration(rng.IntN(3*24*60))*time.Minute + time.Duration(rng.IntN(60))*time.Second
		rows[i] = usageRow(account, d, fmt.Sprint("k", rng.IntN(3)), fmt.Sprint("api", rng.IntN(4)),
			[]string{"rest", "graphql", "mcp"}[rng.IntN(3)],
			[]string{usage.OK, usage.OK, "rejected", "timeout"}[rng.IntN(4)],
			int64(1+rng.IntN(5)), int64(rng.IntN(4)), time.Duration(rng.IntN(int(5*time.Second))))
	}
	return rows
}

func usRollupsExact(t *testing.T, s usage.Store) {
	acct := newIDs().id("a")
	rng := rand.New(rand.NewPCG(1, 2))
	rows := randomRows(rng, acct, 600)
	for i := 0; i < len(rows); i += 100 {
		must(t, "Add", s.Add(t.Context(), rows[i:i+100]))
	}
	var wantCalls, wantCredits int64
	for _, r := range rows {
		wantCalls += r.Calls
		wantCredits += r.Credits
	}
	// Day 0 from t0 (noon) to day 3 noon: the day buckets need whole days; the minute
	// range is at most one day, so compare minute == hour per day, and hour == day.
	from := usage.Day.Start(at(0))
	for _, res := range []usage.Resolution{usage.Hour, usage.Day} {
		calls, credits, _ := totals(t, s, usage.Query{Account: acct, From: from, To: from.Add(4 * 24 * time.Hour), Interval: res})
		if calls != wantCalls || credits != wantCredits {
			t.Errorf("%s sums: %d calls, %d credits; want %d and %d", res, calls, credits, wantCalls, wantCredits)
		}
	}
	for day := range 4 {
		start := from.Add(time.Duration(day) * 24 * time.Hour)
		q := usage.Query{Account: acct, From: start, To: start.Add(24 * time.Hour)}
		var got [3]struct {
			calls, credits int64
			lat            usage.Histogram
		}
		for i, res := range usage.Resolutions {
			q.Interval = res
			got[i].calls, got[i].credits, got[i].lat = totals(t, s, q)
		}
		if got[0] != got[1] || got[1] != got[2] {
			t.Errorf("day %d: minute, hour and day sums differ: %d/%d/%d calls, %d/%d/%d credits, histograms equal %v/%v",
				day, got[0].calls, got[1].calls, got[2].calls, got[0].credits, got[1].credits, got[2].credits,
				got[0].lat == got[1].lat, got[1].lat == got[2].lat)
		}
	}
}

func usAddsUp(t *testing.T, s usage.Store) {
	acct := newIDs().id("a")
	r := usageRow(acct, 0, "k", "echo", "rest", usage.OK, 2, 3, time.Millisecond)
	for range 3 {
		must(t, "Add", s.Add(t.Context(), []usage.Row{r, r})) // twice in one Add, too
	}
	for _, res := range usage.Resolutions {
		calls, credits, lat := totals(t, s, usage.Query{Account: acct, From: at(0), To: at(time.Minute), Interval: res})
		if calls != 12 || credits != 36 || lat[usage.BucketOf(time.Millisecond)] != 12 {
			t.Errorf("%s: %d calls, %d credits, %d latencies; want 12, 36, 12", res, calls, credits, lat.Count())
		}
	}
}

func usConcurrentRecorders(t *testing.T, s usage.Store) {
	acct := newIDs().id("a")
	const recorders, goroutines, each = 4, 4, 250
	var wg sync.WaitGroup
	recs := make([]*usage.Recorder, recorders)
	for i := range recs {
		rec, err := usage.NewRecorder(s, &usage.RecorderOptions{FlushInterval: -1, PruneInterval: -1})
		must(t, "NewRecorder", err)
		recs[i] = rec
		for g := range goroutines {
			wg.Go(func() {
				for i := range each {
					rec.Record(usage.Record{At: at(time.Duration(i%3) * time.Minute), Account: acct, Key: fmt.Sprint("k", g%2),
						API: "echo", Channel: "rest", Outcome: usage.OK, Credits: 2, Duration: time.Millisecond})
					if i%50 == 49 {
						if err := rec.Flush(t.Context()); err != nil {
							t.Errorf("Flush: %v", err)
						}
					}
				}
			})
		}
	}
	wg.Wait()
	for _, rec := range recs {
		must(t, "Close", rec.Close(t.Context()))
		if rec.Pending() != 0 || rec.Dropped() != 0 {
			t.Errorf("recorder: %d rows pending, %d calls dropped; want none", rec.Pending(), rec.Dropped())
		}
	}
	const want = recorders * goroutines * each
	for _, res := range usage.Resolutions {
		calls, credits, lat := totals(t, s, usage.Query{Account: acct, From: at(0), To: at(time.Hour), Interval: res})
		if calls != want || credits != 2*want || lat.Count() != want {
			t.Errorf("%s: %d calls, %d credits, %d latencies; want %d, %d, %d", res, calls, credits, lat.Count(), want, 2*want, want)
		}
	}
}

func usRetention(t *testing.T, s usage.Store) {
	n := newIDs()
	a, b := n.id("a"), n.id("b")
	var rows []usage.Row
	for h := range 4 {
		for _, acct := range []string{a, b} {
			rows = append(rows, usageRow(acct, time.Duration(h)*time.Hour, "k", "echo", "rest", usage.OK, 1, 1, time.Millisecond))
		}
	}
	must(t, "Add", s.Add(t.Context(), rows))
	got, err := s.Prune(t.Context(), usage.Minute, at(2*time.Hour))
	must(t, "Prune minute", err)
	if got != 4 {
		t.Errorf("Prune minute before t0+2h: %d deleted, want 4 (2 minutes of 2 accounts)", got)
	}
	for _, acct := range []string{a, b} {
		if calls, _, _ := totals(t, s, usage.Query{Account: acct, From: at(0), To: at(4 * time.Hour), Interval: usage.Minute}); calls != 2 {
			t.Errorf("%s after Prune: %d minute calls, want 2 (those at and after t0+2h)", acct, calls)
		}
		if calls, _, _ := totals(t, s, usage.Query{Account: acct, From: at(0), To: at(4 * time.Hour), Interval: usage.Hour}); calls != 4 {
			t.Errorf("%s after Prune of minutes: %d hour calls, want all 4", acct, calls)
		}
	}
	got, err = s.Prune(t.Context(), usage.Minute, at(2*time.Hour))
	must(t, "Prune again", err)
	if got != 0 {
		t.Errorf("Prune again: %d deleted, want 0", got)
	}
	got, err = s.Prune(t.Context(), usage.Hour, at(time.Hour+time.Second))
	must(t, "Prune hour", err)
	if got != 4 {
		t.Errorf("Prune hour before t0+1h1s: %d deleted, want 4 (hours t0 and t0+1h of 2 accounts)", got)
	}
	got, err = s.Prune(t.Context(), usage.Day, usage.Day.Start(at(0)))
	must(t, "Prune day", err)
	if got != 0 {
		t.Errorf("Prune day before the day of t0: %d deleted, want 0", got)
	}
	if calls, _, _ := totals(t, s, usage.Query{Account: a, From: at(0), To: at(time.Hour), Interval: usage.Day}); calls != 4 {
		t.Errorf("day calls after pruning minutes and hours: %d, want 4", calls)
	}
}

func usBucketBoundaries(t *testing.T, s usage.Store) {
	acct := newIDs().id("a")
	r := func(d time.Duration, n int64) usage.Row {
		return usageRow(acct, d, "k", "echo", "rest", usage.OK, n, 1, time.Millisecond)
	}
	// 1 call in the hour before t0's, 2 at t0, 4 at the end of t0's hour, 8 in the next.
	must(t, "Add", s.Add(t.Context(), []usage.Row{r(-time.Second, 1), r(0, 2), r(time.Hour-time.Second, 4), r(time.Hour, 8)}))
	for _, tc := range []struct {
		from, to time.Time
		res      usage.Resolution
		want     int64
	}{
		{at(0), at(time.Hour), usage.Hour, 6},
		{at(0), at(time.Hour + time.Nanosecond), usage.Hour, 14},
		{at(30 * time.Minute), at(time.Hour), usage.Hour, 6},
		{at(-time.Nanosecond), at(time.Hour), usage.Hour, 7},
		{at(0), at(time.Hour), usage.Minute, 6},
		{at(time.Minute), at(time.Hour - time.Minute), usage.Minute, 0},
		{at(-time.Minute), at(0), usage.Minute, 1},
		{at(0), at(time.Nanosecond), usage.Minute, 2},
		{at(0), at(time.Hour), usage.Day, 15},
	} {
		calls, _, _ := totals(t, s, usage.Query{Account: acct, From: tc.from, To: tc.to, Interval: tc.res})
		if calls != tc.want {
			t.Errorf("%s from %v to %v: %d calls, want %d", tc.res, tc.from, tc.to, calls, tc.want)
		}
	}
	res := sum(t, s, usage.Query{Account: acct, From: at(-time.Hour), To: at(2 * time.Hour), Interval: usage.Hour})
	if len(res.Series) != 1 || len(res.Series[0].Points) != 3 {
		t.Fatalf("hourly series from t0-1h to t0+2h: %+v, want one series of 3 points", res.Series)
	}
	for i, want := range []int64{1, 6, 8} {
		if p := res.Series[0].Points[i]; p.Calls != want || !p.Start.Equal(at(time.Duration(i-1)*time.Hour)) {
			t.Errorf("point %d: %d calls at %v, want %d at %v", i, p.Calls, p.Start, want, at(time.Duration(i-1)*time.Hour))
		}
	}
}

func usFiltersAndGroups(t *testing.T, s usage.Store) {
	n := newIDs()
	a, b := n.id("a"), n.id("b")
	must(t, "Add", s.Add(t.Context(), []usage.Row{
		usageRow(a, 0, "k1", "echo", "rest", usage.OK, 1, 1, time.Millisecond),
		usageRow(a, 0, "k1", "hash", "graphql", usage.OK, 2, 1, time.Millisecond),
		usageRow(a, 0, "k2", "echo", "mcp", "timeout", 4, 0, time.Second),
		usageRow(a, 0, "", "echo", "rest", usage.OK, 8, 1, time.Millisecond),
		usageRow(b, 0, "k1", "echo", "rest", usage.OK, 16, 1, time.Millisecond),
	}))
	calls := func(res usage.Result) map[string]int64 {
		m := map[string]int64{}
		for _, s := range res.Series {
			for _, p := range s.Points {
				m[s.Group] += p.Calls
			}
		}
		return m
	}
	base := usage.Query{Account: a, From: at(0), To: at(time.Hour), Interval: usage.Hour}
	for _, tc := range []struct {
		name string
		edit func(*usage.Query)
		want map[string]int64
	}{
		{"none", func(*usage.Query) {}, map[string]int64{"": 15}},
		{"by api", func(q *usage.Query) { q.By = usage.ByAPI }, map[string]int64{"echo": 13, "hash": 2}},
		{"by key", func(q *usage.Query) { q.By = usage.ByKey }, map[string]int64{"k1": 3, "k2": 4, "": 8}},
		{"by channel", func(q *usage.Query) { q.By = usage.ByChannel }, map[string]int64{"rest": 9, "graphql": 2, "mcp": 4}},
		{"by outcome", func(q *usage.Query) { q.By = usage.ByOutcome }, map[string]int64{"ok": 11, "timeout": 4}},
		{"api echo by key", func(q *usage.Query) { q.API, q.By = "echo", usage.ByKey }, map[string]int64{"k1": 1, "k2": 4, "": 8}},
		{"key k1 by api", func(q *usage.Query) { q.Key, q.By = "k1", usage.ByAPI }, map[string]int64{"echo": 1, "hash": 2}},
		{"channel mcp", func(q *usage.Query) { q.Channel = "mcp" }, map[string]int64{"": 4}},
		{"no such key", func(q *usage.Query) { q.Key = "k9" }, map[string]int64{}},
		{"other account", func(q *usage.Query) { q.Account = b }, map[string]int64{"": 16}},
		{"unknown account", func(q *usage.Query) { q.Account = n.id("none") }, map[string]int64{}},
	} {
		q := base
		tc.edit(&q)
		if got := calls(sum(t, s, q)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: calls per group %v, want %v", tc.name, got, tc.want)
		}
	}
	res := sum(t, s, usage.Query{Account: a, From: at(0), To: at(time.Hour), Interval: usage.Hour, By: usage.ByAPI})
	if e := res.Series[0].Points[0].Errors; !reflect.DeepEqual(e, map[string]int64{"timeout": 4}) {
		t.Errorf("echo's errors %v, want timeout: 4", e)
	}
}

func usPercentiles(t *testing.T, s usage.Store) {
	acct := newIDs().id("a")
	// 100 calls over two minutes and two rows each: 90 at 2ms, 8 at 50ms, 2 at 1s.
	var rows []usage.Row
	for _, c := range []struct {
		n   int64
		lat time.Duration
	}{{45, 2 * time.Millisecond}, {4, 50 * time.Millisecond}, {1, time.Second}} {
		rows = append(rows, usageRow(acct, 0, "k", "echo", "rest", usage.OK, c.n, 1, c.lat),
			usageRow(acct, time.Minute, "k", "echo", "graphql", usage.OK, c.n, 1, c.lat))
	}
	must(t, "Add", s.Add(t.Context(), rows))
	res := sum(t, s, usage.Query{Account: acct, From: at(0), To: at(time.Hour), Interval: usage.Hour})
	if len(res.Series) != 1 || len(res.Series[0].Points) != 1 {
		t.Fatalf("series %+v, want one point", res.Series)
	}
	p := res.Series[0].Points[0]
	for _, c := range []struct {
		name      string
		got, want time.Duration
	}{{"p50", p.P50, 2 * time.Millisecond}, {"p95", p.P95, 50 * time.Millisecond}, {"p99", p.P99, time.Second}} {
		if d := float64(c.got-c.want) / float64(c.want); d > usage.QuantileError || d < -usage.QuantileError {
			t.Errorf("%s %v, want %v within %.1f%%", c.name, c.got, c.want, 100*usage.QuantileError)
		}
	}
	if p.Calls != 100 {
		t.Errorf("calls %d, want 100", p.Calls)
	}
}

func usLastUsed(t *testing.T, s usage.Store) {
	n := newIDs()
	a, b := n.id("a"), n.id("b")
	must(t, "Add", s.Add(t.Context(), []usage.Row{
		usageRow(a, time.Hour, "k1", "echo", "rest", usage.OK, 1, 1, time.Millisecond),
		usageRow(a, 2*time.Hour+5*time.Second, "k2", "echo", "rest", "rate_limited", 1, 0, 0),
		usageRow(a, 3*time.Hour, "", "echo", "rest", usage.OK, 1, 1, time.Millisecond),
		usageRow(b, 4*time.Hour, "k3", "echo", "rest", usage.OK, 1, 1, time.Millisecond),
	}))
	// An older flush arriving later does not move the last use back.
	must(t, "Add", s.Add(t.Context(), []usage.Row{usageRow(a, 0, "k1", "echo", "rest", usage.OK, 1, 1, time.Millisecond)}))
	got, err := s.LastUsed(t.Context(), a)
	must(t, "LastUsed", err)
	want := map[string]time.Time{"k1": at(time.Hour), "k2": at(2*time.Hour + 5*time.Second)}
	if len(got) != len(want) {
		t.Fatalf("LastUsed(%s) = %v, want %v", a, got, want)
	}
	for k, w := range want {
		if !got[k].Equal(w) {
			t.Errorf("LastUsed(%s)[%s] = %v, want %v", a, k, got[k], w)
		}
	}
	got, err = s.LastUsed(t.Context(), n.id("none"))
	must(t, "LastUsed", err)
	if len(got) != 0 {
		t.Errorf("LastUsed of an account never used: %v, want none", got)
	}
}

func usInvalidRows(t *testing.T, s usage.Store) {
	acct := newIDs().id("a")
	good := usageRow(acct, 0, "k", "echo", "rest", usage.OK, 1, 1, time.Millisecond)
	for _, tc := range []struct {
		name string
		bad  func(*usage.Row)
	}{
		{"NUL in key", func(r *usage.Row) { r.Key = "a\x00b" }},
		{"invalid UTF-8 in API", func(r *usage.Row) { r.API = "\xff" }},
		{"invalid UTF-8 in outcome", func(r *usage.Row) { r.Outcome = "ok\xc3" }},
		{"no bucket", func(r *usage.Row) { r.Bucket = time.Time{} }},
		{"no account", func(r *usage.Row) { r.Account = "" }},
		{"no API", func(r *usage.Row) { r.API = "" }},
		{"no channel", func(r *usage.Row) { r.Channel = "" }},
		{"no outcome", func(r *usage.Row) { r.Outcome = "" }},
		{"no calls", func(r *usage.Row) { r.Calls = 0 }},
		{"negative credits", func(r *usage.Row) { r.Credits = -1 }},
		{"negative latency count", func(r *usage.Row) { r.Latency[3] = -1 }},
	} {
		bad := good
		tc.bad(&bad)
		wantErr(t, "Add with "+tc.name, s.Add(t.Context(), []usage.Row{good, bad}), store.ErrInvalid)
	}
	for _, res := range usage.Resolutions {
		if calls, _, _ := totals(t, s, usage.Query{Account: acct, From: at(0), To: at(time.Hour), Interval: res}); calls != 0 {
			t.Errorf("after refused adds: %d %s calls stored, want none", calls, res)
		}
	}
	if last, err := s.LastUsed(t.Context(), acct); err != nil || len(last) != 0 {
		t.Errorf("after refused adds: LastUsed %v, %v; want none", last, err)
	}
}

func usInvalidQueries(t *testing.T, s usage.Store) {
	acct := newIDs().id("a")
	ok := usage.Query{Account: acct, From: at(0), To: at(time.Hour), Interval: usage.Hour}
	for _, tc := range []struct {
		name  string
		param string
		edit  func(*usage.Query)
	}{
		{"no account", "account", func(q *usage.Query) { q.Account = "" }},
		{"no from", "from", func(q *usage.Query) { q.From = time.Time{} }},
		{"no to", "to", func(q *usage.Query) { q.To = time.Time{} }},
		{"to before from", "to", func(q *usage.Query) { q.To = at(-time.Hour) }},
		{"to at from", "to", func(q *usage.Query) { q.To = q.From }},
		{"unknown interval", "interval", func(q *usage.Query) { q.Interval = usage.Resolution(time.Second) }},
		{"unknown grouping", "by", func(q *usage.Query) { q.By = "plan" }},
		{"minutes over a day", "to", func(q *usage.Query) { q.Interval, q.To = usage.Minute, at(24*time.Hour+time.Minute) }},
		{"hours over 31 days", "to", func(q *usage.Query) { q.To = at(31*24*time.Hour + time.Hour) }},
		{"days over 400 days", "to", func(q *usage.Query) { q.Interval, q.To = usage.Day, at(401*24*time.Hour) }},
		{"NUL in API", "api", func(q *usage.Query) { q.API = "a\x00" }},
		{"invalid UTF-8 in key", "key", func(q *usage.Query) { q.Key = "\xff" }},
		{"invalid UTF-8 in account", "account", func(q *usage.Query) { q.Account = "\xff" }},
	} {
		q := ok
		tc.edit(&q)
		_, err := s.Sum(t.Context(), q)
		wantNamed(t, "Sum with "+tc.name, err, store.ErrInvalid, tc.param)
		_, err = usage.Run(t.Context(), s, q)
		if qe, isQE := usage.IsQueryError(err); !isQE || qe.Param != tc.param {
			t.Errorf("Run with %s: error %v, want a QueryError on %q", tc.name, err, tc.param)
		}
	}
	for _, q := range []usage.Query{
		{Account: acct, From: at(0), To: at(24 * time.Hour), Interval: usage.Minute},
		{Account: acct, From: at(0), To: at(31 * 24 * time.Hour), Interval: usage.Hour},
		{Account: acct, From: at(0), To: at(400 * 24 * time.Hour), Interval: usage.Day},
	} {
		q.From, q.To = q.Interval.Start(q.From), q.Interval.Start(q.To)
		if _, err := s.Sum(t.Context(), q); err != nil {
			t.Errorf("Sum of the longest %s range: %v", q.Interval, err)
		}
	}
	_, err := s.Prune(t.Context(), usage.Resolution(time.Second), at(0))
	wantErr(t, "Prune of an unknown resolution", err, store.ErrInvalid)
}

func usEveryShape(t *testing.T, s usage.Store) {
	n := newIDs()
	acct, other := n.id("a"), n.id("b")
	rng := rand.New(rand.NewPCG(3, 5))
	keys := []string{"k0", "k1", "k2", ""} // "": a session's calls
	apis := []string{"echo", "hash", "date-info"}
	channels := []string{"rest", "graphql", "mcp"}
	outcomes := []string{usage.OK, usage.OK, "rejected", "rate_limited"}
	// 600 minute rows over 36 hours, in three Adds, and a little of another account.
	var rows []usage.Row
	for i := range 600 {
		acctOf := acct
		if i%10 == 9 {
			acctOf = other
		}
		d := time.Duration(rng.Int64N(int64(36 * time.Hour))).Truncate(time.Second)
		r := usageRow(acctOf, d, keys[rng.IntN(len(keys))], apis[rng.IntN(len(apis))], channels[rng.IntN(len(channels))],
			outcomes[rng.IntN(len(outcomes))], 1+rng.Int64N(3), rng.Int64N(3), time.Duration(1+rng.Int64N(500))*time.Millisecond)
		rows = append(rows, r)
	}
	for i := 0; i < len(rows); i += 200 {
		must(t, "Add", s.Add(t.Context(), rows[i:i+200]))
	}

	// check compares every shape's Sum with the sums of the rows at or after kept[res].
	check := func(when string, kept map[usage.Resolution]time.Time) {
		t.Helper()
		for _, res := range []usage.Resolution{usage.Minute, usage.Hour, usage.Day} {
			span := 48 * time.Hour
			if res == usage.Minute {
				span = 24 * time.Hour
			}
			for _, by := range []usage.Dimension{usage.ByNone, usage.ByAPI, usage.ByKey, usage.ByChannel, usage.ByOutcome} {
				for _, f := range []struct{ api, key, channel string }{
					{}, {api: "hash"}, {key: "k1"}, {channel: "mcp"}, {api: "echo", key: "k0"},
					{api: "date-info", channel: "rest"}, {key: "k2", channel: "graphql"},
				} {
					q, err := usage.Query{Account: acct, From: usage.Day.Start(t0), To: usage.Day.Start(t0).Add(span), Interval: res, By: by,
						API: f.api, Key: f.key, Channel: f.channel}.Normalized()
					must(t, "Normalized", err)
					model, err := usage.NewSummer(q)
					must(t, "NewSummer", err)
					for _, r := range usage.Rollup(rows, res) {
						if !r.Bucket.Before(kept[res]) {
							must(t, "Summer.Add", model.Add(&r))
						}
					}
					got, err := s.Sum(t.Context(), q)
					must(t, fmt.Sprintf("Sum(%+v)", q), err)
					if want := model.Rows(); !sameRows(got, want) {
						t.Errorf("%s: Sum of %s buckets by %q, filters %+v:\n got %v\nwant %v", when, res, by, f, sortedRows(got), sortedRows(want))
					}
				}
			}
		}
	}
	check("after Add", nil)
	hour, day := usage.Hour.Start(at(7*time.Hour)), usage.Day.Start(at(24*time.Hour))
	_, err := s.Prune(t.Context(), usage.Hour, hour)
	must(t, "Prune hour", err)
	_, err = s.Prune(t.Context(), usage.Day, day)
	must(t, "Prune day", err)
	check("after Prune", map[usage.Resolution]time.Time{usage.Hour: hour, usage.Day: day})
}

// sortedRows returns a copy of rows in the order of their bucket and group.
func sortedRows(rows []usage.Row) []usage.Row {
	out := slices.Clone(rows)
	slices.SortFunc(out, func(a, b usage.Row) int {
		return cmp.Or(a.Bucket.Compare(b.Bucket), cmp.Compare(a.Account, b.Account), cmp.Compare(a.Key, b.Key),
			cmp.Compare(a.API, b.API), cmp.Compare(a.Channel, b.Channel), cmp.Compare(a.Outcome, b.Outcome))
	})
	return out
}

// sameRows reports whether a and b hold the same rows, in any order.
func sameRows(a, b []usage.Row) bool {
	a, b = sortedRows(a), sortedRows(b)
	return slices.EqualFunc(a, b, func(x, y usage.Row) bool {
		return x.Bucket.Equal(y.Bucket) && x.Last.Equal(y.Last) && x.Account == y.Account && x.Key == y.Key && x.API == y.API &&
			x.Channel == y.Channel && x.Outcome == y.Outcome && x.Calls == y.Calls && x.Credits == y.Credits && x.Latency == y.Latency
	})
}
