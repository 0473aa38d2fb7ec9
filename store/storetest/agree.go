package storetest

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store"
)

// A NamedLedger is a ledger that [LedgersAgree] compares with others.
type NamedLedger struct {
	Name   string
	Ledger driver.Ledger
}

// LedgersAgree runs the same random sequences of ledger operations on every ledger and
// reports the first operation whose outcome differs: its error (by the sentinel it
// wraps), and, for an operation that answers a balance, every field of the balance
// (both parts, the next lapse, Used, Allowance, Period and Charge), and the usage of
// the period. Each sequence is seeded (seeds from 1 to seeds, each on fresh accounts),
// so that a failure names a seed that replays it; its clock is scripted, in whole
// seconds, moving through renewals, lapses, expiries, changes of the allowance and of
// the billing anchor, and now and then behind the latest clock, as another instance's
// may be. The allowance is changed as a change of plan changes it (PartAllowance, at
// increasing revisions), now and then late (at an earlier revision), for an earlier
// period, or in a form the ledgers must refuse. Ledgers that implement [driver.Admitter] are sometimes driven through it
// instead of Reserve and Settle, and those that implement [driver.Sweeper] are swept.
// Settlements now and then refund more than was reserved or a negative amount, or name
// a request id never reserved (which a later reservation may take).
//
// Every ledger's balance is also checked against the bounds every ledger keeps: no
// part below zero, and the remaining plus used credits at most MaxCredits.
//
// A quarter of the sequences move amounts near MaxCredits, to reach its bound by
// grants, reservations and refunds across renewals; they pass no allowance. Another
// quarter (the edge sequences) move allowances near MaxCredits too, so that a renewal
// cuts the allowance by the grants and a void after it is cut by the bound, and their
// clock dwells in the last hours of a period, where reservations expire and grants
// lapse around the renewal, before it jumps past it: one operation then drops lapsed
// lots, voids, renews and voids again, in the order driver.Ledger says.
func LedgersAgree(t *testing.T, ledgers []NamedLedger, seeds, steps int) {
	t.Helper()
	if len(ledgers) < 2 {
		t.Fatalf("LedgersAgree compares at least two ledgers, given %d", len(ledgers))
	}
	for seed := 1; seed <= seeds; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			g := newAgreeRun(t, ledgers, uint64(seed))
			for range steps {
				if !g.step() {
					return
				}
			}
		})
	}
}

// agreeRun is one seeded sequence.
type agreeRun struct {
	t       *testing.T
	ledgers []NamedLedger
	rng     *rand.Rand
	seed    uint64
	account string
	log     []string

	clock     time.Time // the latest now
	anchor    time.Time
	cycle     billing.Cycle
	allowance int64
	huge      bool      // amounts near MaxCredits
	edge      bool      // allowances near MaxCredits too, and a clock that dwells at the renewals
	revision  int64     // the latest revision of a change of the allowance
	latest    time.Time // the start of the latest period an operation named

	reserved []agreeReservation // the ids reserved, with the amount of the reservation made
	tried    []agreeReservation // the ids tried, made or refused
	grants   []driver.Adjustment
	first    agreeOutcome // what the first ledger answered to the last operation
}

type agreeReservation struct {
	id     driver.RequestID
	amount int64
	apis   []string
}

func newAgreeRun(t *testing.T, ledgers []NamedLedger, seed uint64) *agreeRun {
	g := &agreeRun{t: t, ledgers: ledgers, rng: rand.New(rand.NewPCG(seed, 0x7011)), seed: seed,
		account: newIDs().id("agree"), clock: t0, cycle: billing.Monthly}
	g.huge = g.rng.IntN(4) == 0
	g.edge = !g.huge && g.rng.IntN(3) == 0
	g.huge = g.huge || g.edge
	g.allowance = g.allowanceOf()
	if g.rng.IntN(2) == 0 {
		g.anchor = t0.Add(-time.Duration(g.rng.IntN(60*24)) * time.Hour)
	}
	opening := g.amount()
	o := driver.Opening{Account: g.account, Balance: opening, Allowance: g.allowance, Period: g.period(t0)}
	g.latest = o.Period.Start
	g.record("Open(balance %d, allowance %d, period %s)", opening, g.allowance, fmtPeriod(o.Period))
	g.compare("Open", func(l NamedLedger) agreeOutcome {
		return agreeOutcome{err: l.Ledger.Open(t.Context(), o)}
	})
	return g
}

// request returns a request id drawn from the sequence's source.
func (g *agreeRun) request() driver.RequestID {
	var id driver.RequestID
	for i := range id {
		id[i] = byte(g.rng.Uint32())
	}
	return id
}

// amount returns a number of credits: small, or for a huge run often near MaxCredits.
func (g *agreeRun) amount() int64 {
	if g.huge && g.rng.IntN(3) == 0 {
		return driver.MaxCredits - g.rng.Int64N(300)
	}
	if g.huge && g.rng.IntN(3) == 0 {
		return driver.MaxCredits/2 - g.rng.Int64N(300)
	}
	return g.rng.Int64N(60)
}

// allowanceOf returns a plan's allowance: small, none in a huge run, and often near
// MaxCredits in an edge run (see LedgersAgree).
func (g *agreeRun) allowanceOf() int64 {
	switch {
	case g.edge && g.rng.IntN(3) == 0:
		return driver.MaxCredits - g.rng.Int64N(300)
	case g.edge && g.rng.IntN(2) == 0:
		return driver.MaxCredits/2 - g.rng.Int64N(300)
	case g.huge && !g.edge:
		return 0
	}
	return g.rng.Int64N(60)
}

func (g *agreeRun) period(now time.Time) driver.Period {
	return billing.PeriodAt(g.anchor, g.cycle, now)
}

func (g *agreeRun) record(format string, args ...any) {
	g.log = append(g.log, fmt.Sprintf("%s  ", g.clock.Format(time.DateTime))+fmt.Sprintf(format, args...))
}

func fmtPeriod(p driver.Period) string {
	return p.Start.Format(time.DateTime) + ".." + p.End.Format(time.DateTime)
}

// agreeOutcome is what an operation answered.
type agreeOutcome struct {
	err     error
	balance *driver.Balance
	usage   map[string]int64
}

// class names the sentinel an error wraps.
func class(err error) string {
	for _, s := range []struct {
		name string
		err  error
	}{
		{"ErrInsufficientCredits", driver.ErrInsufficientCredits},
		{"ErrVoided", driver.ErrVoided},
		{"ErrTooManyCredits", driver.ErrTooManyCredits},
		{"ErrTooManyGrants", driver.ErrTooManyGrants},
		{"ErrNotFound", store.ErrNotFound},
		{"ErrConflict", store.ErrConflict},
		{"ErrInvalid", store.ErrInvalid},
	} {
		if errors.Is(err, s.err) {
			return s.name
		}
	}
	if err != nil {
		return "other: " + err.Error()
	}
	return "nil"
}

func (o agreeOutcome) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "err=%s", class(o.err))
	if o.balance != nil {
		x := o.balance
		fmt.Fprintf(&b, " {Remaining %d, Granted %d, GrantsLapse %s, GrantsLapsing %d, Used %d, Allowance %d, Period %s, Charge %+v}",
			x.Remaining, x.Granted, fmtLapse(x.GrantsLapse), x.GrantsLapsing, x.Used, x.Allowance, fmtPeriod(x.Period), x.Charge)
	}
	if o.usage != nil {
		keys := slices.Sorted(maps.Keys(o.usage))
		fmt.Fprintf(&b, " usage{")
		for _, k := range keys {
			fmt.Fprintf(&b, "%s:%d ", k, o.usage[k])
		}
		fmt.Fprintf(&b, "}")
	}
	return b.String()
}

func fmtLapse(t time.Time) string {
	if t.IsZero() {
		return "none"
	}
	return t.Format(time.DateTime)
}

// compare runs op on every ledger and reports whether the outcomes agree; on the first
// disagreement it fails the test with the sequence so far.
func (g *agreeRun) compare(what string, op func(NamedLedger) agreeOutcome) bool {
	g.t.Helper()
	outs := make([]string, len(g.ledgers))
	for i, l := range g.ledgers {
		o := op(l)
		if i == 0 {
			g.first = o
		}
		if o.balance != nil {
			if o.err != nil && !errors.Is(o.err, driver.ErrInsufficientCredits) && !errors.Is(o.err, driver.ErrVoided) {
				o.balance = nil // stores answer different balances with other errors
			} else if msg := bounds(*o.balance); msg != "" {
				g.fail(fmt.Sprintf("%s on %s: %s: %s", what, l.Name, msg, o))
				return false
			}
		}
		if o.usage != nil {
			for k, v := range o.usage {
				if v == 0 {
					delete(o.usage, k)
				}
			}
		}
		outs[i] = o.String()
	}
	for i := 1; i < len(outs); i++ {
		if outs[i] != outs[0] {
			var b strings.Builder
			fmt.Fprintf(&b, "%s: the ledgers disagree:\n", what)
			for j, l := range g.ledgers {
				fmt.Fprintf(&b, "  %-12s %s\n", l.Name, outs[j])
			}
			g.fail(b.String())
			return false
		}
	}
	return true
}

// bounds says how a balance breaks the bounds every ledger keeps, or "".
func bounds(b driver.Balance) string {
	switch {
	case b.Granted < 0 || b.Remaining < b.Granted:
		return "a part below zero"
	case b.Used < 0:
		return "Used below zero"
	case b.Remaining > driver.MaxCredits-b.Used:
		return "the remaining plus used credits past MaxCredits"
	case b.GrantsLapsing < 0 || b.GrantsLapsing > b.Granted:
		return "GrantsLapsing outside 0..Granted"
	}
	return ""
}

func (g *agreeRun) fail(msg string) {
	g.t.Helper()
	g.t.Fatalf("seed %d, account %s: %s\nthe operations:\n  %s", g.seed, g.account, msg, strings.Join(g.log, "\n  "))
}

var agreeAPIs = []string{"hash", "geo", "mail"}

// step performs one random operation on every ledger and reports whether they agreed.
func (g *agreeRun) step() bool {
	ctx := g.t.Context()
	r := g.rng
	// The clock moves: mostly seconds, sometimes hours or days (renewals, lapses); in an
	// edge run, now and then to the last hours of the period.
	switch k := r.IntN(10); {
	case g.edge && k == 9:
		if late := g.period(g.clock).End.Add(-time.Duration(1+r.IntN(3*3600)) * time.Second); late.After(g.clock) {
			g.clock = late
		}
	case k < 5:
		g.clock = g.clock.Add(time.Duration(r.IntN(120)) * time.Second)
	case k < 8:
		g.clock = g.clock.Add(time.Duration(r.IntN(12)) * time.Hour)
	case k < 9:
		g.clock = g.clock.Add(time.Duration(r.IntN(40)) * 24 * time.Hour)
	}
	now := g.clock
	if r.IntN(8) == 0 {
		now = now.Add(-time.Duration(1+r.IntN(3600)) * time.Second) // another instance's clock, behind
	}
	p := g.period(now)
	lag := ""
	if !now.Equal(g.clock) {
		lag = fmt.Sprintf(" (now %s)", now.Format(time.DateTime))
	}
	switch k := r.IntN(100); {
	case k < 25: // a reservation, new or replayed
		res := agreeReservation{id: g.request(), amount: g.amount() / 2}
		if len(g.tried) > 0 && r.IntN(8) == 0 {
			res = g.tried[r.IntN(len(g.tried))]
			res.amount = g.amount() / 2
		} else {
			for _, api := range agreeAPIs {
				if r.IntN(2) == 0 {
					res.apis = append(res.apis, api)
				}
			}
			g.tried = append(g.tried, res)
		}
		hold := time.Duration(1+r.IntN(3*3600)) * time.Second
		admit := r.IntN(2) == 0
		rv := driver.Reservation{Account: g.account, Request: res.id, APIs: res.apis, Amount: res.amount, Period: p,
			Allowance: g.allowance, Now: now, Expires: now.Add(hold)}
		g.named(p)
		g.record("Reserve %s %d apis %v hold %s period %s allowance %d admit %v%s", res.id.String()[:6], res.amount, res.apis, hold, fmtPeriod(p), g.allowance, admit, lag)
		ok := g.compare("Reserve", func(l NamedLedger) agreeOutcome {
			if a, ok := l.Ledger.(driver.Admitter); ok && admit {
				sr, err := a.Admit(ctx, driver.Step{Account: g.account, Request: res.id, Now: now, Credits: &rv})
				b := sr.Balance
				if err == nil && sr.Denied == driver.DeniedCredits {
					err = driver.ErrInsufficientCredits
				}
				return agreeOutcome{err: err, balance: &b}
			}
			b, err := l.Ledger.Reserve(ctx, rv)
			return agreeOutcome{err: err, balance: &b}
		})
		if ok && g.first.err == nil && !slices.ContainsFunc(g.reserved, func(x agreeReservation) bool { return x.id == res.id }) {
			g.reserved = append(g.reserved, res)
		}
		return ok
	case k < 45: // a settlement
		if len(g.reserved) == 0 {
			return true
		}
		res := g.reserved[r.IntN(len(g.reserved))]
		if r.IntN(30) == 0 {
			// One never reserved, whose id may be reserved later: a settlement of an
			// unknown id is not remembered.
			res = agreeReservation{id: g.request(), amount: 1}
			g.tried = append(g.tried, res)
		}
		refund := int64(0)
		switch k := r.IntN(40); {
		case k == 0: // more than was reserved: refused while it is open, a replay once settled
			refund = res.amount + 1 + r.Int64N(3)
		case k == 1: // refused, whatever the reservation's state
			refund = -1
		case res.amount > 0 && k%3 > 0:
			refund = r.Int64N(res.amount + 1)
		}
		var uncount []string
		if refund == res.amount && r.IntN(2) == 0 {
			uncount = res.apis
		}
		closeIt := r.IntN(2) == 0
		s := driver.Settlement{Account: g.account, Request: res.id, Refund: refund, Uncount: uncount, Period: p,
			Allowance: g.allowance, Now: now}
		g.named(p)
		g.record("Settle %s refund %d of %d uncount %v period %s close %v%s", res.id.String()[:6], refund, res.amount, uncount, fmtPeriod(p), closeIt, lag)
		return g.compare("Settle", func(l NamedLedger) agreeOutcome {
			if a, ok := l.Ledger.(driver.Admitter); ok && closeIt {
				b, err := a.Close(ctx, driver.Closing{Account: g.account, Request: res.id, Settlement: &s})
				return agreeOutcome{err: err, balance: &b}
			}
			b, err := l.Ledger.Settle(ctx, s)
			return agreeOutcome{err: err, balance: &b}
		})
	case k < 65: // a grant, new or replayed with another amount and expiry
		a := driver.Adjustment{Account: g.account, Request: g.request(), Amount: g.amount(), Part: driver.PartGrants,
			Reason: "agree", Period: p, Allowance: g.allowance, Now: now}
		switch x := r.IntN(6); {
		case x == 0: // never lapses
		case x == 1:
			a.Expires = p.End // lapses at the renewal
		case g.edge && x == 2: // around the renewal
			a.Expires = p.End.Add(time.Duration(r.IntN(4*3600)-2*3600) * time.Second)
			if !a.Expires.After(now) {
				a.Expires = p.End
			}
		default: // on the hour, so that grants share lots
			a.Expires = now.Truncate(time.Hour).Add(time.Duration(x*r.IntN(30)+1) * time.Hour)
		}
		if len(g.grants) > 0 && r.IntN(6) == 0 {
			a.Request = g.grants[r.IntN(len(g.grants))].Request
		} else {
			g.grants = append(g.grants, a)
		}
		g.named(p)
		g.record("Grant %s %d expires %s%s", a.Request.String()[:6], a.Amount, fmtLapse(a.Expires), lag)
		return g.adjust(a)
	case k < 72: // credits taken
		a := driver.Adjustment{Account: g.account, Request: g.request(), Amount: -g.amount(), Part: driver.PartGrants,
			Reason: "agree", Period: p, Allowance: g.allowance, Now: now}
		g.named(p)
		g.record("Take %d%s", -a.Amount, lag)
		return g.adjust(a)
	case k < 78: // the plan changed during the period: its allowance set, by revision
		return g.allowanceChange(p, now, lag)
	case k < 81: // the plan changes: the allowance passed from now on
		g.allowance = g.allowanceOf()
		g.record("the allowance becomes %d", g.allowance)
		return true
	case k < 83: // the cycle changes now: a new period begins
		old := g.period(g.clock)
		g.anchor = g.clock
		if !g.anchor.After(old.Start) {
			g.anchor = old.Start.Add(time.Second)
		}
		g.cycle = []billing.Cycle{billing.Monthly, billing.Yearly}[r.IntN(2)]
		g.record("the anchor moves to %s, %s", g.anchor.Format(time.DateTime), g.cycle)
		return true
	case k < 90: // a sweep
		var sweepers []NamedLedger
		for _, l := range g.ledgers {
			if _, ok := l.Ledger.(driver.Sweeper); ok {
				sweepers = append(sweepers, l)
			}
		}
		if len(sweepers) < len(g.ledgers) {
			return true
		}
		g.record("Sweep%s", lag)
		return g.compare("Sweep", func(l NamedLedger) agreeOutcome {
			_, err := l.Ledger.(driver.Sweeper).Sweep(ctx, now, 1000) // the count includes other runs'
			return agreeOutcome{err: err}
		})
	default: // a read
		g.named(p)
		g.record("Balance period %s%s", fmtPeriod(p), lag)
		return g.compare("Balance", func(l NamedLedger) agreeOutcome {
			b, err := l.Ledger.Balance(ctx, g.account, now, p, g.allowance)
			o := agreeOutcome{err: err, balance: &b}
			if err == nil {
				o.usage, o.err = l.Ledger.Usage(ctx, g.account, b.Period)
			}
			return o
		})
	}
}

// allowanceChange sets the allowance of the period p, or of an earlier one, at the
// next revision, or now and then at an earlier one (a change whose adjustment reaches
// the ledger late), and sometimes makes a change the ledgers must refuse.
func (g *agreeRun) allowanceChange(p driver.Period, now time.Time, lag string) bool {
	r := g.rng
	g.revision++
	a := driver.Adjustment{Account: g.account, Request: g.request(), Part: driver.PartAllowance, Revision: g.revision,
		Reason: "agree", Period: p, Allowance: g.allowanceOf(), Now: now}
	late := r.IntN(5) == 0
	if late {
		a.Revision = 1 + r.Int64N(g.revision)
	}
	if r.IntN(6) == 0 {
		a.Period = g.period(now.Add(-time.Duration(1+r.IntN(40)) * 24 * time.Hour))
	}
	if g.huge && !a.Period.Start.After(g.latest) {
		// Near MaxCredits only for a period the ledgers hold or have left, which
		// renews nothing (see LedgersAgree).
		a.Allowance = g.amount()
	}
	switch r.IntN(20) {
	case 0:
		a.Amount = 1 + g.amount()
	case 1:
		a.Revision = -r.Int64N(2)
	}
	if !late && !g.huge && a.Period == p && r.IntN(2) == 0 {
		g.allowance = a.Allowance // the plan's allowance from now on
	}
	g.named(a.Period)
	g.record("Allowance %d revision %d amount %d period %s%s", a.Allowance, a.Revision, a.Amount, fmtPeriod(a.Period), lag)
	return g.adjust(a)
}

// named notes that an operation names the period p, which the ledgers renew to if it
// is later than the one they hold.
func (g *agreeRun) named(p driver.Period) {
	if p.Start.After(g.latest) {
		g.latest = p.Start
	}
}

func (g *agreeRun) adjust(a driver.Adjustment) bool {
	return g.compare("Adjust", func(l NamedLedger) agreeOutcome {
		b, err := l.Ledger.Adjust(g.t.Context(), a)
		return agreeOutcome{err: err, balance: &b}
	})
}
