package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// DefaultWaitTimeout is the default [Options.WaitTimeout].
const DefaultWaitTimeout = 100 * time.Millisecond

// ErrNotReplicated reports a write that its master took but fewer of its replicas than
// [Options.Replicas] acknowledged within [Options.WaitTimeout]: a failover may lose it,
// or it may outlive the master. The Store reports it wrapped with
// store.ErrUnavailable, so that the call is answered as unavailable: an admission so
// reported charges nothing (its reservation is voided at its deadline), a settlement
// so reported is retried or voided as any unavailable settlement is. See
// docs/redis.md, "Waiting for replicas".
var ErrNotReplicated = errors.New("redis: the write was not acknowledged by enough replicas in time")

// fenceTTL is how long a fence key (see [replication.fenceKey]) lives after its last
// write: it only needs to be written, never read.
const fenceTTL = time.Minute

// A replication makes writes wait until replicas have them ([Options.Replicas]). A
// write is sent in a pipeline on one connection to the master of its keys, followed by
// a write of a fence key in the same slot and WAIT: WAIT waits for the replicas to
// acknowledge the connection's last write, and the fence makes that write the
// pipeline's last, so that a write that changed nothing (a replay, which acknowledges
// a write an earlier attempt made on another connection) waits for everything the
// master took before it. Redis does not allow WAIT in a script, and a Cluster client
// would send WAIT, which names no key, to any node: the pipeline is sent on the
// client of the slot's master (ClusterClient.MasterForKey), and a call that the node
// refuses because its slot moved (MOVED, ASK, TRYAGAIN: it did not run) is sent
// again, to the slot's master then, once the topology is reloaded, rather than
// following the redirection, so that the fence and WAIT always reach the node that ran
// the write.
type replication struct {
	c       goredis.UniversalClient
	cluster *goredis.ClusterClient // nil for a client of one server (or of a failover group)
	n       int
	timeout time.Duration
	prefix  string
}

// newReplication returns the replication of the writes of a store over c under
// prefix, waiting for n replicas at most timeout, or nil when n is 0.
func newReplication(c goredis.UniversalClient, prefix string, n int, timeout time.Duration) (*replication, error) {
	switch {
	case n < 0:
		return nil, fmt.Errorf("redis: replicas %d is negative", n)
	case timeout < 0:
		return nil, fmt.Errorf("redis: wait timeout %v is negative", timeout)
	case n == 0:
		return nil, nil
	case timeout == 0:
		timeout = DefaultWaitTimeout
	case timeout < time.Millisecond:
		timeout = time.Millisecond // WAIT counts milliseconds, and 0 would wait for ever
	}
	r := &replication{c: c, n: n, timeout: timeout.Round(time.Millisecond), prefix: prefix}
	var read time.Duration
	switch c := c.(type) {
	case *goredis.Client:
		read = c.Options().ReadTimeout
	case *goredis.ClusterClient:
		r.cluster = c
		read = c.Options().ReadTimeout
	default:
		return nil, fmt.Errorf("redis: waiting for replicas needs a client of one server, a failover client or a Cluster client, not a %T", c)
	}
	// The pipeline's replies, WAIT's included, are read under the client's
	// ReadTimeout: a wait that outlasts it breaks the connection instead of answering.
	if read > 0 && r.timeout >= read {
		return nil, fmt.Errorf("redis: the wait timeout %v must be shorter than the client's ReadTimeout %v, which bounds the wait's reply", r.timeout, read)
	}
	return r, nil
}

// do runs calls, each on the master of its first key's slot (one pipeline per
// master), and returns their replies in order: a call's own, once the replicas have
// it, or an error. A call whose replicas did not acknowledge it in time fails with
// ErrNotReplicated; one that a node refused because its slot is moving (which did not
// run) is sent again, with pauses growing from 1 to 50 milliseconds, up to
// [slotMovingTries] times or until ctx ends (see [whileSlotMoves]).
func (r *replication) do(ctx context.Context, calls []scriptCall) []scriptReply {
	out := make([]scriptReply, len(calls))
	eval := make([]bool, len(calls)) // the calls to send as EVAL: Redis lacked their script
	todo := make([]int, len(calls))
	for i := range todo {
		todo[i] = i
	}
	pause := time.Millisecond
	for try := 0; ; try++ {
		again := r.round(ctx, calls, todo, eval, out)
		if len(again) == 0 || try == slotMovingTries || sleep(ctx, pause) != nil {
			return out // a call left over keeps its last refusal as its reply
		}
		pause = min(2*pause, 50*time.Millisecond)
		todo = again
	}
}

// sleep waits d, or until ctx ends, and returns ctx's error if it did.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// round sends the calls of todo to their masters, one pipeline each, in parallel, and
// returns the calls to send again: those the node refused before running them.
func (r *replication) round(ctx context.Context, calls []scriptCall, todo []int, eval []bool, out []scriptReply) []int {
	if r.cluster == nil {
		return r.send(ctx, r.c, calls, todo, eval, out)
	}
	var nodes []goredis.Cmdable
	groups := map[goredis.Cmdable][]int{}
	for _, i := range todo {
		node, err := r.node(ctx, calls[i].key())
		if err != nil {
			out[i] = scriptReply{nil, err}
			continue
		}
		if groups[node] == nil {
			nodes = append(nodes, node)
		}
		groups[node] = append(groups[node], i)
	}
	if len(nodes) == 1 {
		return r.send(ctx, nodes[0], calls, groups[nodes[0]], eval, out)
	}
	again := make([][]int, len(nodes))
	var wg sync.WaitGroup
	for k, node := range nodes {
		wg.Go(func() { again[k] = r.send(ctx, node, calls, groups[node], eval, out) })
	}
	wg.Wait()
	var all []int
	for _, a := range again {
		all = append(all, a...)
	}
	return all
}

// node returns the client of the master of key's slot.
func (r *replication) node(ctx context.Context, key string) (goredis.Cmdable, error) {
	if r.cluster == nil {
		return r.c, nil
	}
	return r.cluster.MasterForKey(ctx, key)
}

// reload makes a Cluster client reload the topology (at most every 200ms, in the
// background), after a node refused a call because its slot moved or could not be
// reached, which it does when it failed and its replica took over.
func (r *replication) reload(ctx context.Context) {
	if r.cluster != nil {
		r.cluster.ReloadState(ctx)
	}
}

// send runs the calls idx, whose masters are node, in one pipeline followed by the
// fence and WAIT, and sets their replies in out. It returns the calls to send again.
func (r *replication) send(ctx context.Context, node goredis.Cmdable, calls []scriptCall, idx []int, eval []bool, out []scriptReply) (again []int) {
	cmds := make([]*goredis.Cmd, len(idx))
	var fence *goredis.StatusCmd
	var wait *goredis.IntCmd
	// Each command carries its own error (a broken connection fails them all).
	node.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for j, i := range idx {
			c := calls[i]
			switch {
			case c.sc == nil:
				cmds[j] = p.Do(ctx, c.args...)
			case eval[i]:
				cmds[j] = c.sc.Eval(ctx, p, c.keys, c.args...)
			default:
				cmds[j] = c.sc.EvalSha(ctx, p, c.keys, c.args...)
			}
		}
		fence = p.Set(ctx, r.fenceKey(calls[idx[0]].key()), "1", fenceTTL)
		wait = r.wait(ctx, p)
		return nil
	})
	var ran []int
	for j, i := range idx {
		v, err := cmds[j].Result()
		switch {
		case err == nil || errors.Is(err, goredis.Nil):
			ran = append(ran, i)
			out[i] = scriptReply{v, err}
		case calls[i].sc != nil && goredis.HasErrorPrefix(err, "NOSCRIPT"):
			eval[i] = true
			again = append(again, i)
			out[i] = scriptReply{nil, err}
		case slotMoving(err):
			if _, moved := goredis.IsMovedError(err); moved {
				r.reload(ctx)
			}
			again = append(again, i)
			out[i] = scriptReply{nil, err}
		default:
			var reply goredis.Error
			if !errors.As(err, &reply) {
				r.reload(ctx) // no reply: the node may be gone
			}
			out[i] = scriptReply{nil, err}
		}
	}
	if len(ran) == 0 {
		return again
	}
	if err := r.confirm(ctx, fence, wait, calls, ran); err != nil {
		for _, i := range ran {
			out[i] = scriptReply{nil, err}
		}
	}
	return again
}

// confirm returns nil if the replicas acknowledged the calls ran, from the replies of
// the fence and of WAIT that followed them, or the error that the calls must report.
// A fence refused because its slot is moving (a migrating slot whose fence key is on
// the node the slot moves to) is written again until it is taken, and waited for, for
// the slot of each call.
func (r *replication) confirm(ctx context.Context, fence *goredis.StatusCmd, wait *goredis.IntCmd, calls []scriptCall, ran []int) error {
	switch err := fence.Err(); {
	case err == nil:
		if err := wait.Err(); err != nil {
			return err
		}
		return r.enough(wait.Val())
	case !slotMoving(err):
		return err
	}
	// The node ran the calls and then refused the fence: the slot is moving to
	// another node, which has the fence key. Until the move ends, the fence is
	// refused; then it reaches the slot's new master, which has the keys that moved
	// and so the calls' writes.
	done := map[string]bool{}
	for _, i := range ran {
		key := r.fenceKey(calls[i].key())
		if done[key] {
			continue
		}
		done[key] = true
		if err := r.fenceAgain(ctx, calls[i].key()); err != nil {
			return err
		}
	}
	return nil
}

// fenceAgain writes the fence of key's slot on the slot's master and waits for its
// replicas, again while the fence is refused because the slot is moving.
func (r *replication) fenceAgain(ctx context.Context, key string) error {
	pause := time.Millisecond
	for try := 0; ; try++ {
		node, err := r.node(ctx, key)
		if err != nil {
			return err
		}
		var fence *goredis.StatusCmd
		var wait *goredis.IntCmd
		node.Pipelined(ctx, func(p goredis.Pipeliner) error {
			fence = p.Set(ctx, r.fenceKey(key), "1", fenceTTL)
			wait = r.wait(ctx, p)
			return nil
		})
		err = fence.Err()
		switch {
		case err == nil:
			if err := wait.Err(); err != nil {
				return err
			}
			return r.enough(wait.Val())
		case !slotMoving(err) || try == slotMovingTries:
			return err
		}
		if _, moved := goredis.IsMovedError(err); moved {
			r.reload(ctx)
		}
		if err := sleep(ctx, pause); err != nil {
			return err
		}
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// wait adds WAIT to p: wait for r.n replicas, r.timeout at most.
func (r *replication) wait(ctx context.Context, p goredis.Pipeliner) *goredis.IntCmd {
	cmd := goredis.NewIntCmd(ctx, "wait", r.n, r.timeout.Milliseconds())
	p.Process(ctx, cmd)
	return cmd
}

// enough returns nil if got replicas are enough, and otherwise ErrNotReplicated.
func (r *replication) enough(got int64) error {
	if got >= int64(r.n) {
		return nil
	}
	return fmt.Errorf("%w: %d of %d replicas had it after %v; check that the master's replicas are up and connected to it (INFO replication)",
		ErrNotReplicated, got, r.n, r.timeout)
}

// fenceKey returns the fence key of key's slot: <prefix>:{~w<n>}:fence, where n is the
// first number that puts the tag in that slot (a tag no account has: an account's tag
// begins with '~' only when hexadecimal follows). A client of one server needs one
// fence key, <prefix>:{~w}:fence.
func (r *replication) fenceKey(key string) string {
	if r.cluster == nil {
		return r.prefix + ":{~w" + fenceSuffix
	}
	return r.prefix + ":{~w" + strconv.FormatUint(uint64(fenceTags()[keySlot(key)]), 10) + fenceSuffix
}

// fenceSuffix ends the name of every fence key.
const fenceSuffix = "}:fence"

// keySlot returns the Cluster slot of key: the CRC16 of its hash tag (what lies between
// the first '{' and the first '}' after it, if that is not empty), or of the whole
// key, modulo 16384.
func keySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % 16384)
}

// fenceTags returns, for each of the 16384 slots, the first number n such that "~w<n>"
// hashes to that slot. It is computed once, on first use (about 150,000 CRC16s of
// short strings, a few milliseconds), and only read afterwards.
var fenceTags = sync.OnceValue(func() *[16384]uint32 {
	// CRC-16/XMODEM a byte at a time, from a table (crc16 goes a bit at a time).
	var table [256]uint16
	for i := range table {
		table[i] = crc16(string([]byte{byte(i)}))
	}
	var tags [16384]uint32
	var found [16384]bool
	left := len(tags)
	buf := make([]byte, 0, 16)
	for n := uint32(0); left > 0; n++ {
		buf = strconv.AppendUint(append(buf[:0], '~', 'w'), uint64(n), 10)
		var crc uint16
		for _, b := range buf {
			crc = crc<<8 ^ table[byte(crc>>8)^b]
		}
		if s := crc % 16384; !found[s] {
			found[s], tags[s] = true, n
			left--
		}
	}
	return &tags
})
