package redis

import (
	"context"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/health"
)

// Every store of the package answers health.Pinger.
var (
	_ health.Pinger = (*Store)(nil)
	_ health.Pinger = (*WebhookStore)(nil)
)

// ping sends PING to every server that holds keys: the one server of a client, the
// current master of a failover client, every master of a Cluster (after asking the
// cluster for its masters, so that a failover is seen at once) and every shard of a
// Ring, in parallel.
func ping(ctx context.Context, c goredis.UniversalClient) error {
	if err := ctx.Err(); err != nil {
		return fail(ctx, err, "ping") // nothing sent
	}
	var err error
	each := func(ctx context.Context, node *goredis.Client) error { return node.Ping(ctx).Err() }
	switch c := c.(type) {
	case *goredis.ClusterClient:
		err = c.ForEachMaster(ctx, each)
	case *goredis.Ring:
		err = c.ForEachShard(ctx, each)
	default:
		err = c.Ping(ctx).Err()
	}
	if err != nil {
		return fail(ctx, err, "ping")
	}
	return nil
}

// Ping returns nil when Redis answers PING, every master of a Cluster, and otherwise
// an error that wraps store.ErrUnavailable (see health.Pinger). It reads no key.
func (s *Store) Ping(ctx context.Context) error { return ping(ctx, s.c) }

// Ping returns nil when Redis answers PING, as [Store.Ping] does.
func (s *WebhookStore) Ping(ctx context.Context) error { return ping(ctx, s.c) }
