package postgres_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/store/postgres"
)

// hotOptions are the hot-account mitigations, alone and together, and the store without
// any.
var hotOptions = []struct {
	name string
	opts *postgres.Options
}{
	{"unbatched", &postgres.Options{Batch: 1}},
	{"shards=16,unbatched", &postgres.Options{Shards: 16, Batch: 1}},
	{"default (batch=64)", nil},
	{"shards=16+batch=64", &postgres.Options{Shards: 16}},
}

// hotPool returns a pool of 16 connections on a fresh schema whose statements may wait a
// minute for their locks. The hot account's tests check that no call deadlocks (the
// server detects a deadlock within a second, whatever the timeout) and that every
// balance is exact, not how long a call waits: 32 goroutines on one account's rows of
// a loaded two-core machine can wait longer than the recommended five seconds.
func hotPool(t testing.TB) *pgxpool.Pool {
	return newPool(t, 16, func(cfg *pgxpool.Config) {
		cfg.ConnConfig.RuntimeParams["statement_timeout"] = "60s"
	})
}

// hotStores returns n Store values with opts, each on a pool of its own (16/n
// connections, statements as hotPool's) on one fresh schema: n instances of a
// deployment. It returns the first pool too.
func hotStores(t *testing.T, opts *postgres.Options, n int) ([]*postgres.Store, *pgxpool.Pool) {
	t.Helper()
	conns := int32(16 / n) // 16 connections in all, as hotPool has
	first := newPool(t, conns, func(cfg *pgxpool.Config) {
		cfg.ConnConfig.RuntimeParams["statement_timeout"] = "60s"
	})
	pools := []*pgxpool.Pool{first}
	for range n - 1 {
		cfg := poolConfig(t, first.Config().ConnConfig.RuntimeParams["search_path"], conns)
		cfg.ConnConfig.RuntimeParams["statement_timeout"] = "60s"
		p, err := pgxpool.NewWithConfig(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close) // before the schema is dropped
		pools = append(pools, p)
	}
	stores := make([]*postgres.Store, n)
	for i, p := range pools {
		s, err := postgres.New(p, opts)
		if err != nil {
			t.Fatal(err)
		}
		stores[i] = s
	}
	return stores, first
}

// eachHot runs test in parallel subtests, with each of hotOptions and through one Store
// and through three (n, each on a pool of its own: instances of a deployment).
func eachHot(t *testing.T, test func(t *testing.T, opts *postgres.Options, n int)) {
	for _, h := range hotOptions {
		for _, n := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s/instances=%d", h.name, n), func(t *testing.T) {
				t.Parallel()
				test(t, h.opts, n)
			})
		}
	}
}

func newRequest() driver.RequestID {
	var id driver.RequestID
	rand.Read(id[:])
	return id
}

// checkLedger checks the ledger against the balance: the period's opening (or renewal) amount
// plus every change recorded since equals the remaining credits, and the shards are
// never below zero.
func checkLedger(t *testing.T, s *postgres.Store, db postgres.DB, account string, p driver.Period, allowance int64) {
	t.Helper()
	ctx := t.Context()
	b, err := s.Balance(ctx, account, t0, p, allowance)
	if err != nil {
		t.Fatal(err)
	}
	var sum, minShard int64
	err = db.QueryRow(ctx, `
		SELECT
			(SELECT coalesce(sum(l.amount), 0)::bigint FROM tollgate_ledger l
			  WHERE l.account_id = $1 AND l.period_start = $2),
			(SELECT min(s.balance) FROM tollgate_balance_shards s WHERE s.account_id = $1)`,
		account, b.Period.Start).Scan(&sum, &minShard)
	if err != nil {
		t.Fatal(err)
	}
	if sum != b.Remaining || minShard < 0 {
		t.Errorf("ledger sums to %d and the lowest shard holds %d, for a balance of %d remaining", sum, minShard, b.Remaining)
	}
}

// TestHotAccountExact drives one account from 64 goroutines, 100 admissions each of
// cost 3 against 3000 credits, with each mitigation, through one Store and through three
// on pools of their own (goroutine w through Store w mod 3): exactly 1000 are admitted and 5400
// refused for their credits, no admission ever sees a negative or inconsistent balance,
// and the account ends at exactly 0 with 3000 used and 1000 calls counted. Then every
// admitted call is refunded concurrently, each refund sent twice, the second time
// through the next Store (the balance is back to exactly 3000), and 64
// concurrent admissions in the next period renew the balance once and are each charged
// after the renewal. The ledger agrees with the balance throughout.
func TestHotAccountExact(t *testing.T) { eachHot(t, testHotAccountExact) }

func testHotAccountExact(t *testing.T, opts *postgres.Options, n int) {
	stores, pool := hotStores(t, opts, n)
	s := stores[0]
	ctx := t.Context()
	const workers, attempts, cost, credits = 64, 100, 3, 3000
	acct, key := fixture("hot")
	if err := s.CreateAccount(ctx, acct, key); err != nil {
		t.Fatal(err)
	}
	if err := s.Open(ctx, driver.Opening{Account: acct.ID, Balance: credits, Allowance: credits, Period: period}); err != nil {
		t.Fatal(err)
	}
	step := func(req driver.RequestID, p driver.Period, amount, allowance int64) driver.Step {
		return driver.Step{Account: acct.ID, Request: req, Now: p.Start,
			Key:     &driver.KeyCheck{Account: acct.ID, KeyID: key.ID, Hash: key.Hash},
			Credits: &driver.Reservation{Account: acct.ID, Request: req, APIs: []string{"hash"}, Amount: amount, Period: p, Allowance: allowance, Now: p.Start, Expires: p.Start.Add(90 * 24 * time.Hour)}}
	}

	var (
		mu       sync.Mutex
		admitted []driver.RequestID
		refused  atomic.Int64
		wg       sync.WaitGroup
	)
	for w := range workers {
		wg.Go(func() {
			for range attempts {
				req := newRequest()
				r, err := stores[w%n].Admit(ctx, step(req, period, cost, credits))
				if err != nil {
					t.Error(err)
					return
				}
				b := r.Balance
				switch r.Denied {
				case driver.NotDenied:
					if b.Remaining < 0 || b.Remaining+b.Used != credits {
						t.Errorf("admitted with Remaining %d, Used %d", b.Remaining, b.Used)
					}
					mu.Lock()
					admitted = append(admitted, req)
					mu.Unlock()
				case driver.DeniedCredits:
					refused.Add(1)
					if b.Remaining < 0 || b.Remaining >= cost {
						t.Errorf("refused with Remaining %d", b.Remaining)
					}
				default:
					t.Errorf("denied %d", r.Denied)
				}
			}
		})
	}
	wg.Wait()
	if len(admitted) != credits/cost || refused.Load() != workers*attempts-credits/cost {
		t.Fatalf("%d admitted and %d refused, want %d and %d", len(admitted), refused.Load(), credits/cost, workers*attempts-credits/cost)
	}
	wantBalance(t, s, acct.ID, period, credits, 0, credits, credits/cost)
	checkLedger(t, s, pool, acct.ID, period, credits)
	wantOpen(t, pool, acct.ID, credits/cost)

	// Refund every admitted call, concurrently, each closing sent twice.
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(admitted); i += workers {
				for k := range 2 {
					req := admitted[i]
					_, err := stores[(w+k)%n].Close(ctx, driver.Closing{Account: acct.ID, Request: req,
						Settlement: &driver.Settlement{Account: acct.ID, Request: req, Refund: cost, Uncount: []string{"hash"}, Period: period, Allowance: credits}})
					if err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	wantBalance(t, s, acct.ID, period, credits, credits, 0, 0)
	checkLedger(t, s, pool, acct.ID, period, credits)
	wantOpen(t, pool, acct.ID, 0)

	// The next period: renewed once, to the allowance, then charged.
	next := driver.MonthOf(period.End)
	const allowance = 500
	for w := range workers {
		wg.Go(func() {
			r, err := stores[w%n].Admit(ctx, step(newRequest(), next, 2, allowance))
			if err != nil || r.Denied != driver.NotDenied {
				t.Errorf("Admit in the next period: %+v, %v", r, err)
			}
		})
	}
	wg.Wait()
	wantBalance(t, s, acct.ID, next, allowance, allowance-2*workers, 2*workers, workers)
	checkLedger(t, s, pool, acct.ID, next, allowance)
	var renewals int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM tollgate_ledger WHERE kind = 'renewal'`).Scan(&renewals); err != nil || renewals != 1 {
		t.Errorf("%d renewal entries (%v), want 1", renewals, err)
	}
	wantOpen(t, pool, acct.ID, workers)
}

// wantOpen checks that the account has n reservations open.
func wantOpen(t *testing.T, db postgres.DB, account string, n int) {
	t.Helper()
	var open int
	if err := db.QueryRow(t.Context(), `SELECT count(*) FROM tollgate_reservations WHERE account_id = $1`, account).Scan(&open); err != nil {
		t.Fatal(err)
	}
	if open != n {
		t.Errorf("%d reservations open, want %d", open, n)
	}
}

// wantBalance checks an account's balance and its count of "hash" calls.
func wantBalance(t *testing.T, s *postgres.Store, account string, p driver.Period, allowance, remaining, used, calls int64) {
	t.Helper()
	b, err := s.Balance(t.Context(), account, t0, p, allowance)
	if err != nil {
		t.Fatal(err)
	}
	u, err := s.Usage(t.Context(), account, p)
	if err != nil {
		t.Fatal(err)
	}
	if b.Remaining != remaining || b.Used != used || u["hash"] != calls {
		t.Errorf("balance %d remaining, %d used, %d calls; want %d, %d and %d", b.Remaining, b.Used, u["hash"], remaining, used, calls)
	}
}

// TestConcurrentReplays sends two admission steps from 32 goroutines at once, half of
// them the first then the second, half the other way round, with each mitigation,
// through one Store and through three (so that copies of the steps share batches, and
// batches of several instances replay each other's requests in both orders): each is
// admitted for every caller and charged once.
func TestConcurrentReplays(t *testing.T) { eachHot(t, testConcurrentReplays) }

func testConcurrentReplays(t *testing.T, opts *postgres.Options, n int) {
	stores, _ := hotStores(t, opts, n)
	ctx := t.Context()
	if err := stores[0].Open(ctx, driver.Opening{Account: "replayed", Balance: 100, Allowance: 100, Period: period}); err != nil {
		t.Fatal(err)
	}
	var steps [2]driver.Step
	for i := range steps {
		req := newRequest()
		steps[i] = driver.Step{Account: "replayed", Request: req, Now: t0,
			Credits: &driver.Reservation{Account: "replayed", Request: req, APIs: []string{"hash"}, Amount: 7, Period: period, Allowance: 100, Now: t0, Expires: t0.Add(time.Hour)}}
	}
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Go(func() {
			for i := range 2 {
				r, err := stores[w%n].Admit(ctx, steps[(w+i)%2])
				if err != nil || r.Denied != driver.NotDenied {
					t.Errorf("Admit: %+v, %v", r, err)
				}
			}
		})
	}
	wg.Wait()
	wantBalance(t, stores[0], "replayed", period, 100, 86, 14, 2)
}

// TestSetShards splits a busy account's balance and folds it back while reservations
// are open: the totals, the call counts and the settlements of reservations made before
// each change stay exact.
func TestSetShards(t *testing.T) {
	pool := newPool(t, 8)
	s, _ := postgres.New(pool, nil)
	ctx := t.Context()
	const acct = "resharded"
	if err := s.Open(ctx, driver.Opening{Account: acct, Balance: 1000, Allowance: 1000, Period: period}); err != nil {
		t.Fatal(err)
	}
	reserve := func(n int) []driver.RequestID {
		reqs := make([]driver.RequestID, n)
		for i := range reqs {
			reqs[i] = newRequest()
			if _, err := s.Reserve(ctx, driver.Reservation{Account: acct, Request: reqs[i], APIs: []string{"hash"}, Amount: 10, Period: period, Allowance: 1000, Now: t0, Expires: t0.Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
		}
		return reqs
	}
	refund := func(reqs []driver.RequestID) {
		for _, r := range reqs {
			if _, err := s.Settle(ctx, driver.Settlement{Account: acct, Request: r, Refund: 10, Uncount: []string{"hash"}, Period: period, Allowance: 1000}); err != nil {
				t.Fatal(err)
			}
		}
	}
	before := reserve(5) // 950 left, 5 calls
	if err := s.SetShards(ctx, acct, 8); err != nil {
		t.Fatal(err)
	}
	wantBalance(t, s, acct, period, 1000, 950, 50, 5)
	during := reserve(20) // 750 left, 25 calls
	refund(before)        // 800 left, 20 calls
	wantBalance(t, s, acct, period, 1000, 800, 200, 20)
	if err := s.SetShards(ctx, acct, 3); err != nil {
		t.Fatal(err)
	}
	refund(during[:10]) // 900 left, 10 calls
	if err := s.SetShards(ctx, acct, 1); err != nil {
		t.Fatal(err)
	}
	refund(during[10:]) // 1000 left, 0 calls
	wantBalance(t, s, acct, period, 1000, 1000, 0, 0)
	checkLedger(t, s, pool, acct, period, 1000)

	// A reservation no single shard covers takes from the total.
	if err := s.SetShards(ctx, acct, 16); err != nil {
		t.Fatal(err)
	}
	b, err := s.Reserve(ctx, driver.Reservation{Account: acct, Request: newRequest(), Amount: 999, Period: period, Allowance: 1000, Now: t0, Expires: t0.Add(time.Hour)})
	if err != nil || b.Remaining != 1 {
		t.Fatalf("Reserve of 999 of 1000 over 16 shards: %+v, %v", b, err)
	}
	if _, err := s.Reserve(ctx, driver.Reservation{Account: acct, Request: newRequest(), Amount: 2, Period: period, Allowance: 1000, Now: t0, Expires: t0.Add(time.Hour)}); err == nil {
		t.Fatal("Reserve of 2 with 1 left succeeded")
	}
	checkLedger(t, s, pool, acct, period, 1000)
}

// TestAccountsIndependent checks that accounts opened with different shard counts, and
// keys of other accounts, do not mix.
func TestAccountsIndependent(t *testing.T) {
	s := newStore(t, &postgres.Options{Shards: 4, Batch: 8})
	ctx := t.Context()
	for i := range 3 {
		a, k := fixture(fmt.Sprintf("acct%d", i))
		if err := s.CreateAccount(ctx, a, k); err != nil {
			t.Fatal(err)
		}
		if err := s.Open(ctx, driver.Opening{Account: a.ID, Balance: int64(10 * (i + 1)), Allowance: 100, Period: period}); err != nil {
			t.Fatal(err)
		}
		// A key of one account does not pass the check of another.
		st, err := s.CheckKey(ctx, driver.KeyCheck{Account: "acct9", KeyID: k.ID, Hash: k.Hash})
		if err != nil || st != driver.KeyUnknown {
			t.Errorf("CheckKey of %s's key under another account: %d, %v", a.ID, st, err)
		}
	}
	for i := range 3 {
		b, err := s.Balance(ctx, fmt.Sprintf("acct%d", i), t0, period, 100)
		if err != nil || b.Remaining != int64(10*(i+1)) {
			t.Errorf("acct%d: %+v, %v", i, b, err)
		}
	}
}

// TestKeyOfAnotherAccount checks that a step whose key check names another account than
// the step's is denied with KeyUnknown, even when that account owns the key.
func TestKeyOfAnotherAccount(t *testing.T) {
	s := newStore(t, nil)
	ctx := t.Context()
	mine, _ := fixture("mine")
	theirs, theirKey := fixture("theirs")
	for _, a := range []struct {
		acct auth.Account
		key  auth.Key
	}{{mine, keyOf(mine)}, {theirs, theirKey}} {
		if err := s.CreateAccount(ctx, a.acct, a.key); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Open(ctx, driver.Opening{Account: mine.ID, Balance: 10, Allowance: 10, Period: period}); err != nil {
		t.Fatal(err)
	}
	req := newRequest()
	r, err := s.Admit(ctx, driver.Step{Account: mine.ID, Request: req, Now: t0,
		Key:     &driver.KeyCheck{Account: theirs.ID, KeyID: theirKey.ID, Hash: theirKey.Hash},
		Credits: &driver.Reservation{Account: mine.ID, Request: req, Amount: 1, Period: period, Allowance: 10, Now: t0, Expires: t0.Add(time.Hour)}})
	if err != nil || r.Denied != driver.DeniedKey || r.Key != driver.KeyUnknown {
		t.Errorf("Admit with another account's key: %+v, %v; want DeniedKey, KeyUnknown", r, err)
	}
	wantBalance(t, s, mine.ID, period, 10, 10, 0, 0)
}

func keyOf(a auth.Account) auth.Key {
	return auth.Key{ID: a.ID + "-key", AccountID: a.ID, Name: "primary", Primary: true, Hash: auth.HashKey(auth.NewKeyValue()), CreatedAt: t0}
}

// TestUndoInDoubt races the undoing of an admission whose answer was lost (a Close with
// a full refund and the slot, as a caller in doubt may send it) against the admission
// itself, in both orders: when the undo comes first it finds no reservation
// (store.ErrNotFound) and records nothing, and the admission, arriving late, is made as
// any new one, its credits held until its reservation expires; when the admission comes
// first, the undo refunds it. Once the reservations have expired, the account is where
// it began every time, and no slot is held.
func TestUndoInDoubt(t *testing.T) {
	for _, h := range hotOptions {
		t.Run(h.name, func(t *testing.T) {
			t.Parallel()
			s, err := postgres.New(hotPool(t), h.opts)
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			const acct = "doubt"
			if err := s.Open(ctx, driver.Opening{Account: acct, Balance: 1000, Allowance: 1000, Period: period}); err != nil {
				t.Fatal(err)
			}
			step := func(req driver.RequestID) driver.Step {
				return driver.Step{Account: acct, Request: req, Now: t0,
					Slot:    &driver.SlotClaim{Ceiling: 100, Lease: time.Minute},
					Credits: &driver.Reservation{Account: acct, Request: req, APIs: []string{"hash"}, Amount: 5, Period: period, Allowance: 1000, Now: t0, Expires: t0.Add(time.Hour)}}
			}
			undo := func(req driver.RequestID) driver.Closing {
				return driver.Closing{Account: acct, Request: req, ReleaseSlot: true,
					Settlement: &driver.Settlement{Account: acct, Request: req, Refund: 5, Uncount: []string{"hash"}, Period: period, Allowance: 1000}}
			}

			// The undo first: it records nothing, and the late admission takes its credits.
			req := newRequest()
			if _, err := s.Close(ctx, undo(req)); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("undo of an admission that has not arrived: %v, want store.ErrNotFound", err)
			}
			if r, err := s.Admit(ctx, step(req)); err != nil || r.Denied != driver.NotDenied || !r.Slot.Acquired || r.Balance.Remaining != 995 {
				t.Fatalf("late admission: %+v, %v; want admitted, with a slot, taking 5 credits", r, err)
			}

			// Both at once, many times.
			var wg sync.WaitGroup
			for range 32 {
				req := newRequest()
				wg.Go(func() {
					if _, err := s.Admit(ctx, step(req)); err != nil {
						t.Error(err)
					}
				})
				wg.Go(func() {
					if _, err := s.Close(ctx, undo(req)); err != nil && !errors.Is(err, store.ErrNotFound) {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			later := t0.Add(2 * time.Hour) // past every reservation's expiry and every lease
			if b, err := s.Balance(ctx, acct, later, period, 1000); err != nil || b.Remaining != 1000 || b.Used != 0 {
				t.Errorf("once the reservations expired: %+v, %v; want 1000 remaining, none used", b, err)
			}
			if n, err := s.InUse(ctx, acct, later); err != nil || n != 0 {
				t.Errorf("%d slots held once the leases ended (%v), want 0", n, err)
			}
		})
	}
}

// TestHotAccountMixed runs whole calls (admission, then settlement keeping all, part or
// none of the charge, and freeing the slot) on one account from 32 goroutines at once,
// with each mitigation, through one Store and through three on pools of their own
// (goroutine w through Store w mod 3), so that admissions and settlements overlap on
// the same rows:
// no call fails (no deadlock), and the balance, the used credits and the call count end
// exactly where the kept charges put them.
func TestHotAccountMixed(t *testing.T) { eachHot(t, testHotAccountMixed) }

func testHotAccountMixed(t *testing.T, opts *postgres.Options, n int) {
	stores, pool := hotStores(t, opts, n)
	s := stores[0]
	ctx := t.Context()
	acct, key := fixture("mixed")
	if err := s.CreateAccount(ctx, acct, key); err != nil {
		t.Fatal(err)
	}
	const credits, cost = 1_000_000, 4
	if err := s.Open(ctx, driver.Opening{Account: acct.ID, Balance: credits, Allowance: credits, Period: period}); err != nil {
		t.Fatal(err)
	}
	limit := driver.Limit{Rate: 1 << 20, Per: time.Second, Burst: 1 << 20}
	var kept, calls atomic.Int64
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Go(func() {
			s := stores[w%n]
			for i := range 25 {
				req := newRequest()
				r, err := s.Admit(ctx, driver.Step{Account: acct.ID, Request: req, Now: t0,
					Key:     &driver.KeyCheck{Account: acct.ID, KeyID: key.ID, Hash: key.Hash},
					Rate:    &limit,
					Slot:    &driver.SlotClaim{Ceiling: 1000, Lease: time.Minute},
					Credits: &driver.Reservation{Account: acct.ID, Request: req, APIs: []string{"hash"}, Amount: cost, Period: period, Allowance: credits, Now: t0, Expires: t0.Add(time.Hour)}})
				if err != nil || r.Denied != driver.NotDenied {
					t.Errorf("Admit: %+v, %v", r, err)
					return
				}
				refund := []int64{0, 1, cost}[(w+i)%3]
				var uncount []string
				if refund == cost {
					uncount = []string{"hash"}
				} else {
					calls.Add(1)
				}
				_, err = s.Close(ctx, driver.Closing{Account: acct.ID, Request: req, ReleaseSlot: true,
					Settlement: &driver.Settlement{Account: acct.ID, Request: req, Refund: refund, Uncount: uncount, Period: period, Allowance: credits}})
				if err != nil {
					t.Errorf("Close: %v", err)
					return
				}
				kept.Add(cost - refund)
			}
		})
	}
	wg.Wait()
	wantBalance(t, s, acct.ID, period, credits, credits-kept.Load(), kept.Load(), calls.Load())
	checkLedger(t, s, pool, acct.ID, period, credits)
	if n, err := s.InUse(ctx, acct.ID, t0); err != nil || n != 0 {
		t.Errorf("%d slots held after every call closed (%v)", n, err)
	}
	wantOpen(t, pool, acct.ID, 0)
}

// TestHomeBatchKeepsNextExpiry runs a batch of admissions of an account of two shards
// (tollgate_admit_batch with a home shard) while a void holds the account, as a sweep
// or a settlement past an expiry does: the batch reads the balance row's next_expiry
// before the void, waits for a shard, and reserves after the void committed a
// next_expiry computed without the batch's reservations. The balance row must still
// know the earliest expiry of the open reservations, or the next operation on the
// account after they expire does not void them (tollgate_prepare trusts next_expiry)
// and their credits stay taken until a sweep runs.
func TestHomeBatchKeepsNextExpiry(t *testing.T) {
	// Without a home shard (as a release before version 31 calls it), the batch holds
	// the balance row before it decides, and the test passes.
	t.Run("NoHome", func(t *testing.T) { homeBatchKeepsNextExpiry(t, nil) })
	home := int32(0)
	t.Run("Home", func(t *testing.T) { homeBatchKeepsNextExpiry(t, &home) })
}

func homeBatchKeepsNextExpiry(t *testing.T, home *int32) {
	pool, schema := emptyPool(t)
	ctx := t.Context()
	if err := postgres.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	s, err := postgres.New(pool, &postgres.Options{Shards: 2})
	if err != nil {
		t.Fatal(err)
	}
	const acct, allowance = "acme", 100
	if err := s.Open(ctx, driver.Opening{Account: acct, Balance: allowance, Allowance: allowance, Period: period}); err != nil {
		t.Fatal(err)
	}
	x := t0.Add(time.Minute) // the first reservation's expiry
	if _, err := s.Reserve(ctx, driver.Reservation{Account: acct, Request: newRequest(), APIs: []string{"search"}, Amount: 1,
		Period: period, Allowance: allowance, Now: t0, Expires: x}); err != nil {
		t.Fatal(err)
	}

	// The void: the balance row and every shard, in the lock order.
	void, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer void.Rollback(context.Background())
	if _, err := void.Exec(ctx, `SELECT 1 FROM tollgate_balances WHERE account_id = $1 FOR UPDATE`, acct); err != nil {
		t.Fatal(err)
	}
	if _, err := void.Exec(ctx, `SELECT 1 FROM tollgate_balance_shards WHERE account_id = $1 ORDER BY shard FOR UPDATE`, acct); err != nil {
		t.Fatal(err)
	}

	// The batch: two calls made before x, on another instance.
	nowH := t0.Add(30 * time.Second)
	y := nowH.Add(time.Hour)
	batch := make(chan error, 1)
	go func() {
		rows, err := pool.Query(context.Background(), `SELECT o_denied FROM tollgate_admit_batch($1::text,
			ARRAY[$2::uuid, $3::uuid], ARRAY[$4::bigint, $4::bigint],
			ARRAY[NULL, NULL]::text[], ARRAY[NULL, NULL]::text[], ARRAY[NULL, NULL]::bytea[],
			ARRAY[NULL, NULL]::bigint[], ARRAY[NULL, NULL]::bigint[], ARRAY[NULL, NULL]::int[], ARRAY[NULL, NULL]::bigint[],
			ARRAY[$1, $1]::text[], ARRAY[1, 1]::bigint[], ARRAY['search', 'search']::text[], ARRAY[1, 1]::int[],
			ARRAY[$5::timestamptz, $5::timestamptz], ARRAY[$6::timestamptz, $6::timestamptz],
			ARRAY[$7::bigint, $7::bigint], ARRAY[$8::bigint, $8::bigint], $9::int)`,
			acct, newRequest().String(), newRequest().String(), nowH.UnixNano(), period.Start, period.End, int64(allowance), y.UnixNano(), home)
		if err != nil {
			batch <- err
			return
		}
		denied, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err == nil && (len(denied) != 2 || denied[0] != 0 || denied[1] != 0) {
			err = fmt.Errorf("the batch's steps: denied %v, want both admitted", denied)
		}
		batch <- err
	}()
	watch, err := pgx.Connect(ctx, dsn(t))
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close(context.Background())
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := testenv.Wait(wctx, func() error {
		var waiting bool
		if err := watch.QueryRow(wctx, `SELECT EXISTS (SELECT FROM pg_locks l JOIN pg_stat_activity a USING (pid)
			WHERE NOT l.granted AND a.application_name = $1)`, schema).Scan(&waiting); err != nil || !waiting {
			return fmt.Errorf("the batch does not wait for the void: %v", err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var voided int
	if err := void.QueryRow(ctx, `SELECT tollgate_void($1, $2, 64)`, acct, x.Add(time.Second).UnixNano()).Scan(&voided); err != nil || voided != 1 {
		t.Fatalf("tollgate_void: %d (%v), want the first reservation", voided, err)
	}
	if err := void.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-batch; err != nil {
		t.Fatal(err)
	}
	var next, soonest *int64
	if err := pool.QueryRow(ctx, `SELECT b.next_expiry, (SELECT min(r.expires) FROM tollgate_reservations r WHERE r.account_id = $1)
		FROM tollgate_balances b WHERE b.account_id = $1`, acct).Scan(&next, &soonest); err != nil {
		t.Fatal(err)
	}
	if soonest != nil && (next == nil || *next > *soonest) {
		t.Errorf("next_expiry %v with a reservation open until %d: the batch's reservations are unknown to it", next, *soonest)
	}
	// The next operation after their expiry voids them and gives their credits back.
	b, err := s.Balance(ctx, acct, y.Add(time.Second), period, allowance)
	if err != nil {
		t.Fatal(err)
	}
	if b.Remaining != allowance {
		t.Errorf("Balance after every reservation expired: %d remaining, want %d (the batch's 2 reservations never voided)", b.Remaining, allowance)
	}
}
