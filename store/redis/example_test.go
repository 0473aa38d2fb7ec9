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
