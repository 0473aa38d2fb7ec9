package tollgate

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/idempotency"
	"github.com/tollgate-dev/tollgate/internal/every"
	"github.com/tollgate-dev/tollgate/internal/safefetch"
	"github.com/tollgate-dev/tollgate/store"
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
	// ([Service.DroppedAuditEntries]) and logged at WARN with what it held. The default
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

// DefaultMaxOwnKeys is the default [Options.MaxOwnKeys].
const DefaultMaxOwnKeys = 100

// DefaultRevokedKeyRetention is the default [Options.RevokedKeyRetention].
const DefaultRevokedKeyRetention = 7 * 24 * time.Hour

// DefaultKeyPruneInterval is the longest default [Options.KeyPruneInterval].
const DefaultKeyPruneInterval = time.Hour

// DefaultSelfServiceLimit is the default [Options.SelfServiceLimit]: 100 at once, then
// 30 an hour.
var DefaultSelfServiceLimit = driver.Limit{Rate: 30, Per: time.Hour, Burst: 100}

// DefaultCallTimeout is the default [Options.CallTimeout].
const DefaultCallTimeout = 30 * time.Second

// DefaultReservationGrace is the default [Options.ReservationGrace].
const DefaultReservationGrace = 30 * time.Second

// DefaultSweepInterval is the default [Options.SweepInterval].
const DefaultSweepInterval = 15 * time.Second

// DefaultAuditPruneInterval is the longest default [Options.AuditPruneInterval].
const DefaultAuditPruneInterval = time.Hour

// sweepBatch is how many reservations one sweep call voids at most.
const sweepBatch = 1000

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
// while in the background (a bounded queue, see [Service.PendingSettlements]) and,
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
	keyHooks       keyHooks        // see OnKeyChange
	audit          audit.Store     // nil: no audit log
	auditq         *auditQueue     // appends to audit, and retries; nil without an audit log
	retention      time.Duration   // Options.AuditRetention
	stopPrune      func()          // stops the background prune of the audit log; nil if none runs
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
		audit:         opts.Audit,
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
	if u := opts.Usage; u != nil {
		if u.Store == nil {
			return nil, errors.New("tollgate: Options.Usage needs a Store (memory.NewUsageStore, postgres.NewUsageStore)")
		}
		s.usageStore, s.usageRetention = u.Store, u.Retention
		if s.usage, err = usage.NewRecorder(u.Store, &usage.RecorderOptions{
			FlushInterval: u.FlushInterval, MaxPending: u.MaxPending, Logger: s.log}); err != nil {
			return nil, fmt.Errorf("tollgate: %w", err)
		}
	}
	if timeout > lease/2 {
		s.renewEvery = lease / 2
	}
	if s.idem, err = newIdempotencyConfig(opts.Idempotency); err != nil {
		return nil, err
	}
	if s.audit != nil {
		s.auditq = newAuditQueue(s.audit, s.log, opts.AuditQueue)
		s.retention = max(opts.AuditRetention, 0)
	}
	if _, err := rand.Read(s.ids.prefix[:]); err != nil {
		return nil, fmt.Errorf("tollgate: %w", err)
	}
	s.sweeper, _ = stores.Ledger.(driver.Sweeper)
	if interval := opts.SweepInterval; s.sweeper != nil && interval >= 0 {
		if interval == 0 {
			interval = DefaultSweepInterval
		}
		s.stopSweep = every.Start(interval, s.sweepOnce)
	}
	if interval := opts.AuditPruneInterval; s.retention > 0 && interval >= 0 {
		if interval == 0 {
			interval = min(max(s.retention/10, time.Second), DefaultAuditPruneInterval)
		}
		s.stopPrune = every.StartNow(interval, s.pruneOnce)
	}
	if interval := opts.KeyPruneInterval; s.keyRetention > 0 && interval >= 0 {
		if interval == 0 {
			interval = min(max(s.keyRetention/10, time.Second), DefaultKeyPruneInterval)
		}
		s.stopKeyPrune = every.Start(interval, s.pruneKeysOnce)
	}
	if u := opts.Usage; u != nil && u.PruneInterval >= 0 {
		interval := u.PruneInterval
		if interval == 0 {
			interval = DefaultUsagePruneInterval
		}
		s.stopUsagePrune = every.StartNow(interval, s.pruneUsageOnce)
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
		for _, stop := range []func(){s.stopSweep, s.stopPrune, s.stopUsagePrune, s.stopKeyPrune} {
			if stop != nil {
				stop()
			}
		}
		s.meter.Close()
		if s.auditq != nil {
			s.auditq.close()
		}
		if s.usage != nil {
			ctx, cancel := context.WithTimeout(context.Background(), usage.DefaultFlushTimeout)
			defer cancel()
			_ = s.usage.Close(ctx) // the recorder logs a failed flush
		}
	})
}

// Sweep voids the expired reservations of every account now, in batches, until none is
// left or ctx ends, and returns how many it voided. The background sweep calls it every
// [Options.SweepInterval]; a host that turned that off may call it on its own schedule.
// It does nothing for a ledger that is not a [driver.Sweeper].
func (s *Service) Sweep(ctx context.Context) (int, error) {
	if s.sweeper == nil {
		return 0, nil
	}
	total := 0
	for {
		n, err := s.sweeper.Sweep(ctx, s.now(), sweepBatch)
		total += n
		if err != nil || n < sweepBatch {
			return total, err
		}
	}
}

// sweepOnce is one run of the background sweep.
func (s *Service) sweepOnce(ctx context.Context) {
	n, err := s.Sweep(ctx)
	switch {
	case err != nil && ctx.Err() == nil:
		s.log.Warn("tollgate: cannot sweep expired reservations; the next sweep tries again", "error", err)
	case n > 0:
		s.log.Info("tollgate: voided expired reservations, their credits given back", "count", n)
	}
}

// Catalog returns the registry of the service's APIs.
func (s *Service) Catalog() catalog.APIRegistry { return s.registry }

// Plans returns the service's plans.
func (s *Service) Plans() *billing.Plans { return s.plans }

// PendingSettlements returns the number of settlements (kept or refunded charges, freed
// slots) the service is still retrying in the background because a store could not
// take them when they were due. It is zero when the stores are healthy, and bounded
// (see [billing.MeterOptions.Retries]): a settlement that does not fit is left to the
// reservation's expiry.
func (s *Service) PendingSettlements() int { return s.meter.Pending() }

// Now returns the service's current time.
func (s *Service) Now() time.Time { return s.now() }

// CredentialFrom performs the edge check on a request's headers (see
// [auth.CredentialFrom]). Its errors have code CodeNoCredential or
// CodeMalformedCredential.
func CredentialFrom(h http.Header) (auth.Credential, error) {
	c, err := auth.CredentialFrom(h)
	switch {
	case err == nil:
		return c, nil
	case errors.Is(err, auth.ErrNoCredential):
		return c, newError(CodeNoCredential, err.Error(), err)
	default:
		return c, newError(CodeMalformedCredential, err.Error(), err)
	}
}

// A Caller describes how a request arrived: the credential it presented (see
// [CredentialFrom]), the channel and the client's address (see [auth.ClientAddr]).
type Caller struct {
	Credential auth.Credential
	// KeyID, if set, names the caller's key by its stable id instead of Credential: an
	// OAuth access token, say, which the front door verified itself. The key's
	// restrictions apply as for a credential; a rotation of the key's value does not
	// affect the caller, a revocation or an expiry refuses it on its next call.
	KeyID   string
	Channel auth.Channel
	Addr    netip.Addr
}

// A Principal is an authenticated caller: the account, the key it used, the account's
// plan and how it arrived.
type Principal struct {
	auth.Principal
	Plan    billing.Plan
	Channel auth.Channel
	Addr    netip.Addr
}

// Authenticate checks a caller's credential (or key id) and the restrictions that depend
// on how it arrived (channel and address), for a front door that must know its caller
// before it can route a request (an MCP session, say); [Service.Call] and
// [Service.CallAll] authenticate on their own. A zero Channel skips the channel check,
// for endpoints that any valid key may use.
//
// Without [Options.KeyCache] the key store is read on every call. With it, the record
// may come from the cache (the principal is then marked Cached): a call checks such a
// key in its admission, and a refusal checks it before it is answered, so a rotated or
// revoked key is still refused on its very next call; a front door that answers a
// cached principal outside Call uses [Service.Check].
func (s *Service) Authenticate(ctx context.Context, c Caller) (Principal, error) {
	var p Principal
	if err := s.authenticate(ctx, c, &p); err != nil {
		return Principal{}, err
	}
	return p, nil
}

// authenticate is Authenticate into *p, for the calls, which keep their Principal (a
// few hundred bytes) where they made it rather than copy it from call to call. On
// failure p is left unfinished.
func (s *Service) authenticate(ctx context.Context, c Caller, p *Principal) error {
	var err error
	if c.KeyID != "" {
		p.Principal, err = s.authority.AuthenticateKeyID(ctx, c.KeyID, s.now())
	} else {
		p.Principal, err = s.authority.Authenticate(ctx, c.Credential, s.now())
	}
	if err != nil {
		return s.authError(ctx, err)
	}
	return s.complete(ctx, p, c)
}

// Check authenticates a caller as [Service.Authenticate] does, and checks a key that
// came from the key cache against the key store, so that the principal it returns is
// current: for a front door that grants something on the strength of a key (package
// oauth's consent), or that holds a connection open and checks its caller again
// (package mcp's streams).
func (s *Service) Check(ctx context.Context, c Caller) (Principal, error) {
	p, err := s.Authenticate(ctx, c)
	if err == nil {
		err = s.verify(ctx, &p)
	}
	return p, err
}

// complete completes an authentication whose p.Principal is set: the account's plan
// and the restrictions that depend on how the caller arrived.
func (s *Service) complete(ctx context.Context, p *Principal, c Caller) error {
	plan, ok := s.plans.Lookup(p.Account.Plan)
	if !ok {
		return s.internal("account plan", fmt.Errorf("account %q has plan %q, which is not configured", p.Account.ID, p.Account.Plan))
	}
	p.Plan, p.Channel, p.Addr = plan, c.Channel, c.Addr
	if err := p.CheckAccess(c.Channel, c.Addr); err != nil {
		return s.authError(ctx, err)
	}
	return nil
}

func (s *Service) authError(ctx context.Context, err error) *Error {
	switch {
	case errors.Is(err, auth.ErrUnknownKey):
		return newError(CodeUnauthorized, "unauthorized", err)
	case errors.Is(err, auth.ErrInvalidSession), errors.Is(err, auth.ErrSessionsDisabled):
		return newError(CodeUnauthorized, err.Error(), err)
	case errors.Is(err, auth.ErrForbidden):
		return newError(CodeForbidden, err.Error(), err)
	}
	return s.unavailable(ctx, "key store", err)
}

// lookup returns the API with the given id, if it exists and the principal may call it.
func (s *Service) lookup(p *Principal, id string) (*catalog.API, error) {
	api, ok := s.registry.Lookup(id)
	if !ok {
		return nil, newError(CodeNotFound, fmt.Sprintf("no API has the id %q; GET /v1/catalog lists them", truncate(id, 64)), nil)
	}
	if err := p.CheckAPI(id); err != nil {
		return nil, newError(CodeForbidden, err.Error(), err)
	}
	return api, nil
}

// Input is the raw input of one API call, as a front door received it.
type Input struct {
	// Query holds parameters that arrived as text: a query string or the fields of a
	// multipart form. When it is nil, JSON is used.
	Query url.Values
	// JSON holds parameters that arrived as JSON values.
	JSON map[string]any
	// File is the file uploaded to a file API, if any.
	File *catalog.File
}

// An invocation is one validated API call, ready to run.
type invocation struct {
	API    *catalog.API
	Params catalog.Params
	// File is the uploaded file of a file API; FileURL the address to fetch it from
	// instead (after admission).
	File    *catalog.File
	FileURL string
}

// prepare validates the input of a call to api (see validate) and, for the URL form of
// a file API, checks that the address is one the service may fetch, resolving its host.
// It never charges anything; the fetch itself happens after admission.
func (s *Service) prepare(ctx context.Context, api *catalog.API, in Input) (invocation, error) {
	inv, err := validate(api, in)
	if err != nil || inv.FileURL == "" {
		return inv, err
	}
	if err := s.fetcher.Check(ctx, inv.FileURL); err != nil {
		return invocation{}, fetchError(err)
	}
	return inv, nil
}

// validate validates the input of a call to api without the network: its parameters,
// and for a file API the uploaded file's size and type, or the presence of a url for the
// URL form, whose address prepare checks.
func validate(api *catalog.API, in Input) (invocation, error) {
	var (
		params catalog.Params
		err    error
	)
	if in.Query != nil {
		params, err = api.ValidateQuery(in.Query)
	} else {
		params, err = api.ValidateJSON(in.JSON)
	}
	if err != nil {
		return invocation{}, newError(CodeInvalidInput, err.Error(), err)
	}
	inv := invocation{API: api, Params: params, File: in.File}
	if api.File == nil {
		if in.File != nil {
			return invocation{}, newError(CodeInvalidInput, fmt.Sprintf("the %s API takes no file", api.ID), nil)
		}
		return inv, nil
	}
	inv.FileURL = params.String(catalog.URLParam)
	delete(params, catalog.URLParam)
	switch {
	case in.File != nil && inv.FileURL != "":
		return invocation{}, newError(CodeInvalidInput, fmt.Sprintf("send either a file in the %s field or a url, not both", api.File.Name), nil)
	case in.File != nil:
		return inv, checkFile(api, in.File)
	case inv.FileURL != "":
		return inv, nil
	}
	return invocation{}, newError(CodeInvalidInput, fmt.Sprintf(
		"the %s API needs a file: upload it as multipart/form-data in the %s field, or pass its address in the url parameter",
		api.ID, api.File.Name), nil)
}

// checkFile checks an uploaded or fetched file against the API's file field, and
// records the media type detected from its content.
func checkFile(api *catalog.API, f *catalog.File) error {
	ff := api.File
	if int64(len(f.Data)) > ff.MaxBytes {
		return newError(CodeBodyTooLarge, fmt.Sprintf("the file is %d bytes; the %s API takes at most %d", len(f.Data), api.ID, ff.MaxBytes), nil)
	}
	if len(f.Data) == 0 {
		return newError(CodeInvalidInput, "the file is empty", nil)
	}
	ct := http.DetectContentType(f.Data)
	if !slices.Contains(ff.Types, ct) {
		return newError(CodeInvalidInput, fmt.Sprintf("the file is %s; the %s API takes %s", ct, api.ID, joinTypes(ff.Types)), nil)
	}
	f.ContentType = ct
	return nil
}

func fetchError(err error) error {
	var fe *safefetch.Error
	if errors.As(err, &fe) && fe.Reason == safefetch.ReasonTooLarge {
		return newError(CodeBodyTooLarge, err.Error(), err)
	}
	return newError(CodeInvalidInput, err.Error(), err)
}

// A Result is the outcome of one invocation that was admitted and run.
type Result struct {
	// Data is what the handler returned; nil on failure.
	Data any
	// JSON is Data encoded as a JSON object. The result is encoded while the call runs,
	// so that one that cannot be encoded (a NaN, a channel) or is not an object is a
	// failure on the service's side, refunded, rather than an error after the charge was
	// kept.
	JSON []byte
	// Err is nil on success. Its code says whether the call was charged
	// ([Code.Charged]).
	Err *Error
}

// run admits the invocations as one call (one rate-limit event, one concurrency slot, the
// sum of their costs reserved at once), runs them in parallel, and settles: the cost of
// an API that failed on the service's side is refunded. The invocations name distinct
// APIs (Call has one; CallAll runs an API named twice once), so a call pays for each
// API once; a batch (batch not nil) runs each of its items, one rate-limit event each, as
// b says. Results are in the order of invs. A call the plan refused (rate,
// concurrency or credits) or that a store could not admit is answered through refuse.
// one, when not nil, holds the call's single invocation (invs is one.inv[:]) and is
// where the call keeps what it would otherwise allocate piece by piece.
func (s *Service) run(ctx context.Context, p *Principal, invs []invocation, batch *batchRun, one *single) Reply {
	var rc Receipt
	var (
		apis []string
		cost int64
	)
	if one != nil {
		one.api[0] = invs[0].API.ID
		apis, cost = one.api[:], invs[0].API.Cost
	} else {
		apis, cost = callCost(invs)
	}
	// One instant for admission and settlement: a refund lands in the period of its
	// reservation, even for a call that straddles the end of a month.
	now := s.now()
	a := billing.Admission{
		Account: p.Account.ID, Plan: p.Plan,
		APIs: apis, Cost: cost, Now: now,
	}
	if batch == nil {
		a.Request = s.ids.next()
	} else {
		a.Request, a.Events, a.Hold = batch.request, len(invs), batch.longest+s.grace
	}
	if p.Cached {
		a.Key = p.keyCheck()
	}
	t, err := s.meter.Admit(ctx, a)
	if errors.Is(err, billing.ErrKeyChanged) {
		// The cached record is stale. Read the key again; if it still may call (its
		// restrictions changed, or a caller by key id saw a rotation), admit once more
		// with the fresh record. Its restrictions may have been narrowed: the APIs are
		// checked again.
		if err = s.refresh(ctx, p); err != nil {
			return Reply{Err: err}
		}
		for i := range invs {
			if err := p.CheckAPI(invs[i].API.ID); err != nil {
				return s.refuse(ctx, p, newError(CodeForbidden, err.Error(), err), rc)
			}
		}
		a.Key = nil
		t, err = s.meter.Admit(ctx, a)
	}
	if err != nil {
		var le *billing.LimitError
		if !errors.As(err, &le) {
			return s.refuse(ctx, p, s.unavailable(ctx, "admission", err), rc, apis...)
		}
		// The admission checked a cached key before it judged the plan's limits.
		p.Cached = false
		if p.Plan.RatePerMinute > 0 && !errors.Is(err, billing.ErrConcurrencyLimited) {
			rc.Rate = t.Rate
		}
		if errors.Is(err, billing.ErrInsufficientCredits) {
			rc.Balance = t.Balance
		}
		return s.refuse(ctx, p, &Error{Code: limitCode(le), Message: le.Message, RetryAfter: le.RetryAfter, Err: err}, rc, apis...)
	}
	if p.Plan.RatePerMinute > 0 {
		rc.Rate = t.Rate
	}
	var (
		results []Result
		took    []time.Duration
	)
	if batch == nil {
		results, took = s.execute(ctx, who{p.Account.ID, p.Key.ID}, &t, invs, one)
	} else {
		results, took = s.executeBatch(ctx, who{p.Account.ID, p.Key.ID}, &t, invs, batch)
	}
	// An API that failed on the service's side is refunded.
	out := billing.Outcome{Now: now}
	for i, r := range results {
		if r.Err != nil && !r.Err.Code.Charged() {
			out.Refund += invs[i].API.Cost
			out.Failed = append(out.Failed, apis[i])
		}
	}
	if batch != nil && batch.settling != nil {
		if err := batch.settling(ctx); err != nil {
			return s.unsettled(ctx, p, now, invs, results, took, &t, rc, err)
		}
	}
	b, err := s.meter.Settle(ctx, &t, out)
	rc.Plan, rc.Charged, rc.Balance = p.Plan, cost-out.Refund, b
	voided := errors.Is(err, billing.ErrVoided)
	switch {
	case voided:
		// The call outlived its reservation, which was voided: it is not charged.
		s.log.WarnContext(ctx, "tollgate: a call ended after its reservation expired; it is not charged (raise Options.ReservationGrace if calls often outlive CallTimeout)",
			"account", p.Account.ID, "request", t.Request.String())
		rc.Charged = 0
	case err != nil:
		// The call ran; its answer stands. The Meter retries the settlement in the
		// background while the reservation lasts (settling is idempotent, so nothing
		// is charged twice); if the store does not take it by then, the expiry voids
		// the reservation and the call is not charged.
		s.log.WarnContext(ctx, "tollgate: settlement deferred; retrying in the background until the reservation expires",
			"account", p.Account.ID, "request", t.Request.String(), "error", err)
	}
	s.recordRun(p, now, invs, results, took, voided)
	return Reply{Results: results, Receipt: rc}
}

// unsettled answers a batch that ran but whose settling hook failed with err (its
// idempotency record could not be marked): its run is not charged, since a retry may
// run the batch again (under a request id of its own) and be charged for it. Its
// reservation is refunded at once, whole, and its slot freed; a refund the ledger
// cannot take now is retried in the background until the reservation expires, when it
// is voided instead. The items ran, and are recorded so in the statistics, with no
// credits.
//
// A record taken over by a retry, or expired (ErrNotHeld: the batch outlived its
// lease), answers the batch as a whole with CodeConflict: another run of its key
// answers for it. A store that could not be reached answers the items, charged
// nothing.
func (s *Service) unsettled(ctx context.Context, p *Principal, now time.Time, invs []invocation, results []Result, took []time.Duration,
	t *billing.Ticket, rc Receipt, err error) Reply {
	b, rerr := s.meter.Settle(ctx, t, billing.Outcome{Refund: t.Cost, Failed: t.APIs, Now: now})
	if rerr != nil && !errors.Is(rerr, billing.ErrVoided) {
		s.log.WarnContext(ctx, "tollgate: cannot refund a batch that is not charged now; retrying in the background until its reservation expires, when it is voided",
			"account", p.Account.ID, "request", t.Request.String(), "error", rerr)
	}
	s.recordRun(p, now, invs, results, took, true)
	rc.Plan, rc.Balance = p.Plan, b
	if errors.Is(err, idempotency.ErrNotHeld) {
		s.log.WarnContext(ctx, "tollgate: a batch sent with an idempotency key ran, but outlived its lease: its idempotency record was taken over by a retry, or expired; it is not charged (its reservation is refunded)",
			"account", p.Account.ID, "request", t.Request.String())
		return Reply{Err: newError(CodeConflict,
			"the batch sent with this Idempotency-Key ran, but outlived its lease, and another run of the same key took over (or its record expired): this run is not charged; retry with the same Idempotency-Key for the answer", err), Receipt: rc}
	}
	s.log.WarnContext(ctx, "tollgate: a batch sent with an idempotency key ran, but its idempotency record cannot be marked (the store is unavailable); it is not charged (its reservation is refunded), and a retry after its lease runs it again",
		"account", p.Account.ID, "request", t.Request.String(), "error", err)
	return Reply{Results: results, Receipt: rc}
}

// callCost returns the APIs of a call's invocations and what the call costs: the sum
// of their costs, which its admission reserves.
func callCost(invs []invocation) (apis []string, cost int64) {
	apis = make([]string, len(invs))
	for i := range invs {
		apis[i] = invs[i].API.ID
		cost += invs[i].API.Cost
	}
	return apis, cost
}

func limitCode(le *billing.LimitError) Code {
	switch {
	case errors.Is(le, billing.ErrRateLimited):
		return CodeRateLimited
	case errors.Is(le, billing.ErrConcurrencyLimited):
		return CodeConcurrencyLimited
	}
	return CodeCreditsExhausted
}

// who identifies the caller of a running call, for handlers and logs. (Passing it
// rather than the Principal keeps the Principal on its owner's stack.)
type who struct{ account, key string }

// execute runs the invocations in parallel under the call timeout: the first on the
// calling goroutine, the others on goroutines of their own. A handler is expected to
// return once its context is done; one that does not delays the answer but not the
// accounting, because invoke judges by the context, not by the clock. When usage is
// recorded, took holds how long each invocation ran (nil otherwise). For a call of one
// API, one (not nil) holds the results, the timing, the context and the handler's
// request.
func (s *Service) execute(parent context.Context, w who, t *billing.Ticket, invs []invocation, one *single) (results []Result, took []time.Duration) {
	var (
		cc  *callContext
		req *catalog.Request
	)
	if one != nil {
		cc, req, results = &one.ctx, &one.req, one.result[:]
		cc.init(parent, s.timeout)
		if s.usage != nil {
			took = one.took[:]
		}
	} else {
		cc = newCallContext(parent, s.timeout)
		results = make([]Result, len(invs))
		if s.usage != nil {
			took = make([]time.Duration, len(invs))
		}
	}
	defer cc.release()
	var ctx context.Context = cc
	if s.renewEvery > 0 && t.HoldsSlot() {
		defer s.keepSlot(ctx, w, t, s.renewEvery)()
	}
	var others *sync.WaitGroup
	if len(invs) > 1 {
		others = s.startOthers(ctx, w, invs, results, took)
	}
	s.invokeAt(ctx, w, invs, 0, results, took, req)
	if others != nil {
		others.Wait()
	}
	return results, took
}

// startOthers runs invs[1:] into results (and took) on goroutines of their own, and
// returns what to wait on. (Apart from execute, so that a call of one API, the most
// common, allocates neither the WaitGroup nor the closures' variables.)
func (s *Service) startOthers(ctx context.Context, w who, invs []invocation, results []Result, took []time.Duration) *sync.WaitGroup {
	wg := new(sync.WaitGroup)
	for i := 1; i < len(invs); i++ {
		wg.Go(func() { s.invokeAt(ctx, w, invs, i, results, took, nil) })
	}
	return wg
}

// invokeAt runs invs[i] into results[i], and times it into took[i] if took is not nil.
// req, if not nil, is where the handler's request is made (see invoke).
func (s *Service) invokeAt(ctx context.Context, w who, invs []invocation, i int, results []Result, took []time.Duration, req *catalog.Request) {
	if took == nil {
		results[i] = s.invoke(ctx, w, &invs[i], req)
		return
	}
	start := s.now()
	results[i] = s.invoke(ctx, w, &invs[i], req)
	took[i] = s.now().Sub(start)
}

// keepSlot renews the call's concurrency slot every interval until the returned
// function is called. Only calls that may outlive half a lease need it (see New and
// executeBatch).
func (s *Service) keepSlot(ctx context.Context, w who, ticket *billing.Ticket, every time.Duration) (stop func()) {
	t := *ticket // a copy, so that the caller's ticket stays on its stack
	var (
		mu      sync.Mutex
		stopped bool
		timer   *time.Timer
	)
	mu.Lock()
	defer mu.Unlock()
	timer = time.AfterFunc(every, func() {
		if err := s.meter.Renew(ctx, &t, s.now()); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "tollgate: cannot renew a concurrency slot", "account", w.account, "error", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			timer.Reset(every)
		}
	})
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		timer.Stop()
	}
}

// invoke runs one invocation: fetches its file in the URL form, then calls the handler,
// turning a panic into a failure on the service's side. The handler's request is made
// in req, or in a new one when req is nil.
func (s *Service) invoke(ctx context.Context, w who, inv *invocation, req *catalog.Request) (r Result) {
	defer func() {
		if v := recover(); v != nil {
			s.log.ErrorContext(ctx, "tollgate: API handler panicked", "api", inv.API.ID, "panic", v, "stack", string(debug.Stack()))
			r = Result{Err: newError(CodeAPIFailed, "the API failed; you were not charged", fmt.Errorf("panic: %v", v))}
		}
	}()
	file := inv.File
	if inv.FileURL != "" {
		f, err := s.fetcher.Fetch(ctx, inv.FileURL, inv.API.File.MaxBytes)
		if err != nil {
			return Result{Err: asError(fetchError(err))}
		}
		file = &catalog.File{Name: f.Name, Data: f.Data}
		if err := checkFile(inv.API, file); err != nil {
			return Result{Err: asError(err)}
		}
	}
	if req == nil {
		req = new(catalog.Request)
	}
	*req = catalog.Request{
		API: inv.API, Params: inv.Params, File: file,
		AccountID: w.account, KeyID: w.key,
	}
	data, err := inv.API.Handler.ServeAPI(ctx, req)
	if err == nil {
		if data == nil {
			data = struct{}{}
		}
		b, err := json.Marshal(data)
		if err == nil && (len(b) == 0 || b[0] != '{') {
			err = fmt.Errorf("the result encodes to %.20s, not a JSON object", b)
		}
		if err != nil {
			s.log.ErrorContext(ctx, "tollgate: API result cannot be encoded", "api", inv.API.ID, "error", err)
			return Result{Err: newError(CodeAPIFailed, "the API failed; you were not charged", err)}
		}
		return Result{Data: data, JSON: b}
	}
	var rej *catalog.RejectError
	switch {
	case errors.As(err, &rej):
		return Result{Err: newError(CodeRejected, rej.Message, err)}
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return Result{Err: newError(CodeTimeout, fmt.Sprintf("the API did not answer within %s; you were not charged", s.timeout), err)}
	case ctx.Err() != nil:
		return Result{Err: newError(CodeAPIFailed, "the call was canceled; you were not charged", err)}
	}
	s.log.ErrorContext(ctx, "tollgate: API failed", "api", inv.API.ID, "error", err)
	return Result{Err: newError(CodeAPIFailed, "the API failed; you were not charged", err)}
}

func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return newError(CodeInternal, "internal error", err)
}

// verify checks, for a principal authenticated from the key cache, that its key is
// still live, and returns the error the key now deserves if it is not. For other
// principals it does nothing. Paid calls need not call it: their admission checks the
// key.
func (s *Service) verify(ctx context.Context, p *Principal) error {
	if !p.Cached {
		return nil
	}
	state, err := s.keys.CheckKey(ctx, *p.keyCheck())
	if err != nil {
		return s.unavailable(ctx, "key store", err)
	}
	if state != driver.KeyLive {
		return s.refresh(ctx, p)
	}
	p.Cached = false
	return nil
}

// keyCheck returns the check of the principal's key (or, for a session, its account)
// as its record has it.
func (p *Principal) keyCheck() *driver.KeyCheck {
	return &driver.KeyCheck{Account: p.Account.ID, KeyID: p.Key.ID, Hash: p.Key.Hash, Revision: p.Key.Revision}
}

// refresh re-reads a cached principal whose key check failed. It returns the error the
// key now deserves, or updates p with the fresh record if the caller still may call.
func (s *Service) refresh(ctx context.Context, p *Principal) error {
	ap, err := s.authority.Refresh(ctx, p.Principal, s.now())
	if err != nil {
		return s.authError(ctx, err)
	}
	fresh := Principal{Principal: ap}
	if err := s.complete(ctx, &fresh, Caller{Channel: p.Channel, Addr: p.Addr}); err != nil {
		return err
	}
	*p = fresh
	return nil
}

// balance returns the principal's account balance, for the credit headers of calls
// that did not reach admission.
func (s *Service) balance(ctx context.Context, p *Principal) (billing.Balance, error) {
	now := s.now()
	b, err := s.meter.Ledger().Balance(ctx, p.Account.ID, now, billing.MonthOf(now), p.Plan.Credits)
	if err != nil {
		return b, s.unavailable(ctx, "ledger", err)
	}
	return b, nil
}

// Status returns the principal's account position, for the analytics endpoint. It
// changes nothing and costs nothing. Its Usage counts the whole account's calls for
// a principal that sees the whole account (the primary key, a session acting as it,
// a session that names no key), and only its key's own calls for any other (see
// [Service.OwnUsage]): those come from the usage statistics, and Usage is nil when
// the service records none.
func (s *Service) Status(ctx context.Context, p *Principal) (billing.Status, error) {
	if err := s.verify(ctx, p); err != nil {
		return billing.Status{}, err
	}
	st, err := s.meter.Status(ctx, p.Account.ID, p.Plan, s.now())
	if err != nil {
		return st, s.unavailable(ctx, "meter", err)
	}
	switch {
	case !managesAll(p):
		if st.Usage, err = s.keyCalls(ctx, p, st.Balance.Period); err != nil {
			return st, err
		}
	case st.Usage == nil:
		st.Usage = map[string]int64{}
	}
	return st, nil
}

// unavailable is the error of a store that failed with err while serving ctx, and
// which is answered 503 (CodeUnavailable): nothing the request asked for was done. It
// logs every such answer with its reason, at the level its kind deserves, judged by the
// request's context rather than by err (a store's own timeout wraps
// context.DeadlineExceeded too, and is an outage): INFO when the client canceled the
// request, WARN when the request's deadline passed, ERROR when the store failed while
// the request was live. A value the store cannot hold is the caller's mistake
// (CodeInvalidInput, INFO), and an err that is already an *Error is returned as it is
// (its maker answered for it).
func (s *Service) unavailable(ctx context.Context, what string, err error) *Error {
	if e := (*Error)(nil); errors.As(err, &e) {
		return e
	}
	if errors.Is(err, store.ErrInvalid) {
		// The store cannot hold a value the caller sent: the caller's mistake, which
		// the checks at the edge should have caught.
		s.log.InfoContext(ctx, "tollgate: a store refused a value it cannot hold", "store", what, "error", err)
		return newError(CodeInvalidInput, "a value in the request cannot be stored: use valid UTF-8 text without NUL or control characters", err)
	}
	switch cause := ctx.Err(); {
	case errors.Is(cause, context.Canceled):
		s.log.InfoContext(ctx, "tollgate: answered 503: the client canceled the request before the store answered", "store", what, "error", err)
		return newError(CodeUnavailable, "the request was canceled before the service could answer; nothing was done and nothing was charged", err)
	case cause != nil:
		s.log.WarnContext(ctx, "tollgate: answered 503: the request's deadline passed before the store answered", "store", what, "error", err)
		return newError(CodeUnavailable, "the request's deadline passed before the service could answer; nothing was done and nothing was charged", err)
	}
	s.log.ErrorContext(ctx, "tollgate: answered 503: store unavailable", "store", what, "error", err)
	return newError(CodeUnavailable, "the service cannot reach its data store; nothing was done and nothing was charged; try again shortly", err)
}

func (s *Service) internal(what string, err error) *Error {
	s.log.Error("tollgate: internal error", "where", what, "error", err)
	return newError(CodeInternal, "internal error", err)
}

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

func joinTypes(types []string) string {
	switch len(types) {
	case 0:
		return ""
	case 1:
		return types[0]
	}
	out := ""
	for i, t := range types {
		switch {
		case i == len(types)-1:
			out += " or " + t
		case i > 0:
			out += ", " + t
		default:
			out = t
		}
	}
	return out
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
