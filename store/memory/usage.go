package memory

import (
	"context"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/usage"
)

// UsageStore is the in-memory [usage.Store]. One mutex guards its buckets, which are
// kept per resolution and per account: a flush comes every few seconds, and a query
// scans one account's buckets of one resolution. Its zero value is not ready to use:
// create it with [NewUsageStore].
type UsageStore struct {
	mu      sync.Mutex
	buckets map[usage.Resolution]map[string]map[usageGroup]*usage.Row // resolution, account, group
	last    map[string]map[string]time.Time                           // account, key
}

// usageGroup identifies a bucket of one account.
type usageGroup struct {
	bucket                     int64
	key, api, channel, outcome string
}

// Interface guard.
var _ usage.Store = (*UsageStore)(nil)

// NewUsageStore returns an empty UsageStore.
func NewUsageStore() *UsageStore {
	s := &UsageStore{
		buckets: make(map[usage.Resolution]map[string]map[usageGroup]*usage.Row),
		last:    make(map[string]map[string]time.Time),
	}
	for _, res := range usage.Resolutions {
		s.buckets[res] = make(map[string]map[usageGroup]*usage.Row)
	}
	return s
}

// Add adds rows to their minute, hour and day buckets, all or none.
func (s *UsageStore) Add(ctx context.Context, rows []usage.Row) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	minutes, hours, days, err := usage.CheckAdd(rows)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for res, rows := range map[usage.Resolution][]usage.Row{usage.Minute: minutes, usage.Hour: hours, usage.Day: days} {
		for i := range rows {
			r := &rows[i]
			accounts := s.buckets[res]
			groups := accounts[r.Account]
			if groups == nil {
				groups = make(map[usageGroup]*usage.Row)
				accounts[r.Account] = groups
			}
			g := usageGroup{r.Bucket.UnixNano(), r.Key, r.API, r.Channel, r.Outcome}
			if sum := groups[g]; sum != nil {
				sum.Calls += r.Calls
				sum.Credits += r.Credits
				sum.Latency.Merge(&r.Latency)
				sum.Last = later(sum.Last, r.Last)
				continue
			}
			cp := *r
			groups[g] = &cp
		}
	}
	for i := range minutes {
		r := &minutes[i]
		if r.Key == "" {
			continue
		}
		keys := s.last[r.Account]
		if keys == nil {
			keys = make(map[string]time.Time)
			s.last[r.Account] = keys
		}
		keys[r.Key] = later(keys[r.Key], r.Last)
	}
	return nil
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Sum returns q's sums, from a scan of the account's buckets of q's interval.
func (s *UsageStore) Sum(ctx context.Context, q usage.Query) ([]usage.Row, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sum, err := usage.NewSummer(q)
	if err != nil {
		return nil, err
	}
	q = sum.Query()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.buckets[q.Interval][q.Account] {
		if err := sum.Add(r); err != nil {
			return nil, err
		}
	}
	return sum.Rows(), nil
}

// Totals returns a page of q's ranking, from a scan of the buckets of its resolution:
// of every account, or of the one it filters on.
func (s *UsageStore) Totals(ctx context.Context, q usage.TotalsQuery) (usage.TotalsPage, error) {
	if err := ctx.Err(); err != nil {
		return usage.TotalsPage{}, err
	}
	rk, err := usage.NewRanking(q)
	if err != nil {
		return usage.TotalsPage{}, err
	}
	q = rk.Query()
	s.mu.Lock()
	defer s.mu.Unlock()
	accounts := s.buckets[rk.Resolution()]
	if q.Account != "" {
		accounts = map[string]map[usageGroup]*usage.Row{q.Account: accounts[q.Account]}
	}
	for _, groups := range accounts {
		for _, r := range groups {
			rk.Add(r)
		}
	}
	return rk.Page(), nil
}

// LastUsed returns the last use of each of account's keys.
func (s *UsageStore) LastUsed(ctx context.Context, account string) (map[string]time.Time, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]time.Time, len(s.last[account]))
	for k, t := range s.last[account] {
		out[k] = t
	}
	return out, nil
}

// Prune deletes the buckets of res that start before before.
func (s *UsageStore) Prune(ctx context.Context, res usage.Resolution, before time.Time) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := usage.CheckPrune(res); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for account, groups := range s.buckets[res] {
		for g, r := range groups {
			if r.Bucket.Before(before) {
				delete(groups, g)
				n++
			}
		}
		if len(groups) == 0 {
			delete(s.buckets[res], account)
		}
	}
	return n, nil
}
