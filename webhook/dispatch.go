package webhook

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/internal/every"
	"github.com/tollgate-dev/tollgate/wire"
)

// DefaultThresholds are the percentages of a period's allowance whose use sends
// credits.low: each once per account and period.
var defaultThresholds = []int{80, 90, 100}

// DefaultThresholds returns the percentages of a period's allowance at which a
// Dispatcher sends credits.low by default: 80, 90 and 100.
func DefaultThresholds() []int { return slices.Clone(defaultThresholds) }

// The defaults of [DispatcherOptions].
const (
	DefaultRateLimitCooldown = 5 * time.Minute
	DefaultQueue             = 4096
	DefaultEnqueueTimeout    = 2 * time.Second
	DefaultFlushTimeout      = 2 * time.Second
)

// storeBackoff is how long, after an enqueue on a change's goroutine failed, the
// changes are queued without trying the store first.
const storeBackoff = 10 * time.Second

// DispatcherOptions are a Dispatcher's optional settings.
type DispatcherOptions struct {
	// Thresholds are the percentages (1 to 100) of a period's allowance whose use
	// sends credits.low, each once per account and period. Nil is
	// [DefaultThresholds]; empty (not nil) sends none.
	Thresholds []int
	// RateLimitCooldown is the shortest time between two rate_limit.exceeded of one
	// key: one is sent for the first refusal of each window of this length. Zero is
	// [DefaultRateLimitCooldown].
	RateLimitCooldown time.Duration
	// Plans looks up an account's plan for the data of rate_limit.exceeded (its rate
	// limit) and period.renewed, and its periods for the sweep of renewals; nil leaves
	// the rate at 0.
	Plans *billing.Plans
	// Keys is the service's key store (tollgate.Service.Stores().Keys). With it, Run
	// sweeps the keys whose expiry passes and sends key.expired (see [Dispatcher]); it
	// must list them (auth.KeyExpiries), as every key store of this module does. Nil
	// sends no key.expired.
	Keys auth.KeyStore
	// Ledger is the service's ledger (tollgate.Service.Stores().Ledger). With it, Keys
	// and Plans, Run sweeps the accounts and sends period.renewed at each renewal,
	// also for an account that makes no call (see [Dispatcher]); without it,
	// period.renewed is sent at an account's first call of a new period.
	Ledger Balances
	// SweepInterval is how often Run sweeps the keys and the accounts. Zero is
	// [DefaultSweepInterval].
	SweepInterval time.Duration
	// RenewalBatch is how many accounts one sweep of the accounts reads: a cycle
	// through every account takes as many sweeps as there are accounts over
	// RenewalBatch (shared by the instances), and a renewal is sent within one cycle.
	// Zero is [DefaultRenewalBatch].
	RenewalBatch int
	// Queue bounds the messages that calls made and that wait to be enqueued: calls
	// never wait for the store, and a message that finds the queue full is dropped
	// and counted ([DispatchStats.Dropped]); the next call past the same threshold
	// makes it again. Zero is [DefaultQueue].
	Queue int
	// EnqueueTimeout bounds each write to the store. Zero is [DefaultEnqueueTimeout].
	EnqueueTimeout time.Duration
	// FlushTimeout bounds what [Dispatcher.Run] does once its context ended: it
	// enqueues the messages still queued until FlushTimeout has passed, or until the
	// store fails one, then drops and counts those left ([DispatchStats.Dropped]).
	// Zero is [DefaultFlushTimeout].
	FlushTimeout time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Logger receives what could not be enqueued; nil is slog.Default().
	Logger *slog.Logger
}

// DispatchStats counts what a Dispatcher did since it was made.
type DispatchStats struct {
	// Enqueued counts messages stored; Duplicates those another instance (or an
	// earlier event) had stored already, which were not stored again.
	Enqueued, Duplicates int64
	// Dropped counts messages lost: the queue was full, the store failed them past
	// their retries, or they were still queued when Run's flush timed out.
	// EndpointsFull counts deliveries not made because their endpoint had MaxPending
	// pending.
	Dropped, EndpointsFull int64
	// Queued is the number of messages waiting in the queue now, or on their way
	// from it to the store.
	Queued int
}

// A Dispatcher turns the service's events into webhook messages and enqueues them in
// the outbox, for the endpoints that want them: the endpoints of the event's account
// and the operator's, enabled, whose types name the event's (or that name none).
// Subscribe it to the service's seam, and run it:
//
//	d, _ := webhook.NewDispatcher(store, nil)
//	svc.Events().Subscribe(d, d.Kinds()...)
//	go d.Run(ctx)
//
// ([New] does this, with a [Deliverer] and the [Endpoints], wired together.)
//
// Changes (keys, credits granted, plans, accounts) are translated by [Translate] and
// enqueued on the goroutine of the change, before the method that made it returns; one
// the store does not take within EnqueueTimeout is queued and retried. Calls and
// refusals make messages of their own, enqueued in the background so that a call
// never waits for the store. A change whose message was queued rather than enqueued
// is deferred ([event.Change.Defer]): where the service keeps a journal of its changes
// (package journal), it is published again later, so that an instance that dies with
// messages in its queue loses none of those of changes. Calls and refusals make
// these:
//
//   - credits.low: the first call after which the period's allowance used reaches a
//     threshold (80, 90 and 100 percent by default) sends it, once per account,
//     period and threshold, across every instance: its message ID is derived from
//     them ([DerivedID]) and the store enqueues an ID once;
//   - credits.exhausted: a call refused because the credits do not cover it sends it,
//     once per account and period for as long as the credits of the period (what is
//     left plus what was used) stay the same: credits granted, or a plan changed,
//     make the next refusal send it again;
//   - rate_limit.exceeded: a call refused by the rate limit sends it, once per key and
//     cooldown window;
//   - period.renewed, without the sweep of the accounts (below): the first call of an
//     account in a new period sends it, once per account and period, when this
//     instance saw a call of the account in an earlier period (so that an account's
//     first period, and a period whose calls all fell on an instance that was
//     restarted meanwhile, send none).
//
// Given the service's stores (DispatcherOptions.Keys, and Ledger with Plans), Run also
// sweeps them every SweepInterval ([Dispatcher.Sweep]), one instance at a time, each
// sweep going on from where the last one stopped, whichever instance made it (a claim
// in the Store, [Store.ClaimSweep]):
//
//   - key.expired: the keys whose expiry passed since the last sweep, used or not, each
//     once per key and expiry across the instances (its message ID derived from the
//     key's ID and the expiry), within a sweep interval of the expiry while an instance
//     runs; a key revoked at or before its expiry gets none;
//   - period.renewed: the accounts, a RenewalBatch at a time, cycle after cycle; an
//     account whose period began since the cycle before began (and that is neither
//     closed nor in its first period) gets it, once per account and period, within a
//     cycle of the renewal, with its balance read (and renewed) in the new period.
//     Calls then send none.
//
// Each instance also remembers what it enqueued, so that the calls after a threshold
// do not go to the store again. A Dispatcher is safe for concurrent use.
type Dispatcher struct {
	store      Store
	thresholds []int
	cooldown   time.Duration
	plans      *billing.Plans
	timeout    time.Duration
	flush      time.Duration
	now        func() time.Time
	log        *slog.Logger

	queue  chan queued
	sweeps sweeper

	// sent holds the ids this instance enqueued, periods the latest period start
	// (Unix seconds) it saw of each account; calls read them under the read lock.
	mu      sync.RWMutex
	sent    map[string]struct{}
	periods map[string]int64
	lows    map[string]lowMark // per account, the thresholds known to be enqueued
	limited map[string]int64   // per account, when this instance last queued rate_limit.exceeded (Unix ns)

	// failingUntil (Unix ns) is when the changes may try the store on their own
	// goroutine again after an enqueue of theirs failed: until then they are queued
	// at once, so that a store that does not answer holds no change.
	failingUntil atomic.Int64

	subsMu sync.Mutex
	subs   map[*subscriber]struct{}

	enqueued, duplicates, dropped, full atomic.Int64
	queued                              atomic.Int64 // messages pushed and not yet enqueued nor dropped
}

// maxRemembered bounds the ids and the accounts a Dispatcher remembers: past it, it
// forgets them all, and the store's own memory of ids keeps each event once.
const maxRemembered = 1 << 16

// NewDispatcher returns a Dispatcher that enqueues in s.
func NewDispatcher(s Store, opts *DispatcherOptions) (*Dispatcher, error) {
	if s == nil {
		return nil, errors.New("webhook: NewDispatcher needs a Store")
	}
	var o DispatcherOptions
	if opts != nil {
		o = *opts
	}
	d := &Dispatcher{store: s, thresholds: defaultThresholds, cooldown: o.RateLimitCooldown, plans: o.Plans,
		timeout: o.EnqueueTimeout, now: o.Now, log: o.Logger,
		sent: map[string]struct{}{}, periods: map[string]int64{}, lows: map[string]lowMark{}, limited: map[string]int64{}, subs: map[*subscriber]struct{}{}}
	if o.Thresholds != nil {
		d.thresholds = slices.Clone(o.Thresholds)
		slices.Sort(d.thresholds)
		d.thresholds = slices.Compact(d.thresholds)
		for _, t := range d.thresholds {
			if t < 1 || t > 100 {
				return nil, fmt.Errorf("webhook: threshold %d: give a percentage from 1 to 100", t)
			}
		}
	}
	var err error
	if d.sweeps, err = newSweeper(&o); err != nil {
		return nil, err
	}
	if d.cooldown < 0 || d.timeout < 0 || o.FlushTimeout < 0 || o.Queue < 0 {
		return nil, errors.New("webhook: DispatcherOptions: RateLimitCooldown, EnqueueTimeout, FlushTimeout and Queue must not be negative")
	}
	if d.cooldown == 0 {
		d.cooldown = DefaultRateLimitCooldown
	}
	if d.timeout == 0 {
		d.timeout = DefaultEnqueueTimeout
	}
	if d.flush = o.FlushTimeout; d.flush == 0 {
		d.flush = DefaultFlushTimeout
	}
	if o.Queue == 0 {
		o.Queue = DefaultQueue
	}
	if d.now == nil {
		d.now = time.Now
	}
	if d.log == nil {
		d.log = slog.Default()
	}
	d.queue = make(chan queued, o.Queue)
	return d, nil
}

// Kinds returns the kinds of events a Dispatcher makes messages of: calls, refusals,
// and the changes [Translate] turns into messages. Subscribe it to them.
func (d *Dispatcher) Kinds() []event.Kind {
	kinds := []event.Kind{event.CallFinished, event.CallRefused}
	for k := range translated {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	return kinds
}

// Observe makes the messages of e and enqueues them (see [Dispatcher]).
func (d *Dispatcher) Observe(ctx context.Context, e event.Event) {
	switch e := e.(type) {
	case *event.Call:
		if e.Settlement == event.Settled {
			d.renewed(e.Account, e.Plan, e.Balance)
			d.low(e)
		}
	case *event.Refusal:
		d.renewed(e.Account, e.Plan, e.Balance)
		d.refused(e)
	case *event.Change:
		m, ok := Translate(e)
		if !ok {
			return
		}
		// A message queued rather than enqueued is deferred: a journal that keeps the
		// change publishes it again later (see event.Change.Defer), and the store
		// enqueues its ID once.
		if d.now().UnixNano() < d.failingUntil.Load() {
			d.push(m)
			e.Defer()
			return
		}
		if err := d.enqueue(context.WithoutCancel(ctx), m, false); err != nil {
			d.failingUntil.Store(d.now().Add(storeBackoff).UnixNano())
			d.pushRetry(m)
			e.Defer()
		}
	}
}

// low queues credits.low for each threshold the call's balance has reached and that
// this instance has not sent for the period.
func (d *Dispatcher) low(e *event.Call) {
	b := e.Balance
	if b.Allowance <= 0 || len(d.thresholds) == 0 {
		return
	}
	used := b.AllowanceUsed()
	// reached is the number of thresholds the use reached: used/allowance >= t/100,
	// in floating point, since the allowance is at most 2^53-1.
	reached := 0
	for _, t := range d.thresholds {
		if float64(used)*100 < float64(t)*float64(b.Allowance) {
			break
		}
		reached++
	}
	if reached == 0 {
		return
	}
	start := b.PeriodStart.Unix()
	d.mu.RLock()
	mark, ok := d.lows[e.Account]
	d.mu.RUnlock()
	if ok && mark.start == start && mark.reached >= reached {
		return // the common case past a threshold: sent already, no hash to make
	}
	all := true
	for _, t := range d.thresholds[:reached] {
		id := DerivedID(CreditsLow, e.Account, stamp(b.PeriodStart), strconv.Itoa(t))
		if d.remembered(id) {
			continue
		}
		all = false
		d.queueData(e.At, CreditsLowData{Common: Common{ID: id, Account: e.Account}, Threshold: t,
			Allowance: b.Allowance, Used: used, Remaining: b.Remaining, PeriodEnd: b.PeriodEnd}, b.PeriodEnd)
	}
	if all {
		d.mu.Lock()
		if len(d.lows) >= maxRemembered {
			clear(d.lows)
		}
		d.lows[e.Account] = lowMark{start: start, reached: reached}
		d.mu.Unlock()
	}
}

// A lowMark says that the account's first reached thresholds were enqueued for the
// period that starts at start.
type lowMark struct {
	start   int64
	reached int
}

// refused queues credits.exhausted or rate_limit.exceeded for a refusal that calls
// for one.
func (d *Dispatcher) refused(e *event.Refusal) {
	switch e.Code {
	case wire.CodeCreditsExhausted:
		b := e.Balance
		if b.PeriodStart.IsZero() {
			return // the balance was not read
		}
		id := DerivedID(CreditsExhausted, e.Account, stamp(b.PeriodStart), strconv.FormatInt(b.Remaining+b.Used, 10))
		if !d.remembered(id) {
			d.queueData(e.At, CreditsExhaustedData{Common: Common{ID: id, Account: e.Account}, Remaining: b.Remaining,
				PeriodEnd: b.PeriodEnd}, b.PeriodEnd)
		}
	case wire.CodeRateLimited:
		// At most one per account and cooldown on this instance (a sliding window),
		// and one per account and window of the clock across the instances.
		at := e.At.UnixNano()
		d.mu.RLock()
		last, ok := d.limited[e.Account]
		d.mu.RUnlock()
		if ok && at-last < int64(d.cooldown) && at >= last {
			return
		}
		d.mu.Lock()
		if last, ok := d.limited[e.Account]; ok && at-last < int64(d.cooldown) && at >= last {
			d.mu.Unlock()
			return
		}
		if len(d.limited) >= maxRemembered {
			clear(d.limited)
		}
		d.limited[e.Account] = at
		d.mu.Unlock()
		window := at / int64(d.cooldown)
		id := DerivedID(RateLimitExceeded, e.Account, strconv.FormatInt(window, 10), d.cooldown.String())
		if !d.remembered(id) {
			data := RateLimitExceededData{Common: Common{ID: id, Account: e.Account}, Key: e.Key, Plan: e.Plan}
			if p, ok := d.plan(e.Plan); ok {
				data.RatePerMinute = p.RatePerMinute
			}
			d.queueData(e.At, data, time.Unix(0, (window+1)*int64(d.cooldown)))
		}
	}
}

// renewed queues period.renewed when b is of a later period than the latest this
// instance saw of the account, unless the sweep of the accounts sends it.
func (d *Dispatcher) renewed(account, plan string, b event.Balance) {
	if b.PeriodStart.IsZero() || d.sweeps.balances != nil {
		return
	}
	start := b.PeriodStart.Unix()
	d.mu.RLock()
	seen, ok := d.periods[account]
	d.mu.RUnlock()
	if ok && seen >= start {
		return
	}
	d.mu.Lock()
	seen, ok = d.periods[account]
	later := !ok || start > seen
	if later {
		if len(d.periods) >= maxRemembered {
			clear(d.periods)
		}
		d.periods[account] = start
	}
	d.mu.Unlock()
	if !ok || !later {
		// The first period this instance sees of the account, or another call of the
		// new period got here first.
		return
	}
	id := DerivedID(PeriodRenewed, account, stamp(b.PeriodStart))
	if d.remembered(id) {
		return
	}
	// What the renewal left: what is left now and what the period's calls used.
	d.queueData(b.PeriodStart, renewedData(id, account, plan, b.Allowance, b.Remaining+b.Used,
		billing.Period{Start: b.PeriodStart, End: b.PeriodEnd}), b.PeriodEnd)
}

// plan looks up a plan by name.
func (d *Dispatcher) plan(name string) (billing.Plan, bool) {
	if d.plans == nil {
		return billing.Plan{}, false
	}
	return d.plans.Lookup(name)
}

// remembered reports whether this instance enqueued the message id already.
func (d *Dispatcher) remembered(id string) bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	_, ok := d.sent[id]
	return ok
}

// forget undoes remember, for a message that is lost.
func (d *Dispatcher) forget(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.sent, id)
}

// remember notes that the message id is queued or in the store.
func (d *Dispatcher) remember(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.sent) >= maxRemembered {
		clear(d.sent)
	}
	d.sent[id] = struct{}{}
}

// queueData makes the message of data and queues it.
func (d *Dispatcher) queueData(at time.Time, data Data, keep time.Time) {
	m, err := NewMessage(at, data, keep)
	if err != nil {
		d.log.Error("tollgate: a webhook message could not be made", "type", data.Type(), "error", err)
		return
	}
	d.push(m)
}

// push queues m for Run, or drops it if the queue is full.
func (d *Dispatcher) push(m Message) { d.pushing(queued{m: m}) }

// pushRetry queues m, whose enqueue failed on the goroutine of its change: the store
// may have taken it all the same (its answer lost), so that finding it stored later
// does not make it a duplicate.
func (d *Dispatcher) pushRetry(m Message) { d.pushing(queued{m: m, retried: true}) }

// A queued message waits for Run; retried says an enqueue of it failed already.
type queued struct {
	m       Message
	retried bool
}

func (d *Dispatcher) pushing(q queued) {
	d.queued.Add(1)
	// Remembered while it waits, so that the calls that see the same cause meanwhile
	// do not queue it again; forgotten if it is lost.
	d.remember(q.m.ID)
	select {
	case d.queue <- q:
	default:
		d.queued.Add(-1)
		d.forget(q.m.ID)
		d.dropped.Add(1)
		d.log.Warn("tollgate: the webhook queue is full; a message is dropped", "type", q.m.Type, "account", q.m.Account, "id", q.m.ID)
	}
}

// enqueueAttempts is the most times Run tries to enqueue a message.
const enqueueAttempts = 5

// Run enqueues the queued messages until ctx ends, then those still queued, each
// within EnqueueTimeout and all within FlushTimeout; once that has passed, or the
// store failed one, those left are dropped, counted and logged once. A message the
// store refuses enqueueAttempts times is dropped and logged. With the sweeps on
// (DispatcherOptions.Keys), it also sweeps ([Dispatcher.Sweep]) at once and then every
// SweepInterval until ctx ends. It returns ctx's error.
func (d *Dispatcher) Run(ctx context.Context) error {
	stop := func() {}
	if d.sweeps.expiries != nil {
		stop = every.StartNow(d.sweeps.interval, every.Chore{Do: d.Sweep,
			Failed: "webhook: a sweep of the expired keys or of the renewed periods failed; the next goes on from where it stopped",
			Done:   "webhook: sent the events of the keys expired and of the periods renewed",
		}.Run(d.log))
	}
	for ctx.Err() == nil { // before the queue, which select would pick as often
		select {
		case q := <-d.queue:
			d.retry(ctx, q)
			d.queued.Add(-1)
		case <-ctx.Done():
		}
	}
	stop()
	d.flushQueue(ctx)
	return ctx.Err()
}

// flushQueue enqueues the messages queued, until none is left, FlushTimeout has
// passed or the store failed one, then drops those left.
func (d *Dispatcher) flushQueue(ctx context.Context) {
	flush, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.flush)
	defer cancel()
	var failed error
	left := 0
	for {
		select {
		case q := <-d.queue:
			switch {
			case failed != nil || flush.Err() != nil:
				left++
				d.forget(q.m.ID)
				d.dropped.Add(1)
			default:
				if err := d.enqueue(flush, q.m, q.retried); err != nil {
					failed = err
					d.lost(q.m, err)
				}
			}
			d.queued.Add(-1)
		default:
			if left > 0 {
				d.log.Error("tollgate: webhook messages still queued when the dispatcher stopped are dropped",
					"dropped", left, "error", cmp.Or(failed, flush.Err()))
			}
			return
		}
	}
}

// retry enqueues q's message, trying again with a growing pause while ctx lasts; each
// attempt runs to its end (within EnqueueTimeout) even if ctx ends meanwhile.
func (d *Dispatcher) retry(ctx context.Context, q queued) {
	pause := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := d.enqueue(context.WithoutCancel(ctx), q.m, q.retried)
		if err == nil {
			d.failingUntil.Store(0)
			return
		}
		q.retried = true
		if attempt == enqueueAttempts || ctx.Err() != nil {
			d.lost(q.m, err)
			return
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
		}
		pause *= 4
	}
}

// lost counts and logs m, which the store did not take.
func (d *Dispatcher) lost(m Message, err error) {
	d.forget(m.ID)
	d.dropped.Add(1)
	d.log.Error("tollgate: a webhook message could not be enqueued; it is dropped", "type", m.Type, "account", m.Account, "id", m.ID, "error", err)
}

// enqueue stores m for the endpoints that want it, and tells the subscribers if it
// was new, or if retried (an earlier attempt of this Dispatcher failed, and may have
// stored it: its subscribers are then told of it, maybe as another instance's are).
func (d *Dispatcher) enqueue(ctx context.Context, m Message, retried bool) error {
	_, err := d.enqueueFresh(ctx, m, retried)
	return err
}

// enqueueFresh is enqueue, and reports whether the store took m anew.
func (d *Dispatcher) enqueueFresh(ctx context.Context, m Message, retried bool) (fresh bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	targets, err := d.targets(ctx, m)
	if err != nil {
		return false, err
	}
	fresh, dropped, err := d.store.Enqueue(ctx, m, targets, d.now())
	if err != nil {
		return false, err
	}
	d.remember(m.ID)
	if !fresh && !retried {
		d.duplicates.Add(1)
		return false, nil
	}
	d.enqueued.Add(1)
	if len(dropped) > 0 {
		d.full.Add(int64(len(dropped)))
		d.log.Warn("tollgate: webhook endpoints hold the most pending deliveries; a message is not delivered to them",
			"type", m.Type, "id", m.ID, "endpoints", dropped)
	}
	d.tell(ctx, m)
	return fresh, nil
}

// targets returns the ids of the endpoints that want m: the account's and the
// operator's, enabled, that take its type.
func (d *Dispatcher) targets(ctx context.Context, m Message) ([]string, error) {
	owners := []string{""}
	if m.Account != "" {
		owners = append(owners, m.Account)
	}
	var ids []string
	for _, owner := range owners {
		eps, err := d.store.Endpoints(ctx, owner)
		if err != nil {
			return nil, err
		}
		for _, e := range eps {
			if e.Disabled.IsZero() && (len(e.Types) == 0 || slices.Contains(e.Types, m.Type)) {
				ids = append(ids, e.ID)
			}
		}
	}
	return ids, nil
}

// Stats returns what the Dispatcher did so far.
func (d *Dispatcher) Stats() DispatchStats {
	return DispatchStats{Enqueued: d.enqueued.Load(), Duplicates: d.duplicates.Load(), Dropped: d.dropped.Load(),
		EndpointsFull: d.full.Load(), Queued: int(d.queued.Load())}
}

type subscriber struct {
	fn func(context.Context, Message)
}

// Subscribe has fn told of each message this Dispatcher enqueues anew, whether or not
// an endpoint wants it, until cancel is called: the host's own webhook events, in Go.
// A message that another instance enqueued first (a threshold it saw first) is told
// there, not here, so that each is told once across the instances. fn runs on the
// goroutine that enqueued it, after the store took it, and must return promptly; a
// panic is recovered and logged.
func (d *Dispatcher) Subscribe(fn func(ctx context.Context, m Message)) (cancel func()) {
	s := &subscriber{fn: fn}
	d.subsMu.Lock()
	d.subs[s] = struct{}{}
	d.subsMu.Unlock()
	return func() {
		d.subsMu.Lock()
		delete(d.subs, s)
		d.subsMu.Unlock()
	}
}

// tell calls each subscriber with m.
func (d *Dispatcher) tell(ctx context.Context, m Message) {
	d.subsMu.Lock()
	subs := make([]*subscriber, 0, len(d.subs))
	for s := range d.subs {
		subs = append(subs, s)
	}
	d.subsMu.Unlock()
	for _, s := range subs {
		func() {
			defer func() {
				if v := recover(); v != nil {
					d.log.Error("tollgate: a webhook subscriber panicked", "type", m.Type, "id", m.ID, "panic", fmt.Sprint(v))
				}
			}()
			s.fn(ctx, m)
		}()
	}
}

// stamp names a period's start in a derived id.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
