package metrics

import (
	"context"
	"errors"
	"path"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/idempotency"
	"github.com/tollgate-dev/tollgate/store"
)

// Stores returns st with each of its store values decorated so that the latency of
// every operation, and its failure, is counted: tollgate_store_operation_duration_seconds
// and tollgate_store_errors_total, by store and operation. Pass what it returns to
// tollgate.New in place of st.
//
// A value that is a whole store (an auth.KeyStore, a driver.Ledger, a
// driver.RateLimiter and a driver.ConcurrencyLimiter, as postgres.Store and
// redis.Store are) is decorated once, by one value that plays every role the store
// plays in st and has exactly the optional interfaces of package billing/driver the
// store has (driver.Admitter, driver.Sweeper, driver.KeyChecker): the service still
// admits a call in one round trip to it (see driver.Wrapper, which the decorator
// implements). Any other value (the memory stores, one per role) is decorated in its
// role, with the optional interfaces of that role it has: driver.KeyChecker for a key
// store, driver.Sweeper for a ledger. Such a value that is an Admitter in several roles
// (a host's store of rate limits and slots, say) is decorated per role, and admitted in
// one round trip per role: the service warns of it when it is made. A store is named by
// the package of its type, through any decorators of its own: "memory", "postgres",
// "redis".
//
// The latency is taken on [Options.Now] around each call to the store, failed or not.
// A failure is an error that is none of the answers a store gives (not found, a
// conflict, credits short, a voided reservation, ...): "invalid" for a value the store
// cannot hold (store.ErrInvalid), "canceled" and "timeout" for an operation whose
// context ended, "unavailable" for anything else.
func (m *Metrics) Stores(st tollgate.Stores) tollgate.Stores {
	var wholes []struct{ inner, w any }
	whole := func(s any) (any, bool) {
		_, k := s.(auth.KeyStore)
		_, l := s.(driver.Ledger)
		_, r := s.(driver.RateLimiter)
		_, c := s.(driver.ConcurrencyLimiter)
		if !k || !l || !r || !c {
			return nil, false
		}
		for _, x := range wholes {
			if sameValue(x.inner, s) {
				return x.w, true
			}
		}
		w := m.wrapWhole(s)
		wholes = append(wholes, struct{ inner, w any }{s, w})
		return w, true
	}
	out := st
	if st.Keys != nil {
		if w, ok := whole(st.Keys); ok {
			out.Keys = w.(auth.KeyStore)
		} else {
			out.Keys = m.wrapKeys(st.Keys)
		}
	}
	if st.Ledger != nil {
		if w, ok := whole(st.Ledger); ok {
			out.Ledger = w.(driver.Ledger)
		} else {
			out.Ledger = m.wrapLedger(st.Ledger)
		}
	}
	if st.Rates != nil {
		if w, ok := whole(st.Rates); ok {
			out.Rates = w.(driver.RateLimiter)
		} else {
			out.Rates = &struct {
				unwrapper
				ratesPart
			}{unwrapper{st.Rates}, ratesPart{m.opsOf(st.Rates), st.Rates}}
		}
	}
	if st.Slots != nil {
		if w, ok := whole(st.Slots); ok {
			out.Slots = w.(driver.ConcurrencyLimiter)
		} else {
			out.Slots = &struct {
				unwrapper
				slotsPart
			}{unwrapper{st.Slots}, slotsPart{m.opsOf(st.Slots), st.Slots}}
		}
	}
	return out
}

// IdempotencyStore returns s decorated as [Metrics.Stores] decorates the service's
// stores, for tollgate.IdempotencyOptions.Store.
func (m *Metrics) IdempotencyStore(s idempotency.Store) idempotency.Store {
	return &idempotencyStore{ops: m.opsOf(s), s: s}
}

// SessionStore returns s decorated as [Metrics.Stores] decorates the service's
// stores, for tollgate.Options.SessionStore.
func (m *Metrics) SessionStore(s auth.SessionStore) auth.SessionStore {
	return &sessionStore{ops: m.opsOf(s), s: s}
}

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

// An op is an operation of a store.
type op uint8

const (
	opCreateAccount op = iota
	opAccount
	opUpdateAccount
	opAccounts
	opDeleteAccount
	opCreateKey
	opKey
	opKeys
	opPruneKeys
	opResolve
	opRotateKey
	opRevokeKey
	opUpdateKey
	opCheckKey
	opOpen
	opReserve
	opSettle
	opAdjust
	opBalance
	opUsage
	opSweep
	opAllow
	opAllowN
	opPeek
	opAcquire
	opRelease
	opRenew
	opInUse
	opAdmit
	opClose
	opClaim
	opPreview
	opMarkSettling
	opComplete
	opAbandon
	opEndSession
	opSessionEnded
	numOps
)

// opNames are the values of the operation label.
var opNames = [numOps]string{
	opCreateAccount: "create_account", opAccount: "account", opUpdateAccount: "update_account",
	opAccounts: "accounts", opDeleteAccount: "delete_account", opCreateKey: "create_key", opKey: "key",
	opKeys: "keys", opPruneKeys: "prune_keys", opResolve: "resolve", opRotateKey: "rotate_key",
	opRevokeKey: "revoke_key", opUpdateKey: "update_key", opCheckKey: "check_key",
	opOpen: "open", opReserve: "reserve", opSettle: "settle", opAdjust: "adjust", opBalance: "balance",
	opUsage: "usage", opSweep: "sweep",
	opAllow: "allow", opAllowN: "allow_n", opPeek: "peek",
	opAcquire: "acquire", opRelease: "release", opRenew: "renew", opInUse: "in_use",
	opAdmit: "admit", opClose: "close",
	opClaim: "claim", opPreview: "preview", opMarkSettling: "mark_settling", opComplete: "complete", opAbandon: "abandon",
	opEndSession: "end_session", opSessionEnded: "session_ended",
}

// opSeries are the series of one store's operations, each made at its first use so
// that an operation a store never performs exposes nothing.
type opSeries struct {
	m    *Metrics
	name string
	ops  [numOps]atomic.Pointer[prometheus.Observer]
}

func (m *Metrics) opsOf(s any) *opSeries { return &opSeries{m: m, name: storeName(s)} }

// start returns the time an operation starts.
func (s *opSeries) start() time.Time { return s.m.now() }

// done counts an operation that started at start and ended with err.
func (s *opSeries) done(o op, start time.Time, err error) {
	seconds := s.ops[o].Load()
	if seconds == nil {
		// Two goroutines may both get here: WithLabelValues gives them the same series.
		obs := s.m.storeOps.WithLabelValues(s.name, opNames[o])
		seconds = &obs
		s.ops[o].Store(seconds)
	}
	(*seconds).Observe(s.m.since(start).Seconds())
	if err != nil {
		if kind := failure(err); kind != "" {
			s.m.storeErrors.WithLabelValues(s.name, opNames[o], kind).Inc()
		}
	}
}

// timed runs f, operation o of the store, timed.
func timed[T any](s *opSeries, o op, f func() (T, error)) (T, error) {
	start := s.start()
	v, err := f()
	s.done(o, start, err)
	return v, err
}

// run runs f, operation o of the store, timed.
func (s *opSeries) run(o op, f func() error) error {
	start := s.start()
	err := f()
	s.done(o, start, err)
	return err
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

// wrapWhole decorates a whole store, with the optional interfaces it has.
func (m *Metrics) wrapWhole(s any) any {
	ops := m.opsOf(s)
	w := whole{unwrapper{s}, keysPart{ops, s.(auth.KeyStore)}, ledgerPart{ops, s.(driver.Ledger)},
		ratesPart{ops, s.(driver.RateLimiter)}, slotsPart{ops, s.(driver.ConcurrencyLimiter)}}
	a, isA := s.(driver.Admitter)
	sw, isS := s.(driver.Sweeper)
	c, isC := s.(driver.KeyChecker)
	ap, sp, cp := admitPart{ops, a}, sweepPart{ops, sw}, checkPart{ops, c}
	switch {
	case isA && isS && isC:
		return &struct {
			whole
			admitPart
			sweepPart
			checkPart
		}{w, ap, sp, cp}
	case isA && isS:
		return &struct {
			whole
			admitPart
			sweepPart
		}{w, ap, sp}
	case isA && isC:
		return &struct {
			whole
			admitPart
			checkPart
		}{w, ap, cp}
	case isS && isC:
		return &struct {
			whole
			sweepPart
			checkPart
		}{w, sp, cp}
	case isA:
		return &struct {
			whole
			admitPart
		}{w, ap}
	case isS:
		return &struct {
			whole
			sweepPart
		}{w, sp}
	case isC:
		return &struct {
			whole
			checkPart
		}{w, cp}
	}
	return &w
}

// wrapKeys decorates a key store that is not a whole store.
func (m *Metrics) wrapKeys(s auth.KeyStore) auth.KeyStore {
	ops := m.opsOf(s)
	if c, ok := s.(driver.KeyChecker); ok {
		return &struct {
			unwrapper
			keysPart
			checkPart
		}{unwrapper{s}, keysPart{ops, s}, checkPart{ops, c}}
	}
	return &struct {
		unwrapper
		keysPart
	}{unwrapper{s}, keysPart{ops, s}}
}

// wrapLedger decorates a ledger that is not a whole store.
func (m *Metrics) wrapLedger(s driver.Ledger) driver.Ledger {
	ops := m.opsOf(s)
	if sw, ok := s.(driver.Sweeper); ok {
		return &struct {
			unwrapper
			ledgerPart
			sweepPart
		}{unwrapper{s}, ledgerPart{ops, s}, sweepPart{ops, sw}}
	}
	return &struct {
		unwrapper
		ledgerPart
	}{unwrapper{s}, ledgerPart{ops, s}}
}

// A decorator is made of parts, one per interface it forwards: the unwrapper (which
// makes it a driver.Wrapper), the parts of the roles, and those of the optional
// interfaces. Its type has the parts of the interfaces the store it decorates has, and
// no other, so that what the service (or any code) finds on it by a type assertion is
// what it would find on the store.
type unwrapper struct{ inner any }

// Unwrap returns the store decorated (see driver.Wrapper).
func (u unwrapper) Unwrap() any { return u.inner }

// whole is the decorator of a whole store, without its optional interfaces.
type whole struct {
	unwrapper
	keysPart
	ledgerPart
	ratesPart
	slotsPart
}

// keysPart forwards auth.KeyStore.
type keysPart struct {
	ops *opSeries
	s   auth.KeyStore
}

func (x keysPart) CreateAccount(ctx context.Context, a auth.Account, primary auth.Key) error {
	return x.ops.run(opCreateAccount, func() error { return x.s.CreateAccount(ctx, a, primary) })
}

func (x keysPart) Account(ctx context.Context, id string) (auth.Account, error) {
	return timed(x.ops, opAccount, func() (auth.Account, error) { return x.s.Account(ctx, id) })
}

func (x keysPart) UpdateAccount(ctx context.Context, u auth.AccountUpdate) (auth.Account, error) {
	return timed(x.ops, opUpdateAccount, func() (auth.Account, error) { return x.s.UpdateAccount(ctx, u) })
}

func (x keysPart) Accounts(ctx context.Context, q auth.AccountQuery) (auth.AccountPage, error) {
	return timed(x.ops, opAccounts, func() (auth.AccountPage, error) { return x.s.Accounts(ctx, q) })
}

func (x keysPart) DeleteAccount(ctx context.Context, id string) error {
	return x.ops.run(opDeleteAccount, func() error { return x.s.DeleteAccount(ctx, id) })
}

func (x keysPart) CreateKey(ctx context.Context, k auth.Key, limit auth.KeyLimit) error {
	return x.ops.run(opCreateKey, func() error { return x.s.CreateKey(ctx, k, limit) })
}

func (x keysPart) Key(ctx context.Context, id string) (auth.Key, error) {
	return timed(x.ops, opKey, func() (auth.Key, error) { return x.s.Key(ctx, id) })
}

func (x keysPart) Keys(ctx context.Context, q auth.KeyQuery) (auth.KeyPage, error) {
	return timed(x.ops, opKeys, func() (auth.KeyPage, error) { return x.s.Keys(ctx, q) })
}

func (x keysPart) PruneKeys(ctx context.Context, before time.Time) (int64, error) {
	return timed(x.ops, opPruneKeys, func() (int64, error) { return x.s.PruneKeys(ctx, before) })
}

func (x keysPart) Resolve(ctx context.Context, h auth.Hash) (auth.Key, auth.Account, error) {
	t := x.ops.start()
	k, a, err := x.s.Resolve(ctx, h)
	x.ops.done(opResolve, t, err)
	return k, a, err
}

func (x keysPart) RotateKey(ctx context.Context, id string, rev int64, h auth.Hash, at time.Time) (auth.Key, error) {
	return timed(x.ops, opRotateKey, func() (auth.Key, error) { return x.s.RotateKey(ctx, id, rev, h, at) })
}

func (x keysPart) RevokeKey(ctx context.Context, id string, rev int64, at time.Time) (auth.Key, error) {
	return timed(x.ops, opRevokeKey, func() (auth.Key, error) { return x.s.RevokeKey(ctx, id, rev, at) })
}

func (x keysPart) UpdateKey(ctx context.Context, u auth.KeyUpdate) (auth.Key, error) {
	return timed(x.ops, opUpdateKey, func() (auth.Key, error) { return x.s.UpdateKey(ctx, u) })
}

// ledgerPart forwards driver.Ledger.
type ledgerPart struct {
	ops *opSeries
	s   driver.Ledger
}

func (x ledgerPart) Open(ctx context.Context, o driver.Opening) error {
	return x.ops.run(opOpen, func() error { return x.s.Open(ctx, o) })
}

func (x ledgerPart) Reserve(ctx context.Context, r driver.Reservation) (driver.Balance, error) {
	return timed(x.ops, opReserve, func() (driver.Balance, error) { return x.s.Reserve(ctx, r) })
}

func (x ledgerPart) Settle(ctx context.Context, s driver.Settlement) (driver.Balance, error) {
	return timed(x.ops, opSettle, func() (driver.Balance, error) { return x.s.Settle(ctx, s) })
}

func (x ledgerPart) Adjust(ctx context.Context, a driver.Adjustment) (driver.Balance, error) {
	return timed(x.ops, opAdjust, func() (driver.Balance, error) { return x.s.Adjust(ctx, a) })
}

func (x ledgerPart) Balance(ctx context.Context, account string, now time.Time, p driver.Period, allowance int64) (driver.Balance, error) {
	return timed(x.ops, opBalance, func() (driver.Balance, error) { return x.s.Balance(ctx, account, now, p, allowance) })
}

func (x ledgerPart) Usage(ctx context.Context, account string, p driver.Period) (map[string]int64, error) {
	return timed(x.ops, opUsage, func() (map[string]int64, error) { return x.s.Usage(ctx, account, p) })
}

// ratesPart forwards driver.RateLimiter.
type ratesPart struct {
	ops *opSeries
	s   driver.RateLimiter
}

func (x ratesPart) Allow(ctx context.Context, key string, l driver.Limit, now time.Time) (driver.RateDecision, error) {
	return timed(x.ops, opAllow, func() (driver.RateDecision, error) { return x.s.Allow(ctx, key, l, now) })
}

func (x ratesPart) AllowN(ctx context.Context, key string, l driver.Limit, n int, now time.Time) (driver.RateDecision, error) {
	return timed(x.ops, opAllowN, func() (driver.RateDecision, error) { return x.s.AllowN(ctx, key, l, n, now) })
}

func (x ratesPart) Peek(ctx context.Context, key string, l driver.Limit, now time.Time) (driver.RateDecision, error) {
	return timed(x.ops, opPeek, func() (driver.RateDecision, error) { return x.s.Peek(ctx, key, l, now) })
}

// slotsPart forwards driver.ConcurrencyLimiter.
type slotsPart struct {
	ops *opSeries
	s   driver.ConcurrencyLimiter
}

func (x slotsPart) Acquire(ctx context.Context, key string, holder driver.RequestID, ceiling int, lease time.Duration, now time.Time) (driver.SlotDecision, error) {
	return timed(x.ops, opAcquire, func() (driver.SlotDecision, error) { return x.s.Acquire(ctx, key, holder, ceiling, lease, now) })
}

func (x slotsPart) Release(ctx context.Context, key string, holder driver.RequestID) error {
	return x.ops.run(opRelease, func() error { return x.s.Release(ctx, key, holder) })
}

func (x slotsPart) Renew(ctx context.Context, key string, holder driver.RequestID, lease time.Duration, now time.Time) error {
	return x.ops.run(opRenew, func() error { return x.s.Renew(ctx, key, holder, lease, now) })
}

func (x slotsPart) InUse(ctx context.Context, key string, now time.Time) (int, error) {
	return timed(x.ops, opInUse, func() (int, error) { return x.s.InUse(ctx, key, now) })
}

// admitPart forwards driver.Admitter.
type admitPart struct {
	ops *opSeries
	s   driver.Admitter
}

func (p admitPart) Admit(ctx context.Context, s driver.Step) (driver.StepResult, error) {
	return timed(p.ops, opAdmit, func() (driver.StepResult, error) { return p.s.Admit(ctx, s) })
}

func (p admitPart) Close(ctx context.Context, c driver.Closing) (driver.Balance, error) {
	return timed(p.ops, opClose, func() (driver.Balance, error) { return p.s.Close(ctx, c) })
}

// sweepPart forwards driver.Sweeper.
type sweepPart struct {
	ops *opSeries
	s   driver.Sweeper
}

func (p sweepPart) Sweep(ctx context.Context, now time.Time, limit int) (int, error) {
	return timed(p.ops, opSweep, func() (int, error) { return p.s.Sweep(ctx, now, limit) })
}

// checkPart forwards driver.KeyChecker.
type checkPart struct {
	ops *opSeries
	s   driver.KeyChecker
}

func (p checkPart) CheckKey(ctx context.Context, c driver.KeyCheck) (driver.KeyState, error) {
	return timed(p.ops, opCheckKey, func() (driver.KeyState, error) { return p.s.CheckKey(ctx, c) })
}

// idempotencyStore decorates an idempotency.Store.
type idempotencyStore struct {
	ops *opSeries
	s   idempotency.Store
}

// Unwrap returns the store s decorates.
func (s *idempotencyStore) Unwrap() any { return s.s }

func (s *idempotencyStore) Claim(ctx context.Context, c idempotency.Claim) (idempotency.Record, error) {
	return timed(s.ops, opClaim, func() (idempotency.Record, error) { return s.s.Claim(ctx, c) })
}

func (s *idempotencyStore) Preview(ctx context.Context, c idempotency.Claim) (idempotency.Record, error) {
	return timed(s.ops, opPreview, func() (idempotency.Record, error) { return s.s.Preview(ctx, c) })
}

func (s *idempotencyStore) MarkSettling(ctx context.Context, id idempotency.ID, token idempotency.Token, now time.Time) error {
	return s.ops.run(opMarkSettling, func() error { return s.s.MarkSettling(ctx, id, token, now) })
}

func (s *idempotencyStore) Complete(ctx context.Context, id idempotency.ID, token idempotency.Token, answer []byte) error {
	return s.ops.run(opComplete, func() error { return s.s.Complete(ctx, id, token, answer) })
}

func (s *idempotencyStore) Abandon(ctx context.Context, id idempotency.ID, token idempotency.Token) error {
	return s.ops.run(opAbandon, func() error { return s.s.Abandon(ctx, id, token) })
}

// sessionStore decorates an auth.SessionStore.
type sessionStore struct {
	ops *opSeries
	s   auth.SessionStore
}

// Unwrap returns the store s decorates.
func (s *sessionStore) Unwrap() any { return s.s }

func (s *sessionStore) EndSession(ctx context.Context, id string, expires, now time.Time) error {
	return s.ops.run(opEndSession, func() error { return s.s.EndSession(ctx, id, expires, now) })
}

func (s *sessionStore) SessionEnded(ctx context.Context, id string) (bool, error) {
	return timed(s.ops, opSessionEnded, func() (bool, error) { return s.s.SessionEnded(ctx, id) })
}
