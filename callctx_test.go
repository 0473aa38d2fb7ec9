package tollgate

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

func TestCallContext(t *testing.T) {
	var start time.Time
	tests := []struct {
		name string
		run  func(t *testing.T, parent context.Context, cancelParent context.CancelFunc, c *callContext)
	}{
		{"ErrWithoutDone", func(t *testing.T, _ context.Context, _ context.CancelFunc, c *callContext) {
			if c.Err() != nil {
				t.Fatalf("Err before the deadline: %v", c.Err())
			}
			time.Sleep(time.Second)
			if !errors.Is(c.Err(), context.DeadlineExceeded) {
				t.Fatalf("Err at the deadline: %v", c.Err())
			}
			if c.inner.Load() != nil {
				t.Fatal("Err armed a timer")
			}
		}},
		{"DoneClosesAtTheDeadline", func(t *testing.T, _ context.Context, _ context.CancelFunc, c *callContext) {
			at := time.Now()
			<-c.Done()
			if took := time.Since(at); took != time.Second {
				t.Errorf("Done after %v, want 1s", took)
			}
			if !errors.Is(c.Err(), context.DeadlineExceeded) {
				t.Errorf("Err: %v", c.Err())
			}
		}},
		{"ParentCancel", func(t *testing.T, _ context.Context, cancel context.CancelFunc, c *callContext) {
			time.AfterFunc(100*time.Millisecond, cancel)
			<-c.Done()
			if !errors.Is(c.Err(), context.Canceled) {
				t.Errorf("Err: %v", c.Err())
			}
		}},
		{"ParentCanceledBeforeDone", func(t *testing.T, _ context.Context, cancel context.CancelFunc, c *callContext) {
			cancel()
			if !errors.Is(c.Err(), context.Canceled) {
				t.Errorf("Err: %v", c.Err())
			}
		}},
		{"DeadlineAndValues", func(t *testing.T, parent context.Context, _ context.CancelFunc, c *callContext) {
			if d, ok := c.Deadline(); !ok || !d.Equal(start.Add(time.Second)) {
				t.Errorf("Deadline = %v, %v", d, ok)
			}
			if c.Value(ctxKey{}) != "v" {
				t.Error("values of the caller's context are lost")
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				parent, cancel := context.WithCancel(context.WithValue(t.Context(), ctxKey{}, "v"))
				defer cancel()
				start = time.Now()
				c := newCallContext(parent, time.Second)
				defer c.release()
				tt.run(t, parent, cancel, c)
			})
		})
	}
}

type ctxKey struct{}

func TestCallContextKeepsAnEarlierParentDeadline(t *testing.T) {
	parent, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c := newCallContext(parent, time.Hour)
	want, _ := parent.Deadline()
	if d, _ := c.Deadline(); !d.Equal(want) {
		t.Errorf("Deadline = %v, want the parent's %v", d, want)
	}
}
