package every_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tollgate-dev/tollgate/internal/every"
)

func TestStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		var canceled atomic.Bool
		stop := every.Start(time.Second, func(ctx context.Context) {
			calls.Add(1)
			<-ctx.Done() // the last call waits for stop
			canceled.Store(true)
		})
		time.Sleep(time.Second + time.Millisecond)
		synctest.Wait()
		if calls.Load() != 1 {
			t.Fatalf("after one interval: %d calls, want 1", calls.Load())
		}
		stop()
		if !canceled.Load() {
			t.Error("stop returned before the call in progress ended")
		}
	})
}
