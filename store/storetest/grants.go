package storetest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store"
)

// The rows of TestLedger about the two parts of a balance: the period's allowance, which
// renews, and the grants, which carry over until spent or lapsed (see driver.Part).
var grantRows = []behaviour[driver.Ledger]{
	{"GrantsCarryOver",
		"Credits granted with PartGrants carry over at renewal: the allowance part is reset to the allowance, the grants are left as they are, and Granted reports them.",
		ledGrantsCarryOver},
	{"OpenAboveAllowance",
		"An opening balance above the allowance is the allowance plus a grant that never lapses.",
		ledOpenAboveAllowance},
	{"SpendingOrder",
		"Calls spend the allowance first, then the grant lots, the one that lapses first first, those that never lapse last; Charge says what each reservation took.",
		ledSpendingOrder},
	{"RefundReverseOrder",
		"A refund gives back in the reverse order of what the reservation took, to the lots and then to the allowance; the charge kept is from the allowance first, as Charge says.",
		ledRefundReverseOrder},
	{"RefundToLapsedLot",
		"What a reservation took from a lot that has lapsed since is lost when it is refunded; the allowance part still comes back.",
		ledRefundToLapsedLot},
	{"VoidGivesBackToLots",
		"A reservation voided at its expiry gives back to the lots it took from, unless they have lapsed, and then to the allowance.",
		ledVoidGivesBackToLots},
	{"LapseAtTheInstant",
		"A lot lapses at its expiry: an operation a second before still spends it, one at that instant finds it gone, and a later operation with a lagging clock does not bring it back.",
		ledLapseAtTheInstant},
	{"LapseAtRenewal",
		"A lot that lapses at the very instant of a renewal is gone from the renewed balance; the others carry over.",
		ledLapseAtRenewal},
	{"RenewalWithLotLapsing",
		"After a renewal the lot that lapses in the new period is spent after the allowance and lapses with what is left of it; GrantsLapse and GrantsLapsing report it.",
		ledRenewalWithLotLapsing},
	{"RefundAcrossRenewalToLots",
		"A reservation open across a renewal gives back to its live lots, not to the renewed allowance, and uncounts nothing; a lot that lapses after that loses the credits then.",
		ledRefundAcrossRenewalToLots},
	{"AdjustTakesInSpendingOrder",
		"A negative adjustment to PartGrants takes the allowance and then the lots in the spending order; one above both parts is refused with ErrInsufficientCredits and takes nothing.",
		ledAdjustTakesInSpendingOrder},
	{"GrantIdempotent",
		"A grant replayed with the same request id is applied once, whatever amount or expiry the replay carries.",
		ledGrantIdempotent},
	{"GrantRefused",
		"A grant whose expiry is not after Now, or an adjustment of an unknown part, is refused with store.ErrInvalid and changes nothing.",
		ledGrantRefused},
	{"MaxCreditsWithGrants",
		"Remaining (both parts) plus Used never pass MaxCredits: not by a grant, not by a renewal of the allowance (which is cut), not by a refund to a lot after a renewal.",
		ledMaxCreditsWithGrants},
	{"VoidsAcrossRenewalAtTheBound",
		"Reservations voided together, one made before a renewal and one after, both of grants, give back to the lots within MaxCredits: what the one made before the renewal would take past the bound is lost, whatever order the voids take.",
		ledVoidsAcrossRenewalAtTheBound},
	{"VoidsAtTheBoundInExpiryOrder",
		"Reservations open across a renewal and voided together, when the bound leaves room for part of what they took, get their credits back in the order of their expiry: the first to expire first.",
		ledVoidsAtTheBoundInExpiryOrder},
	{"RenewalOrder",
		"An operation that renews the balance, voids reservations and drops lapsed lots does so in one order: the lots lapsed at its Now first, then the reservations expired by the new period's start, voided in the old period, then the renewal (its allowance cut by the grants so that MaxCredits holds), then the reservations expired since, whose give-back MaxCredits cuts.",
		ledRenewalOrder},
	{"MaxGrantLots",
		"An account holds at most driver.MaxGrantLots lots: a grant that would start one more is refused with ErrTooManyGrants; one to an existing lot is taken.",
		ledMaxGrantLots},
	{"RefundRestoresSpentLot",
		"A lot spent to nothing no longer counts toward MaxGrantLots, so another grant may start a lot; a refund to the spent lot restores it all the same, past MaxGrantLots, and grants that would start one more lot are refused until lots lapse or are spent.",
		ledRefundRestoresSpentLot},
	{"ConcurrentGrantSpending",
		"Concurrent reservations and settlements against the allowance and several lots never take any part below zero, and the kept charges add up, part by part, to what the balance lost.",
		ledConcurrentGrantSpending},
	{"ConcurrentGrantReplay",
		"Grants with expiries replayed from many goroutines at once are each applied exactly once.",
		ledConcurrentGrantReplay},
}

// grant makes a grant of amount credits that lapse at expires (zero for never), at now.
func grant(t *testing.T, l driver.Ledger, acct string, id driver.RequestID, amount int64, expires, now time.Time) driver.Balance {
	t.Helper()
	b, err := l.Adjust(t.Context(), grantAt(acct, id, amount, expires, now))
	must(t, "Adjust granting credits", err)
	return b
}

func grantAt(acct string, id driver.RequestID, amount int64, expires, now time.Time) driver.Adjustment {
	return driver.Adjustment{Account: acct, Request: id, Amount: amount, Part: driver.PartGrants, Expires: expires,
		Reason: "storetest", Period: driver.MonthOf(now), Allowance: allowance, Now: now}
}

// reserveAt reserves amount credits at now, open for hold, and checks what it took.
func reserveAt(t *testing.T, l driver.Ledger, acct string, id driver.RequestID, amount int64, now time.Time, took driver.Parts) driver.Balance {
	t.Helper()
	r := driver.Reservation{Account: acct, Request: id, APIs: []string{"hash"}, Amount: amount, Period: driver.MonthOf(now),
		Allowance: allowance, Now: now, Expires: now.Add(hold)}
	b, err := l.Reserve(t.Context(), r)
	must(t, "Reserve", err)
	if b.Charge != took {
		t.Errorf("Reserve of %d took %+v, want %+v", amount, b.Charge, took)
	}
	return b
}

// parts is what a check expects of a balance's parts: Remaining, Granted, Used, and the
// next lapse (zero for none) with its credits.
type parts struct {
	remaining, granted, used int64
	lapse                    time.Time
	lapsing                  int64
}

func wantParts(t *testing.T, op string, b driver.Balance, want parts) {
	t.Helper()
	got := parts{b.Remaining, b.Granted, b.Used, b.GrantsLapse, b.GrantsLapsing}
	if got.remaining != want.remaining || got.granted != want.granted || got.used != want.used ||
		!got.lapse.Equal(want.lapse) || got.lapsing != want.lapsing {
		t.Errorf("%s: {Remaining %d, Granted %d, Used %d, GrantsLapse %v, GrantsLapsing %d}, want {%d, %d, %d, %v, %d}",
			op, got.remaining, got.granted, got.used, got.lapse, got.lapsing,
			want.remaining, want.granted, want.used, want.lapse, want.lapsing)
	}
}

// partsAt checks the balance read at now.
func partsAt(t *testing.T, l driver.Ledger, acct string, now time.Time, want parts) {
	t.Helper()
	b, err := l.Balance(t.Context(), acct, now, driver.MonthOf(now), allowance)
	if err != nil {
		t.Errorf("Balance(%q) at %s: %v", acct, now.Format(time.DateTime), err)
		return
	}
	wantParts(t, "Balance at "+now.Format(time.DateTime), b, want)
}

func settleParts(t *testing.T, l driver.Ledger, acct string, id driver.RequestID, refund int64, now time.Time, kept driver.Parts) driver.Balance {
	t.Helper()
	b, err := settleAt(t, l, acct, id, refund, now)
	must(t, "Settle", err)
	if b.Charge != kept {
		t.Errorf("Settle refunding %d kept %+v, want %+v", refund, b.Charge, kept)
	}
	return b
}

var never time.Time

func ledGrantsCarryOver(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	now := nowIn(p0)
	b := grant(t, l, acct, newRequest(), 50, never, now)
	wantParts(t, "grant of 50", b, parts{remaining: 150, granted: 50})
	reserveAt(t, l, acct, newRequest(), 30, now, driver.Parts{Allowance: 30})
	partsAt(t, l, acct, now, parts{remaining: 120, granted: 50, used: 30})
	partsAt(t, l, acct, nowIn(p1), parts{remaining: allowance + 50, granted: 50})
	partsAt(t, l, acct, nowIn(p2), parts{remaining: allowance + 50, granted: 50})
}

func ledOpenAboveAllowance(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", allowance+200, p0)
	partsAt(t, l, acct, nowIn(p0), parts{remaining: allowance + 200, granted: 200})
	reserveAt(t, l, acct, newRequest(), allowance+50, nowIn(p0), driver.Parts{Allowance: allowance, Grants: 50})
	partsAt(t, l, acct, nowIn(p1), parts{remaining: allowance + 150, granted: 150})
}

func ledSpendingOrder(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 10, p0)
	now := nowIn(p0)
	early, late := now.Add(48*time.Hour), now.Add(30*24*time.Hour)
	grant(t, l, acct, newRequest(), 20, never, now)
	grant(t, l, acct, newRequest(), 20, late, now)
	grant(t, l, acct, newRequest(), 20, early, now)
	b := grant(t, l, acct, newRequest(), 5, never, now)
	wantParts(t, "after four grants", b, parts{remaining: 75, granted: 65, lapse: early, lapsing: 20})

	b = reserveAt(t, l, acct, newRequest(), 15, now, driver.Parts{Allowance: 10, Grants: 5})
	wantParts(t, "Reserve 15", b, parts{remaining: 60, granted: 60, used: 15, lapse: early, lapsing: 15})
	b = reserveAt(t, l, acct, newRequest(), 30, now, driver.Parts{Grants: 30})
	wantParts(t, "Reserve 30", b, parts{remaining: 30, granted: 30, used: 45, lapse: late, lapsing: 5})
	b = reserveAt(t, l, acct, newRequest(), 10, now, driver.Parts{Grants: 10})
	wantParts(t, "Reserve 10", b, parts{remaining: 20, granted: 20, used: 55})
	_, err := l.Reserve(t.Context(), reservation(acct, newRequest(), 21, p0, "hash"))
	wantErr(t, "Reserve over both parts", err, driver.ErrInsufficientCredits)
	partsAt(t, l, acct, early, parts{remaining: 20, granted: 20, used: 55})
}

func ledRefundReverseOrder(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 10, p0)
	now := nowIn(p0)
	lapse := now.Add(24 * time.Hour)
	grant(t, l, acct, newRequest(), 20, lapse, now)
	grant(t, l, acct, newRequest(), 20, never, now)
	id := newRequest()
	reserveAt(t, l, acct, id, 40, now, driver.Parts{Allowance: 10, Grants: 30})
	// 15 back: 10 to the lot that never lapses, 5 to the lapsing one; the 25 kept are 10
	// of the allowance and 15 of the grants.
	b := settleParts(t, l, acct, id, 15, now, driver.Parts{Allowance: 10, Grants: 15})
	wantParts(t, "Settle refunding 15", b, parts{remaining: 25, granted: 25, used: 25, lapse: lapse, lapsing: 5})
	b = settleParts(t, l, acct, id, 15, now, driver.Parts{})
	wantParts(t, "the settlement replayed", b, parts{remaining: 25, granted: 25, used: 25, lapse: lapse, lapsing: 5})

	// A refund larger than the grants taken reaches the allowance.
	id = newRequest()
	reserveAt(t, l, acct, newRequest(), 10, now, driver.Parts{Grants: 10})
	grantBack := grant(t, l, acct, newRequest(), 0, never, now)
	wantParts(t, "a grant of 0", grantBack, parts{remaining: 15, granted: 15, used: 35})
	_, err := l.Adjust(t.Context(), allowanceChange(acct, newRequest(), p0, allowance+30, 1, now))
	must(t, "Adjust raising the allowance by 30", err)
	reserveAt(t, l, acct, id, 40, now, driver.Parts{Allowance: 30, Grants: 10})
	b = settleParts(t, l, acct, id, 25, now, driver.Parts{Allowance: 15})
	wantParts(t, "Settle refunding 25 of 30+10", b, parts{remaining: 30, granted: 15, used: 50})
}

func ledRefundToLapsedLot(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 10, p0)
	now := nowIn(p0)
	lapse := now.Add(time.Hour)
	grant(t, l, acct, newRequest(), 20, lapse, now)
	id, other := newRequest(), newRequest()
	reserveAt(t, l, acct, id, 25, now, driver.Parts{Allowance: 10, Grants: 15})
	reserveAt(t, l, acct, other, 5, now, driver.Parts{Grants: 5})
	partsAt(t, l, acct, lapse, parts{used: 30})
	b := settleParts(t, l, acct, id, 25, lapse.Add(time.Hour), driver.Parts{})
	wantParts(t, "Settle after the lot lapsed", b, parts{remaining: 10, used: 5})
	b = settleParts(t, l, acct, other, 3, lapse.Add(time.Hour), driver.Parts{Grants: 2})
	wantParts(t, "Settle refunding 3 of 5 taken from the lapsed lot", b, parts{remaining: 10, used: 2})
}

func ledVoidGivesBackToLots(t *testing.T, l driver.Ledger) {
	ctx, n := t.Context(), newIDs()
	acct := openAccount(t, l, n, "acct", 10, p0)
	now := nowIn(p0)
	soon, later := now.Add(30*time.Second), now.Add(time.Hour)
	grant(t, l, acct, newRequest(), 10, soon, now)
	grant(t, l, acct, newRequest(), 10, later, now)
	grant(t, l, acct, newRequest(), 10, never, now)
	b, err := l.Reserve(ctx, expiring(acct, newRequest(), 35, now, "hash"))
	must(t, "Reserve", err)
	if want := (driver.Parts{Allowance: 10, Grants: 25}); b.Charge != want {
		t.Errorf("Reserve took %+v, want %+v", b.Charge, want)
	}
	// At the expiry the lot that lapsed at now+30s loses its 10; the others get theirs.
	partsAt(t, l, acct, now.Add(time.Minute), parts{remaining: 30, granted: 20, lapse: later, lapsing: 10})
	wantUsage(t, l, acct, p0, nil)
}

func ledLapseAtTheInstant(t *testing.T, l driver.Ledger) {
	ctx, n := t.Context(), newIDs()
	acct := openAccount(t, l, n, "acct", 10, p0)
	now := nowIn(p0)
	lapse := now.Add(time.Hour)
	grant(t, l, acct, newRequest(), 20, lapse, now)
	partsAt(t, l, acct, lapse.Add(-time.Second), parts{remaining: 30, granted: 20, lapse: lapse, lapsing: 20})
	reserveAt(t, l, acct, newRequest(), 15, lapse.Add(-time.Second), driver.Parts{Allowance: 10, Grants: 5})
	r := expiring(acct, newRequest(), 1, lapse, "hash")
	_, err := l.Reserve(ctx, r)
	wantErr(t, "Reserve at the instant the lot lapses", err, driver.ErrInsufficientCredits)
	partsAt(t, l, acct, lapse, parts{used: 15})
	// A clock that lags behind the one that saw the lapse does not bring the lot back.
	partsAt(t, l, acct, lapse.Add(-2*time.Second), parts{used: 15})
}

func ledLapseAtRenewal(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	now := nowIn(p0)
	grant(t, l, acct, newRequest(), 20, p1.Start, now)
	grant(t, l, acct, newRequest(), 30, never, now)
	reserveAt(t, l, acct, newRequest(), 110, now, driver.Parts{Allowance: 100, Grants: 10})
	partsAt(t, l, acct, p1.Start.Add(-time.Second), parts{remaining: 40, granted: 40, used: 110, lapse: p1.Start, lapsing: 10})
	partsAt(t, l, acct, p1.Start, parts{remaining: allowance + 30, granted: 30})
}

func ledRenewalWithLotLapsing(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	now, then := nowIn(p0), nowIn(p1)
	lapse := then.Add(time.Hour)
	grant(t, l, acct, newRequest(), 20, lapse, now)
	grant(t, l, acct, newRequest(), 30, never, now)
	partsAt(t, l, acct, then, parts{remaining: allowance + 50, granted: 50, lapse: lapse, lapsing: 20})
	reserveAt(t, l, acct, newRequest(), allowance+10, then, driver.Parts{Allowance: allowance, Grants: 10})
	partsAt(t, l, acct, then, parts{remaining: 40, granted: 40, used: allowance + 10, lapse: lapse, lapsing: 10})
	partsAt(t, l, acct, lapse, parts{remaining: 30, granted: 30, used: allowance + 10})
}

func ledRefundAcrossRenewalToLots(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 10, p0)
	now, then := nowIn(p0), nowIn(p1)
	lapse := then.Add(time.Hour)
	grant(t, l, acct, newRequest(), 20, lapse, now)
	grant(t, l, acct, newRequest(), 20, never, now)
	id, late := newRequest(), newRequest()
	reserveAt(t, l, acct, id, 20, now, driver.Parts{Allowance: 10, Grants: 10})
	reserveAt(t, l, acct, late, 20, now, driver.Parts{Grants: 20})
	partsAt(t, l, acct, now, parts{remaining: 10, granted: 10, used: 40})
	reserveAt(t, l, acct, newRequest(), 5, then, driver.Parts{Allowance: 5})
	// The refund goes back to the lot (live until then+1h), not to the renewed allowance.
	b := settleParts(t, l, acct, id, 20, then, driver.Parts{})
	wantParts(t, "Settle across the renewal", b, parts{remaining: allowance - 5 + 20, granted: 20, used: 5, lapse: lapse, lapsing: 10})
	wantUsage(t, l, acct, p1, map[string]int64{"hash": 1})
	partsAt(t, l, acct, lapse, parts{remaining: allowance - 5 + 10, granted: 10, used: 5})
	// The other reservation took 10 from the lapsed lot and 10 from the one that never
	// lapses: only those come back.
	b = settleParts(t, l, acct, late, 20, lapse, driver.Parts{})
	wantParts(t, "Settle across the renewal and the lapse", b, parts{remaining: allowance - 5 + 20, granted: 20, used: 5})
}

func ledAdjustTakesInSpendingOrder(t *testing.T, l driver.Ledger) {
	ctx, n := t.Context(), newIDs()
	acct := openAccount(t, l, n, "acct", 10, p0)
	now := nowIn(p0)
	lapse := now.Add(time.Hour)
	grant(t, l, acct, newRequest(), 20, lapse, now)
	grant(t, l, acct, newRequest(), 20, never, now)
	take := func(amount int64) (driver.Balance, error) {
		return l.Adjust(ctx, driver.Adjustment{Account: acct, Request: newRequest(), Amount: amount, Part: driver.PartGrants,
			Reason: "storetest", Period: p0, Allowance: allowance, Now: now})
	}
	b, err := take(-15)
	must(t, "Adjust -15", err)
	wantParts(t, "Adjust -15", b, parts{remaining: 35, granted: 35, lapse: lapse, lapsing: 15})
	b, err = take(-36)
	wantErr(t, "Adjust -36 of 35", err, driver.ErrInsufficientCredits)
	wantParts(t, "the refused Adjust -36", b, parts{remaining: 35, granted: 35, lapse: lapse, lapsing: 15})
	b, err = take(-20)
	must(t, "Adjust -20", err)
	wantParts(t, "Adjust -20", b, parts{remaining: 15, granted: 15})
	b, err = take(-15)
	must(t, "Adjust -15", err)
	wantParts(t, "Adjust to zero", b, parts{})
}

func ledGrantIdempotent(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 10, p0)
	now := nowIn(p0)
	lapse := now.Add(time.Hour)
	id := newRequest()
	for i, g := range []struct {
		amount  int64
		expires time.Time
	}{{50, lapse}, {50, lapse}, {70, never}, {-10, never}} {
		b := grant(t, l, acct, id, g.amount, g.expires, now.Add(time.Duration(i)*time.Second))
		wantParts(t, "a grant replayed", b, parts{remaining: 60, granted: 50, lapse: lapse, lapsing: 50})
	}
	partsAt(t, l, acct, lapse, parts{remaining: 10})
	b := grant(t, l, acct, id, 50, lapse.Add(time.Hour), lapse)
	wantParts(t, "the grant replayed after it lapsed", b, parts{remaining: 10})
}

func ledGrantRefused(t *testing.T, l driver.Ledger) {
	ctx, n := t.Context(), newIDs()
	acct := openAccount(t, l, n, "acct", 10, p0)
	now := nowIn(p0)
	id := newRequest()
	for _, a := range []driver.Adjustment{
		grantAt(acct, id, 5, now, now),
		grantAt(acct, id, 5, now.Add(-time.Hour), now),
		{Account: acct, Request: id, Amount: 5, Part: 7, Reason: "storetest", Period: p0, Allowance: allowance, Now: now},
	} {
		_, err := l.Adjust(ctx, a)
		wantErr(t, "Adjust", err, store.ErrInvalid)
	}
	partsAt(t, l, acct, now, parts{remaining: 10})
	// The refused request was not recorded.
	b := grant(t, l, acct, id, 5, now.Add(time.Second), now)
	wantParts(t, "the grant made right", b, parts{remaining: 15, granted: 5, lapse: now.Add(time.Second), lapsing: 5})
}

func ledMaxCreditsWithGrants(t *testing.T, l driver.Ledger) {
	ctx, n := t.Context(), newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	now := nowIn(p0)
	id := newRequest()
	reserveAt(t, l, acct, id, 40, now, driver.Parts{Allowance: 40})
	_, err := l.Adjust(ctx, grantAt(acct, newRequest(), driver.MaxCredits-99, never, now))
	wantErr(t, "a grant past MaxCredits", err, driver.ErrTooManyCredits)
	b := grant(t, l, acct, newRequest(), driver.MaxCredits-100, now.Add(60*24*time.Hour), now)
	wantParts(t, "a grant up to MaxCredits", b, parts{remaining: driver.MaxCredits - 40, granted: driver.MaxCredits - 100, used: 40,
		lapse: now.Add(60 * 24 * time.Hour), lapsing: driver.MaxCredits - 100})

	// At renewal the allowance is cut so that the bound holds.
	then := nowIn(p1)
	partsAt(t, l, acct, then, parts{remaining: driver.MaxCredits, granted: driver.MaxCredits - 100,
		lapse: now.Add(60 * 24 * time.Hour), lapsing: driver.MaxCredits - 100})
	other := newRequest()
	reserveAt(t, l, acct, other, 150, then, driver.Parts{Allowance: 100, Grants: 50})
	// The reservation of January is settled in February: its allowance part is not
	// credited, and the bound holds.
	b = settleParts(t, l, acct, id, 40, then, driver.Parts{})
	wantParts(t, "the refund across the renewal", b, parts{remaining: driver.MaxCredits - 150, granted: driver.MaxCredits - 150, used: 150,
		lapse: now.Add(60 * 24 * time.Hour), lapsing: driver.MaxCredits - 150})

	// A refund to a lot after a renewal is cut at the bound.
	fresh := openAccount(t, l, n, "fresh", 0, p0)
	grant(t, l, fresh, newRequest(), driver.MaxCredits-allowance, never, now)
	reserveAt(t, l, fresh, id, 100, now, driver.Parts{Grants: 100})
	r := settlement(fresh, id, 100, p1)
	r.Allowance = 600
	b, err = l.Settle(ctx, r)
	must(t, "Settle across the renewal at the bound", err)
	wantParts(t, "the refund to a lot at the bound", b, parts{remaining: driver.MaxCredits, granted: driver.MaxCredits - 600})
}

func ledVoidsAcrossRenewalAtTheBound(t *testing.T, l driver.Ledger) {
	ctx, n := t.Context(), newIDs()
	now, then := nowIn(p0), p1.Start.Add(time.Hour)
	// Both orders of the two reservations' ids, for a store that voids in that order.
	low, high := newRequest(), newRequest()
	low[0], high[0] = 0, 0xff
	for i, ids := range [][2]driver.RequestID{{low, high}, {high, low}} {
		acct := openAccount(t, l, n, fmt.Sprintf("acct%d", i), 0, p0)
		r := func(id driver.RequestID, amount int64, at time.Time) driver.Reservation {
			return driver.Reservation{Account: acct, Request: id, Amount: amount, Period: driver.MonthOf(at), Allowance: 0,
				Now: at, Expires: then.Add(time.Minute)}
		}
		adjust := func(amount int64, at time.Time) driver.Balance {
			t.Helper()
			b, err := l.Adjust(ctx, driver.Adjustment{Account: acct, Request: newRequest(), Amount: amount, Reason: "storetest",
				Period: driver.MonthOf(at), Now: at})
			must(t, "Adjust", err)
			return b
		}
		adjust(driver.MaxCredits-100, now)
		_, err := l.Reserve(ctx, r(ids[0], 50, now))
		must(t, "Reserve before the renewal", err)
		// The renewal: the reservation open across it no longer counts in Used, so a
		// grant may fill the balance to the bound.
		b := adjust(150, then)
		wantParts(t, "the grant after the renewal", b, parts{remaining: driver.MaxCredits, granted: driver.MaxCredits})
		_, err = l.Reserve(ctx, r(ids[1], 30, then))
		must(t, "Reserve after the renewal", err)
		b, err = l.Balance(ctx, acct, then.Add(2*time.Minute), p1, 0)
		must(t, "Balance after both expired", err)
		wantParts(t, "after both reservations were voided", b, parts{remaining: driver.MaxCredits, granted: driver.MaxCredits})
	}
}

func ledVoidsAtTheBoundInExpiryOrder(t *testing.T, l driver.Ledger) {
	ctx, n := t.Context(), newIDs()
	now, then := nowIn(p0), p1.Start.Add(time.Hour)
	lapse := p2.End
	low, high := newRequest(), newRequest()
	low[0], high[0] = 0, 0xff
	for i, ids := range [][2]driver.RequestID{{low, high}, {high, low}} {
		acct := openAccount(t, l, n, fmt.Sprintf("acct%d", i), 0, p0)
		grant(t, l, acct, newRequest(), 50, lapse, now)
		grant(t, l, acct, newRequest(), 1000, never, now)
		// The first to expire takes the lot that lapses, the second the other.
		for j, c := range []struct {
			amount  int64
			expires time.Time
		}{{50, then.Add(time.Minute)}, {30, then.Add(2 * time.Minute)}} {
			_, err := l.Reserve(ctx, driver.Reservation{Account: acct, Request: ids[j], Amount: c.amount, Period: p0, Allowance: 0,
				Now: now, Expires: c.expires})
			must(t, "Reserve", err)
		}
		// After the renewal, a grant leaves room for 20 credits.
		b, err := l.Adjust(ctx, driver.Adjustment{Account: acct, Request: newRequest(), Amount: driver.MaxCredits - 970 - 20,
			Reason: "storetest", Period: p1, Now: then})
		must(t, "Adjust", err)
		wantParts(t, "the grant after the renewal", b, parts{remaining: driver.MaxCredits - 20, granted: driver.MaxCredits - 20})
		b, err = l.Balance(ctx, acct, then.Add(3*time.Minute), p1, 0)
		must(t, "Balance after both expired", err)
		wantParts(t, "after both reservations were voided", b, parts{remaining: driver.MaxCredits, granted: driver.MaxCredits,
			lapse: lapse, lapsing: 20})
	}
}

// renewalOrderSetup prepares, on an account opened in January with a balance of 0, a
// February renewal due at then (two hours into February) together with a lapse and
// two voids, near MaxCredits: a never-lapsing lot of 1000, of which a reservation that
// expires at February's start took 100 and one that expires half an hour later 30; a
// lot of 50 that lapses an hour into February; and a free reservation still open, for
// a settlement. The operation at then renews to an allowance of MaxCredits.
//
// In the ledger's order the lot of 50 is dropped, the first reservation gives its 100
// back in January, the renewal gets MaxCredits-970 (what the grants leave), and the
// second reservation, voided after the renewal, finds no room: the balance is
// MaxCredits, 970 of it granted. (Renewing before the lapse would leave MaxCredits-50;
// renewing before both voids, 870 granted; voiding both before the renewal, 1000.)
func renewalOrderSetup(t *testing.T, l driver.Ledger, acct string) (then time.Time, open driver.RequestID) {
	t.Helper()
	ctx, now := t.Context(), nowIn(p0)
	grant(t, l, acct, newRequest(), 1000, never, now)
	open = newRequest()
	for _, r := range []struct {
		id      driver.RequestID
		amount  int64
		expires time.Time
	}{{newRequest(), 100, p1.Start}, {newRequest(), 30, p1.Start.Add(30 * time.Minute)}, {open, 0, p2.End}} {
		_, err := l.Reserve(ctx, driver.Reservation{Account: acct, Request: r.id, APIs: []string{"hash"}, Amount: r.amount,
			Period: p0, Allowance: allowance, Now: now, Expires: r.expires})
		must(t, "Reserve", err)
	}
	grant(t, l, acct, newRequest(), 50, p1.Start.Add(time.Hour), now)
	partsAt(t, l, acct, now, parts{remaining: 920, granted: 920, used: 130, lapse: p1.Start.Add(time.Hour), lapsing: 50})
	return p1.Start.Add(2 * time.Hour), open
}

func ledRenewalOrder(t *testing.T, l driver.Ledger) {
	ctx, n := t.Context(), newIDs()
	for _, c := range []struct {
		name string
		op   func(acct string, then time.Time, open driver.RequestID) (driver.Balance, error)
		want parts
	}{
		{"Balance", func(acct string, then time.Time, _ driver.RequestID) (driver.Balance, error) {
			return l.Balance(ctx, acct, then, p1, driver.MaxCredits)
		}, parts{remaining: driver.MaxCredits, granted: 970}},
		{"Reserve", func(acct string, then time.Time, _ driver.RequestID) (driver.Balance, error) {
			return l.Reserve(ctx, driver.Reservation{Account: acct, Request: newRequest(), APIs: []string{"hash"}, Amount: 5,
				Period: p1, Allowance: driver.MaxCredits, Now: then, Expires: then.Add(time.Hour)})
		}, parts{remaining: driver.MaxCredits - 5, granted: 970, used: 5}},
		{"Settle", func(acct string, then time.Time, open driver.RequestID) (driver.Balance, error) {
			return l.Settle(ctx, driver.Settlement{Account: acct, Request: open, Period: p1, Allowance: driver.MaxCredits, Now: then})
		}, parts{remaining: driver.MaxCredits, granted: 970}},
		// A change of the allowance renews to the allowance it sets, in the ledger's
		// order, and so changes nothing more.
		{"AdjustAllowance", func(acct string, then time.Time, _ driver.RequestID) (driver.Balance, error) {
			return l.Adjust(ctx, allowanceChange(acct, newRequest(), p1, driver.MaxCredits, 1, then))
		}, parts{remaining: driver.MaxCredits, granted: 970}},
		// Credits taken back come from the renewed allowance first.
		{"AdjustGrants", func(acct string, then time.Time, _ driver.RequestID) (driver.Balance, error) {
			return l.Adjust(ctx, driver.Adjustment{Account: acct, Request: newRequest(), Amount: -5, Part: driver.PartGrants,
				Reason: "storetest", Period: p1, Allowance: driver.MaxCredits, Now: then})
		}, parts{remaining: driver.MaxCredits - 5, granted: 970}},
	} {
		acct := openAccount(t, l, n, c.name, 0, p0)
		then, open := renewalOrderSetup(t, l, acct)
		b, err := c.op(acct, then, open)
		must(t, c.name+" renewing", err)
		wantParts(t, c.name+" renewing", b, c.want)
		b, err = l.Balance(ctx, acct, then, p1, driver.MaxCredits)
		must(t, "Balance", err)
		wantParts(t, "Balance after "+c.name, b, c.want)
	}
}

func ledMaxGrantLots(t *testing.T, l driver.Ledger) {
	ctx, n := t.Context(), newIDs()
	acct := openAccount(t, l, n, "acct", 0, p0)
	now := nowIn(p0)
	for i := range driver.MaxGrantLots {
		grant(t, l, acct, newRequest(), 1, now.Add(time.Duration(i+1)*time.Hour), now)
	}
	for _, expires := range []time.Time{now.Add(time.Duration(driver.MaxGrantLots+1) * time.Hour), never} {
		b, err := l.Adjust(ctx, grantAt(acct, newRequest(), 1, expires, now))
		wantErr(t, "one lot too many", err, driver.ErrTooManyGrants)
		wantParts(t, "the refused grant", b, parts{remaining: driver.MaxGrantLots, granted: driver.MaxGrantLots, lapse: now.Add(time.Hour), lapsing: 1})
	}
	b := grant(t, l, acct, newRequest(), 5, now.Add(time.Hour), now)
	wantParts(t, "a grant to an existing lot", b, parts{remaining: driver.MaxGrantLots + 5, granted: driver.MaxGrantLots + 5, lapse: now.Add(time.Hour), lapsing: 6})
	// Once the first lot has lapsed, a new one fits.
	b = grant(t, l, acct, newRequest(), 1, never, now.Add(time.Hour))
	wantParts(t, "a grant once a lot lapsed", b, parts{remaining: driver.MaxGrantLots, granted: driver.MaxGrantLots, lapse: now.Add(2 * time.Hour), lapsing: 1})
}

func ledRefundRestoresSpentLot(t *testing.T, l driver.Ledger) {
	ctx, n := t.Context(), newIDs()
	acct := openAccount(t, l, n, "acct", 0, p0)
	now := nowIn(p0)
	first := now.Add(time.Hour)
	for i := range driver.MaxGrantLots {
		grant(t, l, acct, newRequest(), 1, now.Add(time.Duration(i+1)*time.Hour), now)
	}
	id := newRequest()
	reserveAt(t, l, acct, id, 1, now, driver.Parts{Grants: 1})
	last := now.Add(time.Duration(driver.MaxGrantLots+1) * time.Hour)
	grant(t, l, acct, newRequest(), 1, last, now)
	b := settleParts(t, l, acct, id, 1, now, driver.Parts{})
	wantParts(t, "the refund to the spent lot", b, parts{remaining: driver.MaxGrantLots + 1, granted: driver.MaxGrantLots + 1, lapse: first, lapsing: 1})
	_, err := l.Adjust(ctx, grantAt(acct, newRequest(), 1, last.Add(time.Hour), now))
	wantErr(t, "a grant to one more lot", err, driver.ErrTooManyGrants)
	grant(t, l, acct, newRequest(), 1, last, now)
	// One lot lapses: 64 are left, and one more is still one too many; once a second
	// lapses, a new lot fits.
	_, err = l.Adjust(ctx, grantAt(acct, newRequest(), 1, last.Add(time.Hour), first))
	wantErr(t, "a grant to one more lot once one lapsed", err, driver.ErrTooManyGrants)
	b = grant(t, l, acct, newRequest(), 1, last.Add(time.Hour), now.Add(2*time.Hour))
	wantParts(t, "a grant once two lots lapsed", b, parts{remaining: driver.MaxGrantLots + 1, granted: driver.MaxGrantLots + 1, lapse: now.Add(3 * time.Hour), lapsing: 1})
}

func ledConcurrentGrantSpending(t *testing.T, l driver.Ledger) {
	ctx, n := t.Context(), newIDs()
	const perWorker, cost, left = 6, 3, 300
	acct := openAccount(t, l, n, "acct", left, p0)
	now := nowIn(p0)
	grant(t, l, acct, newRequest(), 100, now.Add(24*time.Hour), now)
	grant(t, l, acct, newRequest(), 101, now.Add(48*time.Hour), now)
	grant(t, l, acct, newRequest(), 102, never, now)
	const granted = 303
	refund := func(i int) int64 { return []int64{cost, 1, 0}[i%3] }
	var keptAllowance, keptGrants, refused atomic.Int64
	check := func(op string, b driver.Balance) {
		if b.Granted < 0 || b.Remaining < b.Granted || b.GrantsLapsing < 0 || b.GrantsLapsing > b.Granted || b.Remaining+b.Used > left+granted {
			t.Errorf("%s observed {Remaining %d, Granted %d, GrantsLapsing %d, Used %d}: a part below zero or credits from nowhere",
				op, b.Remaining, b.Granted, b.GrantsLapsing, b.Used)
		}
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				id := newRequest()
				b, err := l.Reserve(ctx, reservation(acct, id, cost, p0, "hash"))
				if errors.Is(err, driver.ErrInsufficientCredits) {
					refused.Add(1)
					continue
				}
				if err != nil {
					t.Errorf("Reserve: %v", err)
					return
				}
				check("Reserve", b)
				if b.Charge.Total() != cost {
					t.Errorf("Reserve of %d took %+v", cost, b.Charge)
				}
				b, err = l.Settle(ctx, settlement(acct, id, refund(w+i), p0))
				if err != nil {
					t.Errorf("Settle: %v", err)
					return
				}
				check("Settle", b)
				if b.Charge.Total() != cost-refund(w+i) || b.Charge.Allowance < 0 || b.Charge.Grants < 0 {
					t.Errorf("Settle refunding %d of %d kept %+v", refund(w+i), cost, b.Charge)
				}
				keptAllowance.Add(b.Charge.Allowance)
				keptGrants.Add(b.Charge.Grants)
			}
		})
	}
	wg.Wait()
	b, err := l.Balance(ctx, acct, now, p0, allowance)
	must(t, "Balance", err)
	check("Balance", b)
	if got, want := b.Remaining-b.Granted, left-keptAllowance.Load(); got != want {
		t.Errorf("the allowance part is %d, want %d - %d kept = %d", got, left, keptAllowance.Load(), want)
	}
	if got, want := b.Granted, granted-keptGrants.Load(); got != want {
		t.Errorf("the grants are %d, want %d - %d kept = %d", got, granted, keptGrants.Load(), want)
	}
	if got, want := b.Used, keptAllowance.Load()+keptGrants.Load(); got != want {
		t.Errorf("Used %d, want the %d kept", got, want)
	}
	if refused.Load() == 0 {
		t.Errorf("no reservation was refused: the balance of %d credits covered %d reservations of %d", left+granted, workers*perWorker, cost)
	}
}

func ledConcurrentGrantReplay(t *testing.T, l driver.Ledger) {
	ctx, n := t.Context(), newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	now := nowIn(p0)
	const distinct = 8
	reqs := make([]driver.RequestID, distinct)
	for i := range reqs {
		reqs[i] = newRequest()
	}
	lapse := func(i int) time.Time {
		if i%2 == 0 {
			return never
		}
		return now.Add(time.Duration(i) * time.Hour)
	}
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			if _, err := l.Adjust(ctx, grantAt(acct, reqs[i%distinct], 5, lapse(i%distinct), now)); err != nil {
				t.Errorf("Adjust #%d: %v", i, err)
			}
		})
	}
	wg.Wait()
	partsAt(t, l, acct, now, parts{remaining: 100 + 5*distinct, granted: 5 * distinct, lapse: now.Add(time.Hour), lapsing: 5})
}

// The rows of TestAdmitter about the two parts of a balance; they need the ledger.
var admGrantRows = []behaviour[AdmitterStores]{
	{"GrantsAfterAllowance",
		"A step spends the allowance first, then the grants, as Reserve does, and its result's Charge says so; Close keeps the charge from the allowance first and gives the refund back to the grants first.",
		admGrantsAfterAllowance},
	{"LapsedLotAtAdmission",
		"A step at or after a lot's expiry finds it lapsed: the step is denied for its credits when the rest does not cover it.",
		admLapsedLotAtAdmission},
	{"RenewalOrderAtAdmission",
		"A step or a closing that renews the balance, voids reservations and drops lapsed lots does so in the order every ledger operation does (see the row RenewalOrder of TestLedger).",
		admRenewalOrder},
	{"ConcurrentGrantAdmissions",
		"Concurrent steps and closings against the allowance and several lots never take any part below zero, and the kept charges add up, part by part, to what the balance lost.",
		admConcurrentGrantAdmissions},
}

func admGrantsAfterAllowance(t *testing.T, s AdmitterStores) {
	f, _ := setup(t, s, 10)
	grant(t, s.Ledger, f.account, newRequest(), 20, t0.Add(24*time.Hour), t0)
	step := f.step(s, newRequest(), 3, 15)
	r := admit(t, s, step)
	wantDenied(t, r, driver.NotDenied)
	wantParts(t, "Admit of 15", r.Balance, parts{remaining: 15, granted: 15, used: 15, lapse: t0.Add(24 * time.Hour), lapsing: 15})
	if want := (driver.Parts{Allowance: 10, Grants: 5}); r.Balance.Charge != want {
		t.Errorf("Admit of 15 took %+v, want %+v", r.Balance.Charge, want)
	}
	b, err := s.Admitter.Close(t.Context(), driver.Closing{Account: f.account, Request: step.Request, ReleaseSlot: s.Slots != nil,
		Settlement: &driver.Settlement{Account: f.account, Request: step.Request, Refund: 10, Period: f.period, Allowance: admAllowance, Now: t0}})
	must(t, "Close", err)
	wantParts(t, "Close refunding 10", b, parts{remaining: 25, granted: 20, used: 5, lapse: t0.Add(24 * time.Hour), lapsing: 20})
	if want := (driver.Parts{Allowance: 5}); b.Charge != want {
		t.Errorf("Close refunding 10 kept %+v, want %+v", b.Charge, want)
	}
}

func admLapsedLotAtAdmission(t *testing.T, s AdmitterStores) {
	f, _ := setup(t, s, 1)
	lapse := t0.Add(time.Minute)
	grant(t, s.Ledger, f.account, newRequest(), 20, lapse, t0)
	for _, c := range []struct {
		now    time.Time
		denied driver.Denial
	}{{lapse.Add(-time.Second), driver.NotDenied}, {lapse, driver.DeniedCredits}} {
		step := f.step(s, newRequest(), 3, 2)
		step.Rate = nil
		step.Now, step.Credits.Now, step.Credits.Expires = c.now, c.now, c.now.Add(admHold)
		r := admit(t, s, step)
		wantDenied(t, r, c.denied)
		if c.denied == driver.NotDenied {
			wantParts(t, "Admit a second before the lapse", r.Balance, parts{remaining: 19, granted: 19, used: 2, lapse: lapse, lapsing: 19})
		} else {
			wantParts(t, "Admit at the lapse", r.Balance, parts{used: 2})
		}
	}
}

func admRenewalOrder(t *testing.T, s AdmitterStores) {
	ctx := t.Context()
	for _, c := range []struct {
		name string
		op   func(f admFixture, then time.Time, open driver.RequestID) (driver.Balance, error)
		want parts
	}{
		{"Admit", func(f admFixture, then time.Time, _ driver.RequestID) (driver.Balance, error) {
			step := f.step(s, newRequest(), 3, 5)
			step.Now = then
			step.Credits.Now, step.Credits.Expires, step.Credits.Period, step.Credits.Allowance = then, then.Add(time.Hour), p1, driver.MaxCredits
			r, err := s.Admitter.Admit(ctx, step)
			if err == nil && r.Denied != driver.NotDenied {
				err = fmt.Errorf("denied %v", r.Denied)
			}
			return r.Balance, err
		}, parts{remaining: driver.MaxCredits - 5, granted: 970, used: 5}},
		{"Close", func(f admFixture, then time.Time, open driver.RequestID) (driver.Balance, error) {
			return s.Admitter.Close(ctx, driver.Closing{Account: f.account, Request: open,
				Settlement: &driver.Settlement{Account: f.account, Request: open, Period: p1, Allowance: driver.MaxCredits, Now: then}})
		}, parts{remaining: driver.MaxCredits, granted: 970}},
	} {
		f, _ := setup(t, s, 0)
		then, open := renewalOrderSetup(t, s.Ledger, f.account)
		b, err := c.op(f, then, open)
		must(t, c.name+" renewing", err)
		wantParts(t, c.name+" renewing", b, c.want)
		b, err = s.Ledger.Balance(ctx, f.account, then, p1, driver.MaxCredits)
		must(t, "Balance", err)
		wantParts(t, "Balance after "+c.name, b, c.want)
	}
}

func admConcurrentGrantAdmissions(t *testing.T, s AdmitterStores) {
	ctx := t.Context()
	const left, cost = 40, 3
	f, _ := setup(t, s, left)
	grant(t, s.Ledger, f.account, newRequest(), 30, t0.Add(time.Hour), t0)
	grant(t, s.Ledger, f.account, newRequest(), 31, t0.Add(2*time.Hour), t0)
	grant(t, s.Ledger, f.account, newRequest(), 32, never, t0)
	const granted = 93
	var keptAllowance, keptGrants, refused atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 12 {
				step := f.step(s, newRequest(), 1000, cost)
				step.Rate = nil
				r, err := s.Admitter.Admit(ctx, step)
				if err != nil {
					t.Errorf("Admit: %v", err)
					return
				}
				if r.Denied == driver.DeniedCredits {
					refused.Add(1)
					continue
				}
				if b := r.Balance; b.Granted < 0 || b.Remaining < b.Granted || b.Charge.Total() != cost {
					t.Errorf("Admit observed {Remaining %d, Granted %d} and took %+v", b.Remaining, b.Granted, b.Charge)
				}
				refund := int64((w + i) % (cost + 1))
				b, err := s.Admitter.Close(ctx, driver.Closing{Account: f.account, Request: step.Request, ReleaseSlot: s.Slots != nil,
					Settlement: &driver.Settlement{Account: f.account, Request: step.Request, Refund: refund, Period: f.period, Allowance: admAllowance, Now: t0}})
				if err != nil {
					t.Errorf("Close: %v", err)
					return
				}
				if b.Granted < 0 || b.Remaining < b.Granted || b.Charge.Total() != cost-refund {
					t.Errorf("Close observed {Remaining %d, Granted %d} and kept %+v of %d-%d", b.Remaining, b.Granted, b.Charge, cost, refund)
				}
				keptAllowance.Add(b.Charge.Allowance)
				keptGrants.Add(b.Charge.Grants)
			}
		})
	}
	wg.Wait()
	b, err := s.Ledger.Balance(ctx, f.account, t0, f.period, admAllowance)
	must(t, "Balance", err)
	if b.Remaining-b.Granted != left-keptAllowance.Load() || b.Granted != granted-keptGrants.Load() || b.Used != keptAllowance.Load()+keptGrants.Load() {
		t.Errorf("after the admissions: {Remaining %d, Granted %d, Used %d}, want the allowance %d-%d, the grants %d-%d, and Used the sum",
			b.Remaining, b.Granted, b.Used, left, keptAllowance.Load(), granted, keptGrants.Load())
	}
	if refused.Load() == 0 {
		t.Errorf("no step was refused: %d credits covered 96 steps of %d", left+granted, cost)
	}
}

// The rows about grants that need a [driver.Sweeper].
var grantSweepRows = []behaviour[driver.Ledger]{
	{"SweepGivesBackToLots",
		"A sweep voids a reservation that took from grant lots as any operation would: back to the live lots, then to the allowance; what it took from a lot lapsed since is lost.",
		ledSweepGivesBackToLots},
	{"SettleRacesSweepWithGrants",
		"Settlements with refunds racing sweeps, over reservations that took from the allowance and from grant lots, end each reservation once, and every credit is kept or given back to the part it came from: the kept charges add up, part by part, to what the balance lost.",
		ledSettleRacesSweepWithGrants},
}

func ledSweepGivesBackToLots(t *testing.T, l driver.Ledger) {
	sw := l.(driver.Sweeper)
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 10, p0)
	now := nowIn(p0)
	grant(t, l, acct, newRequest(), 10, now.Add(30*time.Second), now)
	grant(t, l, acct, newRequest(), 10, never, now)
	b, err := l.Reserve(t.Context(), expiring(acct, newRequest(), 25, now, "hash"))
	must(t, "Reserve", err)
	if want := (driver.Parts{Allowance: 10, Grants: 15}); b.Charge != want {
		t.Errorf("Reserve took %+v, want %+v", b.Charge, want)
	}
	voided, err := sw.Sweep(t.Context(), now.Add(time.Minute+time.Second), 100)
	must(t, "Sweep", err)
	if voided != 1 {
		t.Errorf("Sweep voided %d reservations, want 1", voided)
	}
	partsAt(t, l, acct, now.Add(2*time.Minute), parts{remaining: 20, granted: 10})
	wantUsage(t, l, acct, p0, nil)
}

func ledSettleRacesSweepWithGrants(t *testing.T, l driver.Ledger) {
	sw := l.(driver.Sweeper)
	n := newIDs()
	now := nowIn(p0)
	const calls, cost, left, granted = 32, 3, 10, 100
	acct := openAccount(t, l, n, "acct", left, p0)
	grant(t, l, acct, newRequest(), 40, now.Add(10*time.Hour), now)
	grant(t, l, acct, newRequest(), 25, now.Add(20*time.Hour), now)
	grant(t, l, acct, newRequest(), 35, never, now)
	ids := make([]driver.RequestID, calls)
	for i := range ids {
		ids[i] = newRequest()
		if _, err := l.Reserve(t.Context(), expiring(acct, ids[i], cost, now, "hash")); err != nil {
			t.Fatalf("Reserve #%d: %v", i, err)
		}
	}
	var keptAllowance, keptGrants, settled, voided, swept atomic.Int64
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			// Dated before the expiry: only a sweep can void it first.
			b, err := settleAt(t, l, acct, id, int64(i%(cost+1)), now.Add(30*time.Second))
			switch {
			case err == nil:
				settled.Add(1)
				keptAllowance.Add(b.Charge.Allowance)
				keptGrants.Add(b.Charge.Grants)
			case errors.Is(err, driver.ErrVoided):
				voided.Add(1)
			default:
				t.Errorf("Settle: %v", err)
			}
		})
	}
	raceSweeps(t, &wg, sw, now.Add(time.Minute), calls, &swept)
	if settled.Load()+swept.Load() != calls || voided.Load() > swept.Load() {
		t.Errorf("%d settled, %d voided by sweeps (%d settlements told so): want each of %d reservations ended once",
			settled.Load(), swept.Load(), voided.Load(), calls)
	}
	b, err := l.Balance(t.Context(), acct, now.Add(time.Hour), p0, allowance)
	must(t, "Balance", err)
	if b.Remaining-b.Granted != left-keptAllowance.Load() || b.Granted != granted-keptGrants.Load() || b.Used != keptAllowance.Load()+keptGrants.Load() {
		t.Errorf("after the race: {Remaining %d, Granted %d, Used %d}, want the allowance %d-%d, the grants %d-%d, and Used the sum",
			b.Remaining, b.Granted, b.Used, left, keptAllowance.Load(), granted, keptGrants.Load())
	}
}
