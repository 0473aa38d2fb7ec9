package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store"
)

// TestLedger checks that a [driver.Ledger] behaves as its documentation says: balances
// never go below zero, no charge is lost, no request is charged twice, a refund is given
// at most once, and renewal is lazy and never goes back.
//
// newLedger is called once per subtest and must return an empty ledger; it registers any
// teardown with t.Cleanup. The subtests run in parallel. Run the suite with -race.
//
// The reservations' rows check their life: open until settled, or voided at their
// expiry, exactly once, and the rows of a [driver.Sweeper] (run when the ledger is one,
// which newLedger is called once more to learn) check sweeps racing each other and
// settlements.
func TestLedger(t *testing.T, newLedger func(t *testing.T) driver.Ledger) {
	t.Helper()
	rows := append(append(append(slices.Clone(ledgerRows), expiryRows...), grantRows...), allowanceRows...)
	if _, ok := newLedger(t).(driver.Sweeper); ok {
		rows = append(append(rows, sweepRows...), grantSweepRows...)
	}
	run(t, newLedger, rows)
}

var ledgerRows = []behaviour[driver.Ledger]{
	{"OpenThenBalance",
		"Balance after Open reports the opening balance, nothing used, the allowance and the period.",
		ledOpenThenBalance},
	{"OpenTwice",
		"Opening an account that has a balance returns store.ErrConflict and leaves the balance as it was.",
		ledOpenTwice},
	{"OpenNegative",
		"Open with a negative balance returns store.ErrInvalid naming the account and opens nothing: the account has no balance until an Open with a balance of zero or more.",
		ledOpenNegative},
	{"UnknownAccount",
		"Every operation on an account without a balance returns store.ErrNotFound naming the account.",
		ledUnknownAccount},
	{"ReserveDebitsAndCounts",
		"Reserve takes Amount from Remaining, adds it to Used and counts one call per API.",
		ledReserveDebitsAndCounts},
	{"ReserveInsufficient",
		"Reserve over the balance returns driver.ErrInsufficientCredits, reports the current balance, changes nothing and is not remembered.",
		ledReserveInsufficient},
	{"ReserveFree",
		"A reservation of zero credits (a free API) is taken even at a zero balance: it counts its calls, charges nothing, and settles like any other.",
		ledReserveFree},
	{"ReserveNegative",
		"Reserve with a negative amount returns store.ErrConflict and changes nothing: no credits are given, no call is counted, and the request id is not remembered.",
		ledReserveNegative},
	{"ReserveIdempotent",
		"A reservation replayed with the same request id charges once and returns the current balance.",
		ledReserveIdempotent},
	{"ReserveReplayAfterSettle",
		"Replaying a reservation that was already settled charges nothing.",
		ledReserveReplayAfterSettle},
	{"SettleRefund",
		"Settle with a full refund gives the credits back, takes them off Used and uncounts the listed APIs.",
		ledSettleRefund},
	{"SettleKeep",
		"Settle with no refund keeps the charge and the usage counts.",
		ledSettleKeep},
	{"SettlePartialRefund",
		"Settle with a partial refund gives back exactly Refund and uncounts only the listed APIs.",
		ledSettlePartialRefund},
	{"BatchPartialRefund",
		"A reservation that names an API once per call (a batch of calls) counts each; a settlement refunding some of them gives back exactly their credits and uncounts each listed once, and a second settlement changes nothing.",
		ledBatchPartialRefund},
	{"SettleTwice",
		"Settling a settled reservation again is not an error and refunds nothing more.",
		ledSettleTwice},
	{"SettleUnknown",
		"Settle of a request id that was never reserved returns store.ErrNotFound.",
		ledSettleUnknown},
	{"SettleRefundTooLarge",
		"Settle with a refund above the reserved amount returns store.ErrConflict and leaves the reservation open.",
		ledSettleRefundTooLarge},
	{"SettleUnknownRemembersNothing",
		"Settle of an unknown request id returns store.ErrNotFound, changes nothing and leaves the id unknown: a reservation or an adjustment made with it afterwards is taken as any new one.",
		ledSettleUnknownRemembersNothing},
	{"SettleClosedWhateverRefund",
		"A settlement of a reservation that is no longer open answers as the reservation ended, whatever its refund: a settled one as a replay (the current balance, no error, nothing changed), a voided one with driver.ErrVoided; only an open reservation's refund is checked against its amount.",
		ledSettleClosedWhateverRefund},
	{"SettleNegativeRefund",
		"Settle with a negative refund returns store.ErrConflict whatever the reservation's state (open, settled, voided or unknown), and changes nothing.",
		ledSettleNegativeRefund},
	{"SettleAdjustmentID",
		"Settle naming an adjustment's request id (request ids are one namespace) changes nothing and returns the current balance without an error, as a replay does.",
		ledSettleAdjustmentID},
	{"RenewalResetsBalance",
		"An operation given a later period resets Remaining to the allowance, Used to zero and the usage to empty.",
		ledRenewalResetsBalance},
	{"RenewalBeforeWrite",
		"Reserve and Adjust given a later period renew the balance first and then apply to it.",
		ledRenewalBeforeWrite},
	{"EarlierPeriodNeverMovesBack",
		"An operation given an earlier period (a lagging clock) never moves the balance back to that period.",
		ledEarlierPeriod},
	{"RefundAcrossRenewal",
		"A refund of a reservation made in an earlier period is not credited, and its APIs are not uncounted, after renewal.",
		ledRefundAcrossRenewal},
	{"AdjustGrant",
		"A positive Adjust adds to Remaining and leaves Used alone.",
		ledAdjustGrant},
	{"AdjustTake",
		"A negative Adjust takes from Remaining, down to exactly zero.",
		ledAdjustTake},
	{"AdjustBelowZero",
		"A negative Adjust larger than the balance returns driver.ErrInsufficientCredits and changes nothing.",
		ledAdjustBelowZero},
	{"AdjustIdempotent",
		"An adjustment replayed with the same request id is applied once.",
		ledAdjustIdempotent},
	{"UsageOtherPeriod",
		"Usage for a period other than the stored one is empty.",
		ledUsageOtherPeriod},
	{"NoAliasing",
		"The ledger keeps no reference to slices passed in or maps returned: changing them afterwards changes nothing stored.",
		ledNoAliasing},
	{"CanceledContext",
		"Every method given a canceled context returns an error matching context.Canceled and changes nothing.",
		ledCanceledContext},
	{"ConcurrentSpending",
		"Concurrent reservations never overdraw: exactly balance/cost succeed, the rest get ErrInsufficientCredits, and every observed balance is consistent.",
		ledConcurrentSpending},
	{"ConcurrentSettleOnce",
		"A reservation settled from many goroutines at once is refunded exactly once.",
		ledConcurrentSettleOnce},
	{"ConcurrentReplay",
		"A reservation replayed from many goroutines at once is charged exactly once.",
		ledConcurrentReplay},
	{"ConcurrentReserveSettle",
		"Concurrent reservations and settlements lose no charge and no refund.",
		ledConcurrentReserveSettle},
	{"ConcurrentRenewal",
		"Many goroutines reaching a new period at once renew the balance once, and every reservation is charged after it.",
		ledConcurrentRenewal},
	{"ConcurrentAdjustReplay",
		"Adjustments replayed from many goroutines at once are each applied exactly once.",
		ledConcurrentAdjustReplay},
}

// The periods of the ledger checks: January, February and March 2030.
var (
	p0 = driver.MonthOf(t0)
	p1 = driver.MonthOf(t0.AddDate(0, 1, 0))
	p2 = driver.MonthOf(t0.AddDate(0, 2, 0))
)

// The allowance passed to every operation unless a check says otherwise.
const allowance = 500

func samePeriod(a, b driver.Period) bool { return a.Start.Equal(b.Start) && a.End.Equal(b.End) }

// openAccount opens a fresh account with the given balance in period p.
func openAccount(t *testing.T, l driver.Ledger, n ids, label string, balance int64, p driver.Period) string {
	t.Helper()
	acct := n.id(label)
	must(t, "Open", l.Open(t.Context(), driver.Opening{Account: acct, Balance: balance, Allowance: allowance, Period: p}))
	return acct
}

// nowIn returns the instant of the operations in period p: the 15th, at noon.
func nowIn(p driver.Period) time.Time { return p.Start.Add(14*24*time.Hour + 12*time.Hour) }

// hold is how long the reservations of the checks that are not about expiry stay
// open: longer than the periods those checks move through.
const hold = 90 * 24 * time.Hour

func reservation(acct string, id driver.RequestID, amount int64, p driver.Period, apis ...string) driver.Reservation {
	now := nowIn(p)
	return driver.Reservation{Account: acct, Request: id, APIs: apis, Amount: amount, Period: p, Allowance: allowance,
		Now: now, Expires: now.Add(hold)}
}

func settlement(acct string, id driver.RequestID, refund int64, p driver.Period, uncount ...string) driver.Settlement {
	return driver.Settlement{Account: acct, Request: id, Refund: refund, Uncount: uncount, Period: p, Allowance: allowance, Now: nowIn(p)}
}

func adjustment(acct string, id driver.RequestID, amount int64, p driver.Period) driver.Adjustment {
	return driver.Adjustment{Account: acct, Request: id, Amount: amount, Reason: "storetest", Period: p, Allowance: allowance, Now: nowIn(p)}
}

// checkBalance reports how got differs from the expected remaining, used and period.
// The allowance is always [allowance].
func checkBalance(t *testing.T, op string, got driver.Balance, remaining, used int64, p driver.Period) {
	t.Helper()
	if got.Remaining != remaining || got.Used != used || got.Allowance != allowance || !samePeriod(got.Period, p) {
		t.Errorf("%s: balance {Remaining %d, Used %d, Allowance %d, Period %v..%v}, want {Remaining %d, Used %d, Allowance %d, Period %v..%v}",
			op, got.Remaining, got.Used, got.Allowance, got.Period.Start.Format("2006-01-02"), got.Period.End.Format("2006-01-02"),
			remaining, used, allowance, p.Start.Format("2006-01-02"), p.End.Format("2006-01-02"))
	}
}

// wantBalance checks the stored balance, read at period p.
func wantBalance(t *testing.T, l driver.Ledger, acct string, p driver.Period, remaining, used int64) {
	t.Helper()
	b, err := l.Balance(t.Context(), acct, nowIn(p), p, allowance)
	if err != nil {
		t.Errorf("Balance(%q): %v", acct, err)
		return
	}
	checkBalance(t, "Balance", b, remaining, used, p)
}

// wantUsage checks Usage at p, ignoring APIs counted zero times.
func wantUsage(t *testing.T, l driver.Ledger, acct string, p driver.Period, want map[string]int64) {
	t.Helper()
	got, err := l.Usage(t.Context(), acct, p)
	if err != nil {
		t.Errorf("Usage(%q): %v", acct, err)
		return
	}
	// A count of zero and no count are the same usage: a race may leave none charged.
	zero := func(_ string, n int64) bool { return n == 0 }
	maps.DeleteFunc(got, zero)
	want = maps.Clone(want)
	maps.DeleteFunc(want, zero)
	if !maps.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
		t.Errorf("Usage(%q, %s): got %v, want %v", acct, p.Start.Format("2006-01"), got, want)
	}
}

// mustReserve reserves and checks the returned balance.
func mustReserve(t *testing.T, l driver.Ledger, r driver.Reservation, remaining, used int64, p driver.Period) {
	t.Helper()
	b, err := l.Reserve(t.Context(), r)
	must(t, "Reserve", err)
	checkBalance(t, "Reserve", b, remaining, used, p)
}

// mustSettle settles and checks the returned balance.
func mustSettle(t *testing.T, l driver.Ledger, s driver.Settlement, remaining, used int64, p driver.Period) {
	t.Helper()
	b, err := l.Settle(t.Context(), s)
	must(t, "Settle", err)
	checkBalance(t, "Settle", b, remaining, used, p)
}

func ledOpenThenBalance(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 1000, p0)
	wantBalance(t, l, acct, p0, 1000, 0)
	wantUsage(t, l, acct, p0, nil)
}

func ledOpenTwice(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 1000, p0)
	err := l.Open(t.Context(), driver.Opening{Account: acct, Balance: 7, Allowance: allowance, Period: p0})
	wantErr(t, "second Open", err, store.ErrConflict)
	wantBalance(t, l, acct, p0, 1000, 0)
}

func ledOpenNegative(t *testing.T, l driver.Ledger) {
	ctx, n := t.Context(), newIDs()
	acct := n.id("acct")
	err := l.Open(ctx, driver.Opening{Account: acct, Balance: -5, Allowance: allowance, Period: p0})
	wantNamed(t, "Open with a balance of -5", err, store.ErrInvalid, acct)
	_, err = l.Balance(ctx, acct, nowIn(p0), p0, allowance)
	wantErr(t, "Balance after the refused Open", err, store.ErrNotFound)
	must(t, "Open with a balance of 0", l.Open(ctx, driver.Opening{Account: acct, Balance: 0, Allowance: allowance, Period: p0}))
	wantBalance(t, l, acct, p0, 0, 0)
}

func ledUnknownAccount(t *testing.T, l driver.Ledger) {
	ctx, n := t.Context(), newIDs()
	openAccount(t, l, n, "acct", 1000, p0)
	ghost := n.id("ghost")
	id := newRequest()

	_, err := l.Reserve(ctx, reservation(ghost, id, 1, p0, "hash"))
	wantNamed(t, "Reserve", err, store.ErrNotFound, ghost)
	_, err = l.Settle(ctx, settlement(ghost, id, 0, p0))
	wantNamed(t, "Settle", err, store.ErrNotFound, ghost)
	_, err = l.Adjust(ctx, adjustment(ghost, id, 10, p0))
	wantNamed(t, "Adjust", err, store.ErrNotFound, ghost)
	_, err = l.Balance(ctx, ghost, nowIn(p0), p0, allowance)
	wantNamed(t, "Balance", err, store.ErrNotFound, ghost)
	_, err = l.Usage(ctx, ghost, p0)
	wantNamed(t, "Usage", err, store.ErrNotFound, ghost)
	// Operations at a later period must not conjure up a balance either.
	_, err = l.Balance(ctx, ghost, nowIn(p1), p1, allowance)
	wantNamed(t, "Balance at a later period", err, store.ErrNotFound, ghost)
}

func ledReserveDebitsAndCounts(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	mustReserve(t, l, reservation(acct, newRequest(), 3, p0, "hash", "echo"), 97, 3, p0)
	mustReserve(t, l, reservation(acct, newRequest(), 5, p0, "hash"), 92, 8, p0)
	wantBalance(t, l, acct, p0, 92, 8)
	wantUsage(t, l, acct, p0, map[string]int64{"hash": 2, "echo": 1})
}

func ledReserveInsufficient(t *testing.T, l driver.Ledger) {
	ctx, n := t.Context(), newIDs()
	acct := openAccount(t, l, n, "acct", 10, p0)

	b, err := l.Reserve(ctx, reservation(acct, newRequest(), 11, p0, "hash"))
	wantErr(t, "Reserve over the balance", err, driver.ErrInsufficientCredits)
	if b.Remaining != 10 {
		t.Errorf("Reserve over the balance reported Remaining %d, want the current 10", b.Remaining)
	}
	wantBalance(t, l, acct, p0, 10, 0)
	wantUsage(t, l, acct, p0, nil)

	mustReserve(t, l, reservation(acct, newRequest(), 10, p0, "hash"), 0, 10, p0)

	id := newRequest()
	b, err = l.Reserve(ctx, reservation(acct, id, 1, p0, "echo"))
	wantErr(t, "Reserve at a zero balance", err, driver.ErrInsufficientCredits)
	if b.Remaining != 0 {
		t.Errorf("Reserve at a zero balance reported Remaining %d, want 0", b.Remaining)
	}
	wantBalance(t, l, acct, p0, 0, 10)
	wantUsage(t, l, acct, p0, map[string]int64{"hash": 1})

	// The refused request was not recorded: once credits are granted, it goes through.
	_, err = l.Adjust(ctx, adjustment(acct, newRequest(), 5, p0))
	must(t, "Adjust", err)
	mustReserve(t, l, reservation(acct, id, 1, p0, "echo"), 4, 11, p0)
}

func ledReserveFree(t *testing.T, l driver.Ledger) {
	ctx, n := t.Context(), newIDs()
	acct := openAccount(t, l, n, "acct", 0, p0)
	id := newRequest()
	mustReserve(t, l, reservation(acct, id, 0, p0, "status"), 0, 0, p0)
	mustReserve(t, l, reservation(acct, newRequest(), 0, p0, "status"), 0, 0, p0)
	wantUsage(t, l, acct, p0, map[string]int64{"status": 2})
	if _, err := l.Settle(ctx, settlement(acct, id, 0, p0)); err != nil {
		t.Fatalf("Settle of a free reservation: %v", err)
	}
	wantBalance(t, l, acct, p0, 0, 0)
	wantUsage(t, l, acct, p0, map[string]int64{"status": 2})
}

func ledReserveNegative(t *testing.T, l driver.Ledger) {
	ctx, n := t.Context(), newIDs()
	acct := openAccount(t, l, n, "acct", 10, p0)
	id := newRequest()
	_, err := l.Reserve(ctx, reservation(acct, id, -5, p0, "hash"))
	wantErr(t, "Reserve of -5 credits", err, store.ErrConflict)
	wantBalance(t, l, acct, p0, 10, 0)
	wantUsage(t, l, acct, p0, nil)
	// The refused request was not recorded: the same id with a valid amount is charged.
	mustReserve(t, l, reservation(acct, id, 3, p0, "hash"), 7, 3, p0)
	wantUsage(t, l, acct, p0, map[string]int64{"hash": 1})
}

func ledReserveIdempotent(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	id := newRequest()
	mustReserve(t, l, reservation(acct, id, 7, p0, "hash"), 93, 7, p0)
	mustReserve(t, l, reservation(acct, id, 7, p0, "hash"), 93, 7, p0)
	mustReserve(t, l, reservation(acct, id, 50, p0, "hash", "echo"), 93, 7, p0)
	wantBalance(t, l, acct, p0, 93, 7)
	wantUsage(t, l, acct, p0, map[string]int64{"hash": 1})
}

func ledReserveReplayAfterSettle(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	id := newRequest()
	mustReserve(t, l, reservation(acct, id, 10, p0, "hash"), 90, 10, p0)
	mustSettle(t, l, settlement(acct, id, 10, p0, "hash"), 100, 0, p0)
	mustReserve(t, l, reservation(acct, id, 10, p0, "hash"), 100, 0, p0)
	wantBalance(t, l, acct, p0, 100, 0)
	wantUsage(t, l, acct, p0, nil)
}

func ledSettleRefund(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	id := newRequest()
	mustReserve(t, l, reservation(acct, newRequest(), 4, p0, "hash"), 96, 4, p0)
	mustReserve(t, l, reservation(acct, id, 10, p0, "hash", "echo"), 86, 14, p0)
	mustSettle(t, l, settlement(acct, id, 10, p0, "hash", "echo"), 96, 4, p0)
	wantBalance(t, l, acct, p0, 96, 4)
	wantUsage(t, l, acct, p0, map[string]int64{"hash": 1})
}

func ledSettleKeep(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	id := newRequest()
	mustReserve(t, l, reservation(acct, id, 10, p0, "hash", "echo"), 90, 10, p0)
	mustSettle(t, l, settlement(acct, id, 0, p0), 90, 10, p0)
	wantBalance(t, l, acct, p0, 90, 10)
	wantUsage(t, l, acct, p0, map[string]int64{"hash": 1, "echo": 1})
}

func ledSettlePartialRefund(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	id := newRequest()
	mustReserve(t, l, reservation(acct, id, 10, p0, "hash", "echo"), 90, 10, p0)
	mustSettle(t, l, settlement(acct, id, 4, p0, "echo"), 94, 6, p0)
	wantBalance(t, l, acct, p0, 94, 6)
	wantUsage(t, l, acct, p0, map[string]int64{"hash": 1})
}

func ledBatchPartialRefund(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 500, p0)
	id := newRequest()
	apis := slices.Repeat([]string{"hash"}, 100)
	mustReserve(t, l, reservation(acct, id, 200, p0, append(apis, "echo", "echo")...), 300, 200, p0)
	wantUsage(t, l, acct, p0, map[string]int64{"hash": 100, "echo": 2})
	// Three hash calls and one echo call failed on the service's side, 2 credits each.
	mustSettle(t, l, settlement(acct, id, 8, p0, "hash", "echo", "hash", "hash"), 308, 192, p0)
	wantUsage(t, l, acct, p0, map[string]int64{"hash": 97, "echo": 1})
	mustSettle(t, l, settlement(acct, id, 200, p0, apis...), 308, 192, p0)
	wantBalance(t, l, acct, p0, 308, 192)
	wantUsage(t, l, acct, p0, map[string]int64{"hash": 97, "echo": 1})
}

func ledSettleTwice(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	id := newRequest()
	mustReserve(t, l, reservation(acct, id, 10, p0, "hash", "echo"), 90, 10, p0)
	mustSettle(t, l, settlement(acct, id, 10, p0, "hash"), 100, 0, p0)
	mustSettle(t, l, settlement(acct, id, 10, p0, "hash", "echo"), 100, 0, p0)
	mustSettle(t, l, settlement(acct, id, 0, p0), 100, 0, p0)
	wantBalance(t, l, acct, p0, 100, 0)
	wantUsage(t, l, acct, p0, map[string]int64{"echo": 1})
}

func ledSettleUnknown(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	mustReserve(t, l, reservation(acct, newRequest(), 10, p0, "hash"), 90, 10, p0)
	_, err := l.Settle(t.Context(), settlement(acct, newRequest(), 0, p0))
	wantErr(t, "Settle of an unknown request", err, store.ErrNotFound)
	wantBalance(t, l, acct, p0, 90, 10)
}

func ledSettleRefundTooLarge(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	id := newRequest()
	mustReserve(t, l, reservation(acct, id, 10, p0, "hash"), 90, 10, p0)
	_, err := l.Settle(t.Context(), settlement(acct, id, 11, p0, "hash"))
	wantErr(t, "Settle refunding more than was reserved", err, store.ErrConflict)
	wantBalance(t, l, acct, p0, 90, 10)
	wantUsage(t, l, acct, p0, map[string]int64{"hash": 1})
	mustSettle(t, l, settlement(acct, id, 10, p0, "hash"), 100, 0, p0)
}

func ledSettleUnknownRemembersNothing(t *testing.T, l driver.Ledger) {
	ctx, n := t.Context(), newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	reserved, adjusted := newRequest(), newRequest()
	for _, id := range []driver.RequestID{reserved, adjusted} {
		_, err := l.Settle(ctx, settlement(acct, id, 0, p0))
		wantErr(t, "Settle of an unknown request", err, store.ErrNotFound)
		_, err = l.Settle(ctx, settlement(acct, id, 5, p0))
		wantErr(t, "Settle of an unknown request again", err, store.ErrNotFound)
	}
	wantBalance(t, l, acct, p0, 100, 0)
	mustReserve(t, l, reservation(acct, reserved, 10, p0, "hash"), 90, 10, p0)
	b, err := l.Adjust(ctx, adjustment(acct, adjusted, 7, p0))
	must(t, "Adjust with the id of an unknown settlement", err)
	checkBalance(t, "Adjust with the id of an unknown settlement", b, 97, 10, p0)
	mustSettle(t, l, settlement(acct, reserved, 10, p0, "hash"), 107, 0, p0)
	wantUsage(t, l, acct, p0, nil)
}

func ledSettleClosedWhateverRefund(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	now := nowIn(p0)
	settled, voided := newRequest(), newRequest()
	mustReserve(t, l, reservation(acct, settled, 10, p0, "hash"), 90, 10, p0)
	mustSettle(t, l, settlement(acct, settled, 4, p0), 94, 6, p0)
	mustSettle(t, l, settlement(acct, settled, 11, p0), 94, 6, p0)
	mustReserve(t, l, expiring(acct, voided, 20, now, "hash"), 74, 26, p0)
	for _, at := range []time.Time{now.Add(time.Minute), now.Add(2 * time.Minute)} {
		b, err := settleAt(t, l, acct, voided, 21, at)
		if wantErr(t, "Settle of an expired reservation refunding past its amount", err, driver.ErrVoided) {
			checkBalance(t, "Settle of an expired reservation", b, 94, 6, p0)
		}
	}
	wantBalance(t, l, acct, p0, 94, 6)
	wantUsage(t, l, acct, p0, map[string]int64{"hash": 1})
}

func ledSettleNegativeRefund(t *testing.T, l driver.Ledger) {
	ctx, n := t.Context(), newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	now := nowIn(p0)
	open, settled, voided := newRequest(), newRequest(), newRequest()
	mustReserve(t, l, reservation(acct, open, 10, p0, "hash"), 90, 10, p0)
	mustReserve(t, l, reservation(acct, settled, 10, p0, "hash"), 80, 20, p0)
	mustSettle(t, l, settlement(acct, settled, 0, p0), 80, 20, p0)
	mustReserve(t, l, expiring(acct, voided, 10, now, "hash"), 70, 30, p0)
	balanceAt(t, l, acct, now.Add(time.Minute), 80, 20)
	for _, id := range []driver.RequestID{open, settled, voided, newRequest()} {
		s := settlement(acct, id, -1, p0)
		s.Now = now.Add(time.Minute)
		_, err := l.Settle(ctx, s)
		wantErr(t, "Settle refunding -1", err, store.ErrConflict)
	}
	wantBalance(t, l, acct, p0, 80, 20)
	wantUsage(t, l, acct, p0, map[string]int64{"hash": 2})
	mustSettle(t, l, settlement(acct, open, 10, p0, "hash"), 90, 10, p0)
}

func ledSettleAdjustmentID(t *testing.T, l driver.Ledger) {
	ctx, n := t.Context(), newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	id := newRequest()
	_, err := l.Adjust(ctx, adjustment(acct, id, 5, p0))
	must(t, "Adjust", err)
	mustSettle(t, l, settlement(acct, id, 0, p0), 105, 0, p0)
	mustSettle(t, l, settlement(acct, id, 5, p0), 105, 0, p0)
	wantBalance(t, l, acct, p0, 105, 0)
}

func ledRenewalResetsBalance(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	mustReserve(t, l, reservation(acct, newRequest(), 30, p0, "hash", "echo"), 70, 30, p0)
	wantBalance(t, l, acct, p1, allowance, 0)
	wantUsage(t, l, acct, p1, nil)
	wantUsage(t, l, acct, p0, nil)
}

func ledRenewalBeforeWrite(t *testing.T, l driver.Ledger) {
	ctx, n := t.Context(), newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	mustReserve(t, l, reservation(acct, newRequest(), 30, p0, "hash"), 70, 30, p0)
	mustReserve(t, l, reservation(acct, newRequest(), 4, p1, "echo"), allowance-4, 4, p1)
	wantUsage(t, l, acct, p1, map[string]int64{"echo": 1})

	other := openAccount(t, l, n, "other", 100, p0)
	mustReserve(t, l, reservation(other, newRequest(), 30, p0, "hash"), 70, 30, p0)
	b, err := l.Adjust(ctx, adjustment(other, newRequest(), 10, p1))
	must(t, "Adjust", err)
	checkBalance(t, "Adjust at a later period", b, allowance+10, 0, p1)
	wantUsage(t, l, other, p1, nil)
}

func ledEarlierPeriod(t *testing.T, l driver.Ledger) {
	ctx, n := t.Context(), newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	wantBalance(t, l, acct, p1, allowance, 0)

	b, err := l.Balance(ctx, acct, nowIn(p0), p0, allowance)
	must(t, "Balance at the earlier period", err)
	checkBalance(t, "Balance at the earlier period", b, allowance, 0, p1)
	mustReserve(t, l, reservation(acct, newRequest(), 5, p0, "hash"), allowance-5, 5, p1)
	b, err = l.Adjust(ctx, adjustment(acct, newRequest(), 5, p0))
	must(t, "Adjust at the earlier period", err)
	checkBalance(t, "Adjust at the earlier period", b, allowance, 5, p1)
	wantBalance(t, l, acct, p1, allowance, 5)
	wantUsage(t, l, acct, p1, map[string]int64{"hash": 1})
}

func ledRefundAcrossRenewal(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	old := newRequest()
	mustReserve(t, l, reservation(acct, old, 10, p0, "hash"), 90, 10, p0)
	mustReserve(t, l, reservation(acct, newRequest(), 4, p1, "hash"), allowance-4, 4, p1)

	mustSettle(t, l, settlement(acct, old, 10, p1, "hash"), allowance-4, 4, p1)
	mustSettle(t, l, settlement(acct, old, 10, p1, "hash"), allowance-4, 4, p1)
	wantBalance(t, l, acct, p1, allowance-4, 4)
	wantUsage(t, l, acct, p1, map[string]int64{"hash": 1})
}

func ledAdjustGrant(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	mustReserve(t, l, reservation(acct, newRequest(), 10, p0, "hash"), 90, 10, p0)
	b, err := l.Adjust(t.Context(), adjustment(acct, newRequest(), 50, p0))
	must(t, "Adjust", err)
	checkBalance(t, "Adjust +50", b, 140, 10, p0)
	wantBalance(t, l, acct, p0, 140, 10)
}

func ledAdjustTake(t *testing.T, l driver.Ledger) {
	ctx, n := t.Context(), newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	mustReserve(t, l, reservation(acct, newRequest(), 10, p0, "hash"), 90, 10, p0)
	b, err := l.Adjust(ctx, adjustment(acct, newRequest(), -30, p0))
	must(t, "Adjust -30", err)
	checkBalance(t, "Adjust -30", b, 60, 10, p0)
	b, err = l.Adjust(ctx, adjustment(acct, newRequest(), -60, p0))
	must(t, "Adjust -60", err)
	checkBalance(t, "Adjust -60", b, 0, 10, p0)
	wantBalance(t, l, acct, p0, 0, 10)
}

func ledAdjustBelowZero(t *testing.T, l driver.Ledger) {
	ctx, n := t.Context(), newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	_, err := l.Adjust(ctx, adjustment(acct, newRequest(), -101, p0))
	wantErr(t, "Adjust below zero", err, driver.ErrInsufficientCredits)
	wantBalance(t, l, acct, p0, 100, 0)
}

func ledAdjustIdempotent(t *testing.T, l driver.Ledger) {
	ctx, n := t.Context(), newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	id := newRequest()
	for i, amount := range []int64{50, 50, -20} {
		b, err := l.Adjust(ctx, adjustment(acct, id, amount, p0))
		must(t, "Adjust", err)
		checkBalance(t, fmt.Sprintf("Adjust #%d with one request id", i+1), b, 150, 0, p0)
	}
	wantBalance(t, l, acct, p0, 150, 0)
}

func ledUsageOtherPeriod(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 100, p1)
	mustReserve(t, l, reservation(acct, newRequest(), 1, p1, "hash"), 99, 1, p1)
	wantUsage(t, l, acct, p1, map[string]int64{"hash": 1})
	wantUsage(t, l, acct, p0, nil)
	wantUsage(t, l, acct, p2, nil)
}

func ledNoAliasing(t *testing.T, l driver.Ledger) {
	ctx, n := t.Context(), newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	id := newRequest()
	apis := []string{"hash", "echo"}
	mustReserve(t, l, reservation(acct, id, 10, p0, apis...), 90, 10, p0)
	apis[0] = "changed"
	uncount := []string{"echo"}
	mustSettle(t, l, settlement(acct, id, 0, p0, uncount...), 90, 10, p0)
	uncount[0] = "hash"

	u, err := l.Usage(ctx, acct, p0)
	must(t, "Usage", err)
	u["hash"] = 99
	u["injected"] = 1
	wantUsage(t, l, acct, p0, map[string]int64{"hash": 1})
}

func ledCanceledContext(t *testing.T, l driver.Ledger) {
	ctx, n := canceled(t), newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	id := newRequest()
	mustReserve(t, l, reservation(acct, id, 10, p0, "hash"), 90, 10, p0)
	fresh := n.id("fresh")

	wantErr(t, "Open", l.Open(ctx, driver.Opening{Account: fresh, Balance: 1, Allowance: allowance, Period: p0}), context.Canceled)
	_, err := l.Reserve(ctx, reservation(acct, newRequest(), 5, p0, "echo"))
	wantErr(t, "Reserve", err, context.Canceled)
	_, err = l.Settle(ctx, settlement(acct, id, 10, p0, "hash"))
	wantErr(t, "Settle", err, context.Canceled)
	_, err = l.Adjust(ctx, adjustment(acct, newRequest(), 5, p0))
	wantErr(t, "Adjust", err, context.Canceled)
	_, err = l.Balance(ctx, acct, nowIn(p1), p1, allowance)
	wantErr(t, "Balance", err, context.Canceled)
	_, err = l.Usage(ctx, acct, p0)
	wantErr(t, "Usage", err, context.Canceled)

	wantBalance(t, l, acct, p0, 90, 10)
	wantUsage(t, l, acct, p0, map[string]int64{"hash": 1})
	_, err = l.Balance(t.Context(), fresh, nowIn(p0), p0, allowance)
	wantErr(t, "Balance of the account opened with a canceled context", err, store.ErrNotFound)
	mustSettle(t, l, settlement(acct, id, 10, p0, "hash"), 100, 0, p0)
}

func ledConcurrentSpending(t *testing.T, l driver.Ledger) {
	ctx, n := t.Context(), newIDs()
	const attempts, cost, balance = 50, 3, 3000
	acct := n.id("acct")
	must(t, "Open", l.Open(ctx, driver.Opening{Account: acct, Balance: balance, Allowance: balance, Period: p0}))

	var granted, short atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range attempts {
				r := reservation(acct, newRequest(), cost, p0, "hash")
				r.Allowance = balance
				b, err := l.Reserve(ctx, r)
				switch {
				case err == nil:
					granted.Add(1)
					if b.Remaining < 0 || b.Remaining+b.Used != balance {
						t.Errorf("Reserve observed Remaining %d and Used %d: want Remaining >= 0 and Remaining+Used = %d", b.Remaining, b.Used, balance)
					}
				case errors.Is(err, driver.ErrInsufficientCredits):
					short.Add(1)
					if b.Remaining < 0 || b.Remaining >= cost {
						t.Errorf("refused Reserve of %d reported Remaining %d: want 0 <= Remaining < %d", cost, b.Remaining, cost)
					}
				default:
					t.Errorf("Reserve: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()

	if got, want := granted.Load(), int64(balance/cost); got != want {
		t.Errorf("%d of %d concurrent reservations succeeded, want exactly %d", got, workers*attempts, want)
	}
	if got, want := short.Load(), int64(workers*attempts-balance/cost); got != want {
		t.Errorf("%d reservations got ErrInsufficientCredits, want %d", got, want)
	}
	b, err := l.Balance(ctx, acct, nowIn(p0), p0, balance)
	must(t, "Balance", err)
	if b.Remaining != 0 || b.Used != balance {
		t.Errorf("after concurrent spending: Remaining %d, Used %d; want 0 and %d", b.Remaining, b.Used, balance)
	}
	u, err := l.Usage(ctx, acct, p0)
	must(t, "Usage", err)
	if u["hash"] != balance/cost {
		t.Errorf("usage after concurrent spending: %d calls counted, want %d", u["hash"], balance/cost)
	}
}

func ledConcurrentSettleOnce(t *testing.T, l driver.Ledger) {
	ctx, n := t.Context(), newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	id := newRequest()
	mustReserve(t, l, reservation(acct, id, 10, p0, "hash"), 90, 10, p0)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			if _, err := l.Settle(ctx, settlement(acct, id, 10, p0, "hash")); err != nil {
				t.Errorf("Settle #%d: %v", i, err)
			}
		})
	}
	wg.Wait()
	wantBalance(t, l, acct, p0, 100, 0)
	wantUsage(t, l, acct, p0, nil)
}

func ledConcurrentReplay(t *testing.T, l driver.Ledger) {
	ctx, n := t.Context(), newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	id := newRequest()
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			if _, err := l.Reserve(ctx, reservation(acct, id, 7, p0, "hash")); err != nil {
				t.Errorf("Reserve #%d: %v", i, err)
			}
		})
	}
	wg.Wait()
	wantBalance(t, l, acct, p0, 93, 7)
	wantUsage(t, l, acct, p0, map[string]int64{"hash": 1})
}

func ledConcurrentReserveSettle(t *testing.T, l driver.Ledger) {
	ctx, n := t.Context(), newIDs()
	const perWorker, cost, balance = 20, 5, 100000
	acct := openAccount(t, l, n, "acct", balance, p0)
	refund := func(i int) int64 { return []int64{cost, 2, 0}[i%3] }
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				id := newRequest()
				if _, err := l.Reserve(ctx, reservation(acct, id, cost, p0, "hash")); err != nil {
					t.Errorf("Reserve: %v", err)
					return
				}
				var uncount []string
				if refund(w+i) == cost {
					uncount = []string{"hash"}
				}
				if _, err := l.Settle(ctx, settlement(acct, id, refund(w+i), p0, uncount...)); err != nil {
					t.Errorf("Settle: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()

	var spent, calls int64
	for w := range workers {
		for i := range perWorker {
			spent += cost - refund(w+i)
			if refund(w+i) != cost {
				calls++
			}
		}
	}
	wantBalance(t, l, acct, p0, balance-spent, spent)
	wantUsage(t, l, acct, p0, map[string]int64{"hash": calls})
}

func ledConcurrentRenewal(t *testing.T, l driver.Ledger) {
	ctx, n := t.Context(), newIDs()
	acct := openAccount(t, l, n, "acct", 10, p0)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			if _, err := l.Reserve(ctx, reservation(acct, newRequest(), 2, p1, "hash")); err != nil {
				t.Errorf("Reserve #%d in the new period: %v", i, err)
			}
		})
	}
	wg.Wait()
	wantBalance(t, l, acct, p1, allowance-2*workers, 2*workers)
	wantUsage(t, l, acct, p1, map[string]int64{"hash": workers})
}

func ledConcurrentAdjustReplay(t *testing.T, l driver.Ledger) {
	ctx, n := t.Context(), newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	const distinct = 8
	reqs := make([]driver.RequestID, distinct)
	for i := range reqs {
		reqs[i] = newRequest()
	}
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			if _, err := l.Adjust(ctx, adjustment(acct, reqs[i%distinct], 5, p0)); err != nil {
				t.Errorf("Adjust #%d: %v", i, err)
			}
		})
	}
	wg.Wait()
	wantBalance(t, l, acct, p0, 100+5*distinct, 0)
}
