package webhook_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/webhook"
	"github.com/tollgate-dev/tollgate/wire"
)

// TestReviewDuplicatesFillTheQueue: a Dispatcher remembers a derived id only once the
// store took its message, so every call or refusal that sees the same cause before
// then makes and queues the same message again (a SHA-256 and 11 allocations each).
// Rate-limit refusals come in floods by nature: while the queue's head waits on the
// store, one key's refusals fill the bounded queue with copies of one message, and the
// messages of every other account (their thresholds, and the changes whose store write
// failed) are dropped.
//
// Fix: remember an id as queued when it is pushed (forget it if it is dropped or lost),
// and check a cheap per-(account, key) window before making the id.
func TestReviewDuplicatesFillTheQueue(t *testing.T) {
	s := memory.NewWebhookStore()
	d, err := webhook.NewDispatcher(s, &webhook.DispatcherOptions{Queue: 64, Now: func() time.Time { return d0 },
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	// Run is behind (the store is slow): nothing queued has reached the store yet.
	for range 100 {
		d.Observe(t.Context(), &event.Refusal{At: d0.Add(time.Hour), Account: "mallory", Key: "k1", Plan: "free",
			Code: wire.CodeRateLimited, Balance: march})
	}
	d.Observe(t.Context(), call("alice", march, 80)) // alice reaches 80%
	st := d.Stats()
	if st.Queued != 2 || st.Dropped != 0 {
		t.Errorf("after 100 refusals of one key in one window and one threshold of another account: %d queued, %d dropped; want 2 queued (one message each), none dropped",
			st.Queued, st.Dropped)
	}
}

// TestReviewRateLimitOncePerCooldown: docs/webhooks.md says rate_limit.exceeded is
// "Sent at most once per cooldown, however many calls are refused". The Dispatcher
// sends one per key and per fixed window: an account over its (account-wide) rate
// limit with 100 keys sends 100 messages per window (28,800 a day, each kept 30 days
// for each of the account's endpoints and of the operator's, whose 10,000 pending
// deliveries every account shares), and two refusals a second apart across a
// window's edge send two.
//
// Fix: one per account and cooldown, decided on a sliding cooldown (remember the
// window's start per account), or say what the code does in the docs; and bound what
// one account may have pending at the operator's endpoints.
func TestReviewRateLimitOncePerCooldown(t *testing.T) {
	t.Run("keys", func(t *testing.T) {
		r := newRig(t, 1, nil)
		r.endpoint(t, "ep_acme", "acme")
		for i := range 100 {
			r.dispatchers[0].Observe(t.Context(), &event.Refusal{At: d0.Add(time.Hour), Account: "acme",
				Key: fmt.Sprintf("key_%d", i), Plan: "free", Code: wire.CodeRateLimited, Balance: march})
		}
		waitQueue(t, r.dispatchers[0])
		if n, _ := r.store.Pending(t.Context()); n != 1 {
			t.Errorf("100 keys of one account refused in one cooldown: %d rate_limit.exceeded, want 1", n)
		}
	})
	t.Run("edge", func(t *testing.T) {
		r := newRig(t, 1, nil)
		r.endpoint(t, "ep_acme", "acme")
		edge := d0.Truncate(webhook.DefaultRateLimitCooldown).Add(webhook.DefaultRateLimitCooldown)
		for _, at := range []time.Time{edge.Add(-time.Second), edge} {
			r.dispatchers[0].Observe(t.Context(), &event.Refusal{At: at, Account: "acme", Key: "key_1", Plan: "free",
				Code: wire.CodeRateLimited, Balance: march})
		}
		waitQueue(t, r.dispatchers[0])
		if n, _ := r.store.Pending(t.Context()); n != 1 {
			t.Errorf("two refusals of one key a second apart: %d rate_limit.exceeded, want 1 per %s", n, webhook.DefaultRateLimitCooldown)
		}
	})
}

// lostReplyStore stores the first Enqueue but answers it with a timeout, as a store
// does whose commit landed after the caller's deadline.
type lostReplyStore struct {
	webhook.Store
	mu   sync.Mutex
	lost bool
}

func (s *lostReplyStore) Enqueue(ctx context.Context, m webhook.Message, eps []string, now time.Time) (bool, []string, error) {
	fresh, dropped, err := s.Store.Enqueue(ctx, m, eps, now)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && !s.lost {
		s.lost = true
		return false, nil, context.DeadlineExceeded
	}
	return fresh, dropped, err
}

// TestReviewSubscriberToldOfLostReply: Subscribe promises that fn is told of each
// message the Dispatcher enqueues anew, once across the instances. When the store took
// a message but its reply was lost (a timeout after the commit), the retry finds the
// id taken, counts a duplicate, and tells no one: the host's own event is lost on
// every instance.
//
// Fix: tell the subscribers of a message whose enqueue this Dispatcher began and
// whose retry finds it stored (not fresh after an error of its own), or make Enqueue
// report "stored by this call" idempotently (a caller token kept with the message).
func TestReviewSubscriberToldOfLostReply(t *testing.T) {
	st := &lostReplyStore{Store: memory.NewWebhookStore()}
	d, err := webhook.NewDispatcher(st, &webhook.DispatcherOptions{Now: func() time.Time { return d0 },
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var told []string
	d.Subscribe(func(_ context.Context, m webhook.Message) {
		mu.Lock()
		told = append(told, m.Type)
		mu.Unlock()
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	d.Observe(t.Context(), &event.Change{Type: event.KeyRevoked, ID: "c1", At: d0, Account: "acme", Key: "k1", Actor: event.Actor{ID: "k1"}})
	waitQueue(t, d)
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if len(told) != 1 {
		t.Errorf("subscribers told %q of a key.revoked the store took; want it once (stats %+v)", told, d.Stats())
	}
}

// hungStore is a store that does not answer: every method waits for its context.
type hungStore struct{ webhook.Store }

func (hungStore) Endpoints(ctx context.Context, _ string) ([]webhook.Endpoint, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (hungStore) Enqueue(ctx context.Context, _ webhook.Message, _ []string, _ time.Time) (bool, []string, error) {
	<-ctx.Done()
	return false, nil, ctx.Err()
}

// TestReviewRunReturnsWhenStoreHangs: when its context ends, Dispatcher.Run tries every
// message still queued, each for EnqueueTimeout, before it returns: with a store that
// does not answer (the very outage that makes an operator restart the service), a
// full default queue holds the shutdown 4096 x 2 s, over two hours. Here 100 messages
// hold it 200 s.
//
// Fix: bound the whole drain by one deadline (EnqueueTimeout, or a ShutdownTimeout),
// or stop draining at the first failure and count the rest as lost.
func TestReviewRunReturnsWhenStoreHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, err := webhook.NewDispatcher(hungStore{}, &webhook.DispatcherOptions{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 100 {
			d.Observe(context.Background(), call(fmt.Sprintf("acct-%d", i), march, 80))
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		synctest.Wait() // Run waits on the store with the first message
		stopped := time.Now()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Run: %v", err)
		}
		if took := time.Since(stopped); took > 2*webhook.DefaultEnqueueTimeout {
			t.Errorf("Run returned %s after its context ended, with a store that does not answer", took)
		}
	})
}

// TestReviewLongAccountRoutedToItsEndpoints: accounts take ids of up to 64 characters
// (accounts.maxIDLength), up to 256 bytes; NewMessage clips the data's strings to 128
// bytes and sets Message.Account from the clipped one, which the Dispatcher uses to
// find the account's endpoints. The events of an account whose id is longer than 128
// bytes go to the endpoints of another account id (the clipped one, ending "…"), or to
// none; and such an account cannot create an endpoint at all (webhook.MaxID).
//
// Fix: route by the account as given (never clipped), and make webhook.MaxID cover the
// accounts' ids (256 bytes), or bound account ids in bytes.
func TestReviewLongAccountRoutedToItsEndpoints(t *testing.T) {
	long := strings.Repeat("😀", 40) // 40 characters, 160 bytes: a valid account id
	m, ok := webhook.Translate(&event.Change{Type: event.KeyRevoked, ID: "c1", At: d0, Account: long, Key: "k1", Actor: event.Actor{ID: "k1"}})
	if !ok {
		t.Fatal("no message")
	}
	if m.Account != long {
		t.Errorf("the message of account %q (%d bytes) is routed to the account %q", long, len(long), m.Account)
	}
}

// TestReviewChangesWaitOnHungStore: a change's message is enqueued on the goroutine of
// the change, waiting up to EnqueueTimeout (2 s) for the store. With a webhook store
// that does not answer, every change waits its 2 s, one after the other: closing an
// account revokes each of its keys (a key.revoked each), so an account of 100 keys
// takes 200 s to close, on the admin request, because of the webhook store.
//
// Fix: once an enqueue timed out, queue the next changes at once (a breaker on the
// store, reset by Run's first success), or always queue and let Run enqueue.
func TestReviewChangesWaitOnHungStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, err := webhook.NewDispatcher(hungStore{}, &webhook.DispatcherOptions{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		for i := range 100 {
			d.Observe(context.Background(), &event.Change{Type: event.KeyRevoked, ID: fmt.Sprintf("c%d", i), At: began,
				Account: "acme", Key: fmt.Sprintf("key_%d", i), Actor: event.Actor{ID: "operator"}})
		}
		if took := time.Since(began); took > 2*webhook.DefaultEnqueueTimeout {
			t.Errorf("100 changes waited %s on a webhook store that does not answer", took)
		}
	})
}
