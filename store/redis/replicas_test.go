package redis_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/idempotency"
	"github.com/tollgate-dev/tollgate/internal/phasetest"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/journal"
	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/store/redis"
	"github.com/tollgate-dev/tollgate/store/storetest"
)

// A replicated is a private Redis master and its replica, each on a port the test
// picked, with a client of each.
type replicated struct {
	primary, replica    *testenv.Server
	client, fromReplica *goredis.Client
}

// startReplicated starts a master and a replica of it, and returns them with a client
// of the master whose ReadTimeout is read (as the package documentation recommends
// otherwise), and a client of the replica, for reads.
func startReplicated(t *testing.T, read time.Duration) *replicated {
	t.Helper()
	addr(t) // the tests run where the others do
	r := &replicated{primary: testenv.StartRedis(t)}
	r.replica = testenv.StartRedisReplica(t, r.primary)
	r.client = newClient(r.primary.Addr, func(o *goredis.Options) { o.ReadTimeout = read })
	r.fromReplica = newClient(r.replica.Addr, nil)
	t.Cleanup(func() { r.client.Close(); r.fromReplica.Close() })
	return r
}

// clientOf returns another client of the master, with ReadTimeout read.
func (r *replicated) clientOf(t *testing.T, read time.Duration) *goredis.Client {
	c := newClient(r.primary.Addr, func(o *goredis.Options) { o.ReadTimeout = read })
	t.Cleanup(func() { c.Close() })
	return c
}

// same reports whether the master and the replica hold the same fields in the hash
// key.
func (r *replicated) same(t *testing.T, key string) (primary, replica map[string]string, same bool) {
	t.Helper()
	primary, err := r.client.HGetAll(t.Context(), key).Result()
	must(t, err)
	replica, err = r.fromReplica.HGetAll(t.Context(), key).Result()
	must(t, err)
	return primary, replica, len(primary) > 0 && maps.Equal(primary, replica)
}

// paidStep returns an admission of a paid call of amount credits on account.
func paidStep(account string, amount int64) driver.Step {
	req := newRequest()
	period := driver.MonthOf(testNow)
	return driver.Step{Account: account, Request: req, Now: testNow,
		Slot: &driver.SlotClaim{Ceiling: 100, Lease: time.Minute},
		Credits: &driver.Reservation{Account: account, Request: req, APIs: []string{"api"}, Amount: amount,
			Period: period, Allowance: loadBalance, Now: testNow, Expires: testNow.Add(time.Minute)}}
}

// closingOf returns the closing of st that keeps charge credits of its reservation.
func closingOf(st driver.Step, charge int64) driver.Closing {
	return driver.Closing{Account: st.Account, Request: st.Request, ReleaseSlot: true, Settlement: &driver.Settlement{
		Account: st.Account, Request: st.Request, Refund: st.Credits.Amount - charge, Period: st.Credits.Period,
		Allowance: loadBalance, Now: testNow}}
}

// TestReplicasWait runs writes with Options.Replicas on a master and its replica
// (each a redis-server on a port the test picked): an admission and a settlement
// return only once the replica has them, since while the replica is paused (SIGSTOP)
// the master has them and the calls have not returned; with the replica stopped, every
// kind of write fails as unavailable (ErrNotReplicated), nothing charged, and the
// settlement sent again once the replica is back charges once; a settlement sent again
// on a new connection, which changes nothing, still waits for the write it replays.
func TestReplicasWait(t *testing.T) {
	r := startReplicated(t, 30*time.Second)
	ctx := t.Context()
	// A wait long enough for a busy machine: the calls must not time out while the
	// test resumes the replica.
	s, prefix := newStorePrefix(t, r.client, &redis.Options{CallerClock: true, Replicas: 1, WaitTimeout: 20 * time.Second})
	period := driver.MonthOf(testNow)
	const acct = "acct"
	must(t, s.Open(ctx, driver.Opening{Account: acct, Balance: loadBalance, Allowance: loadBalance, Period: period}))
	balance, _, _ := redis.AccountKeys(prefix, acct)
	if p, rp, ok := r.same(t, balance); !ok {
		t.Fatalf("the balance was opened; the master has %v, the replica %v", p, rp)
	}

	// waitsForReplica runs op while the replica is paused: once the master has its
	// write (changed reports it), op has not returned; once the replica resumes, it
	// returns, and the replica has the write.
	waitsForReplica := func(what string, changed func() bool, op func() error) {
		t.Helper()
		r.replica.Pause()
		paused := true
		defer func() {
			if paused {
				r.replica.Resume()
			}
		}()
		done := make(chan error, 1)
		go func() { done <- op() }()
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		must(t, testenv.Wait(wctx, func() error {
			if !changed() {
				return errors.New("the master does not have the write yet")
			}
			return nil
		}))
		select {
		case err := <-done:
			t.Fatalf("%s returned (%v) while the replica, paused, could not have its write", what, err)
		default:
		}
		r.replica.Resume()
		paused = false
		if err := <-done; err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if p, rp, ok := r.same(t, balance); !ok {
			t.Fatalf("%s returned; the master has %v, the replica %v", what, p, rp)
		}
	}
	onMaster := func() map[string]string {
		m, err := r.client.HGetAll(ctx, balance).Result()
		must(t, err)
		return m
	}
	// A first call indexes the account for the sweeps (a write of its own, before
	// the admission's), so that the calls below write the balance first.
	first := paidStep(acct, 1)
	if res, err := s.Admit(ctx, first); err != nil || res.Denied != driver.NotDenied {
		t.Fatalf("Admit: %+v, %v", res, err)
	}
	if _, err := s.Close(ctx, closingOf(first, 0)); err != nil {
		t.Fatal(err)
	}
	before := onMaster()
	st := paidStep(acct, 5)
	waitsForReplica("the admission", func() bool { return !maps.Equal(onMaster(), before) }, func() error {
		res, err := s.Admit(ctx, st)
		if err == nil && res.Denied != driver.NotDenied {
			err = errors.New("denied")
		}
		return err
	})
	reserved := onMaster()
	waitsForReplica("the settlement", func() bool { return !maps.Equal(onMaster(), reserved) }, func() error {
		_, err := s.Close(ctx, closingOf(st, 3))
		return err
	})

	// A store that waits at most a second: the default, 100ms, is short for a busy
	// test machine, where a replica's acknowledgment can take longer.
	quick := openStore(t, r.clientOf(t, 2*time.Second), prefix, &redis.Options{CallerClock: true, Replicas: 1, WaitTimeout: time.Second})
	held := paidStep(acct, 5)
	if res, err := quick.Admit(ctx, held); err != nil || res.Denied != driver.NotDenied {
		t.Fatalf("Admit with the replica up: %+v, %v", res, err)
	}

	// A settlement sent again on a new connection changes nothing and writes nothing;
	// it must still wait for the settlement it replays. (What WAIT waits for on a
	// connection whose commands wrote nothing depends on the version of Redis: 7.0
	// notes the master's offset after every command, later versions after those that
	// wrote. The fence the Store writes before WAIT makes it the same on all.)
	r.replica.Pause()
	func() {
		defer r.replica.Resume()
		if _, err := quick.Close(ctx, closingOf(held, 2)); !errors.Is(err, redis.ErrNotReplicated) || !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("Close with the replica paused: %v, want ErrNotReplicated and store.ErrUnavailable", err)
		}
		again := openStore(t, r.clientOf(t, 2*time.Second), prefix, &redis.Options{CallerClock: true, Replicas: 1, WaitTimeout: time.Second})
		if _, err := again.Close(ctx, closingOf(held, 2)); !errors.Is(err, redis.ErrNotReplicated) {
			t.Fatalf("Close sent again on a new connection, with the replica paused: %v, want ErrNotReplicated", err)
		}
	}()

	// With the replica stopped, every kind of write fails as unavailable.
	r.replica.Stop()
	doubt := paidStep(acct, 7)
	key := auth.Key{ID: "k2", AccountID: "acct-2", Name: "primary", Primary: true, Hash: newHash()}
	writes := []struct {
		name string
		op   func() error
	}{
		{"Admit", func() error { _, err := quick.Admit(ctx, doubt); return err }},
		{"Close", func() error { _, err := quick.Close(ctx, closingOf(held, 2)); return err }},
		{"Adjust", func() error {
			_, err := quick.Adjust(ctx, driver.Adjustment{Account: acct, Request: newRequest(), Amount: 10, Reason: "grant",
				Period: period, Allowance: loadBalance, Now: testNow})
			return err
		}},
		{"Open", func() error {
			return quick.Open(ctx, driver.Opening{Account: "acct-2", Balance: 1, Allowance: 1, Period: period})
		}},
		{"CreateAccount", func() error { return quick.CreateAccount(ctx, auth.Account{ID: "acct-2", Plan: "pro"}, key) }},
		{"Adjust with a journal entry", func() error {
			e := journal.Entry{ID: "granted", At: testNow, Change: []byte("granted")}
			_, err := quick.Adjust(journal.With(ctx, e), driver.Adjustment{Account: acct, Request: newRequest(), Amount: 10,
				Reason: "grant", Period: period, Allowance: loadBalance, Now: testNow})
			return err
		}},
		{"Claim", func() error {
			_, err := quick.Idempotency().Claim(ctx, idempotency.Claim{ID: idempotency.ID{1}, Now: testNow,
				Lease: testNow.Add(time.Minute), Expires: testNow.Add(time.Hour)})
			return err
		}},
		{"EndSession", func() error { return quick.EndSession(ctx, "session-1", testNow.Add(time.Hour), testNow) }},
	}
	for _, w := range writes {
		if err := w.op(); !errors.Is(err, redis.ErrNotReplicated) || !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s with the replica stopped: %v, want ErrNotReplicated and store.ErrUnavailable", w.name, err)
		}
	}
	if _, err := quick.Balance(ctx, acct, testNow, period, loadBalance); err != nil {
		t.Errorf("Balance, a read, with the replica stopped: %v", err)
	}

	// The replica is back: the settlement sent again is acknowledged and charges
	// once; the admission in doubt is voided at its deadline and charges nothing.
	// (Its slot is held until its lease ends, as a reply lost would leave it.)
	r.replica.Start()
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	must(t, testenv.Wait(rctx, func() error {
		_, err := quick.Close(rctx, closingOf(held, 2))
		return err
	}))
	later := testNow.Add(2 * time.Minute)
	if _, err := quick.Sweep(ctx, later, 100); err != nil {
		t.Fatal(err)
	}
	b, err := quick.Balance(ctx, acct, later, period, loadBalance)
	must(t, err)
	// The grant reported unavailable took effect: the master, which stayed up, had
	// it (a write in doubt may or may not outlive a failover).
	if b.Used != 3+2 || b.Remaining != loadBalance-5+10 {
		t.Errorf("balance: used %d, remaining %d; want the acknowledged charges, 5, used, and the rest and the grant in doubt remaining", b.Used, b.Remaining)
	}
}

// TestReplicasSuites runs the conformance suites on a Store and a WebhookStore whose
// every write waits for the master's replica: every method works the same.
func TestReplicasSuites(t *testing.T) {
	r := startReplicated(t, 2*time.Second)
	// A wait of a second, for a busy test machine (see TestReplicasWait).
	opts := &redis.Options{CallerClock: true, Replicas: 1, WaitTimeout: time.Second}
	storetest.Run(t, func(t *testing.T) any { return newStoreOn(t, r.client, opts) })
	storetest.Run(t, func(t *testing.T) any {
		s, err := redis.NewWebhookStore(r.client, &redis.WebhookOptions{Prefix: newPrefix(t, r.client),
			MaxPending: storetest.MinPendingBound, Replicas: 1, WaitTimeout: time.Second})
		must(t, err)
		return s
	})
}

// TestReplicasOptions checks the options New refuses.
func TestReplicasOptions(t *testing.T) {
	c := newClient("127.0.0.1:1", func(o *goredis.Options) { o.ReadTimeout = 250 * time.Millisecond }) // never contacted
	defer c.Close()
	ring := goredis.NewRing(&goredis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	defer ring.Close()
	for _, tc := range []struct {
		name   string
		client goredis.UniversalClient
		opts   redis.Options
		ok     bool
	}{
		{"default wait", c, redis.Options{Replicas: 1}, true},
		{"no replicas", ring, redis.Options{}, true},
		{"negative replicas", c, redis.Options{Replicas: -1}, false},
		{"negative wait", c, redis.Options{Replicas: 1, WaitTimeout: -time.Second}, false},
		{"wait past the read timeout", c, redis.Options{Replicas: 1, WaitTimeout: 250 * time.Millisecond}, false},
		{"ring", ring, redis.Options{Replicas: 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := redis.New(tc.client, &tc.opts)
			if (err == nil) != tc.ok {
				t.Errorf("New: %v, want success %v", err, tc.ok)
			}
			_, err = redis.NewWebhookStore(tc.client, &redis.WebhookOptions{Replicas: tc.opts.Replicas, WaitTimeout: tc.opts.WaitTimeout})
			if (err == nil) != tc.ok {
				t.Errorf("NewWebhookStore: %v, want success %v", err, tc.ok)
			}
		})
	}
}

// TestClusterReplicas runs the conformance suites on a Redis Cluster of 3 masters and
// 3 replicas with Options.Replicas 1, where every write is sent to its slot's master
// by the Store itself (ClusterClient.MasterForKey), with its fence and WAIT. Then it
// moves the slot of an account the hard way for the fence: the fence key first, alone,
// so that a settlement runs on the slot's old master, which still has the account's
// keys, and its fence is refused there (ASK); the Store writes the fence again until
// the move ends, and then on the new master, which has the keys moved and so the
// settlement: the settlement succeeds, and the new master's replica has it.
func TestClusterReplicas(t *testing.T) {
	addr(t)
	cl := testenv.StartRedisCluster(t, testenv.RedisClusterConfig{})
	seen := &refusals{n: map[string]int{}}
	c := newClusterClient(t, cl, nil)
	c.OnNewNode(func(n *goredis.Client) { n.AddHook(seen) })
	opts := &redis.Options{CallerClock: true, Replicas: 1, WaitTimeout: time.Second}
	storetest.Run(t, func(t *testing.T) any { return newStoreOn(t, c, opts) })
	storetest.Run(t, func(t *testing.T) any {
		s, err := redis.NewWebhookStore(c, &redis.WebhookOptions{Prefix: newPrefix(t, c),
			MaxPending: storetest.MinPendingBound, Replicas: 1, WaitTimeout: time.Second})
		must(t, err)
		return s
	})

	t.Run("fence of a moving slot", func(t *testing.T) {
		ctx := t.Context()
		s, prefix := newStorePrefix(t, c, opts)
		const acct = "moving"
		period := driver.MonthOf(testNow)
		must(t, s.Open(ctx, driver.Opening{Account: acct, Balance: loadBalance, Allowance: loadBalance, Period: period}))
		st := paidStep(acct, 5)
		if res, err := s.Admit(ctx, st); err != nil || res.Denied != driver.NotDenied {
			t.Fatalf("Admit: %+v, %v", res, err)
		}
		balance, _, _ := redis.AccountKeys(prefix, acct)
		fence := s.FenceKeyOf(balance)
		sl := slot(balance)
		if slot(fence) != sl {
			t.Fatalf("the fence %s is in slot %d, the account in %d", fence, slot(fence), sl)
		}
		src, err := cl.MasterOf(ctx, sl)
		must(t, err)
		dst := otherMaster(cl, src)
		// The slot starts moving, and its fence key moves first.
		must(t, dst.Client.Do(ctx, "CLUSTER", "SETSLOT", sl, "IMPORTING", src.ID).Err())
		must(t, src.Client.Do(ctx, "CLUSTER", "SETSLOT", sl, "MIGRATING", dst.ID).Err())
		host, port, _ := strings.Cut(dst.Addr, ":")
		must(t, src.Client.Do(ctx, "MIGRATE", host, port, "", 0, 10000, "KEYS", fence).Err())

		done := make(chan error, 1)
		go func() {
			_, err := s.Close(ctx, closingOf(st, 3))
			done <- err
		}()
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		must(t, testenv.Wait(wctx, func() error {
			seen.mu.Lock()
			defer seen.mu.Unlock()
			if seen.n["fence ASK"] == 0 {
				return errors.New("the fence was not refused yet")
			}
			return nil
		}))
		moved := migrateSlot(t, ctx, cl, sl, src, dst)
		if err := <-done; err != nil {
			t.Fatalf("Close while the slot moved: %v", err)
		}
		seen.mu.Lock()
		t.Logf("moved slot %d (%d keys after the fence); the nodes refused %v", sl, moved, seen.n)
		seen.mu.Unlock()
		b, err := s.Balance(ctx, acct, testNow, period, loadBalance)
		must(t, err)
		if b.Used != 3 {
			t.Errorf("used %d after a settlement of 3", b.Used)
		}
		// The new master's replica has the settlement (WAIT waited for it).
		reps, err := cl.ReplicasOf(ctx, dst)
		must(t, err)
		if len(reps) != 1 {
			t.Fatalf("%d replicas of %s", len(reps), dst.Addr)
		}
		onMaster, err := dst.Client.HGetAll(ctx, balance).Result()
		must(t, err)
		// A replica of a Cluster serves reads of its master's slots after READONLY.
		rc := newClient(reps[0].Addr, func(o *goredis.Options) {
			o.OnConnect = func(ctx context.Context, cn *goredis.Conn) error { return cn.ReadOnly(ctx).Err() }
		})
		defer rc.Close()
		onReplica, err := rc.HGetAll(ctx, balance).Result()
		must(t, err)
		if !maps.Equal(onMaster, onReplica) || onMaster["used"] != "3" {
			t.Errorf("the new master has %v, its replica %v", onMaster, onReplica)
		}
	})
}

// TestReplicasHook: with the hook on the client, a write's pipeline, the write
// followed by its fence and WAIT, is one phase that names the write's script.
func TestReplicasHook(t *testing.T) {
	r := startReplicated(t, 2*time.Second)
	c := r.clientOf(t, 2*time.Second)
	rec := &phasetest.Recorder{}
	c.AddHook(redis.Hook(rec))
	s := newStoreOn(t, c, &redis.Options{CallerClock: true, Replicas: 1, WaitTimeout: time.Second})
	ctx := context.WithValue(t.Context(), phasetest.Key{}, "work")
	// A first write opens the connection and loads the script (NOSCRIPT, then EVAL).
	must(t, s.Open(ctx, driver.Opening{Account: "first", Balance: 10, Allowance: 10, Period: driver.MonthOf(testNow)}))
	rec.Take()
	must(t, s.Open(ctx, driver.Opening{Account: "a", Balance: 10, Allowance: 10, Period: driver.MonthOf(testNow)}))
	var got []string
	for _, p := range rec.Take() {
		if p.Under == "work" {
			got = append(got, fmt.Sprintf("%s %s (%d)", p.Operation, p.Procedure, p.Batch))
		}
	}
	if want := "PIPELINE open (3)"; len(got) != 1 || got[0] != want {
		t.Errorf("phases %q, want one, %q", got, want)
	}
}
