package memory

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store"
)

// Ledger is the in-memory [driver.Ledger] and [driver.Sweeper]. Each account has its
// own lock, so accounts never contend with each other.
//
// A reservation lives in its account's table of open reservations until it is settled
// or voided:
//
//	Reserve --> open --+-- Settle --------------> settled (remembered)
//	                   |
//	                   +-- Expires <= now ------> voided (remembered): the credits come
//	                       (the account's next        back, the APIs are uncounted, and a
//	                       operation, or Sweep)       later Settle gets driver.ErrVoided
//
// Every operation on an account first voids its reservations that are open past their
// expiry; an account keeps a lower bound of their expiries, so that this costs one
// comparison while none is due. [Ledger.Sweep] voids those of accounts nobody touches.
//
// Idempotency records are kept per account: every open reservation, and the ids of the
// last [LedgerOptions.Remember] settled or voided reservations and adjustments. A replay
// older than that is not recognised. Use [NewLedger] to make one.
type Ledger struct {
	mu       sync.RWMutex
	accounts map[string]*account
	remember int
}

// LedgerOptions configures a [Ledger]. The zero value is the default.
type LedgerOptions struct {
	// Remember is the number of settled request ids each account remembers, to
	// recognise replays. The default is 4096.
	Remember int
}

type account struct {
	mu        sync.Mutex
	balance   int64
	used      int64
	allowance int64
	period    driver.Period
	usage     map[string]int64
	open      map[driver.RequestID]reservation
	// due is at most the earliest expiry among the open reservations (Unix
	// nanoseconds), math.MaxInt64 when there are none. Written under mu; read by Sweep
	// without it.
	due  atomic.Int64
	done map[driver.RequestID]closed
	ring []driver.RequestID // the ids in done, oldest at next
	next int
}

type reservation struct {
	amount  int64
	start   int64 // Unix seconds of the period it was made in
	expires int64 // Unix nanoseconds
	// The APIs it counted: none (counted false), or api and the others, more (a call
	// of one API, the common case, keeps its APIs without an allocation).
	counted bool
	api     string
	more    []string
}

// uncount takes one call off the usage count of each of r's APIs, never below zero.
func (a *account) uncount(r reservation) {
	if !r.counted {
		return
	}
	a.uncountAPI(r.api)
	for _, api := range r.more {
		a.uncountAPI(api)
	}
}

func (a *account) uncountAPI(api string) {
	if a.usage[api] > 0 {
		a.usage[api]--
	}
}

// closed is how a remembered request id ended.
type closed uint8

const (
	settled closed = iota // a settled reservation, or an adjustment
	voided                // a reservation voided at its expiry
)

// Interface guards.
var (
	_ driver.Ledger  = (*Ledger)(nil)
	_ driver.Sweeper = (*Ledger)(nil)
)

// NewLedger returns an empty Ledger. opts may be nil.
func NewLedger(opts *LedgerOptions) *Ledger {
	l := &Ledger{accounts: make(map[string]*account), remember: 4096}
	if opts != nil && opts.Remember > 0 {
		l.remember = opts.Remember
	}
	return l
}

// Open creates an account's balance.
func (l *Ledger) Open(ctx context.Context, o driver.Opening) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := store.CheckText("memory: account id", o.Account); err != nil {
		return err
	}
	switch {
	case o.Balance < 0:
		return fmt.Errorf("memory: account %q: a balance cannot be negative: %w", o.Account, store.ErrInvalid)
	case o.Balance > driver.MaxCredits || o.Allowance > driver.MaxCredits:
		return fmt.Errorf("memory: account %q: %w", o.Account, driver.ErrTooManyCredits)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.accounts[o.Account]; ok {
		return fmt.Errorf("memory: balance of account %q: %w", o.Account, store.ErrConflict)
	}
	a := &account{
		balance: o.Balance, allowance: o.Allowance, period: o.Period,
		usage: make(map[string]int64), open: make(map[driver.RequestID]reservation),
		done: make(map[driver.RequestID]closed), // ring grows as ids are settled, up to l.remember
	}
	a.due.Store(math.MaxInt64)
	l.accounts[o.Account] = a
	return nil
}

// lock finds an account and locks it, applying a due renewal and voiding the
// reservations that are open past their expiry at now.
func (l *Ledger) lock(ctx context.Context, id string, p driver.Period, allowance int64, now time.Time) (*account, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.RLock()
	a, ok := l.accounts[id]
	l.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("memory: balance of account %q: %w", id, store.ErrNotFound)
	}
	a.mu.Lock()
	if p.Start.After(a.period.Start) {
		a.balance, a.used, a.allowance, a.period = allowance, 0, allowance, p
		clear(a.usage)
	}
	if t := now.UnixNano(); !now.IsZero() && t >= a.due.Load() {
		a.expire(t, math.MaxInt, l.remember)
	}
	return a, nil
}

// expire voids up to limit reservations that are open past their expiry at now (Unix
// nanoseconds), and returns how many it voided. The account is locked.
func (a *account) expire(now int64, limit, remember int) int {
	n, due := 0, int64(math.MaxInt64)
	for id, r := range a.open {
		if r.expires > now || n == limit {
			due = min(due, r.expires)
			continue
		}
		delete(a.open, id)
		a.forget(id, voided, remember)
		if a.credit(r, r.amount) {
			a.uncount(r)
		}
		n++
	}
	a.due.Store(due)
	return n
}

// credit gives back amount credits of reservation r, unless the balance has been
// renewed since r was made (the credits went with the old period), and reports whether
// it did.
func (a *account) credit(r reservation, amount int64) bool {
	if r.start != a.period.Start.Unix() {
		return false
	}
	a.balance += amount
	a.used -= amount
	return true
}

func (a *account) snapshot() driver.Balance {
	return driver.Balance{Remaining: a.balance, Used: a.used, Allowance: a.allowance, Period: a.period}
}

// seen reports whether id was reserved, settled, voided or adjusted before.
func (a *account) seen(id driver.RequestID) bool {
	if _, ok := a.open[id]; ok {
		return true
	}
	_, ok := a.done[id]
	return ok
}

// forget records how id, which was open or not seen before, ended, forgetting the
// oldest id when the ring is full.
func (a *account) forget(id driver.RequestID, how closed, limit int) {
	if len(a.ring) < limit {
		a.ring = append(a.ring, id)
	} else {
		delete(a.done, a.ring[a.next])
		a.ring[a.next] = id
		a.next = (a.next + 1) % limit
	}
	a.done[id] = how
}

// Reserve takes credits for a call.
func (l *Ledger) Reserve(ctx context.Context, r driver.Reservation) (driver.Balance, error) {
	a, err := l.lock(ctx, r.Account, r.Period, r.Allowance, r.Now)
	if err != nil {
		return driver.Balance{}, err
	}
	defer a.mu.Unlock()
	switch {
	case r.Amount < 0:
		return a.snapshot(), fmt.Errorf("memory: reservation %s: negative amount: %w", r.Request, store.ErrConflict)
	case !r.Expires.After(r.Now):
		return a.snapshot(), fmt.Errorf("memory: reservation %s: it expires at %s, not after it is made: %w", r.Request, r.Expires, store.ErrConflict)
	}
	if a.seen(r.Request) {
		return a.snapshot(), nil
	}
	if a.balance < r.Amount {
		return a.snapshot(), driver.ErrInsufficientCredits
	}
	a.balance -= r.Amount
	a.used += r.Amount
	for _, api := range r.APIs {
		a.usage[api]++
	}
	expires := r.Expires.UnixNano()
	res := reservation{amount: r.Amount, start: a.period.Start.Unix(), expires: expires}
	if len(r.APIs) > 0 {
		res.counted, res.api = true, r.APIs[0]
		if len(r.APIs) > 1 {
			res.more = slices.Clone(r.APIs[1:])
		}
	}
	a.open[r.Request] = res
	if expires < a.due.Load() {
		a.due.Store(expires)
	}
	return a.snapshot(), nil
}

// Settle closes a reservation.
func (l *Ledger) Settle(ctx context.Context, s driver.Settlement) (driver.Balance, error) {
	a, err := l.lock(ctx, s.Account, s.Period, s.Allowance, s.Now)
	if err != nil {
		return driver.Balance{}, err
	}
	defer a.mu.Unlock()
	res, ok := a.open[s.Request]
	if !ok {
		switch how, done := a.done[s.Request]; {
		case done && how == voided:
			return a.snapshot(), fmt.Errorf("memory: reservation %s: %w", s.Request, driver.ErrVoided)
		case done:
			return a.snapshot(), nil
		}
		return a.snapshot(), fmt.Errorf("memory: reservation %s: %w", s.Request, store.ErrNotFound)
	}
	if s.Refund < 0 || s.Refund > res.amount {
		return a.snapshot(), fmt.Errorf("memory: reservation %s: refund %d is outside 0..%d: %w", s.Request, s.Refund, res.amount, store.ErrConflict)
	}
	delete(a.open, s.Request)
	a.forget(s.Request, settled, l.remember)
	if a.credit(res, s.Refund) {
		for _, api := range s.Uncount {
			a.uncountAPI(api)
		}
	}
	return a.snapshot(), nil
}

// Adjust adds credits to, or takes them from, the balance.
func (l *Ledger) Adjust(ctx context.Context, adj driver.Adjustment) (driver.Balance, error) {
	if err := store.CheckText("memory: the reason of an adjustment", adj.Reason); err != nil {
		return driver.Balance{}, err
	}
	a, err := l.lock(ctx, adj.Account, adj.Period, adj.Allowance, adj.Now)
	if err != nil {
		return driver.Balance{}, err
	}
	defer a.mu.Unlock()
	if a.seen(adj.Request) {
		return a.snapshot(), nil
	}
	if adj.Amount > driver.MaxCredits-(a.balance+a.used) {
		return a.snapshot(), fmt.Errorf("memory: account %q: %w", adj.Account, driver.ErrTooManyCredits)
	}
	if adj.Amount < -a.balance {
		return a.snapshot(), driver.ErrInsufficientCredits
	}
	a.balance += adj.Amount
	a.forget(adj.Request, settled, l.remember)
	return a.snapshot(), nil
}

// Balance returns the account's balance.
func (l *Ledger) Balance(ctx context.Context, account string, now time.Time, p driver.Period, allowance int64) (driver.Balance, error) {
	a, err := l.lock(ctx, account, p, allowance, now)
	if err != nil {
		return driver.Balance{}, err
	}
	defer a.mu.Unlock()
	return a.snapshot(), nil
}

// Usage returns the calls per API counted in period p.
func (l *Ledger) Usage(ctx context.Context, account string, p driver.Period) (map[string]int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.RLock()
	a, ok := l.accounts[account]
	l.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("memory: balance of account %q: %w", account, store.ErrNotFound)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.period.Start.Equal(p.Start) {
		return map[string]int64{}, nil
	}
	return maps.Clone(a.usage), nil
}

// Sweep voids up to limit reservations open past their expiry at now, of any accounts.
// It finds them without locking accounts that have none due, and locks each account
// that has some only while it voids them.
func (l *Ledger) Sweep(ctx context.Context, now time.Time, limit int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	t := now.UnixNano()
	var due []*account
	l.mu.RLock()
	for _, a := range l.accounts {
		if a.due.Load() <= t {
			due = append(due, a)
		}
	}
	l.mu.RUnlock()
	n := 0
	for _, a := range due {
		if n >= limit {
			break
		}
		if err := ctx.Err(); err != nil {
			return n, err
		}
		a.mu.Lock()
		n += a.expire(t, limit-n, l.remember)
		a.mu.Unlock()
	}
	return n, nil
}
