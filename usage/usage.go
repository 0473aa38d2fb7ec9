// Package usage keeps the usage statistics of Tollgate: one [Record] for every settled
// call (its account, key, API, channel, outcome, credits and duration), aggregated in
// process by a [Recorder] into per-minute [Row]s, flushed in batches to a [Store] that
// adds them to buckets of a minute, an hour and a day, and read back by [Run] as time
// series of calls, credits, errors by code and latency percentiles of one account, or
// by [Store.Totals] as the totals of a range across accounts, per account, API, channel
// or outcome, ranked.
//
// Usage is statistics. The ledger (billing) stays the record of money: a flush the store
// cannot take is retried with bounded memory and, past that bound, dropped and counted
// ([Recorder.Dropped]), never charged or refunded.
//
// Buckets are aligned in UTC: a minute, an hour, a day from midnight UTC. The store adds
// each minute row to its minute, hour and day bucket in one transaction, so the hour and
// day buckets are exact sums of the minutes (the latency histograms too: their buckets
// are fixed, see [Histogram]), and flushes from several instances add up.
//
// Stores never read the clock: rows carry their bucket, and retention ([Store.Prune])
// is given the instant before which buckets go, per resolution, as the host decides.
// Implementations are in store/memory and store/postgres; every implementation runs
// storetest.TestUsageStore.
package usage

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/tollgate-dev/tollgate/store"
)

// OK is the Outcome of a call that succeeded. Every other outcome is the name of the
// error code the call ended with (tollgate.Code's String: "rejected", "timeout",
// "rate_limited", ...), and counts as an error of that code.
const OK = "ok"

// A Record is one API invocation of a settled call: a call to several APIs (a GraphQL
// query) makes one record per API.
type Record struct {
	// At is when the call was admitted (or refused).
	At time.Time
	// Account is the caller's account.
	Account string
	// Key is the id of the caller's key (for a session, of the key that started it);
	// empty for a session that no key started. Never a key value.
	Key string
	// API is the id of the API called.
	API string
	// Channel is how the call arrived: the name of its auth.Channel ("rest",
	// "graphql", "mcp", or "batch" for each item of a batch request), or "other" for a
	// call made without one (as package event names it).
	Channel string
	// Outcome is [OK] or the name of the error code the invocation ended with.
	Outcome string
	// Credits is what the invocation was charged, after any refund.
	Credits int64
	// Duration is how long the API ran.
	Duration time.Duration
	// Refused reports a call refused before its API ran (a limit of the plan, an
	// invalid input): it counts as a call and an error, but has no latency.
	Refused bool
}

// A Resolution is the width of a bucket.
type Resolution time.Duration

// The resolutions the stores keep.
const (
	Minute = Resolution(time.Minute)
	Hour   = Resolution(time.Hour)
	Day    = Resolution(24 * time.Hour)
)

// Resolutions lists the resolutions, finest first.
var Resolutions = []Resolution{Minute, Hour, Day}

// String returns the resolution's name: "minute", "hour" or "day".
func (r Resolution) String() string {
	switch r {
	case Minute:
		return "minute"
	case Hour:
		return "hour"
	case Day:
		return "day"
	}
	return fmt.Sprintf("resolution(%s)", time.Duration(r))
}

// ParseResolution returns the resolution with the given name.
func ParseResolution(name string) (Resolution, error) {
	for _, r := range Resolutions {
		if r.String() == name {
			return r, nil
		}
	}
	return 0, fmt.Errorf("usage: unknown interval %q: use minute, hour or day: %w", name, store.ErrInvalid)
}

// Start returns the start of the bucket of resolution r that holds t, in UTC.
func (r Resolution) Start(t time.Time) time.Time { return t.UTC().Truncate(time.Duration(r)) }

// valid reports whether r is one of [Resolutions].
func (r Resolution) valid() bool { return slices.Contains(Resolutions, r) }

// A Row is the sum of the records of one bucket and one group: an account, key, API,
// channel and outcome.
type Row struct {
	// Bucket is the start of the row's bucket.
	Bucket time.Time
	// The group the row sums. In the rows [Store.Sum] returns, the dimensions that the
	// query does not group by are empty.
	Account, Key, API, Channel, Outcome string
	// Calls is the number of records; Credits the sum of their credits.
	Calls, Credits int64
	// Latency holds the durations of the records that ran (not Refused).
	Latency Histogram
	// Last is the latest At of the records.
	Last time.Time
}

// group is a row's identity: its bucket and group.
type group struct {
	bucket                              int64 // Unix nanoseconds
	account, key, api, channel, outcome string
}

func (r *Row) group() group {
	return group{r.Bucket.UnixNano(), r.Account, r.Key, r.API, r.Channel, r.Outcome}
}

// add adds o's figures to r.
func (r *Row) add(o *Row) {
	r.Calls += o.Calls
	r.Credits += o.Credits
	r.Latency.Merge(&o.Latency)
	if o.Last.After(r.Last) {
		r.Last = o.Last
	}
}

// Validate returns an error wrapping store.ErrInvalid that says what to fix, unless r
// can be stored: a bucket, an account, an API, a channel and an outcome set, every text
// valid UTF-8 without NUL bytes (store.CheckText), Calls at least 1, no negative figure.
func (r *Row) Validate() error {
	switch {
	case r.Bucket.IsZero():
		return fmt.Errorf("usage: row has no bucket: %w", store.ErrInvalid)
	case r.Account == "":
		return fmt.Errorf("usage: row has no account: %w", store.ErrInvalid)
	case r.API == "":
		return fmt.Errorf("usage: row has no API: %w", store.ErrInvalid)
	case r.Channel == "":
		return fmt.Errorf("usage: row has no channel: %w", store.ErrInvalid)
	case r.Outcome == "":
		return fmt.Errorf("usage: row has no outcome: %w", store.ErrInvalid)
	case r.Calls < 1 || r.Credits < 0:
		return fmt.Errorf("usage: row has %d calls and %d credits: want at least one call and no negative credits: %w", r.Calls, r.Credits, store.ErrInvalid)
	}
	for _, n := range r.Latency {
		if n < 0 {
			return fmt.Errorf("usage: row has a negative latency count: %w", store.ErrInvalid)
		}
	}
	for _, f := range []struct{ what, s string }{
		{"account", r.Account}, {"key", r.Key}, {"API", r.API}, {"channel", r.Channel}, {"outcome", r.Outcome},
	} {
		if err := store.CheckText("usage: row's "+f.what, f.s); err != nil {
			return err
		}
	}
	return nil
}

// Rollup returns rows summed into the buckets of resolution res: rows of the same
// bucket and group become one. The result is sorted by bucket, then account, key, API,
// channel and outcome, the order in which stores write rows (so that concurrent
// flushes lock them in the same order). rows are not changed.
func Rollup(rows []Row, res Resolution) []Row {
	out := make([]Row, 0, len(rows))
	at := make(map[group]int, len(rows))
	for i := range rows {
		r := rows[i]
		r.Bucket = res.Start(r.Bucket)
		g := r.group()
		if j, ok := at[g]; ok {
			out[j].add(&r)
			continue
		}
		at[g] = len(out)
		out = append(out, r)
	}
	slices.SortFunc(out, compareRows)
	return out
}

// RollupBy returns rows rolled up to res, as [Rollup] does, with only the dimension keep
// ([ByAPI] or [ByKey]) kept besides the account and the outcome: the key and channel of
// every row are emptied for ByAPI, the API and channel for ByKey, and rows that then
// share a bucket and group are summed. A store may keep such narrower rows beside the
// full ones, so that a query that groups or filters by one dimension only reads a few
// rows per bucket instead of one per key, API, channel and outcome. For any other keep,
// it returns Rollup(rows, res).
func RollupBy(rows []Row, res Resolution, keep Dimension) []Row {
	narrow := make([]Row, len(rows))
	for i, r := range rows {
		switch keep {
		case ByAPI:
			r.Key, r.Channel = "", ""
		case ByKey:
			r.API, r.Channel = "", ""
		}
		narrow[i] = r
	}
	return Rollup(narrow, res)
}

func compareRows(a, b Row) int {
	return cmp.Or(a.Bucket.Compare(b.Bucket), cmp.Compare(a.Account, b.Account), cmp.Compare(a.Key, b.Key),
		cmp.Compare(a.API, b.API), cmp.Compare(a.Channel, b.Channel), cmp.Compare(a.Outcome, b.Outcome))
}

// Store keeps usage buckets. Implementations are safe for concurrent use and never read
// the clock.
type Store interface {
	// Add adds minute rows (their Bucket is truncated to the minute) to the minute,
	// hour and day buckets of their groups, and raises the last use of their keys, all
	// or none: additive, so that rows of the same group from several flushes or
	// instances sum. If a row is invalid (see [Row.Validate]) it adds nothing and
	// returns an error wrapping store.ErrInvalid.
	Add(ctx context.Context, rows []Row) error
	// Sum returns the rows of the buckets of q.Interval that q selects, summed per
	// bucket, group of q.By and outcome: the dimensions q does not group by (other
	// than the outcome) are empty. Rows come in no particular order. An invalid query
	// (see [Query.Validate]) or one that would return more than [MaxRows] rows is
	// store.ErrInvalid.
	Sum(ctx context.Context, q Query) ([]Row, error)
	// Totals returns a page of the ranking q asks for: the calls, credits and errors
	// of its range summed per group, across accounts (see [TotalsQuery]). An invalid
	// query (see [TotalsQuery.Normalized]), a cursor that no page returned included,
	// is a [*QueryError] wrapping store.ErrInvalid.
	Totals(ctx context.Context, q TotalsQuery) (TotalsPage, error)
	// LastUsed returns, for each key of account that was used, the latest At of its
	// records. Session calls (an empty key) are left out.
	LastUsed(ctx context.Context, account string) (map[string]time.Time, error)
	// Prune deletes the buckets of resolution res that start before before, and
	// returns how many rows it deleted. It is the host's retention, set per
	// resolution; buckets at or after before are kept, and other resolutions are not
	// touched.
	Prune(ctx context.Context, res Resolution, before time.Time) (int64, error)
}

// CheckPrune returns an error wrapping store.ErrInvalid unless res is one of
// [Resolutions], as every store checks first in Prune.
func CheckPrune(res Resolution) error {
	if !res.valid() {
		return fmt.Errorf("usage: prune: unknown resolution %s: use usage.Minute, Hour or Day: %w", res, store.ErrInvalid)
	}
	return nil
}

// CheckAdd validates rows for [Store.Add], as every store does first: it returns the
// rows rolled up to the minute, hour and day ([Rollup]), or an error wrapping
// store.ErrInvalid.
func CheckAdd(rows []Row) (minutes, hours, days []Row, err error) {
	for i := range rows {
		if err := rows[i].Validate(); err != nil {
			return nil, nil, nil, err
		}
	}
	minutes = Rollup(rows, Minute)
	return minutes, Rollup(minutes, Hour), Rollup(minutes, Day), nil
}
