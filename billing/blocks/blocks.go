// Package blocks spends a busy account's credits from blocks: reservations that an
// instance of the service takes from the shared ledger and spends locally, call by
// call. A call served from a block takes no round trip, no transaction and no lock on
// the ledger to reserve its credits, and the charges of the calls settled while a
// roll is on its way are made durable together, by the next roll: one step
// ([driver.Roller]) that settles the block's reservation, keeping what the calls
// spent and counting them, and opens the next in its place with the credits still
// held. So several instances serving one account meet on its balance once per roll,
// not once per call.
//
// # The rules
//
//   - Credits are exact. A call answered has its charge in the ledger: its settlement
//     waits for the roll that records it (a call whose roll fails is answered as any
//     call whose settlement failed: the meter retries it, and the block, until the
//     block's reservation expires). A block is an expiring reservation, rolled at
//     least every quarter of its hold: when an instance dies, the ledger voids its
//     blocks at their expiry (the sweep), and what they held comes back; the calls it
//     served but had not recorded were not answered either.
//   - The rate limit, the concurrency ceiling and the key check are untouched: blocks
//     hold credits only, and the other parts of an admission go to their stores as
//     for any call.
//   - A refusal for credits may come while blocks hold unspent credits of the
//     account: a block holds at most Size credits and at most 1/Share of the
//     remaining credits when it is taken, an instance takes none when that would be
//     less than the call's cost, and a call that its instance's block cannot cover
//     gives the block up (its unspent credits go back) before the ledger decides it.
//     So near exhaustion the ledger decides each call; what other instances' blocks
//     still hold goes back at their next call, or Idle after their last.
//   - Blocks are taken only for accounts whose calls come less than Idle apart; the
//     others are served by the ledger call by call.
//   - A balance read from the ledger does not count the credits blocks hold; the
//     meter adds back those of this instance's blocks (see [Blocks.Unspent]).
package blocks

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store"
)

// Options configures [Blocks]. The zero value is the default; every field is
// optional.
type Options struct {
	// Size is the most credits a block holds. The default is [DefaultSize].
	Size int64
	// Share bounds a block to 1/Share of the account's remaining credits (as the
	// ledger last reported them). The default is [DefaultShare].
	Share int64
	// Idle is how close an account's calls must come for it to take blocks, and how
	// long a block nobody spends from is kept before its credits go back. The
	// default is [DefaultIdle].
	Idle time.Duration
	// Hold is how long a block's reservation stays open after its last roll: if the
	// instance dies, its credits come back then. A block rolls at least every
	// Hold/4. The default is [DefaultHold].
	Hold time.Duration
	// Now returns the current time. The default is time.Now.
	Now func() time.Time
	// Logger receives the charges a block could not record (its reservation voided
	// before its roll). The default is slog.Default().
	Logger *slog.Logger
}

// The defaults of [Options].
const (
	DefaultSize  = 1000
	DefaultShare = 8
	DefaultIdle  = time.Second
	DefaultHold  = time.Minute
)

// Blocks keeps the credit blocks of one instance. It is safe for concurrent use.
type Blocks struct {
	ledger driver.Ledger
	roller driver.Roller
	size   int64
	share  int64
	idle   time.Duration
	hold   time.Duration
	now    func() time.Time
	log    *slog.Logger

	mu       sync.Mutex
	accounts map[string]*account
	closed   bool
	// shut is closed, for those who hold an account's mu (which must not take mu).
	shut    atomic.Bool
	stop    chan struct{}
	done    chan struct{}
	flushes flushes
}

// New returns the Blocks of an instance over ledger, which must be a
// [driver.Roller]. Close it when the instance stops, to give back what its blocks
// hold. opts may be nil.
func New(ledger driver.Ledger, opts *Options) (*Blocks, error) {
	roller, ok := ledger.(driver.Roller)
	if !ok {
		return nil, fmt.Errorf("blocks: the ledger (%T) cannot roll a reservation into the next (driver.Roller): credit blocks need one", ledger)
	}
	if opts == nil {
		opts = &Options{}
	}
	b := &Blocks{ledger: ledger, roller: roller, size: DefaultSize, share: DefaultShare, idle: DefaultIdle,
		hold: DefaultHold, now: time.Now, log: slog.Default(), accounts: map[string]*account{},
		stop: make(chan struct{}), done: make(chan struct{})}
	if opts.Size > 0 {
		b.size = opts.Size
	}
	if opts.Share > 0 {
		b.share = opts.Share
	}
	if opts.Idle > 0 {
		b.idle = opts.Idle
	}
	if opts.Hold > 0 {
		b.hold = opts.Hold
	}
	if opts.Now != nil {
		b.now = opts.Now
	}
	if opts.Logger != nil {
		b.log = opts.Logger
	}
	go b.tend()
	return b, nil
}

// An account is what an instance knows of an account's blocks. Its mu guards it and
// its blocks.
type account struct {
	name string
	mu   sync.Mutex
	gone bool      // forgotten: Take makes a new record
	last time.Time // the last call Take saw
	cur  *block    // the block calls take from; nil for none
	old  []*block  // blocks given up that still hold calls or charges
	// reserving is set while a call reserves the next block; reserved is closed when
	// it is done.
	reserving bool
	reserved  chan struct{}
	// view is the ledger's balance after the last operation of this instance on the
	// account (a block's reservation or roll, or a call reserved one by one), and
	// known whether there was one.
	view  driver.Balance
	known bool
	// expired is the open calls voided (given back at their expiry, or shed after a
	// shortfall), and when: their Settle returns driver.ErrVoided. Each is kept for
	// Hold after that.
	expired map[driver.RequestID]time.Time
}

// A block is a reservation that calls spend from.
type block struct {
	id        driver.RequestID
	period    driver.Period
	allowance int64
	amount    int64 // what the ledger holds for it now
	open      bool  // its reservation is open in the ledger (it may hold nothing)
	held      int64 // what its open calls hold
	pending   int64 // what the calls settled since the last roll kept
	rolling   int64 // what the calls recorded by the roll in flight (inflight) kept
	counts    map[string]int64
	batch     []settled // the calls pending is of
	calls     map[driver.RequestID]openCall
	waiting   map[driver.RequestID]struct{} // calls settled whose charge no roll has recorded yet
	used      time.Time                     // the last take
	rolled    time.Time                     // the last roll (or the reservation)
	retiring  bool                          // takes nothing more; gives back its unspent credits at its next roll
	// A roll sent whose outcome is unknown, sent again as is, and the calls it records.
	inflight      *driver.Roll
	inflightCalls []settled
	flushing      bool
	next          *rollDone // the outcome of the next roll to end
	dead          error     // the ledger voided the block: what it held is back, its pending charges are lost
}

// A settled call is a call served from a block, settled and waiting for the roll that
// records what it kept.
type settled struct {
	id     driver.RequestID
	kept   int64
	counts map[string]int64
}

// An openCall is a call served from a block and not settled yet.
type openCall struct {
	amount  int64
	apis    []string
	expires time.Time // zero for never
}

// rollDone is the outcome of a roll, for the calls that wait for it.
type rollDone struct {
	done chan struct{}
	err  error
}

func newRollDone() *rollDone { return &rollDone{done: make(chan struct{})} }

// unspent returns the credits the block holds that no call holds or kept.
func (k *block) unspent() int64 { return max(k.amount-k.held-k.pending-k.rolling, 0) }

// account returns the record of name, made if need be; nil after Close.
func (b *Blocks) account(name string) *account {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	a := b.accounts[name]
	if a == nil {
		a = &account{name: name}
		b.accounts[name] = a
	}
	return a
}

// lookup returns the record of name, or nil.
func (b *Blocks) lookup(name string) *account {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.accounts[name]
}

// A Take asks for the credits of one call.
type Take struct {
	Account   string
	Request   driver.RequestID
	Amount    int64
	APIs      []string
	Period    driver.Period
	Allowance int64
	Now       time.Time
	// Expires, when set, is when the call's credits are given back if it is still
	// open, as the ledger voids a reservation at its expiry: a Settle after it returns
	// an error wrapping driver.ErrVoided. Zero keeps them until the call is settled.
	Expires time.Time
}

// Take takes the call's credits from a block of its account, and reports whether it
// did; when it did not, the caller reserves them from the ledger, as for any call,
// and tells [Blocks.Note] the balance it got. It may reserve a new block first (one
// round trip), for an account whose calls come less than Idle apart. The balance is
// the account's as this instance sees it: the ledger's last answer, plus what this
// instance's blocks hold unspent.
func (b *Blocks) Take(ctx context.Context, t Take) (driver.Balance, bool) {
	if t.Amount <= 0 {
		return driver.Balance{}, false // a free call costs the ledger its count only: no block
	}
	var a *account
	for {
		if a = b.account(t.Account); a == nil {
			return driver.Balance{}, false
		}
		a.mu.Lock()
		if !a.gone {
			break
		}
		a.mu.Unlock() // forgotten by tick meanwhile: take the new record
	}
	defer a.mu.Unlock()
	hot := !a.last.IsZero() && t.Now.Sub(a.last) < b.idle
	a.last = t.Now
	if k := a.cur; k != nil {
		if k.dead == nil && k.fits(t) && k.unspent() >= t.Amount {
			k.take(t)
			return a.balance(), true
		}
		b.retire(a, k)
	}
	for a.reserving {
		// Another call reserves the account's next block: take from it.
		w := a.reserved
		a.mu.Unlock()
		select {
		case <-w:
		case <-ctx.Done():
		}
		a.mu.Lock()
		if ctx.Err() != nil {
			return driver.Balance{}, false
		}
		if k := a.cur; k != nil && k.dead == nil && k.fits(t) && k.unspent() >= t.Amount {
			k.take(t)
			return a.balance(), true
		}
	}
	if a.cur != nil {
		b.retire(a, a.cur) // a block reserved meanwhile that cannot cover the call
	}
	if !hot || !a.known {
		// The ledger decides the call, once the blocks given up (a block that could not
		// cover it, say) have given their credits back.
		b.settleOld(ctx, a)
		return driver.Balance{}, false
	}
	want := min(b.size, a.view.Remaining/b.share)
	if want < t.Amount {
		// Near exhaustion: the ledger decides each call, once the blocks given up have
		// given their credits back.
		b.settleOld(ctx, a)
		return driver.Balance{}, false
	}
	k, err := b.reserve(ctx, a, t, want)
	if err != nil {
		if errors.Is(err, driver.ErrInsufficientCredits) {
			b.settleOld(ctx, a)
		}
		return driver.Balance{}, false
	}
	a.cur = k
	k.take(t)
	if b.shut.Load() {
		// Close ran while the block was reserved and did not see it: give it up, as
		// Close gives up the others.
		b.retire(a, k)
	}
	return a.balance(), true
}

// fits reports whether t may take from k: the same period and allowance.
func (k *block) fits(t Take) bool {
	return !k.retiring && k.allowance == t.Allowance && k.period.Start.Equal(t.Period.Start) && k.period.End.Equal(t.Period.End)
}

func (k *block) take(t Take) {
	k.held += t.Amount
	k.calls[t.Request] = openCall{amount: t.Amount, apis: t.APIs, expires: t.Expires}
	k.used = t.Now
}

// reserve reserves a block of want credits for t's account, with a.mu held (the
// other calls of the account go to the ledger meanwhile).
func (b *Blocks) reserve(ctx context.Context, a *account, t Take, want int64) (*block, error) {
	a.reserving, a.reserved = true, make(chan struct{})
	a.mu.Unlock()
	id := newID()
	r := driver.Reservation{Account: t.Account, Request: id, Amount: want, Period: t.Period, Allowance: t.Allowance,
		Now: t.Now, Expires: t.Now.Add(b.hold)}
	bal, err := b.ledger.Reserve(ctx, r)
	a.mu.Lock()
	a.reserving = false
	close(a.reserved)
	if err != nil {
		if errors.Is(err, driver.ErrInsufficientCredits) {
			a.view, a.known = bal, true
		}
		return nil, err
	}
	a.view, a.known = bal, true
	return &block{id: id, period: t.Period, allowance: t.Allowance, amount: want, open: true, counts: map[string]int64{},
		calls: map[driver.RequestID]openCall{}, waiting: map[driver.RequestID]struct{}{}, used: t.Now, rolled: t.Now,
		next: newRollDone()}, nil
}

// retire gives k up: it takes no more calls, and its next roll gives back what no
// call holds.
func (b *Blocks) retire(a *account, k *block) {
	if a.cur == k {
		a.cur = nil
		a.old = append(a.old, k)
	}
	if !k.retiring {
		k.retiring = true
		b.kick(a, k)
	}
}

// settleOld waits, with a.mu held, for the rolls that give back what the account's
// blocks given up hold unspent, so that the ledger decides the next call on every
// credit this instance does not spend.
func (b *Blocks) settleOld(ctx context.Context, a *account) {
	for _, k := range slices.Clone(a.old) {
		if k.dead != nil || !k.needsRoll() && !k.flushing {
			continue
		}
		d := k.next
		b.kick(a, k)
		a.mu.Unlock()
		select {
		case <-d.done:
		case <-ctx.Done():
		}
		a.mu.Lock()
	}
}

// find returns the block that holds the open call request, and the call.
func (a *account) find(request driver.RequestID) (*block, openCall) {
	if k := a.cur; k != nil {
		if c, ok := k.calls[request]; ok {
			return k, c
		}
	}
	for _, k := range a.old {
		if c, ok := k.calls[request]; ok {
			return k, c
		}
	}
	return nil, openCall{}
}

// waiter returns the block whose roll a settled call waits for.
func (a *account) waiter(request driver.RequestID) *block {
	if k := a.cur; k != nil {
		if _, ok := k.waiting[request]; ok {
			return k
		}
	}
	for _, k := range a.old {
		if _, ok := k.waiting[request]; ok {
			return k
		}
	}
	return nil
}

// Settle settles a call that Take served: the block keeps its charge (its cost less
// s.Refund) and counts it in the usage of its APIs, less s.Uncount, and Settle
// returns once a roll has recorded them in the ledger. An error wrapping
// driver.ErrVoided means the block's reservation expired before, or the ledger
// refused its roll for good, or the call was still open at its Expires, or its block
// got fewer credits than its calls held and kept (a shortfall: a grant lot lapsed, or
// the allowance renewed, under it) before a roll recorded the call's charge: the call
// was not charged. Any other error means the roll failed: the block sends it again at its
// next roll, and so does a Settle of the same call made again (retry it as any
// settlement); a Settle of a call whose charge a roll has recorded since changes
// nothing and returns no error.
func (b *Blocks) Settle(ctx context.Context, s driver.Settlement) (driver.Balance, error) {
	a := b.lookup(s.Account)
	if a == nil {
		return driver.Balance{}, nil // recorded, and the account forgotten since
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	k, c := a.find(s.Request)
	if k != nil {
		if s.Refund < 0 || s.Refund > c.amount {
			return a.balance(), fmt.Errorf("blocks: settlement of %s: refund %d is not between 0 and the %d reserved: %w", s.Request, s.Refund, c.amount, store.ErrConflict)
		}
		delete(k.calls, s.Request)
		k.held -= c.amount
		kept := c.amount - s.Refund
		counts := countCalls(c.apis, s.Uncount)
		if k.dead != nil {
			// No tick rolls a voided block: forget it once its last call is settled.
			b.drop(a, k)
			if kept == 0 && len(counts) == 0 {
				return a.balance(), nil
			}
			return a.balance(), fmt.Errorf("blocks: settlement of %s: %w", s.Request, k.dead)
		}
		if kept == 0 && len(counts) == 0 {
			if k.retiring && k.held == 0 {
				b.kick(a, k)
			}
			return a.balance(), nil
		}
		k.pending += kept
		for api, n := range counts {
			k.counts[api] += n
		}
		k.batch = append(k.batch, settled{s.Request, kept, counts})
		k.waiting[s.Request] = struct{}{}
	} else if k = a.waiter(s.Request); k == nil {
		if _, ok := a.expired[s.Request]; ok {
			return a.balance(), fmt.Errorf("blocks: settlement of %s: the call was voided while open (its expiry, or its block's shortfall): %w", s.Request, driver.ErrVoided)
		}
		return a.balance(), nil // recorded by a roll since the settlement sent before
	}
	for {
		if k.dead != nil {
			return a.balance(), fmt.Errorf("blocks: settlement of %s: %w", s.Request, k.dead)
		}
		if _, ok := k.waiting[s.Request]; !ok {
			if _, voided := a.expired[s.Request]; voided {
				return a.balance(), fmt.Errorf("blocks: settlement of %s: the call was voided before a roll recorded its charge (its block's shortfall): %w", s.Request, driver.ErrVoided)
			}
			return a.balance(), nil
		}
		d := k.next
		b.kick(a, k)
		a.mu.Unlock()
		select {
		case <-d.done:
		case <-ctx.Done():
		}
		a.mu.Lock()
		if _, ok := k.waiting[s.Request]; ok && (d.err != nil || ctx.Err() != nil) {
			return a.balance(), fmt.Errorf("blocks: settlement of %s: %w", s.Request, cmpErr(d.err, ctx.Err()))
		}
	}
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// countCalls returns the calls of apis, less one per entry of uncount.
func countCalls(apis, uncount []string) map[string]int64 {
	if len(apis) == 0 {
		return nil
	}
	counts := make(map[string]int64, len(apis))
	for _, api := range apis {
		counts[api]++
	}
	for _, api := range uncount {
		if counts[api] > 0 {
			counts[api]--
		}
	}
	for api, n := range counts {
		if n == 0 {
			delete(counts, api)
		}
	}
	return counts
}

// Note tells Blocks the balance the ledger gave a call of account that no block
// served, so that the size of the account's next block is known.
func (b *Blocks) Note(account string, bal driver.Balance) {
	a := b.lookup(account)
	if a == nil {
		return
	}
	a.mu.Lock()
	a.view, a.known = bal, true
	a.mu.Unlock()
}

// Unspent returns the credits this instance's blocks of account hold that no call
// holds or kept: a balance read from the ledger counts them as held.
func (b *Blocks) Unspent(account string) int64 {
	a := b.lookup(account)
	if a == nil {
		return 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.unspent()
}

func (a *account) unspent() int64 {
	var n int64
	if a.cur != nil && a.cur.dead == nil {
		n += a.cur.unspent()
	}
	for _, k := range a.old {
		if k.dead == nil {
			n += k.unspent()
		}
	}
	return n
}

// balance returns the account's balance as this instance sees it, with a.mu held.
func (a *account) balance() driver.Balance {
	v := a.view
	u := a.unspent()
	v.Remaining += u
	v.Used = max(v.Used-u, 0)
	v.Charge = driver.Parts{}
	return v
}

// needsRoll reports whether k has something for a roll to do, with its account's mu
// held.
func (k *block) needsRoll() bool {
	switch {
	case k.dead != nil:
		return false
	case k.inflight != nil, k.pending > 0, len(k.counts) > 0:
		return true
	case k.retiring:
		// Unspent credits to give back, or a reservation to close.
		return k.open && (k.amount > k.held || k.held == 0)
	}
	return false
}

// kick starts k's rolls, if none is running, with its account's mu held.
func (b *Blocks) kick(a *account, k *block) {
	if k.flushing {
		return
	}
	k.flushing = true
	b.flushes.add()
	go func() {
		defer b.flushes.done()
		b.rolls(a, k, false)
	}()
}

// rolls rolls k until it has nothing left to roll or a roll fails; with refresh, it
// rolls once even with nothing to record, to move the block's expiry.
func (b *Blocks) rolls(a *account, k *block, refresh bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var err error
	defer func() {
		k.flushing = false
		// No roll follows until the next kick: those waiting for the next roll (calls
		// settled, or a Take giving the block up, while the last one was in flight) look
		// again. A call still unrecorded after a failure returns its error; after a
		// success it kicks the roll that records it.
		next := k.next
		k.next = newRollDone()
		next.err = err
		close(next.done)
	}()
	for k.dead == nil && (k.needsRoll() || refresh) {
		refresh = false
		if err = b.roll(a, k); err != nil {
			if k.dead != nil {
				b.drop(a, k)
			}
			return
		}
	}
	b.drop(a, k)
}

// roll sends one roll of k, with a.mu held (released while the ledger answers), and
// returns its error, nil if it succeeded.
func (b *Blocks) roll(a *account, k *block) error {
	d := k.next
	k.next = newRollDone()
	now := b.now()
	if k.inflight == nil {
		if !now.Before(k.period.End) && len(k.calls) > 0 {
			// The block's period is over: its open calls are charged their whole cost in
			// it and counted, as a call that reserved its own credits is (a refund after
			// a renewal gives nothing back and uncounts nothing), and the block carries
			// nothing into the next period. Their settlements wait for this roll.
			for id, c := range k.calls {
				k.held -= c.amount
				k.pending += c.amount
				counts := countCalls(c.apis, nil)
				for api, n := range counts {
					k.counts[api] += n
				}
				k.batch = append(k.batch, settled{id, c.amount, counts})
				k.waiting[id] = struct{}{}
				delete(k.calls, id)
			}
			b.retire(a, k)
		}
		// A shortfall sheds calls until what the block holds covers what its calls kept
		// (see shed); min is a guard.
		kept := min(k.pending, k.amount)
		r := &driver.Roll{Settlement: driver.Settlement{Account: a.name, Request: k.id, Refund: k.amount - kept,
			Period: k.period, Allowance: k.allowance, Now: now}}
		if len(k.counts) > 0 {
			r.Counts = k.counts
		}
		carry := k.amount - kept
		if k.retiring {
			carry = min(k.held, carry)
		}
		if carry > 0 || !k.retiring {
			r.Next = &driver.Reservation{Account: a.name, Request: newID(), Amount: carry, Period: k.period,
				Allowance: k.allowance, Now: now, Expires: now.Add(b.hold)}
		}
		k.inflight, k.inflightCalls, k.rolling = r, k.batch, k.pending
		k.pending, k.counts, k.batch = 0, map[string]int64{}, nil
	}
	r := k.inflight
	a.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), b.hold/4)
	res, err := b.roller.Roll(ctx, *r)
	cancel()
	a.mu.Lock()
	switch {
	case err == nil:
		for _, c := range k.inflightCalls {
			delete(k.waiting, c.id)
		}
		k.inflight, k.inflightCalls, k.rolling = nil, nil, 0
		a.view, a.known = res.Balance, true
		k.rolled = now
		k.open = r.Next != nil
		if r.Next == nil {
			k.amount = 0
		} else {
			k.id, k.amount = r.Next.Request, res.Next
			if res.Next < r.Next.Amount {
				b.shed(a, k, now)
				b.retire(a, k)
			}
		}
		// The view counts the block as held; the calls' pending charges are not in it.
		d.err = nil
		close(d.done)
		return nil
	case errors.Is(err, driver.ErrVoided), refused(err):
		if !errors.Is(err, driver.ErrVoided) {
			// A definite answer: sent again, the roll would be refused again. The block's
			// reservation is voided at its expiry.
			err = fmt.Errorf("blocks: the ledger refused the roll of a block of account %q for good (%w); its reservation is voided at its expiry: %w",
				a.name, err, driver.ErrVoided)
		}
		k.dead = err
		if !res.Balance.Period.Start.IsZero() {
			a.view, a.known = res.Balance, true
		}
		if n := len(k.waiting); n > 0 {
			b.log.Error("blocks: a block's roll was voided or refused: the calls settled since its last roll were not charged",
				"account", a.name, "calls", n, "error", err)
		}
		clear(k.waiting)
		k.inflight, k.inflightCalls, k.rolling = nil, nil, 0
		k.pending, k.counts, k.batch = 0, map[string]int64{}, nil
		d.err = err
		close(d.done)
		return err
	default:
		d.err = fmt.Errorf("blocks: the roll of a block of account %q: %w", a.name, err)
		close(d.done)
		return d.err
	}
}

// refused reports whether err is a definite refusal of a roll, one it would meet
// again if sent again.
func refused(err error) bool {
	return errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrInvalid)
}

// drop forgets k once it holds nothing and waits for nothing, with its account's mu
// held.
func (b *Blocks) drop(a *account, k *block) {
	if len(k.calls) > 0 || len(k.waiting) > 0 || k.inflight != nil || (k.dead == nil && k.open) {
		return
	}
	if a.cur == k {
		a.cur = nil
	}
	a.old = slices.DeleteFunc(a.old, func(o *block) bool { return o == k })
}

// tend rolls the blocks that need it in the background: those idle for Idle are
// given up, those not rolled for Hold/4 are rolled to move their expiry, and failed
// rolls are sent again.
func (b *Blocks) tend() {
	defer close(b.done)
	t := time.NewTicker(max(min(b.idle/2, b.hold/8), time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
			b.tick(b.now())
		}
	}
}

func (b *Blocks) tick(now time.Time) {
	b.mu.Lock()
	accounts := make([]*account, 0, len(b.accounts))
	for name, a := range b.accounts {
		accounts = append(accounts, a)
		a.mu.Lock()
		for id, at := range a.expired {
			if now.Sub(at) >= b.hold {
				delete(a.expired, id)
			}
		}
		if a.cur == nil && len(a.old) == 0 && len(a.expired) == 0 && !a.reserving && now.Sub(a.last) >= b.idle {
			a.gone = true
			delete(b.accounts, name)
		}
		a.mu.Unlock()
	}
	b.mu.Unlock()
	for _, a := range accounts {
		a.mu.Lock()
		if k := a.cur; k != nil && now.Sub(k.used) >= b.idle {
			b.retire(a, k)
		}
		for _, k := range append([]*block{a.cur}, a.old...) {
			if k != nil {
				b.expire(a, k, now)
			}
		}
		for _, k := range append([]*block{a.cur}, a.old...) {
			if k == nil || k.flushing || k.dead != nil {
				continue
			}
			refresh := now.Sub(k.rolled) >= b.hold/4 && k.open
			if k.needsRoll() || refresh {
				k.flushing = true
				b.flushes.add()
				go func() {
					defer b.flushes.done()
					b.rolls(a, k, refresh)
				}()
			}
		}
		a.mu.Unlock()
	}
}

// shed voids calls of k, after a shortfall (see driver.RollResult.Next), until what k
// holds covers what its calls hold and kept, with a.mu held: open calls first, then
// calls settled since the roll was sent, whose charges no roll has recorded. The block
// cannot record their charges, so their Settle returns driver.ErrVoided (not charged)
// rather than a success the ledger does not hold.
func (b *Blocks) shed(a *account, k *block, now time.Time) {
	void := func(id driver.RequestID, credits int64) {
		if a.expired == nil {
			a.expired = map[driver.RequestID]time.Time{}
		}
		a.expired[id] = now
		b.log.Warn("blocks: a block's roll got fewer credits than its calls held (a grant lapsed, or the allowance renewed): a call is voided, not charged",
			"account", a.name, "credits", credits)
	}
	for id, c := range k.calls {
		if k.held+k.pending <= k.amount {
			return
		}
		delete(k.calls, id)
		k.held -= c.amount
		void(id, c.amount)
	}
	for len(k.batch) > 0 && k.pending > k.amount {
		c := k.batch[len(k.batch)-1]
		k.batch = k.batch[:len(k.batch)-1]
		delete(k.waiting, c.id)
		k.pending -= c.kept
		for api, n := range c.counts {
			if k.counts[api] -= n; k.counts[api] <= 0 {
				delete(k.counts, api)
			}
		}
		void(c.id, c.kept)
	}
}

// expire gives back what k's calls open past their expiry hold, with a.mu held.
func (b *Blocks) expire(a *account, k *block, now time.Time) {
	for id, c := range k.calls {
		if c.expires.IsZero() || now.Before(c.expires) {
			continue
		}
		delete(k.calls, id)
		k.held -= c.amount
		if a.expired == nil {
			a.expired = map[driver.RequestID]time.Time{}
		}
		a.expired[id] = c.expires
	}
	if k.dead != nil {
		b.drop(a, k)
	}
}

// Close gives every block up and waits, until ctx ends, for the rolls that give back
// what they hold unspent and record what their calls kept. Calls served from blocks
// that are still open when Close is called are left to the blocks' expiry. Take
// serves no call after Close. Close returns an error when ctx ends first, or when a
// last roll failed: what those blocks hold comes back at their expiry.
func (b *Blocks) Close(ctx context.Context) error {
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		b.shut.Store(true)
		close(b.stop)
	}
	accounts := make([]*account, 0, len(b.accounts))
	for _, a := range b.accounts {
		accounts = append(accounts, a)
	}
	b.mu.Unlock()
	<-b.done
	for _, a := range accounts {
		a.mu.Lock()
		a.last = time.Time{}
		if a.cur != nil {
			b.retire(a, a.cur)
		}
		for _, k := range a.old {
			if k.needsRoll() {
				b.kick(a, k)
			}
		}
		a.mu.Unlock()
	}
	select {
	case <-b.flushes.idle():
		if n := failed(accounts); n > 0 {
			return fmt.Errorf("blocks: closing: the last rolls of %d blocks failed: what they hold comes back at their expiry", n)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("blocks: closing: %w", ctx.Err())
	}
}

// failed returns the number of blocks of accounts whose rolls failed and left
// something to roll: credits to give back, charges to record.
func failed(accounts []*account) int {
	n := 0
	for _, a := range accounts {
		a.mu.Lock()
		for _, k := range append([]*block{a.cur}, a.old...) {
			if k != nil && !k.flushing && k.needsRoll() {
				n++
			}
		}
		a.mu.Unlock()
	}
	return n
}

// newID returns a random request id, for a block's reservation.
func newID() driver.RequestID {
	var id driver.RequestID
	rand.Read(id[:])
	return id
}

// flushes counts the roll runs under way. Unlike a sync.WaitGroup, it may be added to
// from zero while someone waits for it to be idle: a settlement after Close starts a
// roll run of its own. Its mu is taken under none other.
type flushes struct {
	mu    sync.Mutex
	n     int
	empty chan struct{} // closed when n comes to 0; nil when nobody waits
}

func (f *flushes) add() {
	f.mu.Lock()
	f.n++
	f.mu.Unlock()
}

func (f *flushes) done() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n--; f.n == 0 && f.empty != nil {
		close(f.empty)
		f.empty = nil
	}
}

// idle returns a channel closed once no roll run is under way.
func (f *flushes) idle() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == 0 {
		c := make(chan struct{})
		close(c)
		return c
	}
	if f.empty == nil {
		f.empty = make(chan struct{})
	}
	return f.empty
}
