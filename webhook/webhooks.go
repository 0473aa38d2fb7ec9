package webhook

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-dev/tollgate/brand"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/internal/every"
	"github.com/tollgate-dev/tollgate/store"
)

// The defaults of [Options].
const (
	// DefaultCleanupTimeout bounds the deletion of a deleted account's endpoints.
	DefaultCleanupTimeout = 5 * time.Second
	// cleanupRetry is how often Run tries again to delete the endpoints of deleted
	// accounts that could not be deleted when their accounts were: a chore that does
	// nothing while none is left.
	cleanupRetry = 30 * time.Second
	// maxCleanups bounds the accounts whose endpoints wait to be deleted again.
	maxCleanups = 1024
)

// Options configures [New]. The zero value, like a nil *Options, is the default.
//
// The settings the parts share are given once, here; those of one part are in its own
// options (Dispatcher, Deliverer, Endpoints), which New copies and completes: a part's
// Now, Logger and Brand, when unset, are the ones given here, and AllowPrivate set here
// sets the part's too.
type Options struct {
	// AllowPrivate lets endpoints have URLs on loopback, private, link-local and
	// other addresses that are not public internet addresses, and lets deliveries
	// reach them: it sets both [EndpointsOptions.AllowPrivate] (the check of a URL
	// when an endpoint is made or changed) and [DelivererOptions.AllowPrivate] (the
	// check of every connection). It is for local development and tests only: where
	// endpoints' owners are not trusted, it lets them reach the service's own network.
	AllowPrivate bool
	// Brand names the service in the user-agent of the attempts, unless
	// Deliverer.Brand is set. The zero value is brand.Default().
	Brand brand.Brand
	// Now is the clock of every part whose own Now is nil: give the service's
	// (tollgate.Service.Now), so that messages, deliveries and events agree with it.
	// The default is time.Now.
	Now func() time.Time
	// Logger receives what every part logs, unless the part's own Logger is set. The
	// default is slog.Default().
	Logger *slog.Logger
	// CleanupTimeout bounds the deletion of the endpoints of an account that was
	// deleted, on the goroutine that deleted it (see [New]). Zero is
	// [DefaultCleanupTimeout].
	CleanupTimeout time.Duration

	// Dispatcher holds the settings of the [Dispatcher]: the thresholds of
	// credits.low, the plans, the queue, the flush, and the stores of its sweeps (give
	// Keys the service's key store and Ledger its ledger, with Plans, to send
	// key.expired and period.renewed for the keys and accounts nobody uses).
	Dispatcher DispatcherOptions
	// Deliverer holds the settings of the [Deliverer]: the retry schedule, the
	// timeout, the concurrency, the poll, the retention. Its OnDisabled, if set, is
	// told of an endpoint disabled after the [Endpoints] have published it.
	Deliverer DelivererOptions
	// Endpoints holds the settings of the [Endpoints]: the grace of a rotated secret.
	Endpoints EndpointsOptions
}

// Webhooks is a service's webhooks, assembled by [New]: the [Endpoints] that owners
// manage, the [Dispatcher] that turns the service's events into messages in the
// outbox, and the [Deliverer] that delivers them, wired together. Mount its Endpoints
// on the front doors (doors.Options.Webhooks), run it ([Webhooks.Run]) on every
// instance, and close it when the service stops ([Webhooks.Close]). Each part stays
// usable on its own, for a host that wires them otherwise. It is safe for concurrent
// use.
type Webhooks struct {
	endpoints  *Endpoints
	dispatcher *Dispatcher
	deliverer  *Deliverer
	log        *slog.Logger
	timeout    time.Duration
	retry      time.Duration // how often Run retries the cleanups left

	cancels []func()
	running atomic.Bool

	mu       sync.Mutex
	cleanups map[string]event.Actor // deleted accounts whose endpoints are left, by who deleted them
}

// New assembles the webhooks of the service whose events bus carries, on store s (the
// store every instance shares), and subscribes them to bus:
//
//   - the [Dispatcher] observes the service's events (its [Dispatcher.Kinds]) and
//     enqueues their messages; each message it enqueues anew wakes the [Deliverer]
//     ([Deliverer.Wake]), so that the first attempt is made at once by this instance
//     rather than at its next poll, and so do a test message and a resend made through
//     the [Endpoints];
//   - an endpoint the Deliverer disables (410 Gone, or a whole schedule failed) is told
//     to [Endpoints.Disabled], which publishes [event.EndpointDisabled] on bus: the
//     audit log records it, and the Dispatcher makes the endpoint.disabled message for
//     the owner's other endpoints and, for an account's endpoint, the operator's;
//   - when an account is deleted ([event.AccountDeleted]), its endpoints are deleted
//     with their deliveries, each published as [event.EndpointDeleted] with the
//     deletion's actor. The deletion runs on the goroutine that deleted the account,
//     bounded by [Options.CleanupTimeout]; endpoints that could not be deleted then
//     are deleted by [Webhooks.Run], which tries again every 30 seconds.
//
// It returns the error of the options a part refuses. opts may be nil. Nothing is
// delivered until [Webhooks.Run].
func New(s Store, bus *event.Bus, opts *Options) (*Webhooks, error) {
	if s == nil {
		return nil, errors.New("webhook: New needs a Store")
	}
	if bus == nil {
		return nil, errors.New("webhook: New needs the service's events (tollgate.Service.Events)")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.CleanupTimeout < 0 {
		return nil, errors.New("webhook: Options.CleanupTimeout must not be negative; give 0 for the default")
	}
	w := &Webhooks{log: o.Logger, timeout: o.CleanupTimeout, retry: cleanupRetry, cleanups: map[string]event.Actor{}}
	if w.log == nil {
		w.log = slog.Default()
	}
	if w.timeout == 0 {
		w.timeout = DefaultCleanupTimeout
	}

	eo := o.Endpoints
	eo.AllowPrivate = eo.AllowPrivate || o.AllowPrivate
	eo.Now, eo.Logger = orNow(eo.Now, o.Now), cmp.Or(eo.Logger, o.Logger)
	w.endpoints = NewEndpoints(s, bus, &eo)

	do := o.Dispatcher
	do.Now, do.Logger = orNow(do.Now, o.Now), cmp.Or(do.Logger, o.Logger)
	var err error
	if w.dispatcher, err = NewDispatcher(s, &do); err != nil {
		return nil, err
	}

	lo := o.Deliverer
	lo.AllowPrivate = lo.AllowPrivate || o.AllowPrivate
	lo.Now, lo.Logger = orNow(lo.Now, o.Now), cmp.Or(lo.Logger, o.Logger)
	if lo.Brand == (brand.Brand{}) {
		lo.Brand = o.Brand
	}
	hostOnDisabled := lo.OnDisabled
	lo.OnDisabled = func(ctx context.Context, e DisabledEndpoint) {
		w.endpoints.Disabled(ctx, e)
		if hostOnDisabled != nil {
			hostOnDisabled(ctx, e)
		}
	}
	if w.deliverer, err = NewDeliverer(s, &lo); err != nil {
		return nil, err
	}

	w.endpoints.enqueued = w.deliverer.Wake
	w.cancels = []func(){
		w.dispatcher.Subscribe(func(context.Context, Message) { w.deliverer.Wake() }),
		bus.Subscribe(w.dispatcher, w.dispatcher.Kinds()...),
		bus.Subscribe(event.ObserverFunc(w.accountDeleted), event.AccountDeleted),
	}
	return w, nil
}

// orNow returns a part's clock, or the shared one if it has none.
func orNow(part, shared func() time.Time) func() time.Time {
	if part != nil {
		return part
	}
	return shared
}

// Endpoints returns the management of the endpoints, for the front doors
// (doors.Options.Webhooks, selfservice.Options.Webhooks, admin.Options.Webhooks).
func (w *Webhooks) Endpoints() *Endpoints { return w.endpoints }

// Dispatcher returns the Dispatcher, for its statistics and its [Dispatcher.Subscribe]
// (the host's own subscribers of the messages).
func (w *Webhooks) Dispatcher() *Dispatcher { return w.dispatcher }

// Deliverer returns the Deliverer, for its statistics and [Deliverer.Prune].
func (w *Webhooks) Deliverer() *Deliverer { return w.deliverer }

// Run runs the Dispatcher and the Deliverer until ctx ends, and deletes again the
// endpoints of deleted accounts that could not be deleted at once. Once ctx has
// ended, the Deliverer abandons its attempts in flight (another instance, or this one
// run again, makes them when their leases end) and the Dispatcher enqueues what is
// still queued, within [DispatcherOptions.FlushTimeout]; then Run returns nil. Cancel
// ctx once the server has stopped (its calls in flight finished), so that their last
// events are enqueued. It returns [ErrRunning] at once if it runs already, or if the
// Deliverer runs on its own.
func (w *Webhooks) Run(ctx context.Context) error {
	if !w.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer w.running.Store(false)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var err error
	wg.Go(func() {
		if err = w.deliverer.Run(ctx); err != nil {
			cancel()
		}
	})
	wg.Go(func() { w.dispatcher.Run(ctx) })
	stop := every.Start(w.retry, every.Chore{Do: w.cleanup,
		Failed: "webhook: the endpoints of a deleted account could not be deleted; trying again shortly",
		Done:   "webhook: deleted the endpoints of deleted accounts",
	}.Run(w.log))
	wg.Wait()
	stop()
	return err
}

// Close unsubscribes the webhooks from the service's events: they make no more
// messages and delete no more endpoints. Call it once Run has returned. Calling it
// again does nothing.
func (w *Webhooks) Close() {
	for _, cancel := range w.cancels {
		cancel()
	}
}

// accountDeleted deletes the endpoints of the account an AccountDeleted is about, or
// leaves them to Run if the store fails.
func (w *Webhooks) accountDeleted(ctx context.Context, e event.Event) {
	c, ok := e.(*event.Change)
	if !ok || c.Type != event.AccountDeleted || c.Account == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.timeout)
	defer cancel()
	if err := w.deleteEndpoints(ctx, c.Actor, c.Account); err != nil {
		w.leave(c.Account, c.Actor, err)
		c.Defer() // left to Run, in memory: a journal that keeps the deletion publishes it again
	}
}

// deleteEndpoints deletes the endpoints of account, made by actor.
func (w *Webhooks) deleteEndpoints(ctx context.Context, actor event.Actor, account string) error {
	es, err := w.endpoints.List(ctx, account)
	if err != nil {
		return err
	}
	for _, e := range es {
		if err := w.endpoints.Delete(ctx, actor, account, e.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
	}
	return nil
}

// leave remembers that account's endpoints are left to delete, for Run.
func (w *Webhooks) leave(account string, actor event.Actor, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.cleanups[account]; !ok && len(w.cleanups) >= maxCleanups {
		w.log.Error("webhook: the endpoints of a deleted account could not be deleted, and too many accounts wait for theirs; delete them from the store",
			"account", account, "error", err)
		return
	}
	w.cleanups[account] = actor
	w.log.Warn("webhook: the endpoints of a deleted account could not be deleted; trying again shortly",
		"account", account, "error", err)
}

// cleanup deletes the endpoints that accountDeleted left, and returns for how many
// accounts it did; its error is the first account's whose endpoints are still left.
func (w *Webhooks) cleanup(ctx context.Context) (int64, error) {
	w.mu.Lock()
	left := maps.Clone(w.cleanups)
	w.mu.Unlock()
	var done int64
	var first error
	for _, account := range slices.Sorted(maps.Keys(left)) {
		actx, cancel := context.WithTimeout(ctx, w.timeout)
		err := w.deleteEndpoints(actx, left[account], account)
		cancel()
		if err != nil {
			if first == nil {
				first = fmt.Errorf("account %s: %w", account, err)
			}
			continue
		}
		w.mu.Lock()
		delete(w.cleanups, account)
		w.mu.Unlock()
		done++
	}
	return done, first
}
