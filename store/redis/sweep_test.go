package redis_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store/redis"
)

// tripCounter counts a client's round trips: a command sent alone is one, a pipeline
// one (per node); and the commands in them.
type tripCounter struct{ trips, cmds atomic.Int64 }

func (h *tripCounter) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h *tripCounter) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		h.trips.Add(1)
		h.cmds.Add(1)
		return next(ctx, cmd)
	}
}

func (h *tripCounter) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		h.trips.Add(1)
		h.cmds.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

func (h *tripCounter) take() (trips, cmds int64) { return h.trips.Swap(0), h.cmds.Swap(0) }

// settledAccounts opens n accounts and makes one reservation of each, settled: the
// accounts a sweep after their deadlines finds in the index with nothing to void.
func settledAccounts(t *testing.T, s *redis.Store, n int) {
	ctx, period := t.Context(), driver.MonthOf(testNow)
	for i := range n {
		acct := "acct" + strconv.Itoa(i)
		must(t, s.Open(ctx, driver.Opening{Account: acct, Balance: 100, Allowance: 100, Period: period}))
		req := newRequest()
		_, err := s.Reserve(ctx, driver.Reservation{Account: acct, Request: req, APIs: []string{"hash"}, Amount: 1,
			Period: period, Allowance: 100, Now: testNow, Expires: testNow.Add(time.Minute)})
		must(t, err)
		_, err = s.Settle(ctx, driver.Settlement{Account: acct, Request: req, Period: period, Allowance: 100, Now: testNow})
		must(t, err)
	}
}

// TestSweepRoundTrips counts the round trips of sweeps over many recently active
// accounts whose reservations were all settled: the first sweep after their deadlines
// (which removes their entries) and the next ones, when nothing is due. Neither grows
// with the accounts: a sweep with nothing due is one pipeline, and one that finds
// entries sends its accounts' scripts a page at a time in pipelines.
//
//	TOLLGATE_TEST_REDIS=127.0.0.1:6379 go test -run TestSweepRoundTrips -v ./store/redis/
func TestSweepRoundTrips(t *testing.T) {
	for _, accounts := range []int{100, 1000} {
		t.Run(strconv.Itoa(accounts), func(t *testing.T) {
			h := &tripCounter{}
			c := newClient(addr(t), nil)
			t.Cleanup(func() { c.Close() })
			c.AddHook(h)
			s := newStoreOn(t, c, nil)
			settledAccounts(t, s, accounts)
			h.take()
			voided, err := s.Sweep(t.Context(), testNow.Add(time.Hour), 1000)
			must(t, err)
			stale, staleCmds := h.take()
			if voided != 0 {
				t.Errorf("the sweep voided %d settled reservations", voided)
			}
			voided, err = s.Sweep(t.Context(), testNow.Add(2*time.Hour), 1000)
			must(t, err)
			idle, idleCmds := h.take()
			if voided != 0 {
				t.Errorf("the second sweep voided %d", voided)
			}
			t.Logf("%d accounts, all settled: first sweep %d round trips (%d commands); a sweep with nothing due %d round trips (%d commands)",
				accounts, stale, staleCmds, idle, idleCmds)
			if idle > 1 {
				t.Errorf("a sweep with nothing due took %d round trips, want 1 (one pipeline over the shards)", idle)
			}
			// One to find the shards, and per shard: a claim, the voids, the
			// replacements, and the release; one more page for each 256 entries.
			if limit := int64(1 + 16*4 + 3*(accounts/256+1)); stale > limit {
				t.Errorf("the sweep of %d settled accounts took %d round trips, want at most %d: not one or two per account", accounts, stale, limit)
			}
		})
	}
}

// TestSweepsShareShards runs the sweeps of two instances at once, each as the Service
// runs it (until a sweep voids fewer than its limit), over accounts with expired
// reservations, and checks that they void each reservation once and all of them
// together, and that they divide the work: no account's reservations are voided by
// the scripts of both instances.
func TestSweepsShareShards(t *testing.T) {
	c := client(t)
	prefix := newPrefix(t, c)
	ctx, period := t.Context(), driver.MonthOf(testNow)
	setup := openStore(t, c, prefix, nil)
	const accounts, each = 64, 3
	for i := range accounts {
		acct := "acct" + strconv.Itoa(i)
		must(t, setup.Open(ctx, driver.Opening{Account: acct, Balance: 100, Allowance: 100, Period: period}))
		for range each {
			_, err := setup.Reserve(ctx, driver.Reservation{Account: acct, Request: newRequest(), APIs: []string{"hash"}, Amount: 1,
				Period: period, Allowance: 100, Now: testNow, Expires: testNow.Add(time.Minute)})
			must(t, err)
		}
	}
	type instance struct {
		rec    *recorder
		s      *redis.Store
		voided int
	}
	instances := make([]*instance, 2)
	for i := range instances {
		rec := &recorder{}
		ic := newClient(addr(t), nil)
		t.Cleanup(func() { ic.Close() })
		ic.AddHook(rec)
		instances[i] = &instance{rec: rec, s: openStore(t, ic, prefix, nil)}
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, in := range instances {
		wg.Go(func() {
			<-start
			for {
				n, err := in.s.Sweep(ctx, testNow.Add(time.Hour), 10)
				if err != nil {
					t.Errorf("Sweep: %v", err)
					return
				}
				in.voided += n
				if n < 10 {
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if got := instances[0].voided + instances[1].voided; got != accounts*each {
		t.Errorf("the two instances voided %d and %d reservations, %d in all; want exactly %d",
			instances[0].voided, instances[1].voided, got, accounts*each)
	}
	if n, err := setup.Sweep(ctx, testNow.Add(time.Hour), 10); err != nil || n != 0 {
		t.Errorf("a sweep after both: %d voided (%v), want none left", n, err)
	}
	// The accounts whose void script each instance ran.
	voidSHA := redis.Scripts["void"].Hash()
	swept := make([]map[string]bool, 2)
	for i, in := range instances {
		swept[i] = map[string]bool{}
		for _, args := range in.rec.take() {
			if name, keys := keysOf(args); (name == "evalsha" && args[1] == voidSHA) || (name == "eval" && sha1Hex(args[1].(string)) == voidSHA) {
				swept[i][keys[0]] = true
			}
		}
	}
	both := 0
	for k := range swept[0] {
		if swept[1][k] {
			both++
		}
	}
	t.Logf("instance 0 voided %d reservations over %d accounts, instance 1 %d over %d; %d accounts visited by both",
		instances[0].voided, len(swept[0]), instances[1].voided, len(swept[1]), both)
	if both > 0 {
		t.Errorf("%d accounts were swept by both instances: their work was repeated", both)
	}
}

// TestFirstReservationsSpreadOverShards checks what an account's first reservation
// after a sweep writes outside the account's slot: the entry in the index of expiring
// accounts, in the shard of its account. Over many accounts, those writes go to many
// keys in many slots, none of them written by every account.
func TestFirstReservationsSpreadOverShards(t *testing.T) {
	rec := &recorder{}
	c := newClient(addr(t), nil)
	t.Cleanup(func() { c.Close() })
	s, prefix := newStorePrefix(t, c, nil)
	ctx, period := t.Context(), driver.MonthOf(testNow)
	const accounts = 200
	for i := range accounts {
		must(t, s.Open(ctx, driver.Opening{Account: "acct" + strconv.Itoa(i), Balance: 100, Allowance: 100, Period: period}))
	}
	c.AddHook(rec)
	for i := range accounts {
		acct := "acct" + strconv.Itoa(i)
		req := newRequest()
		_, err := s.Admit(ctx, driver.Step{Account: acct, Request: req, Now: testNow,
			Credits: &driver.Reservation{Account: acct, Request: req, APIs: []string{"hash"}, Amount: 1,
				Period: period, Allowance: 100, Now: testNow, Expires: testNow.Add(time.Minute)}})
		must(t, err)
	}
	writers := map[string]int{} // key outside the accounts' slots -> accounts that wrote it
	slots := map[int]bool{}
	for _, args := range rec.take() {
		_, keys := keysOf(args)
		for _, k := range keys {
			if tag := strings.TrimPrefix(k, prefix+":{"); !strings.HasPrefix(tag, "acct") {
				writers[k]++
				slots[slot(k)] = true
			}
		}
	}
	t.Logf("the first admissions of %d accounts wrote %d keys outside their accounts' slots, in %d slots: %v", accounts, len(writers), len(slots), writers)
	for k, n := range writers {
		if n > accounts/4 {
			t.Errorf("%d of %d accounts' first admissions wrote %s: one key that most accounts write", n, accounts, k)
		}
	}
	if len(slots) < 8 {
		t.Errorf("the index entries went to %d slots, want them spread over the shards' slots", len(slots))
	}
}

// TestSweepReadsTheEarlierIndex checks the upgrade from the single index of earlier
// versions: an entry found there still leads a sweep to its account's expired
// reservations, and moves to the account's shard while the account has some open.
func TestSweepReadsTheEarlierIndex(t *testing.T) {
	c := client(t)
	s := newStoreOn(t, c, nil)
	ctx, period := t.Context(), driver.MonthOf(testNow)
	must(t, s.Open(ctx, driver.Opening{Account: "old", Balance: 100, Allowance: 100, Period: period}))
	for _, hold := range []time.Duration{time.Minute, time.Hour} {
		_, err := s.Reserve(ctx, driver.Reservation{Account: "old", Request: newRequest(), APIs: []string{"hash"}, Amount: 1,
			Period: period, Allowance: 100, Now: testNow, Expires: testNow.Add(hold)})
		must(t, err)
	}
	// As an earlier version left it: the entry in the single index.
	shard, legacy := s.IndexKeyOf("old"), s.LegacyIndexKey()
	entries, err := c.ZRangeWithScores(ctx, shard, 0, -1).Result()
	must(t, err)
	if len(entries) != 1 {
		t.Fatalf("the shard holds %v, want the account's entry", entries)
	}
	must(t, c.ZAdd(ctx, legacy, entries[0]).Err())
	must(t, c.Del(ctx, shard).Err())

	if n, err := s.Sweep(ctx, testNow.Add(2*time.Minute), 10); err != nil || n != 1 {
		t.Fatalf("sweep past the first deadline: %d voided (%v), want 1", n, err)
	}
	if n := c.ZCard(ctx, legacy).Val(); n != 0 {
		t.Errorf("the earlier index still holds %d entries", n)
	}
	if n := c.ZCard(ctx, shard).Val(); n != 1 {
		t.Errorf("the account's shard holds %d entries, want the one of its open reservation", n)
	}
	if n, err := s.Sweep(ctx, testNow.Add(2*time.Hour), 10); err != nil || n != 1 {
		t.Errorf("sweep past the second deadline: %d voided (%v), want 1", n, err)
	}
}
