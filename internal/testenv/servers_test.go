package testenv_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/testenv"
)

func TestServers(t *testing.T) {
	for _, s := range []*testenv.Server{testenv.StartRedis(t), testenv.StartPostgres(t)} {
		if c, err := net.Dial("tcp", s.Addr); err != nil {
			t.Fatal(err)
		} else {
			c.Close()
		}
		s.Stop()
		if c, err := net.Dial("tcp", s.Addr); err == nil {
			c.Close()
			t.Fatalf("%s still answers after Stop", s.Addr)
		}
		s.Start()
		if c, err := net.Dial("tcp", s.Addr); err != nil {
			t.Fatalf("%s does not answer after Start: %v", s.Addr, err)
		} else {
			c.Close()
		}
	}
}

// TestRedisCluster starts a cluster of 3 masters and 3 replicas, kills a master, and
// waits for its replica to take over its slots.
func TestRedisCluster(t *testing.T) {
	testenv.SkipUnlessFull(t, "a Redis Cluster started, a master killed with kill -9, the failover awaited")
	c := testenv.StartRedisCluster(t, testenv.RedisClusterConfig{})
	if len(c.Nodes) != 6 {
		t.Fatalf("%d nodes, want 6", len(c.Nodes))
	}
	ctx := t.Context()
	m, err := c.MasterOf(ctx, 0)
	if err != nil || m != c.Nodes[0] {
		t.Fatalf("the master of slot 0 is %v (%v), want %s", m, err, c.Nodes[0].Addr)
	}
	replicas, err := c.ReplicasOf(ctx, m)
	if err != nil || len(replicas) != 1 {
		t.Fatalf("the replicas of %s: %v (%v), want one", m.Addr, replicas, err)
	}
	m.Kill()
	if m.Alive() {
		t.Fatalf("%s is alive after Kill", m.Addr)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := c.WaitHealthy(wctx); err != nil {
		t.Fatal(err)
	}
	if now, err := c.MasterOf(ctx, 0); err != nil || now != replicas[0] {
		t.Fatalf("after the failover the master of slot 0 is %v (%v), want %s", now, err, replicas[0].Addr)
	}
	if role, err := replicas[0].Role(ctx); err != nil || role != "master" {
		t.Fatalf("the replica's role is %q (%v), want master", role, err)
	}
}
