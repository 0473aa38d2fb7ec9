package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/webhook"
	"github.com/tollgate-dev/tollgate/webhook/signature"
)

// start is when every test clock starts.
var start = time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC)

// holder is the actor of the account holder's changes in these tests.
var holder = event.Actor{ID: "key_holder"}

// changes keeps the changes published on a bus.
type changes struct {
	mu  sync.Mutex
	got []event.Change
}

func (c *changes) Observe(_ context.Context, e event.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, *e.(*event.Change))
}

// take returns the changes published since the last take.
func (c *changes) take() []event.Change {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.got
	c.got = nil
	return out
}

// kinds returns the kinds of cs.
func kinds(cs []event.Change) []event.Kind {
	var out []event.Kind
	for _, c := range cs {
		out = append(out, c.Type)
	}
	return out
}

// endpointsEnv is a manager of endpoints on a memory store, with a clock and the
// changes it published.
type endpointsEnv struct {
	m       *webhook.Endpoints
	store   *memory.WebhookStore
	clock   *testenv.Clock
	changes *changes
}

func newEndpoints(t *testing.T, opts *webhook.EndpointsOptions) *endpointsEnv {
	t.Helper()
	e := &endpointsEnv{store: memory.NewWebhookStore(), clock: testenv.NewClock(start), changes: &changes{}}
	var bus event.Bus
	bus.Subscribe(e.changes, event.EndpointCreated, event.EndpointUpdated, event.EndpointRotated,
		event.EndpointDisabled, event.EndpointEnabled, event.EndpointDeleted)
	if opts == nil {
		opts = &webhook.EndpointsOptions{}
	}
	opts.Now = e.clock.Now
	e.m = webhook.NewEndpoints(e.store, &bus, opts)
	return e
}

// create creates an endpoint of account at url, for every type, or fails the test.
func (e *endpointsEnv) create(t *testing.T, account, url string) webhook.Endpoint {
	t.Helper()
	ep, err := e.m.Create(t.Context(), holder, account, url, nil)
	if err != nil {
		t.Fatalf("create %s for %q: %v", url, account, err)
	}
	return ep
}

// wantError checks that err is a *webhook.Error of the kind, whose message holds each
// of words.
func wantError(t *testing.T, what string, err, kind error, words ...string) {
	t.Helper()
	var we *webhook.Error
	if !errors.As(err, &we) || !errors.Is(err, kind) {
		t.Errorf("%s: %v (%T), want a *webhook.Error of %v", what, err, err, kind)
		return
	}
	for _, w := range words {
		if !strings.Contains(we.Message, w) {
			t.Errorf("%s: %q does not say %q", what, we.Message, w)
		}
	}
}

// TestCreateURLs checks which URLs an endpoint may have: refusals name the field url
// and say what to fix; private hosts are taken with AllowPrivate only.
func TestCreateURLs(t *testing.T) {
	long := "https://example.com/" + strings.Repeat("a", webhook.MaxURLLength-len("https://example.com/")+1)
	for _, tt := range []struct {
		url     string
		private bool   // taken with AllowPrivate
		public  bool   // taken without
		says    string // what the refusal says (without AllowPrivate)
	}{
		{url: "https://example.com/webhooks", public: true, private: true},
		{url: "http://hooks.example.com:8080/in?x=1", public: true, private: true},
		{url: "https://93.184.216.34/in", public: true, private: true},
		{url: "https://[2606:2800:220:1:248:1893:25c8:1946]/in", public: true, private: true},
		{url: "HTTPS://EXAMPLE.COM/", public: true, private: true},
		{url: long[:len(long)-1], public: true, private: true},
		{url: "", says: "url is required"},
		{url: long, says: "at most 2048"},
		{url: "javascript:alert(1)", says: `scheme "javascript"`},
		{url: "ftp://example.com/in", says: `scheme "ftp"`},
		{url: "file:///etc/passwd", says: `scheme "file"`},
		{url: "example.com/in", says: "not absolute"},
		{url: "//example.com/in", says: "not absolute"},
		{url: "https:example.com", says: "no host"},
		{url: "https:///in", says: "no host"},
		{url: "https://user:pass@example.com/in", says: "user name or password"},
		{url: "https://user@example.com/in", says: "user name or password"},
		{url: "https://example.com/in#part", says: "fragment"},
		{url: "https://example.com/in#", says: "fragment"},
		{url: "https://example.com/a b", says: "space"},
		{url: " https://example.com/", says: "space"},
		{url: "https://example.com:0/", says: "port"},
		{url: "https://example.com:99999/", says: "port"},
		{url: "https://2130706433/", says: "neither a name nor an IP address"},
		{url: "https://0x7f.1/", says: "neither a name nor an IP address"},
		{url: "https://127.1/", says: "neither a name nor an IP address"},
		{url: "http://localhost:8080/in", private: true, says: "localhost"},
		{url: "http://LOCALHOST./in", private: true, says: "LOCALHOST."},
		{url: "http://api.localhost/in", private: true, says: "own machine"},
		{url: "http://127.0.0.1/in", private: true, says: "loopback"},
		{url: "http://10.1.2.3/in", private: true, says: "private"},
		{url: "http://192.168.1.1/in", private: true, says: "private"},
		{url: "http://169.254.169.254/latest", private: true, says: "metadata"},
		{url: "http://[::1]:9000/in", private: true, says: "loopback"},
		{url: "http://[fe80::1%25eth0]/in", private: true, says: "link-local"},
		{url: "http://[::ffff:10.0.0.1]/in", private: true, says: "private"},
		{url: "http://0.0.0.0/in", private: true, says: "unspecified"},
	} {
		for _, allow := range []bool{false, true} {
			env := newEndpoints(t, &webhook.EndpointsOptions{AllowPrivate: allow})
			_, err := env.m.Create(t.Context(), holder, "acme", tt.url, nil)
			taken := tt.public || allow && tt.private
			switch {
			case taken && err != nil:
				t.Errorf("%q (AllowPrivate %v): %v, want it taken", tt.url, allow, err)
			case !taken && err == nil:
				t.Errorf("%q (AllowPrivate %v): taken, want it refused", tt.url, allow)
			case !taken:
				wantError(t, tt.url, err, store.ErrInvalid, "url", tt.says)
			}
		}
	}
}

// TestCreateEvents checks the event types an endpoint may name: known ones, sorted and
// without repeats; none for every type.
func TestCreateEvents(t *testing.T) {
	env := newEndpoints(t, nil)
	ctx := t.Context()
	for _, tt := range []struct {
		events []string
		want   []string // nil: refused
		says   string
	}{
		{events: nil, want: []string{}},
		{events: []string{}, want: []string{}},
		{events: []string{webhook.KeyRotated, webhook.CreditsLow, webhook.KeyRotated}, want: []string{webhook.CreditsLow, webhook.KeyRotated}},
		{events: []string{"key.bogus"}, says: `"key.bogus" is not an event type`},
		{events: []string{webhook.EndpointTest}, says: "is not an event type"},
		{events: []string{"KEY.ROTATED"}, says: "is not an event type"},
		{events: make([]string, webhook.MaxTypes+1), says: "is not an event type"},
	} {
		ep, err := env.m.Create(ctx, holder, fmt.Sprint("acct-", len(tt.events)), "https://example.com/in", tt.events)
		if tt.want == nil {
			wantError(t, fmt.Sprint(tt.events), err, store.ErrInvalid, "events", tt.says)
			continue
		}
		if err != nil || fmt.Sprint(ep.Types) != fmt.Sprint(tt.want) && !(len(ep.Types) == 0 && len(tt.want) == 0) {
			t.Errorf("%v: %v %v, want the types %v", tt.events, ep.Types, err, tt.want)
		}
	}
	many := make([]string, webhook.MaxTypes+1)
	for i := range many {
		many[i] = fmt.Sprintf("t%02d.x", i)
	}
	_, err := env.m.Create(ctx, holder, "acme", "https://example.com/in", many)
	wantError(t, "too many types", err, store.ErrInvalid, "events", "at most 64")
}

// TestSecrets checks that a secret is returned in full by Create and RotateSecret only,
// masked everywhere else, and that the rotated-away secret still signs for the grace.
func TestSecrets(t *testing.T) {
	env := newEndpoints(t, nil)
	ctx := t.Context()
	ep := env.create(t, "acme", "https://example.com/in")
	if _, err := signature.ParseSecret(ep.Secret); err != nil || !strings.HasPrefix(ep.ID, "ep_") || len(ep.ID) != 29 {
		t.Fatalf("created %+v: the secret %v; want a whsec_ secret and an ep_ id", ep, err)
	}
	first := ep.Secret
	wantMasked := first[:len("whsec_")+4] + "…"
	if webhook.MaskSecret(first) != wantMasked || webhook.MaskSecret("") != "" || webhook.MaskSecret("nope") != "…" {
		t.Errorf("MaskSecret(%q) = %q", first, webhook.MaskSecret(first))
	}
	list, err := env.m.List(ctx, "acme")
	if err != nil || len(list) != 1 || list[0].Secret != wantMasked {
		t.Fatalf("List: %+v %v, want the secret masked", list, err)
	}
	got, err := env.m.Get(ctx, "acme", ep.ID)
	if err != nil || got.Secret != wantMasked {
		t.Fatalf("Get: %+v %v, want the secret masked", got, err)
	}

	env.clock.Advance(time.Hour)
	rotated, err := env.m.RotateSecret(ctx, holder, "acme", ep.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rotated.Secret == first || !strings.HasPrefix(rotated.Secret, "whsec_") || rotated.PreviousSecret != wantMasked {
		t.Errorf("rotated: secret %q, previous %q; want a new secret in full and the old one masked", rotated.Secret, rotated.PreviousSecret)
	}
	until := start.Add(time.Hour + webhook.DefaultSecretGrace)
	stored, err := env.store.Endpoint(ctx, ep.ID)
	if err != nil || stored.Secret != rotated.Secret || stored.PreviousSecret != first || !stored.PreviousUntil.Equal(until) {
		t.Fatalf("stored after the rotation: %+v %v; want the old secret previous until %v", stored, err, until)
	}
	if s := stored.Secrets(until.Add(-time.Second)); len(s) != 2 {
		t.Errorf("within the grace, %d secrets sign", len(s))
	}
	for _, e := range []webhook.Endpoint{mustGet(t, env, "acme", ep.ID)} {
		if e.Secret == rotated.Secret || e.PreviousSecret != wantMasked || !e.PreviousUntil.Equal(until) {
			t.Errorf("Get within the grace: %+v", e)
		}
	}
	env.clock.Set(until)
	if e := mustGet(t, env, "acme", ep.ID); e.PreviousSecret != "" || !e.PreviousUntil.IsZero() {
		t.Errorf("Get after the grace: %+v, want no previous secret", e)
	}

	// A second rotation drops the first secret at once.
	again, err := env.m.RotateSecret(ctx, holder, "acme", ep.ID)
	if err != nil {
		t.Fatal(err)
	}
	stored, _ = env.store.Endpoint(ctx, ep.ID)
	if stored.PreviousSecret != rotated.Secret || stored.Secret != again.Secret {
		t.Errorf("after a second rotation: %+v", stored)
	}

	// No grace.
	none := newEndpoints(t, &webhook.EndpointsOptions{SecretGrace: -1})
	ep = none.create(t, "acme", "https://example.com/in")
	if _, err := none.m.RotateSecret(ctx, holder, "acme", ep.ID); err != nil {
		t.Fatal(err)
	}
	if stored, _ := none.store.Endpoint(ctx, ep.ID); stored.PreviousSecret != "" || stored.Secret == ep.Secret {
		t.Errorf("with no grace: %+v", stored)
	}
	c := none.changes.take()
	if len(c) != 2 || c[1].Type != event.EndpointRotated || !c[1].Effective.IsZero() {
		t.Errorf("with no grace, the rotation published %+v", c)
	}
}

func mustGet(t *testing.T, env *endpointsEnv, account, id string) webhook.Endpoint {
	t.Helper()
	e, err := env.m.Get(t.Context(), account, id)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestOwners checks that an endpoint is its owner's only: another account's, or the
// operator's, is answered as one that does not exist, by every method.
func TestOwners(t *testing.T) {
	env := newEndpoints(t, nil)
	ctx := t.Context()
	acme := env.create(t, "acme", "https://acme.example/in")
	ops := env.create(t, "", "https://ops.example/in")
	no := false
	for _, tt := range []struct {
		account, id string
	}{{"globex", acme.ID}, {"", acme.ID}, {"acme", ops.ID}, {"acme", "ep_nothing"}} {
		calls := map[string]error{}
		_, calls["Get"] = env.m.Get(ctx, tt.account, tt.id)
		_, calls["Update"] = env.m.Update(ctx, holder, tt.account, tt.id, webhook.EndpointChange{Disabled: &no})
		_, calls["RotateSecret"] = env.m.RotateSecret(ctx, holder, tt.account, tt.id)
		calls["Delete"] = env.m.Delete(ctx, holder, tt.account, tt.id)
		_, calls["SendTest"] = env.m.SendTest(ctx, holder, tt.account, tt.id)
		_, calls["Deliveries"] = env.m.Deliveries(ctx, tt.account, tt.id, webhook.Query{})
		_, calls["Resend"] = env.m.Resend(ctx, tt.account, tt.id, webhook.NewID())
		for name, err := range calls {
			wantError(t, fmt.Sprintf("%s(%q, %s)", name, tt.account, tt.id), err, store.ErrNotFound, "no webhook endpoint with the id")
		}
	}
	for account, want := range map[string]string{"acme": acme.ID, "": ops.ID, "globex": ""} {
		list, err := env.m.List(ctx, account)
		if err != nil || want == "" && len(list) != 0 || want != "" && (len(list) != 1 || list[0].ID != want) {
			t.Errorf("List(%q): %+v %v, want %q", account, list, err, want)
		}
	}
	if n := len(env.changes.take()); n != 2 {
		t.Errorf("%d changes published, want the 2 creations only", n)
	}
	_, err := env.m.Get(ctx, "acme", strings.Repeat("x", webhook.MaxID+1))
	wantError(t, "a long id", err, store.ErrInvalid, "id")
	_, err = env.m.List(ctx, strings.Repeat("x", webhook.MaxID+1))
	wantError(t, "a long account", err, store.ErrInvalid, "account")
}

// TestBound checks that an owner holds at most MaxEndpoints endpoints, with a conflict
// that says to delete one, and that a deletion makes room.
func TestBound(t *testing.T) {
	env := newEndpoints(t, nil)
	ctx := t.Context()
	var first webhook.Endpoint
	for i := range webhook.MaxEndpoints {
		ep := env.create(t, "acme", fmt.Sprintf("https://example.com/%d", i))
		if i == 0 {
			first = ep
		}
	}
	_, err := env.m.Create(ctx, holder, "acme", "https://example.com/more", nil)
	wantError(t, "one more", err, store.ErrConflict, "16", "delete one")
	if !errors.Is(err, webhook.ErrTooManyEndpoints) {
		t.Errorf("%v does not wrap ErrTooManyEndpoints", err)
	}
	env.create(t, "globex", "https://example.com/other") // another account's bound
	if err := env.m.Delete(ctx, holder, "acme", first.ID); err != nil {
		t.Fatal(err)
	}
	env.create(t, "acme", "https://example.com/more")
}

// TestChanges checks what each change publishes: its kind, the endpoint, its URL, the
// actor, the settings before and after, never a secret; and that a change that changes
// nothing publishes nothing.
func TestChanges(t *testing.T) {
	env := newEndpoints(t, nil)
	ctx := t.Context()
	ep, err := env.m.Create(ctx, holder, "acme", "https://example.com/in", []string{webhook.KeyRotated})
	if err != nil {
		t.Fatal(err)
	}
	yes, no := true, false
	url2 := "https://example.com/v2"
	every := []string{}
	steps := []struct {
		name   string
		do     func() error
		want   []event.Kind
		reason string
	}{
		{"update the url", func() error {
			_, err := env.m.Update(ctx, holder, "acme", ep.ID, webhook.EndpointChange{URL: &url2})
			return err
		}, []event.Kind{event.EndpointUpdated}, ""},
		{"the same url again", func() error {
			_, err := env.m.Update(ctx, holder, "acme", ep.ID, webhook.EndpointChange{URL: &url2})
			return err
		}, nil, ""},
		{"every type, and disable", func() error {
			_, err := env.m.Update(ctx, holder, "acme", ep.ID, webhook.EndpointChange{Events: &every, Disabled: &yes, Reason: "maintenance"})
			return err
		}, []event.Kind{event.EndpointUpdated, event.EndpointDisabled}, "maintenance"},
		{"disable again", func() error {
			_, err := env.m.Update(ctx, holder, "acme", ep.ID, webhook.EndpointChange{Disabled: &yes, Reason: "other"})
			return err
		}, nil, ""},
		{"enable", func() error {
			_, err := env.m.Update(ctx, holder, "acme", ep.ID, webhook.EndpointChange{Disabled: &no})
			return err
		}, []event.Kind{event.EndpointEnabled}, ""},
		{"rotate", func() error {
			_, err := env.m.RotateSecret(ctx, holder, "acme", ep.ID)
			return err
		}, []event.Kind{event.EndpointRotated}, ""},
		{"disabled by the service", func() error {
			env.m.Disabled(ctx, webhook.DisabledEndpoint{Endpoint: ep.ID, Account: ep.Account, URL: ep.URL,
				Reason: "the deliveries failed for 3 days", Cause: webhook.DisabledFailing})
			return nil
		}, []event.Kind{event.EndpointDisabled}, "the deliveries failed for 3 days"},
		{"delete", func() error { return env.m.Delete(ctx, holder, "acme", ep.ID) }, []event.Kind{event.EndpointDeleted}, ""},
	}
	if c := env.changes.take(); len(c) != 1 || c[0].Type != event.EndpointCreated || string(c[0].After) != `{"url":"https://example.com/in","events":["key.rotated"]}` {
		t.Fatalf("the creation published %+v", c)
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		got := env.changes.take()
		if fmt.Sprint(kinds(got)) != fmt.Sprint(s.want) {
			t.Errorf("%s: published %v, want %v", s.name, kinds(got), s.want)
		}
		for _, c := range got {
			b, _ := json.Marshal(c)
			wantActor := holder.ID
			if s.name == "disabled by the service" {
				wantActor = audit.Service
			}
			switch {
			case c.Account != "acme" || c.Endpoint != ep.ID || c.Actor.ID != wantActor || c.ID == "" || !c.At.Equal(start):
				t.Errorf("%s: %+v", s.name, c)
			case strings.Contains(string(b), "whsec_"):
				t.Errorf("%s: the change holds a secret: %s", s.name, b)
			case c.Type == event.EndpointDisabled && c.Reason != s.reason:
				t.Errorf("%s: reason %q, want %q", s.name, c.Reason, s.reason)
			}
		}
		if s.name == "update the url" {
			if c := got[0]; string(c.Before) != `{"url":"https://example.com/in","events":["key.rotated"]}` ||
				string(c.After) != `{"url":"https://example.com/v2","events":["key.rotated"]}` || c.URL != url2 {
				t.Errorf("the update published %s -> %s at %s", c.Before, c.After, c.URL)
			}
		}
	}
	_, err = env.m.Update(ctx, holder, "acme", ep.ID, webhook.EndpointChange{})
	wantError(t, "an empty change", err, store.ErrInvalid, "changes nothing")
	_, err = env.m.Update(ctx, holder, "acme", ep.ID, webhook.EndpointChange{Disabled: &yes, Reason: "a\nb"})
	wantError(t, "a reason with a line break", err, store.ErrInvalid, "reason")
}

// TestDisabledKeepsReason checks the disabled endpoint as its owner sees it, and that
// disabling it again keeps the first reason.
func TestDisabledKeepsReason(t *testing.T) {
	env := newEndpoints(t, nil)
	ctx := t.Context()
	ep := env.create(t, "acme", "https://example.com/in")
	yes := true
	if _, err := env.m.Update(ctx, holder, "acme", ep.ID, webhook.EndpointChange{Disabled: &yes}); err != nil {
		t.Fatal(err)
	}
	env.clock.Advance(time.Minute)
	got, err := env.m.Update(ctx, holder, "acme", ep.ID, webhook.EndpointChange{Disabled: &yes, Reason: "again"})
	if err != nil || !got.Disabled.Equal(start) || got.DisabledReason != "disabled on request" {
		t.Errorf("disabled twice: %+v %v", got, err)
	}
}

// TestSendTest checks that a test message is enqueued for the endpoint it names only,
// of the type endpoint.test, whatever the endpoint's types, and that a disabled
// endpoint is refused one.
func TestSendTest(t *testing.T) {
	env := newEndpoints(t, nil)
	ctx := t.Context()
	ep, err := env.m.Create(ctx, holder, "acme", "https://example.com/in", []string{webhook.KeyRevoked})
	if err != nil {
		t.Fatal(err)
	}
	other := env.create(t, "acme", "https://example.com/other")
	env.create(t, "", "https://ops.example/in")
	d, err := env.m.SendTest(ctx, holder, "acme", ep.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.Endpoint != ep.ID || d.State != webhook.Pending || d.Message.Type != webhook.EndpointTest || !webhook.IsID(d.Message.ID) {
		t.Errorf("the test's delivery: %+v", d)
	}
	claimed, err := env.store.Claim(ctx, start, time.Minute, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(claimed) != 1 || claimed[0].Endpoint != ep.ID || claimed[0].Message.ID != d.Message.ID {
		t.Fatalf("claimed %+v, want the test's delivery to its endpoint only", claimed)
	}
	var body struct {
		Type string
		Data struct{ ID, Account, Actor, Endpoint string }
	}
	if err := json.Unmarshal(claimed[0].Message.Body, &body); err != nil {
		t.Fatal(err)
	}
	if body.Type != "endpoint.test" || body.Data.ID != d.Message.ID || body.Data.Account != "acme" || body.Data.Endpoint != ep.ID || body.Data.Actor != holder.ID {
		t.Errorf("the test's body: %s", claimed[0].Message.Body)
	}
	if page, err := env.m.Deliveries(ctx, "acme", other.ID, webhook.Query{}); err != nil || len(page.Deliveries) != 0 {
		t.Errorf("the other endpoint's deliveries: %+v %v", page, err)
	}
	if len(env.changes.take()) != 3 {
		t.Error("a test published a change")
	}

	yes := true
	if _, err := env.m.Update(ctx, holder, "acme", other.ID, webhook.EndpointChange{Disabled: &yes}); err != nil {
		t.Fatal(err)
	}
	_, err = env.m.SendTest(ctx, holder, "acme", other.ID)
	wantError(t, "a test of a disabled endpoint", err, store.ErrConflict, "disabled", "enable it")
}

// TestResend checks that a resend makes a delivery pending again, due now, whatever
// its state, and refuses a message the endpoint has no delivery of.
func TestResend(t *testing.T) {
	env := newEndpoints(t, nil)
	ctx := t.Context()
	ep := env.create(t, "acme", "https://example.com/in")
	d, err := env.m.SendTest(ctx, holder, "acme", ep.ID)
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := env.store.Claim(ctx, start, time.Minute, 10)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	err = env.store.Record(ctx, webhook.Outcome{Endpoint: ep.ID, Message: d.Message.ID, Claim: claimed[0].Claim,
		Attempt: webhook.Attempt{At: start, Status: 500, Error: "the receiver answered 500"}, State: webhook.Failed})
	if err != nil {
		t.Fatal(err)
	}
	page, err := env.m.Deliveries(ctx, "acme", ep.ID, webhook.Query{Limit: 5})
	if err != nil || len(page.Deliveries) != 1 || page.Deliveries[0].State != webhook.Failed {
		t.Fatalf("deliveries: %+v %v", page, err)
	}
	env.clock.Advance(time.Hour)
	again, err := env.m.Resend(ctx, "acme", ep.ID, d.Message.ID)
	if err != nil || again.State != webhook.Pending || !again.Due.Equal(start.Add(time.Hour)) {
		t.Fatalf("resend: %+v %v", again, err)
	}
	_, err = env.m.Resend(ctx, "acme", ep.ID, webhook.NewID())
	wantError(t, "a message it never had", err, store.ErrNotFound, "no delivery of the message")
	_, err = env.m.Resend(ctx, "acme", ep.ID, "")
	wantError(t, "no message", err, store.ErrInvalid, "message_id")
	_, err = env.m.Deliveries(ctx, "acme", ep.ID, webhook.Query{Limit: webhook.MaxLimit + 1})
	wantError(t, "a limit too high", err, store.ErrInvalid, "limit")
	_, err = env.m.Deliveries(ctx, "acme", ep.ID, webhook.Query{Cursor: "bogus"})
	wantError(t, "a bad cursor", err, store.ErrInvalid, "cursor")
}

// failing is a store that is out of reach.
type failing struct{ webhook.Store }

func (failing) Endpoint(context.Context, string) (webhook.Endpoint, error) {
	return webhook.Endpoint{}, fmt.Errorf("connection refused: %w", store.ErrUnavailable)
}

func (failing) CreateEndpoint(context.Context, webhook.Endpoint) (webhook.Endpoint, error) {
	return webhook.Endpoint{}, fmt.Errorf("connection refused: %w", store.ErrUnavailable)
}

// TestUnavailable checks that a store out of reach is answered with an error of
// store.ErrUnavailable whose message names no store, and logged.
func TestUnavailable(t *testing.T) {
	logs := &testenv.Logs{}
	m := webhook.NewEndpoints(failing{memory.NewWebhookStore()}, nil, &webhook.EndpointsOptions{Logger: logs.Logger()})
	_, err := m.Get(t.Context(), "acme", "ep_x")
	wantError(t, "Get", err, store.ErrUnavailable, "try again")
	_, err = m.Create(t.Context(), holder, "acme", "https://example.com/in", nil)
	wantError(t, "Create", err, store.ErrUnavailable, "try again")
	if strings.Contains(err.Error(), "connection refused") {
		t.Errorf("the message names the store's failure: %v", err)
	}
	if !strings.Contains(logs.String(), "connection refused") {
		t.Errorf("the failure was not logged: %s", logs)
	}
}
