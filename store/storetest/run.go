package storetest

import (
	"testing"

	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/health"
	"github.com/tollgate-dev/tollgate/idempotency"
	"github.com/tollgate-dev/tollgate/journal"
	"github.com/tollgate-dev/tollgate/oauth/oauthstore"
	"github.com/tollgate-dev/tollgate/retention"
	"github.com/tollgate-dev/tollgate/usage"
	"github.com/tollgate-dev/tollgate/webhook"
)

// Run runs every suite that the interfaces of a store call for, as fstest.TestFS checks
// a file system: newStore returns the store, as any, and Run runs a suite, as a subtest
// named after it, for each interface it implements:
//
//	auth.KeyStore                       KeyStore
//	auth.KeyStore and auth.KeyExpiries  KeyExpiries
//	driver.KeyChecker                   KeyChecker (with the KeyStore it must also be)
//	driver.Ledger (and driver.Sweeper)  Ledger
//	driver.Ledger and driver.Sweeper    Sweepers (one store value in every instance;
//	                                    TestSweepers takes several, with a count of
//	                                    round trips)
//	driver.Ledger and                   Compactor
//	retention.Compactor
//	driver.RateLimiter                  RateLimiter
//	driver.ConcurrencyLimiter           ConcurrencyLimiter
//	driver.Admitter                     Admitter, in every role the store plays
//	auth.SessionStore                   SessionStore
//	audit.Store                         AuditStore
//	usage.Store                         UsageStore
//	idempotency.Store                   IdempotencyStore
//	oauthstore.Store                    OAuthStore
//	webhook.Store                       Webhooks
//	health.Pinger                       Pinger (besides the others: no store is only a Pinger)
//	auth.KeyStore, auth.KeyExpiries,    WebhookSweeps (the stores of the webhooks'
//	driver.Ledger and webhook.Store     sweeps in one value; TestWebhookSweeps
//	                                    takes them as separate values)
//	journal.KeyStore                    KeyJournal
//	journal.Ledger                      LedgerJournal
//
// so that a store's test is one call per store value, and adding an interface to a store
// adds its suite. Run calls newStore once to learn the interfaces, and then once per
// subtest, as every suite does; the suites run one after the other, the subtests of each
// in parallel. A store that implements none of the interfaces, or a KeyChecker that is
// not the KeyStore it checks, fails the test: run the suites it needs one by one then.
//
// The suites also run alone (TestKeyStore, TestLedger, ...), for a store value in fewer
// roles than its type implements: an Admitter holding only the limits, say.
func Run(t *testing.T, newStore func(t *testing.T) any) {
	t.Helper()
	probe := newStore(t)
	if is[driver.KeyChecker](probe) && !is[auth.KeyStore](probe) {
		t.Fatalf("storetest.Run: %T is a driver.KeyChecker but no auth.KeyStore: run TestKeyChecker with the key store it checks", probe)
	}
	ran := false
	for _, s := range suites {
		if s.is(probe) {
			ran = ran || s.name != "Pinger"
			t.Run(s.name, func(t *testing.T) { s.run(t, newStore) })
		}
	}
	if !ran {
		t.Fatalf("storetest.Run: %T implements none of the store interfaces (auth.KeyStore, driver.Ledger, audit.Store, ...)", probe)
	}
}

// suites are the suites Run knows, in the order it runs them.
var suites = []struct {
	name string
	is   func(s any) bool
	run  func(t *testing.T, newStore func(*testing.T) any)
}{
	{"KeyStore", is[auth.KeyStore], func(t *testing.T, n func(*testing.T) any) { TestKeyStore(t, as[auth.KeyStore](n)) }},
	{"KeyExpiries", isBoth[auth.KeyStore, auth.KeyExpiries], func(t *testing.T, n func(*testing.T) any) {
		TestKeyExpiries(t, as[auth.KeyStore](n))
	}},
	{"KeyChecker", is[driver.KeyChecker], func(t *testing.T, n func(*testing.T) any) {
		TestKeyChecker(t, func(t *testing.T) (auth.KeyStore, driver.KeyChecker) {
			s := n(t)
			return s.(auth.KeyStore), s.(driver.KeyChecker)
		})
	}},
	{"Ledger", is[driver.Ledger], func(t *testing.T, n func(*testing.T) any) { TestLedger(t, as[driver.Ledger](n)) }},
	{"Compactor", isBoth[driver.Ledger, retention.Compactor], func(t *testing.T, n func(*testing.T) any) {
		TestCompactor(t, as[CompactingLedger](n))
	}},
	{"Roller", isBoth[driver.Ledger, driver.Roller], func(t *testing.T, n func(*testing.T) any) { TestRoller(t, as[driver.Ledger](n)) }},
	{"RateLimiter", is[driver.RateLimiter], func(t *testing.T, n func(*testing.T) any) { TestRateLimiter(t, as[driver.RateLimiter](n)) }},
	{"ConcurrencyLimiter", is[driver.ConcurrencyLimiter], func(t *testing.T, n func(*testing.T) any) {
		TestConcurrencyLimiter(t, as[driver.ConcurrencyLimiter](n))
	}},
	{"Admitter", is[driver.Admitter], func(t *testing.T, n func(*testing.T) any) {
		TestAdmitter(t, func(t *testing.T) AdmitterStores { return rolesOf(n(t)) })
	}},
	{"SessionStore", is[auth.SessionStore], func(t *testing.T, n func(*testing.T) any) { TestSessionStore(t, as[auth.SessionStore](n)) }},
	{"AuditStore", is[audit.Store], func(t *testing.T, n func(*testing.T) any) { TestAuditStore(t, as[audit.Store](n)) }},
	{"UsageStore", is[usage.Store], func(t *testing.T, n func(*testing.T) any) { TestUsageStore(t, as[usage.Store](n)) }},
	{"IdempotencyStore", is[idempotency.Store], func(t *testing.T, n func(*testing.T) any) {
		TestIdempotencyStore(t, as[idempotency.Store](n))
	}},
	{"OAuthStore", is[oauthstore.Store], func(t *testing.T, n func(*testing.T) any) { TestOAuthStore(t, as[oauthstore.Store](n)) }},
	{"Webhooks", is[webhook.Store], func(t *testing.T, n func(*testing.T) any) { TestWebhooks(t, as[webhook.Store](n)) }},
	{"Pinger", is[health.Pinger], func(t *testing.T, n func(*testing.T) any) { TestPinger(t, as[health.Pinger](n)) }},
	{"WebhookSweeps", isSweepStores, func(t *testing.T, n func(*testing.T) any) {
		TestWebhookSweeps(t, func(t *testing.T) SweepStores {
			s := n(t)
			return SweepStores{Keys: s.(auth.KeyStore), Ledger: s.(driver.Ledger), Webhooks: s.(webhook.Store)}
		})
	}},
	{"KeyJournal", is[journal.KeyStore], func(t *testing.T, n func(*testing.T) any) { TestKeyJournal(t, as[journal.KeyStore](n)) }},
	{"Sweepers", isBoth[driver.Ledger, driver.Sweeper], func(t *testing.T, n func(*testing.T) any) {
		TestSweepers(t, func(t *testing.T, k int) SweepInstances {
			l := n(t).(driver.Ledger)
			ls := make([]driver.Ledger, k)
			for i := range ls {
				ls[i] = l
			}
			return SweepInstances{Ledgers: ls}
		})
	}},
	{"LedgerJournal", is[journal.Ledger], func(t *testing.T, n func(*testing.T) any) { TestLedgerJournal(t, as[journal.Ledger](n)) }},
}

// is reports whether s implements I.
func is[I any](s any) bool {
	_, ok := s.(I)
	return ok
}

// isSweepStores reports whether s is every store of the webhooks' sweeps.
func isSweepStores(s any) bool {
	return isBoth[auth.KeyStore, auth.KeyExpiries](s) && isBoth[driver.Ledger, webhook.Store](s)
}

// isBoth reports whether s implements I and J.
func isBoth[I, J any](s any) bool { return is[I](s) && is[J](s) }

// as returns newStore's stores as I.
func as[I any](newStore func(*testing.T) any) func(*testing.T) I {
	return func(t *testing.T) I { return newStore(t).(I) }
}

// rolesOf returns an Admitter in every role it plays.
func rolesOf(s any) AdmitterStores {
	r := AdmitterStores{Admitter: s.(driver.Admitter)}
	r.Keys, _ = s.(auth.KeyStore)
	r.Ledger, _ = s.(driver.Ledger)
	r.Rates, _ = s.(driver.RateLimiter)
	r.Slots, _ = s.(driver.ConcurrencyLimiter)
	return r
}
