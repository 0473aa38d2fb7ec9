package redis_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/billing/driver"
)

// TestGCRAExact checks the script's GCRA against driver.GCRA where floating point
// would go wrong if the script were careless: emission intervals that are not whole
// microseconds (7 a minute is 8.571428571s), instants with nanoseconds, gaps that land
// a nanosecond either side of a whole token, and windows up to the 2^52 ns bound. Every
// Peek and Allow must equal the reference to the nanosecond, and so must every
// admission step with the same limit (the admission script has its own copy of the
// arithmetic), on a bucket of its own that sees the same events.
func TestGCRAExact(t *testing.T) {
	s := newStore(t, nil)
	ctx := t.Context()
	limits := []driver.Limit{
		{Rate: 7, Per: time.Minute, Burst: 3},
		{Rate: 1000, Per: time.Second, Burst: 50},
		{Rate: 13, Per: time.Hour, Burst: 13},
		{Rate: 3, Per: time.Second, Burst: 1},
		{Rate: 1, Per: 50 * 24 * time.Hour, Burst: 1}, // a window just under 2^52 ns
		{Rate: 999_999_937, Per: time.Second, Burst: 4_000_000},
	}
	t0 := time.Date(2030, 1, 15, 12, 0, 0, 987654321, time.UTC)
	for li, l := range limits {
		key := fmt.Sprintf("limit%d", li)
		e := l.Interval()
		rng := rand.New(rand.NewPCG(uint64(li), 7))
		gaps := []time.Duration{0, 0, 1, e - 1, e, e + 1, e / 3, 2*e - 1, time.Duration(l.Burst) * e, time.Duration(rng.Int64N(int64(e) + 1))}
		var tat int64
		now := t0
		for i := range 300 {
			now = now.Add(gaps[rng.IntN(len(gaps))])
			want, _ := driver.GCRA(l, tat, now.UnixNano())
			got, err := s.Peek(ctx, key, l, now)
			must(t, err)
			if got != want {
				t.Fatalf("limit %+v, event %d at t0+%v: Peek %+v, GCRA %+v", l, i, now.Sub(t0), got, want)
			}
			want, next := driver.GCRA(l, tat, now.UnixNano())
			if want.Allowed {
				tat = next
			}
			got, err = s.Allow(ctx, key, l, now)
			must(t, err)
			if got != want {
				t.Fatalf("limit %+v, event %d at t0+%v: Allow %+v, GCRA %+v", l, i, now.Sub(t0), got, want)
			}
			r, err := s.Admit(ctx, driver.Step{Account: key + "-admit", Request: newRequest(), Now: now, Rate: &l})
			must(t, err)
			if r.Rate != want || (r.Denied == driver.DeniedRate) == want.Allowed {
				t.Fatalf("limit %+v, event %d at t0+%v: Admit %+v, GCRA %+v", l, i, now.Sub(t0), r, want)
			}
		}
	}
}

// TestOnlyRecordsLive checks that every key the Store writes expires unless it is a
// record (account, keys, balance, usage, the key indexes) or a set that its own
// operations empty (an account's open reservations, which their settlements and voids
// remove; the index of accounts with open reservations, which sweeps prune): rate
// timestamps and lease sets a second after they stop mattering, settled markers after
// Retention, open reservations' and adjustments' markers after OpenReservationTTL
// (an operator may retry a grant with its idempotency key hours later). Nothing else
// accumulates.
func TestOnlyRecordsLive(t *testing.T) {
	ctx, c := t.Context(), client(t)
	s, prefix := newStorePrefix(t, c, nil)
	t0 := time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC)
	p := driver.MonthOf(t0)
	must(t, s.Open(ctx, driver.Opening{Account: "acct", Balance: 100, Allowance: 100, Period: p}))
	l := driver.Limit{Rate: 60, Per: time.Minute, Burst: 10}
	settled, open := newRequest(), newRequest()
	for _, req := range []driver.RequestID{settled, open} {
		_, err := s.Admit(ctx, driver.Step{Account: "acct", Request: req, Now: t0, Rate: &l,
			Slot:    &driver.SlotClaim{Ceiling: 5, Lease: 30 * time.Second},
			Credits: &driver.Reservation{Account: "acct", Request: req, APIs: []string{"hash"}, Amount: 1, Period: p, Allowance: 100, Now: testNow, Expires: testNow.Add(time.Hour)}})
		must(t, err)
	}
	_, err := s.Close(ctx, driver.Closing{Account: "acct", Request: settled, ReleaseSlot: true,
		Settlement: &driver.Settlement{Account: "acct", Request: settled, Period: p, Allowance: 100}})
	must(t, err)
	limitsOnly := newRequest()
	_, err = s.Admit(ctx, driver.Step{Account: "other", Request: limitsOnly, Now: t0, Rate: &l})
	must(t, err)
	adjusted := newRequest()
	_, err = s.Adjust(ctx, driver.Adjustment{Account: "acct", Request: adjusted, Amount: 5, Reason: "test", Period: p, Allowance: 100, Now: t0})
	must(t, err)

	base := prefix + ":{acct}:"
	// The shortest and longest time each kind may have left: a rate timestamp lives
	// until the bucket is full (two events of 1s for acct, one for other), rounded up
	// to the millisecond, plus a second.
	want := map[string][2]time.Duration{
		base + "tat":                                 {2 * time.Second, 3001 * time.Millisecond},
		base + "lease":                               {30 * time.Second, 32 * time.Second},
		base + "r:" + settled.String():               {9 * time.Minute, 10 * time.Minute},
		base + "r:" + open.String():                  {34 * 24 * time.Hour, 35 * 24 * time.Hour},
		base + "r:" + adjusted.String():              {34 * 24 * time.Hour, 35 * 24 * time.Hour},
		prefix + ":{other}:r:" + limitsOnly.String(): {9 * time.Minute, 10 * time.Minute},
		prefix + ":{other}:tat":                      {1 * time.Second, 2001 * time.Millisecond},
	}
	keys, err := c.Keys(ctx, prefix+":*").Result()
	must(t, err)
	for _, k := range keys {
		ttl, err := c.PTTL(ctx, k).Result()
		must(t, err)
		if r, ok := want[k]; ok {
			if ttl < r[0] || ttl > r[1] {
				t.Errorf("%s lives %v, want within [%v, %v]", strings.TrimPrefix(k, prefix), ttl, r[0], r[1])
			}
			delete(want, k)
			continue
		}
		if !strings.HasSuffix(k, ":bal") && !strings.HasSuffix(k, ":use") && !strings.HasSuffix(k, ":open") && !strings.HasSuffix(k, ":expiring") {
			t.Errorf("%s is neither a record nor a key that expires (TTL %v)", strings.TrimPrefix(k, prefix), ttl)
		}
		if ttl != -1 {
			t.Errorf("record %s expires in %v", strings.TrimPrefix(k, prefix), ttl)
		}
	}
	for k := range want {
		t.Errorf("no key %s", strings.TrimPrefix(k, prefix))
	}
}
