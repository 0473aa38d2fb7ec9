package multiinstance_test

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/billing"
)

// The tests of this file spend credits granted or bought (grant lots) beside the plan's
// allowance, on several instances: across a renewal and the lapse of lots, and
// concurrently with an operator's grants.

// A book is what a test expects of an account's balance, kept by hand: what is left of
// the period's allowance, the credits of each grant lot by its expiry (the zero time for
// the lot that never lapses), and the credits used in the period.
type book struct {
	allowance int64
	lots      map[time.Time]int64
	used      int64
}

// wantBook checks that every instance reads the account's balance as b says, part by
// part: the allowance left, the grants, the earliest lapse among the lots that hold
// credits and its credits, the credits used.
func (c *cluster) wantBook(t *testing.T, when, acct string, b book) {
	t.Helper()
	var granted, lapsing int64
	var lapse time.Time
	for at, n := range b.lots {
		granted += n
		if !at.IsZero() && n > 0 && (lapse.IsZero() || at.Before(lapse)) {
			lapse, lapsing = at, n
		}
	}
	want := fmt.Sprintf("allowance left %d of %d, granted %d, lapsing %d at %s, used %d",
		b.allowance, meteredAllowance, granted, lapsing, lapse.Format(time.RFC3339), b.used)
	for i := range c.instances {
		got := c.balance(t, i, acct)
		if s := fmt.Sprintf("allowance left %d of %d, granted %d, lapsing %d at %s, used %d", got.AllowanceLeft(), got.Allowance,
			got.Granted, got.GrantsLapsing, got.GrantsLapse.UTC().Format(time.RFC3339), got.Used); s != want {
			t.Errorf("%s, instance %d reads %s; want %s", when, i, s, want)
		}
	}
}

// wantCalls checks the calls counted in the period, per API, as /v1/analytics reports
// them through every instance (an API counted 0 is as good as absent).
func (c *cluster) wantCalls(t *testing.T, when, key string, want map[string]int64) {
	t.Helper()
	for i := range c.instances {
		r := c.call(t, i, "/v1/analytics", key)
		data, _ := r.body["data"].(map[string]any)
		counted, _ := data["calls"].(map[string]any)
		got := map[string]int64{}
		for api, n := range counted {
			if n, _ := n.(float64); n != 0 {
				got[api] = int64(n)
			}
		}
		if r.status != http.StatusOK || !maps.Equal(got, want) {
			t.Errorf("%s, instance %d counts the calls %v (%d); want %v", when, i, got, r.status, want)
		}
	}
}

// spend makes n calls of hash (one credit each) at once, on the instances in turn, and
// checks that each is served and charged.
func (c *cluster) spend(t *testing.T, key string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if r := c.call(t, i, "/v1/hash?text=x", key); r.status != http.StatusOK || r.header.Get("X-Credits-Cost") != "1" {
				t.Errorf("a call of hash: %d %s, charged %q; want 200, charged 1", r.status, r.code, r.header.Get("X-Credits-Cost"))
			}
		})
	}
	wg.Wait()
}

// A heldCall is a call of the block API, admitted and running until released.
type heldCall struct {
	fail   bool
	answer chan response
}

// hold makes one call of the block API per entry of fail, on the instances in turn,
// each once the one before is admitted and running: they take their credits in that
// order. The calls whose entry is true fail once released (and are refunded).
func (c *cluster) hold(t *testing.T, key string, fail ...bool) []heldCall {
	t.Helper()
	calls := make([]heldCall, len(fail))
	for i, f := range fail {
		calls[i] = heldCall{fail: f, answer: make(chan response, 1)}
		go func() { calls[i].answer <- c.call(t, i, "/v1/block?fail="+strconv.FormatBool(f), key) }()
		select {
		case <-c.block.entered:
		case r := <-calls[i].answer:
			t.Fatalf("held call %d answered before it was released: %d %s %v", i, r.status, r.code, r.body)
		case <-time.After(time.Minute):
			t.Fatalf("held call %d was not admitted within a minute", i)
		}
	}
	return calls
}

// release lets the held calls end, and checks their answers: those told to fail are
// refunded, the others charged their credit.
func (c *cluster) release(t *testing.T, calls []heldCall) {
	t.Helper()
	for range calls {
		c.block.release <- struct{}{}
	}
	for i, call := range calls {
		r := <-call.answer
		cost := r.header.Get("X-Credits-Cost")
		switch {
		case call.fail && (r.code != "api_failed" || cost != "0"):
			t.Errorf("held call %d, told to fail: %d %s, charged %q; want api_failed, refunded", i, r.status, r.code, cost)
		case !call.fail && (r.status != http.StatusOK || cost != "1"):
			t.Errorf("held call %d: %d %s, charged %q; want 200, charged 1", i, r.status, r.code, cost)
		}
	}
}

// failing returns n entries for hold, true at the indexes given.
func failing(n int, at ...int) []bool {
	fail := make([]bool, n)
	for _, i := range at {
		fail[i] = true
	}
	return fail
}

// TestGrantsAcrossRenewal spends an account's allowance (10 a period) and three grant
// lots on three instances, on one clock moved by the test: 20 credits that never lapse
// (the opening balance above the allowance), 15 that lapse at the very instant of the
// renewal, and 12 that lapse ten days into the next period. Calls held across the
// renewal are admitted a second before it, in a known order, and released at its
// instant, some to be refunded, while new calls are made on every instance; then the
// same across the lapse of the last lot. After each phase, every instance reads each
// part of the balance exactly as the rules give it (the allowance first, then the lot
// that lapses first; a refund back to the lots it took from unless they have lapsed,
// then to the allowance unless the period was renewed since), and the calls counted in
// the period, which the renewal resets.
//
// The Redis store runs on the service's clock here (redis.Options.CallerClock): on the
// Redis server's clock, its default, it judges the lapses by that clock, which the test
// cannot move.
func TestGrantsAcrossRenewal(t *testing.T) {
	for _, d := range []deployment{memoryShared(), onPostgres(directly), onPostgres(throughPgBouncer), onRedisAndPostgres(), onRedisCallerClock()} {
		t.Run(d.name, func(t *testing.T) {
			// The held calls wait for the test, on a loaded machine too.
			c := startWith(t, d, 3, func(o *tollgate.Options, _ tollgate.Stores) { o.CallTimeout = 5 * time.Minute })
			ctx := t.Context()
			opened := c.clock.Now()
			acct, _, key := c.account(t, "metered", meteredAllowance+20)
			// The account's periods are counted from its creation, its billing anchor.
			renewal := c.balance(t, 0, acct).Period.End
			if want := opened.AddDate(0, 1, 0); !renewal.Equal(want) {
				t.Fatalf("the account opened at %s renews at %s, want %s", opened, renewal, want)
			}
			mid := renewal.Add(10 * 24 * time.Hour)
			for i, g := range []struct {
				credits int64
				lapse   time.Time
			}{{15, renewal}, {12, mid}} {
				if _, err := c.instances[i+1].mgr.AdjustCredits(ctx, acct, g.credits, "bought", &accounts.CreditOptions{ExpiresAt: g.lapse}); err != nil {
					t.Fatal(err)
				}
			}
			var never time.Time
			b := book{allowance: meteredAllowance, lots: map[time.Time]int64{never: 20, renewal: 15, mid: 12}}
			c.wantBook(t, "opened and granted", acct, b)

			// An hour before the renewal: six calls at once, from the allowance.
			c.clock.Set(renewal.Add(-time.Hour))
			c.spend(t, key, 6)
			b.allowance, b.used = meteredAllowance-6, 6
			c.wantBook(t, "an hour before the renewal", acct, b)
			c.wantCalls(t, "an hour before the renewal", key, map[string]int64{"hash": 6})

			// A second before: 24 calls held, which take the 4 left of the allowance (calls
			// 0-3), the 15 of the lot lapsing at the renewal (4-18), and 5 of the one
			// lapsing later (19-23). Two of each part are to fail.
			c.clock.Set(renewal.Add(-time.Second))
			held := c.hold(t, key, failing(24, 1, 3, 6, 10, 20, 22)...)
			b = book{allowance: 0, lots: map[time.Time]int64{never: 20, renewal: 0, mid: 12 - 5}, used: 6 + 24}
			c.wantBook(t, "with calls held over the renewal", acct, b)
			c.wantCalls(t, "with calls held over the renewal", key, map[string]int64{"hash": 6, "block": 24})

			// At the renewal's instant: the held calls end, and seven new calls are made at
			// the same time. The allowance is renewed and the first lot has lapsed. The
			// refunds of what the held calls took from the old allowance and from the
			// lapsed lot are lost; those to the live lot come back to it. The new calls
			// take the new allowance, and are all the period has used and counted.
			c.clock.Set(renewal)
			var wg sync.WaitGroup
			wg.Go(func() { c.spend(t, key, 7) })
			c.release(t, held)
			wg.Wait()
			b = book{allowance: meteredAllowance - 7, lots: map[time.Time]int64{never: 20, mid: 12 - 5 + 2}, used: 7}
			c.wantBook(t, "at the renewal", acct, b)
			c.wantCalls(t, "at the renewal", key, map[string]int64{"hash": 7})
			next := c.balance(t, 0, acct).Period.End
			if !next.After(mid) {
				t.Fatalf("the period after the renewal ends at %s, before the lot that lapses 10 days into it", next)
			}

			// A second before the second lot lapses: six calls held, which take the 3 left
			// of the allowance (0-2) and 3 of the lot (3-5). Then they end at the lapse:
			// the refund of call 1 comes back to the allowance (same period), that of call
			// 4 to the lot is lost with the lot.
			c.clock.Set(mid.Add(-time.Second))
			held = c.hold(t, key, failing(6, 1, 4)...)
			b = book{allowance: 0, lots: map[time.Time]int64{never: 20, mid: 9 - 3}, used: 7 + 6}
			c.wantBook(t, "with calls held over the lapse", acct, b)
			c.clock.Set(mid)
			c.release(t, held)
			b = book{allowance: 1, lots: map[time.Time]int64{never: 20}, used: 7 + 6 - 2}
			c.wantBook(t, "at the lapse", acct, b)
			c.wantCalls(t, "at the lapse", key, map[string]int64{"hash": 7, "block": 4})
			// Five more: the one credit of allowance, then the lot that never lapses.
			c.spend(t, key, 5)
			b = book{allowance: 0, lots: map[time.Time]int64{never: 16}, used: 16}
			c.wantBook(t, "after the lapse", acct, b)
			c.wantCalls(t, "after the lapse", key, map[string]int64{"hash": 12, "block": 4})

			// At the next renewal: the allowance whole again, the grant carried over, and
			// nothing used or counted.
			c.clock.Set(next)
			c.wantBook(t, "at the next renewal", acct, book{allowance: meteredAllowance, lots: map[time.Time]int64{never: 16}})
			c.wantCalls(t, "at the next renewal", key, map[string]int64{})
		})
	}
}

// TestGrantsSpentInOrder spends an account's allowance (10) and three grant lots of 60
// credits that lapse a day apart, then some of 300 that never lapse, with 480 calls made
// by 24 clients on three instances, while an operator grants 8 times 127 more that never
// lapse, at points spread over the run, through the instances in turn. The balance
// always covers the calls, so every one is served. An observer reads the balance all
// along: no part is ever below zero, and the lots are drained in order (a lot is
// touched only once the allowance and every lot that lapses before it are empty, and
// the ones that never lapse only once every other is). In the end the charges (the sum
// of X-Credits-Cost) are exactly what the allowance and the grants lost.
func TestGrantsSpentInOrder(t *testing.T) {
	for _, d := range deployments() {
		t.Run(d.name, func(t *testing.T) {
			c := start(t, d, 3)
			ctx := t.Context()
			const (
				lot, never0     = 60, 300
				calls, clients  = 480, 24
				grants, granted = 8, 127 // more than two lots: a grant cannot pass for what lots hold
			)
			acct, _, key := c.account(t, "metered", meteredAllowance+never0)
			now := c.clock.Now()
			lapses := []time.Time{now.Add(24 * time.Hour), now.Add(48 * time.Hour), now.Add(72 * time.Hour)}
			for i, at := range []int{2, 0, 1} { // granted in an order other than they lapse
				if _, err := c.instances[i].mgr.AdjustCredits(ctx, acct, lot, "bought", &accounts.CreditOptions{ExpiresAt: lapses[at]}); err != nil {
					t.Fatal(err)
				}
			}
			total := int64(meteredAllowance + len(lapses)*lot + never0)

			var (
				charged, served atomic.Int64 // the X-Credits-Cost of the calls answered, and their number
				started, done   atomic.Int64 // the operator's grants
				// The operator makes grant i once the clients have been charged
				// (i+1)/(grants+1) of the calls, so that every grant is made while they run.
				milestones = make(chan struct{}, grants)
			)
			// check judges a balance read while grants in [lo, hi] had been made; it
			// returns the index of the lot being spent (len(lapses) once all are empty).
			check := func(b billing.Balance, lo, hi int64) (int, error) {
				allowance := b.AllowanceLeft()
				if allowance < 0 || allowance > meteredAllowance || b.Granted < 0 || b.GrantsLapsing < 0 || b.GrantsLapsing > b.Granted {
					return 0, fmt.Errorf("a part below zero: %+v", b)
				}
				k := len(lapses)
				if !b.GrantsLapse.IsZero() {
					k = slices.IndexFunc(lapses, b.GrantsLapse.Equal)
					if k < 0 || b.GrantsLapsing == 0 {
						return 0, fmt.Errorf("the next lapse is not one of the lots': %+v", b)
					}
				}
				// What the lots after the one being spent hold, and so the one that never
				// lapses: untouched, with the grants made, unless every lot is empty.
				neverNow := b.Granted - b.GrantsLapsing - int64(len(lapses)-1-k)*lot
				if k == len(lapses) {
					neverNow = b.Granted
				}
				switch {
				case allowance > 0 && (k != 0 || b.GrantsLapsing != lot):
					return k, fmt.Errorf("a lot was spent while the allowance had %d left: %+v", allowance, b)
				case k < len(lapses) && ((neverNow-never0)%granted != 0 || neverNow < never0+lo*granted || neverNow > never0+hi*granted):
					return k, fmt.Errorf("a lot after the one that lapses first (or the one that never does) was spent before it: %+v, with %d to %d grants made", b, lo, hi)
				case k == len(lapses) && (allowance > 0 || neverNow > never0+hi*granted):
					return k, fmt.Errorf("credits from nowhere: %+v, with %d to %d grants made", b, lo, hi)
				}
				return k, nil
			}

			// The observer, until the clients and the operator are done.
			stop := make(chan struct{})
			var observer sync.WaitGroup
			seen := make([]int, len(lapses)+1) // balances read, per lot being spent
			observer.Go(func() {
				last := 0
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					lo := done.Load()
					info, err := c.instances[i%len(c.instances)].mgr.Account(ctx, acct)
					hi := started.Load()
					if err != nil {
						t.Errorf("reading the balance: %v", err)
						return
					}
					k, err := check(info.Balance, lo, hi)
					if err != nil {
						t.Error(err)
						return
					}
					if k < last {
						t.Errorf("the lot being spent went back from %d to %d: %+v", last, k, info.Balance)
						return
					}
					last = k
					seen[k]++
				}
			})

			var operator sync.WaitGroup
			operator.Go(func() {
				for i := range grants {
					<-milestones
					started.Add(1)
					_, err := c.instances[i%len(c.instances)].mgr.AdjustCredits(ctx, acct, granted, "top-up", nil)
					done.Add(1)
					if err != nil {
						t.Errorf("grant %d: %v", i, err)
						return
					}
				}
			})

			work := make(chan int)
			var clientsDone sync.WaitGroup
			for range clients {
				clientsDone.Go(func() {
					for i := range work {
						r := c.call(t, i, "/v1/hash?text=x", key)
						cost, _ := strconv.ParseInt(r.header.Get("X-Credits-Cost"), 10, 64)
						remaining, _ := strconv.ParseInt(r.header.Get("X-Credits-Remaining"), 10, 64)
						inGrants, _ := strconv.ParseInt(r.header.Get("X-Credits-Granted"), 10, 64)
						if r.status != http.StatusOK || cost != 1 {
							t.Errorf("call %d: %d %s, charged %d; want 200, charged 1", i, r.status, r.code, cost)
							continue
						}
						if inGrants < 0 || remaining < inGrants {
							t.Errorf("call %d left %d credits, %d of them granted: a part below zero", i, remaining, inGrants)
						}
						if n := charged.Add(cost); n%(calls/(grants+1)) == 0 && n/(calls/(grants+1)) <= grants {
							milestones <- struct{}{}
						}
						served.Add(1)
					}
				})
			}
			for i := range calls {
				work <- i
			}
			close(work)
			clientsDone.Wait()
			close(milestones) // the operator's grants still due, if calls failed, are made now
			operator.Wait()
			close(stop)
			observer.Wait()

			// Every charge came out of the allowance and the grants, and nothing else did.
			spent := charged.Load()
			want := billing.Balance{Remaining: total + grants*granted - spent, Granted: total + grants*granted - spent, Used: spent}
			for i := range c.instances {
				b := c.balance(t, i, acct)
				if _, err := check(b, grants, grants); err != nil {
					t.Errorf("instance %d in the end: %v", i, err)
				}
				if b.Remaining != want.Remaining || b.Granted != want.Granted || b.Used != want.Used || !b.GrantsLapse.IsZero() {
					t.Errorf("instance %d in the end: remaining %d, granted %d, used %d, next lapse %v; want %d, %d (the allowance and every lot spent), %d, none",
						i, b.Remaining, b.Granted, b.Used, b.GrantsLapse, want.Remaining, want.Granted, want.Used)
				}
			}
			if served.Load() != calls || spent != calls {
				t.Errorf("%d calls served, charged %d; want all %d, one credit each", served.Load(), spent, calls)
			}
			t.Logf("%d calls charged %d; %d grants of %d; balances read while spending the allowance or lot 1, lot 2, lot 3, the lot that never lapses: %v",
				served.Load(), spent, grants, granted, seen)
		})
	}
}
