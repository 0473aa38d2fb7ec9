package metrics

import (
	"context"
	"errors"
	"path"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/idempotency"
	"github.com/tollgate-dev/tollgate/oauth/oauthstore"
	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/usage"
	"github.com/tollgate-dev/tollgate/webhook"
)

//go:generate go run ./internal/decorgen

// Stores returns st with each of its store values decorated so that the latency of
// every operation, and its failure, is counted: tollgate_store_operation_duration_seconds
// and tollgate_store_errors_total, by store and operation. Pass what it returns to
// tollgate.New in place of st.
//
// A decorator forwards every store interface the store it decorates has (those that
// store/store.go lists, health.Pinger among them), and no other, so that what the
// service, the webhooks, the readiness check or any code finds on it by a type
// assertion is what it would find on the store; it is a driver.Wrapper, whose Unwrap
// returns the store. A value that is a whole store (an auth.KeyStore, a driver.Ledger,
// a driver.RateLimiter and a driver.ConcurrencyLimiter, as postgres.Store and
// redis.Store are) is decorated once, by one value that plays every role the store
// plays (here, and in [Metrics.IdempotencyStore] and [Metrics.SessionStore]) and has
// every interface the store has: the service still admits a call in one round trip
// to it (see driver.Wrapper). Any other value (the memory stores, one per role) is
// decorated in its role, with the interfaces of that role it has: auth.KeyExpiries,
// driver.KeyChecker and journal.Store for a key store, driver.Sweeper and
// journal.Store for a ledger, health.Pinger for every one. Such a value that is an
// Admitter in several roles (a host's store of rate limits and slots, say) is
// decorated per role, and admitted in one round trip per role: the service warns of
// it when it is made. A store is named by the package of its type, through any
// decorators of its own: "memory", "postgres", "redis".
//
// The latency is taken on [Options.Now] around each call to the store, failed or not.
// A failure is an error that is none of the answers a store gives (not found, a
// conflict, credits short, a voided reservation, ...): "invalid" for a value the store
// cannot hold (store.ErrInvalid), "canceled" and "timeout" for an operation whose
// context ended, "unavailable" for anything else.
func (m *Metrics) Stores(st tollgate.Stores) tollgate.Stores {
	out := st
	out.Keys = decorate(m, st.Keys, wrapKeys)
	out.Ledger = decorate(m, st.Ledger, wrapLedger)
	out.Rates = decorate(m, st.Rates, wrapRates)
	out.Slots = decorate(m, st.Slots, wrapSlots)
	return out
}

// IdempotencyStore returns s decorated as [Metrics.Stores] decorates the service's
// stores, for tollgate.IdempotencyOptions.Store.
func (m *Metrics) IdempotencyStore(s idempotency.Store) idempotency.Store {
	return decorate(m, s, wrapIdempotency)
}

// SessionStore returns s decorated as [Metrics.Stores] decorates the service's
// stores, for tollgate.Options.SessionStore.
func (m *Metrics) SessionStore(s auth.SessionStore) auth.SessionStore {
	return decorate(m, s, wrapSessions)
}

// AuditStore returns s decorated as [Metrics.Stores] decorates the service's stores,
// for audit.NewLog and accounts.Options.Audit. Its operations are named "audit_" and
// the method: "audit_append", "audit_list", "audit_prune".
func (m *Metrics) AuditStore(s audit.Store) audit.Store { return decorate(m, s, wrapAudit) }

// UsageStore returns s decorated as [Metrics.Stores] decorates the service's stores,
// for usage.NewRecorder and accounts.Options.Usage. Its operations are named "usage_"
// and the method: "usage_add", "usage_sum", ...
func (m *Metrics) UsageStore(s usage.Store) usage.Store { return decorate(m, s, wrapUsage) }

// WebhookStore returns s decorated as [Metrics.Stores] decorates the service's
// stores, for webhook.New. Its operations are named "webhook_" and the method:
// "webhook_enqueue", "webhook_claim", "webhook_record", ...
func (m *Metrics) WebhookStore(s webhook.Store) webhook.Store {
	return decorate(m, s, wrapWebhooks)
}

// OAuthStore returns s decorated as [Metrics.Stores] decorates the service's stores,
// for the OAuth authorization server (doors.OAuth.Store, oauth.New). Its operations
// are named "oauth_" and the method: "oauth_code", "oauth_token", ...
func (m *Metrics) OAuthStore(s oauthstore.Store) oauthstore.Store {
	return decorate(m, s, wrapOAuth)
}

// decorate returns the decorator of s in the role of I: the decorator of the whole
// store if s is one (the same value whatever the role), else what wrap makes of it.
// A nil store stays nil.
func decorate[I any](m *Metrics, s I, wrap func(*opSeries, any) any) I {
	if any(s) == nil {
		return s
	}
	if w, ok := m.whole(s); ok {
		if d, ok := w.(I); ok {
			return d
		}
	}
	return wrap(m.opsOf(s), s).(I)
}

// whole returns the decorator of s if s is a whole store: an auth.KeyStore, a
// driver.Ledger, a driver.RateLimiter and a driver.ConcurrencyLimiter. The same store
// value gets the same decorator.
func (m *Metrics) whole(s any) (any, bool) {
	_, k := s.(auth.KeyStore)
	_, l := s.(driver.Ledger)
	_, r := s.(driver.RateLimiter)
	_, c := s.(driver.ConcurrencyLimiter)
	if !k || !l || !r || !c {
		return nil, false
	}
	m.wholesMu.Lock()
	defer m.wholesMu.Unlock()
	for _, x := range m.wholes {
		if sameValue(x.inner, s) {
			return x.w, true
		}
	}
	w := wrapWhole(m.opsOf(s), s)
	m.wholes = append(m.wholes, wholeStore{s, w})
	return w, true
}

// A wholeStore is a whole store and its decorator.
type wholeStore struct{ inner, w any }

// sameValue reports whether a and b are the same store value (comparing values whose
// type cannot be compared would panic).
func sameValue(a, b any) bool {
	ta := reflect.TypeOf(a)
	return ta == reflect.TypeOf(b) && ta.Comparable() && a == b
}

// storeName names a store by the package of its type, through its decorators.
func storeName(s any) string {
	for range 100 {
		w, ok := s.(driver.Wrapper)
		if !ok || w.Unwrap() == nil {
			break
		}
		s = w.Unwrap()
	}
	t := reflect.TypeOf(s)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.PkgPath() == "" {
		return "unknown"
	}
	return path.Base(t.PkgPath())
}

// An op is an operation of a store: decorators_gen.go lists them (opNames).
type op uint8

// opSeries are the series of one store's operations, each made at its first use so
// that an operation a store never performs exposes nothing.
type opSeries struct {
	m    *Metrics
	name string
	ops  [numOps]atomic.Pointer[durations]
}

func (m *Metrics) opsOf(s any) *opSeries { return &opSeries{m: m, name: storeName(s)} }

// elapsed returns the time since the metrics were made, on Options.Now. By default it
// reads the monotonic clock alone (time.Since of a time that has a monotonic reading),
// once, where time.Now reads the wall clock too: an operation's latency is the
// difference of two of them.
func (m *Metrics) elapsed() time.Duration {
	if m.now == nil {
		return time.Since(m.epoch)
	}
	return m.now().Sub(m.epoch)
}

// start returns when an operation starts, as elapsed does.
func (s *opSeries) start() time.Duration { return s.m.elapsed() }

// done counts an operation that started at start (see start) and ended with err.
func (s *opSeries) done(o op, start time.Duration, err error) {
	took := s.m.elapsed() - start
	h := s.ops[o].Load()
	if h == nil {
		// Two goroutines may both get here: with gives them the same series.
		h = s.m.storeOps.with(s.name, opNames[o])
		s.ops[o].Store(h)
	}
	h.observe(took)
	if err != nil {
		if kind := failure(err); kind != "" {
			s.m.storeErrors.WithLabelValues(s.name, opNames[o], kind).Inc()
		}
	}
}

// failure returns the kind of failure err is, or "" for an answer of the store.
func failure(err error) string {
	switch {
	case errors.Is(err, store.ErrInvalid):
		return "invalid"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, store.ErrUnavailable):
		return "unavailable"
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrConflict),
		errors.Is(err, driver.ErrInsufficientCredits), errors.Is(err, driver.ErrVoided),
		errors.Is(err, driver.ErrTooManyCredits), errors.Is(err, driver.ErrTooManyGrants),
		errors.Is(err, idempotency.ErrNotHeld):
		return ""
	}
	return "unavailable"
}

// A decorator is made of parts, one per interface it forwards (decorators_gen.go):
// the unwrapper, which makes it a driver.Wrapper, and the part of each store interface
// the store it decorates has, and no other.
type unwrapper struct {
	_     [0]func() // a decorator is compared by its address, which needs no equality of its type
	inner any
}

// Unwrap returns the store decorated (see driver.Wrapper).
func (u unwrapper) Unwrap() any { return u.inner }
