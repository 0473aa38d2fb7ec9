package memory

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store"
)

// Ledger is the in-memory [driver.Ledger] and [driver.Sweeper]. Its accounts are
// spread over ledgerShards locks, so that accounts rarely contend with each other, and
// its records hold no pointers (see [names]), so that a million accounts add nothing
// to what the garbage collector scans.
//
// A reservation lives in its shard's table of open reservations until it is settled
// or voided:
//
//	Reserve --> open --+-- Settle --------------> settled (remembered)
//	                   |
//	                   +-- Expires <= now ------> voided (remembered): the credits come
//	                       (the next operation        back, the APIs are uncounted, and a
//	                       of the shard, or Sweep)    later Settle gets driver.ErrVoided
//
// Every operation on an account first voids the reservations of its shard that are
// open past their expiry; a shard keeps a lower bound of their expiries, so that this
// costs one comparison while none is due. [Ledger.Sweep] voids those of shards nobody
// touches.
//
// Idempotency records are kept per account: every open reservation, and the ids of the
// last [LedgerOptions.Remember] settled or voided reservations and adjustments. A replay
// older than that is not recognised. Use [NewLedger] to make one.
type Ledger struct {
	// mu guards ids and the growth of accounts; an operation holds it for reading
	// throughout, and its account's shard lock.
	mu       sync.RWMutex
	ids      names // account i is numbered i in ids
	accounts table[balance]
	shards   [ledgerShards]ledgerShard // account i is in shards[i%ledgerShards]
	apis     apiNames
	remember int
}

// ledgerShards is the number of a Ledger's locks.
const ledgerShards = 64

// LedgerOptions configures a [Ledger]. The zero value is the default.
type LedgerOptions struct {
	// Remember is the number of settled request ids each account remembers, to
	// recognise replays. The default is 4096.
	Remember int
}

// balance is an account's record. Its shard's lock guards it.
type balance struct {
	balance, used, allowance int64
	start, end               stamp // the period
	// The usage count of the first API the account called since its last renewal is
	// kept here, where a call finds it without another lookup: 1 + the API (in
	// apiNames), 0 for none, and its count. counted is whether the account has counts
	// of other APIs in its shard.
	api     uint32
	calls   int64
	counted bool
	// newestHow is how newest ended, so that linking a newer id to it writes its
	// entry without reading it first.
	newestHow closed
	// The remembered request ids, oldest first: oldest, then each one's newer, to
	// newest.
	remembered     int
	oldest, newest driver.RequestID
}

func (a *balance) snapshot() driver.Balance {
	return driver.Balance{Remaining: a.balance, Used: a.used, Allowance: a.allowance,
		Period: driver.Period{Start: a.start.time(), End: a.end.time()}}
}

// ledgerShard holds the open reservations, the remembered request ids and the usage
// counts of its accounts, in maps that hold no pointers but for more.
type ledgerShard struct {
	mu sync.Mutex
	// due is at most the earliest expiry among the open reservations (Unix
	// nanoseconds), math.MaxInt64 when there are none. Written under mu; read by Sweep
	// without it.
	due   atomic.Int64
	open  map[request]reservation
	more  map[request][]uint32 // the APIs after the first of open calls of several APIs
	done  map[request]closedID
	usage map[apiCount]int64 // calls per account and API in the account's period, but for its first API
}

// A request is an account's request id.
type request struct {
	account uint32
	id      driver.RequestID
}

// An apiCount is the usage count of an API (in apiNames) by an account.
type apiCount struct{ account, api uint32 }

type reservation struct {
	amount  int64
	start   stamp // the start of the period it was made in
	expires int64 // Unix nanoseconds
	// The APIs it counted: the first is api, the others are in the shard's more.
	apis, api uint32
}

// closedID is how a remembered request id ended, and the account's next remembered
// id.
type closedID struct {
	how   closed
	newer driver.RequestID
}

// closed is how a remembered request id ended.
type closed uint8

const (
	settled closed = iota // a settled reservation, or an adjustment
	voided                // a reservation voided at its expiry
)

// apiNames numbers the API ids the ledger has counted calls of. Finding the number of
// a known API takes no lock.
type apiNames struct {
	numbers sync.Map // API id -> uint32
	mu      sync.Mutex
	ids     []string // by number
}

// lookup returns the number of api, if it was counted before.
func (n *apiNames) lookup(api string) (uint32, bool) {
	i, ok := n.numbers.Load(api)
	if !ok {
		return 0, false
	}
	return i.(uint32), true
}

func (n *apiNames) intern(api string) uint32 {
	if i, ok := n.lookup(api); ok {
		return i
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if i, ok := n.lookup(api); ok {
		return i
	}
	i := uint32(len(n.ids))
	n.ids = append(n.ids, api)
	n.numbers.Store(api, i)
	return i
}

// all returns the APIs, in the order of their numbers.
func (n *apiNames) all() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ids[:len(n.ids):len(n.ids)]
}

// Interface guards.
var (
	_ driver.Ledger  = (*Ledger)(nil)
	_ driver.Sweeper = (*Ledger)(nil)
)

// NewLedger returns an empty Ledger. opts may be nil.
func NewLedger(opts *LedgerOptions) *Ledger {
	l := &Ledger{remember: 4096}
	if opts != nil && opts.Remember > 0 {
		l.remember = opts.Remember
	}
	for i := range l.shards {
		sh := &l.shards[i]
		sh.open, sh.more, sh.done, sh.usage = map[request]reservation{}, map[request][]uint32{}, map[request]closedID{}, map[apiCount]int64{}
		sh.due.Store(math.MaxInt64)
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
	if _, ok := l.ids.lookup(o.Account); ok {
		return fmt.Errorf("memory: balance of account %q: %w", o.Account, store.ErrConflict)
	}
	l.ids.add(o.Account)
	_, a := l.accounts.add()
	*a = balance{balance: o.Balance, allowance: o.Allowance, start: stampOf(o.Period.Start), end: stampOf(o.Period.End)}
	return nil
}

// An op is an operation on one account, which holds the ledger's read lock and the
// account's shard lock until done.
type op struct {
	l  *Ledger
	sh *ledgerShard
	i  uint32
	a  *balance
}

func (o op) done() {
	o.sh.mu.Unlock()
	o.l.mu.RUnlock()
}

// find finds an account and locks it, without renewing it or voiding anything.
func (l *Ledger) find(ctx context.Context, id string) (op, error) {
	if err := ctx.Err(); err != nil {
		return op{}, err
	}
	l.mu.RLock()
	r, ok := l.ids.lookup(id)
	if !ok {
		l.mu.RUnlock()
		return op{}, fmt.Errorf("memory: balance of account %q: %w", id, store.ErrNotFound)
	}
	o := op{l: l, sh: &l.shards[r.i%ledgerShards], i: r.i, a: l.accounts.at(r.i)}
	o.sh.mu.Lock()
	return o, nil
}

// lock finds an account and locks it, applying a due renewal and voiding the
// reservations of its shard that are open past their expiry at now.
func (l *Ledger) lock(ctx context.Context, id string, p driver.Period, allowance int64, now time.Time) (op, error) {
	o, err := l.find(ctx, id)
	if err != nil {
		return op{}, err
	}
	if start := stampOf(p.Start); o.a.start.before(start) {
		o.a.balance, o.a.used, o.a.allowance, o.a.start, o.a.end = allowance, 0, allowance, start, stampOf(p.End)
		o.uncountAll()
	}
	if t := now.UnixNano(); !now.IsZero() && t >= o.sh.due.Load() {
		l.expire(o.sh, t, math.MaxInt)
	}
	return o, nil
}

// uncountAll forgets the account's usage counts.
func (o op) uncountAll() {
	o.a.api, o.a.calls = 0, 0
	if !o.a.counted {
		return
	}
	for api := range o.l.apis.all() {
		delete(o.sh.usage, apiCount{o.i, uint32(api)})
	}
	o.a.counted = false
}

// expire voids up to limit reservations of shard sh that are open past their expiry
// at now (Unix nanoseconds), and returns how many it voided. The ledger is read-locked
// and the shard locked.
func (l *Ledger) expire(sh *ledgerShard, now int64, limit int) int {
	n, due := 0, int64(math.MaxInt64)
	for k, r := range sh.open {
		if r.expires > now || n == limit {
			due = min(due, r.expires)
			continue
		}
		o := op{l: l, sh: sh, i: k.account, a: l.accounts.at(k.account)}
		more := sh.more[k]
		delete(sh.open, k)
		delete(sh.more, k)
		o.forget(k.id, voided)
		if o.credit(r, r.amount) && r.apis > 0 {
			o.uncount(r.api)
			for _, api := range more {
				o.uncount(api)
			}
		}
		n++
	}
	sh.due.Store(due)
	return n
}

// credit gives back amount credits of reservation r, unless the balance has been
// renewed since r was made (the credits went with the old period), and reports whether
// it did.
func (o op) credit(r reservation, amount int64) bool {
	if r.start != o.a.start {
		return false
	}
	o.a.balance += amount
	o.a.used -= amount
	return true
}

// count adds one call to the usage count of an API.
func (o op) count(api uint32) {
	switch a := o.a; {
	case a.api == api+1:
		a.calls++
	case a.api == 0:
		a.api, a.calls = api+1, 1
	default:
		o.sh.usage[apiCount{o.i, api}]++
		a.counted = true
	}
}

// uncount takes one call off the usage count of an API, never below zero.
func (o op) uncount(api uint32) {
	if o.a.api == api+1 {
		o.a.calls = max(o.a.calls-1, 0)
		return
	}
	k := apiCount{o.i, api}
	if o.sh.usage[k] > 0 {
		o.sh.usage[k]--
	}
}

// seen reports whether id was reserved, settled, voided or adjusted before.
func (o op) seen(id driver.RequestID) bool {
	k := request{o.i, id}
	if _, ok := o.sh.open[k]; ok {
		return true
	}
	_, ok := o.sh.done[k]
	return ok
}

// forget records how id, which was open or not seen before, ended, forgetting the
// oldest id when the account remembers the most it may.
func (o op) forget(id driver.RequestID, how closed) {
	a, done := o.a, o.sh.done
	if a.remembered == 0 {
		a.oldest = id
	} else {
		done[request{o.i, a.newest}] = closedID{how: a.newestHow, newer: id}
	}
	done[request{o.i, id}] = closedID{how: how}
	a.newest, a.newestHow = id, how
	a.remembered++
	if a.remembered > o.l.remember {
		k := request{o.i, a.oldest}
		a.oldest = done[k].newer
		delete(done, k)
		a.remembered--
	}
}

// Reserve takes credits for a call.
func (l *Ledger) Reserve(ctx context.Context, r driver.Reservation) (driver.Balance, error) {
	o, err := l.lock(ctx, r.Account, r.Period, r.Allowance, r.Now)
	if err != nil {
		return driver.Balance{}, err
	}
	defer o.done()
	a := o.a
	switch {
	case r.Amount < 0:
		return a.snapshot(), fmt.Errorf("memory: reservation %s: negative amount: %w", r.Request, store.ErrConflict)
	case !r.Expires.After(r.Now):
		return a.snapshot(), fmt.Errorf("memory: reservation %s: it expires at %s, not after it is made: %w", r.Request, r.Expires, store.ErrConflict)
	}
	if o.seen(r.Request) {
		return a.snapshot(), nil
	}
	if a.balance < r.Amount {
		return a.snapshot(), driver.ErrInsufficientCredits
	}
	a.balance -= r.Amount
	a.used += r.Amount
	expires := r.Expires.UnixNano()
	res := reservation{amount: r.Amount, start: a.start, expires: expires, apis: uint32(len(r.APIs))}
	k := request{o.i, r.Request}
	for j, name := range r.APIs {
		api := l.apis.intern(name)
		o.count(api)
		if j == 0 {
			res.api = api
		} else {
			o.sh.more[k] = append(o.sh.more[k], api)
		}
	}
	o.sh.open[k] = res
	if expires < o.sh.due.Load() {
		o.sh.due.Store(expires)
	}
	return a.snapshot(), nil
}

// Settle closes a reservation.
func (l *Ledger) Settle(ctx context.Context, s driver.Settlement) (driver.Balance, error) {
	o, err := l.lock(ctx, s.Account, s.Period, s.Allowance, s.Now)
	if err != nil {
		return driver.Balance{}, err
	}
	defer o.done()
	k := request{o.i, s.Request}
	res, ok := o.sh.open[k]
	if !ok {
		switch c, done := o.sh.done[k]; {
		case done && c.how == voided:
			return o.a.snapshot(), fmt.Errorf("memory: reservation %s: %w", s.Request, driver.ErrVoided)
		case done:
			return o.a.snapshot(), nil
		}
		return o.a.snapshot(), fmt.Errorf("memory: reservation %s: %w", s.Request, store.ErrNotFound)
	}
	if s.Refund < 0 || s.Refund > res.amount {
		return o.a.snapshot(), fmt.Errorf("memory: reservation %s: refund %d is outside 0..%d: %w", s.Request, s.Refund, res.amount, store.ErrConflict)
	}
	delete(o.sh.open, k)
	delete(o.sh.more, k)
	o.forget(s.Request, settled)
	if o.credit(res, s.Refund) {
		for _, name := range s.Uncount {
			if api, ok := l.apis.lookup(name); ok {
				o.uncount(api)
			}
		}
	}
	return o.a.snapshot(), nil
}

// Adjust adds credits to, or takes them from, the balance.
func (l *Ledger) Adjust(ctx context.Context, adj driver.Adjustment) (driver.Balance, error) {
	if err := store.CheckText("memory: the reason of an adjustment", adj.Reason); err != nil {
		return driver.Balance{}, err
	}
	o, err := l.lock(ctx, adj.Account, adj.Period, adj.Allowance, adj.Now)
	if err != nil {
		return driver.Balance{}, err
	}
	defer o.done()
	a := o.a
	if o.seen(adj.Request) {
		return a.snapshot(), nil
	}
	if adj.Amount > driver.MaxCredits-(a.balance+a.used) {
		return a.snapshot(), fmt.Errorf("memory: account %q: %w", adj.Account, driver.ErrTooManyCredits)
	}
	if adj.Amount < -a.balance {
		return a.snapshot(), driver.ErrInsufficientCredits
	}
	a.balance += adj.Amount
	o.forget(adj.Request, settled)
	return a.snapshot(), nil
}

// Balance returns the account's balance.
func (l *Ledger) Balance(ctx context.Context, account string, now time.Time, p driver.Period, allowance int64) (driver.Balance, error) {
	o, err := l.lock(ctx, account, p, allowance, now)
	if err != nil {
		return driver.Balance{}, err
	}
	defer o.done()
	return o.a.snapshot(), nil
}

// Usage returns the calls per API counted in period p.
func (l *Ledger) Usage(ctx context.Context, account string, p driver.Period) (map[string]int64, error) {
	o, err := l.find(ctx, account)
	if err != nil {
		return nil, err
	}
	defer o.done()
	out := map[string]int64{}
	if o.a.start != stampOf(p.Start) {
		return out, nil
	}
	if o.a.api != 0 {
		out[l.apis.all()[o.a.api-1]] = o.a.calls
	}
	if !o.a.counted {
		return out, nil
	}
	for api, name := range l.apis.all() {
		if n, ok := o.sh.usage[apiCount{o.i, uint32(api)}]; ok {
			out[name] = n
		}
	}
	return out, nil
}

// Sweep voids up to limit reservations open past their expiry at now, of any accounts.
// It finds them without locking the shards that have none due, and locks each shard
// that has some only while it voids them.
func (l *Ledger) Sweep(ctx context.Context, now time.Time, limit int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	t := now.UnixNano()
	l.mu.RLock()
	defer l.mu.RUnlock()
	n := 0
	for i := range l.shards {
		sh := &l.shards[i]
		if n >= limit {
			break
		}
		if sh.due.Load() > t {
			continue
		}
		if err := ctx.Err(); err != nil {
			return n, err
		}
		sh.mu.Lock()
		n += l.expire(sh, t, limit-n)
		sh.mu.Unlock()
	}
	return n, nil
}
