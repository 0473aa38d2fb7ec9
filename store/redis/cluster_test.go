package redis_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/store/redis"
	"github.com/tollgate-dev/tollgate/store/storetest"
)

// startCluster starts a private Redis Cluster of 3 masters and 3 replicas (see
// testenv.StartRedisCluster) and returns it with a client on it, configured with
// redis.ClusterOptions, the package's recommendation, and longer timeouts for a noisy
// test machine. Redis Cluster refuses a command or a script whose keys hash to
// different slots (CROSSSLOT), and routes each slot to its master, so the suites run
// on it prove that every script keeps to one slot and that the client finds it.
func startCluster(t *testing.T) (*testenv.RedisCluster, *goredis.ClusterClient) {
	t.Helper()
	cl := testenv.StartRedisCluster(t, testenv.RedisClusterConfig{})
	c := newClusterClient(t, cl, nil)
	// A multi-slot command is refused: the cluster enforces what the test relies on.
	if err := c.Do(t.Context(), "MSET", "a", "1", "b", "2").Err(); err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Fatalf("MSET on two slots: %v, want CROSSSLOT", err)
	}
	return cl, c
}

// newClusterClient returns a client of cl with redis.ClusterOptions, timeouts for a
// noisy machine, and adjust's changes. The test's cleanup closes it.
func newClusterClient(t *testing.T, cl *testenv.RedisCluster, adjust func(*goredis.ClusterOptions)) *goredis.ClusterClient {
	o := redis.ClusterOptions(cl.Addrs()...)
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout = time.Second, 2*time.Second, 2*time.Second, 3*time.Second
	if adjust != nil {
		adjust(o)
	}
	c := goredis.NewClusterClient(o)
	t.Cleanup(func() { c.Close() })
	return c
}

// TestCluster runs the conformance suites on a Redis Cluster of 3 masters and 3
// replicas, where any script touching two slots would fail with CROSSSLOT and every
// account's keys live on the master of its slot: every suite the Store's interfaces
// call for.
func TestCluster(t *testing.T) {
	addr(t) // the cluster tests run where the others do
	_, c := startCluster(t)
	storetest.Run(t, func(t *testing.T) any { return newStoreOn(t, c, nil) })
	storetest.Run(t, func(t *testing.T) any { return newStoreOn(t, c, nil).Idempotency() })
	storetest.Run(t, func(t *testing.T) any { return newWebhookStore(t, c, storetest.MinPendingBound) })
}

// A paidLoad drives paid calls through a Store as the meter (internal/meter) does: an
// admission step that takes a concurrency slot and reserves credits, then a closing
// that settles the reservation (keeping all or part of the charge) and frees the slot.
// A closing that fails is sent again until it is acknowledged, since the admission
// was. It counts what every account was charged by acknowledged settlements: after a
// fault, each balance must be its opening balance less exactly that, once the
// reservations of admissions in doubt (whose reply was lost) are voided at their
// deadline, as the store's contract says; but for the writes a failover loses (see
// [paidLoad.lost]).
type paidLoad struct {
	t      *testing.T
	s      *redis.Store
	now    time.Time // the caller's clock, fixed while calls run: no reservation expires
	period driver.Period

	mu      sync.Mutex
	charged map[string]int64
	calls   []paidCall
	fails   []paidCall // every failed attempt: admissions, and closings sent again
	// lost are the admissions acknowledged and then unknown to the store when
	// settled: Redis replicates asynchronously, so a failover loses what the
	// master acknowledged last and its replica had not received yet (see
	// "Durability" in the package documentation). Such a call is not charged.
	lost   []paidCall
	faults []string // what must not happen: a refused step, a settlement never acknowledged
	// diagnose, if set, logs what may explain a wait that failed.
	diagnose func()
}

// A paidCall is one call of a paidLoad: its account, when it began and ended, and
// whether it was admitted (and then settled), or failed with err.
type paidCall struct {
	account    string
	start, end time.Time
	err        error
}

const loadBalance = 1_000_000_000

func newPaidLoad(t *testing.T, s *redis.Store, accounts []string) *paidLoad {
	l := &paidLoad{t: t, s: s, now: testNow, period: driver.MonthOf(testNow), charged: map[string]int64{}}
	for _, a := range accounts {
		must(t, s.Open(t.Context(), driver.Opening{Account: a, Balance: loadBalance, Allowance: loadBalance, Period: l.period}))
	}
	return l
}

// call makes one paid call on account, and records it.
func (l *paidLoad) call(ctx context.Context, account string, rng *rand.Rand) {
	start := time.Now()
	req := newRequest()
	amount := 1 + rng.Int64N(5)
	refund := rng.Int64N(amount + 1)
	r, err := l.s.Admit(ctx, driver.Step{Account: account, Request: req, Now: l.now,
		Slot: &driver.SlotClaim{Ceiling: 1000, Lease: time.Minute},
		Credits: &driver.Reservation{Account: account, Request: req, APIs: []string{"api"}, Amount: amount,
			Period: l.period, Allowance: loadBalance, Now: l.now, Expires: l.now.Add(time.Minute)}})
	if err == nil && r.Denied != driver.NotDenied {
		l.fault("admission %s of %s refused: %+v", req, account, r)
		return
	}
	if err != nil {
		// In doubt: the step may have been taken. Its reservation is voided at its
		// deadline; the Meter answers 503 and does not settle.
		c := paidCall{account, start, time.Now(), err}
		l.record(c, 0)
		if ctx.Err() == nil { // not a call the end of the load canceled
			l.mu.Lock()
			l.fails = append(l.fails, c)
			l.mu.Unlock()
		}
		return
	}
	admitted := time.Now()
	c := driver.Closing{Account: account, Request: req, ReleaseSlot: true, Settlement: &driver.Settlement{
		Account: account, Request: req, Refund: refund, Period: l.period, Allowance: loadBalance, Now: l.now}}
	deadline := time.Now().Add(time.Minute)
	for {
		closing := time.Now()
		_, err := l.s.Close(context.WithoutCancel(ctx), c)
		switch {
		case err == nil:
			l.record(paidCall{account, start, time.Now(), nil}, amount-refund)
			return
		case errors.Is(err, store.ErrNotFound), errors.Is(err, driver.ErrVoided):
			l.mu.Lock()
			l.lost = append(l.lost, paidCall{account, start, admitted, err})
			l.mu.Unlock()
			return
		case time.Now().After(deadline):
			l.fault("the settlement of %s of %s was not acknowledged in a minute: %v", req, account, err)
			return
		}
		l.mu.Lock()
		l.fails = append(l.fails, paidCall{account, closing, time.Now(), err})
		l.mu.Unlock()
		time.Sleep(20 * time.Millisecond) // the store is failing over: try again
	}
}

func (l *paidLoad) record(c paidCall, charge int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, c)
	if c.err == nil {
		l.charged[c.account] += charge
	}
}

func (l *paidLoad) fault(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.faults = append(l.faults, fmt.Sprintf(format, args...))
}

// run makes calls on each account in its own goroutine, one after the other, until
// ctx ends, and returns a function that waits for them.
func (l *paidLoad) run(ctx context.Context, accounts []string, perAccount int) (wait func()) {
	var wg sync.WaitGroup
	for i, a := range accounts {
		for j := range perAccount {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(i), uint64(j)))
				for ctx.Err() == nil {
					l.call(ctx, a, rng)
				}
			})
		}
	}
	return wg.Wait
}

// snapshot returns the calls recorded so far.
func (l *paidLoad) snapshot() []paidCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// waitCalls waits until ok says the calls recorded so far are enough.
func (l *paidLoad) waitCalls(what string, d time.Duration, ok func([]paidCall) bool) {
	l.t.Helper()
	ctx, cancel := context.WithTimeout(l.t.Context(), d)
	defer cancel()
	if err := testenv.Wait(ctx, func() error {
		if !ok(l.snapshot()) {
			return errors.New(what)
		}
		return nil
	}); err != nil {
		l.mu.Lock()
		last := map[string]paidCall{}
		for _, c := range l.fails {
			last[c.account] = c
		}
		for a, c := range last {
			l.t.Logf("the last failed attempt of %s ended %v ago: %v", a, time.Since(c.end), c.err)
		}
		l.mu.Unlock()
		if l.diagnose != nil {
			l.diagnose()
		}
		l.t.Fatalf("waiting until %s: %v", what, err)
	}
}

// check voids the reservations still open (those of admissions in doubt) by moving
// past their deadline, then compares every balance with its opening balance less what
// acknowledged settlements charged, and reports the faults the calls met. The
// accounts of failed masters (failed) may have been charged less, never more, by the
// writes their failover lost: check returns those credits, by account.
func (l *paidLoad) check(ctx context.Context, accounts []string, failed map[string]bool) (free map[string]int64) {
	t := l.t
	t.Helper()
	for _, f := range l.faults {
		t.Error(f)
	}
	for _, c := range l.lost {
		if !failed[c.account] {
			t.Errorf("account %s, on a master that did not fail: an admitted reservation is lost: %v", c.account, c.err)
		}
	}
	later := l.now.Add(2 * time.Minute)
	for {
		n, err := l.s.Sweep(ctx, later, 1000)
		must(t, err)
		if n < 1000 {
			break
		}
	}
	free = map[string]int64{}
	wrong := 0
	for _, a := range accounts {
		b, err := l.s.Balance(ctx, a, later, l.period, loadBalance)
		must(t, err)
		want := l.charged[a]
		if b.Remaining+b.Used != loadBalance {
			t.Errorf("account %s: remaining %d plus used %d is not its opening balance %d", a, b.Remaining, b.Used, int64(loadBalance))
		}
		switch {
		case b.Used == want:
		case failed[a] && b.Used < want:
			free[a] = want - b.Used
		default:
			wrong++
			t.Errorf("account %s: remaining %d, used %d; acknowledged settlements charged %d: want %d and %d",
				a, b.Remaining, b.Used, want, loadBalance-want, want)
		}
	}
	ok, inDoubt := 0, 0
	for _, c := range l.calls {
		if c.err == nil {
			ok++
		} else {
			inDoubt++
		}
	}
	t.Logf("%d accounts: %d calls settled, %d admissions failed (in doubt, voided at their deadline); %d balances wrong",
		len(accounts), ok, inDoubt, wrong)
	return free
}

// accountsBySlot returns n account ids ("<name>-<i>") whose slots are spread over the
// cluster's masters, and the master of each.
func accountsBySlot(t *testing.T, cl *testenv.RedisCluster, name string, n int) ([]string, map[string]*testenv.RedisNode) {
	t.Helper()
	owner := map[string]*testenv.RedisNode{}
	per := map[*testenv.RedisNode]int{}
	var accounts []string
	for i := range n {
		a := name + "-" + strconv.Itoa(i)
		m, err := cl.MasterOf(t.Context(), slot("{"+a+"}"))
		must(t, err)
		owner[a] = m
		per[m]++
		accounts = append(accounts, a)
	}
	if len(per) != cl.Masters {
		t.Fatalf("the accounts' slots are on %d masters of %d", len(per), cl.Masters)
	}
	return accounts, owner
}

// TestClusterFailover kills (kill -9) a master of a Redis Cluster while paid calls run
// on accounts of every master, with the client options the package recommends. After
// the master's replica takes over: every balance is its opening balance less what
// acknowledged settlements charged, once admissions in doubt are voided at their
// deadline, but for the last writes the dead master acknowledged and had not
// replicated (replication is asynchronous), which the test finds one by one and which
// only ever make a call free; the failed master's accounts are served again (the test
// logs how long after the promotion); the other masters' accounts kept being served
// during the outage, but for a few calls at the instant of the kill. Ping fails while
// the dead master is listed, and answers nil once the replica has taken over.
func TestClusterFailover(t *testing.T) { clusterFailover(t, 0) }

// TestClusterFailoverReplicas kills a master as TestClusterFailover does, with
// Options.Replicas 1 (each master has one replica): every write acknowledged waited for
// the replica, so the failover loses none, and every balance is exactly its opening
// balance less what acknowledged settlements charged. The replica promoted has no
// replica of its own, so its accounts' writes are refused as unavailable until the
// killed node, restarted as a supervisor would restart it, rejoins as its replica;
// the test logs how long after the promotion they are served again. The other
// masters' accounts never fail.
func TestClusterFailoverReplicas(t *testing.T) { clusterFailover(t, 1) }

// clusterFailover is TestClusterFailover, with Options.Replicas durable.
func clusterFailover(t *testing.T, durable int) {
	addr(t)
	testenv.SkipUnlessFull(t, "paid calls while a master of a Redis Cluster is killed with kill -9 and fails over")
	cl, c := startCluster(t)
	// A wait of a second: on the test's busy machine (2 cores for six servers and the
	// load), a replica's acknowledgment can take longer than the default 100ms.
	s, _ := newStorePrefix(t, c, &redis.Options{CallerClock: true, Replicas: durable, WaitTimeout: time.Second})
	accounts, owner := accountsBySlot(t, cl, "acct", 24)
	l := newPaidLoad(t, s, accounts)

	ctx, stop := context.WithCancel(t.Context())
	wait := l.run(ctx, accounts, 1)
	defer func() { stop(); wait() }()
	// With Replicas, a control load runs on accounts of their own through a Store
	// that does not wait, to show what the failover loses without it.
	var control *paidLoad
	var controlAccounts []string
	var controlOwner map[string]*testenv.RedisNode
	if durable > 0 {
		cs, _ := newStorePrefix(t, c, nil)
		controlAccounts, controlOwner = accountsBySlot(t, cl, "ctl", 12)
		control = newPaidLoad(t, cs, controlAccounts)
		waitLoad, waitControl := wait, control.run(ctx, controlAccounts, 1)
		wait = func() { waitLoad(); waitControl() }
	}
	// Every account is being served.
	l.waitCalls("every account has 20 settled calls", time.Minute, func(calls []paidCall) bool {
		n := map[string]int{}
		for _, c := range calls {
			if c.err == nil {
				n[c.account]++
			}
		}
		for _, a := range accounts {
			if n[a] < 20 {
				return false
			}
		}
		return true
	})

	victim := owner[accounts[0]]
	replicas, err := cl.ReplicasOf(t.Context(), victim)
	must(t, err)
	if len(replicas) != 1 {
		t.Fatalf("master %s has %d replicas, want 1", victim.Addr, len(replicas))
	}
	heir := replicas[0]
	affected, indexedOnVictim := map[string]bool{}, map[string]bool{}
	for _, a := range accounts {
		affected[a] = owner[a] == victim
		m, err := cl.MasterOf(t.Context(), slot(s.IndexKeyOf(a)))
		must(t, err)
		indexedOnVictim[a] = m == victim
	}
	var cut time.Time
	if durable > 0 {
		// Cut the master off its replica first: pause the replica (it can neither
		// read nor reconnect) and close the master's end of the link, so that no
		// write the master takes from now on reaches the replica that will take over.
		// Without Replicas, those the master acknowledges are lost; with it, none is
		// acknowledged. The replica resumes as the master is killed, well within the
		// node timeout, and is promoted.
		must(t, heir.Pause())
		cut = time.Now()
		if err := victim.Client.Do(t.Context(), "CLIENT", "KILL", "TYPE", "replica").Err(); err != nil {
			heir.Resume()
			t.Fatal(err)
		}
		// Until the control's calls on the master's accounts have been acknowledged
		// after the cut, at most a second.
		cctx, cancel := context.WithTimeout(t.Context(), time.Second)
		testenv.Wait(cctx, func() error {
			for _, c := range control.snapshot() {
				if c.err == nil && c.start.After(cut) && controlOwner[c.account] == victim {
					return nil
				}
			}
			return errors.New("no call yet")
		})
		cancel()
	}
	killed := time.Now()
	victim.Kill()
	if durable > 0 {
		must(t, heir.Resume())
		t.Logf("cut master %s off its replica %s for %v before killing it", victim.Addr, heir.Addr, killed.Sub(cut).Round(time.Millisecond))
	}
	t.Logf("killed master %s; its replica is %s", victim.Addr, heir.Addr)
	// A readiness check sees the dead master (Ping pings every master the cluster
	// lists) until its replica takes over, which takes the cluster's node timeout.
	pingCtx, cancelPing := context.WithTimeout(t.Context(), time.Minute)
	defer cancelPing()
	if err := testenv.Wait(pingCtx, func() error {
		if s.Ping(pingCtx) == nil {
			return errors.New("Ping answers nil")
		}
		return nil
	}); err != nil {
		t.Errorf("Ping after a master was killed: %v; want an error until its replica takes over", err)
	}

	l.diagnose = func() {
		ctx := context.WithoutCancel(t.Context())
		for _, n := range cl.Nodes {
			if n.Alive() {
				nodes, err := n.Client.ClusterNodes(ctx).Result()
				t.Logf("CLUSTER NODES on %s: %v\n%s", n.Addr, err, nodes)
			}
		}
		shards, err := c.ClusterShards(ctx).Result()
		t.Logf("CLUSTER SHARDS through the client: %+v %v", shards, err)
	}
	pctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	must(t, testenv.Wait(pctx, func() error {
		role, err := heir.Role(pctx)
		if err == nil && role != "master" {
			err = errors.New("the replica is still a replica: " + role)
		}
		return err
	}))
	promoted := time.Now()
	t.Logf("the replica was promoted %v after the kill", promoted.Sub(killed).Round(time.Millisecond))
	if durable > 0 {
		// The new master has no replica: a supervisor restarts the killed node, which
		// rejoins as its replica (empty, without persistence) and syncs from it.
		victim.Restart(t)
		t.Logf("the killed node was restarted %v after the promotion", time.Since(promoted).Round(time.Millisecond))
	}
	if err := testenv.Wait(pingCtx, func() error { return s.Ping(pingCtx) }); err != nil {
		t.Errorf("Ping after the replica took over: %v; want nil once the cluster lists the new master", err)
	}
	t.Logf("Ping answers nil again %v after the promotion", time.Since(promoted).Round(time.Millisecond))

	// The failed master's accounts are served again: each has a call begun after the
	// promotion and settled. The client reloads the topology every 2 seconds
	// (redis.ClusterStateReloadInterval): half a minute is plenty, where go-redis's
	// default interval, a minute, kept them failing 55 seconds after the promotion.
	l.waitCalls("every account of the failed master has a call settled after the promotion", 30*time.Second, func(calls []paidCall) bool {
		served := map[string]bool{}
		for _, c := range calls {
			if c.err == nil && c.start.After(promoted) {
				served[c.account] = true
			}
		}
		for a, aff := range affected {
			if aff && !served[a] {
				return false
			}
		}
		return true
	})
	stop()
	wait()

	// When the failed master's accounts came back: the end of their last failed
	// attempt, and of the first call of each begun after the promotion and settled.
	var lastFailed, recovered time.Time
	var firstErr error
	for _, c := range l.fails {
		if affected[c.account] {
			if firstErr == nil {
				firstErr = c.err
			}
			if c.end.After(lastFailed) {
				lastFailed = c.end
			}
		}
	}
	first := map[string]time.Time{}
	for _, c := range l.calls {
		if affected[c.account] && c.err == nil && c.start.After(promoted) && (first[c.account].IsZero() || c.end.Before(first[c.account])) {
			first[c.account] = c.end
		}
	}
	for _, end := range first {
		if end.After(recovered) {
			recovered = end
		}
	}
	t.Logf("the failed master's accounts: their last failed attempt ended %v after the promotion; each had a call settled %v after it (first error: %v)",
		lastFailed.Sub(promoted).Round(time.Millisecond), recovered.Sub(promoted).Round(time.Millisecond), firstErr)
	if durable > 0 {
		unreplicated := 0
		for _, c := range l.fails {
			if affected[c.account] && errors.Is(c.err, redis.ErrNotReplicated) {
				unreplicated++
			}
		}
		t.Logf("attempts of the failed master's accounts refused for want of a replica: %d", unreplicated)
	}

	// The other masters' accounts, between the kill and the promotion.
	okDuring := map[string]int{}
	failedDuring, settledDuring := 0, 0
	var otherErrs []error
	for _, c := range l.fails {
		if !affected[c.account] && c.end.After(killed) && c.start.Before(promoted) {
			failedDuring++
			otherErrs = append(otherErrs, c.err)
		}
	}
	for _, c := range l.calls {
		if !affected[c.account] && c.err == nil && c.end.After(killed) && c.start.Before(promoted) {
			settledDuring++
			okDuring[c.account]++
		}
	}
	t.Logf("the other masters' accounts during the outage: %d calls settled, %d attempts failed %v", settledDuring, failedDuring, otherErrs)
	if durable > 0 {
		// Each master's writes go in pipelines of their own: the others' never fail,
		// but for the indexing of an account whose shard of the index of expiring
		// accounts lives on the failed master (see indexFirst), a write of its own
		// that a reservation needs now and then.
		for _, c := range l.fails {
			if !affected[c.account] && !(indexedOnVictim[c.account] && strings.Contains(c.err.Error(), "indexing the account")) {
				t.Errorf("account %s of a live master: an attempt failed %v after the kill: %v", c.account, c.end.Sub(killed), c.err)
			}
		}
	} else if failedDuring > 5+settledDuring/100 {
		t.Errorf("the other masters' accounts failed %d attempts against %d calls settled during the outage: they must be unaffected but for the instant of the kill",
			failedDuring, settledDuring)
	}
	for _, a := range accounts {
		if !affected[a] && okDuring[a] == 0 {
			t.Errorf("account %s of a live master settled no call during the outage", a)
		}
	}

	hctx, hcancel := context.WithTimeout(t.Context(), time.Minute)
	defer hcancel()
	must(t, cl.WaitHealthy(hctx))
	if durable > 0 {
		// Every write acknowledged reached the replica that took over: nothing lost,
		// every balance exact.
		for _, c := range l.lost {
			t.Errorf("account %s: an admission acknowledged %v after the cut was lost by the failover: %v", c.account, c.end.Sub(cut), c.err)
		}
		l.lost = nil
		l.check(t.Context(), accounts, nil)
		cut := 0
		for _, c := range l.fails {
			if affected[c.account] && c.end.Before(killed) && errors.Is(c.err, redis.ErrNotReplicated) {
				cut++
			}
		}
		// The control lost what its master acknowledged after the cut.
		controlAffected := map[string]bool{}
		for _, a := range controlAccounts {
			controlAffected[a] = controlOwner[a] == victim
		}
		free := control.check(t.Context(), controlAccounts, controlAffected)
		var freeCredits int64
		for _, n := range free {
			freeCredits += n
		}
		t.Logf("while the master was cut off its replica, it refused %d writes for want of the replica; without Replicas, the failover lost %d acknowledged admissions and %d credits of acknowledged charges %v",
			cut, len(control.lost), freeCredits, free)
		if len(control.lost) == 0 && freeCredits == 0 {
			t.Errorf("the control lost nothing: the master acknowledged none of its writes while cut off its replica, and the test proves nothing")
		}
		return
	}
	free := l.check(t.Context(), accounts, affected)
	// What the failover lost: the last writes the master acknowledged before it was
	// killed, which its replica had not received. Each lost admission was admitted
	// before the kill; each account of the failed master lost at most its last two
	// writes (an admission or a settlement of at most 5 credits each), in the
	// customer's favour: a call free, never one charged twice.
	for _, c := range l.lost {
		if c.end.After(killed) {
			t.Errorf("account %s: an admission acknowledged %v after the kill was lost", c.account, c.end.Sub(killed))
		}
	}
	var freeCredits int64
	for a, n := range free {
		freeCredits += n
		if n > 2*5 {
			t.Errorf("account %s was charged %d credits less than its acknowledged settlements: more than its last writes", a, n)
		}
	}
	t.Logf("lost by the failover (asynchronous replication): %d acknowledged admissions, %d credits of acknowledged charges (%v)",
		len(l.lost), freeCredits, free)
}

// A refusals hook counts the commands a cluster's nodes refused because their slot was
// moving (TRYAGAIN, ASK, MOVED), and when the first and the last were. The refusals
// of a SET, which the Store sends only as the fence of Options.Replicas, are counted
// as "fence ASK" and so on.
type refusals struct {
	mu          sync.Mutex
	n           map[string]int
	first, last time.Time
}

func (r *refusals) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (r *refusals) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		err := next(ctx, cmd)
		r.note(cmd)
		return err
	}
}

func (r *refusals) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			r.note(cmd)
		}
		return err
	}
}

func (r *refusals) note(cmd goredis.Cmder) {
	err := cmd.Err()
	if err == nil {
		return
	}
	kind, _, _ := strings.Cut(err.Error(), " ")
	if kind != "TRYAGAIN" && kind != "ASK" && kind != "MOVED" {
		return
	}
	if cmd.Name() == "set" {
		kind = "fence " + kind
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if r.first.IsZero() {
		r.first = now
	}
	r.last = now
	r.n[kind]++
}

// TestClusterResharding moves the slot of a hot account to another master
// (CLUSTER SETSLOT IMPORTING and MIGRATING, MIGRATE of its keys, SETSLOT NODE) while
// calls run on it. The nodes refuse the account's scripts while its keys are split
// between them (TRYAGAIN) and redirect them (ASK, then MOVED); the client and the
// Store send them again, so that every call succeeds, and the balance is exact.
func TestClusterResharding(t *testing.T) { clusterResharding(t, 0) }

// TestClusterReshardingReplicas moves a hot account's slot as TestClusterResharding
// does, with Options.Replicas 1: the Store sends each write to the slot's master
// itself, with its fence and WAIT, and sends a write the node refused (ASK, MOVED,
// TRYAGAIN) again rather than follow the redirection, and a fence refused while the
// slot moves again until the move ends, so that WAIT reaches the node that has the
// write. Every call succeeds, and the balance is exact.
func TestClusterReshardingReplicas(t *testing.T) { clusterResharding(t, 1) }

// clusterResharding is TestClusterResharding, with Options.Replicas durable.
func clusterResharding(t *testing.T, durable int) {
	addr(t)
	testenv.SkipUnlessFull(t, "paid calls while a Redis Cluster moves a slot")
	cl := testenv.StartRedisCluster(t, testenv.RedisClusterConfig{})
	seen := &refusals{n: map[string]int{}}
	var retried atomic.Int64
	c := newClusterClient(t, cl, nil)
	// Every node's client counts the refusals it received (before any node's
	// client exists: they are made on first use).
	c.OnNewNode(func(n *goredis.Client) { n.AddHook(seen) })
	c.AddHook(&countTryAgain{&retried})
	s, _ := newStorePrefix(t, c, &redis.Options{CallerClock: true, Replicas: durable, WaitTimeout: time.Second})
	const hot = "hot"
	hotSlot := slot("{" + hot + "}")
	l := newPaidLoad(t, s, []string{hot})

	ctx, stop := context.WithCancel(t.Context())
	wait := l.run(ctx, []string{hot}, 8)
	defer func() { stop(); wait() }()
	settled := func(n int) func([]paidCall) bool {
		return func(calls []paidCall) bool {
			k := 0
			for _, c := range calls {
				if c.err == nil {
					k++
				}
			}
			return k >= n
		}
	}
	l.waitCalls("2000 calls are settled", 2*time.Minute, settled(2000))

	src, err := cl.MasterOf(t.Context(), hotSlot)
	must(t, err)
	dst := otherMaster(cl, src)
	mctx, mcancel := context.WithTimeout(t.Context(), time.Minute)
	defer mcancel()
	began := time.Now()
	moved := migrateSlot(t, mctx, cl, hotSlot, src, dst)
	took := time.Since(began)
	before := len(l.snapshot())
	l.waitCalls("500 more calls are settled", 2*time.Minute, settled(before+500))
	stop()
	wait()

	if m, err := cl.MasterOf(t.Context(), hotSlot); err != nil || m != dst {
		t.Fatalf("the hot slot's master is %v (%v), want %s", m, err, dst.Addr)
	}
	failed := len(l.fails)
	for _, c := range l.fails[:min(failed, 5)] {
		t.Errorf("a call failed while the slot moved: %v", c.err)
	}
	seen.mu.Lock()
	t.Logf("moved slot %d (%d keys) from %s to %s in %v; the nodes refused %v commands over %v; the client returned %d refusals to the Store, which sent them again",
		hotSlot, moved, src.Addr, dst.Addr, took.Round(time.Millisecond), seen.n, seen.last.Sub(seen.first).Round(time.Millisecond), retried.Load())
	if seen.n["TRYAGAIN"]+seen.n["ASK"] == 0 {
		t.Errorf("no call met the slot while it moved: the test proves nothing")
	}
	seen.mu.Unlock()
	if failed > 0 {
		t.Errorf("%d calls of %d failed while the slot moved; a refusal must be retried", failed, len(l.calls))
	}
	l.check(t.Context(), []string{hot}, nil)
}

// countTryAgain counts the commands the cluster client returns with a refusal of a
// moving slot, which the Store must send again.
type countTryAgain struct{ n *atomic.Int64 }

func (h *countTryAgain) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h *countTryAgain) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		err := next(ctx, cmd)
		h.count(cmd)
		return err
	}
}

func (h *countTryAgain) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			h.count(cmd)
		}
		return err
	}
}

func (h *countTryAgain) count(cmd goredis.Cmder) {
	if err := cmd.Err(); err != nil && (goredis.IsTryAgainError(err) || strings.HasPrefix(err.Error(), "ASK ") || strings.HasPrefix(err.Error(), "MOVED ")) {
		h.n.Add(1)
	}
}

// otherMaster returns a master of cl, as started, other than m.
func otherMaster(cl *testenv.RedisCluster, m *testenv.RedisNode) *testenv.RedisNode {
	for _, n := range cl.Nodes[:cl.Masters] {
		if n != m {
			return n
		}
	}
	return nil
}

// migrateSlot moves slot from src to dst as redis-cli --cluster reshard does, and
// returns the number of keys moved: dst imports it, src migrates it, src's keys of
// the slot are moved 10 at a time (MIGRATE ... KEYS, redis-cli's default
// --cluster-pipeline), then every master is told that dst owns it.
func migrateSlot(t *testing.T, ctx context.Context, cl *testenv.RedisCluster, slot int, src, dst *testenv.RedisNode) int {
	t.Helper()
	must(t, dst.Client.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", src.ID).Err())
	must(t, src.Client.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", dst.ID).Err())
	host, port, _ := strings.Cut(dst.Addr, ":")
	moved := 0
	for {
		keys, err := src.Client.ClusterGetKeysInSlot(ctx, slot, 10).Result()
		must(t, err)
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", host, port, "", 0, 10000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		must(t, src.Client.Do(ctx, args...).Err())
		moved += len(keys)
	}
	others := slices.DeleteFunc(slices.Clone(cl.Nodes[:cl.Masters]), func(n *testenv.RedisNode) bool { return n == src || n == dst })
	for _, n := range append([]*testenv.RedisNode{dst, src}, others...) {
		must(t, n.Client.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dst.ID).Err())
	}
	return moved
}
