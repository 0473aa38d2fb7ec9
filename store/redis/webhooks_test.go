package redis_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/store/redis"
	"github.com/tollgate-dev/tollgate/webhook"
)

// whKey returns the name of a key of the webhook outbox under prefix (see
// lua/lib_wh.lua).
func whKey(prefix, kind string) string { return prefix + ":{~wh}:" + kind }

// newWebhookStorePrefix returns a WebhookStore with the default bound under a fresh
// prefix, and the prefix.
func newWebhookStorePrefix(t *testing.T) (*redis.WebhookStore, string) {
	t.Helper()
	c := client(t)
	prefix := newPrefix(t, c)
	s, err := redis.NewWebhookStore(c, &redis.WebhookOptions{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	return s, prefix
}

// whFixture creates an endpoint and enqueues n messages for it (and for another
// endpoint, every tenth), delivering every third: pending, claimed and finished
// deliveries. It returns the endpoints' ids.
func whFixture(t *testing.T, s *redis.WebhookStore, n int) (string, string) {
	t.Helper()
	ctx := t.Context()
	for _, id := range []string{"ep-a", "ep-b"} {
		_, err := s.CreateEndpoint(ctx, webhook.Endpoint{ID: id, Account: "acme", URL: "https://example.com/", Secret: "whsec_x", Created: testNow})
		must(t, err)
	}
	for i := range n {
		eps := []string{"ep-a"}
		if i%10 == 0 {
			eps = append(eps, "ep-b")
		}
		m := webhook.Message{ID: fmt.Sprintf("msg-%04d", i), Type: "key.rotated", At: testNow.Add(time.Duration(i) * time.Millisecond),
			Body: []byte("{}"), Keep: testNow.Add(time.Hour)}
		_, _, err := s.Enqueue(ctx, m, eps, testNow)
		must(t, err)
	}
	ds, err := s.Claim(ctx, testNow, time.Minute, webhook.MaxClaim)
	must(t, err)
	for i, d := range ds {
		if i%3 == 0 {
			must(t, s.Record(ctx, webhook.Outcome{Endpoint: d.Endpoint, Message: d.Message.ID, Claim: d.Claim,
				State: webhook.Delivered, Attempt: webhook.Attempt{At: testNow.Add(time.Second), Status: 200}}))
		}
	}
	return "ep-a", "ep-b"
}

// wantNoTrace checks that nothing of endpoint ep is left in the outbox's keys.
func wantNoTrace(t *testing.T, c goredis.UniversalClient, prefix, ep string) {
	t.Helper()
	ctx := t.Context()
	for _, kind := range []string{"D", "Q", "F", "L"} {
		var members []string
		var err error
		if kind == "D" {
			members, err = c.HKeys(ctx, whKey(prefix, kind)).Result()
		} else {
			members, err = c.ZRange(ctx, whKey(prefix, kind), 0, -1).Result()
		}
		must(t, err)
		for _, m := range members {
			if strings.Contains(m, ep+"\x00") {
				t.Errorf("%s still holds %q", kind, m)
				break
			}
		}
	}
	for _, kind := range []string{"E", "P"} {
		if ok, err := c.HExists(ctx, whKey(prefix, kind), ep).Result(); err != nil || ok {
			t.Errorf("%s still holds %s (%v)", kind, ep, err)
		}
	}
	if n, err := c.SCard(ctx, whKey(prefix, "X")).Result(); err != nil || n != 0 {
		t.Errorf("X holds %d endpoints being deleted (%v), want none", n, err)
	}
}

// TestWebhookDeleteInBatches deletes an endpoint with more deliveries than one script
// deletes: DeleteEndpoint runs the script until none is left, and leaves no trace of
// the endpoint in any key; the other endpoint's deliveries stay.
func TestWebhookDeleteInBatches(t *testing.T) {
	s, prefix := newWebhookStorePrefix(t)
	ctx := t.Context()
	n := 2*redis.WebhookBatch + 100
	a, b := whFixture(t, s, n)
	must(t, s.DeleteEndpoint(ctx, a))
	wantNoTrace(t, client(t), prefix, a)
	listed := 0
	for q := (webhook.Query{Limit: webhook.MaxLimit}); ; {
		p, err := s.Deliveries(ctx, b, q)
		must(t, err)
		listed += len(p.Deliveries)
		if q.Cursor = p.Next; q.Cursor == "" {
			break
		}
	}
	if want := (n + 9) / 10; listed != want {
		t.Errorf("the other endpoint's deliveries: %d, want %d", listed, want)
	}
	// Every message is remembered until its Keep, then pruned with the other
	// endpoint's finished deliveries.
	fresh, _, err := s.Enqueue(ctx, webhook.Message{ID: "msg-0001", Type: "x", At: testNow}, nil, testNow)
	must(t, err)
	if fresh {
		t.Error("a message whose deliveries were deleted with their endpoint is fresh before its Keep")
	}
	must(t, s.DeleteEndpoint(ctx, b))
	if _, err := s.Prune(ctx, testNow.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"M", "B", "N"} {
		if n, err := client(t).HLen(ctx, whKey(prefix, kind)).Result(); err != nil || n != 0 {
			t.Errorf("%s holds %d messages after the prune (%v), want none", kind, n, err)
		}
	}
	if n, err := client(t).ZCard(ctx, whKey(prefix, "O")).Result(); err != nil || n != 0 {
		t.Errorf("O holds %d messages after the prune (%v), want none", n, err)
	}
}

// TestWebhookDeletionLeftHalfway stops a deletion after its first step, as a caller
// that failed would leave it: the endpoint is out of E and in X, its deliveries are
// there. It is gone for every method, a claim deletes the deliveries it meets instead
// of claiming them, its id cannot be taken again until the deletion ends, and a prune
// (or a DeleteEndpoint again) finishes it.
func TestWebhookDeletionLeftHalfway(t *testing.T) {
	for _, finish := range []string{"Prune", "DeleteEndpoint"} {
		t.Run(finish, func(t *testing.T) {
			s, prefix := newWebhookStorePrefix(t)
			ctx, c := t.Context(), client(t)
			a, b := whFixture(t, s, 30)
			must(t, c.HDel(ctx, whKey(prefix, "E"), a).Err())
			must(t, c.SAdd(ctx, whKey(prefix, "X"), a).Err())

			_, err := s.Endpoint(ctx, a)
			wantIs(t, "Endpoint", err, store.ErrNotFound)
			if p, err := s.Deliveries(ctx, a, webhook.Query{}); err != nil || len(p.Deliveries) != 0 {
				t.Errorf("Deliveries: %d, %v; want none", len(p.Deliveries), err)
			}
			_, err = s.Resend(ctx, a, "msg-0001", testNow)
			wantIs(t, "Resend", err, store.ErrNotFound)
			_, err = s.CreateEndpoint(ctx, webhook.Endpoint{ID: a, URL: "https://example.com/", Created: testNow})
			wantIs(t, "CreateEndpoint of the id being deleted", err, store.ErrConflict)
			fresh, dropped, err := s.Enqueue(ctx, webhook.Message{ID: "new", At: testNow}, []string{a, b}, testNow)
			if err != nil || !fresh || len(dropped) != 1 || dropped[0] != a {
				t.Errorf("Enqueue: %v, %q, %v; want fresh and %s dropped", fresh, dropped, err, a)
			}
			// Past every lease: only b's deliveries are claimed; a's meet their end.
			ds, err := s.Claim(ctx, testNow.Add(time.Hour), time.Minute, webhook.MaxClaim)
			must(t, err)
			for _, d := range ds {
				if d.Endpoint != b {
					t.Errorf("Claim returned a delivery of the endpoint being deleted: %s", d.Message.ID)
				}
			}
			if finish == "Prune" {
				_, err = s.Prune(ctx, testNow)
				must(t, err)
			} else {
				wantIs(t, "DeleteEndpoint again", s.DeleteEndpoint(ctx, a), store.ErrNotFound)
			}
			wantNoTrace(t, c, prefix, a)
			_, err = s.CreateEndpoint(ctx, webhook.Endpoint{ID: a, URL: "https://example.com/", Created: testNow})
			must(t, err)
		})
	}
}

// TestWebhookOptions checks that a WebhookStore refuses a prefix with braces and a bound
// out of range.
func TestWebhookOptions(t *testing.T) {
	c := goredis.NewClient(&goredis.Options{}) // never used: New does not contact Redis
	defer c.Close()
	for _, o := range []redis.WebhookOptions{{Prefix: "a{b"}, {Prefix: "}"}, {MaxPending: -1}, {MaxPending: webhook.MaxPending + 1}} {
		if _, err := redis.NewWebhookStore(c, &o); err == nil {
			t.Errorf("NewWebhookStore(%+v): no error", o)
		}
	}
	if _, err := redis.NewWebhookStore(nil, nil); err == nil {
		t.Error("NewWebhookStore without a client: no error")
	}
}

func wantIs(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: %v, want an error wrapping %v", what, err, target)
	}
}
