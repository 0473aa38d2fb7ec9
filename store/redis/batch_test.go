package redis_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store/redis"
)

// gate is a hook that holds every script sent on its own while it is closed, and
// records the steps of each run of the hot path's scripts that Redis ran: alone, or in
// a pipeline. Before the first pipeline goes out it flushes Redis's script cache, so
// that the pipeline meets NOSCRIPT.
type gate struct {
	flush   func()
	held    chan struct{} // one token per held command
	open    chan struct{}
	mu      sync.Mutex
	singles []int   // the steps of each run sent alone
	piped   [][]int // the steps of each run of each pipeline
	flushed bool
}

// steps returns the number of steps of a run of admitScript or closeScript that Redis
// ran (err, the command's outcome, is nil), or 0.
func steps(cmd goredis.Cmder, err error) int {
	args := cmd.Args()
	if len(args) < 3 || err != nil {
		return 0
	}
	sha := fmt.Sprint(args[1])
	if cmd.Name() == "eval" {
		sum := sha1.Sum([]byte(sha))
		sha = hex.EncodeToString(sum[:])
	} else if cmd.Name() != "evalsha" {
		return 0
	}
	shared := 0
	switch sha {
	case redis.Scripts["admit"].Hash():
		shared = 7
	case redis.Scripts["close"].Hash():
		shared = 4
	default:
		return 0
	}
	n, _ := strconv.Atoi(fmt.Sprint(args[2]))
	return n - shared
}

func (g *gate) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (g *gate) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		if cmd.Name() == "evalsha" {
			g.mu.Lock()
			open := g.open
			g.mu.Unlock()
			select {
			case <-open:
			default:
				g.held <- struct{}{}
				<-open
			}
		}
		// The command's own error is set once the hooks have returned.
		err := next(ctx, cmd)
		if n := steps(cmd, err); n > 0 {
			g.mu.Lock()
			g.singles = append(g.singles, n)
			g.mu.Unlock()
		}
		return err
	}
}

func (g *gate) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		if cmds[0].Name() != "evalsha" { // a new connection's handshake
			return next(ctx, cmds)
		}
		g.mu.Lock()
		if !g.flushed {
			g.flush()
			g.flushed = true
		}
		g.mu.Unlock()
		err := next(ctx, cmds)
		var runs []int
		for _, cmd := range cmds {
			if n := steps(cmd, cmd.Err()); n > 0 {
				runs = append(runs, n)
			}
		}
		g.mu.Lock()
		g.piped = append(g.piped, runs)
		g.mu.Unlock()
		return err
	}
}

// TestBatchedAdmissions checks that admissions and closings that arrive while others
// are in flight go out together in pipelines, the calls of one account as one run of
// the script, that each call gets its own answer, that a pipeline meeting a flushed
// script cache recovers, and that the balances end exact.
func TestBatchedAdmissions(t *testing.T) {
	const lanes, queued, cost = 4, 40, 3
	admin := client(t)
	c := newClient(addr(t), nil)
	t.Cleanup(func() { c.Close() })
	g := &gate{held: make(chan struct{}, 2*lanes), open: make(chan struct{}),
		flush: func() { must(t, admin.Do(context.Background(), "SCRIPT", "FLUSH", "SYNC").Err()) }}
	s := newStoreOn(t, c, &redis.Options{Batch: 16})
	ctx := t.Context()
	period := driver.MonthOf(time.Now())
	// One account per lane, whose first call is held in flight on its lane while the
	// others queue; and one more that shares its lanes with the first, so that the
	// calls queued on those lanes are of two accounts, and go out as a pipeline of
	// two runs.
	var accounts []string
	admitLanes, closeLanes := make(map[int]bool), make(map[int]bool)
	for i := 0; len(accounts) < lanes+1; i++ {
		acct := "acct" + strconv.Itoa(i)
		al, cl := s.Lanes(acct)
		if len(accounts) < lanes && !admitLanes[al] && !closeLanes[cl] {
			admitLanes[al], closeLanes[cl] = true, true
			accounts = append(accounts, acct)
		} else if first, firstClose := s.Lanes(accounts[0]); len(accounts) == lanes && al == first && cl == firstClose {
			accounts = append(accounts, acct)
		}
	}
	keys := make(map[string]auth.Key)
	for _, acct := range accounts {
		key := auth.Key{ID: "k" + acct, AccountID: acct, Name: "primary", Primary: true, Hash: newHash()}
		must(t, s.CreateAccount(ctx, auth.Account{ID: acct, Plan: "p"}, key))
		must(t, s.Open(ctx, driver.Opening{Account: acct, Balance: 1000, Allowance: 1000, Period: period}))
		keys[acct] = key
		// A reservation made and settled before indexes the account, so that the calls
		// below are not its first, which wait for the index (see
		// TestKilledBetweenCommands): each is sent once.
		warm := newRequest()
		_, err := s.Reserve(ctx, driver.Reservation{Account: acct, Request: warm, Period: period, Allowance: 1000,
			Now: testNow, Expires: testNow.Add(30 * time.Minute)})
		must(t, err)
		_, err = s.Settle(ctx, driver.Settlement{Account: acct, Request: warm, Period: period, Allowance: 1000})
		must(t, err)
	}
	c.AddHook(g)

	// The first calls, one per lane, are of the first accounts; the queued ones of all.
	accountOf := func(i int) string {
		if i < lanes {
			return accounts[i]
		}
		return accounts[i%len(accounts)]
	}
	step := func(i int, req driver.RequestID) driver.Step {
		acct := accountOf(i)
		return driver.Step{Account: acct, Request: req, Now: time.Now(),
			Key:     &driver.KeyCheck{Account: acct, KeyID: keys[acct].ID, Hash: keys[acct].Hash},
			Slot:    &driver.SlotClaim{Ceiling: lanes + queued, Lease: time.Minute},
			Credits: &driver.Reservation{Account: acct, Request: req, Amount: cost, APIs: []string{"hash"}, Period: period, Allowance: 1000, Now: testNow, Expires: testNow.Add(time.Hour)}}
	}
	// run starts n calls of do and returns a wait for their outcomes.
	run := func(n int, do func(i int) error) func() []error {
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { errs[i] = do(i) })
		}
		return func() []error { wg.Wait(); return errs }
	}
	reqs := make([]driver.RequestID, lanes+queued)
	for i := range reqs {
		reqs[i] = newRequest()
	}
	results := make([]driver.StepResult, len(reqs))
	admit := func(off int) func(int) error {
		return func(i int) (err error) {
			results[off+i], err = s.Admit(ctx, step(off+i, reqs[off+i]))
			return err
		}
	}
	closing := func(off int) func(int) error {
		return func(i int) error {
			acct := accountOf(off + i)
			_, err := s.Close(ctx, driver.Closing{Account: acct, Request: reqs[off+i], ReleaseSlot: true,
				Settlement: &driver.Settlement{Account: acct, Request: reqs[off+i], Refund: cost, Uncount: []string{"hash"}, Period: period, Allowance: 1000}})
			return err
		}
	}
	perAccount := func(acct string) int {
		n := 0
		for i := range reqs {
			if accountOf(i) == acct {
				n++
			}
		}
		return n
	}

	for _, phase := range []struct {
		name string
		do   func(off int) func(int) error
	}{{"admissions", admit}, {"closings", closing}} {
		// One call per lane, held in flight; then calls that must wait for them.
		g.mu.Lock()
		g.singles, g.piped, g.flushed = nil, nil, false
		g.open = make(chan struct{})
		g.mu.Unlock()
		first := run(lanes, phase.do(0))
		for range lanes {
			<-g.held
		}
		rest := run(queued, phase.do(lanes))
		for s.Queued() != queued {
			runtime.Gosched()
		}
		close(g.open)
		for i, err := range append(first(), rest()...) {
			if err != nil {
				t.Fatalf("%s: call %d: %v", phase.name, i, err)
			}
		}
		g.mu.Lock()
		sent, runs, merged := 0, 0, false
		for i, n := range g.singles {
			sent += n
			if i >= lanes {
				runs, merged = runs+1, merged || n > 1
			}
		}
		for _, p := range g.piped {
			for _, n := range p {
				sent, runs, merged = sent+n, runs+1, merged || n > 1
			}
		}
		t.Logf("%s: runs sent alone %v, pipelines of runs %v", phase.name, g.singles, g.piped)
		switch {
		case len(g.singles) < lanes || len(g.piped) == 0:
			t.Errorf("%s: want %d runs alone, then the %d waiting calls in pipelines", phase.name, lanes, queued)
		case sent != lanes+queued:
			t.Errorf("%s: %d steps ran, want %d", phase.name, sent, lanes+queued)
		case !merged || runs > queued/2:
			t.Errorf("%s: the waiting calls of one account were not merged into runs", phase.name)
		}
		g.mu.Unlock()
		if phase.name == "admissions" {
			for i, r := range results {
				if r.Denied != driver.NotDenied || !r.Slot.Acquired {
					t.Fatalf("admission %d: %+v", i, r)
				}
			}
		}
		for _, acct := range accounts {
			b, err := s.Balance(ctx, acct, testNow, period, 1000)
			must(t, err)
			want := int64(1000 - cost*perAccount(acct))
			if phase.name == "closings" {
				want = 1000
			}
			if b.Remaining != want || b.Used != 1000-want {
				t.Errorf("after the %s: account %s: remaining %d, used %d; want %d, %d", phase.name, acct, b.Remaining, b.Used, want, 1000-want)
			}
			u, err := s.Usage(ctx, acct, period)
			must(t, err)
			if wantUse := int64(perAccount(acct)); phase.name == "admissions" && u["hash"] != wantUse || phase.name == "closings" && u["hash"] != 0 {
				t.Errorf("after the %s: account %s: usage %v", phase.name, acct, u)
			}
			n, err := s.InUse(ctx, acct, time.Now())
			must(t, err)
			if wantSlots := perAccount(acct); phase.name == "admissions" && n != wantSlots || phase.name == "closings" && n != 0 {
				t.Errorf("after the %s: account %s: %d slots held", phase.name, acct, n)
			}
		}
	}
	// Every admission saw the balance after the ones before it on its account: the
	// remaining credits they report are distinct.
	for _, acct := range accounts {
		seen := make(map[int64]bool)
		for i, r := range results {
			if accountOf(i) != acct {
				continue
			}
			if seen[r.Balance.Remaining] {
				t.Errorf("account %s: two admissions saw %d remaining", acct, r.Balance.Remaining)
			}
			seen[r.Balance.Remaining] = true
		}
	}
}
