package every_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
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

func TestChore(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	for _, tc := range []struct {
		name string
		n    int64
		err  error
		want string
	}{
		{"nothing to do", 0, nil, ""},
		{"did some", 3, nil, "level=INFO msg=done count=3 k=v"},
		{"failed", 1, errors.New("down"), "level=WARN msg=failed error=down"},
	} {
		logs.Reset()
		every.Chore{Do: func(context.Context) (int64, error) { return tc.n, tc.err },
			Failed: "failed", Done: "done", Attrs: []any{"k", "v"}}.Run(log)(context.Background())
		if got := strings.TrimSpace(logs.String()); !strings.HasSuffix(got, tc.want) || (tc.want == "") != (got == "") {
			t.Errorf("%s: logged %q, want %q", tc.name, got, tc.want)
		}
	}
	// A chore stopped while it runs does not log its failure.
	logs.Reset()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	every.Chore{Do: func(ctx context.Context) (int64, error) { return 0, ctx.Err() }, Failed: "failed"}.Run(log)(ctx)
	if logs.Len() != 0 {
		t.Errorf("a stopped chore logged %q", logs.String())
	}
}

func TestTenthOf(t *testing.T) {
	for _, tc := range []struct{ retention, want time.Duration }{
		{time.Second, time.Second}, {time.Minute, 6 * time.Second}, {100 * time.Hour, time.Hour},
	} {
		if got := every.TenthOf(tc.retention, time.Hour); got != tc.want {
			t.Errorf("TenthOf(%v) = %v, want %v", tc.retention, got, tc.want)
		}
	}
}
