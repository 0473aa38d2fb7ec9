package tollgate

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// callContext is the context of one call: the caller's context with the call's
// deadline. context.WithTimeout would arm a timer and register with the parent on every
// call, which costs more than many APIs' whole work; most handlers (a hash, a date
// computation) never wait on their context. So the timer is armed only when a handler
// first asks for Done, and Err judges the deadline by the clock until then.
type callContext struct {
	context.Context // the caller's context
	deadline        time.Time

	once   sync.Once
	inner  atomic.Pointer[context.Context] // the armed timeout context, once Done was called
	cancel context.CancelFunc
}

// newCallContext returns the context of a call that may last timeout. Timeouts run on
// the real clock (time.Now), not on the service's injectable business clock.
func newCallContext(parent context.Context, timeout time.Duration) *callContext {
	c := new(callContext)
	c.init(parent, timeout)
	return c
}

// init makes c, which was never used, the context of a call that may last timeout.
func (c *callContext) init(parent context.Context, timeout time.Duration) {
	c.Context, c.deadline = parent, time.Now().Add(timeout)
	if d, ok := parent.Deadline(); ok && d.Before(c.deadline) {
		c.deadline = d
	}
}

// Deadline returns the call's deadline.
func (c *callContext) Deadline() (time.Time, bool) { return c.deadline, true }

// Done arms the timeout on first use and returns its channel, which is closed when the
// deadline passes or the caller's context is done.
func (c *callContext) Done() <-chan struct{} {
	c.once.Do(func() {
		ctx, cancel := context.WithDeadline(c.Context, c.deadline)
		c.cancel = cancel
		c.inner.Store(&ctx)
	})
	return (*c.inner.Load()).Done()
}

// Err reports why the call's context is done: the caller's context's error, or
// context.DeadlineExceeded once the deadline has passed.
func (c *callContext) Err() error {
	if inner := c.inner.Load(); inner != nil {
		return (*inner).Err()
	}
	if err := c.Context.Err(); err != nil {
		return err
	}
	if !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// release frees the timer, if one was armed. The context is done afterwards only if it
// was armed; calls are over by then.
func (c *callContext) release() {
	if c.inner.Load() != nil {
		c.cancel()
	}
}
