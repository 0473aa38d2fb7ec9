package main

import (
	"net/http"

	"github.com/jackc/pgx/v5"
	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/store/postgres"
	"github.com/tollgate-dev/tollgate/store/redis"
)

// pgredisServer serves on the stores of a deployment of several instances, as
// examples/distributed wires them (internal/deploy): keys and credits in PostgreSQL
// (as postgresServer's), rate limits and concurrency slots in Redis (as
// redisServer's), key records cached. pgredis-observed is the same observed as the
// observed server is (its metrics, every store decorated; its traces on a provider
// that samples no trace), with the stores' round trips told to the tracer through
// their hooks, as internal/deploy does.
func pgredisServer(kind string, cfg storeConfig, accounts int) (http.Handler, func(), error) {
	var (
		obs       *observation
		pgTracer  pgx.QueryTracer
		redisHook goredis.Hook
	)
	if kind == "pgredis-observed" {
		var err error
		if obs, err = newObservation("observed"); err != nil {
			return nil, nil, err
		}
		pgTracer, redisHook = postgres.QueryTracer(obs.tracer), redis.Hook(obs.tracer)
	}
	pg, closePG, err := openPostgres(cfg.postgres, pgTracer)
	if err != nil {
		return nil, nil, err
	}
	rd, closeRedis, err := openRedis(cfg.redis, redisHook)
	if err != nil {
		closePG()
		return nil, nil, err
	}
	return serveOn(tollgate.Stores{Keys: pg, Ledger: pg, Rates: rd, Slots: rd}, func() { closeRedis(); closePG() }, accounts, obs)
}
