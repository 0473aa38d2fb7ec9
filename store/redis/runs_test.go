package redis_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/store/redis"
)

// TestRunsMatchSteps checks that admissions and closings sent as the calls of one
// batch, their steps merged into one run of the script per account, do exactly what
// the same calls do one at a time, in the order the runs take: the same results, and
// the same state in Redis. It drives two stores, each on its own prefix, through the same
// random batches over two accounts, which reach every path of the scripts: replays
// within a batch and across batches; right, wrong, revoked, session and foreign keys;
// rate and slot denials; leases that end between the steps of a batch; balances that
// run short; a renewal in the middle of a batch; refunds, refunds above the
// reservation, unknown and settled reservations; credits beyond 2^53, and a used count
// that would pass 2^63 - 1.
func TestRunsMatchSteps(t *testing.T) {
	addr(t) // without a server the seeds skip, and so must the count of their paths
	// The paths the batches reached, over every seed.
	paths := make(map[string]int)
	for _, seed := range []uint64{7, 13, 19} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { runsMatchSteps(t, seed, paths) })
	}
	t.Logf("paths reached: %v", paths)
	for _, path := range []string{"admission: admitted", "admission: key", "admission: rate", "admission: slot",
		"admission: credits", "credits beyond 2^53", "used count at its limit", "slot: the last one", "slot: a lease renewed",
		"closing: unknown reservation", "closing: refund too large", "closing: refund past 2^63-1", "closing: refund"} {
		if paths[path] == 0 {
			t.Errorf("no call reached %q", path)
		}
	}
}

// runsMatchSteps runs TestRunsMatchSteps's batches drawn from seed, and counts the
// paths they reach.
func runsMatchSteps(t *testing.T, seed uint64, paths map[string]int) {
	c := client(t)
	one, prefixOne := newStorePrefix(t, c, &redis.Options{CallerClock: true})
	all, prefixAll := newStorePrefix(t, c, &redis.Options{CallerClock: true})
	stores := []*redis.Store{one, all}
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(seed, 11))
	request := func() driver.RequestID {
		var id driver.RequestID
		for i := range id {
			id[i] = byte(rng.UintN(256))
		}
		return id
	}

	now := time.Now().UTC().Truncate(time.Millisecond)
	periods := []driver.Period{driver.MonthOf(now)}
	periods = append(periods, driver.MonthOf(periods[0].End))
	period := 0 // the current one

	// Two accounts: a small balance that runs short, and one beyond 2^53.
	type account struct {
		id        string
		allowance int64
		amounts   []int64
		keys      []auth.Key // a key that stays valid, and one revoked half-way
	}
	accounts := []*account{
		{id: "small", allowance: 40, amounts: []int64{0, 1, 2, 3, 5, 8}},
		{id: "big", allowance: 1<<62 + 12345, amounts: []int64{1, 1 << 40, 1 << 60, 1 << 61}},
	}
	for _, a := range accounts {
		for i := range 2 {
			a.keys = append(a.keys, auth.Key{ID: fmt.Sprintf("%s-k%d", a.id, i), AccountID: a.id,
				Name: fmt.Sprint("key ", i), Primary: i == 0, Hash: newHash(), CreatedAt: now})
		}
		for i, s := range stores {
			must(t, s.CreateAccount(ctx, auth.Account{ID: a.id, Plan: "p", CreatedAt: now}, a.keys[0]))
			must(t, s.CreateKey(ctx, a.keys[1], auth.KeyLimit{}))
			must(t, s.Open(ctx, driver.Opening{Account: a.id, Balance: 1, Allowance: 1, Period: periods[0]}))
			// Balances beyond driver.MaxCredits, which only data from before that bound
			// can hold, are written directly.
			must(t, c.HSet(ctx, []string{prefixOne, prefixAll}[i]+":{"+a.id+"}:bal", "rem", a.allowance, "allow", a.allowance).Err())
		}
	}
	pick := func(n int) int { return rng.IntN(n) }
	apis := func() []string {
		var out []string
		for _, api := range []string{"a", "b", "c"} {
			if pick(2) == 0 {
				out = append(out, api)
			}
		}
		return out
	}

	// The requests admitted so far, by id, with the amount and period reserved.
	type admitted struct {
		acct   *account
		amount int64
		period driver.Period
	}
	var ids, leased, acquired []driver.RequestID
	reqs := make(map[driver.RequestID]admitted)

	step := func(a *account, at time.Time) driver.Step {
		id := request()
		switch {
		case len(leased) > 0 && pick(2) == 0:
			id, leased = leased[0], leased[1:] // a lease taken without a marker
		case len(ids) > 0 && pick(6) == 0:
			id = ids[pick(len(ids))] // a replay, perhaps of another account's request
		}
		st := driver.Step{Account: a.id, Request: id, Now: at}
		switch pick(10) {
		case 0, 1, 2, 3, 4:
			st.Key = &driver.KeyCheck{Account: a.id, KeyID: a.keys[0].ID, Hash: a.keys[0].Hash}
		case 5:
			st.Key = &driver.KeyCheck{Account: a.id, KeyID: a.keys[0].ID, Hash: newHash()}
		case 6:
			st.Key = &driver.KeyCheck{Account: a.id, KeyID: a.keys[1].ID, Hash: a.keys[1].Hash}
		case 7:
			st.Key = &driver.KeyCheck{Account: a.id} // a session
		case 8:
			other := accounts[0]
			if other == a {
				other = accounts[1]
			}
			st.Key = &driver.KeyCheck{Account: other.id, KeyID: other.keys[0].ID, Hash: other.keys[0].Hash}
		}
		if pick(5) > 0 {
			st.Rate = &driver.Limit{Rate: 20, Per: time.Second, Burst: 3}
		}
		if pick(5) > 0 {
			st.Slot = &driver.SlotClaim{Ceiling: 3, Lease: time.Duration(1+pick(300)) * time.Millisecond}
		}
		if pick(7) > 0 {
			p := periods[period]
			if period == 1 && pick(4) == 0 {
				p = periods[0] // a straggler of the period before
			}
			st.Credits = &driver.Reservation{Account: a.id, Request: id, Amount: a.amounts[pick(len(a.amounts))],
				APIs: apis(), Period: p, Allowance: a.allowance, Now: testNow, Expires: testNow.Add(time.Hour)}
		}
		if _, ok := reqs[id]; !ok {
			ids = append(ids, id)
			amount, p := int64(0), periods[period]
			if st.Credits != nil {
				amount, p = st.Credits.Amount, st.Credits.Period
			}
			reqs[id] = admitted{a, amount, p}
		}
		return st
	}
	closing := func(a *account) driver.Closing {
		id := request() // unknown
		if len(ids) > 0 && pick(8) > 0 {
			id = ids[pick(len(ids))]
		}
		r, ok := reqs[id]
		if ok {
			a = r.acct
		} else {
			r = admitted{a, 3, periods[period]}
		}
		cl := driver.Closing{Account: a.id, Request: id, ReleaseSlot: pick(4) > 0}
		if pick(6) > 0 {
			refund := int64(0)
			switch pick(4) {
			case 0:
				refund = r.amount
			case 1:
				refund = r.amount + 1 // above the reservation
			case 2:
				refund = r.amount / 2
			}
			cl.Settlement = &driver.Settlement{Account: a.id, Request: id, Refund: refund, Uncount: apis(),
				Period: periods[period], Allowance: a.allowance}
		}
		return cl
	}

	reached := func(op, result any, err error) {
		switch op := op.(type) {
		case driver.Step:
			r := result.(driver.StepResult)
			paths["admission: "+[]string{"admitted", "key", "rate", "slot", "credits"}[r.Denied]]++
			if op.Credits != nil && r.Balance.Remaining > 1<<53 {
				paths["credits beyond 2^53"]++
			}
			if r.Denied == driver.DeniedCredits && r.Balance.Remaining >= op.Credits.Amount {
				paths["used count at its limit"]++
			}
			if r.Slot.Acquired && r.Slot.InUse == op.Slot.Ceiling {
				paths["slot: the last one"]++
			}
			if slices.Contains(acquired, op.Request) && r.Slot.Acquired {
				paths["slot: a lease renewed"]++
			}
		case driver.Closing:
			switch {
			case errors.Is(err, store.ErrNotFound):
				paths["closing: unknown reservation"]++
			case errors.Is(err, store.ErrConflict) && strings.Contains(err.Error(), "past 2^63-1"):
				paths["closing: refund past 2^63-1"]++
			case errors.Is(err, store.ErrConflict):
				paths["closing: refund too large"]++
			case err == nil && op.Settlement != nil && op.Settlement.Refund > 0:
				paths["closing: refund"]++
			}
		}
	}

	for batch := range 300 {
		switch batch {
		case 120: // revoke each account's second key
			for _, a := range accounts {
				for _, s := range stores {
					_, err := s.RevokeKey(ctx, a.keys[1].ID, auth.AnyRevision, now)
					must(t, err)
				}
			}
		case 60, 240: // the small account gets credits again
			for _, s := range stores {
				_, err := s.Adjust(ctx, driver.Adjustment{Account: "small", Request: driver.RequestID{byte(batch)},
					Amount: 30, Period: periods[period], Allowance: accounts[0].allowance})
				must(t, err)
			}
		case 150: // the big account's remaining credits rise to 2^63 - 1, so that its used count reaches its limit
			for i, s := range stores {
				b, err := s.Balance(ctx, "big", now, periods[period], accounts[1].allowance)
				must(t, err)
				must(t, c.HIncrBy(ctx, []string{prefixOne, prefixAll}[i]+":{big}:bal", "rem", math.MaxInt64-b.Remaining).Err())
			}
		}
		now = now.Add(time.Duration(pick(150)) * time.Millisecond)
		expireSoon(t, c, prefixOne, prefixAll)
		if pick(4) == 0 {
			// A lease taken through the concurrency limiter, which leaves no marker: a
			// step of the same request then renews it instead of adding one.
			a, id, lease := accounts[pick(2)], request(), time.Duration(1+pick(300))*time.Millisecond
			for _, s := range stores {
				_, err := s.Acquire(ctx, a.id, id, 3, lease, now)
				must(t, err)
			}
			ids, leased, acquired = append(ids, id), append(leased, id), append(acquired, id)
		}
		var ops []any
		a := accounts[pick(2)]
		for range 1 + pick(12) {
			if pick(4) == 0 {
				a = accounts[pick(2)]
			}
			if batch == 200 && len(ops) == 3 {
				period = 1 // the next period begins in the middle of a batch
			}
			at := now
			if pick(5) == 0 {
				at = at.Add(time.Duration(pick(4000)) * time.Microsecond)
			}
			if pick(3) == 0 {
				ops = append(ops, closing(a))
			} else {
				ops = append(ops, step(a, at))
			}
		}

		// The calls of a batch were all in flight at once, so any order is right; the
		// runs' order is the one to compare with.
		together, togetherErrs, order := all.Together(ctx, ops)
		alone, aloneErrs := make([]any, len(ops)), make([]error, len(ops))
		for _, i := range order {
			switch op := ops[i].(type) {
			case driver.Step:
				alone[i], aloneErrs[i] = one.Admit(ctx, op)
			case driver.Closing:
				alone[i], aloneErrs[i] = one.Close(ctx, op)
			}
		}
		for i := range ops {
			reached(ops[i], alone[i], aloneErrs[i])
			if !reflect.DeepEqual(alone[i], together[i]) || fmt.Sprint(aloneErrs[i]) != fmt.Sprint(togetherErrs[i]) {
				t.Fatalf("batch %d, call %d of %d (%+v):\none at a time: %+v, %v\ntogether:      %+v, %v",
					batch, i, len(ops), ops[i], alone[i], aloneErrs[i], together[i], togetherErrs[i])
			}
		}
		if got, want := dump(t, c, prefixAll), dump(t, c, prefixOne); !sameState(got, want) {
			for _, i := range order {
				switch op := ops[i].(type) {
				case driver.Step:
					t.Logf("op %d: admit %s %s now %v slot %+v credits %v -> %+v %v", i, op.Account, op.Request, op.Now.Format("05.000000"), op.Slot, op.Credits != nil, alone[i], aloneErrs[i])
				case driver.Closing:
					t.Logf("op %d: close %s %s release %v settle %v", i, op.Account, op.Request, op.ReleaseSlot, op.Settlement != nil)
				}
			}
			for k, v := range want {
				if g, ok := got[k]; !ok || !sameState(map[string]stored{k: g}, map[string]stored{k: v}) {
					t.Logf("%s: one at a time %+v, together %+v", k, v, g)
				}
			}
			for k, g := range got {
				if _, ok := want[k]; !ok {
					t.Logf("%s: one at a time: none, together %+v", k, g)
				}
			}
			t.Fatalf("batch %d: the state differs", batch)
		}
	}
}

// expireWithin is how soon a key must expire for expireSoon to delete it. Rate
// timestamps and lease sets live on Redis's own clock, at most 1.3 s with this test's
// rates and leases (the time until the bucket is full, or the lease, plus a second's
// margin): with 2 s, every one of them left by a batch is deleted before the next, and
// only those made within a batch could expire during it, which takes a stall of a
// second between its two runs, not a few milliseconds as when keys that had barely a
// second left were kept (a loaded machine failed the comparison that way).
const expireWithin = 2 * time.Second

// expireSoon deletes, under both prefixes at once, every key that would expire within
// expireWithin, so that no key expires between the two stores' runs of a batch: each
// expiry then happens at the same moment for both.
func expireSoon(t *testing.T, c *goredis.Client, prefixes ...string) {
	t.Helper()
	ctx := context.Background()
	for _, prefix := range prefixes {
		keys := scanKeys(t, c, prefix)
		ttls := each(t, c, keys, func(p goredis.Pipeliner, _ int, k string) *goredis.DurationCmd { return p.PTTL(ctx, k) })
		_, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i, k := range keys {
				if ttl := ttls[i].Val(); ttl >= 0 && ttl < expireWithin {
					for _, other := range prefixes {
						p.Del(ctx, other+strings.TrimPrefix(k, prefix))
					}
				}
			}
			return nil
		})
		must(t, err)
	}
}

func scanKeys(t *testing.T, c *goredis.Client, prefix string) []string {
	t.Helper()
	var keys []string
	ctx := context.Background()
	it := c.Scan(ctx, 0, prefix+":*", 10000).Iterator()
	for it.Next(ctx) {
		keys = append(keys, it.Val())
	}
	must(t, it.Err())
	return keys
}

// each sends cmd for every key (and its index) in one pipeline and returns the
// commands, answered.
func each[C goredis.Cmder](t *testing.T, c *goredis.Client, keys []string, cmd func(p goredis.Pipeliner, i int, key string) C) []C {
	t.Helper()
	out := make([]C, len(keys))
	_, err := c.Pipelined(context.Background(), func(p goredis.Pipeliner) error {
		for i, k := range keys {
			out[i] = cmd(p, i, k)
		}
		return nil
	})
	if err != nil && err != goredis.Nil {
		t.Fatal(err)
	}
	return out
}

// A stored is a key's value and its time to live.
type stored struct {
	value string
	ttl   time.Duration
}

// dump returns every key under prefix (without it).
func dump(t *testing.T, c *goredis.Client, prefix string) map[string]stored {
	t.Helper()
	ctx := context.Background()
	keys := scanKeys(t, c, prefix)
	types := each(t, c, keys, func(p goredis.Pipeliner, _ int, k string) *goredis.StatusCmd { return p.Type(ctx, k) })
	values := each(t, c, keys, func(p goredis.Pipeliner, i int, k string) goredis.Cmder {
		switch typ := types[i].Val(); typ {
		case "string":
			return p.Get(ctx, k)
		case "hash":
			return p.HGetAll(ctx, k)
		case "zset":
			return p.ZRangeWithScores(ctx, k, 0, -1)
		case "list":
			return p.LRange(ctx, k, 0, -1)
		case "none":
			return nil // expired meanwhile
		default:
			t.Fatalf("key %s: type %s", k, typ)
			return nil
		}
	})
	ttls := each(t, c, keys, func(p goredis.Pipeliner, _ int, k string) *goredis.DurationCmd { return p.PTTL(ctx, k) })
	out := make(map[string]stored)
	for i, k := range keys {
		if values[i] == nil || values[i].Err() == goredis.Nil {
			continue
		}
		v := values[i].String()
		v = v[strings.Index(v, ": ")+2:] // the command's value, without its name and arguments
		out[strings.TrimPrefix(k, prefix)] = stored{v, ttls[i].Val()}
	}
	return out
}

// sameState reports whether two dumps hold the same keys and values, with times to
// live within a second of each other.
func sameState(a, b map[string]stored) bool {
	if len(a) != len(b) {
		return false
	}
	for k, x := range a {
		y, ok := b[k]
		if d := x.ttl - y.ttl; !ok || x.value != y.value || d > time.Second || d < -time.Second || (x.ttl < 0) != (y.ttl < 0) {
			return false
		}
	}
	return true
}
