package event_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/internal/phasetest"
)

type traceKey struct{}

// logTracer appends "begin <name> <step>" and "end <name> <step> <err>" to *log, and
// adds its name to the context's path.
func logTracer(name string, log *[]string) event.Tracer {
	return event.TracerFunc(func(ctx context.Context, p event.Phase) (context.Context, func(error)) {
		path, _ := ctx.Value(traceKey{}).(string)
		*log = append(*log, "begin "+name+" "+p.Step.String()+" under "+path)
		return context.WithValue(ctx, traceKey{}, path+"/"+name), func(err error) {
			msg := "nil"
			if err != nil {
				msg = err.Error()
			}
			*log = append(*log, "end "+name+" "+p.Step.String()+" "+msg)
		}
	})
}

func TestTrace(t *testing.T) {
	var b event.Bus
	var log []string
	phase := func(step event.Step, err error) context.Context {
		ctx, end := b.Begin(context.Background(), event.Phase{Step: step})
		end(err)
		return ctx
	}

	ctx := phase(event.StepAdmit, nil)
	if ctx != context.Background() || len(log) != 0 {
		t.Fatalf("without a tracer Begin derived %v and logged %v", ctx, log)
	}

	cancelA := b.Trace(logTracer("a", &log))
	ctx = phase(event.StepRun, nil)
	if got := ctx.Value(traceKey{}); got != "/a" {
		t.Errorf("the phase's context is %v, want the tracer's", got)
	}
	cancelB := b.Trace(logTracer("b", &log))
	ctx = phase(event.StepSettle, errors.New("down"))
	if got := ctx.Value(traceKey{}); got != "/a/b" {
		t.Errorf("the phase's context is %v, want b's under a's", got)
	}
	cancelA()
	cancelA() // twice is once
	phase(event.StepCall, nil)
	cancelB()
	phase(event.StepCall, nil)

	want := []string{
		"begin a run under ", "end a run nil",
		"begin a settle under ", "begin b settle under /a", "end b settle down", "end a settle down",
		"begin b call under ", "end b call nil",
	}
	if !slices.Equal(log, want) {
		t.Errorf("log\n %s\nwant\n %s", strings.Join(log, "\n "), strings.Join(want, "\n "))
	}
}

// TestTraceCostsNothingUnset: without a tracer, beginning and ending a phase allocates
// nothing.
func TestTraceCostsNothingUnset(t *testing.T) {
	var b event.Bus
	ctx := context.Background()
	p := event.Phase{Step: event.StepRun, API: "hash"}
	if n := testing.AllocsPerRun(100, func() {
		_, end := b.Begin(ctx, p)
		end(nil)
	}); n != 0 {
		t.Errorf("a phase with no tracer allocates %v times", n)
	}
}

func TestStepNames(t *testing.T) {
	for step, want := range map[event.Step]string{event.StepCall: "call", event.StepAuthenticate: "authenticate",
		event.StepAdmit: "admit", event.StepRun: "run", event.StepSettle: "settle", event.StepStore: "store", 0: "unknown", 99: "unknown"} {
		if got := step.String(); got != want {
			t.Errorf("Step(%d) = %q, want %q", step, got, want)
		}
	}
}

// A tracer that returns a nil end or panics fails nothing: the phase goes on under the
// context the other tracers gave it, every other tracer is told of its begin and end,
// and the panic is logged with the tracer's type and the phase's step.
func TestFailingTracer(t *testing.T) {
	for _, how := range phasetest.Failures {
		for _, alone := range []bool{true, false} {
			name := how
			if !alone {
				name += " between two tracers"
			}
			t.Run(name, func(t *testing.T) {
				var buf bytes.Buffer
				b := event.Bus{Logger: slog.New(slog.NewTextHandler(&buf, nil))}
				var log []string
				if !alone {
					b.Trace(logTracer("a", &log))
				}
				b.Trace(&phasetest.Failing{How: how})
				if !alone {
					b.Trace(logTracer("b", &log))
				}
				ctx, end := b.Begin(context.Background(), event.Phase{Step: event.StepRun, API: "hash"})
				if ctx == nil {
					t.Fatal("Begin returned a nil context")
				}
				end(nil)

				var want []string
				if !alone {
					if got := ctx.Value(traceKey{}); got != "/a/b" {
						t.Errorf("the phase's context is %v, want b's under a's", got)
					}
					want = []string{"begin a run under ", "begin b run under /a", "end b run nil", "end a run nil"}
				} else if ctx != context.Background() {
					t.Errorf("the phase's context is %v, want the one it was begun under", ctx)
				}
				if !slices.Equal(log, want) {
					t.Errorf("log\n %s\nwant\n %s", strings.Join(log, "\n "), strings.Join(want, "\n "))
				}
				out := buf.String()
				if how == phasetest.NilEnd {
					if out != "" {
						t.Errorf("a nil end was logged: %s", out)
					}
					return
				}
				in := strings.TrimPrefix(how, "panic in ")
				for _, s := range []string{"tracer panicked", "the tracer fails", "step=run", "in=" + in, "phasetest.Failing", "panics=1"} {
					if !strings.Contains(out, s) {
						t.Errorf("the panic's log lacks %q: %s", s, out)
					}
				}
			})
		}
	}
}

// A tracer that panics in every phase is logged at its 1st, 2nd, 4th, 8th... panic,
// with their number, from any number of goroutines.
func TestFailingTracerLogged(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	b := event.Bus{Logger: slog.New(slog.NewTextHandler(&lockedWriter{&mu, &buf}, nil))}
	b.Trace(&phasetest.Failing{How: phasetest.PanicInEnd})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 25 {
				_, end := b.Begin(context.Background(), event.Phase{Step: event.StepAdmit})
				end(nil)
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	var counts []int
	for line := range strings.Lines(buf.String()) {
		_, n, _ := strings.Cut(line, " panics=")
		n, _, _ = strings.Cut(n, " ")
		i, err := strconv.Atoi(n)
		if err != nil {
			t.Fatalf("a panic was logged without its number: %s", line)
		}
		counts = append(counts, i)
	}
	slices.Sort(counts) // the goroutines may log out of their order
	if want := []int{1, 2, 4, 8, 16, 32, 64}; !slices.Equal(counts, want) {
		t.Errorf("100 panics were logged at the counts %v, want %v", counts, want)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Guard makes a tracer that fails nothing, as the bus does; a bus is its own guard.
func TestGuard(t *testing.T) {
	var b event.Bus
	if event.Guard(&b) != &b {
		t.Error("Guard wrapped a bus")
	}
	for _, how := range phasetest.Failures {
		f := &phasetest.Failing{How: how}
		ctx, end := event.Guard(f).Begin(context.Background(), event.Phase{Step: event.StepStore})
		end(nil)
		if ctx != context.Background() || f.Begun() != 1 {
			t.Errorf("%s: the guarded tracer was told of %d phases and gave %v", how, f.Begun(), ctx)
		}
	}
	_, end := event.Guard(nil).Begin(context.Background(), event.Phase{Step: event.StepStore})
	end(nil)
}

// callTracer is a CallTracer that wants the phases within a call as within says, and
// counts the ends of its calls.
type callTracer struct {
	within bool
	panics bool
	nilCtx bool
	ends   *int
}

func (c callTracer) Begin(ctx context.Context, p event.Phase) (context.Context, func(error)) {
	return ctx, nil
}

func (c callTracer) BeginCall(ctx context.Context, p event.Phase) (context.Context, func(error), bool) {
	if c.panics {
		panic("boom")
	}
	if c.nilCtx {
		return nil, nil, c.within
	}
	return context.WithValue(ctx, traceKey{}, "call"), func(error) { *c.ends++ }, c.within
}

// TestBeginCall: BeginCall begins a call as Begin does, and reports whether any tracer
// wants the phases within it; a tracer that is not a CallTracer wants them, one that
// panics wants none.
func TestBeginCall(t *testing.T) {
	var logs bytes.Buffer
	b := event.Bus{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	begin := func() (context.Context, bool) {
		ctx, end, within := b.BeginCall(context.Background(), event.Phase{Step: event.StepCall})
		end(nil)
		return ctx, within
	}
	if ctx, within := begin(); within || ctx != context.Background() {
		t.Errorf("without a tracer BeginCall wants the phases within (%v) or derived the context", within)
	}

	var ends int
	cancel := b.Trace(callTracer{within: false, ends: &ends})
	ctx, within := begin()
	if within || ctx.Value(traceKey{}) != "call" || ends != 1 {
		t.Errorf("a tracer that wants none: within %v, context %v, %d ends", within, ctx.Value(traceKey{}), ends)
	}
	cancel()

	cancel = b.Trace(callTracer{within: true, ends: &ends})
	if _, within := begin(); !within || ends != 2 {
		t.Errorf("a tracer that wants them: within %v, %d ends", within, ends)
	}
	cancel()

	cancel = b.Trace(callTracer{within: true, nilCtx: true})
	if ctx, within := begin(); !within || ctx != context.Background() {
		t.Errorf("a tracer's nil context and end: within %v, context %v", within, ctx)
	}
	cancel()

	var log []string
	cancel = b.Trace(callTracer{panics: true})
	if ctx, within := begin(); within || ctx != context.Background() {
		t.Errorf("a tracer that panicked: within %v, context %v", within, ctx)
	}
	if !strings.Contains(logs.String(), "BeginCall") {
		t.Errorf("the panic was not logged: %s", logs.String())
	}
	// Several tracers: any that wants them, a plain Tracer included, has them begun.
	cancelLog := b.Trace(logTracer("a", &log))
	if _, within := begin(); !within || len(log) != 2 {
		t.Errorf("with a plain tracer: within %v, log %v", within, log)
	}
	cancelLog()
	cancelFalse := b.Trace(callTracer{within: false, ends: &ends})
	if _, within := begin(); within || ends != 3 {
		t.Errorf("two tracers that want none: within %v, %d ends", within, ends)
	}
	cancelFalse()
	cancel()
}

// TestBeginCallCostsNothingUnset: without a tracer, BeginCall allocates nothing.
func TestBeginCallCostsNothingUnset(t *testing.T) {
	var b event.Bus
	allocs := testing.AllocsPerRun(100, func() {
		_, end, _ := b.BeginCall(context.Background(), event.Phase{Step: event.StepCall})
		end(nil)
	})
	if allocs != 0 {
		t.Errorf("BeginCall allocates %v times without a tracer", allocs)
	}
}
