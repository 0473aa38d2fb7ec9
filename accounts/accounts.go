// Package accounts manages what a [tollgate.Service] meters: accounts (their listing
// and lifecycle: suspension, closure, deletion), their keys and credits for operators,
// the same for account holders within their own account
// (self-service), sessions, and the reads of the audit log and of the usage
// statistics. Every rule of management is written here once, whichever front door
// (the admin API, the account holders' API, the dashboard, a host's own code) asks.
//
// A [Manager] works on the stores of the service it is given, and publishes each
// change it makes on the service's events ([tollgate.Service.Events]) once the change
// is stored: the audit log, webhooks and the service's key cache hear it there. Where
// the key store or the ledger keeps a journal of changes (package journal: PostgreSQL
// and memory do), each change is recorded with the write that stores it, and a change
// that an instance stored but did not publish (it was killed in between) is published
// by the relay that every instance's Manager runs ([Options.RelayInterval]), so that
// no audit entry or webhook is lost.
//
// Management methods are the edge of the stores: every id, name and reason they are
// given is checked before it reaches a store (valid UTF-8, no NUL or other control
// characters, a bounded length), and a violation is a [tollgate.CodeInvalidInput]
// error that names the field. Credits are bounded by [billing.MaxCredits]. Their
// errors are [*tollgate.Error] values, with the codes every front door translates.
package accounts

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/blocks"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/internal/cleantext"
	"github.com/tollgate-dev/tollgate/internal/every"
	"github.com/tollgate-dev/tollgate/internal/outage"
	"github.com/tollgate-dev/tollgate/journal"
	"github.com/tollgate-dev/tollgate/usage"
)

// Options configures a [Manager]. The zero value is the default; every field is
// optional.
type Options struct {
	// CreditBlocks, if set, are the service's credit blocks (tollgate.Options.
	// CreditBlocks): the balances the manager reads from the ledger count what they
	// hold unspent as remaining, not used, as the service's own balances do.
	CreditBlocks *blocks.Blocks
	// Audit, if set, is the audit log that [Manager.AuditLog] and
	// [Manager.OwnAuditLog] read (an [audit.Log] subscribed to the service's events
	// writes it). Nil: the service keeps none, and they are CodeNotFound.
	Audit audit.Store
	// Usage, if set, keeps the usage statistics that [Manager.Usage],
	// [Manager.OwnUsage] and [Manager.KeysLastUsed] read (a [usage.Recorder]
	// subscribed to the service's events writes them). Nil: the service records none,
	// and they are CodeNotFound.
	Usage usage.Store
	// SessionTTL is how long a session started with [Manager.StartSession] or
	// [Manager.StartLoginSession] lasts, at most [MaxSessionTTL]. The default is
	// [DefaultSessionTTL].
	SessionTTL time.Duration
	// SubKeysManageKeys lets account holders manage keys through a sub-key (see
	// [Manager.CreateOwnKey]): create, rotate, revoke and change keys no wider than the
	// sub-key itself, never the primary key. By default only the primary key or a
	// session token may manage an account's keys; a sub-key may only read its own record.
	SubKeysManageKeys bool
	// MaxOwnKeys is the most keys an account may hold for its holder to create another
	// through self-service ([Manager.CreateOwnKey]): its live keys, and the keys
	// revoked within RevokedKeyRetention, count. The operator's CreateKey is not held
	// to it. The default is [DefaultMaxOwnKeys]; a negative value sets no cap.
	MaxOwnKeys int
	// RevokedKeyRetention is how long a revoked key is kept: it is listed (revoked),
	// counts for MaxOwnKeys, and its value is answered as a revoked key's, for that
	// long after its revocation; then the manager deletes it (see KeyPruneInterval),
	// and its value is answered as an unknown key's. Primary keys are never deleted.
	// The default is [DefaultRevokedKeyRetention]; a negative value keeps revoked keys
	// for ever (and they count for MaxOwnKeys for ever).
	RevokedKeyRetention time.Duration
	// KeyPruneInterval is how often the manager deletes the keys revoked longer than
	// RevokedKeyRetention ago: an interval after New, then at every interval, so a
	// revoked key outlives the retention by at most one interval of a running
	// instance. Any number of instances may prune the same key store. The default is a
	// tenth of the retention, at least a second and at most [DefaultKeyPruneInterval];
	// a negative value turns the schedule off (call [Manager.PruneKeys] yourself then).
	// [Manager.Close] stops it.
	KeyPruneInterval time.Duration
	// ClosedRetention is how long a closed account is kept before
	// [Manager.DeleteAccount] may delete it: until then its records (the account, its
	// revoked keys, its balance) stay, for disputes and late settlements, and a deletion
	// is refused with CodeConflict saying when it becomes possible. Nothing deletes a
	// closed account by itself. The default is [DefaultClosedRetention]; a negative
	// value lets a closed account be deleted at once.
	ClosedRetention time.Duration
	// SelfServiceLimit bounds, per account, what its holders can make the service
	// store with requests that are free: each start of a session, each key that
	// self-service creates, rotates or changes, and each change of a webhook endpoint
	// or message to one that the holder asks for ([Holder.Spend]) spends one event of
	// this token bucket
	// (Burst events at once, refilled at Rate per Per), kept in the rate limiter
	// (Stores.Rates), so that it holds across every instance. A request beyond it is
	// refused with CodeRateLimited and a RetryAfter. Revocations and sign-outs are
	// never refused: each ends what a spent event made. The zero value is
	// [DefaultSelfServiceLimit]; a negative Rate sets no bound.
	SelfServiceLimit driver.Limit
	// RelayInterval is how often the manager publishes again the changes that the
	// journals of the key store and the ledger kept (see package journal): those that
	// an instance stored and did not publish (it died in between) or that an observer
	// deferred (the audit log's or the webhook outbox's store failed). It applies when
	// either store keeps a journal ([journal.KeyStore], [journal.Ledger]), or decorates
	// one that does and says so (driver.Wrapper). The default is
	// [DefaultRelayInterval]; a negative value turns the schedule off (call
	// [Manager.RelayJournal] yourself then: without a relay, the changes an instance
	// did not publish are never published, and a PostgreSQL journal grows without
	// bound; New logs a warning). [Manager.Close] stops it.
	RelayInterval time.Duration
	// Relay tunes the relay: how old a change must be before it is published again
	// (Grace), the claims, the maximum age and the pages (see [journal.RelayOptions]).
	// Nil is the default; its Now and Logger default to the service's clock and
	// Logger.
	Relay *journal.RelayOptions
	// Logger receives the failures of the stores and of the background prune. The
	// default is slog.Default(). Key values are never logged.
	Logger *slog.Logger
}

// A Manager manages the accounts, keys, credits and sessions of one service. It is
// safe for concurrent use.
type Manager struct {
	svc     *tollgate.Service
	events  *event.Bus
	plans   *billing.Plans
	keys    auth.KeyStore
	ledger  driver.Ledger
	blocks  *blocks.Blocks // nil: no credit blocks
	rates   driver.RateLimiter
	auditDB audit.Store // nil: no audit log
	usageDB usage.Store // nil: no usage statistics
	// sessions signs session tokens and ended keeps the ended ones (each nil when the
	// service has none).
	sessions      *auth.Sessions
	ended         auth.SessionStore
	sessionTTL    time.Duration
	subKeysManage bool
	maxOwnKeys    int
	// keyRetention is Options.RevokedKeyRetention, with its default (negative: for
	// ever); stopKeyPrune stops the background prune of revoked keys (nil if none runs).
	keyRetention time.Duration
	stopKeyPrune func()
	selfLimit    driver.Limit // with its default; Rate 0: no budget
	log          *slog.Logger
	closeOnce    sync.Once

	// keyJournal and ledgerJournal are the key store and the ledger when they keep a
	// journal of changes, or the stores they decorate that do (nil otherwise): writes go
	// to keys and ledger, which pass the entry on; relay publishes what they kept, every
	// RelayInterval until stopRelay (nil if it does not run).
	keyJournal    journal.KeyStore
	ledgerJournal journal.Ledger
	relay         *journal.Relay
	stopRelay     func()

	// closedRetention is Options.ClosedRetention, with its default (negative: none).
	closedRetention time.Duration
}

// New returns a Manager of svc's accounts, on svc's stores ([tollgate.Service.Stores]):
// it changes accounts, keys and balances in the key store and the ledger, and keeps the
// self-service budgets in the rate limiter. It starts and ends sessions with svc's
// session tokens ([tollgate.Options.Sessions]). opts may be nil.
//
// An audit log or usage statistics read through opts (Audit, Usage) are written by an
// [audit.Log] or a [usage.Recorder] subscribed to svc's events: subscribe them before
// New, which refuses a store that nothing writes, and before any change is made.
func New(svc *tollgate.Service, opts *Options) (*Manager, error) {
	if svc == nil {
		return nil, errors.New("accounts: New needs a service")
	}
	stores := svc.Stores()
	if opts == nil {
		opts = &Options{}
	}
	switch {
	case opts.Audit != nil && !svc.Events().Wants(event.AccountCreated):
		return nil, errors.New("accounts: Options.Audit is set but nothing records changes in it: subscribe its audit.Log to the service's events (svc.Events().Subscribe(log, log.Kinds()...)) before accounts.New")
	case opts.Usage != nil && !svc.Events().Wants(event.CallFinished):
		return nil, errors.New("accounts: Options.Usage is set but nothing records calls in it: subscribe its usage.Recorder to the service's events (svc.Events().Subscribe(rec, rec.Kinds()...)) before accounts.New")
	}
	if opts.SessionTTL > MaxSessionTTL {
		return nil, fmt.Errorf("accounts: Options.SessionTTL %s is longer than the maximum, %s", opts.SessionTTL, MaxSessionTTL)
	}
	selfLimit, err := selfServiceLimit(opts.SelfServiceLimit)
	if err != nil {
		return nil, err
	}
	m := &Manager{
		svc: svc, events: svc.Events(), plans: svc.Plans(),
		keys: stores.Keys, ledger: stores.Ledger, rates: stores.Rates, blocks: opts.CreditBlocks,
		auditDB: opts.Audit, usageDB: opts.Usage,
		sessionTTL:    cmp.Or(max(opts.SessionTTL, 0), DefaultSessionTTL),
		subKeysManage: opts.SubKeysManageKeys,
		maxOwnKeys:    cmp.Or(opts.MaxOwnKeys, DefaultMaxOwnKeys),
		keyRetention:  cmp.Or(opts.RevokedKeyRetention, DefaultRevokedKeyRetention),
		selfLimit:     selfLimit,
		log:           cmp.Or(opts.Logger, slog.Default()),
	}
	m.sessions, m.ended = svc.Sessions()
	m.closedRetention = cmp.Or(opts.ClosedRetention, DefaultClosedRetention)
	if err := m.startRelay(opts); err != nil {
		return nil, fmt.Errorf("accounts: %w", err)
	}
	if interval := opts.KeyPruneInterval; m.keyRetention > 0 && interval >= 0 {
		if interval == 0 {
			interval = every.TenthOf(m.keyRetention, DefaultKeyPruneInterval)
		}
		m.stopKeyPrune = every.Start(interval, every.Chore{Do: m.PruneKeys,
			Failed: "tollgate: cannot prune revoked keys; the next prune tries again",
			Done:   "tollgate: deleted the keys revoked longer ago than the retention",
			Attrs:  []any{"retention", m.keyRetention.String()},
		}.Run(m.log))
	}
	return m, nil
}

// Close stops the background prune of revoked keys and the relay of the journal. It
// does not close the service nor the stores. Management still works after Close.
func (m *Manager) Close() {
	m.closeOnce.Do(func() {
		if m.stopKeyPrune != nil {
			m.stopKeyPrune()
		}
		if m.stopRelay != nil {
			m.stopRelay()
		}
	})
}

// Service returns the service whose accounts m manages.
func (m *Manager) Service() *tollgate.Service { return m.svc }

// Plans returns the plans an account may be on, sorted by name.
func (m *Manager) Plans() []billing.Plan { return m.plans.All() }

func (m *Manager) now() time.Time { return m.svc.Now() }

// newError returns the error of a refusal: code, and a message that says what to fix.
func newError(code tollgate.Code, msg string, cause error) *tollgate.Error {
	return &tollgate.Error{Code: code, Message: msg, Err: cause}
}

// unavailable is the error of a store that failed with err while serving ctx (see
// package outage): CodeUnavailable, logged once with its reason; CodeInvalidInput for a
// value the store cannot hold. An err that is already an *Error is returned as it is.
func (m *Manager) unavailable(ctx context.Context, what string, err error) *tollgate.Error {
	if e := (*tollgate.Error)(nil); errors.As(err, &e) {
		return e
	}
	v := outage.Judge(ctx, err)
	m.log.Log(ctx, v.Level, v.Log, "store", what, "error", err)
	if v.Invalid {
		return newError(tollgate.CodeInvalidInput, v.Message, err)
	}
	return newError(tollgate.CodeUnavailable, v.Message, err)
}

// restrictionsJSON is r's plain JSON form for an event; nil for no restrictions.
func restrictionsJSON(r auth.Restrictions) json.RawMessage {
	if r.IsZero() {
		return nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil // Restrictions are plain data: this does not happen
	}
	return b
}

// The longest texts that management accepts, in characters.
const (
	maxIDLength     = 64
	maxNameLength   = 64
	maxReasonLength = 500
)

// checkText returns a CodeInvalidInput error naming field unless value is at most max
// characters of printable text ([cleantext.Printable]): valid UTF-8 without NUL or
// other control characters, invisible formatting characters (bidirectional controls,
// zero-width characters) or stacks of combining marks, which would let a key's name
// or a reason display as other text.
func checkText(field, value string, max int) error {
	switch {
	case !utf8.ValidString(value):
		return newError(tollgate.CodeInvalidInput, field+": not valid UTF-8 text", nil)
	case utf8.RuneCountInString(value) > max:
		return newError(tollgate.CodeInvalidInput, fmt.Sprintf("%s: longer than %d characters", field, max), nil)
	case strings.IndexFunc(value, unicode.IsControl) >= 0:
		return newError(tollgate.CodeInvalidInput, field+": contains a control character (a NUL byte, a line break, ...); use printable text", nil)
	case !cleantext.Printable(value):
		return newError(tollgate.CodeInvalidInput, fmt.Sprintf(
			"%s: contains an invisible formatting character (a bidirectional control, a zero-width character) or more than %d combining marks on a letter, which could make it display as other text; use printable text",
			field, cleantext.MaxMarks), nil)
	}
	return nil
}
