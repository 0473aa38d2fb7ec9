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

	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/internal/every"
	"github.com/tollgate-dev/tollgate/internal/safefetch"
	"github.com/tollgate-dev/tollgate/usage"
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
	// Sessions enables session tokens (the x-jwt credential). If nil, they are refused.
	Sessions *auth.Sessions
	// SessionStore remembers the sessions that were ended before their expiry
	// ([Service.EndSession]); every instance that shares it refuses their tokens. It
	// needs Sessions. If nil (the default), a session lasts until its expiry.
	SessionStore auth.SessionStore
	// SessionTTL is how long a session started with [Service.StartSession] or
	// [Service.StartLoginSession] lasts, at most [MaxSessionTTL]. The default is
	// [DefaultSessionTTL].
	SessionTTL time.Duration
	// CallTimeout bounds one API call, including the fetch of a file in the URL form.
	// A call that takes longer is answered with 504 and refunded. The default is 30s.
	CallTimeout time.Duration
	// Lease is how long a concurrency slot lasts without renewal; a crashed instance's
	// slots come back after at most one lease (see [billing.MeterOptions]). The default
	// is twice CallTimeout, at least [billing.DefaultLease], so that no call outlives
	// its lease; with a shorter lease, calls that run longer than half of it renew it.
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
	// SubKeysManageKeys lets account holders manage keys through a sub-key (see
	// [Service.CreateOwnKey]): create, rotate, revoke and change keys no wider than the
	// sub-key itself, never the primary key. By default only the primary key or a
	// session token may manage an account's keys; a sub-key may only read its own record.
	SubKeysManageKeys bool
	// MaxOwnKeys is the most keys an account may hold for its holder to create another
	// through self-service ([Service.CreateOwnKey]): its live keys, and the keys
	// revoked within RevokedKeyRetention, count. The operator's CreateKey is not held
	// to it. The default is [DefaultMaxOwnKeys]; a negative value sets no cap.
	MaxOwnKeys int
	// RevokedKeyRetention is how long a revoked key is kept: it is listed (revoked),
	// counts for MaxOwnKeys, and its value is answered as a revoked key's, for that
	// long after its revocation; then the service deletes it (see KeyPruneInterval),
	// and its value is answered as an unknown key's. Primary keys are never deleted.
	// The default is [DefaultRevokedKeyRetention]; a negative value keeps revoked keys
	// for ever (and they count for MaxOwnKeys for ever).
	RevokedKeyRetention time.Duration
	// KeyPruneInterval is how often the service deletes the keys revoked longer than
	// RevokedKeyRetention ago: an interval after New, then at every interval, so a
	// revoked key outlives the retention by at most one interval of a running
	// instance. Any number of instances may prune the same key store. The default is a tenth of the retention, at least a
	// second and at most [DefaultKeyPruneInterval]; a negative value turns the schedule
	// off (call [Service.PruneKeys] yourself then). [Service.Close] stops it.
	KeyPruneInterval time.Duration
	// SelfServiceLimit bounds, per account, what its holders can make the service
	// store with requests that are free: each start of a session and each key that
	// self-service creates, rotates or changes spends one event of this token bucket
	// (Burst events at once, refilled at Rate per Per), kept in the rate limiter
	// (Stores.Rates), so that it holds across every instance. A request beyond it is
	// refused with CodeRateLimited and a RetryAfter. Revocations and sign-outs are
	// never refused: each ends what a spent event made. The zero value is
	// [DefaultSelfServiceLimit]; a negative Rate sets no bound.
	SelfServiceLimit driver.Limit
	// Audit, if set, keeps the audit log: every change the management methods make
	// (accounts, keys, credits) is appended to it once it is stored, with the actor
	// that [WithActor] names. Nil (the default) keeps no audit log.
	Audit audit.Store
	// AuditQueue is the most audit entries kept in memory while the audit log cannot
	// take them (it is down), to be retried in the background until it does. An entry
	// recorded while the queue is full is dropped: counted
	// ([Stats].AuditDropped) and logged at WARN with what it held. The default
	// is [DefaultAuditQueue].
	AuditQueue int
	// AuditRetention is how long the audit log keeps an entry: the service prunes the
	// entries older than that every AuditPruneInterval. Zero (the default) keeps every
	// entry.
	AuditRetention time.Duration
	// AuditPruneInterval is how often the service prunes the audit log, with
	// AuditRetention set: once at New, then at this interval, so an entry outlives the
	// retention by at most one interval. Any number of instances may prune the same log.
	// The default is a tenth of AuditRetention, at least a second and at most
	// [DefaultAuditPruneInterval]; a negative value turns the schedule off (call
	// [Service.PruneAuditLog] yourself then). [Service.Close] stops it.
	AuditPruneInterval time.Duration
	// Usage, if set, records the usage statistics of every call (see [UsageOptions]).
	// Nil (the default) records none.
	Usage *UsageOptions
	// BatchParallelism is the most items of one batch that run at the same time (see
	// [Service.CallBatch]); they start in the order given. The default is
	// [DefaultBatchParallelism].
	BatchParallelism int
	// Idempotency, if set, keeps the answers of batches sent with an idempotency key,
	// so that a retried batch runs and charges once (see [IdempotencyOptions]). Nil
	// (the default) keeps none, and a batch sent with a key is refused.
	Idempotency *IdempotencyOptions
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

// DefaultAuditPruneInterval is the longest default [Options.AuditPruneInterval].
const DefaultAuditPruneInterval = audit.DefaultPruneInterval

// DefaultAuditQueue is the default [Options.AuditQueue].
const DefaultAuditQueue = audit.DefaultQueue

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
	authority *auth.Authority
	meter     *billing.Meter
	keys      driver.KeyChecker // set when key records are cached
	plans     *billing.Plans
	fetcher   *safefetch.Fetcher
	now       func() time.Time
	log       *slog.Logger
	timeout   time.Duration
	// renewEvery is how often a running call renews its concurrency slot; zero when
	// the call timeout ends every call well within a lease.
	renewEvery     time.Duration
	ids            requestIDs
	events         event.Bus       // the seam: see Events
	audit          *audit.Log      // nil: no audit log
	usage          *usage.Recorder // nil: no usage statistics
	usageStore     usage.Store
	usageRetention UsageRetention
	stopUsagePrune func() // stops the background prune of the usage statistics; nil if none runs
	subKeysManage  bool   // Options.SubKeysManageKeys
	maxOwnKeys     int    // Options.MaxOwnKeys, with its default
	// keyRetention is Options.RevokedKeyRetention, with its default (negative: for
	// ever); stopKeyPrune stops the background prune of revoked keys (nil if none runs).
	keyRetention time.Duration
	stopKeyPrune func()
	// rates keeps the self-service budgets; selfLimit is Options.SelfServiceLimit,
	// with its default (Rate 0: no budget).
	rates     driver.RateLimiter
	selfLimit driver.Limit
	// sessions signs session tokens (nil: none); sessionStore keeps the ended ones
	// (nil: sessions cannot be ended); sessionTTL is a new session's lifetime.
	sessions     *auth.Sessions
	sessionStore auth.SessionStore
	sessionTTL   time.Duration
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
	if opts == nil {
		opts = &Options{}
	}
	switch {
	case opts.SessionStore != nil && opts.Sessions == nil:
		return nil, errors.New("tollgate: Options.SessionStore needs Options.Sessions")
	case opts.SessionTTL > MaxSessionTTL:
		return nil, fmt.Errorf("tollgate: Options.SessionTTL %s is longer than the maximum, %s", opts.SessionTTL, MaxSessionTTL)
	}
	selfLimit, err := selfServiceLimit(opts.SelfServiceLimit)
	if err != nil {
		return nil, err
	}
	sessionTTL := opts.SessionTTL
	if sessionTTL <= 0 {
		sessionTTL = DefaultSessionTTL
	}
	authOpts := &auth.AuthorityOptions{Sessions: opts.Sessions, Ended: opts.SessionStore}
	var checker driver.KeyChecker
	if opts.KeyCache != nil {
		var ok bool
		if checker, ok = stores.Keys.(driver.KeyChecker); !ok {
			return nil, fmt.Errorf("tollgate: Options.KeyCache needs a key store that checks keys (driver.KeyChecker); %T does not", stores.Keys)
		}
		authOpts.Cache = auth.NewKeyCache(opts.KeyCache)
	}
	authority, err := auth.NewAuthority(stores.Keys, authOpts)
	if err != nil {
		return nil, fmt.Errorf("tollgate: %w", err)
	}
	timeout := opts.CallTimeout
	if timeout <= 0 {
		timeout = DefaultCallTimeout
	}
	lease := opts.Lease
	if lease <= 0 {
		lease = max(billing.DefaultLease, 2*timeout)
	}
	grace := opts.ReservationGrace
	if grace <= 0 {
		grace = DefaultReservationGrace
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	meter, err := billing.NewMeter(stores.Ledger, stores.Rates, stores.Slots, &billing.MeterOptions{
		Lease: lease, Hold: timeout + grace, Now: now, Keys: checker, Logger: opts.Logger})
	if err != nil {
		return nil, fmt.Errorf("tollgate: %w", err)
	}
	s := &Service{
		registry:      registry,
		authority:     authority,
		meter:         meter,
		keys:          checker,
		plans:         plans,
		now:           now,
		log:           opts.Logger,
		timeout:       timeout,
		subKeysManage: opts.SubKeysManageKeys,
		maxOwnKeys:    cmp.Or(opts.MaxOwnKeys, DefaultMaxOwnKeys),
		keyRetention:  cmp.Or(opts.RevokedKeyRetention, DefaultRevokedKeyRetention),
		rates:         stores.Rates,
		selfLimit:     selfLimit,
		sessions:      opts.Sessions,
		sessionStore:  opts.SessionStore,
		sessionTTL:    sessionTTL,
		grace:         grace,
		batchParallel: cmp.Or(max(opts.BatchParallelism, 0), DefaultBatchParallelism),
		fetcher:       safefetch.New(fetcherOptions(opts.Fetch, opts.Logger)),
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.events.Logger = s.log
	if u := opts.Usage; u != nil {
		if u.Store == nil {
			return nil, errors.New("tollgate: Options.Usage needs a Store (memory.NewUsageStore, postgres.NewUsageStore)")
		}
		s.usageStore, s.usageRetention = u.Store, u.Retention
		if s.usage, err = usage.NewRecorder(u.Store, &usage.RecorderOptions{
			FlushInterval: u.FlushInterval, MaxPending: u.MaxPending, Logger: s.log}); err != nil {
			return nil, fmt.Errorf("tollgate: %w", err)
		}
		s.events.Subscribe(s.usage, s.usage.Kinds()...)
	}
	if timeout > lease/2 {
		s.renewEvery = lease / 2
	}
	if s.idem, err = newIdempotencyConfig(opts.Idempotency); err != nil {
		return nil, err
	}
	if opts.Audit != nil {
		s.audit = audit.NewLog(opts.Audit, &audit.LogOptions{Queue: opts.AuditQueue, Retention: opts.AuditRetention,
			PruneInterval: opts.AuditPruneInterval, Now: now, Logger: s.log})
		s.events.Subscribe(s.audit, s.audit.Kinds()...)
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
	if interval := opts.KeyPruneInterval; s.keyRetention > 0 && interval >= 0 {
		if interval == 0 {
			interval = every.TenthOf(s.keyRetention, DefaultKeyPruneInterval)
		}
		s.stopKeyPrune = every.Start(interval, every.Chore{Do: s.PruneKeys,
			Failed: "tollgate: cannot prune revoked keys; the next prune tries again",
			Done:   "tollgate: deleted the keys revoked longer ago than the retention",
			Attrs:  []any{"retention", s.keyRetention.String()},
		}.Run(s.log))
	}
	if u := opts.Usage; u != nil && u.PruneInterval >= 0 {
		interval := u.PruneInterval
		if interval == 0 {
			interval = DefaultUsagePruneInterval
		}
		s.stopUsagePrune = every.StartNow(interval, every.Chore{Do: s.PruneUsage,
			Failed: "tollgate: cannot prune the usage statistics; the next prune tries again",
			Done:   "tollgate: pruned the usage buckets older than their retention",
		}.Run(s.log))
	}
	return s, nil
}

// Close stops the service's background work and finishes what it holds:
//   - the sweep of expired reservations and the prunes of the audit log, of the
//     usage statistics and of revoked keys stop;
//   - the retries of settlements stop (what they still held is left to the
//     reservations' expiry and the slots' leases);
//   - the audit entries still queued get a last attempt of a few seconds (those the
//     audit log still does not take are dropped, counted and logged);
//   - the usage statistics ([Options.Usage]) are flushed a last time, within
//     [usage.DefaultFlushTimeout].
//
// It does not close the stores, which the host owns. Calls made after Close still
// work, but nothing sweeps, failed settlements and audit entries are not retried, and
// usage is flushed only by [Service.FlushUsage].
func (s *Service) Close() {
	s.closeOnce.Do(func() {
		for _, stop := range []func(){s.stopSweep, s.stopUsagePrune, s.stopKeyPrune} {
			if stop != nil {
				stop()
			}
		}
		s.meter.Close()
		if s.audit != nil {
			s.audit.Close()
		}
		if s.usage != nil {
			ctx, cancel := context.WithTimeout(context.Background(), usage.DefaultFlushTimeout)
			defer cancel()
			_ = s.usage.Close(ctx) // the recorder logs a failed flush
		}
	})
}

// Catalog returns the registry of the service's APIs.
func (s *Service) Catalog() catalog.APIRegistry { return s.registry }

// Plans returns the service's plans.
func (s *Service) Plans() *billing.Plans { return s.plans }

// Stats are figures of the work a service keeps in the background, for health checks
// and metrics. Each is zero while the stores are healthy.
type Stats struct {
	// PendingSettlements is the number of settlements (kept or refunded charges, freed
	// slots) being retried because a store could not take them when they were due. It
	// is bounded (see [billing.MeterOptions.Retries]): a settlement that does not fit
	// is left to the reservation's expiry.
	PendingSettlements int
	// AuditPending is the number of audit entries the audit log could not take when
	// they were recorded and that are being retried, at most [Options.AuditQueue];
	// AuditDropped is the number it will never hold (see [audit.Log.Dropped]).
	AuditPending int
	AuditDropped int64
	// UsagePending is the number of usage rows waiting for the usage store;
	// UsageDropped the number of calls whose statistics were dropped because it
	// refused flushes for too long (see [usage.Recorder.Dropped]).
	UsagePending int
	UsageDropped int64
}

// Stats returns the figures of the service's background work now.
func (s *Service) Stats() Stats {
	st := Stats{PendingSettlements: s.meter.Pending()}
	if s.audit != nil {
		st.AuditPending, st.AuditDropped = s.audit.Pending(), s.audit.Dropped()
	}
	if s.usage != nil {
		st.UsagePending, st.UsageDropped = s.usage.Pending(), s.usage.Dropped()
	}
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
