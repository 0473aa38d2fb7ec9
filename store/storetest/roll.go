package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store"
)

// TestRoller checks that a [driver.Roller] (a ledger that settles a reservation and
// opens the next in one step, for credit blocks) behaves as its documentation says:
// the settlement keeps its charge and counts its calls, the next reservation holds
// what it was given, a replay changes nothing, a refused roll changes nothing, and
// rolls racing each other lose no credit.
//
// newLedger is called once per subtest and must return an empty ledger that is also a
// driver.Roller. The subtests run in parallel.
func TestRoller(t *testing.T, newLedger func(t *testing.T) driver.Ledger) {
	t.Helper()
	run(t, func(t *testing.T) driver.Ledger {
		l := newLedger(t)
		if _, ok := l.(driver.Roller); !ok {
			t.Fatalf("storetest.TestRoller: %T is no driver.Roller", l)
		}
		return l
	}, rollRows)
}

var rollRows = []behaviour[driver.Ledger]{
	{"KeepsAndCarries",
		"A roll keeps the charge (Refund given back), counts Counts in the period, and opens Next with the amount given, in one step; Next settles like any reservation.",
		rollKeepsAndCarries},
	{"WithoutNext",
		"A roll without Next is a settlement that counts its calls.",
		rollWithoutNext},
	{"Uncounts",
		"A roll of a reservation that listed APIs uncounts those its settlement names, as Settle does, then counts Counts.",
		rollUncounts},
	{"Replay",
		"A roll sent again changes nothing and reports Replay, with what Next holds while it is open and 0 once it is closed.",
		rollReplay},
	{"Voided",
		"A roll of a reservation past its expiry returns ErrVoided, gives the credits back, counts nothing and opens no Next.",
		rollVoided},
	{"Unknown",
		"A roll of a request never reserved returns store.ErrNotFound and opens nothing.",
		rollUnknown},
	{"Refused",
		"A malformed roll (Next above the refund, Next with APIs, of another account or period, a request id used before, a refund above the reservation, a count not positive) is refused with store.ErrConflict, or store.ErrInvalid for text no store holds, and changes nothing.",
		rollRefused},
	{"NextExpires",
		"Next is an expiring reservation like any: open past its expiry it is voided and its credits come back.",
		rollNextExpires},
	{"LapsedLot",
		"When what the settlement gives back went to a grant lot that has lapsed, Next takes what the balance holds, down to zero, and RollResult.Next says how much.",
		rollLapsedLot},
	{"AfterRenewal",
		"A roll made after the balance was renewed gives nothing back to the old allowance and counts nothing in the new period; Next takes from the new period's balance.",
		rollAfterRenewal},
	{"Concurrent",
		"Chains of rolls on one account from many goroutines, beside plain calls, lose no credit and no count.",
		rollConcurrent},
}

func roller(t *testing.T, l driver.Ledger) driver.Roller { t.Helper(); return l.(driver.Roller) }

// block reserves a block of amount credits with no APIs, as a credit block does.
func block(acct string, id driver.RequestID, amount int64, p driver.Period) driver.Reservation {
	r := reservation(acct, id, amount, p)
	r.APIs = nil
	return r
}

// rollOf returns the roll of reservation id of acct keeping keep of reserved, counting
// counts, with a Next of next credits (none if next is negative).
func rollOf(acct string, id driver.RequestID, reserved, keep int64, counts map[string]int64, next int64, p driver.Period) (driver.Roll, driver.RequestID) {
	r := driver.Roll{Settlement: settlement(acct, id, reserved-keep, p), Counts: counts}
	var nid driver.RequestID
	if next >= 0 {
		nid = newRequest()
		n := block(acct, nid, next, p)
		r.Next = &n
	}
	return r, nid
}

func mustRoll(t *testing.T, l driver.Ledger, r driver.Roll, next, remaining, used int64, p driver.Period) driver.RollResult {
	t.Helper()
	got, err := roller(t, l).Roll(t.Context(), r)
	must(t, "Roll", err)
	checkBalance(t, "Roll", got.Balance, remaining, used, p)
	if got.Next != next {
		t.Errorf("Roll: Next holds %d, want %d", got.Next, next)
	}
	return got
}

func rollKeepsAndCarries(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	b1 := newRequest()
	mustReserve(t, l, block(acct, b1, 30, p0), 70, 30, p0)
	r, b2 := rollOf(acct, b1, 30, 10, map[string]int64{"hash": 3, "echo": 2}, 20, p0)
	got := mustRoll(t, l, r, 20, 70, 30, p0)
	if got.Replay {
		t.Errorf("Roll: Replay set on the first roll")
	}
	if want := (driver.Parts{Allowance: 10}); got.Balance.Charge != want {
		t.Errorf("Roll: Charge %+v, want %+v", got.Balance.Charge, want)
	}
	wantUsage(t, l, acct, p0, map[string]int64{"hash": 3, "echo": 2})
	// The next block settles like any reservation; a roll of it rolls on.
	r2, b3 := rollOf(acct, b2, 20, 5, map[string]int64{"hash": 5}, 15, p0)
	mustRoll(t, l, r2, 15, 70, 30, p0)
	mustSettle(t, l, settlement(acct, b3, 15, p0), 85, 15, p0)
	wantBalance(t, l, acct, p0, 85, 15)
	wantUsage(t, l, acct, p0, map[string]int64{"hash": 8, "echo": 2})
	_, err := l.Settle(t.Context(), settlement(acct, b2, 0, p0))
	if err != nil {
		t.Errorf("Settle of the rolled block (a replay): %v", err)
	}
	wantBalance(t, l, acct, p0, 85, 15)
}

func rollWithoutNext(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	b1 := newRequest()
	mustReserve(t, l, block(acct, b1, 30, p0), 70, 30, p0)
	r, _ := rollOf(acct, b1, 30, 12, map[string]int64{"hash": 4}, -1, p0)
	mustRoll(t, l, r, 0, 88, 12, p0)
	wantUsage(t, l, acct, p0, map[string]int64{"hash": 4})
}

func rollUncounts(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	b1 := newRequest()
	mustReserve(t, l, reservation(acct, b1, 30, p0, "hash", "echo", "sum"), 70, 30, p0)
	wantUsage(t, l, acct, p0, map[string]int64{"hash": 1, "echo": 1, "sum": 1})
	r, _ := rollOf(acct, b1, 30, 10, map[string]int64{"hash": 4}, 20, p0)
	r.Settlement.Uncount = []string{"echo", "sum"}
	mustRoll(t, l, r, 20, 70, 30, p0)
	wantUsage(t, l, acct, p0, map[string]int64{"hash": 5, "echo": 0, "sum": 0})
	// A settlement that gives nothing back still uncounts.
	b2 := newRequest()
	mustReserve(t, l, reservation(acct, b2, 5, p0, "echo"), 65, 35, p0)
	r2, _ := rollOf(acct, b2, 5, 5, map[string]int64{"hash": 1}, 0, p0)
	r2.Settlement.Uncount = []string{"echo"}
	mustRoll(t, l, r2, 0, 65, 35, p0)
	wantUsage(t, l, acct, p0, map[string]int64{"hash": 6, "echo": 0, "sum": 0})
}

func rollReplay(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	b1 := newRequest()
	mustReserve(t, l, block(acct, b1, 30, p0), 70, 30, p0)
	r, b2 := rollOf(acct, b1, 30, 10, map[string]int64{"hash": 3}, 20, p0)
	mustRoll(t, l, r, 20, 70, 30, p0)
	got := mustRoll(t, l, r, 20, 70, 30, p0)
	if !got.Replay || got.Balance.Charge != (driver.Parts{}) {
		t.Errorf("replayed Roll: Replay %v, Charge %+v; want true and no charge", got.Replay, got.Balance.Charge)
	}
	wantUsage(t, l, acct, p0, map[string]int64{"hash": 3})
	mustSettle(t, l, settlement(acct, b2, 20, p0), 90, 10, p0)
	got = mustRoll(t, l, r, 0, 90, 10, p0)
	if !got.Replay {
		t.Errorf("Roll replayed after its Next was settled: Replay false")
	}
	wantUsage(t, l, acct, p0, map[string]int64{"hash": 3})
}

func rollVoided(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	now := nowIn(p0)
	b1 := newRequest()
	if _, err := l.Reserve(t.Context(), expiring(acct, b1, 30, now)); err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	r, b2 := rollOf(acct, b1, 30, 10, map[string]int64{"hash": 3}, 20, p0)
	r.Settlement.Now = now.Add(2 * time.Minute)
	r.Next.Now, r.Next.Expires = r.Settlement.Now, r.Settlement.Now.Add(time.Minute)
	_, err := roller(t, l).Roll(t.Context(), r)
	wantErr(t, "Roll of an expired reservation", err, driver.ErrVoided)
	wantBalance(t, l, acct, p0, 100, 0)
	wantUsage(t, l, acct, p0, nil)
	_, err = l.Settle(t.Context(), settlement(acct, b2, 0, p0))
	wantErr(t, "Settle of the Next of a voided roll", err, store.ErrNotFound)
}

func rollUnknown(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	r, b2 := rollOf(acct, newRequest(), 30, 10, nil, 20, p0)
	_, err := roller(t, l).Roll(t.Context(), r)
	wantErr(t, "Roll of an unknown request", err, store.ErrNotFound)
	wantBalance(t, l, acct, p0, 100, 0)
	_, err = l.Settle(t.Context(), settlement(acct, b2, 0, p0))
	wantErr(t, "Settle of the Next of an unknown roll", err, store.ErrNotFound)
}

func rollRefused(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 1000, p0)
	other := openAccount(t, l, n, "other", 1000, p0)
	used := newRequest()
	mustReserve(t, l, reservation(acct, used, 5, p0, "hash"), 995, 5, p0)
	mustSettle(t, l, settlement(acct, used, 0, p0), 995, 5, p0)
	cases := []struct {
		name  string
		edit  func(r *driver.Roll)
		want  error
		valid bool // Roll.Check accepts it: the store refuses it
	}{
		{"next above the refund", func(r *driver.Roll) { r.Next.Amount = r.Settlement.Refund + 1 }, store.ErrConflict, false},
		{"negative next", func(r *driver.Roll) { r.Next.Amount = -1 }, store.ErrConflict, false},
		{"next with APIs", func(r *driver.Roll) { r.Next.APIs = []string{"hash"} }, store.ErrConflict, false},
		{"next of another account", func(r *driver.Roll) { r.Next.Account = other }, store.ErrConflict, false},
		{"next of another period", func(r *driver.Roll) { r.Next.Period = p1 }, store.ErrConflict, false},
		{"next with the settled id", func(r *driver.Roll) { r.Next.Request = r.Settlement.Request }, store.ErrConflict, false},
		{"next expiring at once", func(r *driver.Roll) { r.Next.Expires = r.Next.Now }, store.ErrConflict, false},
		{"negative refund", func(r *driver.Roll) { r.Settlement.Refund = -1; r.Next.Amount = 0 }, store.ErrConflict, false},
		{"zero count", func(r *driver.Roll) { r.Counts = map[string]int64{"hash": 0} }, store.ErrConflict, false},
		{"count of no API", func(r *driver.Roll) { r.Counts = map[string]int64{"": 1} }, store.ErrConflict, false},
		{"count of an API with a NUL byte", func(r *driver.Roll) { r.Counts = map[string]int64{"ha\x00sh": 1} }, store.ErrInvalid, true},
		{"next with a request id used before", func(r *driver.Roll) { r.Next.Request = used }, store.ErrConflict, true},
		{"refund above the reservation", func(r *driver.Roll) { r.Settlement.Refund = 31; r.Next.Amount = 31 }, store.ErrConflict, true},
	}
	for _, c := range cases {
		b1 := newRequest()
		mustReserve(t, l, block(acct, b1, 30, p0), 965, 35, p0)
		r, _ := rollOf(acct, b1, 30, 10, map[string]int64{"hash": 3}, 20, p0)
		c.edit(&r)
		if err := r.Check(); (err == nil) != c.valid {
			t.Errorf("%s: Roll.Check says %v", c.name, err)
		}
		_, err := roller(t, l).Roll(t.Context(), r)
		wantErr(t, "Roll with "+c.name, err, c.want)
		wantBalance(t, l, acct, p0, 965, 35)
		wantUsage(t, l, acct, p0, map[string]int64{"hash": 1}) // the call made with used
		mustSettle(t, l, settlement(acct, b1, 30, p0), 995, 5, p0)
	}
}

func rollNextExpires(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	now := nowIn(p0)
	b1 := newRequest()
	mustReserve(t, l, block(acct, b1, 30, p0), 70, 30, p0)
	r, b2 := rollOf(acct, b1, 30, 10, map[string]int64{"hash": 1}, 20, p0)
	r.Next.Expires = now.Add(time.Minute)
	mustRoll(t, l, r, 20, 70, 30, p0)
	balanceAt(t, l, acct, now.Add(2*time.Minute), 90, 10)
	_, err := l.Settle(t.Context(), driver.Settlement{Account: acct, Request: b2, Period: p0, Allowance: allowance, Now: now.Add(2 * time.Minute)})
	wantErr(t, "Settle of an expired Next", err, driver.ErrVoided)
	wantUsage(t, l, acct, p0, map[string]int64{"hash": 1})
}

func rollLapsedLot(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 0, p0)
	now := nowIn(p0)
	grant(t, l, acct, newRequest(), 50, now.Add(time.Hour), now)
	b1 := newRequest()
	reserveAt(t, l, acct, b1, 30, now, driver.Parts{Grants: 30})
	later := now.Add(2 * time.Hour)
	r, b2 := rollOf(acct, b1, 30, 10, nil, 20, p0)
	r.Settlement.Now, r.Next.Now, r.Next.Expires = later, later, later.Add(hold)
	got, err := roller(t, l).Roll(t.Context(), r)
	must(t, "Roll after the lot lapsed", err)
	if got.Next != 0 || got.Balance.Remaining != 0 {
		t.Errorf("Roll after the lot lapsed: Next holds %d with %d remaining, want 0 and 0", got.Next, got.Balance.Remaining)
	}
	// The Next of nothing settles as any.
	if _, err := l.Settle(t.Context(), driver.Settlement{Account: acct, Request: b2, Period: p0, Allowance: allowance, Now: later}); err != nil {
		t.Errorf("Settle of an empty Next: %v", err)
	}
	balanceAt(t, l, acct, later, 0, 10)
}

func rollAfterRenewal(t *testing.T, l driver.Ledger) {
	n := newIDs()
	acct := openAccount(t, l, n, "acct", 100, p0)
	b1 := newRequest()
	mustReserve(t, l, block(acct, b1, 30, p0), 70, 30, p0)
	wantBalance(t, l, acct, p1, allowance, 0) // renewed
	r, b2 := rollOf(acct, b1, 30, 10, map[string]int64{"hash": 3}, 20, p0)
	r.Settlement.Now = nowIn(p1)
	r.Next.Now, r.Next.Expires = r.Settlement.Now, r.Settlement.Now.Add(hold)
	got, err := roller(t, l).Roll(t.Context(), r)
	must(t, "Roll after a renewal", err)
	checkBalance(t, "Roll after a renewal", got.Balance, allowance-20, 20, p1)
	if got.Next != 20 {
		t.Errorf("Roll after a renewal: Next holds %d, want 20", got.Next)
	}
	wantUsage(t, l, acct, p1, nil)
	mustSettle(t, l, driver.Settlement{Account: acct, Request: b2, Refund: 20, Period: p1, Allowance: allowance, Now: nowIn(p1)}, allowance, 0, p1)
}

func rollConcurrent(t *testing.T, l driver.Ledger) {
	ctx, n := t.Context(), newIDs()
	const rolls, size, balance = 15, 100, 100000
	acct := openAccount(t, l, n, "acct", balance, p0)
	keep := func(w, i int) int64 { return int64((w+i)%5 + 1) }
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			id := newRequest()
			if _, err := l.Reserve(ctx, block(acct, id, size, p0)); err != nil {
				t.Errorf("Reserve: %v", err)
				return
			}
			held := int64(size)
			for i := range rolls {
				k := keep(w, i)
				r, next := rollOf(acct, id, held, k, map[string]int64{"hash": k}, held-k, p0)
				got, err := roller(t, l).Roll(ctx, r)
				if err != nil || got.Next != held-k {
					t.Errorf("Roll: %v, Next holds %d, want %d", err, got.Next, held-k)
					return
				}
				id, held = next, held-k
				// A plain call beside it.
				c := newRequest()
				if _, err := l.Reserve(ctx, reservation(acct, c, 1, p0, "echo")); err != nil {
					t.Errorf("Reserve: %v", err)
					return
				}
				if _, err := l.Settle(ctx, settlement(acct, c, 0, p0)); err != nil {
					t.Errorf("Settle: %v", err)
					return
				}
			}
			if _, err := l.Settle(ctx, settlement(acct, id, held, p0)); err != nil {
				t.Errorf("Settle of the last block: %v", err)
			}
		})
	}
	wg.Wait()
	var spent, hashes int64
	for w := range workers {
		for i := range rolls {
			spent += keep(w, i) + 1
			hashes += keep(w, i)
		}
	}
	wantBalance(t, l, acct, p0, balance-spent, spent)
	wantUsage(t, l, acct, p0, map[string]int64{"hash": hashes, "echo": int64(workers * rolls)})
}
