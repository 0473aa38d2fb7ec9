package usage

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/store"
)

// A Dimension is what a query groups its series by.
type Dimension string

// The dimensions.
const (
	// ByNone makes one series of the whole selection.
	ByNone Dimension = ""
	ByAPI  Dimension = "api"
	ByKey  Dimension = "key"
	// ByChannel groups by how calls arrived: rest, graphql, mcp, batch.
	ByChannel Dimension = "channel"
	// ByOutcome groups by outcome: ok and each error code.
	ByOutcome Dimension = "outcome"
)

// ParseDimension returns the dimension with the given name; "none" and "" are ByNone.
func ParseDimension(name string) (Dimension, error) {
	switch d := Dimension(name); d {
	case ByAPI, ByKey, ByChannel, ByOutcome:
		return d, nil
	case ByNone, "none":
		return ByNone, nil
	}
	return "", &QueryError{Param: "by", Reason: fmt.Sprintf("unknown grouping %.40q: use api, key, channel, outcome or none", name)}
}

// Bounds of a query: the longest range per interval, and the most rows a store returns.
const (
	MaxMinuteRange = 24 * time.Hour
	MaxHourRange   = 31 * 24 * time.Hour
	MaxDayRange    = 400 * 24 * time.Hour
	// MaxRows is the most rows [Store.Sum] returns (points times outcomes); a query
	// that selects more is refused: narrow its range, coarsen its interval or filter.
	MaxRows = 100_000
)

// maxRange returns the longest range of a query of interval res.
func maxRange(res Resolution) time.Duration {
	switch res {
	case Minute:
		return MaxMinuteRange
	case Hour:
		return MaxHourRange
	}
	return MaxDayRange
}

// A Query selects usage: an account's buckets of one interval over a range, optionally
// filtered, grouped by one dimension. It covers whole buckets: from the bucket that
// holds From to the one that holds the last instant before To (buckets are aligned in
// UTC). A query reads one account; an operator reads several accounts with one query
// each.
type Query struct {
	// Account is the account whose usage is read. It is required.
	Account string
	// From and To bound the range, [From, To). Both are required.
	From, To time.Time
	// Interval is the width of the points: [Minute], [Hour] or [Day]. The range may
	// be at most [MaxMinuteRange], [MaxHourRange] or [MaxDayRange] long.
	Interval Resolution
	// By is what the series are grouped by; ByNone makes one series.
	By Dimension
	// API, Key and Channel, when set, keep only the records with that API, key id or
	// channel.
	API, Key, Channel string
}

// QueryError is a query that cannot be answered: Param names the field (as the REST
// query parameter: from, to, interval, by, api, key, channel, account; for a
// [TotalsQuery], as the admin API's: from, to, group_by, order, account, api, channel,
// outcome, limit, cursor) and Reason says what to fix. It wraps store.ErrInvalid.
type QueryError struct {
	Param, Reason string
}

func (e *QueryError) Error() string { return "usage: " + e.Param + ": " + e.Reason }

// Unwrap returns store.ErrInvalid.
func (e *QueryError) Unwrap() error { return store.ErrInvalid }

// Normalized checks q (From and To within [MinTime, MaxTime], so that the length of
// any range is a Duration) and returns it with From and To moved out to whole buckets
// of its interval (From down to the start of its bucket, To up to the end of the
// bucket of the last instant before it), in UTC. Its errors are [*QueryError].
func (q Query) Normalized() (Query, error) {
	switch {
	case q.Account == "":
		return q, &QueryError{Param: "account", Reason: "a query needs an account"}
	case !q.Interval.valid():
		return q, &QueryError{Param: "interval", Reason: "use minute, hour or day"}
	}
	if err := checkRange(q.From, q.To); err != nil {
		return q, err
	}
	if _, err := ParseDimension(string(q.By)); err != nil {
		return q, err
	}
	for _, f := range []struct{ param, s string }{
		{"account", q.Account}, {"api", q.API}, {"key", q.Key}, {"channel", q.Channel},
	} {
		if err := store.CheckText(f.param, f.s); err != nil || len(f.s) > 256 {
			return q, &QueryError{Param: f.param, Reason: "use text of at most 256 bytes, valid UTF-8 without NUL"}
		}
	}
	q.From, q.To = q.Interval.cover(q.From, q.To)
	if d, limit := q.To.Sub(q.From), maxRange(q.Interval); d > limit {
		return q, &QueryError{Param: "to", Reason: fmt.Sprintf("the range covers %s; with interval %s it may cover at most %s: shorten it or use a coarser interval",
			days(d), q.Interval, days(limit))}
	}
	return q, nil
}

// checkRange checks the bounds of a range [from, to): both set, within [MinTime,
// MaxTime], to after from.
func checkRange(from, to time.Time) error {
	switch {
	case from.IsZero():
		return &QueryError{Param: "from", Reason: "a query needs the start of its range"}
	case to.IsZero():
		return &QueryError{Param: "to", Reason: "a query needs the end of its range"}
	case from.Before(MinTime) || !from.Before(MaxTime):
		return &QueryError{Param: "from", Reason: outOfRange}
	case to.Before(MinTime) || to.After(MaxTime):
		return &QueryError{Param: "to", Reason: outOfRange}
	case !to.After(from):
		return &QueryError{Param: "to", Reason: fmt.Sprintf("the end of the range (%s) must be after its start (%s)",
			to.UTC().Format(time.RFC3339), from.UTC().Format(time.RFC3339))}
	}
	return nil
}

// cover returns the range [from, to) moved out to whole buckets of r, in UTC: from
// down to the start of its bucket, to up to the end of the bucket of the last instant
// before it.
func (r Resolution) cover(from, to time.Time) (time.Time, time.Time) {
	end := r.Start(to)
	if end.Before(to.UTC()) {
		end = end.Add(time.Duration(r))
	}
	return r.Start(from), end
}

// The bounds of the instants a query may name: [MinTime, MaxTime].
var (
	MinTime = time.Date(1970, time.January, 1, 0, 0, 0, 0, time.UTC)
	MaxTime = time.Date(2200, time.January, 1, 0, 0, 0, 0, time.UTC)
)

// outOfRange is the reason of a bound of a range outside [MinTime, MaxTime].
const outOfRange = "use a time from 1970-01-01 to 2200-01-01"

// days writes d in days, hours and minutes when it is a whole number of minutes of
// at least a day: "1 day", "32 days", "35 days 23 hours", "30 days 12 hours 34 minutes".
func days(d time.Duration) string {
	if d < 24*time.Hour || d%time.Minute != 0 {
		return d.String()
	}
	var parts []string
	for _, u := range []struct {
		n    time.Duration
		name string
	}{{d / (24 * time.Hour), "day"}, {d % (24 * time.Hour) / time.Hour, "hour"}, {d % time.Hour / time.Minute, "minute"}} {
		switch {
		case u.n == 1:
			parts = append(parts, "1 "+u.name)
		case u.n > 1:
			parts = append(parts, fmt.Sprintf("%d %ss", u.n, u.name))
		}
	}
	return strings.Join(parts, " ")
}

// ErrTooManyRows reports a query that selects more than [MaxRows] rows. It wraps
// store.ErrInvalid.
var ErrTooManyRows = &QueryError{Param: "to", Reason: fmt.Sprintf(
	"the query selects more than %d points: shorten the range, use a coarser interval, or filter by api, key or channel", MaxRows)}

// A Summer sums rows of a store into the rows that [Store.Sum] returns for a query: a
// helper for store implementations, which feed it the rows of q's interval, range and
// filters (in any order, and unfiltered by account, range or filters if they like: it
// checks them again). Create it with [NewSummer].
type Summer struct {
	q    Query
	rows map[group]*Row
}

// NewSummer returns a Summer for q, which it normalizes (see [Query.Normalized]).
func NewSummer(q Query) (*Summer, error) {
	q, err := q.Normalized()
	if err != nil {
		return nil, err
	}
	return &Summer{q: q, rows: make(map[group]*Row)}, nil
}

// Query returns the summer's normalized query.
func (s *Summer) Query() Query { return s.q }

// Add adds r, a row of the query's interval, if the query selects it. It returns
// [ErrTooManyRows] once the sum has more than MaxRows rows.
func (s *Summer) Add(r *Row) error {
	q := &s.q
	if r.Account != q.Account || r.Bucket.Before(q.From) || !r.Bucket.Before(q.To) ||
		q.API != "" && r.API != q.API || q.Key != "" && r.Key != q.Key || q.Channel != "" && r.Channel != q.Channel {
		return nil
	}
	g := group{bucket: r.Bucket.UnixNano(), account: r.Account, outcome: r.Outcome}
	switch q.By {
	case ByAPI:
		g.api = r.API
	case ByKey:
		g.key = r.Key
	case ByChannel:
		g.channel = r.Channel
	}
	if sum, ok := s.rows[g]; ok {
		sum.add(r)
		return nil
	}
	if len(s.rows) >= MaxRows {
		return ErrTooManyRows
	}
	s.rows[g] = &Row{Bucket: r.Bucket, Account: g.account, Key: g.key, API: g.api, Channel: g.channel, Outcome: g.outcome,
		Calls: r.Calls, Credits: r.Credits, Latency: r.Latency, Last: r.Last}
	return nil
}

// Rows returns the sums.
func (s *Summer) Rows() []Row {
	out := make([]Row, 0, len(s.rows))
	for _, r := range s.rows {
		out = append(out, *r)
	}
	return out
}

// A Result is the answer to a query: one series per group, in the order of their group.
type Result struct {
	// Query is the query answered, normalized (see [Query.Normalized]).
	Query Query
	// Series holds a series per group that has calls; one series (Group "") for
	// ByNone, none when nothing was called.
	Series []Series
}

// A Series is the usage of one group over the range.
type Series struct {
	// Group is the group's value: an API id, a key id, a channel or an outcome; empty
	// for ByNone (and for a session's calls grouped by key).
	Group string
	// Points are the buckets that have calls, oldest first; buckets without calls are
	// left out.
	Points []Point
}

// A Point is the usage of one group in one bucket.
type Point struct {
	// Start is the start of the bucket.
	Start time.Time
	// Calls counts the calls, refused ones included; Credits sums what they were
	// charged.
	Calls, Credits int64
	// Errors counts the calls that did not succeed, by error code; nil for none.
	Errors map[string]int64
	// P50, P95 and P99 are percentiles of the latency of the calls that ran, within
	// [QuantileError]; zero when none ran.
	P50, P95, P99 time.Duration
}

// Run answers q from s: it normalizes q, reads its sums with [Store.Sum] and makes the
// series. Its errors wrap store.ErrInvalid for a query to fix (a [*QueryError]), or are
// the store's.
func Run(ctx context.Context, s Store, q Query) (Result, error) {
	nq, err := q.Normalized()
	if err != nil {
		return Result{}, err
	}
	rows, err := s.Sum(ctx, nq)
	if err != nil {
		return Result{}, err
	}
	return Build(nq, rows), nil
}

// Build makes the series of q (normalized) from the rows [Store.Sum] returned for it.
func Build(q Query, rows []Row) Result {
	type point struct {
		Point
		latency Histogram
	}
	groups := make(map[string]map[int64]*point)
	for i := range rows {
		r := &rows[i]
		g := ""
		switch q.By {
		case ByAPI:
			g = r.API
		case ByKey:
			g = r.Key
		case ByChannel:
			g = r.Channel
		case ByOutcome:
			g = r.Outcome
		}
		pts := groups[g]
		if pts == nil {
			pts = make(map[int64]*point)
			groups[g] = pts
		}
		p := pts[r.Bucket.UnixNano()]
		if p == nil {
			p = &point{Point: Point{Start: r.Bucket.UTC()}}
			pts[r.Bucket.UnixNano()] = p
		}
		p.Calls += r.Calls
		p.Credits += r.Credits
		p.latency.Merge(&r.Latency)
		if r.Outcome != OK {
			if p.Errors == nil {
				p.Errors = make(map[string]int64)
			}
			p.Errors[r.Outcome] += r.Calls
		}
	}
	res := Result{Query: q, Series: make([]Series, 0, len(groups))}
	for g, pts := range groups {
		s := Series{Group: g, Points: make([]Point, 0, len(pts))}
		for _, p := range pts {
			p.P50, p.P95, p.P99 = p.latency.Quantile(0.50), p.latency.Quantile(0.95), p.latency.Quantile(0.99)
			s.Points = append(s.Points, p.Point)
		}
		slices.SortFunc(s.Points, func(a, b Point) int { return a.Start.Compare(b.Start) })
		res.Series = append(res.Series, s)
	}
	slices.SortFunc(res.Series, func(a, b Series) int { return cmp.Compare(a.Group, b.Group) })
	return res
}

// IsQueryError reports whether err is a query to fix, and returns it.
func IsQueryError(err error) (*QueryError, bool) {
	var qe *QueryError
	ok := errors.As(err, &qe)
	return qe, ok
}
