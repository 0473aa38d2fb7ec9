package event_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/event"
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
