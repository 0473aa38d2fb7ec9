package storetest

import (
	"context"
	"sync"
	"testing"

	"github.com/tollgate-dev/tollgate/health"
)

// TestPinger checks that a store's Ping ([health.Pinger], which a readiness check
// calls) behaves as its documentation says on a store that can serve: it answers nil,
// to many goroutines at once, and a ping on an ended context leaves the store
// reachable. That a store which cannot be reached fails its Ping is each
// implementation's own test (it stops its server).
//
// newStore is called once per subtest and must return an empty store; it registers any
// teardown with t.Cleanup. The subtests run in parallel. Run the suite with -race.
func TestPinger(t *testing.T, newStore func(t *testing.T) health.Pinger) {
	t.Helper()
	run(t, newStore, pingRows)
}

var pingRows = []behaviour[health.Pinger]{
	{"Reachable",
		"A store that can serve answers Ping with nil.",
		pingReachable},
	{"Concurrent",
		"Pings from many goroutines at once all answer nil.",
		pingConcurrent},
	{"AfterEndedContext",
		"A ping on an ended context, whatever it answers, leaves the store reachable: the next ping answers nil.",
		pingAfterEndedContext},
}

func pingReachable(t *testing.T, s health.Pinger) {
	must(t, "Ping", s.Ping(t.Context()))
}

func pingConcurrent(t *testing.T, s health.Pinger) {
	var wg sync.WaitGroup
	errs := make([]error, 64)
	for i := range errs {
		wg.Go(func() { errs[i] = s.Ping(t.Context()) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Ping %d of %d at once: %v", i, len(errs), err)
		}
	}
}

func pingAfterEndedContext(t *testing.T, s health.Pinger) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_ = s.Ping(ctx) // nil (nothing to reach) or the context's error
	must(t, "Ping after a ping on an ended context", s.Ping(t.Context()))
}
