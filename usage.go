package tollgate

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/usage"
)

// Usage statistics. With [Options.Usage] set, every call of an authenticated caller
// that names APIs of the catalog is recorded, one [usage.Record] per API it ran or was
// refused for:
//
//   - a call that ran: its outcome ("ok" or the code of its failure: "rejected",
//     "timeout", "api_failed"), the credits the API was charged after any refund, and
//     how long the API ran. A GraphQL query of three APIs makes three records, each with
//     its own outcome, credits and duration.
//   - a call refused once its caller was authenticated (rate_limited,
//     concurrency_limited, credits_exhausted, plan_limit_exceeded, invalid_input, an
//     API the key may not call, a store that was unavailable): its code, no credits and
//     no latency, so that the errors by code show the refusals a client met.
//
// Nothing is recorded for a caller that was not authenticated (no key, an unknown,
// revoked or expired key), nor for an id that names no API, so that nobody can fill the
// statistics with names of their choosing. A record names the key by its id (for a
// session, the key that started it; empty for one no key started), never by its value. Its channel is the caller's ("rest",
// "graphql", "mcp", "batch" for each item of a batch; "other" for a call made without
// one).
//
// Records are summed in process and flushed in batches (see [usage.Recorder]); the
// ledger stays the record of money.

// UsageOptions configures the usage statistics of a [Service].
type UsageOptions struct {
	// Store keeps the statistics: memory.NewUsageStore for one process,
	// postgres.NewUsageStore for many. It is required.
	Store usage.Store
	// FlushInterval is how often the statistics are flushed to the store; the default
	// is [usage.DefaultFlushInterval]. A negative value flushes only on
	// [Service.FlushUsage] and [Service.Close].
	FlushInterval time.Duration
	// MaxPending is the most rows kept while the store refuses flushes; the default is
	// [usage.DefaultMaxPending]. See [usage.Recorder].
	MaxPending int
	// Retention is how long the buckets of each resolution are kept; see
	// [UsageRetention] for the defaults.
	Retention UsageRetention
	// PruneInterval is how often the service deletes the buckets older than their
	// retention: once at New, then at this interval. Any number of instances may prune
	// the same store. The default is [DefaultUsagePruneInterval]; a negative value turns
	// the schedule off (call [Service.PruneUsage] yourself then). [Service.Close] stops
	// it.
	PruneInterval time.Duration
}

// UsageRetention is how long the usage statistics keep the buckets of each resolution.
// A zero field is its default, which keeps a little more than the longest range a
// query of that interval may cover (see [usage.Query]): minute buckets for 2 days,
// hour buckets for 32 days, day buckets for 400 days. A negative field keeps that
// resolution's buckets for ever.
type UsageRetention struct {
	Minute, Hour, Day time.Duration
}

// The default [UsageRetention].
const (
	DefaultMinuteRetention = 2 * 24 * time.Hour
	DefaultHourRetention   = 32 * 24 * time.Hour
	DefaultDayRetention    = usage.MaxDayRange
)

// DefaultUsagePruneInterval is the default [UsageOptions.PruneInterval].
const DefaultUsagePruneInterval = time.Hour

// of returns how long the buckets of res are kept; negative for ever.
func (r UsageRetention) of(res usage.Resolution) time.Duration {
	keep, def := r.Day, DefaultDayRetention
	switch res {
	case usage.Minute:
		keep, def = r.Minute, DefaultMinuteRetention
	case usage.Hour:
		keep, def = r.Hour, DefaultHourRetention
	}
	if keep == 0 {
		return def
	}
	return keep
}

// PruneUsage deletes the usage buckets older than their retention
// ([UsageOptions.Retention]) now, and returns how many it deleted. The background
// prune calls it every [UsageOptions.PruneInterval]. It is CodeNotFound when the
// service records no usage.
func (s *Service) PruneUsage(ctx context.Context) (int64, error) {
	if s.usage == nil {
		return 0, errNoUsage()
	}
	now, total := s.now(), int64(0)
	for _, res := range usage.Resolutions {
		keep := s.usageRetention.of(res)
		if keep < 0 {
			continue
		}
		n, err := s.usageStore.Prune(ctx, res, now.Add(-keep))
		total += n
		if err != nil {
			return total, fmt.Errorf("tollgate: pruning the %s usage buckets: %w", res, err)
		}
	}
	return total, nil
}

// keyCalls returns the calls per API that p's key made in period, counted as the
// ledger counts an account's: the calls that ran and kept their charge (they
// succeeded, or the API rejected their input), read from the usage statistics. It is
// nil when the service records no usage.
func (s *Service) keyCalls(ctx context.Context, p *Principal, period billing.Period) (map[string]int64, error) {
	if s.usage == nil {
		return nil, nil
	}
	res, err := s.Usage(ctx, usage.Query{Account: p.Account.ID, Key: p.Key.ID, From: period.Start, To: period.End,
		Interval: usage.Day, By: usage.ByAPI})
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(res.Series))
	for _, series := range res.Series {
		for _, pt := range series.Points {
			n := pt.Calls
			for code, k := range pt.Errors {
				if code != CodeRejected.String() {
					n -= k
				}
			}
			if n > 0 {
				out[series.Group] += n
			}
		}
	}
	return out, nil
}

// errNoUsage is the error of the usage methods of a service that records none.
func errNoUsage() *Error {
	return newError(CodeNotFound, "this service records no usage statistics (tollgate.Options.Usage is not set)", nil)
}

// Usage answers a usage query (see [usage.Query]): the time series of calls, credits,
// errors by code and latency percentiles of one account. It applies no access rule: it
// is the operator's read; an account holder's goes through [Service.OwnUsage], which
// holds them to their own account (and a sub-key to its own calls). It is
// CodeNotFound when the service records no usage, CodeInvalidInput for a query to fix
// (its message begins with the field: from, to, interval, by, api, key, channel or
// account), and CodeUnavailable when the store cannot answer. Calls of the last
// [UsageOptions.FlushInterval] may not be in it yet.
func (s *Service) Usage(ctx context.Context, q usage.Query) (usage.Result, error) {
	if s.usage == nil {
		return usage.Result{}, errNoUsage()
	}
	res, err := usage.Run(ctx, s.usageStore, q)
	if qe, ok := usage.IsQueryError(err); ok {
		return usage.Result{}, newError(CodeInvalidInput, fmt.Sprintf("%s: %s", qe.Param, qe.Reason), err)
	}
	if err != nil {
		return usage.Result{}, s.unavailable(ctx, "usage", err)
	}
	return res, nil
}

// KeysLastUsed returns, for each key of account that was used, the last time it was
// (admitted or refused), as far as the flushed statistics know. Its errors are those of
// [Service.Usage].
func (s *Service) KeysLastUsed(ctx context.Context, account string) (map[string]time.Time, error) {
	if s.usage == nil {
		return nil, errNoUsage()
	}
	if err := checkText("account_id", account, maxIDLength); err != nil {
		return nil, err
	}
	last, err := s.usageStore.LastUsed(ctx, account)
	if err != nil {
		return nil, s.unavailable(ctx, "usage", err)
	}
	return last, nil
}

// FlushUsage sends the usage recorded so far to the store now, rather than at the next
// [UsageOptions.FlushInterval]. What the store refuses is kept for the next flush (see
// [usage.Recorder]). It does nothing when the service records no usage.
func (s *Service) FlushUsage(ctx context.Context) error {
	if s.usage == nil {
		return nil
	}
	return s.usage.Flush(ctx)
}
