package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// A RedisCluster is a private Redis Cluster that a test starts for itself: masters
// that share the 16384 slots evenly and replicas of them, each a redis-server on a
// loopback port the test picked, in a temporary directory, without persistence. A
// test may kill a node (kill -9) to make the cluster fail over; the test's cleanup
// kills every node still running, and a node dies with the test's process if that
// dies first.
type RedisCluster struct {
	// Nodes are the cluster's nodes as started: the masters first, then the
	// replicas, the replica Nodes[Masters+i] replicating the master Nodes[i%Masters].
	// Roles change when the cluster fails over; [RedisCluster.MasterOf] tells the
	// current master of a slot.
	Nodes []*RedisNode
	// Masters is the number of masters started.
	Masters int
}

// A RedisNode is one redis-server of a [RedisCluster].
type RedisNode struct {
	// Addr is host:port of the node.
	Addr string
	// ID is the node's id in the cluster (CLUSTER MYID).
	ID string
	// Client is a client of this node alone, for the test's administrative commands
	// (CLUSTER SETSLOT, MIGRATE, INFO). The test's cleanup closes it.
	Client *goredis.Client

	dir  string
	argv []string // the command that starts it
	cmd  *exec.Cmd
	done chan struct{}
}

// RedisClusterConfig configures [StartRedisCluster]; a zero field means the default.
type RedisClusterConfig struct {
	// Masters is the number of masters, 3 by default (a failover needs a majority
	// of the masters to agree, so at least 3).
	Masters int
	// Replicas is the number of replicas of each master, 1 by default.
	Replicas int
	// NodeTimeout is cluster-node-timeout: how long a node must be unreachable
	// before the others may fail it over. 2 seconds by default, short for tests
	// (Redis's default is 15 seconds).
	NodeTimeout time.Duration
}

// StartRedisCluster starts a Redis Cluster as cfg says (3 masters and 3 replicas by
// default), joins its nodes, gives the masters their slots, attaches the replicas,
// and waits until every node reports cluster_state:ok and every replica is in sync
// with its master. It calls [Unavailable] when redis-server is not installed (Debian
// package redis-server). Every node runs with cluster-require-full-coverage no, so
// that a failed master stops only its own slots, as a production cluster should be
// configured.
func StartRedisCluster(t testing.TB, cfg RedisClusterConfig) *RedisCluster {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		Unavailable(t, "redis-server is not installed (Debian package redis-server): %v", err)
	}
	if cfg.Masters == 0 {
		cfg.Masters = 3
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	if cfg.NodeTimeout == 0 {
		cfg.NodeTimeout = 2 * time.Second
	}
	c := &RedisCluster{Masters: cfg.Masters}
	root := t.TempDir()
	for i := range cfg.Masters * (1 + cfg.Replicas) {
		port := FreePort(t)
		n := &RedisNode{Addr: "127.0.0.1:" + strconv.Itoa(port), dir: filepath.Join(root, strconv.Itoa(i))}
		if err := os.Mkdir(n.dir, 0o700); err != nil {
			t.Fatal(err)
		}
		n.argv = []string{bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.FormatInt(cfg.NodeTimeout.Milliseconds(), 10),
			"--cluster-require-full-coverage", "no",
			// A replica takes over however long it was cut off, and stays with its
			// master: the topology is the test's.
			"--cluster-replica-validity-factor", "0", "--cluster-allow-replica-migration", "no",
			"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0",
			"--save", "", "--appendonly", "no", "--dir", n.dir, "--logfile", "log",
			"--daemonize", "no"}
		if err := n.start(); err != nil {
			t.Fatalf("starting redis-server: %v", err)
		}
		t.Cleanup(func() { n.Kill() })
		n.Client = goredis.NewClient(&goredis.Options{Addr: n.Addr, DialTimeout: time.Second,
			ReadTimeout: 10 * time.Second, MaxRetries: -1, Protocol: 2})
		t.Cleanup(func() { n.Client.Close() })
		c.Nodes = append(c.Nodes, n)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fatal := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("starting the Redis Cluster: "+format+"\n%s", append(args, c.logs())...)
	}
	for _, n := range c.Nodes {
		if err := Wait(ctx, func() error { return n.running(n.Client.Ping(ctx).Err()) }); err != nil {
			fatal("%s does not answer: %v", n.Addr, err)
		}
		id, err := n.Client.Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			fatal("CLUSTER MYID on %s: %v", n.Addr, err)
		}
		n.ID = id
	}
	first := c.Nodes[0]
	for _, n := range c.Nodes[1:] {
		host, port, _ := strings.Cut(n.Addr, ":")
		if err := first.Client.Do(ctx, "CLUSTER", "MEET", host, port).Err(); err != nil {
			fatal("CLUSTER MEET %s: %v", n.Addr, err)
		}
	}
	for i, n := range c.Nodes[:cfg.Masters] {
		lo, hi := i*16384/cfg.Masters, (i+1)*16384/cfg.Masters-1
		if err := n.Client.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			fatal("CLUSTER ADDSLOTSRANGE %d %d on %s: %v", lo, hi, n.Addr, err)
		}
	}
	// A node replicates a master it knows of: wait until every node knows every other.
	if err := Wait(ctx, func() error {
		for _, n := range c.Nodes {
			nodes, err := n.Client.ClusterNodes(ctx).Result()
			if err != nil {
				return err
			}
			if got := strings.Count(nodes, "connected"); got != len(c.Nodes) || strings.Contains(nodes, "handshake") {
				return fmt.Errorf("%s knows %d connected nodes of %d", n.Addr, got, len(c.Nodes))
			}
		}
		return nil
	}); err != nil {
		fatal("the nodes do not all meet: %v", err)
	}
	for i, n := range c.Nodes[cfg.Masters:] {
		m := c.Nodes[i%cfg.Masters]
		if err := n.Client.Do(ctx, "CLUSTER", "REPLICATE", m.ID).Err(); err != nil {
			fatal("CLUSTER REPLICATE %s on %s: %v", m.Addr, n.Addr, err)
		}
	}
	if err := c.WaitHealthy(ctx); err != nil {
		fatal("%v", err)
	}
	return c
}

// start starts the node's process.
func (n *RedisNode) start() error {
	n.cmd = exec.Command(n.argv[0], n.argv[1:]...)
	// SIGKILL when the test's process dies, even without its cleanups.
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := n.cmd.Start(); err != nil {
		return err
	}
	n.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { cmd.Wait(); close(done) }(n.cmd, n.done)
	return nil
}

// Restart starts a node that was killed again, on its port and with its cluster
// configuration (nodes.conf), as a supervisor restarts a crashed server: without
// persistence it comes back empty, and a master whose replica took over its slots
// meanwhile rejoins as that replica's replica and syncs from it. Restart waits until
// the node answers; [RedisCluster.WaitHealthy] waits for the sync. Restarting a live
// node does nothing.
func (n *RedisNode) Restart(t testing.TB) {
	t.Helper()
	if n.Alive() {
		return
	}
	if err := n.start(); err != nil {
		t.Fatalf("restarting redis-server %s: %v", n.Addr, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := Wait(ctx, func() error { return n.running(n.Client.Ping(ctx).Err()) }); err != nil {
		t.Fatalf("restarting redis-server %s: %v", n.Addr, err)
	}
}

// running returns err, or an error saying the node exited if it did.
func (n *RedisNode) running(err error) error {
	select {
	case <-n.done:
		return fmt.Errorf("redis-server %s exited", n.Addr)
	default:
	}
	return err
}

// Alive reports whether the node's process is running.
func (n *RedisNode) Alive() bool {
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// Kill kills the node's process at once (SIGKILL, as kill -9), as a crash would, and
// waits until it has exited. Killing a dead node does nothing.
func (n *RedisNode) Kill() {
	if !n.Alive() {
		return
	}
	n.cmd.Process.Kill()
	<-n.done
}

// Pause stops the node's process (SIGSTOP) without killing it: it answers nothing,
// neither clients nor its master nor the cluster's other nodes, until Resume. Resume it
// within the cluster's node timeout, or the others flag it as failed.
func (n *RedisNode) Pause() error { return n.cmd.Process.Signal(syscall.SIGSTOP) }

// Resume lets a paused node run again (SIGCONT).
func (n *RedisNode) Resume() error { return n.cmd.Process.Signal(syscall.SIGCONT) }

// Addrs returns the addresses of every node started, the seeds of a cluster client.
func (c *RedisCluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr
	}
	return addrs
}

// ByID returns the node whose cluster id is id, or nil.
func (c *RedisCluster) ByID(id string) *RedisNode {
	for _, n := range c.Nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// A clusterView is what one node says of the cluster: each node's role, master and
// slots, from CLUSTER NODES.
type clusterView map[string]viewNode

type viewNode struct {
	master string // the id of its master, for a replica
	flags  string
	slots  []string // ranges as CLUSTER NODES prints them: "0-5460", "7000", "[...]"
}

func (c *RedisCluster) view(ctx context.Context, n *RedisNode) (clusterView, error) {
	text, err := n.Client.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, err
	}
	v := clusterView{}
	for line := range strings.SplitSeq(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return nil, fmt.Errorf("CLUSTER NODES line %q", line)
		}
		vn := viewNode{flags: f[2], slots: f[8:]}
		if f[3] != "-" {
			vn.master = f[3]
		}
		v[f[0]] = vn
	}
	return v, nil
}

func (vn viewNode) is(flag string) bool { return strings.Contains(","+vn.flags+",", ","+flag+",") }

func (vn viewNode) owns(slot int) bool {
	for _, r := range vn.slots {
		if strings.HasPrefix(r, "[") {
			continue // a slot being imported or migrated
		}
		lo, hi, ok := strings.Cut(r, "-")
		if !ok {
			hi = lo
		}
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 == nil && err2 == nil && a <= slot && slot <= b {
			return true
		}
	}
	return false
}

// liveView returns the cluster as the first live node sees it, and that node.
func (c *RedisCluster) liveView(ctx context.Context) (clusterView, *RedisNode, error) {
	for _, n := range c.Nodes {
		if n.Alive() {
			v, err := c.view(ctx, n)
			return v, n, err
		}
	}
	return nil, nil, errors.New("no node of the cluster is running")
}

// MasterOf returns the node that a live node says is the master of slot now.
func (c *RedisCluster) MasterOf(ctx context.Context, slot int) (*RedisNode, error) {
	v, n, err := c.liveView(ctx)
	if err != nil {
		return nil, err
	}
	for id, vn := range v {
		if vn.is("master") && vn.owns(slot) {
			if m := c.ByID(id); m != nil {
				return m, nil
			}
		}
	}
	return nil, fmt.Errorf("%s knows no master of slot %d", n.Addr, slot)
}

// ReplicasOf returns the live nodes that say they replicate m now. Each node is asked
// about itself: another node's view of who replicates whom lags behind by a gossip
// round.
func (c *RedisCluster) ReplicasOf(ctx context.Context, m *RedisNode) ([]*RedisNode, error) {
	var out []*RedisNode
	for _, r := range c.Nodes {
		if !r.Alive() {
			continue
		}
		v, err := c.view(ctx, r)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.Addr, err)
		}
		if v[r.ID].master == m.ID {
			out = append(out, r)
		}
	}
	return out, nil
}

// Role returns what the node says it is: "master" or "slave" (INFO replication).
func (n *RedisNode) Role(ctx context.Context) (string, error) {
	info, err := n.Client.Info(ctx, "replication").Result()
	if err != nil {
		return "", err
	}
	return infoField(info, "role"), nil
}

// WaitHealthy waits, until ctx ends, for the live nodes to agree that every slot has
// a live master: each reports cluster_state:ok, sees no node it has not flagged as
// failed (fail) disconnected, names one live master per slot, agrees with each live
// node about what that node replicates, and each live replica has finished its
// synchronisation with its master (master_link_status:up).
func (c *RedisCluster) WaitHealthy(ctx context.Context) error {
	return Wait(ctx, func() error {
		// What each live node says it replicates ("" for a master): every other live
		// node must agree.
		selves := map[string]string{}
		for _, n := range c.Nodes {
			if !n.Alive() {
				continue
			}
			v, err := c.view(ctx, n)
			if err != nil {
				return fmt.Errorf("%s: %w", n.Addr, err)
			}
			selves[n.ID] = v[n.ID].master
		}
		for _, n := range c.Nodes {
			if !n.Alive() {
				continue
			}
			info, err := n.Client.ClusterInfo(ctx).Result()
			if err != nil {
				return fmt.Errorf("%s: %w", n.Addr, err)
			}
			if infoField(info, "cluster_state") != "ok" || infoField(info, "cluster_slots_ok") != "16384" {
				return fmt.Errorf("%s: cluster_state:%s, cluster_slots_ok:%s", n.Addr,
					infoField(info, "cluster_state"), infoField(info, "cluster_slots_ok"))
			}
			v, err := c.view(ctx, n)
			if err != nil {
				return fmt.Errorf("%s: %w", n.Addr, err)
			}
			owned := 0
			for id, vn := range v {
				node := c.ByID(id)
				if node == nil {
					return fmt.Errorf("%s knows a node %s the test did not start", n.Addr, id)
				}
				if node.Alive() != !vn.is("fail") {
					return fmt.Errorf("%s: node %s is flagged %s", n.Addr, node.Addr, vn.flags)
				}
				if node.Alive() && vn.master != selves[id] {
					return fmt.Errorf("%s sees node %s replicate %q, the node says %q", n.Addr, node.Addr, vn.master, selves[id])
				}
				if vn.is("master") && node.Alive() {
					for s := range 16384 {
						if vn.owns(s) {
							owned++
						}
					}
				}
			}
			if owned != 16384 {
				return fmt.Errorf("%s: live masters own %d slots of 16384", n.Addr, owned)
			}
			repl, err := n.Client.Info(ctx, "replication").Result()
			if err != nil {
				return fmt.Errorf("%s: %w", n.Addr, err)
			}
			if infoField(repl, "role") == "slave" &&
				(infoField(repl, "master_link_status") != "up" || infoField(repl, "master_sync_in_progress") != "0") {
				return fmt.Errorf("replica %s: master_link_status:%s, master_sync_in_progress:%s", n.Addr,
					infoField(repl, "master_link_status"), infoField(repl, "master_sync_in_progress"))
			}
		}
		return nil
	})
}

// infoField returns the value of a field of INFO's or CLUSTER INFO's text.
func infoField(info, name string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

// logs returns the end of every node's log, for a failure's message.
func (c *RedisCluster) logs() string {
	var b strings.Builder
	for _, n := range c.Nodes {
		out, _ := os.ReadFile(filepath.Join(n.dir, "log"))
		if len(out) > 2000 {
			out = out[len(out)-2000:]
		}
		fmt.Fprintf(&b, "--- %s (%s) ---\n%s\n", n.Addr, n.dir, out)
	}
	return b.String()
}
