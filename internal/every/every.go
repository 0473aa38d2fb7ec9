// Package every runs a function in the background at a fixed interval, for the
// periodic work of Tollgate (the sweep of expired reservations, the prune of the audit
// log, the flush of usage).
package every

import (
	"context"
	"log/slog"
	"time"
)

// Start calls f every interval, on a goroutine of its own, until the returned function
// is called. stop cancels the context f was given and waits for a call in progress to
// end.
func Start(interval time.Duration, f func(ctx context.Context)) (stop func()) {
	return start(interval, false, f)
}

// StartNow is [Start], with a first call of f at once rather than one interval later:
// for work that a process which restarts often must still get done.
func StartNow(interval time.Duration, f func(ctx context.Context)) (stop func()) {
	return start(interval, true, f)
}

func start(interval time.Duration, now bool, f func(ctx context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if now {
			f(ctx)
		}
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			f(ctx)
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// A Chore is periodic housekeeping that reports how much it did: a sweep, a prune.
type Chore struct {
	// Do does the chore once and returns how many things it did.
	Do func(ctx context.Context) (int64, error)
	// Failed and Done are the messages logged when Do fails (at WARN, with the error,
	// unless the chore was stopped) and when it did something (at INFO, with the
	// count and Attrs).
	Failed, Done string
	Attrs        []any
}

// Run runs c once, logging to log what became of it; it is the function to give
// [Start] or [StartNow].
func (c Chore) Run(log *slog.Logger) func(ctx context.Context) {
	return func(ctx context.Context) {
		n, err := c.Do(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn(c.Failed, "error", err)
		case n > 0:
			log.Info(c.Done, append([]any{"count", n}, c.Attrs...)...)
		}
	}
}

// TenthOf is the default interval of a prune that keeps things for retention: a tenth
// of it, at least a second and at most longest, so that a thing outlives the retention
// by little.
func TenthOf(retention, longest time.Duration) time.Duration {
	return min(max(retention/10, time.Second), longest)
}
