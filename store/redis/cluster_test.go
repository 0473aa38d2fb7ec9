package redis_test

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store/storetest"
)

// startCluster starts a private redis-server in cluster mode that owns every slot, a
// cluster of one node, and returns a cluster client on it. Redis Cluster refuses a
// command or a script whose keys hash to different slots (CROSSSLOT) whatever the
// number of nodes, so one node is enough to prove that every script keeps to one slot.
// The server runs without persistence in a temporary directory and is killed (by its
// process, which the test started) when the test ends.
func startCluster(t *testing.T) *goredis.ClusterClient {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		testenv.Unavailable(t, "redis-server is not installed: %v", err)
	}
	a := freeAddr(t)
	_, port, _ := strings.Cut(a, ":")
	dir := t.TempDir()
	cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--cluster-enabled", "yes",
		"--cluster-config-file", dir+"/nodes.conf", "--save", "", "--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting redis-server: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })

	node := goredis.NewClient(&goredis.Options{Addr: a, DialTimeout: time.Second})
	defer node.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	must(t, testenv.Wait(ctx, func() error { return node.Ping(ctx).Err() }))
	must(t, node.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", "0", strconv.Itoa(16383)).Err())
	must(t, testenv.Wait(ctx, func() error {
		info, err := node.ClusterInfo(ctx).Result()
		if err == nil && !strings.Contains(info, "cluster_state:ok") {
			err = errNotReady
		}
		return err
	}))

	c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: []string{a}, DialTimeout: time.Second,
		ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	// A multi-slot command is refused: the cluster enforces what the test relies on.
	if err := c.Do(ctx, "MSET", "a", "1", "b", "2").Err(); err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Fatalf("MSET on two slots: %v, want CROSSSLOT", err)
	}
	return c
}

type notReady struct{}

func (notReady) Error() string { return "cluster_state is not ok yet" }

var errNotReady error = notReady{}

// TestCluster runs the conformance suites on Redis Cluster, where any script touching
// two slots would fail with CROSSSLOT: every suite the Store's interfaces call for.
func TestCluster(t *testing.T) {
	addr(t) // the cluster tests run where the others do
	c := startCluster(t)
	storetest.Run(t, func(t *testing.T) any { return newStoreOn(t, c, nil) })
}
