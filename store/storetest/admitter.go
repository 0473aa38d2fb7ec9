package storetest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store"
)

// AdmitterStores is a store under test in the roles of [TestAdmitter]: the Admitter,
// and the plain interfaces through which the suite prepares and reads the state the
// Admitter works on. A nil role is a part the Admitter does not hold (a Redis store that
// holds rate limits and slots, say, has no Keys and no Ledger), and the rows that need it
// are skipped.
type AdmitterStores struct {
	Admitter driver.Admitter
	Keys     auth.KeyStore
	Ledger   driver.Ledger
	Rates    driver.RateLimiter
	Slots    driver.ConcurrencyLimiter
}

// TestAdmitter checks that a [driver.Admitter] performs the parts of an admission step
// all or nothing, in the order key, rate, slot, credits; that a denied step changes
// nothing; that a replayed step takes nothing twice; and that Close settles at most once
// and frees the slot.
//
// newStores is called once per subtest and must return empty stores; it registers any
// teardown with t.Cleanup. The subtests run in parallel. Run the suite with -race.
//
// Rows about a part the store does not hold are left out (not skipped), since
// newStores says which roles the store plays; probe is called once to learn them.
func TestAdmitter(t *testing.T, newStores func(t *testing.T) AdmitterStores) {
	t.Helper()
	probe := newStores(t)
	var rows []behaviour[AdmitterStores]
	for _, row := range admitterRows {
		if needs := admitterNeeds[row.name]; needs == nil || needs(probe) {
			rows = append(rows, row)
		}
	}
	if probe.Ledger != nil {
		rows = append(rows, admGrantRows...)
	}
	run(t, newStores, rows)
}

// admitterNeeds says which rows need which roles.
var admitterNeeds = map[string]func(AdmitterStores) bool{
	"KeyRotatedAway":      func(s AdmitterStores) bool { return s.Keys != nil },
	"KeyRevoked":          func(s AdmitterStores) bool { return s.Keys != nil },
	"KeyUpdated":          func(s AdmitterStores) bool { return s.Keys != nil },
	"AccountUpdated":      func(s AdmitterStores) bool { return s.Keys != nil },
	"SessionCheck":        func(s AdmitterStores) bool { return s.Keys != nil },
	"RateDenied":          func(s AdmitterStores) bool { return s.Rates != nil },
	"RateEvents":          func(s AdmitterStores) bool { return s.Rates != nil },
	"RateEventsDenied":    func(s AdmitterStores) bool { return s.Rates != nil },
	"SlotDenied":          func(s AdmitterStores) bool { return s.Slots != nil },
	"CreditsDenied":       func(s AdmitterStores) bool { return s.Ledger != nil },
	"NegativeAmount":      func(s AdmitterStores) bool { return s.Ledger != nil },
	"ConcurrentSpending":  func(s AdmitterStores) bool { return s.Ledger != nil },
	"ConcurrentCeiling":   func(s AdmitterStores) bool { return s.Slots != nil },
	"ConcurrentKeyChecks": func(s AdmitterStores) bool { return s.Keys != nil },
	"ReleaseSlotAlone":    func(s AdmitterStores) bool { return s.Slots != nil },
}

var admitterRows = []behaviour[AdmitterStores]{
	{"AdmitEveryPart",
		"A step with every part the store holds admits the call: the credits are reserved, the slot is held, the rate event is recorded.",
		admAdmitEveryPart},
	{"KeyRotatedAway",
		"A key check with a hash the key no longer has denies the step with KeyUnknown and changes nothing.",
		admKeyRotatedAway},
	{"KeyRevoked",
		"A key check of a revoked key denies the step with KeyRevoked and changes nothing.",
		admKeyRevoked},
	{"KeyUpdated",
		"A key check with the revision a key had before UpdateKey denies the step with KeyUnknown and changes nothing; with the new revision it is admitted.",
		admKeyUpdated},
	{"AccountUpdated",
		"A key check, of a key or of a session, with the revision an account had before UpdateAccount denies the step with KeyUnknown and changes nothing; with the new revision it is admitted.",
		admAccountUpdated},
	{"SessionCheck",
		"A key check without a key id passes when the account exists and denies with KeyUnknown when it does not.",
		admSessionCheck},
	{"RateDenied",
		"A step whose rate limit refuses is denied with the rate decision and takes no slot and no credits.",
		admRateDenied},
	{"RateEvents",
		"A step of several rate-limit events (Events) records them all at once: Remaining counts the events left, and the next event is denied when they filled the burst.",
		admRateEvents},
	{"RateEventsDenied",
		"A step whose events do not all fit in the rate limit is denied whole, with the time until they fit, and records none of them, holds no slot and takes no credits.",
		admRateEventsDenied},
	{"SlotDenied",
		"A step refused for its slot records no rate event and takes no credits.",
		admSlotDenied},
	{"CreditsDenied",
		"A step refused for its credits reports the current balance, holds no slot and records no rate event.",
		admCreditsDenied},
	{"FreeAtZeroBalance",
		"A step that reserves zero credits (a free API) is admitted at a zero balance: its slot is held and its rate event recorded, and nothing is charged.",
		admFreeAtZeroBalance},
	{"NegativeAmount",
		"A step that reserves a negative amount is refused with store.ErrConflict, as Reserve refuses it, and changes nothing: no credits given, no slot held, no rate event recorded.",
		admNegativeAmount},
	{"ReplayTakesNothingTwice",
		"A step replayed with the same request after it was admitted is admitted again, charging once, holding one slot and recording one rate event.",
		admReplay},
	{"CloseSettlesOnceAndReleases",
		"Close settles the reservation once and frees the slot; closing again refunds nothing more.",
		admCloseOnce},
	{"ReleaseSlotAlone",
		"Close with ReleaseSlot and no Settlement frees the slot and leaves the reservation open: a later Close settles it once.",
		admReleaseSlotAlone},
	{"ConcurrentSpending",
		"Concurrent steps against one balance admit exactly as many calls as it covers.",
		admConcurrentSpending},
	{"ConcurrentCeiling",
		"Concurrent steps with a concurrency ceiling never admit more calls than the ceiling.",
		admConcurrentCeiling},
	{"ConcurrentKeyChecks",
		"Concurrent steps of one account that check a key and nothing else (a call whose credits and limits are kept elsewhere) each get their own key's verdict, whether the store decides them together or one by one: a live key, a revoked key, a rotated-away hash, another account's key and a session check; none changes anything.",
		admConcurrentKeyChecks},
	{"CanceledContext",
		"Admit and Close with a canceled context return an error matching context.Canceled.",
		admCanceled},
}

// admFixture is an account prepared in every role the store holds.
type admFixture struct {
	account string
	key     auth.Key
	limit   driver.Limit
	period  driver.Period
}

const admAllowance = 1000

// admHold is how long the reservations of the admission checks stay open.
const admHold = time.Hour

// setup creates an account with a key and a balance of credits (in the roles the store
// holds) and returns a step that uses every part the store holds.
func setup(t *testing.T, s AdmitterStores, credits int64) (admFixture, driver.Step) {
	t.Helper()
	n := newIDs()
	f := admFixture{account: n.id("acct"), limit: driver.Limit{Rate: 60, Per: time.Minute, Burst: 3}, period: driver.MonthOf(t0)}
	f.key = auth.Key{ID: n.id("key"), AccountID: f.account, Name: "primary", Primary: true, Hash: newHash(), CreatedAt: t0}
	ctx := t.Context()
	if s.Keys != nil {
		must(t, "CreateAccount", s.Keys.CreateAccount(ctx, auth.Account{ID: f.account, Plan: "p", CreatedAt: t0}, f.key))
	}
	if s.Ledger != nil {
		must(t, "Open", s.Ledger.Open(ctx, driver.Opening{Account: f.account, Balance: credits, Allowance: admAllowance, Period: f.period}))
	}
	return f, f.step(s, newRequest(), 3, 1)
}

// step returns a step with every part the store holds.
func (f admFixture) step(s AdmitterStores, req driver.RequestID, ceiling int, cost int64) driver.Step {
	st := driver.Step{Account: f.account, Request: req, Now: t0}
	if s.Keys != nil {
		st.Key = &driver.KeyCheck{Account: f.account, KeyID: f.key.ID, Hash: f.key.Hash}
	}
	if s.Rates != nil {
		l := f.limit
		st.Rate = &l
	}
	if s.Slots != nil {
		st.Slot = &driver.SlotClaim{Ceiling: ceiling, Lease: time.Minute}
	}
	if s.Ledger != nil {
		st.Credits = &driver.Reservation{Account: f.account, Request: req, APIs: []string{"hash"}, Amount: cost,
			Period: f.period, Allowance: admAllowance, Now: t0, Expires: t0.Add(admHold)}
	}
	return st
}

// state is what the plain interfaces report of the fixture's account.
type state struct {
	remaining int64
	inUse     int
	rateLeft  int
}

func (f admFixture) read(t *testing.T, s AdmitterStores) state {
	t.Helper()
	ctx := t.Context()
	var st state
	if s.Ledger != nil {
		b, err := s.Ledger.Balance(ctx, f.account, t0, f.period, admAllowance)
		must(t, "Balance", err)
		st.remaining = b.Remaining
	}
	if s.Slots != nil {
		n, err := s.Slots.InUse(ctx, f.account, t0)
		must(t, "InUse", err)
		st.inUse = n
	}
	if s.Rates != nil {
		d, err := s.Rates.Peek(ctx, f.account, f.limit, t0)
		must(t, "Peek", err)
		st.rateLeft = d.Remaining
		if !d.Allowed {
			st.rateLeft = -1
		}
	}
	return st
}

func admit(t *testing.T, s AdmitterStores, step driver.Step) driver.StepResult {
	t.Helper()
	r, err := s.Admitter.Admit(t.Context(), step)
	must(t, "Admit", err)
	return r
}

func wantDenied(t *testing.T, r driver.StepResult, want driver.Denial) {
	t.Helper()
	if r.Denied != want {
		t.Errorf("Denied = %d, want %d (result %+v)", r.Denied, want, r)
	}
}

func wantSame(t *testing.T, what string, got, want state) {
	t.Helper()
	if got != want {
		t.Errorf("%s: state %+v, want it unchanged %+v", what, got, want)
	}
}

func admAdmitEveryPart(t *testing.T, s AdmitterStores) {
	f, step := setup(t, s, 10)
	before := f.read(t, s)
	r := admit(t, s, step)
	wantDenied(t, r, driver.NotDenied)
	after := f.read(t, s)
	if s.Ledger != nil && (after.remaining != 9 || r.Balance.Remaining != 9) {
		t.Errorf("remaining %d (result %d), want 9", after.remaining, r.Balance.Remaining)
	}
	if s.Slots != nil && (after.inUse != 1 || !r.Slot.Acquired) {
		t.Errorf("in use %d, acquired %v; want one slot", after.inUse, r.Slot.Acquired)
	}
	if s.Rates != nil && (after.rateLeft != before.rateLeft-1 || !r.Rate.Allowed || r.Rate.Remaining != 2) {
		t.Errorf("rate: left %d -> %d, decision %+v; want one event recorded and 2 remaining", before.rateLeft, after.rateLeft, r.Rate)
	}
}

// wantKeyDenied admits step and checks that its key check denies it with the given
// state, changing nothing.
func wantKeyDenied(t *testing.T, s AdmitterStores, f admFixture, step driver.Step, want driver.KeyState, after string) {
	t.Helper()
	before := f.read(t, s)
	r := admit(t, s, step)
	wantDenied(t, r, driver.DeniedKey)
	if r.Key != want {
		t.Errorf("after %s: Key = %d, want %d", after, r.Key, want)
	}
	wantSame(t, "after "+after, f.read(t, s), before)
}

func admKeyRotatedAway(t *testing.T, s AdmitterStores) {
	f, step := setup(t, s, 10)
	_, err := s.Keys.RotateKey(t.Context(), f.key.ID, auth.AnyRevision, newHash(), at(time.Second))
	must(t, "RotateKey", err)
	wantKeyDenied(t, s, f, step, driver.KeyUnknown, "a rotated-away key")
}

func admKeyRevoked(t *testing.T, s AdmitterStores) {
	f, step := setup(t, s, 10)
	_, err := s.Keys.RevokeKey(t.Context(), f.key.ID, auth.AnyRevision, at(time.Second))
	must(t, "RevokeKey", err)
	wantKeyDenied(t, s, f, step, driver.KeyRevoked, "a revoked key")
}

func admKeyUpdated(t *testing.T, s AdmitterStores) {
	f, step := setup(t, s, 10)
	updated, err := s.Keys.UpdateKey(t.Context(), auth.KeyUpdate{ID: f.key.ID, Name: "narrowed",
		Restrictions: restrictions(t, auth.RestrictionSpec{APIs: []string{"hash"}}), Revision: f.key.Revision})
	must(t, "UpdateKey", err)
	wantKeyDenied(t, s, f, step, driver.KeyUnknown, "an updated key (the check names its old revision)")

	fresh := f.step(s, newRequest(), 3, 1)
	fresh.Key.Revision = updated.Revision
	wantDenied(t, admit(t, s, fresh), driver.NotDenied)
}

func admAccountUpdated(t *testing.T, s AdmitterStores) {
	f, step := setup(t, s, 10)
	acct, err := s.Keys.Account(t.Context(), f.account)
	must(t, "Account", err)
	u := acct.Update()
	u.Plan = "other"
	updated, err := s.Keys.UpdateAccount(t.Context(), u)
	must(t, "UpdateAccount", err)
	wantKeyDenied(t, s, f, step, driver.KeyUnknown, "an updated account (the check names its old revision)")
	session := f.step(s, newRequest(), 3, 1)
	session.Key = &driver.KeyCheck{Account: f.account}
	wantKeyDenied(t, s, f, session, driver.KeyUnknown, "an updated account (the session check names its old revision)")

	fresh := f.step(s, newRequest(), 3, 1)
	fresh.Key.AccountRevision = updated.Revision
	wantDenied(t, admit(t, s, fresh), driver.NotDenied)
	session = f.step(s, newRequest(), 3, 1)
	session.Key = &driver.KeyCheck{Account: f.account, AccountRevision: updated.Revision}
	wantDenied(t, admit(t, s, session), driver.NotDenied)
}

func admSessionCheck(t *testing.T, s AdmitterStores) {
	f, step := setup(t, s, 10)
	step.Key = &driver.KeyCheck{Account: f.account}
	wantDenied(t, admit(t, s, step), driver.NotDenied)

	g, other := setup(t, s, 10)
	other.Key = &driver.KeyCheck{Account: g.account + "-gone"}
	before := g.read(t, s)
	r := admit(t, s, other)
	wantDenied(t, r, driver.DeniedKey)
	if r.Key != driver.KeyUnknown {
		t.Errorf("Key = %d, want KeyUnknown", r.Key)
	}
	wantSame(t, "after an unknown account", g.read(t, s), before)
}

func admRateDenied(t *testing.T, s AdmitterStores) {
	f, _ := setup(t, s, 10)
	for range 3 { // the burst
		wantDenied(t, admit(t, s, f.step(s, newRequest(), 10, 1)), driver.NotDenied)
	}
	before := f.read(t, s)
	r := admit(t, s, f.step(s, newRequest(), 10, 1))
	wantDenied(t, r, driver.DeniedRate)
	if r.Rate.Allowed || r.Rate.RetryAfter != time.Second {
		t.Errorf("rate decision %+v, want denied with RetryAfter 1s", r.Rate)
	}
	wantSame(t, "after a rate denial", f.read(t, s), before)
}

func admRateEvents(t *testing.T, s AdmitterStores) {
	f, step := setup(t, s, 10)
	step.Events = 2
	r := admit(t, s, step)
	wantDenied(t, r, driver.NotDenied)
	if !r.Rate.Allowed || r.Rate.Remaining != 1 || r.Rate.ResetAfter != 2*time.Second {
		t.Errorf("rate decision on 2 events of a burst of 3: %+v, want allowed with 1 remaining and 2s to full", r.Rate)
	}
	if left := f.read(t, s).rateLeft; left != 0 {
		t.Errorf("after 2 of 3 events, Peek says %d remain after one more, want 0", left)
	}
	wantDenied(t, admit(t, s, f.step(s, newRequest(), 10, 1)), driver.NotDenied)
	wantDenied(t, admit(t, s, f.step(s, newRequest(), 10, 1)), driver.DeniedRate)
}

func admRateEventsDenied(t *testing.T, s AdmitterStores) {
	f, _ := setup(t, s, 10)
	wantDenied(t, admit(t, s, f.step(s, newRequest(), 10, 1)), driver.NotDenied)
	before := f.read(t, s)
	step := f.step(s, newRequest(), 10, 1)
	step.Events = 3
	r := admit(t, s, step)
	wantDenied(t, r, driver.DeniedRate)
	if r.Rate.Allowed || r.Rate.RetryAfter != time.Second {
		t.Errorf("rate decision on 3 events with 2 left: %+v, want denied with RetryAfter 1s", r.Rate)
	}
	wantSame(t, "after a denial of 3 events", f.read(t, s), before)
	step = f.step(s, newRequest(), 10, 1)
	step.Events = 2
	wantDenied(t, admit(t, s, step), driver.NotDenied)
}

func admSlotDenied(t *testing.T, s AdmitterStores) {
	f, _ := setup(t, s, 10)
	wantDenied(t, admit(t, s, f.step(s, newRequest(), 1, 1)), driver.NotDenied)
	before := f.read(t, s)
	r := admit(t, s, f.step(s, newRequest(), 1, 1))
	wantDenied(t, r, driver.DeniedSlot)
	if r.Slot.Acquired || r.Slot.InUse != 1 {
		t.Errorf("slot decision %+v, want refused with 1 in use", r.Slot)
	}
	wantSame(t, "after a slot denial", f.read(t, s), before)
}

func admCreditsDenied(t *testing.T, s AdmitterStores) {
	f, _ := setup(t, s, 2)
	before := f.read(t, s)
	r := admit(t, s, f.step(s, newRequest(), 10, 3))
	wantDenied(t, r, driver.DeniedCredits)
	if r.Balance.Remaining != 2 {
		t.Errorf("reported balance %+v, want the current remaining 2", r.Balance)
	}
	wantSame(t, "after a credits denial", f.read(t, s), before)
}

func admFreeAtZeroBalance(t *testing.T, s AdmitterStores) {
	f, _ := setup(t, s, 0)
	before := f.read(t, s)
	wantDenied(t, admit(t, s, f.step(s, newRequest(), 10, 0)), driver.NotDenied)
	after := f.read(t, s)
	if after.remaining != before.remaining {
		t.Errorf("a free step changed the balance: %+v, then %+v", before, after)
	}
	if s.Slots != nil && after.inUse != before.inUse+1 {
		t.Errorf("a free step holds %d slots, want %d", after.inUse, before.inUse+1)
	}
	if s.Rates != nil && after.rateLeft != before.rateLeft-1 {
		t.Errorf("a free step left %d rate events, want %d", after.rateLeft, before.rateLeft-1)
	}
}

func admNegativeAmount(t *testing.T, s AdmitterStores) {
	f, _ := setup(t, s, 10)
	before := f.read(t, s)
	_, err := s.Admitter.Admit(t.Context(), f.step(s, newRequest(), 10, -5))
	wantErr(t, "Admit reserving -5 credits", err, store.ErrConflict)
	wantSame(t, "after a step with a negative amount", f.read(t, s), before)
}

func admReplay(t *testing.T, s AdmitterStores) {
	f, step := setup(t, s, 10)
	before := f.read(t, s)
	wantDenied(t, admit(t, s, step), driver.NotDenied)
	once := f.read(t, s)
	wantDenied(t, admit(t, s, step), driver.NotDenied)
	wantSame(t, "after a replay", f.read(t, s), once)
	if s.Ledger != nil && once.remaining != before.remaining-1 {
		t.Errorf("remaining %d, want %d", once.remaining, before.remaining-1)
	}
}

func admCloseOnce(t *testing.T, s AdmitterStores) {
	f, step := setup(t, s, 10)
	before := f.read(t, s)
	wantDenied(t, admit(t, s, step), driver.NotDenied)
	c := driver.Closing{Account: f.account, Request: step.Request, ReleaseSlot: s.Slots != nil}
	if s.Ledger != nil {
		c.Settlement = &driver.Settlement{Account: f.account, Request: step.Request, Refund: 1, Uncount: []string{"hash"},
			Period: f.period, Allowance: admAllowance, Now: t0}
	}
	for range 2 {
		b, err := s.Admitter.Close(t.Context(), c)
		must(t, "Close", err)
		if s.Ledger != nil && b.Remaining != before.remaining {
			t.Errorf("Close returned remaining %d, want %d", b.Remaining, before.remaining)
		}
	}
	after := f.read(t, s)
	if after.remaining != before.remaining || after.inUse != 0 {
		t.Errorf("after Close: %+v, want remaining %d and no slot", after, before.remaining)
	}
}

func admReleaseSlotAlone(t *testing.T, s AdmitterStores) {
	f, step := setup(t, s, 10)
	before := f.read(t, s)
	wantDenied(t, admit(t, s, step), driver.NotDenied)
	for range 2 {
		_, err := s.Admitter.Close(t.Context(), driver.Closing{Account: f.account, Request: step.Request, ReleaseSlot: true})
		must(t, "Close freeing the slot alone", err)
	}
	after := f.read(t, s)
	if after.inUse != 0 {
		t.Errorf("after freeing the slot: %d slots in use, want 0", after.inUse)
	}
	if s.Ledger == nil {
		return
	}
	if after.remaining != before.remaining-1 {
		t.Errorf("after freeing the slot: remaining %d, want %d (the reservation open)", after.remaining, before.remaining-1)
	}
	settle := driver.Closing{Account: f.account, Request: step.Request, Settlement: &driver.Settlement{Account: f.account,
		Request: step.Request, Refund: 1, Uncount: []string{"hash"}, Period: f.period, Allowance: admAllowance, Now: t0}}
	for range 2 {
		b, err := s.Admitter.Close(t.Context(), settle)
		must(t, "Close settling the open reservation", err)
		if b.Remaining != before.remaining {
			t.Errorf("Close returned remaining %d, want %d", b.Remaining, before.remaining)
		}
	}
}

func admConcurrentSpending(t *testing.T, s AdmitterStores) {
	f, _ := setup(t, s, 50)
	var admitted, denied atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				step := f.step(s, newRequest(), 1000, 1)
				step.Rate = nil // the rate limit is not what this row is about
				r, err := s.Admitter.Admit(t.Context(), step)
				if err != nil {
					t.Error(err)
					return
				}
				switch r.Denied {
				case driver.NotDenied:
					admitted.Add(1)
				case driver.DeniedCredits:
					denied.Add(1)
				default:
					t.Errorf("unexpected denial %d", r.Denied)
				}
			}
		})
	}
	wg.Wait()
	if admitted.Load() != 50 || denied.Load() != 110 || f.read(t, s).remaining != 0 {
		t.Errorf("admitted %d, denied %d, remaining %d; want 50, 110 and 0", admitted.Load(), denied.Load(), f.read(t, s).remaining)
	}
}

func admConcurrentCeiling(t *testing.T, s AdmitterStores) {
	f, _ := setup(t, s, 1000)
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 10 {
				step := f.step(s, newRequest(), 5, 1)
				step.Rate = nil
				r, err := s.Admitter.Admit(t.Context(), step)
				if err != nil {
					t.Error(err)
					return
				}
				if r.Denied == driver.NotDenied {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if admitted.Load() != 5 || f.read(t, s).inUse != 5 {
		t.Errorf("admitted %d with %d in use, want exactly the ceiling, 5", admitted.Load(), f.read(t, s).inUse)
	}
}

func admConcurrentKeyChecks(t *testing.T, s AdmitterStores) {
	f, _ := setup(t, s, 10)
	ctx, n := t.Context(), newIDs()
	revoked := auth.Key{ID: n.id("revoked"), AccountID: f.account, Name: "revoked", Hash: newHash(), CreatedAt: t0}
	rotated := auth.Key{ID: n.id("rotated"), AccountID: f.account, Name: "rotated", Hash: newHash(), CreatedAt: t0}
	for _, k := range []auth.Key{revoked, rotated} {
		must(t, "CreateKey", s.Keys.CreateKey(ctx, k, auth.KeyLimit{}))
	}
	_, err := s.Keys.RevokeKey(ctx, revoked.ID, auth.AnyRevision, at(time.Second))
	must(t, "RevokeKey", err)
	_, err = s.Keys.RotateKey(ctx, rotated.ID, auth.AnyRevision, newHash(), at(time.Second))
	must(t, "RotateKey", err)
	g, _ := setup(t, s, 10) // another account, whose key f's steps name
	before := f.read(t, s)

	checks := []struct {
		check driver.KeyCheck
		want  driver.KeyState
	}{
		{driver.KeyCheck{Account: f.account, KeyID: f.key.ID, Hash: f.key.Hash}, driver.KeyLive},
		{driver.KeyCheck{Account: f.account, KeyID: revoked.ID, Hash: revoked.Hash}, driver.KeyRevoked},
		{driver.KeyCheck{Account: f.account, KeyID: rotated.ID, Hash: rotated.Hash}, driver.KeyUnknown},
		{driver.KeyCheck{Account: g.account, KeyID: g.key.ID, Hash: g.key.Hash}, driver.KeyUnknown},
		{driver.KeyCheck{Account: f.account}, driver.KeyLive},
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 25 {
				c := checks[(w+i)%len(checks)]
				check := c.check
				r, err := s.Admitter.Admit(ctx, driver.Step{Account: f.account, Request: newRequest(), Now: t0, Key: &check})
				if err != nil {
					t.Error(err)
					return
				}
				wantDenial := driver.DeniedKey
				if c.want == driver.KeyLive {
					wantDenial = driver.NotDenied
				}
				if r.Key != c.want || r.Denied != wantDenial {
					t.Errorf("check %+v: Key = %d, Denied = %d; want %d, %d", check, r.Key, r.Denied, c.want, wantDenial)
					return
				}
			}
		})
	}
	wg.Wait()
	wantSame(t, "after the key checks", f.read(t, s), before)
}

func admCanceled(t *testing.T, s AdmitterStores) {
	f, step := setup(t, s, 10)
	ctx := canceled(t)
	if _, err := s.Admitter.Admit(ctx, step); !errors.Is(err, context.Canceled) {
		t.Errorf("Admit: %v, want context.Canceled", err)
	}
	if _, err := s.Admitter.Close(ctx, driver.Closing{Account: f.account, Request: step.Request}); !errors.Is(err, context.Canceled) {
		t.Errorf("Close: %v, want context.Canceled", err)
	}
}

// TestKeyChecker checks that an [driver.KeyChecker] reports the state of keys as the
// [auth.KeyStore] it checks knows them, on the very next call after a change.
//
// newStores is called once per subtest and must return an empty store in both roles.
func TestKeyChecker(t *testing.T, newStores func(t *testing.T) (auth.KeyStore, driver.KeyChecker)) {
	t.Helper()
	type pair struct {
		keys    auth.KeyStore
		checker driver.KeyChecker
	}
	newPair := func(t *testing.T) pair { k, c := newStores(t); return pair{k, c} }
	run(t, newPair, []behaviour[pair]{
		{"States",
			"CheckKey reports a live key live, the old hash of a rotated key, the old revision of an updated key and an unknown account unknown, a revoked key revoked (whatever revision the check names), and an existing account live for a session check.",
			func(t *testing.T, p pair) {
				ctx, n := t.Context(), newIDs()
				acct := n.id("acct")
				key := auth.Key{ID: n.id("key"), AccountID: acct, Name: "primary", Primary: true, Hash: newHash(), CreatedAt: t0}
				must(t, "CreateAccount", p.keys.CreateAccount(ctx, auth.Account{ID: acct, Plan: "p", CreatedAt: t0}, key))
				check := checkKeyState(t, p.checker)
				check(driver.KeyCheck{Account: acct, KeyID: key.ID, Hash: key.Hash}, driver.KeyLive)
				check(driver.KeyCheck{Account: acct}, driver.KeyLive)
				check(driver.KeyCheck{Account: acct + "-gone"}, driver.KeyUnknown)
				check(driver.KeyCheck{Account: acct, KeyID: key.ID + "-gone", Hash: key.Hash}, driver.KeyUnknown)
				newH := newHash()
				rotated, err := p.keys.RotateKey(ctx, key.ID, auth.AnyRevision, newH, at(time.Second))
				must(t, "RotateKey", err)
				check(driver.KeyCheck{Account: acct, KeyID: key.ID, Hash: key.Hash}, driver.KeyUnknown)
				check(driver.KeyCheck{Account: acct, KeyID: key.ID, Hash: newH, Revision: rotated.Revision}, driver.KeyLive)
				updated, err := p.keys.UpdateKey(ctx, auth.KeyUpdate{ID: key.ID, Name: "renamed", Revision: rotated.Revision})
				must(t, "UpdateKey", err)
				check(driver.KeyCheck{Account: acct, KeyID: key.ID, Hash: newH, Revision: rotated.Revision}, driver.KeyUnknown)
				check(driver.KeyCheck{Account: acct, KeyID: key.ID, Hash: newH, Revision: updated.Revision}, driver.KeyLive)
				_, err = p.keys.RevokeKey(ctx, key.ID, auth.AnyRevision, at(2*time.Second))
				must(t, "RevokeKey", err)
				check(driver.KeyCheck{Account: acct, KeyID: key.ID, Hash: newH, Revision: updated.Revision}, driver.KeyRevoked)
			}},
		{"AccountRevision",
			"CheckKey reports a key, or a session, whose check names a revision its account no longer has (it was updated since) unknown, and live with the account's revision; once the account is deleted, both are unknown.",
			func(t *testing.T, p pair) {
				ctx, n := t.Context(), newIDs()
				acct, key := plainAccount(n, "acct")
				must(t, "CreateAccount", p.keys.CreateAccount(ctx, acct, key))
				check := checkKeyState(t, p.checker)
				keyAt := func(rev int64) driver.KeyCheck {
					return driver.KeyCheck{Account: acct.ID, KeyID: key.ID, Hash: key.Hash, AccountRevision: rev}
				}
				sessionAt := func(rev int64) driver.KeyCheck { return driver.KeyCheck{Account: acct.ID, AccountRevision: rev} }
				check(keyAt(0), driver.KeyLive)
				check(sessionAt(0), driver.KeyLive)
				check(keyAt(1), driver.KeyUnknown)
				u := acct.Update()
				u.State = auth.AccountSuspended
				suspended, err := p.keys.UpdateAccount(ctx, u)
				must(t, "UpdateAccount", err)
				check(keyAt(0), driver.KeyUnknown)
				check(sessionAt(0), driver.KeyUnknown)
				check(keyAt(suspended.Revision), driver.KeyLive)
				check(sessionAt(suspended.Revision), driver.KeyLive)
				u = suspended.Update()
				u.State = auth.AccountClosed
				closed, err := p.keys.UpdateAccount(ctx, u)
				must(t, "UpdateAccount", err)
				check(keyAt(suspended.Revision), driver.KeyUnknown)
				check(keyAt(closed.Revision), driver.KeyLive)
				must(t, "DeleteAccount", p.keys.DeleteAccount(ctx, acct.ID))
				check(keyAt(closed.Revision), driver.KeyUnknown)
				check(sessionAt(closed.Revision), driver.KeyUnknown)
			}},
		{"CanceledContext",
			"CheckKey with a canceled context returns an error matching context.Canceled.",
			func(t *testing.T, p pair) {
				_, err := p.checker.CheckKey(canceled(t), driver.KeyCheck{Account: "a"})
				if !errors.Is(err, context.Canceled) {
					t.Errorf("CheckKey: %v, want context.Canceled", err)
				}
			}},
	})
}

// checkKeyState returns a function that checks that CheckKey answers want to c.
func checkKeyState(t *testing.T, checker driver.KeyChecker) func(c driver.KeyCheck, want driver.KeyState) {
	return func(c driver.KeyCheck, want driver.KeyState) {
		t.Helper()
		got, err := checker.CheckKey(t.Context(), c)
		must(t, "CheckKey", err)
		if got != want {
			t.Errorf("CheckKey(%+v) = %d, want %d", c, got, want)
		}
	}
}
