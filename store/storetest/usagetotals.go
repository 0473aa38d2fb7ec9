package storetest

import (
	"cmp"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/usage"
)

// totalsRows are the rows of TestUsageStore about the totals across accounts
// (usage.Store.Totals).
var totalsRows = []behaviour[usage.Store]{
	{"TotalsEveryRanking",
		"Totals ranks the groups of every grouping (account, API, channel, outcome) by calls or by credits, largest first, ties by the group's value in byte order, with every filter; its pages, followed by their cursors, hold exactly the groups of a direct computation from the rows added, each once, and every page the sums and the number of groups of the whole selection.",
		usTotalsEveryRanking},
	{"TotalsTies",
		"Groups of equal figures rank by their value in byte order (upper case before lower case, ASCII before other letters), and pages that end within a tie continue it.",
		usTotalsTies},
	{"TotalsRange",
		"Totals covers whole minutes of the half-open range, read from the coarsest buckets that cover it exactly: day buckets for a range from midnight to midnight UTC, hour buckets for one on the hour, minute buckets else; a record at To is out, one a nanosecond before To is in. What retention deleted from the buckets read counts for nothing.",
		usTotalsRange},
	{"TotalsCursorIsPosition",
		"A cursor is a position in the ranking (a figure and a group), not an offset: the next page holds the groups that rank after it when it is read.",
		usTotalsCursorIsPosition},
	{"TotalsInvalid",
		"A totals query without a range, with the range backwards, too long for the buckets its bounds allow, an unknown grouping or order, a limit out of bounds, text a store cannot hold, or a cursor that no page of the same grouping and order returned is a usage.QueryError naming the field, wrapping store.ErrInvalid.",
		usTotalsInvalid},
}

// ceilMinute returns t moved up to a whole minute.
func ceilMinute(t time.Time) time.Time {
	if m := usage.Minute.Start(t); m.Before(t) {
		return m.Add(time.Minute)
	}
	return t.UTC()
}

// rankModel computes what Totals answers for q, every page together, from the minute
// rows added: the rows whose minute lies in the range widened to whole minutes and
// that meet the filters, summed per group, in the order of the ranking.
func rankModel(rows []usage.Row, q usage.TotalsQuery) (groups []usage.GroupTotals, sum usage.Totals) {
	from, to := usage.Minute.Start(q.From), ceilMinute(q.To)
	by := cmp.Or(q.GroupBy, usage.ByAccount)
	sums := map[string]*usage.Totals{}
	for _, r := range rows {
		b := usage.Minute.Start(r.Bucket)
		if b.Before(from) || !b.Before(to) || q.Account != "" && r.Account != q.Account || q.API != "" && r.API != q.API ||
			q.Channel != "" && r.Channel != q.Channel || q.Outcome != "" && r.Outcome != q.Outcome {
			continue
		}
		g := map[usage.Dimension]string{usage.ByAccount: r.Account, usage.ByAPI: r.API, usage.ByChannel: r.Channel, usage.ByOutcome: r.Outcome}[by]
		t := sums[g]
		if t == nil {
			t = &usage.Totals{}
			sums[g] = t
		}
		var errs int64
		if r.Outcome != usage.OK {
			errs = r.Calls
		}
		for _, x := range []*usage.Totals{t, &sum} {
			x.Calls += r.Calls
			x.Credits += r.Credits
			x.Errors += errs
		}
	}
	for g, t := range sums {
		groups = append(groups, usage.GroupTotals{Group: g, Totals: *t})
	}
	figure := func(t usage.GroupTotals) int64 {
		if q.Order == usage.ByCredits {
			return t.Credits
		}
		return t.Calls
	}
	slices.SortFunc(groups, func(a, b usage.GroupTotals) int {
		return cmp.Or(cmp.Compare(figure(b), figure(a)), strings.Compare(a.Group, b.Group))
	})
	return groups, sum
}

// allPages reads every page of q, following their cursors, and returns the rows of the
// pages in order and the pages. It checks what every page of a ranking shares: at most
// the limit of rows, a Next on every page but the last, sum and number of groups equal.
func allPages(t *testing.T, s usage.Store, q usage.TotalsQuery) ([]usage.GroupTotals, []usage.TotalsPage) {
	t.Helper()
	var rows []usage.GroupTotals
	var pages []usage.TotalsPage
	for range 1000 {
		p, err := s.Totals(t.Context(), q)
		must(t, fmt.Sprintf("Totals(%+v)", q), err)
		limit := cmp.Or(q.Limit, usage.DefaultTotalsLimit)
		if len(p.Rows) > limit || p.Next != "" && len(p.Rows) != limit {
			t.Fatalf("Totals(%+v): %d rows and next %q; want at most %d, and %d when a page follows", q, len(p.Rows), p.Next, limit, limit)
		}
		if len(pages) > 0 && (p.Sum != pages[0].Sum || p.Groups != pages[0].Groups) {
			t.Errorf("Totals(%+v): page %d sums %+v of %d groups, the first page %+v of %d", q, len(pages)+1, p.Sum, p.Groups, pages[0].Sum, pages[0].Groups)
		}
		if len(p.Next) > usage.MaxTotalsCursor {
			t.Errorf("Totals(%+v): cursor of %d bytes, longer than MaxTotalsCursor", q, len(p.Next))
		}
		rows = append(rows, p.Rows...)
		pages = append(pages, p)
		if p.Next == "" {
			return rows, pages
		}
		q.Cursor = p.Next
	}
	t.Fatalf("Totals(%+v): the cursors never end", q)
	return nil, nil
}

// checkRanking compares every page of q with the model computed from rows.
func checkRanking(t *testing.T, s usage.Store, rows []usage.Row, q usage.TotalsQuery, res usage.Resolution) {
	t.Helper()
	got, pages := allPages(t, s, q)
	want, sum := rankModel(rows, q)
	if !slices.Equal(got, want) {
		t.Errorf("Totals(%+v), every page:\n got %v\nwant %v", q, got, want)
	}
	if p := pages[0]; p.Sum != sum || p.Groups != int64(len(want)) || p.Resolution != res {
		t.Errorf("Totals(%+v): sums %+v of %d groups from %s buckets; want %+v of %d from %s", q, p.Sum, p.Groups, p.Resolution, sum, len(want), res)
	}
}

func usTotalsEveryRanking(t *testing.T, s usage.Store) {
	n := newIDs()
	var accounts []string
	for i := range 12 {
		accounts = append(accounts, n.id(fmt.Sprint("acct", i)))
	}
	keys := []string{"k0", "k1", ""}
	apis := []string{"echo", "hash", "date-info", "geo"}
	channels := []string{"rest", "graphql", "mcp"}
	outcomes := []string{usage.OK, usage.OK, "rejected", "rate_limited", "api_failed"}
	rng := rand.New(rand.NewPCG(11, 13))
	// 1500 rows over three days from the midnight before t0 (12:00), and 300 more in
	// the hour from t0+2h, in several Adds.
	var rows []usage.Row
	for i := range 1800 {
		d := time.Duration(rng.Int64N(int64(72*time.Hour))) - 12*time.Hour
		if i >= 1500 {
			d = 2*time.Hour + time.Duration(rng.Int64N(int64(time.Hour)))
		}
		rows = append(rows, usageRow(accounts[rng.IntN(len(accounts))], d.Truncate(time.Second), keys[rng.IntN(len(keys))],
			apis[rng.IntN(len(apis))], channels[rng.IntN(len(channels))], outcomes[rng.IntN(len(outcomes))],
			1+rng.Int64N(4), rng.Int64N(4), time.Millisecond))
	}
	for i := 0; i < len(rows); i += 300 {
		must(t, "Add", s.Add(t.Context(), rows[i:i+300]))
	}
	day0 := usage.Day.Start(t0)
	ranges := []struct {
		from, to time.Time
		res      usage.Resolution
	}{
		{day0, day0.Add(48 * time.Hour), usage.Day},
		{at(time.Hour), at(8 * time.Hour), usage.Hour},
		{at(2*time.Hour + 30*time.Second), at(2*time.Hour + 50*time.Minute + 10*time.Second), usage.Minute},
	}
	filters := []usage.TotalsQuery{
		{}, {Account: accounts[3]}, {API: "hash"}, {Channel: "mcp"}, {Outcome: "rejected"},
		{API: "echo", Outcome: usage.OK}, {Account: accounts[5], Channel: "rest"}, {API: "no-such-api"},
	}
	for _, r := range ranges {
		for _, by := range []usage.Dimension{usage.ByAccount, usage.ByAPI, usage.ByChannel, usage.ByOutcome} {
			for _, order := range []usage.Order{usage.ByCalls, usage.ByCredits} {
				for i, f := range filters {
					q := f
					q.From, q.To, q.GroupBy, q.Order = r.from, r.to, by, order
					q.Limit = []int{1, 4, 0}[i%3]
					checkRanking(t, s, rows, q, r.res)
				}
			}
		}
	}
	// The defaults: by account, by calls, 50 a page.
	p, err := s.Totals(t.Context(), usage.TotalsQuery{From: day0, To: day0.Add(24 * time.Hour)})
	must(t, "Totals with the defaults", err)
	if q := p.Query; q.GroupBy != usage.ByAccount || q.Order != usage.ByCalls || q.Limit != usage.DefaultTotalsLimit {
		t.Errorf("Totals with the defaults: query %+v, want by account, by calls, limit %d", q, usage.DefaultTotalsLimit)
	}
	checkRanking(t, s, rows, usage.TotalsQuery{From: day0, To: day0.Add(24 * time.Hour)}, usage.Day)
}

func usTotalsTies(t *testing.T, s usage.Store) {
	n := newIDs()
	// Byte order: "B" < "Z" < "_" < "a" < "é"; a collation of a language would sort
	// them otherwise.
	names := []string{"alpha", "Beta", "Zulu", "_under", "émile", "beta"}
	var rows []usage.Row
	for _, name := range names {
		rows = append(rows, usageRow(n.id(name), 0, "k", "echo", "rest", usage.OK, 3, 0, time.Millisecond))
	}
	rows = append(rows,
		usageRow(n.id("top"), 0, "k", "echo", "rest", usage.OK, 9, 0, time.Millisecond),
		usageRow(n.id("low"), 0, "k", "echo", "rest", "timeout", 1, 0, time.Millisecond))
	must(t, "Add", s.Add(t.Context(), rows))
	for _, limit := range []int{1, 2, 3, 5, 8} {
		for _, order := range []usage.Order{usage.ByCalls, usage.ByCredits} {
			q := usage.TotalsQuery{From: at(0), To: at(time.Hour), Order: order, Limit: limit}
			got, _ := allPages(t, s, q)
			var ids []string
			for _, g := range got {
				ids = append(ids, strings.TrimPrefix(g.Group, n.id("")))
			}
			want := []string{"top", "Beta", "Zulu", "_under", "alpha", "beta", "émile", "low"}
			if order == usage.ByCredits { // no credits: every group ties
				want = []string{"Beta", "Zulu", "_under", "alpha", "beta", "low", "top", "émile"}
			}
			if !slices.Equal(ids, want) {
				t.Errorf("by %s, %d a page: %v, want %v", order, limit, ids, want)
			}
		}
	}
}

func usTotalsRange(t *testing.T, s usage.Store) {
	n := newIDs()
	a := n.id("a")
	day0 := usage.Day.Start(t0) // t0 is 12:00
	r := func(at time.Time, calls int64) usage.Row {
		row := usageRow(a, 0, "k", "echo", "rest", usage.OK, calls, 1, time.Millisecond)
		row.Bucket, row.Last = usage.Minute.Start(at), at
		return row
	}
	// 1 call the second before day0, 2 at day0, 4 at 12:59:59, 8 at 13:00, 16 at
	// 23:59:59, 32 at the next midnight.
	must(t, "Add", s.Add(t.Context(), []usage.Row{
		r(day0.Add(-time.Second), 1), r(day0, 2), r(day0.Add(13*time.Hour-time.Second), 4), r(day0.Add(13*time.Hour), 8),
		r(day0.Add(24*time.Hour-time.Second), 16), r(day0.Add(24*time.Hour), 32),
	}))
	h := func(d time.Duration) time.Time { return day0.Add(d) }
	for _, tc := range []struct {
		from, to         time.Time
		res              usage.Resolution
		wantFrom, wantTo time.Time
		calls            int64
	}{
		{h(0), h(24 * time.Hour), usage.Day, h(0), h(24 * time.Hour), 2 + 4 + 8 + 16},
		{h(-24 * time.Hour), h(48 * time.Hour), usage.Day, h(-24 * time.Hour), h(48 * time.Hour), 63},
		{h(12 * time.Hour), h(13 * time.Hour), usage.Hour, h(12 * time.Hour), h(13 * time.Hour), 4},
		{h(12 * time.Hour), h(14 * time.Hour), usage.Hour, h(12 * time.Hour), h(14 * time.Hour), 12},
		{h(-time.Hour), h(time.Hour), usage.Hour, h(-time.Hour), h(time.Hour), 3},
		{h(23 * time.Hour), h(48 * time.Hour), usage.Hour, h(23 * time.Hour), h(48 * time.Hour), 48},
		{h(13*time.Hour - time.Minute), h(13 * time.Hour), usage.Minute, h(13*time.Hour - time.Minute), h(13 * time.Hour), 4},
		{h(13*time.Hour - 30*time.Second), h(13*time.Hour + time.Nanosecond), usage.Minute, h(13*time.Hour - time.Minute), h(13*time.Hour + time.Minute), 12},
		{h(13 * time.Hour), h(13*time.Hour + time.Nanosecond), usage.Minute, h(13 * time.Hour), h(13*time.Hour + time.Minute), 8},
		{h(-time.Minute), h(0), usage.Minute, h(-time.Minute), h(0), 1},
		{h(time.Minute), h(13*time.Hour - time.Minute), usage.Minute, h(time.Minute), h(13*time.Hour - time.Minute), 0},
	} {
		p, err := s.Totals(t.Context(), usage.TotalsQuery{From: tc.from, To: tc.to, GroupBy: usage.ByAPI})
		must(t, fmt.Sprintf("Totals from %v to %v", tc.from, tc.to), err)
		if p.Resolution != tc.res || !p.Query.From.Equal(tc.wantFrom) || !p.Query.To.Equal(tc.wantTo) || p.Sum.Calls != tc.calls {
			t.Errorf("Totals from %v to %v: %d calls from %s buckets over [%v, %v); want %d from %s buckets over [%v, %v)",
				tc.from, tc.to, p.Sum.Calls, p.Resolution, p.Query.From, p.Query.To, tc.calls, tc.res, tc.wantFrom, tc.wantTo)
		}
		if (tc.calls == 0) != (len(p.Rows) == 0) {
			t.Errorf("Totals from %v to %v: rows %+v with %d calls", tc.from, tc.to, p.Rows, tc.calls)
		}
	}
	// Retention: once the hour buckets before 13:00 are deleted, a range on the hour
	// counts only the later hours; a range at midnight reads the days, still whole.
	_, err := s.Prune(t.Context(), usage.Hour, h(13*time.Hour))
	must(t, "Prune hours", err)
	for _, tc := range []struct {
		from, to time.Time
		calls    int64
	}{
		{h(0), h(24 * time.Hour), 30},
		{h(time.Hour), h(24 * time.Hour), 24},
		{h(13*time.Hour - time.Minute), h(13*time.Hour + time.Minute), 12}, // minutes, kept
	} {
		p, err := s.Totals(t.Context(), usage.TotalsQuery{From: tc.from, To: tc.to})
		must(t, "Totals after Prune", err)
		if p.Sum.Calls != tc.calls {
			t.Errorf("after pruning hours before 13:00: Totals from %v to %v (%s buckets) counts %d calls, want %d",
				tc.from, tc.to, p.Resolution, p.Sum.Calls, tc.calls)
		}
	}
}

func usTotalsCursorIsPosition(t *testing.T, s usage.Store) {
	n := newIDs()
	row := func(label string, calls int64) usage.Row {
		return usageRow(n.id(label), 0, "k", "echo", "rest", usage.OK, calls, 1, time.Millisecond)
	}
	must(t, "Add", s.Add(t.Context(), []usage.Row{row("a", 5), row("b", 4), row("c", 3), row("d", 2)}))
	q := usage.TotalsQuery{From: at(0), To: at(time.Hour), Limit: 2}
	first, err := s.Totals(t.Context(), q)
	must(t, "Totals", err)
	if len(first.Rows) != 2 || first.Rows[0].Group != n.id("a") || first.Rows[1].Group != n.id("b") || first.Next == "" {
		t.Fatalf("first page %+v, want a and b and a next", first)
	}
	// d moves to the top, c gains a call but stays after b.
	must(t, "Add", s.Add(t.Context(), []usage.Row{row("d", 10), row("c", 1)}))
	q.Cursor = first.Next
	second, err := s.Totals(t.Context(), q)
	must(t, "Totals", err)
	if len(second.Rows) != 1 || second.Rows[0].Group != n.id("c") || second.Rows[0].Calls != 4 || second.Next != "" {
		t.Errorf("second page after the change %+v, want c alone with 4 calls (d now ranks before the position), and no next", second.Rows)
	}
	if second.Sum.Calls != 25 || second.Groups != 4 {
		t.Errorf("second page sums %+v of %d groups, want 25 calls of 4: the data as it is read", second.Sum, second.Groups)
	}
}

func usTotalsInvalid(t *testing.T, s usage.Store) {
	day0 := usage.Day.Start(t0)
	ok := usage.TotalsQuery{From: day0, To: day0.Add(24 * time.Hour)}
	cur := func(parts ...string) string { return strings.Join(parts, ".") }
	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	long := strings.Repeat("x", 257)
	for _, tc := range []struct {
		name  string
		param string
		edit  func(*usage.TotalsQuery)
	}{
		{"no from", "from", func(q *usage.TotalsQuery) { q.From = time.Time{} }},
		{"no to", "to", func(q *usage.TotalsQuery) { q.To = time.Time{} }},
		{"to before from", "to", func(q *usage.TotalsQuery) { q.To = day0.Add(-time.Hour) }},
		{"to at from", "to", func(q *usage.TotalsQuery) { q.To = q.From }},
		{"from before 1970", "from", func(q *usage.TotalsQuery) { q.From = time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC) }},
		{"to after 2200", "to", func(q *usage.TotalsQuery) { q.To = time.Date(2200, 1, 2, 0, 0, 0, 0, time.UTC) }},
		{"401 days", "to", func(q *usage.TotalsQuery) { q.To = day0.Add(401 * 24 * time.Hour) }},
		{"32 days from an hour", "from", func(q *usage.TotalsQuery) { q.From, q.To = day0.Add(time.Hour), day0.Add(32*24*time.Hour) }},
		{"32 days to an hour", "to", func(q *usage.TotalsQuery) { q.To = day0.Add(32*24*time.Hour + time.Hour) }},
		{"a day and a minute from a minute", "from", func(q *usage.TotalsQuery) { q.From = day0.Add(-time.Minute) }},
		{"a day and a second to a second", "to", func(q *usage.TotalsQuery) { q.To = day0.Add(24*time.Hour + time.Second) }},
		{"32 days from a minute", "from", func(q *usage.TotalsQuery) { q.From, q.To = day0.Add(time.Minute), day0.Add(32*24*time.Hour) }},
		{"grouped by key", "group_by", func(q *usage.TotalsQuery) { q.GroupBy = usage.ByKey }},
		{"grouped by plan", "group_by", func(q *usage.TotalsQuery) { q.GroupBy = "plan" }},
		{"ordered by latency", "order", func(q *usage.TotalsQuery) { q.Order = "latency" }},
		{"negative limit", "limit", func(q *usage.TotalsQuery) { q.Limit = -1 }},
		{"limit over the maximum", "limit", func(q *usage.TotalsQuery) { q.Limit = usage.MaxTotalsLimit + 1 }},
		{"NUL in account", "account", func(q *usage.TotalsQuery) { q.Account = "a\x00" }},
		{"invalid UTF-8 in API", "api", func(q *usage.TotalsQuery) { q.API = "\xff" }},
		{"long channel", "channel", func(q *usage.TotalsQuery) { q.Channel = long }},
		{"NUL in outcome", "outcome", func(q *usage.TotalsQuery) { q.Outcome = "ok\x00" }},
		{"garbage cursor", "cursor", func(q *usage.TotalsQuery) { q.Cursor = "garbage" }},
		{"cursor of another grouping", "cursor", func(q *usage.TotalsQuery) { q.Cursor = cur("api", "calls", "5", b64("echo")) }},
		{"cursor of another order", "cursor", func(q *usage.TotalsQuery) { q.Cursor = cur("account", "credits", "5", b64("a")) }},
		{"cursor with a negative figure", "cursor", func(q *usage.TotalsQuery) { q.Cursor = cur("account", "calls", "-5", b64("a")) }},
		{"cursor with a figure too large", "cursor", func(q *usage.TotalsQuery) { q.Cursor = cur("account", "calls", "zzzzzzzzzzzzzzzz", b64("a")) }},
		{"cursor with no group", "cursor", func(q *usage.TotalsQuery) { q.Cursor = cur("account", "calls", "5", "") }},
		{"cursor with bad base64", "cursor", func(q *usage.TotalsQuery) { q.Cursor = cur("account", "calls", "5", "a*b") }},
		{"cursor with padding", "cursor", func(q *usage.TotalsQuery) { q.Cursor = cur("account", "calls", "5", "YQ==") }},
		{"cursor with a leading zero", "cursor", func(q *usage.TotalsQuery) { q.Cursor = cur("account", "calls", "05", b64("a")) }},
		{"cursor with a plus", "cursor", func(q *usage.TotalsQuery) { q.Cursor = cur("account", "calls", "+5", b64("a")) }},
		{"cursor with NUL in its group", "cursor", func(q *usage.TotalsQuery) { q.Cursor = cur("account", "calls", "5", b64("a\x00")) }},
		{"cursor with invalid UTF-8", "cursor", func(q *usage.TotalsQuery) { q.Cursor = cur("account", "calls", "5", b64("\xff")) }},
		{"cursor with a long group", "cursor", func(q *usage.TotalsQuery) { q.Cursor = cur("account", "calls", "5", b64(long)) }},
		{"cursor with five parts", "cursor", func(q *usage.TotalsQuery) { q.Cursor = cur("account", "calls", "5", b64("a"), "x") }},
		{"cursor too long", "cursor", func(q *usage.TotalsQuery) { q.Cursor = strings.Repeat("a", usage.MaxTotalsCursor+1) }},
	} {
		q := ok
		tc.edit(&q)
		_, err := s.Totals(t.Context(), q)
		wantNamed(t, "Totals with "+tc.name, err, store.ErrInvalid, tc.param)
		if qe, isQE := usage.IsQueryError(err); !isQE || qe.Param != tc.param {
			t.Errorf("Totals with %s: error %v, want a QueryError on %q", tc.name, err, tc.param)
		}
	}
	// The longest ranges of each resolution, and a cursor of the right form, are fine.
	for _, q := range []usage.TotalsQuery{
		{From: day0, To: day0.Add(400 * 24 * time.Hour)},
		{From: day0.Add(time.Hour), To: day0.Add(31*24*time.Hour + time.Hour)},
		{From: day0.Add(time.Minute), To: day0.Add(24*time.Hour + time.Minute)},
		{From: day0.Add(time.Second), To: day0.Add(24 * time.Hour)}, // widened: one day from 00:00
		{From: day0, To: day0.Add(time.Hour), Cursor: cur("account", "calls", "5", b64("a"))},
		{From: day0, To: day0.Add(time.Hour), GroupBy: usage.ByOutcome, Order: usage.ByCredits, Cursor: cur("outcome", "credits", "0", b64("ok"))},
	} {
		if _, err := s.Totals(t.Context(), q); err != nil {
			t.Errorf("Totals(%+v): %v", q, err)
		}
	}
}
