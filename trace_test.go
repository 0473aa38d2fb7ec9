package tollgate_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/event"
)

// phases is a tracer that records the phases it is told of, each with its parent (the
// phase whose context it began under) and the code it ended with.
type phases struct {
	mu    sync.Mutex
	nodes []*phaseNode
}

type phaseNode struct {
	parent int // -1: none
	phase  event.Phase
	ends   int
	code   string // "" for nil
}

type phaseKey struct{}

func (r *phases) Begin(ctx context.Context, p event.Phase) (context.Context, func(error)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := &phaseNode{parent: -1, phase: p}
	if i, ok := ctx.Value(phaseKey{}).(int); ok {
		n.parent = i
	}
	r.nodes = append(r.nodes, n)
	id := len(r.nodes) - 1
	return context.WithValue(ctx, phaseKey{}, id), func(err error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		n.ends++
		if err != nil {
			n.code = tollgate.CodeOf(err).String()
		}
	}
}

// take returns the recorded phases as a tree, "call(rest) [authenticate admit run ok
// settle]", the children in the order they began (runs sorted by API, since they
// begin in parallel), and forgets them. Each phase must have ended once.
func (r *phases) take(t *testing.T) string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var render func(i int) string
	render = func(i int) string {
		n := r.nodes[i]
		if n.ends != 1 {
			t.Errorf("phase %s ended %d times", n.phase.Step, n.ends)
		}
		s := n.phase.Step.String()
		switch n.phase.Step {
		case event.StepCall:
			s += "(" + n.phase.Channel + ")"
		case event.StepRun:
			s += " " + n.phase.API
		}
		if n.code != "" {
			s += ": " + n.code
		}
		var children []string
		for j, c := range r.nodes {
			if c.parent == i {
				children = append(children, render(j))
			}
		}
		slices.SortStableFunc(children, func(a, b string) int {
			if strings.HasPrefix(a, "run ") && strings.HasPrefix(b, "run ") {
				return strings.Compare(a, b)
			}
			return 0
		})
		if len(children) > 0 {
			s += " [" + strings.Join(children, ", ") + "]"
		}
		return s
	}
	var roots []string
	for i, n := range r.nodes {
		if n.parent < 0 {
			roots = append(roots, render(i))
		}
	}
	r.nodes = nil
	return strings.Join(roots, "; ")
}

// TestPhases: a tracer on the service's bus is told of each call, its authentication,
// admission, each API's run and its settlement, nested as the work is, each ended
// once with its outcome; the handler runs under its run's context.
func TestPhases(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, harnessOptions{})
	rec := &phases{}
	cancel := h.svc.Events().Trace(rec)
	defer cancel()

	unknown := h.caller()
	unknown.Credential.Value = "00000000-0000-4000-8000-000000000000"
	for _, tc := range []struct {
		name string
		call func() error
		want string
	}{
		{"one API", func() error { return h.svc.Call(ctx, h.caller(), "ctx", nil).Err },
			"call(rest) [authenticate, admit, run ctx, settle]"},
		{"several APIs", func() error { return h.call(ctx, []string{"ok", "fail", "reject"}).Err },
			"call(rest) [authenticate, admit, run fail: api_failed, run ok, run reject: rejected, settle]"},
		{"a batch", func() error { return h.batch(ctx, "ok", "", append(ns(1, 2), "not an object")...).Err },
			"call(batch) [authenticate, admit, run ok, run ok, settle]"},
		{"an unknown key", func() error { return h.svc.Call(ctx, unknown, "ok", nil).Err },
			"call(rest): unauthorized [authenticate: unauthorized]"},
		{"an unknown API", func() error { return h.svc.Call(ctx, h.caller(), "nope", nil).Err },
			"call(rest): not_found [authenticate]"},
		{"a front door's own caller", func() error {
			p, err := h.svc.Authenticate(ctx, tollgate.Caller{Credential: h.caller().Credential})
			if err != nil {
				return err
			}
			p.Channel = auth.ChannelMCP
			return h.svc.Call(ctx, tollgate.Caller{As: &p}, "ok", func(*catalog.API) (tollgate.Input, error) { return tollgate.Input{}, nil }).Err
		}, "authenticate; call(mcp) [admit, run ok, settle]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.call()
			if got := rec.take(t); got != tc.want {
				t.Errorf("phases\n %s\nwant\n %s", got, tc.want)
			}
		})
	}

	// The handler's context is its run's: a span it starts is the run's child.
	h.svc.Call(ctx, h.caller(), "ctx", nil)
	hctx := *h.handlerCtx.Load()
	rec.mu.Lock()
	i, _ := hctx.Value(phaseKey{}).(int)
	got := rec.nodes[i].phase
	rec.mu.Unlock()
	if got.Step != event.StepRun || got.API != "ctx" {
		t.Errorf("the handler runs under the phase %s %s, want run ctx", got.Step, got.API)
	}
	rec.take(t)

	// The plan's refusal ends the admission with its code, and nothing runs.
	if _, err := h.mgr.AdjustCredits(ctx, "acct", -h.remaining(t), "test", nil); err != nil {
		t.Fatal(err)
	}
	h.svc.Call(ctx, h.caller(), "ok", nil)
	if got, want := rec.take(t), "call(rest): credits_exhausted [authenticate, admit: credits_exhausted]"; got != want {
		t.Errorf("phases\n %s\nwant\n %s", got, want)
	}

	// Once canceled, the tracer is told of nothing.
	cancel()
	h.svc.Call(ctx, h.caller(), "ok", nil)
	if got := rec.take(t); got != "" {
		t.Errorf("a canceled tracer was told of %s", got)
	}
}

// callsOnly is a tracer that wants none of a call's inner phases (event.CallTracer).
type callsOnly struct{ *phases }

func (c callsOnly) BeginCall(ctx context.Context, p event.Phase) (context.Context, func(error), bool) {
	ctx, end := c.Begin(ctx, p)
	return ctx, end, false
}

// TestPhasesNotWanted: when no tracer wants a call's inner phases, the service begins
// none of them, and the handler runs under the call's context; when another tracer
// wants them, every tracer is told of them.
func TestPhasesNotWanted(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, harnessOptions{})
	rec := &phases{}
	cancel := h.svc.Events().Trace(callsOnly{rec})
	defer cancel()

	calls := []struct {
		name string
		call func() error
		all  string // the phases when another tracer wants them
	}{
		{"one API", func() error { return h.svc.Call(ctx, h.caller(), "ctx", nil).Err },
			"call(rest) [authenticate, admit, run ctx, settle]"},
		{"several APIs", func() error { return h.call(ctx, []string{"ok", "fail"}).Err },
			"call(rest) [authenticate, admit, run fail: api_failed, run ok, settle]"},
		{"a batch", func() error { return h.batch(ctx, "ok", "", ns(1, 2)...).Err },
			"call(batch) [authenticate, admit, run ok, run ok, settle]"},
	}
	for _, tc := range calls {
		t.Run(tc.name, func(t *testing.T) {
			tc.call()
			got := rec.take(t)
			if want, _, _ := strings.Cut(tc.all, " ["); got != want {
				t.Errorf("phases\n %s\nwant\n %s", got, want)
			}
		})
	}

	// The handler's context is the call's.
	h.svc.Call(ctx, h.caller(), "ctx", nil)
	hctx := *h.handlerCtx.Load()
	rec.mu.Lock()
	i, ok := hctx.Value(phaseKey{}).(int)
	if !ok || rec.nodes[i].phase.Step != event.StepCall {
		t.Errorf("the handler does not run under the call's context")
	}
	rec.mu.Unlock()
	rec.take(t)

	// Another tracer wants them: both are told of them.
	var (
		mu    sync.Mutex
		other int
	)
	defer h.svc.Events().Trace(event.TracerFunc(func(ctx context.Context, p event.Phase) (context.Context, func(error)) {
		mu.Lock()
		defer mu.Unlock()
		other++
		return ctx, nil
	}))()
	for _, tc := range calls {
		t.Run(tc.name+" wanted", func(t *testing.T) {
			mu.Lock()
			other = 0
			mu.Unlock()
			tc.call()
			got := rec.take(t)
			if got != tc.all {
				t.Errorf("phases\n %s\nwant\n %s", got, tc.all)
			}
			mu.Lock()
			defer mu.Unlock()
			if want := strings.Count(got, ",") + 2; other != want {
				t.Errorf("the other tracer was told of %d phases, want %d", other, want)
			}
		})
	}
}
