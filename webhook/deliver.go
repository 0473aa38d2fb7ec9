package webhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/tollgate-dev/tollgate/brand"
	"github.com/tollgate-dev/tollgate/internal/every"
	"github.com/tollgate-dev/tollgate/internal/safefetch"
	"github.com/tollgate-dev/tollgate/store"
)

// The defaults of [DelivererOptions].
const (
	DefaultTimeout     = 15 * time.Second
	DefaultLease       = time.Minute
	DefaultConcurrency = 8
	DefaultPoll        = time.Second
	DefaultRetention   = 30 * 24 * time.Hour
	// DefaultPruneInterval is the longest default interval of the prune.
	DefaultPruneInterval = time.Hour
)

// LeaseMargin is how much longer than [DelivererOptions.Timeout] a lease must be: the
// time an attempt may take besides the request (reading the endpoint, recording the
// outcome).
const LeaseMargin = 10 * time.Second

// MaxConcurrency is the most attempts a [Deliverer] may make at once.
const MaxConcurrency = 256

// MaxAnswer is the most of an answer's body a [Deliverer] reads, in bytes: the start
// of a failure's answer is kept in its [Attempt.Error]; the rest is never read.
const MaxAnswer = 4 << 10

// ErrRunning is returned by [Deliverer.Run] while the Deliverer runs already.
var ErrRunning = errors.New("webhook: the deliverer is running already: run it once, or make another for the same store")

// DelivererOptions configures a [Deliverer]. The zero value, like a nil
// *DelivererOptions, is the default.
type DelivererOptions struct {
	// Schedule is when a delivery's attempts are made. The default is
	// [DefaultSchedule]; see [Schedule.Check] for what is allowed.
	Schedule Schedule
	// Jitter moves each wait of the schedule at random by up to this fraction of it,
	// up or down, so that deliveries that failed together are not retried together.
	// The default is [DefaultJitter] (20%); a negative value turns it off; 1 or more
	// is not allowed.
	Jitter float64
	// Rand returns a random number in [0, 1) for the jitter; it is called from
	// several goroutines at once. The default is math/rand/v2's Float64. Tests give
	// their own.
	Rand func() float64
	// MaxRetryAfter is the longest a receiver's Retry-After may put the next attempt
	// off (see [Deliverer]). The default is [DefaultMaxRetryAfter] (24 hours); a
	// negative value ignores Retry-After.
	MaxRetryAfter time.Duration
	// Timeout bounds an attempt: connecting, sending, and reading the answer. The
	// default is [DefaultTimeout] (15 seconds).
	Timeout time.Duration
	// Lease is how long a claim holds a delivery: another deliverer may claim it once
	// the lease ended without an outcome (its deliverer stopped or died). It must be
	// at least Timeout plus [LeaseMargin]. The default is [DefaultLease] (a minute),
	// or Timeout plus LeaseMargin if that is longer.
	Lease time.Duration
	// Concurrency is the most attempts made at once, each on a goroutine of its own.
	// The default is [DefaultConcurrency] (8); at most [MaxConcurrency].
	Concurrency int
	// EndpointConcurrency is the most attempts made at once at one endpoint, and
	// AccountConcurrency the most at the endpoints of one account (the operator's
	// endpoints are one account), so that an endpoint with a backlog, or one that is
	// slow, never holds every attempt: the deliveries claimed over these shares are
	// given back without an attempt (see [Deliverer], "Fair shares"). The defaults
	// are [DefaultEndpointConcurrency] (2) and [DefaultAccountConcurrency] (4); each is
	// at most [MaxConcurrency], and neither takes more than Concurrency, nor
	// EndpointConcurrency more than AccountConcurrency.
	EndpointConcurrency int
	AccountConcurrency  int
	// HostConcurrency is the most attempts made at once at the endpoints on one host
	// (the host and port of their URLs), whoever's they are, so that a receiving host
	// that many accounts' endpoints share and that stops answering holds this share of
	// the attempts, not all of them, though each of its endpoints fails on its own.
	// The deliveries claimed over it are given back like those over the other shares.
	// The default is [DefaultHostConcurrency] (4); at most [MaxConcurrency], it takes
	// no more than Concurrency, and EndpointConcurrency no more than it.
	HostConcurrency int
	// Poll is how often the deliverer asks the store for deliveries due while it
	// knows of none ([Deliverer.Wake] asks at once). The default is [DefaultPoll]
	// (a second): with it, a message's first attempt is made within about a second
	// of its enqueueing, and a retry about a second after it is due.
	Poll time.Duration
	// Retention is how long a delivery delivered or failed is kept after its last
	// attempt, for its endpoint's owner to look at and resend: [Deliverer.Prune]
	// deletes the older ones. The default is [DefaultRetention] (30 days); a
	// negative value keeps them all.
	Retention time.Duration
	// PruneInterval is how often [Deliverer.Run] prunes, with a Retention: once when
	// it starts, then at this interval. The default is a tenth of Retention, at least a
	// second and at most [DefaultPruneInterval]; a negative value turns it off (call
	// Prune yourself then). Any number of deliverers may prune the same store.
	PruneInterval time.Duration
	// AllowPrivate lets deliveries reach loopback, private, link-local and every
	// other address that is not a public internet address. It is for local
	// development and tests only (the example server's -allow-private-fetch sets it):
	// where endpoints' owners are not trusted, it lets them reach the service's own
	// network. Default false.
	AllowPrivate bool
	// Resolve returns the addresses of a host name, for the check of every
	// connection. The default is the system's resolver. Tests give their own.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// Brand names the service in the user-agent of the attempts: its Command, as
	// "tollgate-webhooks/1". The default is [brand.Default].
	Brand brand.Brand
	// Now returns the current time: of the attempts, their schedule, the claims and
	// the prune. The default is time.Now.
	Now func() time.Time
	// Logger receives what goes wrong in the background: a store that fails, an
	// endpoint disabled. The default is slog.Default().
	Logger *slog.Logger
	// OnDisabled, if set, is told of every endpoint the deliverer disables, once the
	// endpoint is stored disabled (see [Deliverer]), on the deliverer's goroutine,
	// with the context Run was given: it must return promptly. A panic in it is
	// logged, not raised. Of several deliverers that disable the same endpoint at
	// once, the one whose change is stored tells.
	OnDisabled func(ctx context.Context, e DisabledEndpoint)
}

// Check reports what is wrong with o, or nil; a nil o is the default, which is valid.
// [NewDeliverer] returns this error.
func (o *DelivererOptions) Check() error {
	if o == nil {
		return nil
	}
	if err := o.Schedule.Check(); err != nil {
		return err
	}
	if o.Jitter >= 1 {
		return errJitter
	}
	if o.Timeout < 0 {
		return fmt.Errorf("webhook: the timeout %s is negative; give a positive one, or 0 for the default (%s)", o.Timeout, DefaultTimeout)
	}
	timeout := cmp0(o.Timeout, DefaultTimeout)
	if o.Lease != 0 && o.Lease < timeout+LeaseMargin {
		return fmt.Errorf("webhook: the lease %s is shorter than the timeout (%s) and %s: another deliverer could claim a delivery while its attempt runs; give a longer lease", o.Lease, timeout, LeaseMargin)
	}
	if o.Concurrency < 0 || o.Concurrency > MaxConcurrency {
		return fmt.Errorf("webhook: the concurrency %d is out of range: give 1 to %d, or 0 for the default (%d)", o.Concurrency, MaxConcurrency, DefaultConcurrency)
	}
	if o.EndpointConcurrency < 0 || o.EndpointConcurrency > MaxConcurrency {
		return fmt.Errorf("webhook: the endpoint concurrency %d is out of range: give 1 to %d, or 0 for the default (%d)", o.EndpointConcurrency, MaxConcurrency, DefaultEndpointConcurrency)
	}
	if o.AccountConcurrency < 0 || o.AccountConcurrency > MaxConcurrency {
		return fmt.Errorf("webhook: the account concurrency %d is out of range: give 1 to %d, or 0 for the default (%d)", o.AccountConcurrency, MaxConcurrency, DefaultAccountConcurrency)
	}
	if o.HostConcurrency < 0 || o.HostConcurrency > MaxConcurrency {
		return fmt.Errorf("webhook: the host concurrency %d is out of range: give 1 to %d, or 0 for the default (%d)", o.HostConcurrency, MaxConcurrency, DefaultHostConcurrency)
	}
	if o.Poll < 0 {
		return fmt.Errorf("webhook: the poll interval %s is negative; give a positive one, or 0 for the default (%s)", o.Poll, DefaultPoll)
	}
	return o.Brand.Check()
}

// cmp0 returns v, or def if v is zero.
func cmp0[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// A DisableCause is why a deliverer disabled an endpoint.
type DisableCause uint8

// The causes of disabling.
const (
	// DisabledGone: the endpoint answered an attempt with 410 Gone.
	DisabledGone DisableCause = iota + 1
	// DisabledFailing: a delivery failed every attempt of the schedule, and no
	// attempt to the endpoint succeeded since that delivery's message was made.
	DisabledFailing
)

// String returns the cause's name: "gone" or "failing".
func (c DisableCause) String() string {
	switch c {
	case DisabledGone:
		return "gone"
	case DisabledFailing:
		return "failing"
	}
	return fmt.Sprintf("DisableCause(%d)", uint8(c))
}

// A DisabledEndpoint tells that a deliverer disabled an endpoint (see
// [DelivererOptions.OnDisabled]): what the service tells the endpoint's owner as an
// [EndpointDisabled] event ([EndpointDisabledData]). It holds no secret.
type DisabledEndpoint struct {
	// Endpoint, Account and URL are the endpoint's.
	Endpoint, Account, URL string
	// At and Reason are the endpoint's Disabled and DisabledReason, as stored.
	At     time.Time
	Reason string
	Cause  DisableCause
	// Message is the ID of the message whose delivery's attempt led to it, and Last
	// that attempt.
	Message string
	Last    Attempt
}

// DelivererStats counts what a [Deliverer] did since it was made.
type DelivererStats struct {
	// Attempted counts the attempts made: requests sent, or refused before they were
	// sent (a destination the address policy refuses, a secret that cannot sign).
	Attempted int64
	// Delivered, Retried and Failed count the outcomes recorded: a delivery
	// delivered, pending again for a retry, given up.
	Delivered, Retried, Failed int64
	// Skipped counts the deliveries given up without an attempt, their endpoint
	// disabled; they are counted in Failed too.
	Skipped int64
	// Postponed counts the deliveries given back without an attempt, pending: their
	// endpoint held back after it did not answer, or at its share of the attempts
	// (see [Deliverer]); they keep their attempts. Deferred counts those of them
	// given back at their endpoint's, their account's or their host's share.
	Postponed, Deferred int64
	// ClaimLost counts the outcomes not recorded because the claim no longer held the
	// delivery: another deliverer claimed it after the lease, or it was resent.
	ClaimLost int64
	// Disabled counts the endpoints this deliverer disabled.
	Disabled int64
	// StoreErrors counts the store's failures: to claim, to read an endpoint, to
	// record an outcome.
	StoreErrors int64
}

// A Deliverer delivers the outbox of a [Store]: it claims the deliveries that are
// due, makes one attempt at each, in parallel, and records the outcome. Any number of
// deliverers, on any number of instances, may deliver the same store: the store's
// claim makes sure that one attempt at a delivery is made at a time, and a delivery
// whose deliverer stopped or died is claimed again once its lease ends. A message is
// delivered at least once: a receiver may get it again (the same webhook-id) when an
// outcome could not be recorded.
//
// # An attempt
//
// An attempt POSTs the message's body to the endpoint's URL, with content-type
// application/json, the Standard Webhooks headers webhook-id (the message's ID, the
// same on every attempt), webhook-timestamp (the attempt's time, in Unix seconds) and
// webhook-signature (over that timestamp: one signature with the endpoint's secret and,
// while a rotation's PreviousUntil has not passed, one with its previous secret), and a
// user-agent naming the service ("tollgate-webhooks/1"). It succeeds on a 2xx answer.
// Everything else fails it: another status, a redirect (3xx: redirects are never
// followed), no answer within [DelivererOptions.Timeout], a connection that fails. Of
// an answer, at most [MaxAnswer] bytes are read; a failure's [Attempt.Error] says what
// happened and holds the start of the answer's body, cut to [MaxError].
//
// The URL must be an absolute http or https URL without credentials, on a host whose
// every address is a public internet address: the address is checked when each
// connection is dialed, after the name is resolved, so a name that resolves to a
// public address when it is checked and to an internal one when it is used reaches
// nothing (see [DelivererOptions.AllowPrivate]). A refused destination fails the
// attempt with one message, whatever the reason, so that an endpoint's owner cannot
// map the service's network by the answers.
//
// # The schedule
//
// The first attempt is made as soon as the message is enqueued (within
// [DelivererOptions.Poll], at once after [Deliverer.Wake]). After the n-th attempt
// failed, the next is due after the schedule's n-th wait ([Schedule.Wait]) moved at
// random by the jitter. A 429 or 503 answer with a Retry-After header (seconds, or an
// HTTP date) puts the next attempt off to when it asks, if that is later than the
// schedule's, and at most [DelivererOptions.MaxRetryAfter] after the attempt: a
// Retry-After never brings an attempt forward, nor adds one. Once the schedule's last
// attempt failed, the delivery is Failed. A delivery resent after its schedule ran out
// gets one more attempt.
//
// An endpoint that did not answer an attempt (it timed out, or the connection failed)
// is held back by the same deliverer for 30 seconds, then given one attempt at a time
// until one is answered: the deliveries to it claimed meanwhile are given back
// without an attempt (an [Outcome] without one), pending, due when it may be tried
// again: the cooldown's end, or, while an attempt is at it after the cooldown, 30
// seconds later, each behind the one given back before it by 30 seconds (see "Fair
// shares"). They keep their attempts and last attempt: a receiver down for a while
// delays its deliveries, and each spends its schedule's attempts only as it is tried.
// So an endpoint that never answers holds one of the deliverer's attempts, not all of
// them. The hold is the endpoint's (its ID at its URL's host and port), not the
// host's: on a host that receives for many accounts (a hooks platform, each its own
// path), one account's endpoint that does not answer holds back no other endpoint,
// and an endpoint moved to another host starts afresh; a host that is down for all of
// them holds its host's share of the attempts at most (see "Fair shares"). A
// deliverer remembers 10,000 endpoints held back at most: past that, it forgets those
// whose cooldown ended, then those whose attempt failed within a second, never those
// whose attempt held its place longer (a timeout), which its places cannot make more
// of within a cooldown than it keeps: endpoints made to fail in any number cannot
// push out the holds that save its places.
//
// # Fair shares
//
// The store's claim takes the deliveries due, the earliest first, whoever they are
// for; the deliverer shares its attempts. It makes at most
// [DelivererOptions.EndpointConcurrency] (2) attempts at once at one endpoint, at
// most [DelivererOptions.AccountConcurrency] (4) at the endpoints of one account (the
// operator's endpoints are one account), and at most
// [DelivererOptions.HostConcurrency] (4) at the endpoints on one host (its name and
// port), whoever's they are, of which one account takes all but one: of its
// Concurrency (8). So an endpoint with a backlog (thousands pending after an outage),
// or one whose every attempt takes the whole timeout, or an account with many of
// them, or a host that many accounts' endpoints share and that stops answering,
// holds at most its share, and the others have the rest; and one account never holds
// every place at a host that other accounts' endpoints share. A delivery claimed over
// a share is given back without an attempt (an [Outcome] without one: it keeps its
// attempts), pending, due when its endpoint (or account, or host) may have a place for
// it: after an attempt's expected length (the last attempt's at that endpoint,
// account or host; twice as long as the oldest in flight has run; at least 25 ms, at
// most the timeout), and behind the deliveries given back to it before, by that
// length shared among its places (for an endpoint, behind its account's too), moved
// later by the jitter, and at most [MaxPark] (5 minutes) ahead. Those that would be
// further are spread over the whole five minutes, each at its own place in them (the
// same for every deliverer, from a hash of its endpoint and message), not bunched at
// their end. The deliverer claims again when a delivery it gave back comes due.
//
// So a delivery given back is due after every delivery due when it was given back:
// the claims that follow take the other endpoints' deliveries first, and an
// endpoint's backlog is given back once, in one pass of the claims, then comes due at
// the pace of its endpoint's attempts, what is beyond MaxPark a little at a time all
// along, among the fresh deliveries, not all at once. It costs the store one write per
// delivery a claim returns, its outcome or its give-back, never more; and a delivery
// given back is given back again only when it comes due again: a few times while the
// pace of a new endpoint is learnt, then at most about once per MaxPark (at its
// place, a MaxPark later), however long the backlog. These shares are each deliverer's own: across several deliverers, an
// endpoint may have EndpointConcurrency attempts at once from each, and each gives
// its over-share deliveries back behind the others', in the store all deliverers
// claim from.
//
// # Disabling an endpoint
//
// A deliverer disables an endpoint (it sets Disabled and DisabledReason, and tells
// [DelivererOptions.OnDisabled]):
//   - at once, when the endpoint answers 410 Gone: the delivery is Failed;
//   - when a delivery failed its schedule's last attempt and no attempt to the
//     endpoint succeeded since that delivery's message was made: the endpoint's
//     [Endpoint.LastDelivered], read once the failure is recorded, is before the
//     message's At. So the endpoint failed everything for at least the schedule's
//     length.
//
// A delivery whose endpoint is disabled is recorded Failed without an attempt when it
// is claimed: its attempts and last attempt stay those made, and the endpoint's
// DisabledReason says why no more were. (A deleted endpoint's deliveries are deleted
// with it.)
type Deliverer struct {
	store         Store
	schedule      Schedule
	jitter        float64
	rand          func() float64
	maxRetryAfter time.Duration
	timeout       time.Duration
	lease         time.Duration
	concurrency   int
	perEndpoint   int
	perAccount    int
	perHost       int
	poll          time.Duration
	retention     time.Duration
	pruneInterval time.Duration
	now           func() time.Time
	log           *slog.Logger
	onDisabled    func(context.Context, DisabledEndpoint)
	userAgent     string
	client        *http.Client
	hosts         *breakers
	lanes         *lanes

	wake    chan struct{}
	running atomic.Bool
	stats   struct {
		attempted, delivered, retried, failed, skipped, postponed, deferred, claimLost, disabled, storeErrors atomic.Int64
	}
}

// NewDeliverer returns a Deliverer of store's outbox, configured by opts, which may be
// nil, or the error [DelivererOptions.Check] finds in them. It delivers nothing until
// [Deliverer.Run].
func NewDeliverer(store Store, opts *DelivererOptions) (*Deliverer, error) {
	if store == nil {
		return nil, errors.New("webhook: NewDeliverer needs a Store")
	}
	if err := opts.Check(); err != nil {
		return nil, err
	}
	var o DelivererOptions
	if opts != nil {
		o = *opts
	}
	d := &Deliverer{
		store:         store,
		schedule:      o.Schedule,
		jitter:        cmp0(o.Jitter, DefaultJitter),
		rand:          o.Rand,
		maxRetryAfter: cmp0(o.MaxRetryAfter, DefaultMaxRetryAfter),
		timeout:       cmp0(o.Timeout, DefaultTimeout),
		concurrency:   cmp0(o.Concurrency, DefaultConcurrency),
		poll:          cmp0(o.Poll, DefaultPoll),
		retention:     cmp0(o.Retention, DefaultRetention),
		now:           o.Now,
		log:           o.Logger,
		onDisabled:    o.OnDisabled,
		userAgent:     o.Brand.OrDefault().Command + "-webhooks/1",
		wake:          make(chan struct{}, 1),
	}
	if d.schedule == nil {
		d.schedule = DefaultSchedule()
	} else {
		d.schedule = append(Schedule(nil), d.schedule...)
	}
	if d.rand == nil {
		d.rand = rand.Float64
	}
	d.lease = o.Lease
	if d.lease == 0 {
		d.lease = max(DefaultLease, d.timeout+LeaseMargin)
	}
	if d.now == nil {
		d.now = time.Now
	}
	if d.log == nil {
		d.log = slog.Default()
	}
	if d.retention > 0 {
		d.pruneInterval = o.PruneInterval
		if d.pruneInterval == 0 {
			d.pruneInterval = every.TenthOf(d.retention, DefaultPruneInterval)
		}
	}
	d.perAccount = min(cmp0(o.AccountConcurrency, DefaultAccountConcurrency), d.concurrency)
	d.perHost = min(cmp0(o.HostConcurrency, DefaultHostConcurrency), d.concurrency)
	d.perEndpoint = min(cmp0(o.EndpointConcurrency, DefaultEndpointConcurrency), d.perAccount, d.perHost)
	d.hosts = newBreakers(hostCooldown)
	d.lanes = newLanes(d.timeout, d.perEndpoint, d.perAccount, d.perHost)
	fetcher := safefetch.New(&safefetch.Options{
		AllowPrivate: o.AllowPrivate,
		MaxRedirects: -1,
		Timeout:      d.timeout,
		UserAgent:    d.userAgent,
		Logger:       d.log,
		Resolve:      o.Resolve,
	})
	d.client = &http.Client{
		Transport: fetcher.Transport(),
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // a redirect is the answer, never followed
		},
	}
	return d, nil
}

// Stats returns what the deliverer did since it was made.
func (d *Deliverer) Stats() DelivererStats {
	return DelivererStats{
		Attempted:   d.stats.attempted.Load(),
		Delivered:   d.stats.delivered.Load(),
		Retried:     d.stats.retried.Load(),
		Failed:      d.stats.failed.Load(),
		Skipped:     d.stats.skipped.Load(),
		Postponed:   d.stats.postponed.Load(),
		Deferred:    d.stats.deferred.Load(),
		ClaimLost:   d.stats.claimLost.Load(),
		Disabled:    d.stats.disabled.Load(),
		StoreErrors: d.stats.storeErrors.Load(),
	}
}

// Wake tells the deliverer that deliveries may be due now (a message was just
// enqueued), so that it claims them without waiting for its next poll. It never
// blocks.
func (d *Deliverer) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Prune deletes the deliveries delivered or failed whose last attempt is older than
// [DelivererOptions.Retention], and the messages left without deliveries whose Keep has
// passed, and returns how many deliveries it deleted. It does nothing without a
// retention. Its error is the store's.
func (d *Deliverer) Prune(ctx context.Context) (int64, error) {
	if d.retention < 0 {
		return 0, nil
	}
	n, err := d.store.Prune(ctx, d.now().Add(-d.retention))
	if err != nil {
		return n, fmt.Errorf("webhook: prune the deliveries: %w", err)
	}
	return n, nil
}

// maxClaimBackoff is the longest wait after the store failed a claim.
const maxClaimBackoff = 30 * time.Second

// Run delivers until ctx ends, on goroutines of its own, [DelivererOptions.Concurrency]
// attempts at a time, within the shares of the endpoints, accounts and hosts; it prunes too
// (see [DelivererOptions.PruneInterval]). It returns nil once ctx ended and the
// attempts in flight were abandoned: they are not recorded, and another deliverer (or
// this one, run again) retries them when their lease ends.
// A store that fails is logged and asked again, less and less often, up to every 30
// seconds. It returns ErrRunning at once if the Deliverer runs already.
func (d *Deliverer) Run(ctx context.Context) error {
	if !d.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer d.running.Store(false)
	if d.retention > 0 && d.pruneInterval > 0 {
		stop := every.StartNow(d.pruneInterval, every.Chore{Do: d.Prune,
			Failed: "webhook: cannot prune the deliveries; the next prune tries again",
			Done:   "webhook: pruned the deliveries older than the retention",
			Attrs:  []any{"retention", d.retention.String()},
		}.Run(d.log))
		defer stop()
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{}, d.concurrency)
	running := 0
	defer func() {
		cancel()
		for ; running > 0; running-- {
			<-done
		}
	}()
	backoff := d.poll
	var lastClaim time.Time // when the last claim the store answered was made
	for ctx.Err() == nil {
		free := d.concurrency - running
		// saturated: the deliverer has as much as it can do, and should claim again as
		// soon as an attempt ends.
		saturated := free == 0
		failing := false
		wait := d.poll
		if free > 0 {
			claimed := d.now()
			ds, err := d.store.Claim(ctx, claimed, d.lease, free)
			switch {
			case err != nil && ctx.Err() != nil:
				return nil
			case err != nil:
				d.stats.storeErrors.Add(1)
				d.log.Warn("webhook: cannot claim the deliveries due; trying again", "error", err, "in", backoff.String())
				wait, backoff = backoff, min(backoff*2, maxClaimBackoff)
				failing = true
			default:
				backoff, lastClaim = d.poll, claimed
				for _, dl := range ds {
					running++
					go func() {
						defer func() { done <- struct{}{} }()
						d.deliver(ctx, dl, claimed)
					}()
				}
				saturated = len(ds) == free
			}
		}
		// The deliveries given back come due at the times they were given: claim them
		// then, rather than at the next poll, when there is room for them.
		deadline := d.now().Add(wait)
		sooner := func() bool {
			next, ok := d.lanes.next(lastClaim)
			if saturated || failing || !ok || !next.Before(deadline) {
				return false
			}
			wait, deadline = max(next.Sub(d.now()), 0), next
			return true
		}
		sooner()
		timer := time.NewTimer(wait)
	waiting:
		for {
			select {
			case <-ctx.Done():
				break waiting
			case <-timer.C:
				break waiting
			case <-d.wake:
				break waiting
			case <-done:
				running--
				if saturated {
					break waiting
				}
				if sooner() {
					timer.Reset(wait)
				}
			}
		}
		timer.Stop()
	}
	return nil
}

// deliver makes one attempt at dl, claimed at claimed, and records its outcome, or
// gives dl back without one: its endpoint, its account or its host has its share of
// attempts in flight, or its endpoint is held back. It records nothing once ctx has
// ended.
func (d *Deliverer) deliver(ctx context.Context, dl Delivery, claimed time.Time) {
	defer func() {
		if r := recover(); r != nil {
			d.log.Error("webhook: the delivery of a message panicked; it is retried when its lease ends",
				"endpoint", dl.Endpoint, "message", dl.Message.ID, "panic", r)
		}
	}()
	epLane := endpointLane(dl.Endpoint)
	entered := d.now()
	if !d.lanes.enter(epLane, entered) {
		d.putOff(ctx, dl, epLane, time.Time{}, 0)
		return
	}
	took := time.Duration(-1) // no request made, until one is
	defer func() { d.lanes.leave(epLane, "", entered, took) }()
	ep, err := d.store.Endpoint(ctx, dl.Endpoint)
	switch {
	case ctx.Err() != nil:
		return
	case errors.Is(err, store.ErrNotFound):
		// Deleted: its deliveries went with it, and the store answers so; one left
		// behind is given up.
		d.skip(ctx, dl)
		return
	case err != nil:
		d.stats.storeErrors.Add(1)
		d.log.Warn("webhook: cannot read a delivery's endpoint; the delivery is retried when its lease ends",
			"endpoint", dl.Endpoint, "message", dl.Message.ID, "error", err)
		return
	case !ep.Disabled.IsZero():
		d.skip(ctx, dl)
		return
	}
	acLane, hLane := accountLane(ep.Account), hostLane(ep.URL)
	d.lanes.owns(epLane, acLane, hLane)
	acEntered := d.now()
	if !d.lanes.enter(acLane, acEntered) {
		d.putOff(ctx, dl, acLane, time.Time{}, 0)
		return
	}
	defer func() { d.lanes.leave(acLane, "", acEntered, took) }()
	if hLane != "" { // a URL without a host fails without a request
		hEntered := d.now()
		if full := d.lanes.enterHost(hLane, acLane, hEntered); full != "" {
			d.putOff(ctx, dl, full, time.Time{}, 0)
			return
		}
		defer func() { d.lanes.leave(hLane, acLane, hEntered, took) }()
	}
	// The attempt must end before the lease does, or another deliverer could make one
	// at the same time: a claim whose endpoint took long to read is left to its lease.
	if d.now().Add(d.timeout).After(claimed.Add(d.lease)) {
		d.log.Warn("webhook: the store took too long to read a delivery's endpoint; the delivery is retried when its lease ends",
			"endpoint", dl.Endpoint, "message", dl.Message.ID)
		return
	}
	res := d.attempt(ctx, ep, dl.Message)
	if ctx.Err() != nil {
		return
	}
	if !res.held.IsZero() {
		// One attempt at a time at an endpoint held back, a cooldown apart.
		d.putOff(ctx, dl, epLane, res.held, hostCooldown)
		return
	}
	took = max(d.now().Sub(res.at), 0)
	d.stats.attempted.Add(1)
	o, exhausted := d.outcome(dl, res)
	if !d.record(ctx, o) {
		return
	}
	switch {
	case res.status == http.StatusGone:
		d.disable(ctx, ep, DisabledGone, "the endpoint answered 410 Gone, which asks for no more deliveries; enable it again to resume them", o, time.Time{})
	case exhausted:
		d.disableIfFailing(ctx, ep, dl.Message, o)
	}
}

// putOff gives dl back without an attempt, pending, due when the lane of key may take
// it, not before atLeast, its deliveries parked step apart (0: at the lane's pace; see
// lanes.park). A zero atLeast tells that the lane has its share in flight: dl is
// counted as deferred.
func (d *Deliverer) putOff(ctx context.Context, dl Delivery, key string, atLeast time.Time, step time.Duration) {
	due := d.lanes.park(key, d.now(), atLeast, step, d.jitter, d.rand(), parkPhase(dl.Endpoint, dl.Message.ID))
	if d.record(ctx, Outcome{Endpoint: dl.Endpoint, Message: dl.Message.ID, Claim: dl.Claim, State: Pending, Due: due}) && atLeast.IsZero() {
		d.stats.deferred.Add(1)
	}
}

// skip gives dl up without an attempt: Failed, its attempts and last attempt kept.
func (d *Deliverer) skip(ctx context.Context, dl Delivery) {
	d.record(ctx, Outcome{Endpoint: dl.Endpoint, Message: dl.Message.ID, Claim: dl.Claim, State: Failed})
}

// outcome returns the outcome of an attempt at dl that res tells, and whether the
// attempt was the schedule's last and failed.
func (d *Deliverer) outcome(dl Delivery, res result) (o Outcome, exhausted bool) {
	o = Outcome{Endpoint: dl.Endpoint, Message: dl.Message.ID, Claim: dl.Claim,
		Attempt: Attempt{At: res.at, Status: res.status, Error: cutError(res.err)}}
	switch {
	case res.err == "":
		o.State = Delivered
		return o, false
	case res.status == http.StatusGone:
		o.State = Failed
		return o, false
	}
	wait, ok := d.schedule.Wait(dl.Attempts + 1)
	if !ok {
		o.State = Failed
		return o, true
	}
	wait = jittered(wait, d.jitter, d.rand())
	wait = nextWait(wait, res.status, res.retryAfter, res.at, d.maxRetryAfter)
	o.State, o.Due = Pending, res.at.Add(wait)
	return o, false
}

// record records o and counts it; it returns whether it was recorded. A claim lost
// or a delivery deleted meanwhile is not an error: another deliverer holds the
// delivery, or there is nothing left to deliver.
func (d *Deliverer) record(ctx context.Context, o Outcome) bool {
	err := d.store.Record(ctx, o)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return false
	case errors.Is(err, ErrClaimLost):
		d.stats.claimLost.Add(1)
		return false
	case errors.Is(err, store.ErrNotFound):
		return false
	default:
		d.stats.storeErrors.Add(1)
		d.log.Warn("webhook: cannot record what became of a delivery; it is claimed again when its lease ends",
			"endpoint", o.Endpoint, "message", o.Message, "state", o.State.String(), "attempted", o.Attempted(), "error", err)
		return false
	}
	switch {
	case o.State == Delivered:
		d.stats.delivered.Add(1)
	case o.State == Pending && o.Attempted():
		d.stats.retried.Add(1)
	case o.State == Pending:
		d.stats.postponed.Add(1)
	case o.State == Failed:
		d.stats.failed.Add(1)
		if !o.Attempted() {
			d.stats.skipped.Add(1)
		}
	}
	return true
}
