package storetest

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store"
)

// The rows of TestLedger about a reservation's life (open, then settled or voided at its
// expiry), about the bound on credits and about text a store cannot hold.
var expiryRows = []behaviour[driver.Ledger]{
	{"ExpiredVoidedOnce",
		"A reservation still open at its expiry is voided by the account's next operation: its credits come back and its APIs are uncounted, once.",
		ledExpiredVoidedOnce},
	{"ExpiredVoidedBeforeReserve",
		"Reserve voids the account's expired reservations before it checks the balance.",
		ledExpiredVoidedBeforeReserve},
	{"SettleAfterVoid",
		"Settling a voided reservation returns driver.ErrVoided and changes nothing; a replayed reservation of it takes nothing.",
		ledSettleAfterVoid},
	{"BatchVoided",
		"A voided reservation that names an API once per call gives back all its credits and uncounts every call, once; a partial refund settled after the void changes nothing.",
		ledBatchVoided},
	{"SettleVoidsItsOwnExpired",
		"A settlement made at or after the reservation's expiry finds it voided: driver.ErrVoided, and the credits are back.",
		ledSettleVoidsExpired},
	{"NeverVoidedAfterSettle",
		"A reservation settled before its expiry is never voided: the charge stays after the expiry has passed.",
		ledNeverVoidedAfterSettle},
	{"VoidAcrossRenewal",
		"A reservation that expires after the balance was renewed is voided without crediting the new period.",
		ledVoidAcrossRenewal},
	{"ReserveNeedsExpiry",
		"Reserve with an Expires that is not after Now returns store.ErrConflict and changes nothing.",
		ledReserveNeedsExpiry},
	{"MaxCreditsOpen",
		"Open with a balance or allowance above driver.MaxCredits returns driver.ErrTooManyCredits; exactly MaxCredits is accepted.",
		ledMaxCreditsOpen},
	{"MaxCreditsAdjust",
		"A grant that would take remaining plus used credits past driver.MaxCredits returns driver.ErrTooManyCredits and changes nothing; a refund never passes it.",
		ledMaxCreditsAdjust},
	{"BadText",
		"Text a store cannot hold (a NUL byte, invalid UTF-8) is refused with store.ErrInvalid when written, and reading by it finds nothing; neither is an outage.",
		ledBadText},
}

// The rows that need a [driver.Sweeper]; they are left out for a ledger that is not one.
var sweepRows = []behaviour[driver.Ledger]{
	{"SweepVoidsExpired",
		"Sweep voids the reservations open past their expiry, of every account, and returns how many.",
		ledSweepVoidsExpired},
	{"SweepLeavesUnexpired",
		"Sweep leaves alone the reservations that have not expired, which can then be settled.",
		ledSweepLeavesUnexpired},
	{"SweepLimit",
		"Sweep voids at most limit reservations; the next sweeps void the rest.",
		ledSweepLimit},
	{"SweepAtTheInstant",
		"A reservation is open until the instant it expires: a sweep or a settlement a nanosecond before leaves it open, a sweep at that instant voids it.",
		ledSweepAtTheInstant},
	{"SweepUntilNoneLeft",
		"Sweep voids fewer than limit only when no expired reservation is left, however many accounts have them and however many reservations were settled before their expiry.",
		ledSweepUntilNoneLeft},
	{"ConcurrentSweeps",
		"Sweeps from many goroutines at once void each expired reservation exactly once.",
		ledConcurrentSweeps},
	{"SweepersTogether",
		"Two sweepers that each sweep until a sweep voids fewer than its limit, at the same time, void each expired reservation exactly once and, together, all of them.",
		ledSweepersTogether},
	{"SettleRacesSweep",
		"Settlements racing sweeps end each reservation once: settled (charged) or voided (refunded, and the settlement gets driver.ErrVoided), never both.",
		ledSettleRacesSweep},
}

// An expiring reservation: made at now, open for a minute.
func expiring(acct string, id driver.RequestID, amount int64, now time.Time, apis ...string) driver.Reservation {
	return driver.Reservation{Account: acct, Request: id, APIs: apis, Amount: amount, Period: driver.MonthOf(now),
		Allowance: allowance, Now: now, Expires: now.Add(time.Minute)}
}

// balanceAt checks the balance read at instant now.
func balanceAt(t *testing.T, l driver.Ledger, acct string, now time.Time, remaining, used int64) {
	t.Helper()
	p := driver.MonthOf(now)
	b, err := l.Balance(t.Context(), acct, now, p, allowance)
	if err != nil {
		t.Errorf("Balance(%q) at %s: %v", acct, now.Format(time.TimeOnly), err)
		return
	}
	checkBalance(t, "Balance at "+now.Format(time.DateTime), b, remaining, used, p)
}

func settleAt(t *testing.T, l driver.Ledger, acct string, id driver.RequestID, refund int64, now time.Time, uncount ...string) (driver.Balance, error) {
	t.Helper()
	return l.Settle(t.Context(), driver.Settlement{Account: acct, Request: id, Refund: refund, Uncount: uncount,
		Period: driver.MonthOf(now), Allowance: allowance, Now: now})
}

func ledExpiredVoidedOnce(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	now := nowIn(p0)
	mustReserve(t, l, expiring(acct, newRequest(), 10, now, "hash", "echo"), 90, 10, p0)
	mustReserve(t, l, reservation(acct, newRequest(), 3, p0, "hash"), 87, 13, p0)
	balanceAt(t, l, acct, now.Add(59*time.Second), 87, 13)
	wantUsage(t, l, acct, p0, map[string]int64{"hash": 2, "echo": 1})
	balanceAt(t, l, acct, now.Add(time.Minute), 97, 3)
	wantUsage(t, l, acct, p0, map[string]int64{"hash": 1})
	balanceAt(t, l, acct, now.Add(2*time.Minute), 97, 3)
	wantUsage(t, l, acct, p0, map[string]int64{"hash": 1})
}

func ledExpiredVoidedBeforeReserve(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	now := nowIn(p0)
	mustReserve(t, l, expiring(acct, newRequest(), 10, now, "hash"), 90, 10, p0)
	// 95 is more than the 90 left while the first reservation is open.
	r := expiring(acct, newRequest(), 95, now.Add(time.Minute), "echo")
	mustReserve(t, l, r, 5, 95, p0)
	wantUsage(t, l, acct, p0, map[string]int64{"echo": 1})
}

func ledBatchVoided(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	now := nowIn(p0)
	id := newRequest()
	mustReserve(t, l, expiring(acct, id, 50, now, slices.Repeat([]string{"hash"}, 50)...), 50, 50, p0)
	mustReserve(t, l, reservation(acct, newRequest(), 1, p0, "hash"), 49, 51, p0)
	wantUsage(t, l, acct, p0, map[string]int64{"hash": 51})
	balanceAt(t, l, acct, now.Add(time.Minute), 99, 1)
	wantUsage(t, l, acct, p0, map[string]int64{"hash": 1})
	b, err := settleAt(t, l, acct, id, 2, now.Add(30*time.Second), "hash", "hash")
	if wantErr(t, "a partial refund after the void", err, driver.ErrVoided) {
		checkBalance(t, "a partial refund after the void", b, 99, 1, p0)
	}
	balanceAt(t, l, acct, now.Add(2*time.Minute), 99, 1)
	wantUsage(t, l, acct, p0, map[string]int64{"hash": 1})
}

func ledSettleAfterVoid(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	now := nowIn(p0)
	id := newRequest()
	r := expiring(acct, id, 10, now, "hash")
	mustReserve(t, l, r, 90, 10, p0)
	balanceAt(t, l, acct, now.Add(time.Minute), 100, 0)
	for _, refund := range []int64{0, 10} {
		// A settlement dated before the expiry still finds the reservation voided.
		b, err := settleAt(t, l, acct, id, refund, now.Add(30*time.Second), "hash")
		if wantErr(t, "Settle after the void", err, driver.ErrVoided) {
			checkBalance(t, "Settle after the void", b, 100, 0, p0)
		}
	}
	b, err := l.Reserve(t.Context(), r)
	must(t, "replayed Reserve", err)
	checkBalance(t, "replayed Reserve", b, 100, 0, p0)
	balanceAt(t, l, acct, now.Add(2*time.Minute), 100, 0)
	wantUsage(t, l, acct, p0, nil)
}

func ledSettleVoidsExpired(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	now := nowIn(p0)
	id := newRequest()
	mustReserve(t, l, expiring(acct, id, 10, now, "hash"), 90, 10, p0)
	b, err := settleAt(t, l, acct, id, 0, now.Add(time.Minute))
	if wantErr(t, "Settle at the expiry", err, driver.ErrVoided) {
		checkBalance(t, "Settle at the expiry", b, 100, 0, p0)
	}
	wantUsage(t, l, acct, p0, nil)
}

func ledNeverVoidedAfterSettle(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	now := nowIn(p0)
	kept, refunded := newRequest(), newRequest()
	mustReserve(t, l, expiring(acct, kept, 10, now, "hash"), 90, 10, p0)
	mustReserve(t, l, expiring(acct, refunded, 5, now, "echo"), 85, 15, p0)
	b, err := settleAt(t, l, acct, kept, 0, now.Add(59*time.Second))
	must(t, "Settle keeping the charge", err)
	checkBalance(t, "Settle keeping the charge", b, 85, 15, p0)
	b, err = settleAt(t, l, acct, refunded, 5, now.Add(59*time.Second), "echo")
	must(t, "Settle refunding", err)
	checkBalance(t, "Settle refunding", b, 90, 10, p0)
	balanceAt(t, l, acct, now.Add(time.Hour), 90, 10)
	wantUsage(t, l, acct, p0, map[string]int64{"hash": 1})
	if sw, ok := l.(driver.Sweeper); ok {
		voided, err := sw.Sweep(t.Context(), now.Add(time.Hour), 100)
		must(t, "Sweep", err)
		if voided != 0 {
			t.Errorf("Sweep voided %d settled reservations", voided)
		}
		balanceAt(t, l, acct, now.Add(time.Hour), 90, 10)
	}
	// And settling again after the expiry is still a settled reservation's replay.
	_, err = settleAt(t, l, acct, kept, 0, now.Add(time.Hour))
	must(t, "Settle again after the expiry", err)
}

func ledVoidAcrossRenewal(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	late := p1.Start.Add(-30 * time.Second) // the last half minute of January
	id := newRequest()
	mustReserve(t, l, expiring(acct, id, 10, late, "hash"), 90, 10, p0)
	// February: renewed to the allowance; the void must not credit the new period.
	balanceAt(t, l, acct, p1.Start.Add(time.Hour), allowance, 0)
	wantUsage(t, l, acct, p1, nil)
	_, err := settleAt(t, l, acct, id, 10, p1.Start.Add(time.Hour), "hash")
	wantErr(t, "Settle after the void", err, driver.ErrVoided)
	balanceAt(t, l, acct, p1.Start.Add(time.Hour), allowance, 0)
}

func ledReserveNeedsExpiry(t *testing.T, l driver.Ledger) {
	ctx, n := t.Context(), newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	now := nowIn(p0)
	for _, expires := range []time.Time{{}, now, now.Add(-time.Second)} {
		r := expiring(acct, newRequest(), 10, now, "hash")
		r.Expires = expires
		_, err := l.Reserve(ctx, r)
		wantErr(t, "Reserve expiring at "+expires.String(), err, store.ErrConflict)
	}
	balanceAt(t, l, acct, now, 100, 0)
	wantUsage(t, l, acct, p0, nil)
}

func ledMaxCreditsOpen(t *testing.T, l driver.Ledger) {
	ctx, n := t.Context(), newIDs()
	for _, o := range []driver.Opening{
		{Account: n.id("over"), Balance: driver.MaxCredits + 1, Allowance: allowance, Period: p0},
		{Account: n.id("overallow"), Balance: 1, Allowance: driver.MaxCredits + 1, Period: p0},
		{Account: n.id("huge"), Balance: math.MaxInt64, Allowance: math.MaxInt64, Period: p0},
	} {
		wantErr(t, "Open "+o.Account, l.Open(ctx, o), driver.ErrTooManyCredits)
		_, err := l.Balance(ctx, o.Account, nowIn(p0), p0, allowance)
		wantErr(t, "Balance of the refused account", err, store.ErrNotFound)
	}
	acct := n.id("max")
	must(t, "Open at MaxCredits", l.Open(ctx, driver.Opening{Account: acct, Balance: driver.MaxCredits, Allowance: allowance, Period: p0}))
	b, err := l.Balance(ctx, acct, nowIn(p0), p0, allowance)
	must(t, "Balance", err)
	if b.Remaining != driver.MaxCredits {
		t.Errorf("Remaining %d, want MaxCredits", b.Remaining)
	}
}

func ledMaxCreditsAdjust(t *testing.T, l driver.Ledger) {
	ctx, n := t.Context(), newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	id := newRequest()
	mustReserve(t, l, reservation(acct, id, 40, p0, "hash"), 60, 40, p0)
	// Remaining 60 and used 40: a grant up to MaxCredits-100 fits, one credit more does not.
	for _, amount := range []int64{driver.MaxCredits - 99, math.MaxInt64, driver.MaxCredits} {
		b, err := l.Adjust(ctx, adjustment(acct, newRequest(), amount, p0))
		if wantErr(t, "Adjust past MaxCredits", err, driver.ErrTooManyCredits) {
			checkBalance(t, "Adjust past MaxCredits", b, 60, 40, p0)
		}
	}
	wantBalance(t, l, acct, p0, 60, 40)
	_, err := l.Adjust(ctx, adjustment(acct, newRequest(), driver.MaxCredits-100, p0))
	must(t, "Adjust up to MaxCredits", err)
	wantBalance(t, l, acct, p0, driver.MaxCredits-40, 40)
	// The refund of the open reservation lands exactly on MaxCredits.
	mustSettle(t, l, settlement(acct, id, 40, p0, "hash"), driver.MaxCredits, 0, p0)
	b, err := l.Adjust(ctx, adjustment(acct, newRequest(), 1, p0))
	if wantErr(t, "Adjust at MaxCredits", err, driver.ErrTooManyCredits) {
		checkBalance(t, "Adjust at MaxCredits", b, driver.MaxCredits, 0, p0)
	}
	// Taking the most an int64 can say is short, not an overflow.
	_, err = l.Adjust(ctx, adjustment(acct, newRequest(), math.MinInt64, p0))
	wantErr(t, "Adjust by MinInt64", err, driver.ErrInsufficientCredits)
	wantBalance(t, l, acct, p0, driver.MaxCredits, 0)
}

// badTexts are strings no store can hold.
var badTexts = []string{"nul\x00byte", "bad\xff\xfeutf8", "\x00"}

// wantRefused checks that err reports a value the store cannot hold, or nothing found:
// anything but an outage.
func wantRefused(t *testing.T, op string, err error) {
	t.Helper()
	if !errors.Is(err, store.ErrInvalid) && !errors.Is(err, store.ErrNotFound) {
		t.Errorf("%s: got error %v, want one wrapping %q or %q", op, err, store.ErrInvalid, store.ErrNotFound)
	}
}

func ledBadText(t *testing.T, l driver.Ledger) {
	ctx, n := t.Context(), newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	for _, bad := range badTexts {
		id := n.id(bad)
		err := l.Open(ctx, driver.Opening{Account: id, Balance: 10, Allowance: allowance, Period: p0})
		wantErr(t, "Open of an account "+quote(id), err, store.ErrInvalid)
		_, err = l.Balance(ctx, id, nowIn(p0), p0, allowance)
		wantRefused(t, "Balance of an account "+quote(id), err)
		adj := adjustment(acct, newRequest(), 5, p0)
		adj.Reason = bad
		_, err = l.Adjust(ctx, adj)
		wantErr(t, "Adjust with the reason "+quote(bad), err, store.ErrInvalid)
	}
	wantBalance(t, l, acct, p0, 100, 0)
}

func ledSweepVoidsExpired(t *testing.T, l driver.Ledger) {
	sw := l.(driver.Sweeper)
	n := newIDs()
	now := nowIn(p0)
	a := openAccount(t, l, n, "a", 100, p0)
	b := openAccount(t, l, n, "b", 100, p0)
	mustReserve(t, l, expiring(a, newRequest(), 10, now, "hash"), 90, 10, p0)
	mustReserve(t, l, expiring(a, newRequest(), 20, now.Add(time.Second), "echo"), 70, 30, p0)
	mustReserve(t, l, expiring(b, newRequest(), 5, now, "hash"), 95, 5, p0)
	voided, err := sw.Sweep(t.Context(), now.Add(time.Minute+time.Second), 100)
	must(t, "Sweep", err)
	if voided != 3 {
		t.Errorf("Sweep voided %d reservations, want 3", voided)
	}
	for _, acct := range []string{a, b} {
		wantUsage(t, l, acct, p0, nil)
		balanceAt(t, l, acct, now.Add(2*time.Minute), 100, 0)
	}
	voided, err = sw.Sweep(t.Context(), now.Add(time.Hour), 100)
	must(t, "second Sweep", err)
	if voided != 0 {
		t.Errorf("second Sweep voided %d reservations, want 0", voided)
	}
}

func ledSweepLeavesUnexpired(t *testing.T, l driver.Ledger) {
	sw := l.(driver.Sweeper)
	n := newIDs()
	now := nowIn(p0)
	acct := openAccount(t, l, n, "acct", 100, p0)
	id := newRequest()
	mustReserve(t, l, expiring(acct, id, 10, now, "hash"), 90, 10, p0)
	voided, err := sw.Sweep(t.Context(), now.Add(59*time.Second), 100)
	must(t, "Sweep", err)
	if voided != 0 {
		t.Errorf("Sweep before the expiry voided %d reservations", voided)
	}
	b, err := settleAt(t, l, acct, id, 0, now.Add(59*time.Second))
	must(t, "Settle after the sweep", err)
	checkBalance(t, "Settle after the sweep", b, 90, 10, p0)
	wantUsage(t, l, acct, p0, map[string]int64{"hash": 1})
}

func ledSweepLimit(t *testing.T, l driver.Ledger) {
	sw := l.(driver.Sweeper)
	n := newIDs()
	now := nowIn(p0)
	acct := openAccount(t, l, n, "acct", 100, p0)
	for i := range 5 {
		mustReserve(t, l, expiring(acct, newRequest(), 1, now, "hash"), int64(99-i), int64(i+1), p0)
	}
	later := now.Add(time.Hour)
	for _, sweep := range []struct{ limit, want int }{{2, 2}, {2, 2}, {2, 1}, {100, 0}} {
		voided, err := sw.Sweep(t.Context(), later, sweep.limit)
		must(t, "Sweep", err)
		if voided != sweep.want {
			t.Errorf("Sweep with limit %d voided %d, want %d", sweep.limit, voided, sweep.want)
		}
	}
	balanceAt(t, l, acct, later, 100, 0)
}

func ledSweepAtTheInstant(t *testing.T, l driver.Ledger) {
	sw := l.(driver.Sweeper)
	n := newIDs()
	now := nowIn(p0)
	acct := openAccount(t, l, n, "acct", 100, p0)
	swept, settled := newRequest(), newRequest()
	mustReserve(t, l, expiring(acct, swept, 10, now, "hash"), 90, 10, p0)
	mustReserve(t, l, expiring(acct, settled, 5, now, "echo"), 85, 15, p0)
	expiry := now.Add(time.Minute)
	voided, err := sw.Sweep(t.Context(), expiry.Add(-time.Nanosecond), 100)
	must(t, "Sweep a nanosecond before the expiry", err)
	if voided != 0 {
		t.Errorf("Sweep a nanosecond before the expiry voided %d reservations, want 0", voided)
	}
	b, err := settleAt(t, l, acct, settled, 0, expiry.Add(-time.Nanosecond))
	must(t, "Settle a nanosecond before the expiry", err)
	checkBalance(t, "Settle a nanosecond before the expiry", b, 85, 15, p0)
	voided, err = sw.Sweep(t.Context(), expiry, 100)
	must(t, "Sweep at the expiry", err)
	if voided != 1 {
		t.Errorf("Sweep at the expiry voided %d reservations, want 1", voided)
	}
	balanceAt(t, l, acct, expiry, 95, 5)
	wantUsage(t, l, acct, p0, map[string]int64{"echo": 1})
}

func ledSweepUntilNoneLeft(t *testing.T, l driver.Ledger) {
	sw := l.(driver.Sweeper)
	ctx, n := t.Context(), newIDs()
	now := nowIn(p0)
	later := now.Add(time.Hour)
	// Reservations settled before their expiry, the first to expire, of many accounts.
	const settled, expired = 40, 40
	for i := range settled {
		acct := openAccount(t, l, n, "settled"+strconv.Itoa(i), 100, p0)
		id := newRequest()
		mustReserve(t, l, expiring(acct, id, 1, now, "hash"), 99, 1, p0)
		_, err := settleAt(t, l, acct, id, 0, now.Add(time.Second))
		must(t, "Settle", err)
	}
	// Then reservations left open, one per account, expiring a second later.
	openAll := func(label string) {
		for i := range expired {
			acct := openAccount(t, l, n, label+strconv.Itoa(i), 100, p0)
			mustReserve(t, l, expiring(acct, newRequest(), 1, now.Add(time.Second), "hash"), 99, 1, p0)
		}
	}
	openAll("a")
	// Sweeping as the Service does, until a sweep voids fewer than its limit, voids
	// them all.
	total, sweeps := 0, 0
	for ; sweeps < 2*expired; sweeps++ {
		voided, err := sw.Sweep(ctx, later, 10)
		must(t, "Sweep", err)
		total += voided
		if voided < 10 {
			break
		}
	}
	if total != expired {
		t.Errorf("sweeps with limit 10 voided %d reservations until one voided fewer, want %d", total, expired)
	}
	// One sweep whose limit is larger than the number of accounts voids all of theirs.
	openAll("b")
	voided, err := sw.Sweep(ctx, later, 100)
	must(t, "Sweep", err)
	if voided != expired {
		t.Errorf("one Sweep with limit 100 voided %d reservations of %d accounts, want %d", voided, expired, expired)
	}
	voided, err = sw.Sweep(ctx, later, 100)
	must(t, "last Sweep", err)
	if voided != 0 {
		t.Errorf("the last Sweep voided %d reservations, want 0", voided)
	}
}

func ledConcurrentSweeps(t *testing.T, l driver.Ledger) {
	sw := l.(driver.Sweeper)
	n := newIDs()
	now := nowIn(p0)
	const accounts, each = 4, 6
	var accts []string
	for i := range accounts {
		acct := openAccount(t, l, n, "acct"+string(rune('a'+i)), 100, p0)
		accts = append(accts, acct)
		for j := range each {
			mustReserve(t, l, expiring(acct, newRequest(), 2, now, "hash"), int64(98-2*j), int64(2*j+2), p0)
		}
	}
	var total atomic.Int64
	var wg sync.WaitGroup
	later := now.Add(time.Hour)
	for range 16 {
		wg.Go(func() {
			for range 4 {
				voided, err := sw.Sweep(t.Context(), later, 5)
				if err != nil {
					t.Errorf("Sweep: %v", err)
					return
				}
				total.Add(int64(voided))
			}
		})
	}
	wg.Wait()
	if total.Load() != accounts*each {
		t.Errorf("sweeps voided %d reservations in all, want exactly %d", total.Load(), accounts*each)
	}
	for _, acct := range accts {
		balanceAt(t, l, acct, later, 100, 0)
		wantUsage(t, l, acct, p0, nil)
	}
}

func ledSweepersTogether(t *testing.T, l driver.Ledger) {
	sw := l.(driver.Sweeper)
	n := newIDs()
	now := nowIn(p0)
	const accounts, each, limit = 24, 3, 7
	var accts []string
	for i := range accounts {
		acct := openAccount(t, l, n, "acct"+strconv.Itoa(i), 100, p0)
		accts = append(accts, acct)
		for j := range each {
			mustReserve(t, l, expiring(acct, newRequest(), 2, now, "hash"), int64(98-2*j), int64(2*j+2), p0)
		}
	}
	later := now.Add(time.Hour)
	var voided [2]int
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range voided {
		wg.Go(func() {
			<-start
			for { // as the Service sweeps
				n, err := sw.Sweep(t.Context(), later, limit)
				if err != nil {
					t.Errorf("Sweep: %v", err)
					return
				}
				voided[i] += n
				if n < limit {
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if got := voided[0] + voided[1]; got != accounts*each {
		t.Errorf("the sweepers voided %d and %d reservations, %d in all; want exactly %d", voided[0], voided[1], got, accounts*each)
	}
	if n, err := sw.Sweep(t.Context(), later, limit); err != nil || n != 0 {
		t.Errorf("a sweep after both: %d voided (%v), want none left", n, err)
	}
	for _, acct := range accts {
		balanceAt(t, l, acct, later, 100, 0)
	}
}

func ledSettleRacesSweep(t *testing.T, l driver.Ledger) {
	sw := l.(driver.Sweeper)
	n := newIDs()
	now := nowIn(p0)
	const calls = 32
	acct := openAccount(t, l, n, "acct", 100, p0)
	ids := make([]driver.RequestID, calls)
	for i := range ids {
		ids[i] = newRequest()
		mustReserve(t, l, expiring(acct, ids[i], 1, now, "hash"), int64(99-i), int64(i+1), p0)
	}
	var kept, voided, swept atomic.Int64
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			// Dated before the expiry: only a sweep can void it first.
			_, err := settleAt(t, l, acct, id, 0, now.Add(30*time.Second))
			switch {
			case err == nil:
				kept.Add(1)
			case errors.Is(err, driver.ErrVoided):
				voided.Add(1)
			default:
				t.Errorf("Settle: %v", err)
			}
		})
	}
	raceSweeps(t, &wg, sw, now.Add(time.Minute), calls, &swept)
	if kept.Load()+swept.Load() != calls || voided.Load() > swept.Load() {
		t.Errorf("%d settled, %d voided by sweeps (%d settlements told so): want each of %d reservations ended once",
			kept.Load(), swept.Load(), voided.Load(), calls)
	}
	balanceAt(t, l, acct, now.Add(time.Hour), 100-kept.Load(), kept.Load())
	wantUsage(t, l, acct, p0, map[string]int64{"hash": kept.Load()})
}

// ksBadText is the KeyStore row about text a store cannot hold.
func ksBadText(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	for _, bad := range badTexts {
		acct := auth.Account{ID: n.id(bad), Plan: "p", CreatedAt: t0}
		key := auth.Key{ID: n.id("k"), AccountID: acct.ID, Name: "primary", Primary: true, Hash: newHash(), CreatedAt: t0}
		wantErr(t, "CreateAccount "+quote(acct.ID), s.CreateAccount(ctx, acct, key), store.ErrInvalid)
		_, err := s.Account(ctx, acct.ID)
		wantRefused(t, "Account "+quote(acct.ID), err)
		_, err = allKeys(ctx, s, acct.ID)
		wantRefused(t, "Keys "+quote(acct.ID), err)
		_, err = s.Key(ctx, bad)
		wantRefused(t, "Key "+quote(bad), err)
		_, err = s.RotateKey(ctx, bad, auth.AnyRevision, newHash(), t0)
		wantRefused(t, "RotateKey "+quote(bad), err)
		_, err = s.RevokeKey(ctx, bad, auth.AnyRevision, t0)
		wantRefused(t, "RevokeKey "+quote(bad), err)
	}
	good := auth.Account{ID: n.id("acct"), Plan: "p", CreatedAt: t0}
	primary := auth.Key{ID: n.id("primary"), AccountID: good.ID, Name: "primary", Primary: true, Hash: newHash(), CreatedAt: t0}
	must(t, "CreateAccount", s.CreateAccount(ctx, good, primary))
	for _, bad := range badTexts {
		k := auth.Key{ID: n.id("sub"), AccountID: good.ID, Name: bad, Hash: newHash(), CreatedAt: t0}
		wantErr(t, "CreateKey named "+quote(bad), s.CreateKey(ctx, k, auth.KeyLimit{}), store.ErrInvalid)
	}
	keys, err := allKeys(ctx, s, good.ID)
	must(t, "Keys", err)
	if len(keys) != 1 {
		t.Errorf("the account has %d keys after refused creations, want 1", len(keys))
	}
}

// quote writes s with Go's escapes, so that a message shows the bytes it is about.
func quote(s string) string { return strconv.Quote(s) }

// raceSweeps runs four sweepers at at, voiding three reservations at a time, in wg
// beside the settlements the caller started in it; waits for them all; then voids what
// they left open, up to limit. What the sweeps voided is added to swept.
func raceSweeps(t *testing.T, wg *sync.WaitGroup, sw driver.Sweeper, at time.Time, limit int, swept *atomic.Int64) {
	t.Helper()
	for range 4 {
		wg.Go(func() {
			for range 8 {
				v, err := sw.Sweep(t.Context(), at, 3)
				if err != nil {
					t.Errorf("Sweep: %v", err)
					return
				}
				swept.Add(int64(v))
			}
		})
	}
	wg.Wait()
	v, err := sw.Sweep(t.Context(), at, limit)
	must(t, "last Sweep", err)
	swept.Add(int64(v))
}
