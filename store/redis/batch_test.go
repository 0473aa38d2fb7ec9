package redis_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/store/redis"
)

// gate is a hook that holds every command sent on its own while it is closed, and
// counts the pipelines and their commands; before the first pipeline goes out it
// flushes Redis's script cache, so that the pipeline meets NOSCRIPT.
type gate struct {
	flush   func()
	held    chan struct{} // one token per held command
	open    chan struct{}
	mu      sync.Mutex
	singles int
	piped   []int // the sizes of the pipelines
}

func (g *gate) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (g *gate) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		if cmd.Name() == "evalsha" {
			g.mu.Lock()
			g.singles++
			open := g.open
			g.mu.Unlock()
			select {
			case <-open:
			default:
				g.held <- struct{}{}
				<-open
			}
		}
		return next(ctx, cmd)
	}
}

func (g *gate) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		if cmds[0].Name() != "evalsha" { // a new connection's handshake
			return next(ctx, cmds)
		}
		g.mu.Lock()
		if len(g.piped) == 0 {
			g.flush()
		}
		g.piped = append(g.piped, len(cmds))
		g.mu.Unlock()
		return next(ctx, cmds)
	}
}

// TestBatchedAdmissions checks that admissions and closings that arrive while others
// are in flight go out together in pipelines, one EVALSHA per call, that each call gets
// its own answer, that a pipeline meeting a flushed script cache recovers, and that the
// balance ends exact.
func TestBatchedAdmissions(t *testing.T) {
	const lanes, queued, cost = 4, 40, 3
	admin := client(t)
	c := newClient(addr(t), nil)
	t.Cleanup(func() { c.Close() })
	g := &gate{held: make(chan struct{}, 2*lanes), open: make(chan struct{}),
		flush: func() { must(t, admin.Do(context.Background(), "SCRIPT", "FLUSH", "SYNC").Err()) }}
	s := newStoreOn(t, c, &redis.Options{Batch: 16})
	ctx := t.Context()
	period := billing.MonthOf(time.Now())
	key := auth.Key{ID: "k", AccountID: "a", Name: "primary", Primary: true, Hash: newHash()}
	must(t, s.CreateAccount(ctx, auth.Account{ID: "a", Plan: "p"}, key))
	must(t, s.Open(ctx, billing.Opening{Account: "a", Balance: 1000, Allowance: 1000, Period: period}))
	c.AddHook(g)

	step := func(req billing.RequestID) billing.Step {
		return billing.Step{Account: "a", Request: req, Now: time.Now(),
			Key:     &billing.KeyCheck{Account: "a", KeyID: key.ID, Hash: key.Hash},
			Slot:    &billing.SlotClaim{Ceiling: lanes + queued, Lease: time.Minute},
			Credits: &billing.Reservation{Account: "a", Request: req, Amount: cost, APIs: []string{"hash"}, Period: period, Allowance: 1000}}
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
	reqs := make([]billing.RequestID, lanes+queued)
	for i := range reqs {
		reqs[i] = newRequest()
	}
	results := make([]billing.StepResult, len(reqs))
	admit := func(off int) func(int) error {
		return func(i int) (err error) {
			results[off+i], err = s.Admit(ctx, step(reqs[off+i]))
			return err
		}
	}
	closing := func(off int) func(int) error {
		return func(i int) error {
			_, err := s.Close(ctx, billing.Closing{Account: "a", Request: reqs[off+i], ReleaseSlot: true,
				Settlement: &billing.Settlement{Account: "a", Request: reqs[off+i], Refund: cost, Uncount: []string{"hash"}, Period: period, Allowance: 1000}})
			return err
		}
	}

	for _, phase := range []struct {
		name string
		do   func(off int) func(int) error
	}{{"admissions", admit}, {"closings", closing}} {
		// One call per lane, held in flight; then calls that must wait for them.
		g.mu.Lock()
		g.singles, g.piped = 0, nil
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
		sent := 0
		for _, n := range g.piped {
			sent += n
		}
		if g.singles < lanes || len(g.piped) == 0 || sent+g.singles-lanes < queued {
			t.Errorf("%s: %d commands alone, pipelines of %v; want %d alone, then the %d waiting calls in pipelines", phase.name, g.singles, g.piped, lanes, queued)
		}
		t.Logf("%s: %d commands sent alone, pipelines of %v", phase.name, g.singles, g.piped)
		if len(g.piped) > queued/2 {
			t.Errorf("%s: %d pipelines for %d waiting calls: they were not batched", phase.name, len(g.piped), queued)
		}
		g.mu.Unlock()
		if phase.name == "admissions" {
			for i, r := range results {
				if r.Denied != billing.NotDenied || !r.Slot.Acquired {
					t.Fatalf("admission %d: %+v", i, r)
				}
			}
			if got, want := results[len(results)-1].Balance.Remaining, int64(1000-cost*len(reqs)); got > 1000-cost || got < want {
				t.Errorf("last admission saw %d remaining", got)
			}
		}
		b, err := s.Balance(ctx, "a", period, 1000)
		must(t, err)
		want := int64(1000 - cost*len(reqs))
		if phase.name == "closings" {
			want = 1000
		}
		if b.Remaining != want {
			t.Errorf("after the %s: remaining %d, want %d", phase.name, b.Remaining, want)
		}
	}
	n, err := s.InUse(ctx, "a", time.Now())
	must(t, err)
	if n != 0 {
		t.Errorf("%d slots still held after every closing", n)
	}
}
