// Package usagehttp is the HTTP form of usage queries, shared by the front doors that
// serve them (the time-series form of GET /v1/analytics in package rest, and
// GET /v1/account/usage in package selfservice): the query parameters, the JSON body of
// the answer, and their OpenAPI description. Who may read which usage is the
// service's rule ([accounts.Manager.OwnUsage]); this package only translates.
//
// The query parameters:
//
//   - from, to: the range [from, to), as RFC 3339 instants or dates (midnight UTC),
//     from 1970-01-01 to 2200-01-01. The default to is now, the default from is to
//     less 30 days (interval day), 24 hours (hour) or 1 hour (minute). The service
//     widens the range to whole buckets of the interval (UTC), and it may cover at
//     most 400 days by day, 31 days by hour, 1 day by minute.
//   - interval: minute, hour or day (the default).
//   - by: api, key, channel, outcome or none (the default): one series per group.
//   - api, key, channel: keep only the calls of that API, key id or channel.
//
// The body: {account, from, to, interval, by, key, series: [{group, points: [{start,
// calls, credits, errors: {code: count}, latency_ms: {p50, p95, p99}}]}]}: a point per
// bucket that has calls; errors counts the calls that did not succeed by code
// (refusals such as rate_limited included); latency_ms is null when no call of the
// point ran; key is the key filter, null for none.
package usagehttp

import (
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/usage"
)

// Params are the query parameters of a usage query.
var Params = []string{"from", "to", "interval", "by", "api", "key", "channel"}

// Asks reports whether q has any of the parameters of a usage query.
func Asks(q url.Values) bool { return slices.ContainsFunc(Params, q.Has) }

// invalid is the error of a parameter to fix: a CodeInvalidInput *tollgate.Error whose
// message begins with the parameter's name, wrapping the *usage.QueryError.
func invalid(param, reason string) error {
	qe := &usage.QueryError{Param: param, Reason: reason}
	return &tollgate.Error{Code: tollgate.CodeInvalidInput, Message: param + ": " + reason, Err: qe}
}

// ParseInstant reads a bound of a range, the value of the query parameter param: an
// RFC 3339 instant or a date (midnight UTC), within [usage.MinTime, usage.MaxTime]. Its
// errors are those of [Query]. The admin API's usage route reads its bounds with it too.
func ParseInstant(param, v string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		if t, err = time.Parse(time.DateOnly, v); err != nil {
			return time.Time{}, invalid(param, fmt.Sprintf("%.40q is not a time: use RFC 3339 (2030-01-15T12:00:00Z) or a date (2030-01-15)", v))
		}
	}
	if t.Before(usage.MinTime) || t.After(usage.MaxTime) {
		return time.Time{}, invalid(param, fmt.Sprintf("%.40q is out of range: use a time from 1970-01-01 to 2200-01-01", v))
	}
	return t.UTC(), nil
}

// Query reads the query parameters of a usage query (see the package comment), with
// now as the default end of the range. It leaves Account empty: the service sets it to
// the caller's. Its errors are CodeInvalidInput *tollgate.Error values whose message
// begins with the parameter's name (they wrap a *usage.QueryError); the checks of the
// range's length and of the text fields are the service's.
func Query(q url.Values, now time.Time) (usage.Query, error) {
	uq := usage.Query{Interval: usage.Day, API: q.Get("api"), Key: q.Get("key"), Channel: q.Get("channel")}
	var err error
	if v := q.Get("interval"); v != "" {
		if uq.Interval, err = usage.ParseResolution(v); err != nil {
			return uq, invalid("interval", fmt.Sprintf("%.40q is not an interval: use minute, hour or day", v))
		}
	}
	if uq.By, err = usage.ParseDimension(q.Get("by")); err != nil {
		return uq, invalid("by", fmt.Sprintf("%.40q is not a grouping: use api, key, channel, outcome or none", q.Get("by")))
	}
	uq.To = now
	if v := q.Get("to"); v != "" {
		if uq.To, err = ParseInstant("to", v); err != nil {
			return uq, err
		}
	}
	span := 30 * 24 * time.Hour
	switch uq.Interval {
	case usage.Hour:
		span = 24 * time.Hour
	case usage.Minute:
		span = time.Hour
	}
	uq.From = uq.To.Add(-span)
	if v := q.Get("from"); v != "" {
		if uq.From, err = ParseInstant("from", v); err != nil {
			return uq, err
		}
	}
	return uq, nil
}

// Body is the JSON body of the answer to a usage query.
type Body struct {
	Account  string    `json:"account"`
	From     time.Time `json:"from"`
	To       time.Time `json:"to"`
	Interval string    `json:"interval"`
	By       string    `json:"by"`
	// Key is the key filter; null for none.
	Key    *string  `json:"key"`
	Series []Series `json:"series"`
}

// Series is the usage of one group.
type Series struct {
	Group  string  `json:"group"`
	Points []Point `json:"points"`
}

// Point is the usage of one group in one bucket.
type Point struct {
	Start   time.Time        `json:"start"`
	Calls   int64            `json:"calls"`
	Credits int64            `json:"credits"`
	Errors  map[string]int64 `json:"errors"`
	// Latency is null when no call of the point ran.
	Latency *Latency `json:"latency_ms"`
}

// Latency holds the latency percentiles of a point, in milliseconds.
type Latency struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
}

// ms returns d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// NewBody returns the body of res.
func NewBody(res usage.Result) Body {
	rq := res.Query
	by := string(rq.By)
	if by == "" {
		by = "none"
	}
	out := Body{Account: rq.Account, From: rq.From, To: rq.To, Interval: rq.Interval.String(), By: by,
		Series: make([]Series, 0, len(res.Series))}
	if rq.Key != "" {
		out.Key = &rq.Key
	}
	for _, s := range res.Series {
		us := Series{Group: s.Group, Points: make([]Point, 0, len(s.Points))}
		for _, pt := range s.Points {
			up := Point{Start: pt.Start, Calls: pt.Calls, Credits: pt.Credits, Errors: pt.Errors}
			if up.Errors == nil {
				up.Errors = map[string]int64{}
			}
			if pt.P99 > 0 {
				up.Latency = &Latency{P50: ms(pt.P50), P95: ms(pt.P95), P99: ms(pt.P99)}
			}
			us.Points = append(us.Points, up)
		}
		out.Series = append(out.Series, us)
	}
	return out
}
