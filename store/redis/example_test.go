package redis_test

import (
	"log"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/store/redis"
)

// A host configures the client to fail fast (see the package documentation) and gives
// the Store the roles it should play. Here the limits are in Redis and the keys and
// credits elsewhere; a deployment of several instances keeps those in PostgreSQL
// (store/postgres), as the in-memory stores below cannot be shared.
func ExampleNew() {
	client := goredis.NewClient(&goredis.Options{
		Addr:                  "127.0.0.1:6379",
		PoolSize:              64,
		MinIdleConns:          8,
		PoolTimeout:           500 * time.Millisecond,
		DialTimeout:           250 * time.Millisecond,
		DialerRetries:         1,
		ReadTimeout:           250 * time.Millisecond,
		WriteTimeout:          250 * time.Millisecond,
		ContextTimeoutEnabled: true,
		MaxRetries:            1,
		Protocol:              2,
	})
	defer client.Close()

	limits, err := redis.New(client, &redis.Options{Prefix: "tollgate"})
	if err != nil {
		log.Fatal(err)
	}
	stores := tollgate.Stores{Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil), Rates: limits, Slots: limits}
	_ = stores // tollgate.New(registry, stores, plans, opts)
}

// On a Redis Cluster, a host starts from the options the package recommends:
// fail-fast timeouts, and a topology reloaded every 2 seconds, so that the calls of a
// failed master's accounts are served again within seconds of its replica's promotion.
func ExampleClusterOptions() {
	o := redis.ClusterOptions("10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379")
	o.PoolSize = 128 // per node, if an instance has more calls in flight
	client := goredis.NewClusterClient(o)
	defer client.Close()

	rs, err := redis.New(client, nil)
	if err != nil {
		log.Fatal(err)
	}
	stores := tollgate.Stores{Keys: rs, Ledger: rs, Rates: rs, Slots: rs}
	_ = stores // tollgate.New(registry, stores, plans, opts)
}
