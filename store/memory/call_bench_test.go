package memory_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// callStores are the memory stores a paid call uses, filled with accounts.
type callStores struct {
	keys   *memory.KeyStore
	ledger *memory.Ledger
	rates  *memory.RateLimiter
	slots  *memory.ConcurrencyLimiter
	hashes []auth.Hash // the primary key of account i has hashes[i]
	period driver.Period
	limit  driver.Limit
	seq    uint64 // the last request id
}

// newCallStores returns memory stores with n accounts, each with a primary key and a
// balance, as a service's CreateAccount leaves them.
func newCallStores(b *testing.B, n int) *callStores {
	ctx := b.Context()
	created := time.Date(2030, time.January, 15, 0, 0, 0, 0, time.UTC)
	s := &callStores{keys: memory.NewKeyStore(), ledger: memory.NewLedger(nil), rates: memory.NewRateLimiter(),
		slots: memory.NewConcurrencyLimiter(), hashes: make([]auth.Hash, n), period: driver.MonthOf(created),
		limit: driver.Limit{Rate: 1 << 30, Per: time.Minute, Burst: 1 << 30}}
	for i := range n {
		id := fmt.Sprintf("acct-%d", i)
		// A key's hash is uniformly distributed; any spread of bytes does for a map.
		binary.LittleEndian.PutUint64(s.hashes[i][:], uint64(i)*0x9e3779b97f4a7c15)
		binary.LittleEndian.PutUint64(s.hashes[i][8:], uint64(i))
		err := s.keys.CreateAccount(ctx, auth.Account{ID: id, Plan: "bench", CreatedAt: created},
			auth.Key{ID: id + "-primary", AccountID: id, Name: "primary", Primary: true, Hash: s.hashes[i], CreatedAt: created})
		if err != nil {
			b.Fatal(err)
		}
		err = s.ledger.Open(ctx, driver.Opening{Account: id, Balance: driver.MaxCredits, Allowance: driver.MaxCredits, Period: s.period})
		if err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// call does what a paid call of one API does with the stores: it resolves the key, takes
// a rate-limit event, a concurrency slot and a reservation, settles the reservation and
// frees the slot.
func (s *callStores) call(ctx context.Context, h auth.Hash, now time.Time) error {
	_, acct, err := s.keys.Resolve(ctx, h)
	if err != nil {
		return err
	}
	if d, err := s.rates.Allow(ctx, acct.ID, s.limit, now); err != nil || !d.Allowed {
		return fmt.Errorf("rate limit: %+v, %v", d, err)
	}
	s.seq++
	var req driver.RequestID
	binary.LittleEndian.PutUint64(req[:], s.seq)
	if d, err := s.slots.Acquire(ctx, acct.ID, req, 1<<20, time.Minute, now); err != nil || !d.Acquired {
		return fmt.Errorf("slot: %+v, %v", d, err)
	}
	_, err = s.ledger.Reserve(ctx, driver.Reservation{Account: acct.ID, Request: req, APIs: []string{"hash"}, Amount: 1,
		Period: s.period, Allowance: driver.MaxCredits, Now: now, Expires: now.Add(time.Minute)})
	if err != nil {
		return err
	}
	_, err = s.ledger.Settle(ctx, driver.Settlement{Account: acct.ID, Request: req, Period: s.period, Allowance: driver.MaxCredits, Now: now})
	if err != nil {
		return err
	}
	return s.slots.Release(ctx, acct.ID, req)
}

// BenchmarkCall measures the memory stores' work of a paid call with a thousand and a
// million accounts, the key of each call picked at random, so that the cost of the
// lookups in tables larger than the CPU caches shows: the accounts=1M case against the
// accounts=1k one. For the cache misses per call, count them with callgrind's cache
// simulation over runs of N and 3N calls (the difference divided by 2N):
//
//	go test -c -o memory.test ./store/memory/
//	GOGC=off GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --cache-sim=yes \
//	    --toggle-collect='*memory_test.(*callStores).call' \
//	    ./memory.test -test.run='^$' -test.bench='Call/accounts=1M' -test.benchtime=20000x -test.cpu=1
func BenchmarkCall(b *testing.B) {
	for _, size := range []struct {
		name     string
		accounts int
	}{{"accounts=1k", 1_000}, {"accounts=1M", 1_000_000}} {
		b.Run(size.name, func(b *testing.B) {
			s, ctx := newCallStores(b, size.accounts), b.Context()
			rng := rand.New(rand.NewPCG(1, 2))
			now := time.Date(2030, time.January, 15, 12, 0, 0, 0, time.UTC)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				now = now.Add(time.Microsecond)
				if err := s.call(ctx, s.hashes[rng.IntN(size.accounts)], now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
