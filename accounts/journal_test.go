package accounts_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/journal"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/webhook"
)

// journaledKinds are the kinds of the changes a Manager stores with their journal entry.
var journaledKinds = []event.Kind{event.AccountCreated, event.KeyCreated, event.KeyRotated, event.KeyUpdated,
	event.KeyRevoked, event.CreditsAdjusted, event.PlanChanged, event.AccountSuspended, event.AccountReactivated,
	event.AccountClosed, event.AccountDeleted}

// everything returns the entries of the journals, every one that no claim holds at
// now: it claims them for a nanosecond after now+nth nanoseconds, so that the next
// call, with a later nth, finds them again, and a relay that runs later is not kept
// from them.
func everything(t *testing.T, now time.Time, nth int, journals ...journal.Store) []journal.Entry {
	t.Helper()
	far := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	var all []journal.Entry
	for _, j := range journals {
		es, err := j.Claim(context.Background(), far, now.Add(time.Duration(nth)), time.Nanosecond, journal.MaxClaim)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, es...)
	}
	return all
}

// TestJournalRecordsEveryChange checks that every change the Manager stores is in the
// journal of its store while it is published (recorded with the write, as published:
// the same change, field for field), and that the journals are empty once it has been
// published.
func TestJournalRecordsEveryChange(t *testing.T) {
	clock := testenv.NewClock(time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC))
	keys, ledger := memory.NewKeyStore(), memory.NewLedger(nil)
	var (
		mu      sync.Mutex
		checked []event.Kind
		nth     int
	)
	check := event.ObserverFunc(func(_ context.Context, e event.Event) {
		c := e.(*event.Change)
		mu.Lock()
		defer mu.Unlock()
		nth++
		es := everything(t, clock.Now(), nth, keys, ledger)
		i := slices.IndexFunc(es, func(e journal.Entry) bool { return e.ID == c.ID })
		if i < 0 {
			t.Errorf("%s %s is published, and not in the journal", c.Type, c.ID)
			return
		}
		got, err := journal.Decode(es[i])
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(*got, *c) {
			t.Errorf("%s: the journal holds\n%+v\nand the bus published\n%+v", c.Type, *got, *c)
		}
		checked = append(checked, c.Type)
	})
	plans, err := billing.NewPlans(billing.Plan{Name: "basic", Credits: 100}, billing.Plan{Name: "pro", Credits: 1000})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := tollgate.New(&catalog.Registry{}, tollgate.Stores{Keys: keys, Ledger: ledger, Rates: memory.NewRateLimiter(),
		Slots: memory.NewConcurrencyLimiter()}, plans, &tollgate.Options{Now: clock.Now, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	svc.Events().Subscribe(check, journaledKinds...)
	mgr, err := accounts.New(svc, &accounts.Options{RelayInterval: -1, ClosedRetention: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mgr.Close)

	ctx := context.Background()
	_, _, _, err = mgr.CreateAccount(ctx, accounts.Spec{ID: "acct", Plan: "basic"})
	must(t, err)
	k, _, err := mgr.CreateKey(ctx, "acct", accounts.NewKey{Name: "ci"})
	must(t, err)
	name := "deploys"
	_, err = mgr.UpdateKey(ctx, k.ID, accounts.KeyChange{Name: &name})
	must(t, err)
	_, _, err = mgr.RotateKey(ctx, k.ID)
	must(t, err)
	_, err = mgr.RevokeKey(ctx, k.ID)
	must(t, err)
	_, err = mgr.AdjustCredits(ctx, "acct", 50, "goodwill", &accounts.CreditOptions{IdempotencyKey: "order-1"})
	must(t, err)
	_, err = mgr.AdjustCredits(ctx, "acct", 50, "goodwill", &accounts.CreditOptions{IdempotencyKey: "order-1"}) // its replay
	must(t, err)
	_, err = mgr.AdjustCredits(ctx, "acct", -10, "correction", nil)
	must(t, err)
	_, err = mgr.ChangePlan(ctx, "acct", "pro", accounts.EffectiveNow)
	must(t, err)
	_, err = mgr.SuspendAccount(ctx, "acct", "overdue")
	must(t, err)
	_, err = mgr.ReactivateAccount(ctx, "acct", "paid")
	must(t, err)
	_, err = mgr.CloseAccount(ctx, "acct", "asked")
	must(t, err)
	must(t, mgr.DeleteAccount(ctx, "acct"))

	want := []event.Kind{event.AccountCreated, event.KeyCreated, event.KeyUpdated, event.KeyRotated, event.KeyRevoked,
		event.CreditsAdjusted, event.CreditsAdjusted, event.CreditsAdjusted, event.PlanChanged, event.AccountSuspended,
		event.AccountReactivated, event.AccountClosed, event.KeyRevoked, event.AccountDeleted}
	if !slices.Equal(checked, want) {
		t.Errorf("checked %v, want %v", checked, want)
	}
	if es := everything(t, clock.Now(), 1000, keys, ledger); len(es) != 0 {
		t.Errorf("the journals hold %d entries once every change was published, want none", len(es))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// deployment is the shared state of instances of one service: memory stores, the
// webhook outbox, the audit log's store and the clock.
type deployment struct {
	keys    *memory.KeyStore
	ledger  *memory.Ledger
	hooks   *memory.WebhookStore
	auditDB *memory.AuditStore
	clock   *testenv.Clock
	plans   *billing.Plans
	// decorate, if set, decorates the key store and the ledger of each instance.
	decorate func(auth.KeyStore, driver.Ledger) (auth.KeyStore, driver.Ledger)
}

func newDeployment(t *testing.T) *deployment {
	t.Helper()
	plans, err := billing.NewPlans(billing.Plan{Name: "basic", Credits: 100}, billing.Plan{Name: "pro", Credits: 1000})
	if err != nil {
		t.Fatal(err)
	}
	d := &deployment{keys: memory.NewKeyStore(), ledger: memory.NewLedger(nil), hooks: memory.NewWebhookStore(),
		auditDB: memory.NewAuditStore(), clock: testenv.NewClock(time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC)), plans: plans}
	// The operator's endpoint, which receives every account's events.
	if _, err := d.hooks.CreateEndpoint(t.Context(), webhook.Endpoint{ID: "ep_000000000000000000000000op", URL: "https://hooks.example.com/op",
		Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", Created: d.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	return d
}

// An instance is one instance of the deployment's service: its own Service, bus and
// Manager, with the audit log and the webhook dispatcher subscribed, after first, if
// it is given.
type instance struct {
	svc        *tollgate.Service
	mgr        *accounts.Manager
	log        *audit.Log
	dispatcher *webhook.Dispatcher
}

func (d *deployment) instance(t *testing.T, first event.Observer) *instance {
	t.Helper()
	return d.instanceOn(t, first, d.auditDB)
}

// instanceOn is instance with an audit log on auditDB.
func (d *deployment) instanceOn(t *testing.T, first event.Observer, auditDB audit.Store) *instance {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	var keys auth.KeyStore = d.keys
	var ledger driver.Ledger = d.ledger
	if d.decorate != nil {
		keys, ledger = d.decorate(keys, ledger)
	}
	svc, err := tollgate.New(&catalog.Registry{}, tollgate.Stores{Keys: keys, Ledger: ledger, Rates: memory.NewRateLimiter(),
		Slots: memory.NewConcurrencyLimiter()}, d.plans, &tollgate.Options{Now: d.clock.Now, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	if first != nil {
		svc.Events().Subscribe(first, journaledKinds...)
	}
	log := audit.NewLog(auditDB, &audit.LogOptions{Now: d.clock.Now, Logger: quiet})
	t.Cleanup(log.Close)
	svc.Events().Subscribe(log, log.Kinds()...)
	dispatcher, err := webhook.NewDispatcher(d.hooks, &webhook.DispatcherOptions{Now: d.clock.Now, Logger: quiet, Plans: d.plans})
	if err != nil {
		t.Fatal(err)
	}
	svc.Events().Subscribe(dispatcher, dispatcher.Kinds()...)
	mgr, err := accounts.New(svc, &accounts.Options{Audit: auditDB, RelayInterval: -1, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mgr.Close)
	return &instance{svc: svc, mgr: mgr, log: log, dispatcher: dispatcher}
}

// dying is an observer that kills the goroutine that publishes a change, once armed:
// the change is stored, and none of the observers subscribed after it hears of it, as
// when the instance is killed between the store's commit and the publication.
type dying struct{ armed atomic.Bool }

func (d *dying) Observe(context.Context, event.Event) {
	if d.armed.CompareAndSwap(true, false) {
		runtime.Goexit()
	}
}

// messages returns the types of the messages in the outbox, for the operator's
// endpoint, sorted.
func (d *deployment) messages(t *testing.T) []string {
	t.Helper()
	page, err := d.hooks.Deliveries(t.Context(), "ep_000000000000000000000000op", webhook.Query{Limit: webhook.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, dl := range page.Deliveries {
		types = append(types, dl.Message.Type)
	}
	slices.Sort(types)
	return types
}

// actions returns the actions of the audit log of account acct, oldest first.
func (d *deployment) actions(t *testing.T, acct string) []string {
	t.Helper()
	page, err := d.auditDB.List(t.Context(), audit.Query{Account: acct, Limit: audit.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range slices.Backward(page.Entries) {
		out = append(out, string(e.Action))
	}
	return out
}

// TestJournalCrash checks that a change stored by an instance that dies before it
// publishes it (the goroutine that made it ends right after the store's commit) is
// published by the relay of another instance once the grace has passed: its webhook is
// enqueued once, its audit entry appended once, however often it is published again.
func TestJournalCrash(t *testing.T) {
	for _, tc := range []struct {
		name    string
		change  func(ctx context.Context, m *accounts.Manager, key auth.Key) error
		message string       // the webhook's type; "" for none
		action  audit.Action // the audit entry's
	}{
		{"account created", func(ctx context.Context, m *accounts.Manager, _ auth.Key) error {
			_, _, _, err := m.CreateAccount(ctx, accounts.Spec{ID: "other", Plan: "basic"})
			return err
		}, webhook.KeyCreated, audit.AccountCreate},
		{"key created", func(ctx context.Context, m *accounts.Manager, _ auth.Key) error {
			_, _, err := m.CreateKey(ctx, "acct", accounts.NewKey{Name: "deploys"})
			return err
		}, webhook.KeyCreated, audit.KeyCreate},
		{"key rotated", func(ctx context.Context, m *accounts.Manager, k auth.Key) error {
			_, _, err := m.RotateKey(ctx, k.ID)
			return err
		}, webhook.KeyRotated, audit.KeyRotate},
		{"key updated", func(ctx context.Context, m *accounts.Manager, k auth.Key) error {
			name := "renamed"
			_, err := m.UpdateKey(ctx, k.ID, accounts.KeyChange{Name: &name})
			return err
		}, webhook.KeyUpdated, audit.KeyUpdate},
		{"key revoked", func(ctx context.Context, m *accounts.Manager, k auth.Key) error {
			_, err := m.RevokeKey(ctx, k.ID)
			return err
		}, webhook.KeyRevoked, audit.KeyRevoke},
		{"credits granted", func(ctx context.Context, m *accounts.Manager, _ auth.Key) error {
			_, err := m.AdjustCredits(ctx, "acct", 500, "order 1042", nil)
			return err
		}, webhook.CreditsGranted, audit.CreditsAdjust},
		{"plan changed", func(ctx context.Context, m *accounts.Manager, _ auth.Key) error {
			_, err := m.ChangePlan(ctx, "acct", "pro", accounts.EffectiveNow)
			return err
		}, webhook.PlanChanged, audit.PlanChange},
		{"account suspended", func(ctx context.Context, m *accounts.Manager, _ auth.Key) error {
			_, err := m.SuspendAccount(ctx, "acct", "overdue")
			return err
		}, webhook.AccountSuspended, audit.AccountSuspend},
		{"account closed", func(ctx context.Context, m *accounts.Manager, _ auth.Key) error {
			_, err := m.CloseAccount(ctx, "acct", "asked")
			return err
		}, webhook.AccountClosed, audit.AccountClose},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDeployment(t)
			kill := &dying{}
			dies, survives := d.instance(t, kill), d.instance(t, nil)
			ctx := context.Background()
			if _, _, _, err := survives.mgr.CreateAccount(ctx, accounts.Spec{ID: "acct", Plan: "basic"}); err != nil {
				t.Fatal(err)
			}
			k, _, err := survives.mgr.CreateKey(ctx, "acct", accounts.NewKey{Name: "ci"})
			if err != nil {
				t.Fatal(err)
			}
			acct := "acct"
			if tc.name == "account created" {
				acct = "other"
			}
			messages, actions := d.messages(t), d.actions(t, acct)

			// The instance that makes the change dies once it is stored.
			kill.armed.Store(true)
			done := make(chan error, 1)
			go func() {
				defer close(done)
				done <- tc.change(ctx, dies.mgr, k)
			}()
			if err, returned := <-done; returned {
				t.Fatalf("the change returned (%v): the instance did not die before publishing it", err)
			}
			if got := d.messages(t); !slices.Equal(got, messages) {
				t.Fatalf("the outbox holds %q before the relay, want only %q: the change was published", got, messages)
			}

			// Within the grace, the other instance leaves it to the one that made it.
			d.clock.Advance(59 * time.Second)
			if n, err := survives.mgr.RelayJournal(ctx); n != 0 || err != nil {
				t.Fatalf("a relay within the grace published %d (%v)", n, err)
			}
			d.clock.Advance(2 * time.Second)
			if n, err := survives.mgr.RelayJournal(ctx); n != 1 || err != nil {
				t.Fatalf("the relay after the grace published %d (%v), want the change", n, err)
			}
			wantMessages := append(slices.Clone(messages), tc.message)
			slices.Sort(wantMessages)
			if got := d.messages(t); !slices.Equal(got, wantMessages) {
				t.Errorf("the outbox after the relay holds %q, want %q", got, wantMessages)
			}
			wantActions := append(slices.Clone(actions), string(tc.action))
			if got := d.actions(t, acct); !slices.Equal(got, wantActions) {
				t.Errorf("the audit log after the relay holds %q, want %q", got, wantActions)
			}
			if es := everything(t, d.clock.Now(), 1, d.keys, d.ledger); len(es) != 0 {
				t.Errorf("the journals hold %d entries after the relay, want none", len(es))
			}

			// Published again (a relay that died before its removal, another
			// instance's): stored once.
			if n, err := dies.mgr.RelayJournal(ctx); n != 0 || err != nil {
				t.Errorf("a second relay published %d (%v), want none", n, err)
			}
			if s := survives.dispatcher.Stats(); s.Enqueued == 0 {
				t.Errorf("the dispatcher's stats %+v: the message was not enqueued by it", s)
			}
			if got := d.messages(t); !slices.Equal(got, wantMessages) {
				t.Errorf("the outbox after a second relay holds %q, want %q", got, wantMessages)
			}
		})
	}
}

// Decorators of the tests that count the rotations made through them and hide the
// store's journal (they embed the interfaces, not the stores' types), with or without
// Unwrap.
type (
	countedKeys struct {
		auth.KeyStore
		writes *atomic.Int64
	}
	countedLedger   struct{ driver.Ledger }
	unwrappedKeys   struct{ countedKeys }
	unwrappedLedger struct{ countedLedger }
)

func (k countedKeys) RotateKey(ctx context.Context, id string, rev int64, h auth.Hash, at time.Time) (auth.Key, error) {
	k.writes.Add(1)
	return k.KeyStore.RotateKey(ctx, id, rev, h, at)
}

func (k unwrappedKeys) Unwrap() any   { return k.KeyStore }
func (l unwrappedLedger) Unwrap() any { return l.Ledger }

// TestJournalThroughDecorators checks that a decorator that passes its writes'
// contexts on and says what it decorates (driver.Wrapper) keeps the journal of the
// store it decorates: its writes are made through it, and what an instance that died
// stored is relayed; and that one that does not say it hides the journal: the change
// is published as without one, and lost with its instance.
func TestJournalThroughDecorators(t *testing.T) {
	for _, unwraps := range []bool{true, false} {
		t.Run(fmt.Sprintf("unwraps=%v", unwraps), func(t *testing.T) {
			var writes atomic.Int64
			d := newDeployment(t)
			d.decorate = func(k auth.KeyStore, l driver.Ledger) (auth.KeyStore, driver.Ledger) {
				ck, cl := countedKeys{k, &writes}, countedLedger{l}
				if unwraps {
					return unwrappedKeys{ck}, unwrappedLedger{cl}
				}
				return ck, cl
			}
			kill := &dying{}
			dies, survives := d.instance(t, kill), d.instance(t, nil)
			ctx := context.Background()
			if _, _, _, err := survives.mgr.CreateAccount(ctx, accounts.Spec{ID: "acct", Plan: "basic"}); err != nil {
				t.Fatal(err)
			}
			k, _, err := survives.mgr.CreateKey(ctx, "acct", accounts.NewKey{Name: "ci"})
			if err != nil {
				t.Fatal(err)
			}
			kill.armed.Store(true)
			done := make(chan struct{})
			go func() {
				defer close(done)
				dies.mgr.RotateKey(ctx, k.ID)
			}()
			<-done
			d.clock.Advance(2 * time.Minute)
			n, err := survives.mgr.RelayJournal(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want := int64(0)
			if unwraps {
				want = 1
			}
			if n != want {
				t.Errorf("the relay published %d changes, want %d", n, want)
			}
			if writes.Load() == 0 {
				t.Error("the rotation did not go through the decorator")
			}
		})
	}
}

// TestJournalRepublishedOnce checks that a change published again with its ID, as a
// relay does, is enqueued and recorded once: the outbox and the audit log dedup it.
func TestJournalRepublishedOnce(t *testing.T) {
	d := newDeployment(t)
	a, b := d.instance(t, nil), d.instance(t, nil)
	ctx := context.Background()
	if _, _, _, err := a.mgr.CreateAccount(ctx, accounts.Spec{ID: "acct", Plan: "basic"}); err != nil {
		t.Fatal(err)
	}
	var published *event.Change
	a.svc.Events().Subscribe(event.ObserverFunc(func(_ context.Context, e event.Event) {
		c := *e.(*event.Change)
		published = &c
	}), event.CreditsAdjusted)
	if _, err := a.mgr.AdjustCredits(ctx, "acct", 5, "goodwill", nil); err != nil {
		t.Fatal(err)
	}
	messages, actions := d.messages(t), d.actions(t, "acct")
	again := *published
	b.svc.Events().Publish(ctx, &again)
	if got := d.messages(t); !slices.Equal(got, messages) {
		t.Errorf("the outbox after the change was published again holds %q, want %q", got, messages)
	}
	if got := d.actions(t, "acct"); !slices.Equal(got, actions) {
		t.Errorf("the audit log after the change was published again holds %q, want %q", got, actions)
	}
	if again.Deferred() {
		t.Error("a change the stores had already was deferred")
	}
}

// flakyAuditStore is an audit store that fails while down.
type flakyAuditStore struct {
	*memory.AuditStore
	down atomic.Bool
}

func (s *flakyAuditStore) Append(ctx context.Context, entries ...audit.Entry) error {
	if s.down.Load() {
		return errDown
	}
	return s.AuditStore.Append(ctx, entries...)
}

var errDown = errors.New("the audit store is down")

// TestJournalAuditOutage checks that a change whose audit entry could not be stored
// (the audit log queued it) stays in the journal, and that once the audit log is back,
// the relay publishes it again and removes it, and the log holds it once.
func TestJournalAuditOutage(t *testing.T) {
	d := newDeployment(t)
	flaky := &flakyAuditStore{AuditStore: d.auditDB}
	i := d.instanceOn(t, nil, flaky)
	mgr, log := i.mgr, i.log
	ctx := context.Background()
	if _, _, _, err := mgr.CreateAccount(ctx, accounts.Spec{ID: "acct", Plan: "basic"}); err != nil {
		t.Fatal(err)
	}

	flaky.down.Store(true)
	if _, err := mgr.SuspendAccount(ctx, "acct", "overdue"); err != nil {
		t.Fatal(err)
	}
	if es := everything(t, d.clock.Now(), 1, d.keys); len(es) != 1 {
		t.Fatalf("the journal holds %d entries while the audit log is down, want the suspension", len(es))
	}
	flaky.down.Store(false)
	log.Close() // its last attempt stores the queued entry
	d.clock.Advance(2 * time.Minute)
	if n, err := mgr.RelayJournal(ctx); n != 1 || err != nil {
		t.Fatalf("the relay published %d (%v), want the suspension again", n, err)
	}
	if got := d.actions(t, "acct"); !slices.Equal(got, []string{string(audit.AccountCreate), string(audit.AccountSuspend)}) {
		t.Errorf("the audit log holds %q, want the creation and the suspension, once", got)
	}
	if es := everything(t, d.clock.Now(), 2, d.keys); len(es) != 0 {
		t.Errorf("the journal holds %d entries after the relay, want none", len(es))
	}
}
