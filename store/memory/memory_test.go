package memory_test

import (
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/store/storetest"
)

// TestStores runs the conformance suites on every store of the package, each those its
// interfaces call for (see storetest.Run).
func TestStores(t *testing.T) {
	storetest.Run(t, func(*testing.T) any { return memory.NewKeyStore() })
	storetest.Run(t, func(*testing.T) any { return memory.NewLedger(nil) })
	storetest.Run(t, func(*testing.T) any { return memory.NewRateLimiter() })
	storetest.Run(t, func(*testing.T) any { return memory.NewConcurrencyLimiter() })
	storetest.Run(t, func(*testing.T) any { return memory.NewSessionStore() })
	storetest.Run(t, func(*testing.T) any { return memory.NewAuditStore() })
	storetest.Run(t, func(*testing.T) any { return memory.NewUsageStore() })
	storetest.Run(t, func(*testing.T) any { return memory.NewIdempotencyStore(nil) })
	storetest.Run(t, func(*testing.T) any { return memory.NewOAuthStore() })
	storetest.Run(t, func(*testing.T) any { return memory.NewWebhookStore() })
	storetest.Run(t, func(*testing.T) any { return new(memory.WebhookStore) }) // the zero value
	t.Run("WebhookSweeps", func(t *testing.T) {
		storetest.TestWebhookSweeps(t, func(*testing.T) storetest.SweepStores {
			return storetest.SweepStores{Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil), Webhooks: memory.NewWebhookStore()}
		})
	})
}

// TestLedgerRememberWindow documents the memory ledger's own limit on idempotency. Each
// account remembers every open reservation, but only the ids of its last
// LedgerOptions.Remember settled reservations and adjustments: a replay older than that
// window is no longer recognised, so a replayed reservation is charged again and a
// replayed settlement is an unknown reservation. Stores with durable idempotency records
// (PostgreSQL) have no such window; size Remember above the number of calls an account can
// make while a client may still retry.
func TestLedgerRememberWindow(t *testing.T) {
	ctx := t.Context()
	now := time.Date(2030, time.January, 15, 0, 0, 0, 0, time.UTC)
	p := driver.MonthOf(now)
	l := memory.NewLedger(&memory.LedgerOptions{Remember: 2})
	must(t, l.Open(ctx, driver.Opening{Account: "acme", Balance: 100, Allowance: 100, Period: p}))
	reserve := func(id byte) driver.Balance {
		t.Helper()
		b, err := l.Reserve(ctx, driver.Reservation{Account: "acme", Request: driver.RequestID{id}, APIs: []string{"hash"}, Amount: 10, Period: p, Allowance: 100,
			Now: now, Expires: now.Add(time.Hour)})
		must(t, err)
		return b
	}
	settle := func(id byte) (driver.Balance, error) {
		return l.Settle(ctx, driver.Settlement{Account: "acme", Request: driver.RequestID{id}, Period: p, Allowance: 100, Now: now})
	}
	adjust := func(id byte) driver.Balance {
		t.Helper()
		b, err := l.Adjust(ctx, driver.Adjustment{Account: "acme", Request: driver.RequestID{id}, Amount: 5, Period: p, Allowance: 100, Now: now})
		must(t, err)
		return b
	}
	want := func(step string, b driver.Balance, remaining int64) {
		t.Helper()
		if b.Remaining != remaining {
			t.Errorf("%s: Remaining %d, want %d", step, b.Remaining, remaining)
		}
	}

	// Two reservations, settled: both ids fill the window of two.
	for _, id := range []byte{1, 2} {
		reserve(id)
		_, err := settle(id)
		must(t, err)
	}
	want("replay of reservation 1, inside the window", reserve(1), 80)
	b, err := settle(2)
	must(t, err)
	want("replay of settlement 2, inside the window", b, 80)

	// A third settled reservation pushes id 1 out of the window.
	reserve(3)
	_, err = settle(3)
	must(t, err)
	if _, err := settle(1); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("replay of settlement 1, outside the window: got %v, want store.ErrNotFound", err)
	}
	want("replay of reservation 1, outside the window, is charged again", reserve(1), 60)
	want("replay of reservation 3, inside the window", reserve(3), 60)

	// Open reservations are remembered whatever the window.
	for _, id := range []byte{10, 11, 12, 13} {
		reserve(id)
	}
	want("replay of open reservation 10", reserve(10), 20)

	// Adjustments share the window with settlements.
	want("adjustment 20", adjust(20), 25)
	want("replay of adjustment 20, inside the window", adjust(20), 25)
	for _, id := range []byte{10, 11} {
		_, err := settle(id)
		must(t, err)
	}
	want("replay of adjustment 20, outside the window, is applied again", adjust(20), 30)

	// Voided reservations share the window too: reservations 12 and 13 are still
	// open (with 1, charged again above, which is settled first); once expired, they
	// are voided and remembered as such.
	_, err = settle(1)
	must(t, err)
	now = now.Add(time.Hour)
	for _, id := range []byte{12, 13} {
		if _, err := settle(id); !errors.Is(err, driver.ErrVoided) {
			t.Errorf("settlement of expired reservation %d: got %v, want driver.ErrVoided", id, err)
		}
	}
	// Two adjustments push both out of the window (they were voided together, in no
	// particular order).
	adjust(21)
	adjust(22)
	for _, id := range []byte{12, 13} {
		if _, err := settle(id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("settlement of voided reservation %d, outside the window: got %v, want store.ErrNotFound", id, err)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestLoadManyKeys fills a KeyStore with many accounts and checks that every key
// resolves to its own account afterwards: 100,000 accounts in the full suite
// (testenv.Full), 10,000 otherwise or with -short. BenchmarkLoadKeys1M times the same
// load.
func TestLoadManyKeys(t *testing.T) {
	n := 100_000
	if testing.Short() || !testenv.Full() {
		n = 10_000
	}
	ctx := t.Context()
	s := memory.NewKeyStore()
	created := time.Date(2030, time.January, 15, 0, 0, 0, 0, time.UTC)
	hashes := make([]auth.Hash, n)
	for i := range n {
		id := fmt.Sprintf("acct-%07d", i)
		hashes[i] = auth.HashKey(auth.NewKeyValue())
		err := s.CreateAccount(ctx, auth.Account{ID: id, Plan: "free", CreatedAt: created},
			auth.Key{ID: id + "-primary", AccountID: id, Name: "primary", Primary: true, Hash: hashes[i], CreatedAt: created})
		must(t, err)
	}
	for i, h := range hashes {
		k, a, err := s.Resolve(ctx, h)
		if want := fmt.Sprintf("acct-%07d", i); err != nil || a.ID != want || k.ID != want+"-primary" {
			t.Fatalf("Resolve(hash %d) = key %q of account %q, %v; want key %q of %q", i, k.ID, a.ID, err, want+"-primary", want)
		}
	}
}

func newKeyStore(*testing.B) auth.KeyStore { return memory.NewKeyStore() }

// BenchmarkResolve measures Resolve in stores of 1k, 100k and 1M keys, filled before the
// timer starts, so that the lookup cost can be compared across sizes: with a thousand
// keys in use (visit=1k) and with every key in turn (visit=all, which adds the CPU
// cache misses of a working set larger than the caches).
func BenchmarkResolve(b *testing.B) {
	for _, size := range []struct {
		name string
		keys int
	}{{"keys=1k", 1_000}, {"keys=100k", 100_000}, {"keys=1M", 1_000_000}} {
		// visit=1k: a thousand keys in use, spread over the store (the cost of the
		// lookup itself); visit=all: every key in turn (plus cache misses).
		b.Run(size.name+"/visit=1k", func(b *testing.B) { storetest.BenchmarkKeyStoreResolve(b, newKeyStore, size.keys, 1_000) })
		b.Run(size.name+"/visit=all", func(b *testing.B) { storetest.BenchmarkKeyStoreResolve(b, newKeyStore, size.keys, 0) })
	}
}

// BenchmarkLoadKeys1M measures creating 1,000,000 accounts, each with its primary key, in
// an empty KeyStore: ns/op is one whole load, ns/key the cost per account.
func BenchmarkLoadKeys1M(b *testing.B) {
	storetest.BenchmarkKeyStoreLoad(b, newKeyStore, 1_000_000)
}

func BenchmarkLedger(b *testing.B) {
	storetest.BenchmarkLedger(b, func(*testing.B) driver.Ledger { return memory.NewLedger(nil) })
}

func BenchmarkRateLimiter(b *testing.B) {
	storetest.BenchmarkRateLimiter(b, func(*testing.B) driver.RateLimiter { return memory.NewRateLimiter() })
}

func BenchmarkConcurrencyLimiter(b *testing.B) {
	storetest.BenchmarkConcurrencyLimiter(b, func(*testing.B) driver.ConcurrencyLimiter { return memory.NewConcurrencyLimiter() })
}

// TestLedgerOpenIsSmall checks that an account's balance costs little memory until it is
// used: the idempotency window (LedgerOptions.Remember) fills as requests are settled,
// and is not allocated up front, so a ledger can hold a million idle accounts.
func TestLedgerOpenIsSmall(t *testing.T) {
	const accounts, limit = 1000, 2048 // bytes per account
	ctx := t.Context()
	p := driver.MonthOf(time.Date(2030, time.January, 15, 0, 0, 0, 0, time.UTC))
	l := memory.NewLedger(nil)
	ids := make([]string, accounts)
	for i := range ids {
		ids[i] = fmt.Sprintf("acct-%04d", i)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, id := range ids {
		must(t, l.Open(ctx, driver.Opening{Account: id, Balance: 100, Allowance: 100, Period: p}))
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / accounts; per > limit {
		t.Errorf("Open allocated %d bytes per account, want at most %d", per, limit)
	} else {
		t.Logf("Open allocated %d bytes per account", per)
	}
}

// BenchmarkSweep measures voiding 100,000 expired reservations of 1,000 accounts.
func BenchmarkSweep(b *testing.B) {
	storetest.BenchmarkSweep(b, func(*testing.B) driver.Ledger { return memory.NewLedger(nil) }, 1000, 100_000)
}

// TestRecordsAreNotScanned checks that the records of many accounts add (almost)
// nothing to the heap that the garbage collector scans on every cycle: the stores keep
// them in pointer-free tables, so that a million accounts in memory do not slow every
// collection down. Each store holds 100,000 accounts in the full suite (testenv.Full),
// 10,000 otherwise or with -short, each used once as a call uses it; the scannable heap
// (runtime/metrics /gc/scan/heap:bytes) may grow by at most a few bytes per account.
func TestRecordsAreNotScanned(t *testing.T) {
	n := 100_000
	if testing.Short() || !testenv.Full() {
		n = 10_000
	}
	ctx := t.Context()
	now := time.Date(2030, time.January, 15, 0, 0, 0, 0, time.UTC)
	p := driver.MonthOf(now)
	id := func(i int) string { return fmt.Sprintf("acct-%07d", i) }
	for _, tc := range []struct {
		name string
		fill func(t *testing.T) any // returns the store, kept alive until measured
	}{
		{"KeyStore", func(t *testing.T) any {
			s := memory.NewKeyStore()
			for i := range n {
				var h auth.Hash
				copy(h[:], fmt.Sprintf("%032d", i))
				must(t, s.CreateAccount(ctx, auth.Account{ID: id(i), Plan: "free", CreatedAt: now},
					auth.Key{ID: id(i) + "-primary", AccountID: id(i), Name: "primary", Primary: true, Hash: h, CreatedAt: now}))
			}
			return s
		}},
		{"Ledger", func(t *testing.T) any {
			l := memory.NewLedger(nil)
			for i := range n {
				must(t, l.Open(ctx, driver.Opening{Account: id(i), Balance: 100, Allowance: 100, Period: p}))
				rid := driver.RequestID{byte(i), byte(i >> 8), byte(i >> 16)}
				_, err := l.Reserve(ctx, driver.Reservation{Account: id(i), Request: rid, APIs: []string{"hash"}, Amount: 1,
					Period: p, Allowance: 100, Now: now, Expires: now.Add(time.Minute)})
				must(t, err)
				_, err = l.Settle(ctx, driver.Settlement{Account: id(i), Request: rid, Period: p, Allowance: 100, Now: now})
				must(t, err)
			}
			return l
		}},
		{"RateLimiter", func(t *testing.T) any {
			r := memory.NewRateLimiter()
			for i := range n {
				_, err := r.Allow(ctx, id(i), driver.Limit{Rate: 10, Per: time.Second, Burst: 10}, now)
				must(t, err)
			}
			return r
		}},
		{"ConcurrencyLimiter", func(t *testing.T) any {
			c := memory.NewConcurrencyLimiter()
			for i := range n {
				rid := driver.RequestID{byte(i), byte(i >> 8), byte(i >> 16)}
				_, err := c.Acquire(ctx, id(i), rid, 4, time.Minute, now)
				must(t, err)
				must(t, c.Release(ctx, id(i), rid))
			}
			return c
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := scannableHeap()
			s := tc.fill(t)
			after := scannableHeap()
			runtime.KeepAlive(s)
			per := (float64(after) - float64(before)) / float64(n)
			t.Logf("%d accounts: the scannable heap grew by %.1f bytes per account", n, per)
			if per > 8 {
				t.Errorf("the scannable heap grew by %.1f bytes per account, want at most 8", per)
			}
		})
	}
}

// scannableHeap returns the bytes of the heap that the collector scans, after a
// collection.
func scannableHeap() uint64 {
	runtime.GC()
	m := []metrics.Sample{{Name: "/gc/scan/heap:bytes"}}
	metrics.Read(m)
	return m[0].Value.Uint64()
}

// TestPruneKeysRebuilds prunes most keys of a store, so that it rebuilds its tables,
// and checks that every key left is found whole (by id, by hash, in its account's
// order, with its restrictions, rotation and revision), that the pruned ones are found
// by none of them, and that keys can still be created, rotated and pruned.
func TestPruneKeysRebuilds(t *testing.T) {
	ctx := t.Context()
	s := memory.NewKeyStore()
	t0 := time.Date(2030, time.January, 15, 0, 0, 0, 0, time.UTC)
	r, err := auth.NewRestrictions(auth.RestrictionSpec{APIs: []string{"hash"}})
	must(t, err)
	type kept struct {
		key  auth.Key
		hash auth.Hash
	}
	var keep []kept
	var gone []auth.Key
	for a := range 10 {
		acct := fmt.Sprintf("acct-%d", a)
		must(t, s.CreateAccount(ctx, auth.Account{ID: acct, Plan: "free", Restrictions: r, CreatedAt: t0},
			auth.Key{ID: acct + "-primary", AccountID: acct, Name: "primary", Primary: true, Hash: auth.HashKey(auth.NewKeyValue()), CreatedAt: t0}))
		for i := range 300 {
			k := auth.Key{ID: fmt.Sprintf("%s-k%03d", acct, i), AccountID: acct, Name: fmt.Sprintf("k%d", i), Restrictions: r,
				Hash: auth.HashKey(auth.NewKeyValue()), CreatedAt: t0.Add(time.Duration(i) * time.Second)}
			must(t, s.CreateKey(ctx, k, auth.KeyLimit{}))
			switch {
			case i%10 == 0: // kept, rotated
				h := auth.HashKey(auth.NewKeyValue())
				k, err = s.RotateKey(ctx, k.ID, auth.AnyRevision, h, t0.Add(time.Hour))
				must(t, err)
				keep = append(keep, kept{k, h})
			case i%10 == 1: // kept, revoked after the instant
				k, err = s.RevokeKey(ctx, k.ID, auth.AnyRevision, t0.Add(3*time.Hour))
				must(t, err)
				keep = append(keep, kept{k, k.Hash})
			default:
				_, err = s.RevokeKey(ctx, k.ID, auth.AnyRevision, t0.Add(time.Hour))
				must(t, err)
				gone = append(gone, k)
			}
		}
	}
	n, err := s.PruneKeys(ctx, t0.Add(2*time.Hour))
	must(t, err)
	if n != int64(len(gone)) {
		t.Fatalf("PruneKeys: %d, want %d", n, len(gone))
	}
	for _, k := range gone {
		if _, err := s.Key(ctx, k.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Key of pruned %s: %v", k.ID, err)
		}
		if _, _, err := s.Resolve(ctx, k.Hash); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Resolve of pruned %s: %v", k.ID, err)
		}
	}
	for _, kk := range keep {
		got, err := s.Key(ctx, kk.key.ID)
		must(t, err)
		if !reflect.DeepEqual(got, kk.key) {
			t.Fatalf("Key %s after the rebuild:\n%+v\nwant\n%+v", kk.key.ID, got, kk.key)
		}
		if got, _, err := s.Resolve(ctx, kk.hash); err != nil || got.ID != kk.key.ID {
			t.Fatalf("Resolve of %s: %s, %v", kk.key.ID, got.ID, err)
		}
	}
	page, err := s.Keys(ctx, auth.KeyQuery{Account: "acct-3", Limit: auth.MaxKeyPage})
	must(t, err)
	if len(page.Keys) != 61 || page.Keys[0].ID != "acct-3-primary" || page.Keys[1].ID != "acct-3-k000" || page.Keys[60].ID != "acct-3-k291" {
		t.Errorf("Keys of acct-3 after the rebuild: %d keys, want the primary key and 60 others in order", len(page.Keys))
	}
	a, err := s.Account(ctx, "acct-3")
	if must(t, err); !reflect.DeepEqual(a.Restrictions, r) {
		t.Errorf("the account's restrictions after the rebuild: %+v", a.Restrictions)
	}
	k := auth.Key{ID: "acct-3-new", AccountID: "acct-3", Name: "new", Hash: auth.HashKey(auth.NewKeyValue()), CreatedAt: t0}
	must(t, s.CreateKey(ctx, k, auth.KeyLimit{Max: 62}))
	if err := s.CreateKey(ctx, auth.Key{ID: "acct-3-over", AccountID: "acct-3", Name: "over", Hash: auth.HashKey(auth.NewKeyValue())}, auth.KeyLimit{Max: 62}); !errors.Is(err, auth.ErrTooManyKeys) {
		t.Errorf("CreateKey past the limit after the rebuild: %v", err)
	}
	n, err = s.PruneKeys(ctx, t0.Add(4*time.Hour))
	must(t, err)
	if n != 300 {
		t.Errorf("the second PruneKeys: %d, want 300 (the keys revoked after the first instant)", n)
	}
}

// TestDeleteAccountsRebuilds deletes most accounts of a store, so that it rebuilds its
// tables, and checks that every account left is found whole (with its lifecycle fields
// and revision, its keys, in the listing, by the key check), that the deleted ones and
// their keys are found by none of them, and that their ids can be taken again.
func TestDeleteAccountsRebuilds(t *testing.T) {
	ctx := t.Context()
	s := memory.NewKeyStore()
	t0 := time.Date(2030, time.January, 15, 0, 0, 0, 0, time.UTC)
	type kept struct {
		acct auth.Account
		key  auth.Key
	}
	var keep []kept
	var gone []kept
	for i := range 2100 {
		id := fmt.Sprintf("acct-%04d", i)
		k := auth.Key{ID: id + "-primary", AccountID: id, Name: "primary", Primary: true, Hash: auth.HashKey(auth.NewKeyValue()), CreatedAt: t0}
		must(t, s.CreateAccount(ctx, auth.Account{ID: id, Plan: "free", CreatedAt: t0, BillingAnchor: t0, PendingPlan: "pro", PendingPlanAt: t0.Add(time.Hour)}, k))
		a, err := s.Account(ctx, id)
		must(t, err)
		u := a.Update()
		u.State, u.StateChangedAt = auth.AccountSuspended, t0.Add(time.Minute)
		if i%3 != 0 {
			u.State = auth.AccountClosed
		}
		a, err = s.UpdateAccount(ctx, u)
		must(t, err)
		if i%3 != 0 && i < 2090 { // two thirds: more than are left, and more than minDead
			must(t, s.DeleteAccount(ctx, id))
			gone = append(gone, kept{a, k})
		} else {
			keep = append(keep, kept{a, k})
		}
	}
	for _, g := range gone {
		if _, err := s.Account(ctx, g.acct.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Account of deleted %s: %v", g.acct.ID, err)
		}
		if _, _, err := s.Resolve(ctx, g.key.Hash); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Resolve of a key of deleted %s: %v", g.acct.ID, err)
		}
	}
	var listed []auth.Account
	q := auth.AccountQuery{Limit: auth.MaxAccountPage}
	for {
		page, err := s.Accounts(ctx, q)
		must(t, err)
		listed = append(listed, page.Accounts...)
		if q.After = page.Next; q.After == "" {
			break
		}
	}
	if len(listed) != len(keep) {
		t.Fatalf("Accounts after the deletions: %d accounts, want %d", len(listed), len(keep))
	}
	for i, kk := range keep {
		if !reflect.DeepEqual(listed[i], kk.acct) {
			t.Fatalf("account #%d after the rebuild:\n%+v\nwant\n%+v", i, listed[i], kk.acct)
		}
		got, a, err := s.Resolve(ctx, kk.key.Hash)
		if err != nil || got.ID != kk.key.ID || !reflect.DeepEqual(a, kk.acct) {
			t.Fatalf("Resolve of %s: %s, %+v, %v", kk.key.ID, got.ID, a, err)
		}
		st, err := s.CheckKey(ctx, driver.KeyCheck{Account: kk.acct.ID, KeyID: kk.key.ID, Hash: kk.key.Hash, AccountRevision: kk.acct.Revision})
		if err != nil || st != driver.KeyLive {
			t.Fatalf("CheckKey of %s: %d, %v", kk.key.ID, st, err)
		}
	}
	g := gone[0]
	must(t, s.CreateAccount(ctx, auth.Account{ID: g.acct.ID, Plan: "free", CreatedAt: t0}, g.key))
	if a, err := s.Account(ctx, g.acct.ID); err != nil || a.Revision != 0 || a.State != auth.AccountActive {
		t.Errorf("an account created again with a deleted id: %+v, %v", a, err)
	}
}
