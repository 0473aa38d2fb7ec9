package webhook

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store"
)

// The sweeps of the Dispatcher: key.expired for the keys whose expiry passed, and
// period.renewed for the accounts whose period renewed, both for the keys and accounts
// nobody uses. Each is a sweep of the Store (ClaimSweep): one instance at a time does
// it, from where the last one left it, so that the instances share the work.

// The defaults of the sweeps' [DispatcherOptions].
const (
	// DefaultSweepInterval is how often Run sweeps by default.
	DefaultSweepInterval = 30 * time.Second
	// DefaultRenewalBatch is how many accounts one sweep of renewals reads by
	// default.
	DefaultRenewalBatch = 2000
)

// The names of the sweeps in the Store.
const (
	keySweep     = KeyExpired
	renewalSweep = PeriodRenewed
)

const (
	// sweepLease is how long a claim of a sweep holds it; sweepTimeout bounds one
	// sweep, within it.
	sweepLease   = 2 * time.Minute
	sweepTimeout = time.Minute
	// sweepSkew is the difference between the clocks of the instances that the
	// sweeps allow for: a sweep reads again the expiries of this long before the
	// position another left, and takes for renewed the periods that began this long
	// before the cycle it goes on from.
	sweepSkew = time.Minute
	// keyPages is the most pages of expiries one sweep reads.
	keyPages = 10
)

// Balances reads an account's balance: what period.renewed tells of the new period.
// The service's ledger (driver.Ledger, tollgate.Service.Stores().Ledger) is one.
type Balances interface {
	// Balance returns the account's balance at now, in period p, renewing it if due
	// (see driver.Ledger). It returns store.ErrNotFound if the account has no
	// balance.
	Balance(ctx context.Context, account string, now time.Time, p driver.Period, allowance int64) (driver.Balance, error)
}

// sweeper holds what the sweeps read: nil fields turn their sweep off.
type sweeper struct {
	expiries auth.KeyExpiries // the key store, for key.expired
	accounts auth.KeyStore    // the key store, for period.renewed (with balances)
	balances Balances
	interval time.Duration
	batch    int // accounts per sweep of renewals
}

// newSweeper checks the options of the sweeps.
func newSweeper(o *DispatcherOptions) (sweeper, error) {
	s := sweeper{interval: o.SweepInterval, batch: o.RenewalBatch}
	if s.interval < 0 || s.batch < 0 {
		return s, errors.New("webhook: DispatcherOptions: SweepInterval and RenewalBatch must not be negative")
	}
	if s.interval == 0 {
		s.interval = DefaultSweepInterval
	}
	if s.batch == 0 {
		s.batch = DefaultRenewalBatch
	}
	if o.Keys == nil {
		if o.Ledger != nil {
			return s, errors.New("webhook: DispatcherOptions.Ledger is set without Keys: give the service's key store too, or neither")
		}
		return s, nil
	}
	var ok bool
	if s.expiries, ok = o.Keys.(auth.KeyExpiries); !ok {
		return s, fmt.Errorf("webhook: DispatcherOptions.Keys: %T does not list the keys that expire (auth.KeyExpiries): give a key store that does, as every store of this module does", o.Keys)
	}
	if o.Ledger != nil {
		if o.Plans == nil {
			return s, errors.New("webhook: DispatcherOptions.Ledger is set without Plans: give the service's plans (tollgate.Service.Plans) too")
		}
		s.accounts, s.balances = o.Keys, o.Ledger
	}
	return s, nil
}

// Sweep runs the Dispatcher's sweeps once now, each if it is on (see [Dispatcher])
// and no other instance is running it: the keys whose expiry passed since the last
// sweep get key.expired, and the accounts whose period renewed period.renewed. It
// returns how many messages it enqueued anew. Run calls it every SweepInterval; a
// host that does not run the Dispatcher may call it on its own schedule. An error
// stops a sweep where it failed, and leaves the rest to the next, which goes on from
// there; a key or an account whose message a store refuses as not valid
// (store.ErrInvalid) is logged and passed over, not tried again.
func (d *Dispatcher) Sweep(ctx context.Context) (int64, error) {
	var total int64
	var errs []error
	if d.sweeps.expiries != nil {
		n, err := d.sweep(ctx, keySweep, d.sweepKeys)
		total += n
		errs = append(errs, err)
	}
	if d.sweeps.balances != nil {
		n, err := d.sweep(ctx, renewalSweep, d.sweepRenewals)
		total += n
		errs = append(errs, err)
	}
	return total, errors.Join(errs...)
}

// sweep claims the sweep named name and runs do from its position, then records the
// position do returns, and its error; a sweep another instance holds is left to it.
// do returns how far it got even when it fails: up to what it did last (an empty
// position leaves the one it was given).
func (d *Dispatcher) sweep(ctx context.Context, name string, do func(ctx context.Context, position string, now time.Time) (string, int64, error)) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, sweepTimeout)
	defer cancel()
	now := d.now()
	c, ok, err := d.store.ClaimSweep(ctx, name, now, sweepLease)
	if err != nil || !ok {
		return 0, err
	}
	position, n, err := do(ctx, c.Position, now)
	if position == "" {
		position = c.Position
	}
	// The claim ends (or, if the store does not answer, its lease does) with the
	// progress made: the next sweep, here or elsewhere, goes on from where this one
	// failed, and does what it did not again, which sends nothing twice.
	record, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.timeout)
	defer cancel()
	rerr := d.store.RecordSweep(record, name, c.Claim, position)
	if err = cmp.Or(err, rerr); err != nil {
		return n, fmt.Errorf("webhook: the sweep of %s: %w", name, err)
	}
	return n, nil
}

// passOver reports whether err, the failure of a sweep's key or account, is the
// store's refusal of what it was given (store.ErrInvalid): trying it again would fail
// the same, so the sweep passes over it, and logs it with what, which names it.
func (d *Dispatcher) passOver(err error, sweep string, what ...any) bool {
	if !errors.Is(err, store.ErrInvalid) {
		return false
	}
	d.log.Warn("webhook: the sweep passes over what the store refuses; its event is not sent",
		append([]any{"sweep", sweep, "error", err}, what...)...)
	return true
}

// refusing returns err, the failure of the message id of a sweep; one the store
// refused (see passOver) is remembered as if it was enqueued, so that the sweeps of
// this instance that read its cause again (the keys of the last minute, the renewals
// of the cycle before) pass over it without a word.
func (d *Dispatcher) refusing(id string, err error) error {
	if errors.Is(err, store.ErrInvalid) {
		d.remember(id)
	}
	return err
}

// keyPosition is the position of the sweep of expired keys: the expiries up to From
// have been swept, and those after it up to After (when set).
type keyPosition struct {
	From  time.Time         `json:"from"`
	After auth.ExpiryCursor `json:"after,omitzero"`
}

// sweepKeys enqueues key.expired for each key whose expiry is after the position and
// at or before now, at most keyPages pages of them, and returns the new position:
// after the last key it enqueued or passed over, if it fails.
func (d *Dispatcher) sweepKeys(ctx context.Context, position string, now time.Time) (string, int64, error) {
	var p keyPosition
	if position == "" || json.Unmarshal([]byte(position), &p) != nil || p.From.IsZero() {
		p = keyPosition{From: now} // the first sweep: the keys that expire from now on
	}
	q := auth.ExpiryQuery{From: p.From.Add(-sweepSkew), To: now, After: p.After, Limit: auth.MaxExpiryPage}
	if q.To.Before(q.From) {
		return position, 0, nil // this clock is behind the last sweeper's
	}
	var n int64
	for range keyPages {
		page, err := d.sweeps.expiries.ExpiringKeys(ctx, q)
		if err != nil {
			return encodePosition(p), n, err
		}
		for _, e := range page.Expiries {
			fresh, err := d.expired(ctx, e, now)
			if err != nil && !d.passOver(err, keySweep, "key", e.Key.ID, "account", e.Key.AccountID, "expiry", e.At) {
				return encodePosition(p), n, err
			}
			n += fresh
			p.After = auth.ExpiryCursor{At: e.At, Key: e.Key.ID}
		}
		if page.Next.IsZero() {
			return encodePosition(keyPosition{From: now}), n, nil
		}
		q.After, p.After = page.Next, page.Next
	}
	return encodePosition(p), n, nil
}

// expired enqueues the key.expired of e, unless this instance did already, and
// returns 1 if the store took it anew.
func (d *Dispatcher) expired(ctx context.Context, e auth.Expiry, now time.Time) (int64, error) {
	id := DerivedID(KeyExpired, e.Key.ID, stamp(e.At))
	if d.remembered(id) {
		return 0, nil
	}
	m, err := NewMessage(e.At, KeyExpiredData{Common: Common{ID: id, Account: e.Key.AccountID}, Key: e.Key.ID,
		Name: e.Key.Name, ExpiredAt: e.At}, latest(e.At, now).Add(ReplayWindow))
	if err != nil {
		return 0, d.refusing(id, fmt.Errorf("%w (%w)", err, store.ErrInvalid)) // the key's, every time
	}
	n, err := d.enqueueNow(ctx, m)
	return n, d.refusing(id, err)
}

// enqueueNow enqueues m and returns 1 if the store took it anew.
func (d *Dispatcher) enqueueNow(ctx context.Context, m Message) (int64, error) {
	fresh, err := d.enqueueFresh(ctx, m, false)
	if err != nil || !fresh {
		return 0, err
	}
	return 1, nil
}

// renewalPosition is the position of the sweep of renewals, which reads every account
// in the order of their ids, cycle after cycle: the cycle in course began at Cycle
// and has read the accounts up to After; the one before began at Since.
type renewalPosition struct {
	Cycle time.Time `json:"cycle"`
	Since time.Time `json:"since"`
	After string    `json:"after,omitempty"`
}

// sweepRenewals reads up to batch accounts after the position and enqueues
// period.renewed for each whose period began since the cycle before began, and
// returns the new position: after the last account it read or passed over, if it
// fails.
func (d *Dispatcher) sweepRenewals(ctx context.Context, position string, now time.Time) (string, int64, error) {
	var p renewalPosition
	if position == "" || json.Unmarshal([]byte(position), &p) != nil || p.Cycle.IsZero() || p.Since.IsZero() {
		p = renewalPosition{Cycle: now, Since: now} // the first cycle: the renewals from now on
	}
	var n int64
	for read := 0; read < d.sweeps.batch; {
		page, err := d.sweeps.accounts.Accounts(ctx, auth.AccountQuery{After: p.After, Limit: min(auth.MaxAccountPage, d.sweeps.batch-read)})
		if err != nil {
			return encodePosition(p), n, err
		}
		read += max(len(page.Accounts), 1)
		for i := range page.Accounts {
			a := &page.Accounts[i]
			fresh, err := d.renewal(ctx, a, p.Since.Add(-sweepSkew), now)
			if err != nil && !d.passOver(err, renewalSweep, "account", a.ID) {
				return encodePosition(p), n, err
			}
			n += fresh
			p.After = a.ID
		}
		if page.Next == "" {
			p = renewalPosition{Cycle: now, Since: p.Cycle} // a new cycle
			break
		}
		p.After = page.Next
	}
	return encodePosition(p), n, nil
}

// renewal enqueues the period.renewed of an account whose period began after since
// (and after the account was created: its first period is no renewal), unless this
// instance did already, and returns 1 if the store took it anew.
func (d *Dispatcher) renewal(ctx context.Context, a *auth.Account, since, now time.Time) (int64, error) {
	if a.State == auth.AccountClosed {
		return 0, nil
	}
	plan, period, ok := d.plans.At(billing.Terms{Plan: a.Plan, Anchor: a.BillingAnchor, PendingPlan: a.PendingPlan,
		PendingAt: a.PendingPlanAt}, now)
	if !ok || !period.Start.After(since) || !period.Start.After(a.CreatedAt) {
		return 0, nil
	}
	id := DerivedID(PeriodRenewed, a.ID, stamp(period.Start))
	if d.remembered(id) {
		return 0, nil
	}
	b, err := d.sweeps.balances.Balance(ctx, a.ID, now, period, plan.Credits)
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil // no balance: nothing renews
	}
	if err != nil {
		return 0, d.refusing(id, err)
	}
	m, err := NewMessage(period.Start, renewedData(id, a.ID, plan.Name, plan.Credits, b.Remaining+b.Used, period), period.End)
	if err != nil {
		return 0, d.refusing(id, fmt.Errorf("%w (%w)", err, store.ErrInvalid)) // the account's, every time
	}
	n, err := d.enqueueNow(ctx, m)
	return n, d.refusing(id, err)
}

// renewedData is the data of period.renewed: remaining is what the account had when
// the period began.
func renewedData(id, account, plan string, allowance, remaining int64, p billing.Period) PeriodRenewedData {
	return PeriodRenewedData{Common: Common{ID: id, Account: account}, Plan: plan, Allowance: allowance,
		Remaining: remaining, PeriodStart: p.Start, PeriodEnd: p.End}
}

// encodePosition returns a sweep's position as the text the store keeps.
func encodePosition(p any) string {
	b, _ := json.Marshal(p) // plain data: this does not fail
	return string(b)
}

// latest returns the later of a and b.
func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
