package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/store/postgres"
	"github.com/tollgate-dev/tollgate/webhook"
)

// TestWebhookRace runs every change of the webhook store at once on the same
// endpoints (enqueues naming them in shuffled orders, claims, outcomes, resends,
// prunes, the deletion of an endpoint) and checks that none fails but with a
// well-known condition (a deadlock would be an outage) and that every endpoint's count
// of pending deliveries is the number of its pending rows.
func TestWebhookRace(t *testing.T) {
	pool := newPool(t, 16)
	s, err := postgres.NewWebhookStore(pool, &postgres.WebhookOptions{MaxPending: 40})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	// Three of an account's (4 shards each) and one of the operator's (16 shards).
	eps := []string{"ep-a", "ep-b", "ep-c", "ep-d"}
	for _, id := range eps {
		account := "acme"
		if id == "ep-d" {
			account = ""
		}
		if _, err := s.CreateEndpoint(ctx, webhook.Endpoint{ID: id, Account: account, URL: "https://example.com/", Created: t0}); err != nil {
			t.Fatal(err)
		}
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		fails []error
	)
	note := func(err error) {
		if err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, webhook.ErrClaimLost) {
			mu.Lock()
			fails = append(fails, err)
			mu.Unlock()
		}
	}
	now := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Millisecond) }
	half := make(chan struct{}) // closed when the first enqueuer is half-way
	for w := range 4 {
		wg.Go(func() { // enqueuers
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for i := range 60 {
				names := append([]string(nil), eps...)
				r.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
				m := webhook.Message{ID: fmt.Sprintf("msg-%d-%d", w, i), Type: "key.rotated", At: now(i), Body: []byte("{}")}
				_, _, err := s.Enqueue(ctx, m, names, now(i))
				note(err)
				if w == 0 && i == 30 {
					close(half)
				}
			}
		})
	}
	for w := range 4 {
		wg.Go(func() { // deliverers
			r := rand.New(rand.NewPCG(uint64(w), 2))
			for i := range 60 {
				ds, err := s.Claim(ctx, now(i+100), time.Millisecond, 5)
				note(err)
				for _, d := range ds {
					st := []webhook.State{webhook.Delivered, webhook.Failed, webhook.Pending}[r.IntN(3)]
					note(s.Record(ctx, webhook.Outcome{Endpoint: d.Endpoint, Message: d.Message.ID, Claim: d.Claim, State: st,
						Due: now(i + 101), Attempt: webhook.Attempt{At: now(i + 100), Status: 200}}))
				}
			}
		})
	}
	wg.Go(func() { // resends
		for i := range 120 {
			_, err := s.Resend(ctx, eps[i%len(eps)], fmt.Sprintf("msg-%d-%d", i%4, i/4), now(i+200))
			note(err)
		}
	})
	wg.Go(func() { // prunes
		for i := range 20 {
			_, err := s.Prune(ctx, now(i*10+100))
			note(err)
		}
	})
	wg.Go(func() { // a deletion, midway
		<-half
		note(s.DeleteEndpoint(ctx, "ep-c"))
	})
	wg.Wait()
	for _, err := range fails {
		t.Errorf("a change racing the others: %v", err)
	}
	rows, err := pool.Query(ctx, `SELECT e.id, (SELECT sum(s.pending) FROM tollgate_webhook_endpoint_shards s WHERE s.endpoint_id = e.id),
		(SELECT count(*) FROM tollgate_webhook_deliveries d WHERE d.endpoint_id = e.id AND d.state = 1)
		FROM tollgate_webhook_endpoints e ORDER BY e.id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id       string
			counted  int
			pendings int64
		)
		if err := rows.Scan(&id, &counted, &pendings); err != nil {
			t.Fatal(err)
		}
		if int64(counted) != pendings || counted > 40 {
			t.Errorf("endpoint %s counts %d pending deliveries, has %d (bound 40)", id, counted, pendings)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// TestWebhookEnqueueNoHotRow: the enqueues of every account name the operator's
// endpoints, which receive every account's events; an enqueue in flight (its
// transaction not yet committed) must not hold up the other accounts' enqueues for the
// same operator's endpoint, as a lock of the endpoint's row until the commit did. One
// enqueue is left uncommitted; of 32 other accounts' enqueues for the same endpoints,
// some complete while it is (each waits only if it drew the one shard of the 16 that
// the uncommitted one holds: that all 32 do has a chance of 16^-32). Then the first
// commits, and every count is exact.
func TestWebhookEnqueueNoHotRow(t *testing.T) {
	pool := newPool(t, 40)
	s, err := postgres.NewWebhookStore(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := s.CreateEndpoint(ctx, webhook.Endpoint{ID: "ep-operator", URL: "https://ops.example.com/", Created: t0}); err != nil {
		t.Fatal(err)
	}
	msg := func(account string) webhook.Message {
		return webhook.Message{ID: "msg-" + account, Type: "key.rotated", Account: account, At: t0, Body: []byte("{}")}
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	inTx, err := postgres.NewWebhookStore(tx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, dropped, err := inTx.Enqueue(ctx, msg("first"), []string{"ep-operator"}, t0); err != nil || len(dropped) != 0 {
		t.Fatalf("the enqueue left in flight: dropped %q, %v", dropped, err)
	}
	const others = 32
	var done atomic.Int32
	var wg sync.WaitGroup
	for i := range others {
		wg.Go(func() {
			_, dropped, err := s.Enqueue(ctx, msg(fmt.Sprint("acct-", i)), []string{"ep-operator"}, t0)
			if err != nil || len(dropped) != 0 {
				t.Errorf("the enqueue of account %d: dropped %q, %v", i, dropped, err)
				return
			}
			done.Add(1)
		})
	}
	deadline := time.Now().Add(30 * time.Second)
	for done.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if done.Load() == 0 {
		t.Errorf("no enqueue of another account for the operator's endpoint completed in 30 s while one was in flight: they wait on one row")
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if n, err := s.Pending(ctx); err != nil || n != others+1 {
		t.Errorf("Pending: %d, %v; want %d", n, err, others+1)
	}
}
