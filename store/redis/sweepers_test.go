package redis_test

import (
	"fmt"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store/storetest"
)

// sweepInstances returns n Stores under one fresh prefix, each on a client of its own
// from newClient, as n instances would be, and the count of their round trips.
func sweepInstances(t testing.TB, n int, newClient func() goredis.UniversalClient) storetest.SweepInstances {
	t.Helper()
	var trips tripCounter
	s := storetest.SweepInstances{RoundTrips: trips.trips.Load}
	var prefix string
	for i := range n {
		c := newClient()
		c.AddHook(&trips)
		if i == 0 {
			prefix = newPrefix(t, c)
		}
		s.Ledgers = append(s.Ledgers, openStore(t, c, prefix, nil))
	}
	return s
}

// singleClient returns a function that makes clients of the test Redis, each closed
// when the test ends.
func singleClient(t testing.TB) func() goredis.UniversalClient {
	return func() goredis.UniversalClient {
		c := newClient(addr(t), nil)
		t.Cleanup(func() { c.Close() })
		return c
	}
}

// TestSweepers runs the sweeps of three Stores, each on a client of its own, under one
// prefix, counting their round trips.
func TestSweepers(t *testing.T) {
	storetest.TestSweepers(t, func(t *testing.T, n int) storetest.SweepInstances {
		return sweepInstances(t, n, singleClient(t))
	})
}

// TestClusterSweepers runs them on a Redis Cluster of 3 masters, where the shards of
// the index of expiring accounts spread over the masters.
func TestClusterSweepers(t *testing.T) {
	testenv.SkipUnlessFull(t, "the sweeps of three instances on a Redis Cluster")
	cl, _ := startCluster(t)
	storetest.TestSweepers(t, func(t *testing.T, n int) storetest.SweepInstances {
		return sweepInstances(t, n, func() goredis.UniversalClient { return newClusterClient(t, cl, nil) })
	})
}

// BenchmarkSweepIdle measures a sweep that finds nothing due with 10,000 accounts
// active (see storetest.BenchmarkSweepIdle):
//
//	go test -run='^$' -bench=SweepIdle -benchtime=20x ./store/redis/
func BenchmarkSweepIdle(b *testing.B) {
	storetest.BenchmarkSweepIdle(b, sweepInstances(b, 1, singleClient(b)), 10000)
}

// BenchmarkSweepers measures one and three Stores sweeping 10,000 expired reservations
// of as many accounts (see storetest.BenchmarkSweepers):
//
//	go test -run='^$' -bench=Sweepers -benchtime=1x ./store/redis/
func BenchmarkSweepers(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("instances=%d", n), func(b *testing.B) {
			storetest.BenchmarkSweepers(b, sweepInstances(b, n, singleClient(b)), 10000)
		})
	}
}
