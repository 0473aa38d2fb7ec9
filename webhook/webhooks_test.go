package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/brand"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/webhook"
	"github.com/tollgate-dev/tollgate/webhook/signature"
)

var (
	operator = event.Actor{ID: "operator"}
	quiet    = slog.New(slog.NewTextHandler(io.Discard, nil))
)

func TestNewRefuses(t *testing.T) {
	s, bus := memory.NewWebhookStore(), &event.Bus{}
	tests := []struct {
		name  string
		store webhook.Store
		bus   *event.Bus
		opts  *webhook.Options
	}{
		{"no store", nil, bus, nil},
		{"no bus", s, nil, nil},
		{"a threshold out of range", s, bus, &webhook.Options{Dispatcher: webhook.DispatcherOptions{Thresholds: []int{120}}}},
		{"a schedule with a wait of 0", s, bus, &webhook.Options{Deliverer: webhook.DelivererOptions{Schedule: webhook.Schedule{0}}}},
		{"a bad brand", s, bus, &webhook.Options{Brand: brand.Brand{Name: "Acme", Command: "Not A Command", EnvPrefix: "ACME"}}},
		{"a negative cleanup timeout", s, bus, &webhook.Options{CleanupTimeout: -time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if w, err := webhook.New(tt.store, tt.bus, tt.opts); err == nil {
				w.Close()
				t.Fatal("New took it")
			}
		})
	}
	if bus.Wants(event.KeyRotated) || bus.Wants(event.AccountDeleted) {
		t.Error("a refused New left a subscription on the bus")
	}
}

// assembly is what New assembled on a memory store and a bus, running.
type assembly struct {
	t     *testing.T
	store webhook.Store
	bus   *event.Bus
	w     *webhook.Webhooks
	stop  func() error // cancels Run and returns its error
}

// assemble calls New on s (a new memory store if nil) and a new bus, with opts
// completed by a quiet logger, and runs it unless run is false.
func assemble(t *testing.T, s webhook.Store, opts webhook.Options, run bool) *assembly {
	t.Helper()
	if s == nil {
		s = memory.NewWebhookStore()
	}
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	a := &assembly{t: t, store: s, bus: &event.Bus{Logger: quiet}}
	var err error
	if a.w, err = webhook.New(s, a.bus, &opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.w.Close)
	if run {
		a.run()
	}
	return a
}

// run runs the assembly until the test ends or a.stop is called.
func (a *assembly) run() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.w.Run(ctx) }()
	var once sync.Once
	var err error
	a.stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(patience):
				err = errors.New("Run did not return after its context ended")
			}
		})
		return err
	}
	a.t.Cleanup(func() { a.stop() })
}

// endpoint creates an endpoint of account through the Endpoints, as its owner would.
func (a *assembly) endpoint(account, url string, types ...string) webhook.Endpoint {
	a.t.Helper()
	e, err := a.w.Endpoints().Create(a.t.Context(), operator, account, url, types)
	if err != nil {
		a.t.Fatal(err)
	}
	return e
}

// rotated publishes the rotation of a key of account, as the accounts manager does.
func (a *assembly) rotated(account, change string) {
	a.bus.Publish(a.t.Context(), &event.Change{Type: event.KeyRotated, ID: change, At: time.Now(), Actor: operator,
		Account: account, Key: "key_ci"})
}

// verified fails the test unless each request is signed with secret.
func verified(t *testing.T, secret string, rs []request) {
	t.Helper()
	for _, r := range rs {
		if err := signature.Verify(secret, r.header, r.body, time.Now(), 0); err != nil {
			t.Errorf("the delivery of %s is not signed with the endpoint's secret: %v", r.id, err)
		}
	}
}

// TestWebhooksDeliverAtOnce: with a poll of an hour, a message is attempted only if
// something wakes the deliverer; the dispatcher's enqueue, a test message and a resend
// do. AllowPrivate reaches both the endpoints' check (a loopback URL is taken) and the
// deliverer's (a loopback address is dialed); Brand names the user-agent.
func TestWebhooksDeliverAtOnce(t *testing.T) {
	acme := brand.Brand{Name: "Acme", Command: "acme", EnvPrefix: "ACME"}
	a := assemble(t, nil, webhook.Options{AllowPrivate: true, Brand: acme,
		Deliverer: webhook.DelivererOptions{Poll: time.Hour}}, true)
	var told atomic.Int32
	a.w.Dispatcher().Subscribe(func(context.Context, webhook.Message) { told.Add(1) })
	rc := newReceiver(t, ok)
	e := a.endpoint("acme", rc.URL)

	a.rotated("acme", "change-1")
	eventually(t, "the key.rotated delivered", func() bool { return len(rc.got()) == 1 })
	test, err := a.w.Endpoints().SendTest(t.Context(), operator, "acme", e.ID)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the test message delivered", func() bool { return len(rc.got()) == 2 })
	eventually(t, "the test message recorded delivered", func() bool {
		p, err := a.w.Endpoints().Deliveries(t.Context(), "acme", e.ID, webhook.Query{})
		return err == nil && len(p.Deliveries) == 2 && p.Deliveries[0].State == webhook.Delivered && p.Deliveries[1].State == webhook.Delivered
	})
	if _, err := a.w.Endpoints().Resend(t.Context(), "acme", e.ID, test.Message.ID); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the resent message delivered", func() bool { return len(rc.got()) == 3 })

	got := rc.got()
	var types []string
	for _, r := range got {
		var body struct{ Type string }
		if err := json.Unmarshal(r.body, &body); err != nil {
			t.Fatal(err)
		}
		types = append(types, body.Type)
		if r.userAgent != "acme-webhooks/1" {
			t.Errorf("user-agent %q, want the brand's acme-webhooks/1", r.userAgent)
		}
	}
	if want := []string{webhook.KeyRotated, webhook.EndpointTest, webhook.EndpointTest}; !slices.Equal(types, want) {
		t.Errorf("delivered %v, want %v", types, want)
	}
	if got[1].id != test.Message.ID || got[2].id != test.Message.ID {
		t.Errorf("the test message was delivered as %s, then resent as %s; want %s both times", got[1].id, got[2].id, test.Message.ID)
	}
	verified(t, e.Secret, got)
	if n := told.Load(); n != 1 {
		t.Errorf("the dispatcher's subscriber was told of %d messages, want 1 (the key.rotated)", n)
	}
	if err := a.stop(); err != nil {
		t.Errorf("Run returned %v after its context ended, want nil", err)
	}
}

// TestWebhooksAllowPrivateOff: without AllowPrivate, the endpoints refuse a loopback
// URL.
func TestWebhooksAllowPrivateOff(t *testing.T) {
	a := assemble(t, nil, webhook.Options{}, false)
	_, err := a.w.Endpoints().Create(t.Context(), operator, "acme", "http://127.0.0.1:9/hooks", nil)
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Create with a loopback URL: %v, want store.ErrInvalid", err)
	}
}

// TestWebhooksDisabledTellsTheOwner: an endpoint that answers 410 is disabled by the
// deliverer; the Endpoints publish endpoint.disabled with the actor "service"; the
// dispatcher sends it to the owner's other endpoint and to no other account's; the
// host's OnDisabled is told too.
func TestWebhooksDisabledTellsTheOwner(t *testing.T) {
	var hostTold atomic.Int32
	a := assemble(t, nil, webhook.Options{AllowPrivate: true, Deliverer: webhook.DelivererOptions{
		OnDisabled: func(context.Context, webhook.DisabledEndpoint) { hostTold.Add(1) }}}, false)
	var mu sync.Mutex
	var published []event.Change
	a.bus.Subscribe(event.ObserverFunc(func(_ context.Context, e event.Event) {
		mu.Lock()
		defer mu.Unlock()
		published = append(published, *e.(*event.Change))
	}), event.EndpointDisabled)
	a.run()

	gone := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusGone) })
	told := newReceiver(t, ok)
	other := newReceiver(t, ok)
	g := a.endpoint("acme", gone.URL)
	b := a.endpoint("acme", told.URL, webhook.EndpointDisabled)
	a.endpoint("globex", other.URL)

	a.rotated("acme", "change-1")
	eventually(t, "endpoint.disabled delivered to the owner's other endpoint", func() bool { return len(told.got()) == 1 })
	r := told.got()[0]
	verified(t, b.Secret, []request{r})
	var body struct {
		Type string
		Data webhook.EndpointDisabledData
	}
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatal(err)
	}
	if body.Type != webhook.EndpointDisabled || body.Data.Endpoint != g.ID || body.Data.Account != "acme" || body.Data.URL != gone.URL ||
		body.Data.Actor != "service" || body.Data.Reason == "" {
		t.Errorf("the endpoint.disabled delivered: %s", r.body)
	}
	stored, err := a.w.Endpoints().Get(t.Context(), "acme", g.ID)
	if err != nil || stored.Disabled.IsZero() {
		t.Errorf("the endpoint that answered 410: %+v, %v; want it disabled", stored, err)
	}
	if n := hostTold.Load(); n != 1 {
		t.Errorf("the host's OnDisabled was told %d times, want 1", n)
	}
	mu.Lock()
	if len(published) != 1 || published[0].Endpoint != g.ID || published[0].Actor.ID != "service" || published[0].Account != "acme" {
		t.Errorf("published %+v, want one EndpointDisabled of %s by the service", published, g.ID)
	}
	mu.Unlock()
	if a.stop() != nil || len(other.got()) != 0 || len(gone.got()) != 1 {
		t.Errorf("another account's endpoint received %d messages, the disabled one %d attempts; want 0 and 1", len(other.got()), len(gone.got()))
	}
}

// failingStore fails the first n deletions of endpoints.
type failingStore struct {
	*memory.WebhookStore
	fail atomic.Int32
}

func (s *failingStore) DeleteEndpoint(ctx context.Context, id string) error {
	if s.fail.Add(-1) >= 0 {
		return store.ErrUnavailable
	}
	return s.WebhookStore.DeleteEndpoint(ctx, id)
}

// TestWebhooksAccountDeleted: the deletion of an account deletes its endpoints, each
// published as EndpointDeleted by the deletion's actor, and no other account's; when
// the store fails, Run deletes them later.
func TestWebhooksAccountDeleted(t *testing.T) {
	for _, fail := range []int32{0, 1} {
		t.Run(map[int32]string{0: "at once", 1: "after a failure"}[fail], func(t *testing.T) {
			s := &failingStore{WebhookStore: memory.NewWebhookStore()}
			a := assemble(t, s, webhook.Options{AllowPrivate: true}, false)
			webhook.SetCleanupRetry(a.w, 10*time.Millisecond)
			var deleted atomic.Int32
			a.bus.Subscribe(event.ObserverFunc(func(_ context.Context, e event.Event) {
				if c := e.(*event.Change); c.Account == "gone" && c.Actor == operator {
					deleted.Add(1)
				}
			}), event.EndpointDeleted)
			a.endpoint("gone", "https://hooks.example.com/1")
			a.endpoint("gone", "https://hooks.example.com/2")
			kept := a.endpoint("kept", "https://hooks.example.com/3")
			s.fail.Store(fail)

			a.bus.Publish(t.Context(), &event.Change{Type: event.AccountDeleted, ID: "change-9", At: time.Now(), Actor: operator, Account: "gone"})
			if fail > 0 {
				if es, _ := s.Endpoints(t.Context(), "gone"); len(es) != 2 {
					t.Fatalf("the failed deletion left %d endpoints, want 2", len(es))
				}
				a.run()
			}
			eventually(t, "the deleted account's endpoints deleted", func() bool {
				es, err := s.Endpoints(t.Context(), "gone")
				return err == nil && len(es) == 0
			})
			if es, err := s.Endpoints(t.Context(), "kept"); err != nil || len(es) != 1 || es[0].ID != kept.ID {
				t.Errorf("the other account's endpoints: %v, %v", es, err)
			}
			if n := deleted.Load(); n != 2 {
				t.Errorf("%d EndpointDeleted published by the deletion's actor, want 2", n)
			}
		})
	}
}

// TestWebhooksRunAndClose: of two Runs at once, one runs until its context ends and
// returns nil, the other returns ErrRunning at once; Close takes the webhooks off the
// bus.
func TestWebhooksRunAndClose(t *testing.T) {
	a := assemble(t, nil, webhook.Options{}, false)
	for _, k := range append(a.w.Dispatcher().Kinds(), event.AccountDeleted) {
		if !a.bus.Wants(k) {
			t.Errorf("New did not subscribe to %s", k)
		}
	}
	for range 2 { // Run again once it has returned
		ctx, cancel := context.WithCancel(t.Context())
		errs := make(chan error, 2)
		for range 2 {
			go func() { errs <- a.w.Run(ctx) }()
		}
		if err := <-errs; !errors.Is(err, webhook.ErrRunning) {
			t.Errorf("of two Runs, the first to return returned %v, want ErrRunning", err)
		}
		cancel()
		if err := <-errs; err != nil {
			t.Errorf("Run returned %v after its context ended, want nil", err)
		}
	}
	a.w.Close()
	a.w.Close()
	for _, k := range event.Kinds() {
		if a.bus.Wants(k) {
			t.Errorf("after Close, the bus still has a subscriber of %s", k)
		}
	}
}
