package postgres_test

import (
	"context"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/store/postgres"
)

// Example wires a service to PostgreSQL: a pool with the recommended settings in a
// schema of its own, the migrations, and one Store in every role. (It needs a server,
// so it is compiled but not run.)
func Example() {
	ctx := context.Background()
	cfg, err := postgres.PoolConfig(os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = "tollgate" // created beforehand: CREATE SCHEMA tollgate
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if err := postgres.Migrate(ctx, pool); err != nil {
		log.Fatal(err)
	}
	s, err := postgres.New(pool, nil) // the defaults: a hot account's concurrent calls are batched
	if err != nil {
		log.Fatal(err)
	}
	stores := tollgate.Stores{Keys: s, Ledger: s, Rates: s, Slots: s}
	_ = stores // tollgate.New(registry, stores, plans, opts)
}
