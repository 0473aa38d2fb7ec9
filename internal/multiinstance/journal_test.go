package multiinstance_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	changes "github.com/tollgate-dev/tollgate/journal" // journal names a helper of process_grants_test.go
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/store/postgres"
	"github.com/tollgate-dev/tollgate/store/redis"
	"github.com/tollgate-dev/tollgate/webhook"
)

// The tests of this file kill an instance between storing a change of management and
// publishing it, and check that another instance's relay of the journal (package
// journal) publishes it: its webhook is delivered once, its audit entry written once.
// They run on every deployment whose key store and ledger keep a journal: memory,
// PostgreSQL (directly and behind PgBouncer), PostgreSQL with the limits in Redis, and
// Redis.

// journalDeployment is a deployment with the shared stores of the audit log and the
// webhook outbox.
type journalDeployment struct {
	deployment
	// outbox returns the audit store and the webhook store of one more instance.
	outbox func(t *testing.T) (audit.Store, webhook.Store)
}

func journalDeployments() []journalDeployment {
	memAudit, memHooks := sync.OnceValue(memory.NewAuditStore), sync.OnceValue(memory.NewWebhookStore)
	memoryOutbox := func(*testing.T) (audit.Store, webhook.Store) { return memAudit(), memHooks() }
	withRedis, onlyRedis := perTest(directly, true), perTest(noPostgres, true)
	return []journalDeployment{
		{memoryShared(), memoryOutbox},
		onPostgresJournal("postgres", perTest(directly, false)),
		onPostgresJournal("postgres-pgbouncer", perTest(throughPgBouncer, false)),
		{deployment{name: "redis+postgres", stores: func(t *testing.T) tollgate.Stores {
			s, r := withRedis(t).pg.store(t), withRedis(t).rd.store(t)
			return tollgate.Stores{Keys: s, Ledger: s, Rates: r, Slots: r}
		}}, pgOutbox(withRedis)},
		onRedisJournal("redis", onlyRedis),
	}
}

// onRedisJournal keeps everything in the Redis prefix of the test's targets but the
// audit log, in memory, one per test.
func onRedisJournal(name string, tg func(*testing.T) targets) journalDeployment {
	var mu sync.Mutex
	audits := map[*testing.T]audit.Store{}
	return journalDeployment{deployment{name: name, stores: func(t *testing.T) tollgate.Stores {
		s := tg(t).rd.store(t)
		return tollgate.Stores{Keys: s, Ledger: s, Rates: s, Slots: s}
	}}, func(t *testing.T) (audit.Store, webhook.Store) {
		mu.Lock()
		a, ok := audits[t]
		if !ok {
			a = memory.NewAuditStore()
			audits[t] = a
		}
		mu.Unlock()
		rd := tg(t).rd
		w, err := redis.NewWebhookStore(testenv.RedisClient(t, rd.addr), &redis.WebhookOptions{Prefix: rd.prefix})
		if err != nil {
			t.Fatal(err)
		}
		return a, w
	}}
}

// onPostgresJournal keeps everything in the PostgreSQL schema of the test's targets.
func onPostgresJournal(name string, tg func(*testing.T) targets) journalDeployment {
	return journalDeployment{deployment{name: name, stores: func(t *testing.T) tollgate.Stores {
		s := tg(t).pg.store(t)
		return tollgate.Stores{Keys: s, Ledger: s, Rates: s, Slots: s}
	}}, pgOutbox(tg)}
}

// pgOutbox keeps the audit log and the webhooks in the PostgreSQL schema of the test's
// targets.
func pgOutbox(tg func(*testing.T) targets) func(*testing.T) (audit.Store, webhook.Store) {
	return func(t *testing.T) (audit.Store, webhook.Store) {
		pool := tg(t).pg.pool(t, 4)
		a, err := postgres.NewAuditStore(pool)
		if err != nil {
			t.Fatal(err)
		}
		w, err := postgres.NewWebhookStore(pool, nil)
		if err != nil {
			t.Fatal(err)
		}
		return a, w
	}
}

// receiver is a webhook endpoint's receiver: it counts the deliveries of each message.
type receiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	got map[string]int // webhook-id -> deliveries
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{got: map[string]int{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		io.Copy(io.Discard, req.Body)
		r.mu.Lock()
		r.got[req.Header.Get("webhook-id")]++
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) count(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got[id]
}

// journalInstance is an instance with its audit log, its webhooks (running) and the
// manager of its accounts, whose relay runs when the test says.
type journalInstance struct {
	svc *tollgate.Service
	mgr *accounts.Manager
}

// startJournalInstance starts an instance of d, with first subscribed to the changes
// before the audit log and the webhooks.
func startJournalInstance(t *testing.T, d journalDeployment, clock *testenv.Clock, first event.Observer) *journalInstance {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	svc, err := tollgate.New(&catalog.Registry{}, d.stores(t), plans, &tollgate.Options{Now: clock.Now, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	if first != nil {
		svc.Events().Subscribe(first)
	}
	auditDB, hooks := d.outbox(t)
	log := audit.NewLog(auditDB, &audit.LogOptions{Now: clock.Now, Logger: quiet})
	t.Cleanup(log.Close)
	svc.Events().Subscribe(log, log.Kinds()...)
	w, err := webhook.New(hooks, svc.Events(), &webhook.Options{AllowPrivate: true, Now: clock.Now, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; w.Close() })
	mgr, err := accounts.New(svc, &accounts.Options{Audit: auditDB, RelayInterval: -1, Logger: quiet,
		Relay: &changes.RelayOptions{Grace: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mgr.Close)
	return &journalInstance{svc: svc, mgr: mgr}
}

// rotationsTo makes an endpoint that sends the key rotations to rcv, and an account
// acct with a key to rotate.
func (i *journalInstance) rotationsTo(t *testing.T, hooks webhook.Store, rcv *receiver, clock *testenv.Clock, acct string) (webhook.Endpoint, auth.Key) {
	t.Helper()
	ctx := context.Background()
	ep, err := hooks.CreateEndpoint(ctx, webhook.Endpoint{ID: "ep_" + strings.Repeat("j", 26), URL: rcv.srv.URL,
		Types: []string{webhook.KeyRotated}, Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", Created: clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := i.mgr.CreateAccount(ctx, accounts.Spec{ID: acct, Plan: "open"}); err != nil {
		t.Fatal(err)
	}
	key, _, err := i.mgr.CreateKey(ctx, acct, accounts.NewKey{Name: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	return ep, key
}

// dyingObserver ends the goroutine that publishes a change, once armed: the change is
// stored and nobody hears of it, as when the instance is killed between the store's
// commit and the publication.
type dyingObserver struct{ armed atomic.Bool }

func (d *dyingObserver) Observe(context.Context, event.Event) {
	if d.armed.CompareAndSwap(true, false) {
		runtime.Goexit()
	}
}

// capturing is an observer that keeps the last change it was told of.
type capturing struct {
	mu   sync.Mutex
	last event.Change
}

func (c *capturing) Observe(_ context.Context, e event.Event) {
	if ch, ok := e.(*event.Change); ok {
		c.mu.Lock()
		c.last = *ch
		c.mu.Unlock()
	}
}

// TestJournalKilledInstance: an instance that dies between storing a key's rotation and
// publishing it leaves the rotation in the journal; another instance's relay publishes
// it once the grace has passed, and the receiver of the operator's endpoint gets its
// key.rotated once, however many relays run, and the audit log holds it once.
func TestJournalKilledInstance(t *testing.T) {
	for _, d := range journalDeployments() {
		t.Run(d.name, func(t *testing.T) {
			clock := testenv.NewClock(time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC))
			dies := &dyingObserver{}
			a := startJournalInstance(t, d, clock, dies)
			relayed := &capturing{}
			b := startJournalInstance(t, d, clock, relayed)
			c := startJournalInstance(t, d, clock, nil)
			rcv := newReceiver(t)
			ctx := context.Background()
			_, hooks := d.outbox(t)
			acct := "journaled"
			ep, key := b.rotationsTo(t, hooks, rcv, clock, acct)

			dies.armed.Store(true)
			done := make(chan struct{})
			go func() {
				defer close(done)
				a.mgr.RotateKey(ctx, key.ID)
				t.Error("the rotation returned: the instance did not die before publishing it")
			}()
			<-done
			if k, err := b.mgr.Service().Stores().Keys.Key(ctx, key.ID); err != nil || k.RotatedAt.IsZero() {
				t.Fatalf("the key after the dead instance's rotation: %+v, %v; want it rotated", k, err)
			}

			// The relays of b and c, at once, after the grace.
			clock.Advance(time.Minute + time.Second)
			var wg sync.WaitGroup
			var published atomic.Int64
			for _, i := range []*journalInstance{b, c} {
				wg.Go(func() {
					n, err := i.mgr.RelayJournal(ctx)
					if err != nil {
						t.Errorf("RelayJournal: %v", err)
					}
					published.Add(n)
				})
			}
			wg.Wait()
			if n := published.Load(); n != 1 {
				t.Fatalf("the relays published %d changes, want the rotation once", n)
			}
			relayed.mu.Lock()
			rotation := relayed.last
			relayed.mu.Unlock()
			var id string
			if rotation.Type == event.KeyRotated {
				m, _ := webhook.Translate(&rotation)
				id = m.ID
			} else { // c relayed it: its message is found in the outbox
				id = messageOf(t, hooks, ep.ID)
			}

			waitDelivered(t, hooks, ep.ID)
			// Published again, by every instance's relay and by hand: nothing more.
			for _, i := range []*journalInstance{a, b, c} {
				if n, err := i.mgr.RelayJournal(ctx); n != 0 || err != nil {
					t.Errorf("a later relay published %d (%v)", n, err)
				}
			}
			if rotation.Type == event.KeyRotated {
				again := rotation
				c.svc.Events().Publish(ctx, &again)
			}
			if n := rcv.count(id); n != 1 {
				t.Errorf("the receiver got key.rotated %s %d times, want once", id, n)
			}
			page, err := hooks.Deliveries(ctx, ep.ID, webhook.Query{})
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Deliveries) != 1 || page.Deliveries[0].Message.ID != id || page.Deliveries[0].State != webhook.Delivered {
				t.Errorf("the endpoint's deliveries: %+v; want one, of %s, delivered", page.Deliveries, id)
			}
			auditDB, _ := d.outbox(t)
			entries, err := auditDB.List(ctx, audit.Query{Account: acct})
			if err != nil {
				t.Fatal(err)
			}
			rotations := slices.DeleteFunc(entries.Entries, func(e audit.Entry) bool { return e.Action != audit.KeyRotate })
			if len(rotations) != 1 {
				t.Errorf("the audit log holds %d rotations, want one", len(rotations))
			}
		})
	}
}

// waitDelivered waits, 30 seconds at most, until the endpoint's one delivery is
// recorded delivered: its attempt answered and its outcome stored.
func waitDelivered(t *testing.T, hooks webhook.Store, endpoint string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		page, err := hooks.Deliveries(context.Background(), endpoint, webhook.Query{})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Deliveries) == 1 && page.Deliveries[0].State == webhook.Delivered {
			return
		}
	}
	t.Fatal("the endpoint's delivery was not delivered within 30 seconds")
}

// messageOf returns the ID of the one message in the outbox for the endpoint.
func messageOf(t *testing.T, hooks webhook.Store, endpoint string) string {
	t.Helper()
	page, err := hooks.Deliveries(context.Background(), endpoint, webhook.Query{})
	if err != nil || len(page.Deliveries) != 1 {
		t.Fatalf("the endpoint's deliveries: %+v, %v; want one", page.Deliveries, err)
	}
	return page.Deliveries[0].Message.ID
}

// The child process of TestJournalSIGKILL: an instance on the PostgreSQL schema or the
// Redis prefix its environment names, which rotates a key and kills itself with
// SIGKILL once the rotation is stored, before anyone hears of it.
const (
	childEnv  = "TOLLGATE_JOURNAL_CHILD"  // the key to rotate
	schemaEnv = "TOLLGATE_JOURNAL_SCHEMA" // the schema
	prefixEnv = "TOLLGATE_JOURNAL_PREFIX" // the prefix, for Redis
)

// TestJournalChild is the child process of TestJournalSIGKILL; it does nothing unless
// that test started it.
func TestJournalChild(t *testing.T) {
	keyID := os.Getenv(childEnv)
	if keyID == "" {
		return
	}
	var stores tollgate.Stores
	if prefix := os.Getenv(prefixEnv); prefix != "" {
		s := redisTarget{addr: testenv.Var(t, testenv.Redis), prefix: prefix}.store(t)
		stores = tollgate.Stores{Keys: s, Ledger: s, Rates: s, Slots: s}
	} else {
		pool := testenv.PostgresPool(t, testenv.Var(t, testenv.Postgres), os.Getenv(schemaEnv), 4)
		s, err := postgres.New(pool, nil)
		if err != nil {
			t.Fatal(err)
		}
		stores = tollgate.Stores{Keys: s, Ledger: s, Rates: s, Slots: s}
	}
	svc, err := tollgate.New(&catalog.Registry{}, stores, plans, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc.Events().Subscribe(event.ObserverFunc(func(context.Context, event.Event) {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal ends the process
	}), event.KeyRotated)
	mgr, err := accounts.New(svc, &accounts.Options{RelayInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = mgr.RotateKey(context.Background(), keyID)
	t.Fatalf("the rotation returned (%v): the process was not killed", err)
}

// TestJournalSIGKILL: a process killed with SIGKILL right after it stored a key's
// rotation, before it published it, leaves the rotation in the journal (PostgreSQL's,
// Redis's); an instance's relay publishes it, and the receiver gets its key.rotated
// once.
func TestJournalSIGKILL(t *testing.T) {
	for _, tc := range []struct {
		name string
		tg   func(*testing.T) targets
		d    func(func(*testing.T) targets) journalDeployment
		env  func(targets) string // the child's store
	}{
		{"postgres", perTest(directly, false), func(tg func(*testing.T) targets) journalDeployment {
			return onPostgresJournal("postgres", tg)
		}, func(tg targets) string { return schemaEnv + "=" + tg.pg.schema }},
		{"redis", perTest(noPostgres, true), func(tg func(*testing.T) targets) journalDeployment {
			return onRedisJournal("redis", tg)
		}, func(tg targets) string { return prefixEnv + "=" + tg.rd.prefix }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.d(tc.tg)
			clock := testenv.NewClock(time.Now().UTC().Truncate(time.Second))
			b := startJournalInstance(t, d, clock, nil)
			rcv := newReceiver(t)
			ctx := context.Background()
			_, hooks := d.outbox(t)
			ep, key := b.rotationsTo(t, hooks, rcv, clock, "killed")

			cmd := exec.Command(os.Args[0], "-test.run=^TestJournalChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), childEnv+"="+key.ID, tc.env(tc.tg(t)))
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("the child process ended with %v, not killed by SIGKILL:\n%s", err, out)
			}
			if k, err := b.mgr.Service().Stores().Keys.Key(ctx, key.ID); err != nil || k.RotatedAt.IsZero() {
				t.Fatalf("the key after the killed process's rotation: %+v, %v; want it rotated", k, err)
			}
			if page, err := hooks.Deliveries(ctx, ep.ID, webhook.Query{}); err != nil || len(page.Deliveries) != 0 {
				t.Fatalf("the outbox before the relay: %+v, %v; want nothing (the process died before publishing)", page.Deliveries, err)
			}

			// The child's clock is the machine's: the grace has passed on it too.
			clock.Set(time.Now().Add(time.Minute + time.Second))
			if n, err := b.mgr.RelayJournal(ctx); n != 1 || err != nil {
				t.Fatalf("the relay published %d (%v), want the rotation", n, err)
			}
			id := messageOf(t, hooks, ep.ID)
			waitDelivered(t, hooks, ep.ID)
			if n, err := b.mgr.RelayJournal(ctx); n != 0 || err != nil {
				t.Errorf("a second relay published %d (%v)", n, err)
			}
			if n := rcv.count(id); n != 1 {
				t.Errorf("the receiver got the rotation %d times, want once", n)
			}
		})
	}
}
