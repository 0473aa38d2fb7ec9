package redis

import (
	"context"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// ClusterOptions returns the options this package recommends for a client of a Redis
// Cluster whose nodes include addrs (any of them; the client discovers the others):
// those that fail fast, as the package documentation recommends for a single server,
// and ClusterStateReloadInterval at [ClusterStateReloadInterval], so that calls of a
// failed master's slots recover within seconds of its replica's promotion (see "Redis
// Cluster" in the package documentation). Change a field before passing them to
// goredis.NewClusterClient, if needed:
//
//	o := redis.ClusterOptions("redis-0:6379", "redis-1:6379", "redis-2:6379")
//	o.PoolSize = 128 // per node
//	client := goredis.NewClusterClient(o)
func ClusterOptions(addrs ...string) *goredis.ClusterOptions {
	return &goredis.ClusterOptions{
		Addrs:                      addrs,
		ClusterStateReloadInterval: ClusterStateReloadInterval,
		PoolSize:                   64,                     // per node: at least the calls in flight on one instance
		PoolTimeout:                500 * time.Millisecond, // wait for a busy pool, then fail
		DialTimeout:                250 * time.Millisecond, // a down node fails the call quickly
		DialerRetries:              1,                      // one dial per attempt (default 5, 100ms apart)
		ReadTimeout:                250 * time.Millisecond, // a script runs in tens of µs; later means stuck
		WriteTimeout:               250 * time.Millisecond,
		ContextTimeoutEnabled:      true, // a request's deadline ends the wait
		Protocol:                   2,    // RESP2: less CPU per call than RESP3
	}
}

// ClusterStateReloadInterval is how often [ClusterOptions] makes the client reload the
// cluster's topology (the owner of each slot) while it is in use. go-redis reloads it
// at once after a MOVED or ASK redirection, but a dead master answers none: until the
// next reload the client keeps sending that master's slots to it, and the calls fail
// (go-redis's default is a minute).
const ClusterStateReloadInterval = 2 * time.Second

// slotMovingTries bounds how many times a script refused because its slot is moving
// between nodes (TRYAGAIN, or a redirection left over when the client's own are spent)
// is sent again, with pauses of 1, 2, 4 ... up to 50 milliseconds: about 5 seconds in
// all, where a resharding moves one slot's keys in well under a second.
const slotMovingTries = 100

// slotMoving reports whether err says that a command was refused, before it ran,
// because its slot is being moved to another node of a Redis Cluster: TRYAGAIN (a
// command of several keys, some of them already moved), or ASK or MOVED (redirections
// the client did not follow to the end).
func slotMoving(err error) bool {
	if err == nil {
		return false
	}
	if goredis.IsTryAgainError(err) {
		return true
	}
	_, ask := goredis.IsAskError(err)
	_, moved := goredis.IsMovedError(err)
	return ask || moved
}

// whileSlotMoves runs op, and runs it again, with growing pauses, while it is refused
// because its slot is moving (see [slotMoving]), up to [slotMovingTries] times or
// until ctx ends. Redis refuses such a command before running it, so sending it again
// cannot apply it twice; every script of the hot path is idempotent by request id
// besides.
func whileSlotMoves(ctx context.Context, op func() (any, error)) (any, error) {
	v, err := op()
	pause := time.Millisecond
	for try := 0; slotMoving(err) && try < slotMovingTries; try++ {
		if sleep(ctx, pause) != nil {
			return v, err
		}
		pause = min(2*pause, 50*time.Millisecond)
		v, err = op()
	}
	return v, err
}
