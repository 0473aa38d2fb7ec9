package redis_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/idempotency"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/journal"
	"github.com/tollgate-dev/tollgate/store/redis"
	"github.com/tollgate-dev/tollgate/store/storetest"
	"github.com/tollgate-dev/tollgate/webhook"
)

// addr returns the address of the test Redis ($TOLLGATE_TEST_REDIS), or skips the test
// (fails it under CI=true).
func addr(t testing.TB) string {
	t.Helper()
	return testenv.Var(t, testenv.Redis)
}

var shared struct {
	once   sync.Once
	client *goredis.Client
}

// client returns the client the tests share, on the test Redis.
func client(t testing.TB) *goredis.Client {
	t.Helper()
	a := addr(t)
	shared.once.Do(func() { shared.client = newClient(a, nil) })
	return shared.client
}

// newClient returns a client configured as the package documentation recommends;
// adjust may change the options first.
func newClient(addr string, adjust func(*goredis.Options)) *goredis.Client {
	o := &goredis.Options{
		Addr:                  addr,
		PoolSize:              32,
		MinIdleConns:          2,
		DialTimeout:           time.Second,
		ReadTimeout:           2 * time.Second,
		WriteTimeout:          2 * time.Second,
		PoolTimeout:           3 * time.Second,
		ContextTimeoutEnabled: true,
		MaxRetries:            1,
		Protocol:              2,
	}
	if adjust != nil {
		adjust(o)
	}
	return goredis.NewClient(o)
}

// newPrefix returns a fresh key prefix, and deletes every key under it when the test
// ends. The keys of an account begin with the prefix too ("<prefix>:{account}:..."), so
// one SCAN by prefix finds them all.
func newPrefix(t testing.TB, c goredis.UniversalClient) string {
	t.Helper()
	var b [8]byte
	rand.Read(b[:])
	prefix := "tgtest-" + hex.EncodeToString(b[:])
	t.Cleanup(func() { deletePrefix(t, c, prefix) })
	return prefix
}

func deletePrefix(t testing.TB, c goredis.UniversalClient, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	scan := func(ctx context.Context, c goredis.UniversalClient) error {
		it := c.Scan(ctx, 0, prefix+":*", 1000).Iterator()
		var batch []string
		flush := func() error {
			if len(batch) == 0 {
				return nil
			}
			// One key per command: on a cluster the keys of a batch span slots.
			pipe := c.Pipeline()
			for _, k := range batch {
				pipe.Unlink(ctx, k)
			}
			_, err := pipe.Exec(ctx)
			batch = batch[:0]
			return err
		}
		for it.Next(ctx) {
			if batch = append(batch, it.Val()); len(batch) == 500 {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if err := it.Err(); err != nil {
			return err
		}
		return flush()
	}
	var err error
	if cc, ok := c.(*goredis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, n *goredis.Client) error { return scan(ctx, n) })
	} else {
		err = scan(ctx, c)
	}
	if err != nil {
		t.Logf("deleting the keys under %s: %v", prefix, err)
	}
}

// newStore returns a Store on the test Redis under a fresh prefix, on the caller's
// clock (the suites script time), unless opts says otherwise.
func newStore(t testing.TB, opts *redis.Options) *redis.Store {
	t.Helper()
	return newStoreOn(t, client(t), opts)
}

func newStoreOn(t testing.TB, c goredis.UniversalClient, opts *redis.Options) *redis.Store {
	t.Helper()
	s, _ := newStorePrefix(t, c, opts)
	return s
}

// newStorePrefix is newStoreOn, and returns the prefix too.
func newStorePrefix(t testing.TB, c goredis.UniversalClient, opts *redis.Options) (*redis.Store, string) {
	t.Helper()
	prefix := newPrefix(t, c)
	return openStore(t, c, prefix, opts), prefix
}

// openStore returns a Store under a given prefix: another instance of a deployment.
func openStore(t testing.TB, c goredis.UniversalClient, prefix string, opts *redis.Options) *redis.Store {
	t.Helper()
	o := redis.Options{CallerClock: true}
	if opts != nil {
		o = *opts
	}
	o.Prefix = prefix
	s, err := redis.New(c, &o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestStore runs the conformance suites on the Store, in every role it plays: keys,
// credits and limits, their journal of changes and sessions in Redis (see
// storetest.Run); and on its IdempotencyStore and the WebhookStore.
func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) any { return newStore(t, nil) })
	storetest.Run(t, func(t *testing.T) any { return newStore(t, nil).Idempotency() })
	storetest.Run(t, func(t *testing.T) any { return newWebhookStore(t, client(t), storetest.MinPendingBound) })
}

// TestWebhookSweeps runs the sweeps of the webhooks by two instances on a Store and a
// WebhookStore of one Redis.
func TestWebhookSweeps(t *testing.T) {
	storetest.TestWebhookSweeps(t, func(t *testing.T) storetest.SweepStores {
		s := newStore(t, nil)
		return storetest.SweepStores{Keys: s, Ledger: s, Webhooks: newWebhookStore(t, client(t), 0)}
	})
}

// newWebhookStore returns a WebhookStore on c under a fresh prefix, with a bound of
// maxPending pending deliveries per endpoint (0 for the default).
func newWebhookStore(t testing.TB, c goredis.UniversalClient, maxPending int) *redis.WebhookStore {
	t.Helper()
	s, err := redis.NewWebhookStore(c, &redis.WebhookOptions{Prefix: newPrefix(t, c), MaxPending: maxPending})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestWebhooksMaxPending runs the webhook suite at the default bound on an endpoint's
// pending deliveries, webhook.MaxPending, which its rows of the bound fill with 10,000
// writes (TestStore runs it at storetest.MinPendingBound).
func TestWebhooksMaxPending(t *testing.T) {
	testenv.SkipUnlessFull(t, "the webhook suite again, at the default bound of pending deliveries")
	storetest.TestWebhooks(t, func(t *testing.T) webhook.Store { return newWebhookStore(t, client(t), 0) })
}

// TestWebhooksRESP3 runs the webhook suite over RESP3: the bodies and the records
// must come back byte for byte under both protocols.
func TestWebhooksRESP3(t *testing.T) {
	c := newClient(addr(t), func(o *goredis.Options) { o.Protocol = 3 })
	t.Cleanup(func() { c.Close() })
	storetest.TestWebhooks(t, func(t *testing.T) webhook.Store { return newWebhookStore(t, c, storetest.MinPendingBound) })
}

// TestAdmitterRESP3 runs the suite over a client speaking RESP3, go-redis's default,
// since the scripts' answers must decode the same under both protocols.
func TestAdmitterRESP3(t *testing.T) {
	c := newClient(addr(t), func(o *goredis.Options) { o.Protocol = 3 })
	t.Cleanup(func() { c.Close() })
	storetest.TestAdmitter(t, func(t *testing.T) storetest.AdmitterStores {
		s := newStoreOn(t, c, nil)
		return storetest.AdmitterStores{Admitter: s, Keys: s, Ledger: s, Rates: s, Slots: s}
	})
}

// TestAdmitterLimits runs the suite with the Store holding only the limits, the
// composition with keys and money in PostgreSQL.
func TestAdmitterLimits(t *testing.T) {
	client(t)
	storetest.TestAdmitter(t, func(t *testing.T) storetest.AdmitterStores {
		s := newStore(t, nil)
		return storetest.AdmitterStores{Admitter: s, Rates: s, Slots: s}
	})
}

// testNow is the instant of the operations of the tests that are not about expiry: their
// reservations are open for an hour after it.
var testNow = time.Date(2030, time.January, 15, 12, 0, 0, 0, time.UTC)

// TestJournalRESP3 runs the journal's suites over RESP3: the entries' binary changes
// must come back byte for byte under both protocols.
func TestJournalRESP3(t *testing.T) {
	c := newClient(addr(t), func(o *goredis.Options) { o.Protocol = 3 })
	t.Cleanup(func() { c.Close() })
	storetest.TestKeyJournal(t, func(t *testing.T) journal.KeyStore { return newStoreOn(t, c, nil) })
	storetest.TestLedgerJournal(t, func(t *testing.T) journal.Ledger { return newStoreOn(t, c, nil) })
}

// TestIdempotencyStoreRESP3 runs the suite over RESP3: the records' binary fields and
// answers must come back byte for byte under both protocols.
func TestIdempotencyStoreRESP3(t *testing.T) {
	c := newClient(addr(t), func(o *goredis.Options) { o.Protocol = 3 })
	t.Cleanup(func() { c.Close() })
	storetest.TestIdempotencyStore(t, func(t *testing.T) idempotency.Store { return newStoreOn(t, c, nil).Idempotency() })
}
