package memory

import (
	"context"
	"fmt"

	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store"
)

var _ driver.Roller = (*Ledger)(nil)

// Roll settles a reservation and opens the next in its place, under the account's
// lock (see [driver.Roller]).
func (l *Ledger) Roll(ctx context.Context, r driver.Roll) (driver.RollResult, error) {
	s := &r.Settlement
	if err := r.Check(); err != nil {
		return driver.RollResult{}, fmt.Errorf("memory: %w: %w", err, store.ErrConflict)
	}
	for api := range r.Counts {
		if err := store.CheckText("memory: the API of a roll's count", api); err != nil {
			return driver.RollResult{}, err
		}
	}
	o, err := l.lock(ctx, s.Account, s.Period, s.Allowance, s.Now)
	if err != nil {
		return driver.RollResult{}, err
	}
	defer o.done()
	k := request{o.i, s.Request}
	res, ok := o.sh.open[k]
	if !ok {
		switch c, done := o.sh.done[k]; {
		case done && c.how == voided:
			return driver.RollResult{Balance: o.snapshot()}, fmt.Errorf("memory: reservation %s: %w", s.Request, driver.ErrVoided)
		case done:
			out := driver.RollResult{Balance: o.snapshot(), Replay: true}
			if r.Next != nil {
				out.Next = o.sh.open[request{o.i, r.Next.Request}].amount
			}
			return out, nil
		}
		return driver.RollResult{Balance: o.snapshot()}, fmt.Errorf("memory: reservation %s: %w", s.Request, store.ErrNotFound)
	}
	switch {
	case s.Refund > res.amount:
		return driver.RollResult{Balance: o.snapshot()}, fmt.Errorf("memory: reservation %s: refund %d is more than the %d reserved: %w", s.Request, s.Refund, res.amount, store.ErrConflict)
	case r.Next != nil && o.seen(r.Next.Request):
		return driver.RollResult{Balance: o.snapshot()}, fmt.Errorf("memory: roll of %s: the next reservation %s was made before: %w", s.Request, r.Next.Request, store.ErrConflict)
	}
	delete(o.sh.open, k)
	delete(o.sh.more, k)
	o.forget(s.Request, settled)
	if o.giveBack(k, res, s.Refund) {
		for _, name := range s.Uncount {
			if api, ok := l.apis.lookup(name); ok {
				o.uncount(api)
			}
		}
		for name, n := range r.Counts {
			o.countN(l.apis.intern(name), n)
		}
	}
	out := driver.RollResult{}
	if n := r.Next; n != nil {
		a := o.a
		amount := min(n.Amount, a.left+a.grants)
		nk := request{o.i, n.Request}
		left, took := o.take(amount)
		if took != nil {
			o.sh.took[nk] = took
		}
		a.used += amount
		expires := n.Expires.UnixNano()
		o.sh.open[nk] = reservation{amount: amount, left: left, start: a.start, expires: expires}
		if expires < o.sh.due.Load() {
			o.sh.due.Store(expires)
		}
		out.Next = amount
	}
	out.Balance = o.snapshot()
	out.Balance.Charge = kept(res, s.Refund)
	return out, nil
}

// countN adds n calls to the usage count of an API.
func (o op) countN(api uint32, n int64) {
	switch a := o.a; {
	case a.api == api+1:
		a.calls += n
	case a.api == 0:
		a.api, a.calls = api+1, n
	default:
		o.sh.usage[apiCount{o.i, api}] += n
		a.counted = true
	}
}
