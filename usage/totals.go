package usage

import (
	"cmp"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/store"
)

// ByAccount groups the totals of a [TotalsQuery] by account. It is not a grouping of
// [Query], which reads one account.
const ByAccount Dimension = "account"

// An Order is what a ranking of totals is ordered by, largest first.
type Order string

// The orders.
const (
	ByCalls   Order = "calls"
	ByCredits Order = "credits"
)

// Bounds of a [TotalsQuery].
const (
	// DefaultTotalsLimit is the number of groups of a page when the query sets none;
	// MaxTotalsLimit the most it may ask for.
	DefaultTotalsLimit = 50
	MaxTotalsLimit     = 200
	// MaxTotalsCursor is the length of the longest cursor a page returns.
	MaxTotalsCursor = 400
)

// A TotalsQuery selects usage across accounts: the calls, credits and errors of the
// range [From, To), summed per group (an account, an API, a channel or an outcome) and
// ranked, largest first, by calls or by credits, ties by the group's value (byte
// order), a page at a time. It is the operator's view of usage; [Query] is an account's
// time series.
//
// The range covers whole minutes: From moves down to the start of its minute, To up to
// the end of the minute of the last instant before it. It is read from the coarsest
// buckets that cover it exactly (see [TotalsQuery.Resolution]): a range that begins and
// ends at midnight UTC from the day buckets, on the hour from the hour buckets, else
// from the minute buckets. Each resolution bounds the range as [Query] does: at most
// [MaxDayRange] (400 days) at midnight, [MaxHourRange] (31 days) on the hour,
// [MaxMinuteRange] (1 day) on other minutes. Buckets that the host's retention deleted
// ([Retention]) count for nothing: a range of last month should begin and end at
// midnight UTC.
//
// Paging is by position: a page's Next encodes the figure and the group of its last
// row, and the next page holds the groups that rank after that position when it is
// read. A page reflects the data at the time it is read: calls recorded between two
// pages move groups in the ranking, so that a group may then appear on two pages or on
// none. Every page sums the whole selection again; it is as costly as the first.
type TotalsQuery struct {
	// From and To bound the range, [From, To). Both are required.
	From, To time.Time
	// GroupBy is what the totals are summed per: [ByAccount] (the default), [ByAPI],
	// [ByChannel] or [ByOutcome].
	GroupBy Dimension
	// Order is what the groups are ranked by: [ByCalls] (the default) or [ByCredits].
	Order Order
	// Account, API, Channel and Outcome, when set, keep only the records with that
	// account, API id, channel or outcome ([OK] or an error code's name).
	Account, API, Channel, Outcome string
	// Limit is the most groups a page holds: 0 means [DefaultTotalsLimit]; at most
	// [MaxTotalsLimit].
	Limit int
	// Cursor continues a ranking: the Next of the page before, of a query of the same
	// GroupBy and Order. Empty starts at the top.
	Cursor string
}

// A TotalsPage is a page of the answer to a [TotalsQuery].
type TotalsPage struct {
	// Query is the query answered, normalized (see [TotalsQuery.Normalized]).
	Query TotalsQuery
	// Resolution is that of the buckets the range was read from.
	Resolution Resolution
	// Rows are the page's groups, in the order of the ranking.
	Rows []GroupTotals
	// Sum holds the totals of the whole selection, every group together; Groups is the
	// number of groups that have calls (on every page, not only this one).
	Sum    Totals
	Groups int64
	// Next is the cursor of the next page; empty when this page is the last.
	Next string
}

// Totals are the figures of a selection of calls.
type Totals struct {
	// Calls counts the calls, refused ones included; Credits sums what they were
	// charged; Errors counts those that did not succeed (an outcome other than [OK]).
	Calls, Credits, Errors int64
}

// GroupTotals are the totals of one group.
type GroupTotals struct {
	// Group is the group's value: an account id, an API id, a channel or an outcome.
	Group string
	Totals
}

// value returns the figure that o ranks by.
func (o Order) value(t *Totals) int64 {
	if o == ByCredits {
		return t.Credits
	}
	return t.Calls
}

// totalsGrouping reports whether d is a grouping of a TotalsQuery.
func totalsGrouping(d Dimension) bool {
	return d == ByAccount || d == ByAPI || d == ByChannel || d == ByOutcome
}

// Normalized checks q and returns it with its defaults set (GroupBy, Order, Limit) and
// its range moved out to whole minutes, in UTC. Its errors are [*QueryError]s wrapping
// store.ErrInvalid, whose Param names the field as the admin API's query parameter
// does: from, to, group_by, order, account, api, channel, outcome, limit or cursor.
func (q TotalsQuery) Normalized() (TotalsQuery, error) {
	q.GroupBy = cmp.Or(q.GroupBy, ByAccount)
	q.Order = cmp.Or(q.Order, ByCalls)
	if q.Limit == 0 {
		q.Limit = DefaultTotalsLimit
	}
	if err := checkRange(q.From, q.To); err != nil {
		return q, err
	}
	switch {
	case !totalsGrouping(q.GroupBy):
		return q, &QueryError{Param: "group_by", Reason: fmt.Sprintf("unknown grouping %.40q: use account, api, channel or outcome", q.GroupBy)}
	case q.Order != ByCalls && q.Order != ByCredits:
		return q, &QueryError{Param: "order", Reason: fmt.Sprintf("unknown order %.40q: use calls or credits", q.Order)}
	case q.Limit < 0 || q.Limit > MaxTotalsLimit:
		return q, &QueryError{Param: "limit", Reason: fmt.Sprintf("give 1 to %d groups a page, or 0 for %d", MaxTotalsLimit, DefaultTotalsLimit)}
	}
	for _, f := range []struct{ param, s string }{
		{"account", q.Account}, {"api", q.API}, {"channel", q.Channel}, {"outcome", q.Outcome},
	} {
		if err := store.CheckText(f.param, f.s); err != nil || len(f.s) > maxText {
			return q, &QueryError{Param: f.param, Reason: "use text of at most 256 bytes, valid UTF-8 without NUL"}
		}
	}
	q.From, q.To = Minute.cover(q.From, q.To)
	res := q.Resolution()
	if d := q.To.Sub(q.From); d > maxRange(res) {
		return q, rangeTooLong(q, res, d)
	}
	if _, _, err := q.position(); err != nil {
		return q, err
	}
	return q, nil
}

// maxText bounds the text fields of queries, in bytes.
const maxText = 256

// rangeTooLong is the error of a range of d, read from buckets of res, that is longer
// than res allows: it names the bound that keeps coarser buckets from being read.
func rangeTooLong(q TotalsQuery, res Resolution, d time.Duration) error {
	if res == Day {
		return &QueryError{Param: "to", Reason: fmt.Sprintf("the range covers %s; it may cover at most %s", days(d), days(MaxDayRange))}
	}
	// The buckets that could cover the range: days past the longest range of hours.
	coarser, finer, needs := Day, MaxHourRange, "begin and end at midnight UTC"
	if d <= MaxHourRange {
		coarser, finer, needs = Hour, MaxMinuteRange, "begin and end on the hour (UTC)"
	}
	param := "to"
	if !q.From.Equal(coarser.Start(q.From)) {
		param = "from"
	}
	return &QueryError{Param: param, Reason: fmt.Sprintf(
		"the range covers %s: a range longer than %s must %s, so that it is read from the %s buckets (ranges up to %s may begin and end on any minute, up to %s on any hour)",
		days(d), days(finer), needs, coarser, days(MaxMinuteRange), days(MaxHourRange))}
}

// Resolution returns the resolution of the coarsest buckets that cover the range of
// q, normalized, exactly: [Day] when From and To are at midnight UTC, [Hour] when they
// are on the hour, else [Minute].
func (q TotalsQuery) Resolution() Resolution {
	for _, res := range []Resolution{Day, Hour} {
		if q.From.Equal(res.Start(q.From)) && q.To.Equal(res.Start(q.To)) {
			return res
		}
	}
	return Minute
}

// A TotalsPosition is where a ranking stands: the figure it ranks by and the group of
// the last row a page returned.
type TotalsPosition struct {
	Value int64
	Group string
}

// Precedes reports whether p comes before the group g whose figure is v in a
// ranking: larger figures first, equal ones by group, in byte order.
func (p TotalsPosition) Precedes(v int64, g string) bool {
	return v < p.Value || v == p.Value && g > p.Group
}

// cursor encodes p as the cursor of a ranking of q's grouping and order:
// "group_by.order.value.group", the value in base 36 and the group in unpadded
// base64url, so that a cursor of another ranking is refused rather than misread.
func (p TotalsPosition) cursor(q *TotalsQuery) string {
	return string(q.GroupBy) + "." + string(q.Order) + "." + strconv.FormatInt(p.Value, 36) + "." +
		base64.RawURLEncoding.EncodeToString([]byte(p.Group))
}

// errBadCursor is the error of a cursor that no page of the ranking returned.
var errBadCursor = &QueryError{Param: "cursor",
	Reason: "it is not one a page of this ranking returned: pass the next of the page before as it is, with the same group_by and order"}

// position returns the position q.Cursor names (ok false for none), or errBadCursor.
func (q *TotalsQuery) position() (p TotalsPosition, ok bool, err error) {
	if q.Cursor == "" {
		return p, false, nil
	}
	if len(q.Cursor) > MaxTotalsCursor {
		return p, false, errBadCursor
	}
	parts := strings.Split(q.Cursor, ".")
	if len(parts) != 4 || parts[0] != string(q.GroupBy) || parts[1] != string(q.Order) {
		return p, false, errBadCursor
	}
	v, err1 := strconv.ParseInt(parts[2], 36, 64)
	g, err2 := base64.RawURLEncoding.DecodeString(parts[3])
	p = TotalsPosition{Value: v, Group: string(g)}
	if err1 != nil || err2 != nil || v < 0 || p.Group == "" || len(p.Group) > maxText ||
		store.CheckText("cursor", p.Group) != nil || p.cursor(q) != q.Cursor {
		return TotalsPosition{}, false, errBadCursor
	}
	return p, true, nil
}

// A Ranking answers a [TotalsQuery]: a helper for store implementations. A store that
// sums in process feeds it the rows of the query's resolution ([Ranking.Add]) and
// takes the page ([Ranking.Page]); one that ranks itself (in SQL) reads the query's
// normalized fields, resolution and position, and builds the page of the groups it
// found ([Ranking.PageOf]). Create it with [NewRanking].
type Ranking struct {
	q     TotalsQuery
	res   Resolution
	after TotalsPosition
	from  bool // after is set: the query continues a ranking
	sums  map[string]*Totals
}

// NewRanking returns a Ranking of q, which it normalizes (see
// [TotalsQuery.Normalized]).
func NewRanking(q TotalsQuery) (*Ranking, error) {
	q, err := q.Normalized()
	if err != nil {
		return nil, err
	}
	p, ok, _ := q.position() // checked by Normalized
	return &Ranking{q: q, res: q.Resolution(), after: p, from: ok, sums: make(map[string]*Totals)}, nil
}

// Query returns the ranking's normalized query.
func (r *Ranking) Query() TotalsQuery { return r.q }

// Resolution returns the resolution of the buckets the query reads.
func (r *Ranking) Resolution() Resolution { return r.res }

// After returns the position the query's cursor names; ok is false on the first page.
func (r *Ranking) After() (p TotalsPosition, ok bool) { return r.after, r.from }

// Group returns the value of row's group in the ranking.
func (r *Ranking) Group(row *Row) string {
	switch r.q.GroupBy {
	case ByAPI:
		return row.API
	case ByChannel:
		return row.Channel
	case ByOutcome:
		return row.Outcome
	}
	return row.Account
}

// Add adds row, a row of the ranking's resolution, to its group if the query selects
// it: its bucket in the range, and every filter met.
func (r *Ranking) Add(row *Row) {
	q := &r.q
	if row.Bucket.Before(q.From) || !row.Bucket.Before(q.To) ||
		q.Account != "" && row.Account != q.Account || q.API != "" && row.API != q.API ||
		q.Channel != "" && row.Channel != q.Channel || q.Outcome != "" && row.Outcome != q.Outcome {
		return
	}
	g := r.Group(row)
	t := r.sums[g]
	if t == nil {
		t = &Totals{}
		r.sums[g] = t
	}
	t.Calls += row.Calls
	t.Credits += row.Credits
	if row.Outcome != OK {
		t.Errors += row.Calls
	}
}

// Page returns the page of the groups added.
func (r *Ranking) Page() TotalsPage {
	var sum Totals
	var rows []GroupTotals
	for g, t := range r.sums {
		sum.Calls += t.Calls
		sum.Credits += t.Credits
		sum.Errors += t.Errors
		if !r.from || r.after.Precedes(r.q.Order.value(t), g) {
			rows = append(rows, GroupTotals{Group: g, Totals: *t})
		}
	}
	r.sort(rows)
	return r.PageOf(rows[:min(len(rows), r.q.Limit+1)], sum, int64(len(r.sums)))
}

// sort sorts rows in the order of the ranking.
func (r *Ranking) sort(rows []GroupTotals) {
	slices.SortFunc(rows, func(a, b GroupTotals) int {
		return cmp.Or(cmp.Compare(r.q.Order.value(&b.Totals), r.q.Order.value(&a.Totals)), strings.Compare(a.Group, b.Group))
	})
}

// PageOf returns the page of rows, the groups that rank after the query's position, in
// any order, at most the query's Limit plus one (a row beyond the Limit says that
// another page follows); sum holds the totals of the whole selection, and groups the
// number of its groups.
func (r *Ranking) PageOf(rows []GroupTotals, sum Totals, groups int64) TotalsPage {
	rows = slices.Clone(rows)
	r.sort(rows)
	page := TotalsPage{Query: r.q, Resolution: r.res, Rows: rows, Sum: sum, Groups: groups}
	if len(rows) > r.q.Limit {
		page.Rows = rows[:r.q.Limit]
		last := &page.Rows[len(page.Rows)-1]
		page.Next = TotalsPosition{Value: r.q.Order.value(&last.Totals), Group: last.Group}.cursor(&r.q)
	}
	if page.Rows == nil {
		page.Rows = []GroupTotals{}
	}
	return page
}
