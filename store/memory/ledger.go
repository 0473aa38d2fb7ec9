package memory

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/journal"
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
// An account's grant lots, and what each open reservation took from them, are kept in
// its shard, only for the accounts and reservations that have some.
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

	// journal keeps the entries that adjustments are given (journal.With), each
	// recorded under its account's shard lock with the adjustment (see journal.go).
	journal changeJournal
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
	// left is what is left of the period's allowance; grants is what its grant lots
	// (in the shard's lots) hold.
	left, grants, used, allowance int64
	start, end                    stamp // the period
	// revision is the revision of the last change of the allowance applied (see
	// driver.PartAllowance), 0 until one is; a renewal keeps it.
	revision int64
	// lapse is the earliest expiry among the lots that lapse (Unix nanoseconds), 0
	// for none; clock is the latest Now an operation gave, at which the lots that
	// lapse by then are gone.
	lapse, clock int64
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

// snapshot returns the account's balance.
func (o op) snapshot() driver.Balance {
	a := o.a
	b := driver.Balance{Remaining: a.left + a.grants, Granted: a.grants, Used: a.used, Allowance: a.allowance,
		Period: driver.Period{Start: a.start.time(), End: a.end.time()}}
	if a.lapse != 0 {
		b.GrantsLapse = time.Unix(0, a.lapse).UTC()
		b.GrantsLapsing = o.sh.lots[o.i][0].credits
	}
	return b
}

// A lot is the credits of the grants of an account that lapse at the same instant
// (Unix nanoseconds; 0 for never), or what a reservation took from them.
type lot struct{ expires, credits int64 }

// spentBefore reports whether calls spend lot x before lot y: the one that lapses
// first first, those that never lapse last.
func spentBefore(x, y int64) bool { return x != 0 && (y == 0 || x < y) }

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
	took  map[request][]lot    // what open reservations took from grant lots, in the order taken
	lots  map[uint32][]lot     // the grant lots that hold credits, per account, in spending order
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
	left    int64 // taken from the allowance; the rest is in the shard's took
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
		sh.took, sh.lots = map[request][]lot{}, map[uint32][]lot{}
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
	i, a := l.accounts.add()
	left := min(o.Balance, max(o.Allowance, 0))
	*a = balance{left: left, allowance: o.Allowance, start: stampOf(o.Period.Start), end: stampOf(o.Period.End)}
	if extra := o.Balance - left; extra > 0 {
		sh := &l.shards[i%ledgerShards]
		sh.mu.Lock()
		op{l: l, sh: sh, i: i, a: a}.addLot(0, extra)
		sh.mu.Unlock()
	}
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

// lock finds an account and locks it, bringing it to now and period p in the ledger's
// order (see [driver.Ledger]): the grant lots lapsed at now are dropped; if p starts
// later than the stored period, the reservations of its shard expired by p's start are
// voided, in the old period, and the balance is renewed; then those expired at now are
// voided.
func (l *Ledger) lock(ctx context.Context, id string, p driver.Period, allowance int64, now time.Time) (op, error) {
	o, err := l.find(ctx, id)
	if err != nil {
		return op{}, err
	}
	o.tick(now)
	if start := stampOf(p.Start); o.a.start.before(start) {
		if t := min(now.UnixNano(), p.Start.UnixNano()); !now.IsZero() && t >= o.sh.due.Load() {
			l.expire(o.sh, t, math.MaxInt)
		}
		o.a.left, o.a.used, o.a.allowance, o.a.start, o.a.end = min(allowance, driver.MaxCredits-o.a.grants), 0, allowance, start, stampOf(p.End)
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
	// The due reservations are voided in the order of their expiry (then of their
	// ids), as every store voids them: near MaxCredits, what a reservation open across
	// a renewal gets back depends on what those voided before it got.
	due := int64(math.MaxInt64)
	var expired []request
	for k, r := range sh.open {
		if r.expires > now {
			due = min(due, r.expires)
			continue
		}
		expired = append(expired, k)
	}
	slices.SortFunc(expired, func(x, y request) int {
		if c := cmp.Compare(sh.open[x].expires, sh.open[y].expires); c != 0 {
			return c
		}
		return bytes.Compare(x.id[:], y.id[:])
	})
	if len(expired) > limit {
		for _, k := range expired[limit:] {
			due = min(due, sh.open[k].expires)
		}
		expired = expired[:limit]
	}
	for _, k := range expired {
		r := sh.open[k]
		o := op{l: l, sh: sh, i: k.account, a: l.accounts.at(k.account)}
		o.tick(time.Unix(0, now))
		more := sh.more[k]
		delete(sh.open, k)
		delete(sh.more, k)
		o.forget(k.id, voided)
		if o.giveBack(k, r, r.amount) && r.apis > 0 {
			o.uncount(r.api)
			for _, api := range more {
				o.uncount(api)
			}
		}
	}
	sh.due.Store(due)
	return len(expired)
}

// tick moves the account's clock to now, if it is later, and drops the grant lots
// lapsed by then. A zero now changes nothing.
func (o op) tick(now time.Time) {
	a := o.a
	if now.IsZero() {
		return
	}
	a.clock = max(a.clock, now.UnixNano())
	if a.lapse == 0 || a.lapse > a.clock {
		return
	}
	lots := o.sh.lots[o.i]
	n := 0
	for n < len(lots) && o.lapsed(lots[n].expires) {
		a.grants -= lots[n].credits
		n++
	}
	o.setLots(lots[n:])
}

// lapsed reports whether the lot that lapses at expires has lapsed.
func (o op) lapsed(expires int64) bool { return expires != 0 && expires <= o.a.clock }

// setLots stores the account's lots and the earliest lapse among them.
func (o op) setLots(lots []lot) {
	o.a.lapse = 0
	if len(lots) == 0 {
		delete(o.sh.lots, o.i)
		return
	}
	o.sh.lots[o.i] = lots
	o.a.lapse = lots[0].expires
}

// addLot adds credits to the lot that lapses at expires, starting it if there is none.
func (o op) addLot(expires, credits int64) {
	if credits <= 0 {
		return
	}
	lots := o.sh.lots[o.i]
	j := 0
	for j < len(lots) && spentBefore(lots[j].expires, expires) {
		j++
	}
	if j < len(lots) && lots[j].expires == expires {
		lots[j].credits += credits
	} else {
		lots = slices.Insert(lots, j, lot{expires, credits})
	}
	o.a.grants += credits
	o.setLots(lots)
}

// lotCount returns the number of the account's lots, and whether one lapses at
// expires.
func (o op) lotCount(expires int64) (int, bool) {
	lots := o.sh.lots[o.i]
	for _, l := range lots {
		if l.expires == expires {
			return len(lots), true
		}
	}
	return len(lots), false
}

// take takes amount credits, which the balance covers, in the order calls spend them:
// the allowance, then the lots. It returns what it took from the allowance and from
// each lot.
func (o op) take(amount int64) (left int64, took []lot) {
	a := o.a
	left = min(a.left, amount)
	a.left -= left
	amount -= left
	if amount == 0 {
		return left, nil
	}
	lots := o.sh.lots[o.i]
	n := 0
	for amount > 0 {
		c := min(lots[n].credits, amount)
		took = append(took, lot{lots[n].expires, c})
		lots[n].credits -= c
		a.grants -= c
		amount -= c
		if lots[n].credits == 0 {
			n++
		}
	}
	o.setLots(lots[n:])
	return left, took
}

// giveBack gives back refund credits of reservation r, in the reverse order of what
// it took: to the grant lots it took from, unless they have lapsed since, and then to
// the allowance, unless the balance has been renewed since r was made (the allowance
// went with the old period). It reports whether r was made in the current period, so
// that the refund counts: Used is net of it.
func (o op) giveBack(k request, r reservation, refund int64) bool {
	a := o.a
	took := o.sh.took[k]
	delete(o.sh.took, k)
	same := r.start == a.start
	rest := refund
	for i := len(took) - 1; i >= 0 && rest > 0; i-- {
		c := min(rest, took[i].credits)
		rest -= c
		if o.lapsed(took[i].expires) {
			continue
		}
		if !same {
			c = min(c, driver.MaxCredits-(a.left+a.grants+a.used))
		}
		o.addLot(took[i].expires, c)
	}
	if !same {
		return false
	}
	a.left += rest
	a.used -= refund
	return true
}

// kept divides the charge that reservation r keeps after a refund: the allowance
// first, as the refund goes back to the grants first.
func kept(r reservation, refund int64) driver.Parts {
	k := r.amount - refund
	left := min(r.left, k)
	return driver.Parts{Allowance: left, Grants: k - left}
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
		return o.snapshot(), fmt.Errorf("memory: reservation %s: negative amount: %w", r.Request, store.ErrConflict)
	case !r.Expires.After(r.Now):
		return o.snapshot(), fmt.Errorf("memory: reservation %s: it expires at %s, not after it is made: %w", r.Request, r.Expires, store.ErrConflict)
	}
	if o.seen(r.Request) {
		return o.snapshot(), nil
	}
	if a.left+a.grants < r.Amount {
		return o.snapshot(), driver.ErrInsufficientCredits
	}
	k := request{o.i, r.Request}
	left, took := o.take(r.Amount)
	if took != nil {
		o.sh.took[k] = took
	}
	a.used += r.Amount
	expires := r.Expires.UnixNano()
	res := reservation{amount: r.Amount, left: left, start: a.start, expires: expires, apis: uint32(len(r.APIs))}
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
	b := o.snapshot()
	b.Charge = driver.Parts{Allowance: left, Grants: r.Amount - left}
	return b, nil
}

// Settle closes a reservation.
func (l *Ledger) Settle(ctx context.Context, s driver.Settlement) (driver.Balance, error) {
	if s.Refund < 0 {
		return driver.Balance{}, fmt.Errorf("memory: reservation %s: negative refund %d: %w", s.Request, s.Refund, store.ErrConflict)
	}
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
			return o.snapshot(), fmt.Errorf("memory: reservation %s: %w", s.Request, driver.ErrVoided)
		case done:
			return o.snapshot(), nil
		}
		return o.snapshot(), fmt.Errorf("memory: reservation %s: %w", s.Request, store.ErrNotFound)
	}
	if s.Refund > res.amount {
		return o.snapshot(), fmt.Errorf("memory: reservation %s: refund %d is more than the %d reserved: %w", s.Request, s.Refund, res.amount, store.ErrConflict)
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
	}
	b := o.snapshot()
	b.Charge = kept(res, s.Refund)
	return b, nil
}

// Adjust changes a part of the balance, and records the journal entry ctx carries
// with it.
func (l *Ledger) Adjust(ctx context.Context, adj driver.Adjustment) (_ driver.Balance, err error) {
	if err := store.CheckText("memory: the reason of an adjustment", adj.Reason); err != nil {
		return driver.Balance{}, err
	}
	if err := adj.Check(); err != nil {
		return driver.Balance{}, fmt.Errorf("memory: %w: %w", err, store.ErrInvalid)
	}
	rec, err := journal.From(ctx)
	if err != nil {
		return driver.Balance{}, err
	}
	o, err := l.lock(ctx, adj.Account, adj.Period, adj.Allowance, adj.Now)
	if err != nil {
		return driver.Balance{}, err
	}
	defer o.done()
	defer l.journal.recordIf(rec, &err)
	a := o.a
	if o.seen(adj.Request) {
		return o.snapshot(), nil
	}
	if adj.Part == driver.PartAllowance {
		// The allowance of adj.Period is set, if the balance is of that period (a
		// balance of an earlier one was renewed to it, with adj.Allowance, by lock)
		// and no change as late was applied; otherwise nothing changes.
		if a.start == stampOf(adj.Period.Start) && adj.Revision > a.revision {
			d := adj.Allowance - a.allowance
			if d > driver.MaxCredits-(a.left+a.grants+a.used) {
				return o.snapshot(), fmt.Errorf("memory: account %q: %w", adj.Account, driver.ErrTooManyCredits)
			}
			a.left = max(a.left+d, 0)
			a.allowance, a.revision = adj.Allowance, adj.Revision
		}
		o.forget(adj.Request, settled)
		return o.snapshot(), nil
	}
	if adj.Amount > driver.MaxCredits-(a.left+a.grants+a.used) {
		return o.snapshot(), fmt.Errorf("memory: account %q: %w", adj.Account, driver.ErrTooManyCredits)
	}
	switch {
	case adj.Grant():
		if n, ok := o.lotCount(adj.Lot()); !ok && n >= driver.MaxGrantLots {
			return o.snapshot(), fmt.Errorf("memory: account %q: %w", adj.Account, driver.ErrTooManyGrants)
		}
		o.addLot(adj.Lot(), adj.Amount)
	case adj.Amount < -(a.left + a.grants):
		return o.snapshot(), driver.ErrInsufficientCredits
	default:
		o.take(-adj.Amount)
	}
	o.forget(adj.Request, settled)
	return o.snapshot(), nil
}

// Balance returns the account's balance.
func (l *Ledger) Balance(ctx context.Context, account string, now time.Time, p driver.Period, allowance int64) (driver.Balance, error) {
	o, err := l.lock(ctx, account, p, allowance, now)
	if err != nil {
		return driver.Balance{}, err
	}
	defer o.done()
	return o.snapshot(), nil
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
