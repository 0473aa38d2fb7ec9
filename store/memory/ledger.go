package memory

import (
	"context"
	"fmt"
	"maps"
	"sync"

	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/store"
)

// Ledger is the in-memory [billing.Ledger]. Each account has its own lock, so accounts
// never contend with each other.
//
// Idempotency records are kept per account: every open reservation, and the ids of the
// last [LedgerOptions.Remember] settled reservations and adjustments. A replay older than
// that is not recognised. Use [NewLedger] to make one.
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
	period    billing.Period
	usage     map[string]int64
	open      map[billing.RequestID]reservation
	done      map[billing.RequestID]struct{}
	ring      []billing.RequestID // the ids in done, oldest at next
	next      int
}

type reservation struct {
	amount int64
	start  int64 // Unix seconds of the period it was made in
}

// Interface guard.
var _ billing.Ledger = (*Ledger)(nil)

// NewLedger returns an empty Ledger. opts may be nil.
func NewLedger(opts *LedgerOptions) *Ledger {
	l := &Ledger{accounts: make(map[string]*account), remember: 4096}
	if opts != nil && opts.Remember > 0 {
		l.remember = opts.Remember
	}
	return l
}

// Open creates an account's balance.
func (l *Ledger) Open(ctx context.Context, o billing.Opening) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if o.Balance < 0 {
		return fmt.Errorf("memory: account %q: a balance cannot be negative", o.Account)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.accounts[o.Account]; ok {
		return fmt.Errorf("memory: balance of account %q: %w", o.Account, store.ErrConflict)
	}
	l.accounts[o.Account] = &account{
		balance: o.Balance, allowance: o.Allowance, period: o.Period,
		usage: make(map[string]int64), open: make(map[billing.RequestID]reservation),
		done: make(map[billing.RequestID]struct{}), // ring grows as ids are settled, up to l.remember
	}
	return nil
}

// lock finds an account and locks it, applying a due renewal.
func (l *Ledger) lock(ctx context.Context, id string, p billing.Period, allowance int64) (*account, error) {
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
		// Reservations older than the period that just ended will not be settled any
		// more (their calls ended long ago); forget them so they cannot accumulate.
		ended := a.period.Start.Unix()
		for id, r := range a.open {
			if r.start < ended {
				delete(a.open, id)
			}
		}
		a.balance, a.used, a.allowance, a.period = allowance, 0, allowance, p
		clear(a.usage)
	}
	return a, nil
}

func (a *account) snapshot() billing.Balance {
	return billing.Balance{Remaining: a.balance, Used: a.used, Allowance: a.allowance, Period: a.period}
}

// seen reports whether id was reserved, settled or adjusted before.
func (a *account) seen(id billing.RequestID) bool {
	if _, ok := a.open[id]; ok {
		return true
	}
	_, ok := a.done[id]
	return ok
}

// remember records id as settled, forgetting the oldest id when the ring is full.
func (a *account) remember(id billing.RequestID, limit int) {
	if len(a.ring) < limit {
		a.ring = append(a.ring, id)
	} else {
		delete(a.done, a.ring[a.next])
		a.ring[a.next] = id
		a.next = (a.next + 1) % limit
	}
	a.done[id] = struct{}{}
}

// Reserve takes credits for a call.
func (l *Ledger) Reserve(ctx context.Context, r billing.Reservation) (billing.Balance, error) {
	a, err := l.lock(ctx, r.Account, r.Period, r.Allowance)
	if err != nil {
		return billing.Balance{}, err
	}
	defer a.mu.Unlock()
	if r.Amount < 0 {
		return a.snapshot(), fmt.Errorf("memory: reservation %s: negative amount: %w", r.Request, store.ErrConflict)
	}
	if a.seen(r.Request) {
		return a.snapshot(), nil
	}
	if a.balance < r.Amount {
		return a.snapshot(), billing.ErrInsufficientCredits
	}
	a.balance -= r.Amount
	a.used += r.Amount
	for _, api := range r.APIs {
		a.usage[api]++
	}
	a.open[r.Request] = reservation{amount: r.Amount, start: a.period.Start.Unix()}
	return a.snapshot(), nil
}

// Settle closes a reservation.
func (l *Ledger) Settle(ctx context.Context, s billing.Settlement) (billing.Balance, error) {
	a, err := l.lock(ctx, s.Account, s.Period, s.Allowance)
	if err != nil {
		return billing.Balance{}, err
	}
	defer a.mu.Unlock()
	res, ok := a.open[s.Request]
	if !ok {
		if _, done := a.done[s.Request]; done {
			return a.snapshot(), nil
		}
		return a.snapshot(), fmt.Errorf("memory: reservation %s: %w", s.Request, store.ErrNotFound)
	}
	if s.Refund < 0 || s.Refund > res.amount {
		return a.snapshot(), fmt.Errorf("memory: reservation %s: refund %d is outside 0..%d: %w", s.Request, s.Refund, res.amount, store.ErrConflict)
	}
	delete(a.open, s.Request)
	a.remember(s.Request, l.remember)
	if res.start == a.period.Start.Unix() {
		a.balance += s.Refund
		a.used -= s.Refund
		for _, api := range s.Uncount {
			if a.usage[api] > 0 {
				a.usage[api]--
			}
		}
	}
	return a.snapshot(), nil
}

// Adjust adds credits to, or takes them from, the balance.
func (l *Ledger) Adjust(ctx context.Context, adj billing.Adjustment) (billing.Balance, error) {
	a, err := l.lock(ctx, adj.Account, adj.Period, adj.Allowance)
	if err != nil {
		return billing.Balance{}, err
	}
	defer a.mu.Unlock()
	if a.seen(adj.Request) {
		return a.snapshot(), nil
	}
	if a.balance+adj.Amount < 0 {
		return a.snapshot(), billing.ErrInsufficientCredits
	}
	a.balance += adj.Amount
	a.remember(adj.Request, l.remember)
	return a.snapshot(), nil
}

// Balance returns the account's balance.
func (l *Ledger) Balance(ctx context.Context, account string, p billing.Period, allowance int64) (billing.Balance, error) {
	a, err := l.lock(ctx, account, p, allowance)
	if err != nil {
		return billing.Balance{}, err
	}
	defer a.mu.Unlock()
	return a.snapshot(), nil
}

// Usage returns the calls per API counted in period p.
func (l *Ledger) Usage(ctx context.Context, account string, p billing.Period) (map[string]int64, error) {
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
