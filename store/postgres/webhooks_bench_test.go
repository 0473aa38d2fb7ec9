package postgres_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/tollgate-dev/tollgate/store/postgres"
	"github.com/tollgate-dev/tollgate/webhook"
)

// BenchmarkWebhookEnqueue measures Enqueue as the Dispatcher sends it: each message of
// one of 256 accounts, for that account's endpoint and for the operator's endpoint,
// which every account's messages name, with durable commits. serial runs one enqueue
// at a time; parallel runs 64 goroutines over a pool of 32 connections, where the
// enqueues of the accounts meet at the operator's endpoint. Besides ns/op it reports
// enqueues/s. Run it with TOLLGATE_TEST_POSTGRES set:
//
//	go test -run='^$' -bench=WebhookEnqueue -benchtime=4000x ./store/postgres/
//
// (A run of more than 10,000 enqueues fills the operator's endpoint, whose enqueues
// are then dropped.)
func BenchmarkWebhookEnqueue(b *testing.B) {
	for _, parallel := range []bool{false, true} {
		name := "serial"
		if parallel {
			name = "parallel"
		}
		b.Run(name, func(b *testing.B) {
			pool := newPool(b, 32)
			s, err := postgres.NewWebhookStore(pool, nil)
			if err != nil {
				b.Fatal(err)
			}
			ctx := b.Context()
			const accounts = 256
			if _, err := s.CreateEndpoint(ctx, webhook.Endpoint{ID: "ep-operator", URL: "https://ops.example.com/", Created: t0}); err != nil {
				b.Fatal(err)
			}
			for i := range accounts {
				e := webhook.Endpoint{ID: fmt.Sprint("ep-", i), Account: fmt.Sprint("acct-", i), URL: "https://example.com/", Created: t0}
				if _, err := s.CreateEndpoint(ctx, e); err != nil {
					b.Fatal(err)
				}
			}
			var seq atomic.Int64
			enqueue := func() {
				n := seq.Add(1)
				i := n % accounts
				m := webhook.Message{ID: fmt.Sprint("msg-", n), Type: "key.rotated", Account: fmt.Sprint("acct-", i), At: t0, Body: []byte(`{}`)}
				// Below the bound (10,000 per endpoint) for runs of fewer enqueues:
				// -benchtime=4000x.
				if _, _, err := s.Enqueue(ctx, m, []string{fmt.Sprint("ep-", i), "ep-operator"}, t0); err != nil {
					b.Error(err)
				}
			}
			b.ResetTimer()
			if parallel {
				b.SetParallelism(32) // 64 goroutines on 2 CPUs
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						enqueue()
					}
				})
			} else {
				for range b.N {
					enqueue()
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "enqueues/s")
		})
	}
}
