package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate-dev/tollgate/store/postgres"
)

// BenchmarkHotInstances measures one hot account's paid calls (an Admit with key check
// and a 1-credit reservation, then a Close keeping the charge, as in BenchmarkAdmitClose)
// sent by one Store, against the same calls sent by three Store values on three pools of
// the same database (three instances of a deployment), with the same 64 goroutines and
// 33 connections in all (one pool of 33, or three of 11). It alternates the two in
// rounds, so that a change of the machine's load affects both alike: b.N calls in all,
// shared evenly among the rounds, each round giving half of its calls to each side.
//
// It reports the calls per second of each side (the median over the rounds), and the
// median, min and max of the rounds' ratios of three instances to one
// (three/one-median, -min, -max). At the end it checks that the ledger is exact: every
// call reserved and settled one credit, nothing is left open, and the ledger's entries
// sum to the balance. Fix the number of calls, as the set-up is made once per run:
//
//	go test -run='^$' -bench=BenchmarkHotInstances -benchtime=60000x ./store/postgres/
func BenchmarkHotInstances(b *testing.B) {
	for _, shards := range []int{1, 16} {
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) {
			benchHotInstances(b, &postgres.Options{Shards: shards})
		})
	}
}

func benchHotInstances(b *testing.B, opts *postgres.Options) {
	const (
		rounds     = 5
		goroutines = 64
	)
	ctx := context.Background()
	schema := newSchema(b)
	pool := func(conns int32) *pgxpool.Pool {
		p, err := pgxpool.NewWithConfig(ctx, poolConfig(b, schema, conns))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(p.Close)
		return p
	}
	one := pool(33)
	if err := postgres.Migrate(ctx, one); err != nil {
		b.Fatal(err)
	}
	store := func(p *pgxpool.Pool) *postgres.Store {
		s, err := postgres.New(p, opts)
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	single := []*postgres.Store{store(one)}
	three := []*postgres.Store{store(pool(11)), store(pool(11)), store(pool(11))}

	key := openPaid(b, single[0], "hot")
	drive := func(stores []*postgres.Store, n int) float64 { return drivePaid(b, stores, key, goroutines, n) }

	per := b.N / (2 * rounds)
	var ones, threes, ratios []float64
	b.ResetTimer()
	for range rounds {
		if per == 0 {
			break
		}
		o := drive(single, per)
		t := drive(three, per)
		ones, threes, ratios = append(ones, o), append(threes, t), append(ratios, t/o)
	}
	b.StopTimer()
	if b.Failed() || len(ratios) == 0 {
		return
	}
	calls := int64(2 * rounds * per)
	b.ReportMetric(median(ones), "one-calls/s")
	b.ReportMetric(median(threes), "three-calls/s")
	b.ReportMetric(median(ratios), "three/one-median")
	b.ReportMetric(slices.Min(ratios), "three/one-min")
	b.ReportMetric(slices.Max(ratios), "three/one-max")
	b.Logf("rounds, calls/s one | three | ratio: %.0f | %.0f | %.2f", ones, threes, ratios)

	// The ledger is exact: every call reserved one credit and settled it.
	bal, err := single[0].Balance(ctx, key.AccountID, t0, period, paidCredits)
	if err != nil {
		b.Fatal(err)
	}
	var open, sum int64
	if err := one.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM tollgate_reservations WHERE account_id = $1),
		       (SELECT coalesce(sum(amount), 0)::bigint FROM tollgate_ledger WHERE account_id = $1)`,
		key.AccountID).Scan(&open, &sum); err != nil {
		b.Fatal(err)
	}
	if bal.Remaining != paidCredits-calls || bal.Used != calls || open != 0 || sum != bal.Remaining {
		b.Fatalf("after %d calls: %d remaining, %d used, %d reservations open, the ledger sums to %d",
			calls, bal.Remaining, bal.Used, open, sum)
	}
}

// median returns the median of xs (the mean of the middle two for an even count).
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
