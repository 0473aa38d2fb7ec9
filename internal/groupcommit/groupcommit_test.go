package groupcommit

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"testing"
)

// fakeRuns is a combiner's run function for tests: it records each group and, for the
// groups it is told to, waits to be released before answering each call with its
// parameter doubled.
type fakeRuns struct {
	mu     sync.Mutex
	groups [][]int
	hold   chan struct{} // when not nil, a run waits for it to be closed
	fail   error         // when not nil, a run fails with it
}

func (f *fakeRuns) run(ctx context.Context, lane string, ps []int) ([]int, error) {
	f.mu.Lock()
	f.groups = append(f.groups, slices.Clone(ps))
	hold := f.hold
	f.mu.Unlock()
	if hold != nil {
		<-hold
	}
	f.mu.Lock()
	fail := f.fail
	f.mu.Unlock()
	if fail != nil {
		return nil, fail
	}
	out := make([]int, len(ps))
	for i, p := range ps {
		out[i] = 2 * p
	}
	return out, nil
}

func (f *fakeRuns) sent() [][]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.groups)
}

// waitQueued waits until n calls wait for a group in flight.
func waitQueued(c *Combiner[int, int], n int) {
	for c.Queued() != n {
		runtime.Gosched()
	}
}

// waitSent waits until the fake has received n groups.
func waitSent(f *fakeRuns, n int) {
	for len(f.sent()) < n {
		runtime.Gosched()
	}
}

type result struct{ out, want int }

// TestCombinerGroups checks that a call for an idle lane is sent alone and at once,
// that calls arriving while it is in flight are sent together, in order, up to the
// maximum, each receiving its own answer, and that nothing is left behind.
func TestCombinerGroups(t *testing.T) {
	f := &fakeRuns{hold: make(chan struct{})}
	c := New(3, f.run)
	ctx := t.Context()
	results := make(chan result, 8)
	call := func(p int) {
		out, err := c.Do(ctx, "a", p)
		if err != nil {
			t.Error(err)
		}
		results <- result{out, 2 * p}
	}

	go call(1)
	waitSent(f, 1) // in flight, held
	for p := 2; p <= 5; p++ {
		go call(p)
		waitQueued(c, p-1) // queued in order
	}
	close(f.hold)
	for range 5 {
		if r := <-results; r.out != r.want {
			t.Errorf("a call got %d, want %d", r.out, r.want)
		}
	}
	want := [][]int{{1}, {2, 3, 4}, {5}}
	if got := f.sent(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("groups %v, want %v", got, want)
	}
	if len(c.lanes) != 0 {
		t.Errorf("%d lanes left after the calls", len(c.lanes))
	}
}

// TestCombinerLanesIndependent checks that a call for one lane does not wait for
// another lane's group.
func TestCombinerLanesIndependent(t *testing.T) {
	first := make(chan struct{})
	f := &fakeRuns{hold: first}
	c := New(8, f.run)
	done := make(chan struct{})
	go func() {
		c.Do(t.Context(), "busy", 1)
		close(done)
	}()
	waitSent(f, 1)
	f.mu.Lock()
	f.hold = nil // later runs answer at once
	f.mu.Unlock()
	if out, err := c.Do(t.Context(), "idle", 7); out != 14 || err != nil {
		t.Errorf("call for another lane: %d, %v", out, err)
	}
	close(first)
	<-done
}

// TestCombinerCanceledWhileQueued checks that a queued call whose context ends leaves
// at once, with the context's error, and is never sent.
func TestCombinerCanceledWhileQueued(t *testing.T) {
	f := &fakeRuns{hold: make(chan struct{})}
	c := New(8, f.run)
	go c.Do(t.Context(), "a", 1)
	waitSent(f, 1)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := c.Do(ctx, "a", 2)
		errc <- err
	}()
	waitQueued(c, 1)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("canceled queued call: %v, want context.Canceled", err)
	}
	waitQueued(c, 0)
	close(f.hold)
	// The lane empties once the first call returns: nothing else is sent.
	for {
		c.mu.Lock()
		n := len(c.lanes)
		c.mu.Unlock()
		if n == 0 {
			break
		}
		runtime.Gosched()
	}
	if got := f.sent(); len(got) != 1 {
		t.Errorf("groups %v, want only the first call's", got)
	}
}

// TestCombinerSentCallWaitsForOutcome checks that a call already sent in a group with
// others reports the group's outcome even if its context ends meanwhile, and that a
// failed group fails each of its calls.
func TestCombinerSentCallWaitsForOutcome(t *testing.T) {
	first := make(chan struct{})
	f := &fakeRuns{hold: first}
	c := New(8, f.run)
	go c.Do(t.Context(), "a", 1)
	waitSent(f, 1)

	ctx, cancel := context.WithCancel(t.Context())
	type outcome struct {
		out int
		err error
	}
	outs := make(chan outcome, 2)
	go func() { o, err := c.Do(t.Context(), "a", 2); outs <- outcome{o, err} }()
	waitQueued(c, 1)
	go func() { o, err := c.Do(ctx, "a", 3); outs <- outcome{o, err} }()
	waitQueued(c, 2)
	f.mu.Lock()
	second := make(chan struct{})
	f.hold = second
	f.fail = errors.New("the group failed")
	f.mu.Unlock()
	close(first)
	waitSent(f, 2) // calls 2 and 3 are in flight together
	cancel()       // call 3's context ends while its group runs
	close(second)
	for range 2 {
		if o := <-outs; o.err == nil || o.err.Error() != "the group failed" {
			t.Errorf("call of a failed group: %d, %v; want the group's error", o.out, o.err)
		}
	}
}

// TestCombinerTake checks how a group is made from a lane's queue: a call sent on an
// idle lane leads the calls that queued while it let other goroutines run, and a group
// never holds more than the maximum; the calls taken are marked sent, in order, and the
// rest stay queued, in order.
func TestCombinerTake(t *testing.T) {
	for _, tc := range []struct {
		name      string
		first     bool
		queued    int
		want      []int // params of the group
		wantQueue []int // params left queued
	}{
		{name: "lone call, nothing queued", first: true, queued: 0, want: []int{0}},
		{name: "lone call leads the queue", first: true, queued: 2, want: []int{0, 1, 2}},
		{name: "lone call, queue over the maximum", first: true, queued: 5, want: []int{0, 1, 2}, wantQueue: []int{3, 4, 5}},
		{name: "next group from the queue", queued: 5, want: []int{1, 2, 3}, wantQueue: []int{4, 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(3, (&fakeRuns{}).run)
			l := &lane[int, int]{}
			for p := 1; p <= tc.queued; p++ {
				l.queue = append(l.queue, &pending[int, int]{params: p})
			}
			var first *pending[int, int]
			if tc.first {
				first = &pending[int, int]{params: 0}
			}
			got := c.take(l, first)
			params := func(ps []*pending[int, int]) []int {
				var out []int
				for _, p := range ps {
					out = append(out, p.params)
				}
				return out
			}
			if !slices.Equal(params(got), tc.want) || !slices.Equal(params(l.queue), tc.wantQueue) {
				t.Errorf("group %v, queue %v; want %v, %v", params(got), params(l.queue), tc.want, tc.wantQueue)
			}
			for _, p := range got {
				if !p.sent {
					t.Errorf("call %d taken but not marked sent", p.params)
				}
			}
			for _, p := range l.queue {
				if p.sent {
					t.Errorf("call %d still queued but marked sent", p.params)
				}
			}
		})
	}
}
