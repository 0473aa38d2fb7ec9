package storetest

import (
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/billing/driver"
)

// SweepInstances are several instances of one store's ledger, as the processes of a
// deployment would each hold, for [TestSweepers].
type SweepInstances struct {
	// Ledgers are the instances: each a driver.Sweeper, all over the same data.
	Ledgers []driver.Ledger
	// RoundTrips, when not nil, returns how many round trips to the store the
	// instances have made so far, together (a pipeline counts once). Without it the
	// suite checks the outcomes only.
	RoundTrips func() int64
}

// TestSweepers checks how the instances of a [driver.Sweeper] share the sweeps: that
// concurrent sweepers divide the expired reservations among them, voiding each once,
// and that a sweep which finds nothing due costs a bounded number of round trips,
// whatever the number of accounts with recent activity. newInstances returns n
// instances over a fresh store (or one that the suite's unique ids keep apart).
func TestSweepers(t *testing.T, newInstances func(t *testing.T, n int) SweepInstances) {
	t.Helper()
	run(t, func(t *testing.T) func(int) SweepInstances {
		return func(n int) SweepInstances { return newInstances(t, n) }
	}, sweeperRows)
}

var sweeperRows = []behaviour[func(int) SweepInstances]{
	{"SweepersShareWork",
		"Three instances that sweep at once, each as the Service does, void each expired reservation once and all of them together; their round trips together stay within twice those of one instance sweeping alone, not one pass each.",
		swShareWork},
	{"NothingDueBounded",
		"A sweep that finds nothing due costs the same, bounded, round trips whether 8 or 200 accounts were active since the last sweep.",
		swNothingDueBounded},
}

// sweepLimit is the limit of the sweeps of TestSweepers, as the Service passes.
const sweepLimit = 10

// sweepAsService sweeps with sw until a sweep voids fewer than sweepLimit, and returns
// how many it voided.
func sweepAsService(t *testing.T, sw driver.Sweeper, at time.Time) int {
	total := 0
	for range 1000 {
		n, err := sw.Sweep(t.Context(), at, sweepLimit)
		if err != nil {
			t.Errorf("Sweep: %v", err)
			return total
		}
		total += n
		if n < sweepLimit {
			return total
		}
	}
	t.Errorf("a sweeper swept 1000 times without voiding fewer than %d", sweepLimit)
	return total
}

// backlog opens accounts accounts through the instances in turn, each with each
// reservations of 2 credits that expire a minute after now, and returns the accounts
// and the reservations' ids by account.
func backlog(t *testing.T, ls []driver.Ledger, n ids, label string, accounts, each int, now time.Time) ([]string, [][]driver.RequestID) {
	accts := make([]string, accounts)
	reqs := make([][]driver.RequestID, accounts)
	for i := range accounts {
		l := ls[i%len(ls)]
		accts[i] = openAccount(t, l, n, label+strconv.Itoa(i), 100, p0)
		for j := range each {
			id := newRequest()
			reqs[i] = append(reqs[i], id)
			mustReserve(t, l, expiring(accts[i], id, 2, now, "hash"), int64(98-2*j), int64(2*j+2), p0)
		}
	}
	return accts, reqs
}

// roundTrips returns the round trips of f, or 0 when they cannot be counted.
func (s SweepInstances) roundTrips(f func()) int64 {
	if s.RoundTrips == nil {
		f()
		return 0
	}
	before := s.RoundTrips()
	f()
	return s.RoundTrips() - before
}

func swShareWork(t *testing.T, newInstances func(int) SweepInstances) {
	const sweepers, accounts, each = 3, 48, 2
	s := newInstances(sweepers)
	n := newIDs()
	now := nowIn(p0)
	later := now.Add(time.Hour)

	// One instance alone, for the round trips the work takes.
	_, _ = backlog(t, s.Ledgers, n, "alone", accounts, each, now)
	var alone int
	aloneTrips := s.roundTrips(func() { alone = sweepAsService(t, s.Ledgers[0].(driver.Sweeper), later) })
	if alone != accounts*each {
		t.Fatalf("one sweeper alone voided %d reservations, want %d", alone, accounts*each)
	}
	idleTrips := s.roundTrips(func() { sweepAsService(t, s.Ledgers[0].(driver.Sweeper), later) })

	// The same work again, for the sweepers together.
	accts, reqs := backlog(t, s.Ledgers, n, "together", accounts, each, now)
	var voided [sweepers]int
	var wg sync.WaitGroup
	start := make(chan struct{})
	together := s.roundTrips(func() {
		for i := range sweepers {
			wg.Go(func() {
				<-start
				voided[i] = sweepAsService(t, s.Ledgers[i].(driver.Sweeper), later)
			})
		}
		close(start)
		wg.Wait()
	})
	sum := 0
	for _, v := range voided {
		sum += v
	}
	if sum != accounts*each {
		t.Errorf("the sweepers voided %v reservations, %d in all; want exactly %d", voided, sum, accounts*each)
	}
	if left, err := s.Ledgers[0].(driver.Sweeper).Sweep(t.Context(), later, sweepLimit); err != nil || left != 0 {
		t.Errorf("a sweep after the sweepers: %d voided (%v), want none left", left, err)
	}
	// Each voided once: its settlement finds it voided, and every balance is whole.
	for i, acct := range accts {
		for _, id := range reqs[i] {
			_, err := settleAt(t, s.Ledgers[i%sweepers], acct, id, 0, later)
			if !errors.Is(err, driver.ErrVoided) {
				t.Errorf("Settle of a swept reservation of %s: %v, want driver.ErrVoided", acct, err)
			}
		}
		balanceAt(t, s.Ledgers[0], acct, later, 100, 0)
	}
	// Shared, not repeated: one pass each would take about sweepers times the round
	// trips of the work alone.
	if s.RoundTrips != nil {
		bound := 2*aloneTrips + sweepers*(idleTrips+2)
		if together > bound {
			t.Errorf("the %d sweepers together made %d round trips; one alone made %d for the same work (and %d to find nothing due): want at most %d",
				sweepers, together, aloneTrips, idleTrips, bound)
		}
		t.Logf("round trips: %d alone, %d for %d sweepers together, %d for a sweep as the Service does that finds nothing due", aloneTrips, together, sweepers, idleTrips)
	}
}

func swNothingDueBounded(t *testing.T, newInstances func(int) SweepInstances) {
	s := newInstances(1)
	l := s.Ledgers[0]
	sw := l.(driver.Sweeper)
	n := newIDs()
	now := nowIn(p0)
	// Accounts active: a reservation settled before its expiry, and one open that
	// expires in an hour.
	active := func(label string, accounts int) {
		for i := range accounts {
			acct := openAccount(t, l, n, label+strconv.Itoa(i), 100, p0)
			id := newRequest()
			mustReserve(t, l, expiring(acct, id, 1, now, "hash"), 99, 1, p0)
			_, err := settleAt(t, l, acct, id, 0, now.Add(time.Second))
			must(t, "Settle", err)
			r := expiring(acct, newRequest(), 1, now, "hash")
			r.Expires = now.Add(time.Hour)
			mustReserve(t, l, r, 98, 2, p0)
		}
	}
	at := now.Add(2 * time.Minute) // the settled reservations' expiries have passed
	idle := func(accounts int) int64 {
		// The first sweep after the activity may tidy what it left; the next finds
		// nothing due.
		first, err := sw.Sweep(t.Context(), at, sweepLimit)
		if err != nil || first != 0 {
			t.Fatalf("a sweep with nothing due (%d accounts active): %d voided (%v), want 0", accounts, first, err)
		}
		return s.roundTrips(func() {
			v, err := sw.Sweep(t.Context(), at, sweepLimit)
			if err != nil || v != 0 {
				t.Errorf("a sweep with nothing due (%d accounts active): %d voided (%v), want 0", accounts, v, err)
			}
		})
	}
	active("few", 8)
	few := idle(8)
	active("many", 200)
	many := idle(208)
	if s.RoundTrips == nil {
		return
	}
	if many != few || many > 64 {
		t.Errorf("a sweep with nothing due made %d round trips with 8 accounts active, %d with 208: want the same, and at most 64", few, many)
	}
	t.Logf("a sweep with nothing due: %d round trips", many)
}
