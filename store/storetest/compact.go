package storetest

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/retention"
)

// A CompactingLedger is a ledger that folds its old entries: the stores that
// TestCompactor checks.
type CompactingLedger interface {
	driver.Ledger
	retention.Compactor
}

// TestCompactor checks a [retention.Compactor] that is a ledger: a compaction folds the
// requests whose entries all belong to periods that ended by its instant, and nothing
// else; it changes no answer of the ledger but the replays of the requests it folded;
// and compactions running together fold each request once. newStore must return a
// store of its own at each call (the checks count what a compaction folds), as a fresh
// schema or database does.
func TestCompactor(t *testing.T, newStore func(t *testing.T) CompactingLedger) {
	t.Helper()
	run(t, func(*testing.T) func(*testing.T) CompactingLedger { return newStore }, compactorRows)
}

// The rows get newStore, since a check may need two stores.
var compactorRows = []behaviour[func(*testing.T) CompactingLedger]{
	{"KeepsAnswers",
		"Compact(before) folds the requests whose entries all belong to periods of their account that ended by before, never an open reservation's, and every answer of the ledger after it (balances, usage, settlements of open reservations, replays of the requests it kept, new calls) is the one the ledger gives without it.",
		cmpKeepsAnswers},
	{"Together",
		"Compactions running together, on any instances, and with calls, fold each request once and change no balance.",
		cmpTogether},
}

// An answer is what a ledger answered to one operation, comparable between stores.
type answer struct {
	op      string
	balance driver.Balance
	usage   map[string]int64
	err     string
}

func (a answer) String() string {
	b := a.balance
	return fmt.Sprintf("%s: {Remaining %d Granted %d Used %d Allowance %d Period %s Charge %+v} usage %v error %q",
		a.op, b.Remaining, b.Granted, b.Used, b.Allowance, b.Period.Start.UTC().Format(time.DateOnly), b.Charge, a.usage, a.err)
}

// answers records the answers of one ledger.
type answers struct {
	l    driver.Ledger
	list []answer
}

func (a *answers) add(op string, b driver.Balance, err error) {
	b.Period = driver.Period{Start: b.Period.Start.UTC(), End: b.Period.End.UTC()}
	b.GrantsLapse = b.GrantsLapse.UTC()
	e := ""
	if err != nil {
		e = err.Error()
	}
	a.list = append(a.list, answer{op: op, balance: b, err: e})
}

func (a *answers) usage(t *testing.T, acct string, p driver.Period) {
	u, err := a.l.Usage(t.Context(), acct, p)
	maps.DeleteFunc(u, func(_ string, n int64) bool { return n == 0 })
	e := ""
	if err != nil {
		e = err.Error()
	}
	a.list = append(a.list, answer{op: "Usage " + p.Start.Format("2006-01"), usage: u, err: e})
}

// compactScript is the life of one account over p0 and p1, the same for every store:
// requests settled, refunded, voided at their expiry and adjusted in p0, one reserved
// in p0 and settled in p1, one open across the renewal, and calls in p1.
type compactScript struct {
	acct                       string
	r1, r2, r3, r4, r5, r7, a1 driver.RequestID
}

func newCompactScript(n ids) compactScript {
	return compactScript{acct: n.id("acct"), r1: newRequest(), r2: newRequest(), r3: newRequest(), r4: newRequest(),
		r5: newRequest(), r7: newRequest(), a1: newRequest()}
}

// before runs the script up to the compaction.
func (c compactScript) before(t *testing.T, l driver.Ledger) {
	ctx := t.Context()
	must(t, "Open", l.Open(ctx, driver.Opening{Account: c.acct, Balance: 1000, Allowance: allowance, Period: p0}))
	mustReserve(t, l, reservation(c.acct, c.r1, 10, p0, "a", "b"), 490+500, 10, p0)
	mustSettle(t, l, settlement(c.acct, c.r1, 0, p0), 990, 10, p0)
	mustReserve(t, l, reservation(c.acct, c.r2, 20, p0, "a"), 970, 30, p0)
	mustSettle(t, l, settlement(c.acct, c.r2, 5, p0, "a"), 975, 25, p0)
	mustReserve(t, l, reservation(c.acct, c.r3, 30, p0, "b"), 945, 55, p0)
	now := nowIn(p0)
	mustReserve(t, l, expiring(c.acct, c.r4, 7, now, "a"), 938, 62, p0)
	balanceAt(t, l, c.acct, now.Add(2*time.Minute), 945, 55) // voids r4
	_, err := l.Adjust(ctx, adjustment(c.acct, c.a1, 50, p0))
	must(t, "Adjust", err)
	mustReserve(t, l, reservation(c.acct, c.r7, 3, p0, "a"), 992, 58, p0)
	// p1: the renewal, r7 settled and r5 made.
	_, err = l.Balance(ctx, c.acct, nowIn(p1), p1, allowance)
	must(t, "Balance", err)
	_, err = l.Settle(ctx, settlement(c.acct, c.r7, 0, p1))
	must(t, "Settle", err)
	_, err = l.Reserve(ctx, reservation(c.acct, c.r5, 4, p1, "a"))
	must(t, "Reserve", err)
	_, err = l.Settle(ctx, settlement(c.acct, c.r5, 0, p1))
	must(t, "Settle", err)
}

// after runs the rest of the script and returns every answer.
func (c compactScript) after(t *testing.T, l driver.Ledger) []answer {
	ctx := t.Context()
	a := &answers{l: l}
	b, err := l.Balance(ctx, c.acct, nowIn(p1), p1, allowance)
	a.add("Balance p1", b, err)
	a.usage(t, c.acct, p1)
	a.usage(t, c.acct, p0)
	b, err = l.Settle(ctx, settlement(c.acct, c.r3, 10, p1, "b")) // open since p0
	a.add("Settle r3", b, err)
	b, err = l.Settle(ctx, settlement(c.acct, c.r3, 0, p1))
	a.add("Settle r3 again", b, err)
	b, err = l.Settle(ctx, settlement(c.acct, c.r7, 1, p1))
	a.add("Settle r7 again", b, err)
	b, err = l.Reserve(ctx, reservation(c.acct, c.r5, 4, p1, "a"))
	a.add("Reserve r5 again", b, err)
	b, err = l.Settle(ctx, settlement(c.acct, c.r5, 0, p1))
	a.add("Settle r5 again", b, err)
	r6 := newRequestFrom(c.r5)
	b, err = l.Reserve(ctx, reservation(c.acct, r6, 6, p1, "b"))
	a.add("Reserve r6", b, err)
	b, err = l.Settle(ctx, settlement(c.acct, r6, 2, p1))
	a.add("Settle r6", b, err)
	b, err = l.Balance(ctx, c.acct, nowIn(p1), p1, allowance)
	a.add("Balance p1", b, err)
	a.usage(t, c.acct, p1)
	b, err = l.Balance(ctx, c.acct, nowIn(p2), p2, allowance)
	a.add("Balance p2", b, err)
	return a.list
}

// answerAt returns as[i], or a note that there is none.
func answerAt(as []answer, i int) string {
	if i >= len(as) {
		return "no answer"
	}
	return as[i].String()
}

// newRequestFrom derives a request id from id, the same in every store.
func newRequestFrom(id driver.RequestID) driver.RequestID {
	id[0] ^= 0xff
	return id
}

func cmpKeepsAnswers(t *testing.T, newStore func(*testing.T) CompactingLedger) {
	ctx := t.Context()
	n := newIDs()
	c := newCompactScript(n)
	// twin is a store of its own that runs the same script without a compaction: the
	// answers of both must be the same.
	s, twin := newStore(t), newStore(t)
	c.before(t, s)
	c.before(t, twin)
	if t.Failed() {
		return
	}
	// Before p1 starts, p0 has not ended: nothing is due, and every request is still
	// recognised.
	if k, err := s.Compact(ctx, p1.Start.Add(-time.Second), 100); err != nil || k != 0 {
		t.Fatalf("Compact before p0 ended: %d folded (%v), want none", k, err)
	}
	if _, err := s.Settle(ctx, settlement(c.acct, c.r1, 0, p1)); err != nil {
		t.Errorf("Settle of r1 again, before any compaction: %v, want a replay", err)
	}
	// r1, r2, r4 and a1 lie in p0 alone; r3 is open, r7 was settled in p1 and r5 made in
	// p1. A limit of 3 folds 3, the next call the fourth.
	k1, err := s.Compact(ctx, p1.Start, 3)
	must(t, "Compact", err)
	k2, err := s.Compact(ctx, p1.Start, 3)
	must(t, "Compact", err)
	if k1 != 3 || k2 != 1 {
		t.Errorf("Compact(end of p0), limit 3, twice: %d then %d folded, want 3 then 1 (r1, r2, r4 and a1)", k1, k2)
	}
	if k, err := s.Compact(ctx, p1.Start, 100); err != nil || k != 0 {
		t.Errorf("Compact once more: %d folded (%v), want none", k, err)
	}
	if _, err := twin.Settle(ctx, settlement(c.acct, c.r1, 0, p1)); err != nil {
		t.Errorf("Settle of r1 again, on the twin: %v", err)
	}
	got, want := c.after(t, s), c.after(t, twin)
	for i := range max(len(got), len(want)) {
		if i >= len(got) || i >= len(want) || got[i].String() != want[i].String() {
			t.Errorf("answer %d after a compaction differs from the one without:\n got %v\nwant %v", i, answerAt(got, i), answerAt(want, i))
			break
		}
	}
	// Once p1 has ended too, what is left of p0 and p1 is folded: r3, r7, r5 and r6.
	if k, err := s.Compact(ctx, p2.Start, 100); err != nil || k != 4 {
		t.Errorf("Compact(end of p1): %d folded (%v), want 4 (r3, r7, r5 and r6)", k, err)
	}
	b, err := s.Balance(ctx, c.acct, nowIn(p2), p2, allowance)
	must(t, "Balance", err)
	if last := got[len(got)-1]; b.Remaining != last.balance.Remaining || b.Used != last.balance.Used || b.Granted != last.balance.Granted {
		t.Errorf("Balance after the last compaction: %+v, want %s", b, last)
	}
}

func cmpTogether(t *testing.T, newStore func(*testing.T) CompactingLedger) {
	ctx, s := t.Context(), newStore(t)
	n := newIDs()
	const accounts, calls, limit = 12, 5, 7
	var accts []string
	for i := range accounts {
		acct := openAccount(t, s, n, "acct"+strconv.Itoa(i), 100, p0)
		accts = append(accts, acct)
		for range calls {
			id := newRequest()
			_, err := s.Reserve(ctx, reservation(acct, id, 2, p0, "a"))
			must(t, "Reserve", err)
			_, err = s.Settle(ctx, settlement(acct, id, 1, p0))
			must(t, "Settle", err)
		}
	}
	balances := map[string]driver.Balance{}
	for _, acct := range accts {
		b, err := s.Balance(ctx, acct, nowIn(p1), p1, allowance)
		must(t, "Balance", err)
		balances[acct] = b
	}
	var folded [3]int
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range folded {
		wg.Go(func() {
			<-start
			for { // as a retention.Compaction does
				k, err := s.Compact(ctx, p1.Start, limit)
				if err != nil {
					t.Errorf("Compact: %v", err)
					return
				}
				folded[i] += k
				if k < limit {
					return
				}
			}
		})
	}
	// Calls of p1 go on meanwhile, on every account.
	wg.Go(func() {
		<-start
		for range calls {
			for _, acct := range accts {
				id := newRequest()
				if _, err := s.Reserve(ctx, reservation(acct, id, 2, p1, "a")); err != nil {
					t.Errorf("Reserve during the compactions: %v", err)
					return
				}
				if _, err := s.Settle(ctx, settlement(acct, id, 1, p1)); err != nil {
					t.Errorf("Settle during the compactions: %v", err)
					return
				}
			}
		}
	})
	close(start)
	wg.Wait()
	if got := folded[0] + folded[1] + folded[2]; got != accounts*calls {
		t.Errorf("the compactions folded %v requests, %d in all; want exactly %d", folded, got, accounts*calls)
	}
	if k, err := s.Compact(ctx, p1.Start, limit); err != nil || k != 0 {
		t.Errorf("a compaction after them: %d folded (%v), want none left", k, err)
	}
	for _, acct := range slices.Sorted(maps.Keys(balances)) {
		b, err := s.Balance(ctx, acct, nowIn(p1), p1, allowance)
		must(t, "Balance", err)
		if want := balances[acct]; b.Remaining != want.Remaining-calls || b.Used != want.Used+calls {
			t.Errorf("Balance(%q) after the compactions and %d calls that kept 1 credit each: %+v, want %d remaining and %d used",
				acct, calls, b, want.Remaining-calls, want.Used+calls)
		}
	}
}
