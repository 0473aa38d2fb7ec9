package tollgate

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/blocks"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/internal/authn"
	"github.com/tollgate-dev/tollgate/internal/every"
	"github.com/tollgate-dev/tollgate/internal/meter"
	"github.com/tollgate-dev/tollgate/internal/safefetch"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// Stores are the storage a [Service] runs on. All four are required. store/memory
// provides all of them for one process; store/postgres and store/redis for many.
type Stores struct {
	Keys   auth.KeyStore
	Ledger driver.Ledger
	Rates  driver.RateLimiter
	Slots  driver.ConcurrencyLimiter
}

// Options configures a [Service]. The zero value is the default; every field is
// optional.
type Options struct {
	// Now returns the current time. The default is time.Now. Tests inject a clock.
	Now func() time.Time
	// Logger receives failures inside the service (handler panics, store errors). Every
	// answer of CodeUnavailable (503) is logged once, with the store and its error, at
	// ERROR when the store failed, WARN when the request's deadline had passed and INFO
	// when its client had canceled it. The default is slog.Default(). Key values are
	// never logged.
	Logger *slog.Logger
	// Sessions enables session tokens (the x-jwt credential): the service verifies
	// them, and package accounts, given the service, starts and ends them with the same
	// signer ([Service.Sessions]). If nil, they are refused.
	Sessions *auth.Sessions
	// SessionStore remembers the sessions that were ended before their expiry
	// (accounts.Manager.EndSession); every instance that shares it refuses their
	// tokens. It needs Sessions. If nil (the default), a session lasts until its
	// expiry.
	SessionStore auth.SessionStore
	// CallTimeout bounds one API call, including the fetch of a file in the URL form.
	// A call that takes longer is answered with 504 and refunded. The default is 30s.
	CallTimeout time.Duration
	// Lease is how long a concurrency slot lasts without renewal; a crashed instance's
	// slots come back after at most one lease. The default is twice CallTimeout, at
	// least 30 seconds, so that no call outlives its lease; with a shorter lease, calls
	// that run longer than half of it renew it.
	Lease time.Duration
	// Fetch configures the fetcher of the URL form of file APIs.
	Fetch FetchOptions
	// ReservationGrace is added to CallTimeout to make how long a call's reservation
	// may stay open: one still open CallTimeout+ReservationGrace after its admission is
	// voided and its credits given back (see [driver.Reservation]). A call ends
	// within CallTimeout, so the grace must cover the time its settlement takes to
	// reach the store and the difference between the clocks of the instances that
	// share it. The default is [DefaultReservationGrace].
	ReservationGrace time.Duration
	// SweepInterval is how often the service voids the expired reservations of every
	// account, for a ledger that needs it (a [driver.Sweeper]: one shared by several
	// instances, where an instance that dies leaves its calls' reservations open).
	// Any number of instances may sweep the same ledger. The default is
	// [DefaultSweepInterval]; a negative value turns the background sweep off (call
	// [Service.Sweep] yourself then). [Service.Close] stops it.
	SweepInterval time.Duration
	// KeyCache, if set, keeps key records in memory between calls, so that a service
	// on network stores does not read the key store to authenticate each call. Every
	// paid call then checks its key in its admission step, in the same round trip, so a
	// rotated or revoked key is still refused on the very next call; a refused call
	// checks it before it is answered. It needs a key store that implements
	// [driver.KeyChecker]. Nil (the default) reads the key store on every call.
	KeyCache *auth.KeyCacheOptions
	// BatchParallelism is the most items of one batch that run at the same time (see
	// [Service.CallBatch]); they start in the order given. The default is
	// [DefaultBatchParallelism].
	BatchParallelism int
	// Idempotency keeps the answers of batches sent with an idempotency key, so that
	// a retried batch runs and charges once (see [IdempotencyOptions]). Nil, on the
	// in-memory ledger of one process (store/memory), keeps them in that process's
	// memory (store/memory's store, with its defaults); on any other ledger, nil keeps
	// none and a batch sent with a key is refused, since a retry that reached another
	// instance would run again: give the instances a shared store (store/postgres,
	// store/redis).
	Idempotency *IdempotencyOptions
	// CreditBlocks, if set, serves the credits of busy accounts' calls from credit
	// blocks (package billing/blocks): this instance reserves a block of an account's
	// credits at a time and spends it call by call, recording the calls' charges
	// together, one round trip for many calls, so that several instances serving one
	// account meet on its balance once per block roll rather than once per call. The
	// rate limit, the concurrency ceiling and the key check are unchanged; see the
	// package for the one rule that loosens across instances (a refusal while other
	// instances hold blocks). Make it with blocks.New on Stores.Ledger (a ledger that
	// rolls a reservation, driver.Roller), with the service's clock and a Hold of
	// CallTimeout+ReservationGrace, so that a killed instance's blocks come back when
	// its calls' reservations would; give it to package accounts too, whose balances
	// count what it holds unspent. The service closes it when it closes. Nil (the
	// default) reserves each call's credits in the ledger.
	CreditBlocks *blocks.Blocks
}

// FetchOptions configures how the service fetches files given by URL.
type FetchOptions struct {
	// AllowPrivate lets fetches reach loopback, private, link-local and other
	// non-public addresses. Leave it off in production: it opens the service to SSRF.
	AllowPrivate bool
	// Timeout bounds one fetch, redirects included, and the resolution of the host of
	// a file's url, which is checked before a call is admitted: of one url for a call,
	// of all the urls of a batch together for a batch. The default is 10s.
	Timeout time.Duration
	// MaxRedirects is the number of redirects followed. The default is 3.
	MaxRedirects int
}

// fetcherOptions are the options of the fetcher of the URL form of file APIs.
func fetcherOptions(o FetchOptions, log *slog.Logger) *safefetch.Options {
	return &safefetch.Options{AllowPrivate: o.AllowPrivate, Timeout: o.Timeout, MaxRedirects: o.MaxRedirects, Logger: log}
}

// DefaultCallTimeout is the default [Options.CallTimeout].
const DefaultCallTimeout = 30 * time.Second

// DefaultReservationGrace is the default [Options.ReservationGrace].
const DefaultReservationGrace = 30 * time.Second

// DefaultSweepInterval is the default [Options.SweepInterval].
const DefaultSweepInterval = 15 * time.Second

// A Service is the call pipeline that every front door (REST, GraphQL, MCP) drives:
// authenticate, authorize, validate, admit, run, settle. It holds no protocol knowledge;
// front doors translate requests into its calls and its [*Error] codes into their
// protocol.
//
// # A call's credits
//
// Admission reserves a call's cost until CallTimeout+ReservationGrace later; the
// settlement then keeps the charge, or refunds the APIs that failed on the service's
// side:
//
//	admit: reserve ---> run (at most CallTimeout) ---> settle: keep or refund
//	          |
//	          +--- no settlement by the expiry (the instance died, the store was
//	               down) ---> voided: the credits come back, the call is not charged
//
// No refund lives only in memory: a settlement the store cannot take is retried for a
// while in the background (a bounded queue, see [Stats].PendingSettlements) and,
// failing that, left to the reservation's expiry, which refunds it. A call that
// succeeded but whose charge could not be written is therefore not charged either: an
// outage or a crash errs in the customer's favour, never against them. The expired
// reservations of accounts that nobody calls again are voided by a background sweep
// (see [Options.SweepInterval]); stop it with [Service.Close].
//
// A Service is safe for concurrent use.
type Service struct {
	registry  catalog.APIRegistry
	stores    Stores
	authority *authn.Authority
	meter     *meter.Meter
	keys      driver.KeyChecker // set when key records are cached
	plans     *billing.Plans
	fetcher   *safefetch.Fetcher
	now       func() time.Time
	monotonic bool // now is time.Now: a call's steps are timed on the monotonic clock alone
	log       *slog.Logger
	timeout   time.Duration
	// renewEvery is how often a running call renews its concurrency slot; zero when
	// the call timeout ends every call well within a lease.
	renewEvery time.Duration
	ids        requestIDs
	events     event.Bus // the seam: see Events
	// sessions signs session tokens (nil: none); sessionStore keeps the ended ones
	// (nil: sessions cannot be ended).
	sessions     *auth.Sessions
	sessionStore auth.SessionStore
	sweeper      driver.Sweeper
	stopSweep    func() // stops the background sweep and waits for it; nil if none runs
	closeOnce    sync.Once
	// grace is Options.ReservationGrace; batchParallel Options.BatchParallelism, with
	// their defaults.
	grace         time.Duration
	batchParallel int
	idem          idempotencyConfig // idem.store is nil without Options.Idempotency
}

// New returns a Service that publishes the APIs of registry, on the given stores, for
// accounts on the given plans. opts may be nil.
func New(registry catalog.APIRegistry, stores Stores, plans *billing.Plans, opts *Options) (*Service, error) {
	if registry == nil || plans == nil {
		return nil, errors.New("tollgate: New needs a registry and plans")
	}
	if stores.Keys == nil || stores.Ledger == nil || stores.Rates == nil || stores.Slots == nil {
		return nil, errors.New("tollgate: New needs every store: Stores.Keys, Ledger, Rates and Slots")
	}
	if opts == nil {
		opts = &Options{}
	}
	if opts.SessionStore != nil && opts.Sessions == nil {
		return nil, errors.New("tollgate: Options.SessionStore needs Options.Sessions")
	}
	authOpts := &authn.Options{Sessions: opts.Sessions, Ended: opts.SessionStore}
	var checker driver.KeyChecker
	if opts.KeyCache != nil {
		var ok bool
		if checker, ok = stores.Keys.(driver.KeyChecker); !ok {
			return nil, fmt.Errorf("tollgate: Options.KeyCache needs a key store that checks keys (driver.KeyChecker); %T does not", stores.Keys)
		}
		authOpts.Cache = authn.NewKeyCache(opts.KeyCache)
	}
	authority, err := authn.New(stores.Keys, authOpts)
	if err != nil {
		return nil, fmt.Errorf("tollgate: %w", err)
	}
	timeout := opts.CallTimeout
	if timeout <= 0 {
		timeout = DefaultCallTimeout
	}
	lease := opts.Lease
	if lease <= 0 {
		lease = max(meter.DefaultLease, 2*timeout)
	}
	grace := opts.ReservationGrace
	if grace <= 0 {
		grace = DefaultReservationGrace
	}
	now, monotonic := opts.Now, false
	if now == nil {
		now, monotonic = time.Now, true
	}
	credits := opts.CreditBlocks
	m, err := meter.New(stores.Ledger, stores.Rates, stores.Slots, &meter.Options{
		Lease: lease, Hold: timeout + grace, Now: now, Keys: checker, Logger: opts.Logger, Blocks: credits})
	if err != nil {
		return nil, fmt.Errorf("tollgate: %w", err)
	}
	s := &Service{
		registry:      registry,
		stores:        stores,
		authority:     authority,
		meter:         m,
		keys:          checker,
		plans:         plans,
		now:           now,
		monotonic:     monotonic,
		log:           opts.Logger,
		timeout:       timeout,
		sessions:      opts.Sessions,
		sessionStore:  opts.SessionStore,
		grace:         grace,
		batchParallel: cmp.Or(max(opts.BatchParallelism, 0), DefaultBatchParallelism),
		fetcher:       safefetch.New(fetcherOptions(opts.Fetch, opts.Logger)),
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.events.Logger = s.log
	if authOpts.Cache != nil {
		// A key or an account changed here leaves this instance's cache at once; on
		// other instances, the admission's check of the key (and of its account's
		// revision) catches the change.
		s.events.Subscribe(event.ObserverFunc(func(_ context.Context, e event.Event) {
			if c, ok := e.(*event.Change); ok && c.Key != "" {
				authority.Forget(c.Key)
			}
		}), event.KeyRotated, event.KeyUpdated, event.KeyRevoked)
		s.events.Subscribe(event.ObserverFunc(func(_ context.Context, e event.Event) {
			if c, ok := e.(*event.Change); ok && c.Account != "" {
				authority.ForgetAccount(c.Account)
			}
		}), event.AccountSuspended, event.AccountReactivated, event.AccountClosed, event.AccountDeleted, event.PlanChanged)
	}
	if timeout > lease/2 {
		s.renewEvery = lease / 2
	}
	idem := opts.Idempotency
	if idem == nil && inMemory(stores.Ledger) {
		idem = &IdempotencyOptions{Store: memory.NewIdempotencyStore(nil)}
	} else if idem == nil {
		s.log.Warn("tollgate: Options.Idempotency is not set and the ledger is shared: batches sent with an Idempotency-Key are refused until the service is given a shared idempotency store")
	}
	if s.idem, err = newIdempotencyConfig(idem); err != nil {
		return nil, err
	}
	if _, err := rand.Read(s.ids.prefix[:]); err != nil {
		return nil, fmt.Errorf("tollgate: %w", err)
	}
	s.sweeper, _ = stores.Ledger.(driver.Sweeper)
	if interval := opts.SweepInterval; s.sweeper != nil && interval >= 0 {
		if interval == 0 {
			interval = DefaultSweepInterval
		}
		s.stopSweep = every.Start(interval, every.Chore{
			Do:     func(ctx context.Context) (int64, error) { n, err := s.Sweep(ctx); return int64(n), err },
			Failed: "tollgate: cannot sweep expired reservations; the next sweep tries again",
			Done:   "tollgate: voided expired reservations, their credits given back",
		}.Run(s.log))
	}
	return s, nil
}

// Close stops the service's background work: the sweep of expired reservations and
// the retries of settlements (what they still held is left to the reservations'
// expiry and the slots' leases). It does not close the stores, which the host owns,
// nor the observers subscribed to its events. Calls made after Close still work, but
// nothing sweeps and failed settlements are not retried.
func (s *Service) Close() {
	s.closeOnce.Do(func() {
		if s.stopSweep != nil {
			s.stopSweep()
		}
		s.meter.Close()
	})
}

// Catalog returns the registry of the service's APIs.
func (s *Service) Catalog() catalog.APIRegistry { return s.registry }

// Stores returns the stores the service was made with (package accounts manages the
// accounts on them).
func (s *Service) Stores() Stores { return s.stores }

// Plans returns the service's plans.
func (s *Service) Plans() *billing.Plans { return s.plans }

// Sessions returns the signer of the service's session tokens and the store of the
// ended ones ([Options.Sessions], [Options.SessionStore]); each is nil when the service
// has none. Package accounts starts and ends sessions with them.
func (s *Service) Sessions() (*auth.Sessions, auth.SessionStore) { return s.sessions, s.sessionStore }

// Stats are figures of the work a service keeps in the background, for health checks
// and metrics. Each is zero while the stores are healthy.
type Stats struct {
	// PendingSettlements is the number of settlements (kept or refunded charges, freed
	// slots) being retried because a store could not take them when they were due. It
	// is bounded (at most 1024 are queued): a settlement that does not fit is left to
	// the reservation's expiry.
	PendingSettlements int
}

// Stats returns the figures of the service's background work now.
func (s *Service) Stats() Stats {
	st := Stats{PendingSettlements: s.meter.Pending()}
	return st
}

// Now returns the service's current time.
func (s *Service) Now() time.Time { return s.now() }

// requestIDs makes request ids that are unique across instances without coordination:
// a random per-service prefix and a counter.
type requestIDs struct {
	prefix [8]byte
	n      atomic.Uint64
}

func (g *requestIDs) next() billing.RequestID {
	var id billing.RequestID
	copy(id[:8], g.prefix[:])
	binary.BigEndian.PutUint64(id[8:], g.n.Add(1))
	return id
}

// inMemory reports whether ledger is store/memory's, seen through decorators
// (driver.Wrapper): the ledger of one process.
func inMemory(ledger driver.Ledger) bool {
	var v any = ledger
	for {
		switch l := v.(type) {
		case *memory.Ledger:
			return true
		case driver.Wrapper:
			v = l.Unwrap()
		default:
			return false
		}
	}
}
