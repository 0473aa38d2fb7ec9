// Package every runs a function in the background at a fixed interval, for the
// periodic work of Tollgate (the sweep of expired reservations, the prune of the audit
// log, the flush of usage).
package every

import (
	"context"
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
