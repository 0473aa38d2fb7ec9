package webhook_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/webhook"
	"github.com/tollgate-dev/tollgate/webhook/signature"
)

// epoch is when every test of the deliverer starts, on its fake clock.
var epoch = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// patience bounds every wait for the deliverers to do something. It is long: the
// tests never assert how long anything takes.
const patience = 30 * time.Second

// eventually waits until cond holds, and fails the test if it does not within
// patience.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// secret returns a secret of the Standard Webhooks form, made of b.
func secret(b byte) string {
	return "whsec_" + base64.StdEncoding.EncodeToString([]byte(strings.Repeat(string(rune('a'+b%26)), 32)))
}

// sign returns the signature of the scheme: "v1," and the base64 HMAC-SHA256 of
// id.timestamp.body with the secret. It is computed here again, apart from the
// package's, so that the test checks the scheme and not the package against itself.
func sign(t *testing.T, secret, id, timestamp string, body []byte) string {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		t.Fatal(err)
	}
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%s.", id, timestamp)
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// fixture is a memory store, a fake clock, and what the tests build on them.
type fixture struct {
	t     *testing.T
	store *memory.WebhookStore
	// counted is the store the deliverers are given: it counts their claims.
	counted *countingStore
	clock   *testenv.Clock
	n       atomic.Int32 // for IDs
}

func newFixture(t *testing.T) *fixture {
	s := memory.NewWebhookStore()
	return &fixture{t: t, store: s, counted: &countingStore{Store: s}, clock: testenv.NewClock(epoch)}
}

// polls waits until the deliverers have claimed n more times: they have looked at
// the outbox at the clock's time, and done what was due.
func (f *fixture) polls(n int32) {
	f.t.Helper()
	until := f.counted.claims.Load() + n
	eventually(f.t, "claims", func() bool { return f.counted.claims.Load() >= until })
}

// id returns an ID of the form the service makes: prefix, "_" and 26 characters
// of lower-case base32.
func (f *fixture) id(prefix string) string {
	return fmt.Sprintf("%s_%026d", prefix, f.n.Add(1))
}

// endpoint stores an endpoint posting to url.
func (f *fixture) endpoint(url string) webhook.Endpoint {
	f.t.Helper()
	e, err := f.store.CreateEndpoint(context.Background(), webhook.Endpoint{
		ID: f.id("ep"), Account: "acct_1", URL: url, Secret: secret(byte(f.n.Load())), Created: f.clock.Now(),
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return e
}

// message returns a new message, made at the clock's time.
func (f *fixture) message() webhook.Message {
	now := f.clock.Now()
	id := f.id("msg")
	return webhook.Message{ID: id, Type: "key.rotated", Account: "acct_1", At: now, Keep: now.Add(time.Hour),
		Body: fmt.Appendf(nil, `{"type":"key.rotated","timestamp":%q,"data":{"key":"key_1","n":%q}}`, now.Format(time.RFC3339), id)}
}

// enqueue enqueues a new message for the endpoints, at the clock's time.
func (f *fixture) enqueue(endpoints ...webhook.Endpoint) webhook.Message {
	f.t.Helper()
	return f.put(f.message(), endpoints...)
}

// put enqueues m for the endpoints, at the clock's time.
func (f *fixture) put(m webhook.Message, endpoints ...webhook.Endpoint) webhook.Message {
	f.t.Helper()
	now := f.clock.Now()
	var ids []string
	for _, e := range endpoints {
		ids = append(ids, e.ID)
	}
	if _, dropped, err := f.store.Enqueue(context.Background(), m, ids, now); err != nil || len(dropped) > 0 {
		f.t.Fatalf("enqueue: %v, dropped %v", err, dropped)
	}
	return m
}

// delivery returns the delivery of m to e.
func (f *fixture) delivery(e webhook.Endpoint, m webhook.Message) webhook.Delivery {
	f.t.Helper()
	page, err := f.store.Deliveries(context.Background(), e.ID, webhook.Query{Limit: webhook.MaxLimit})
	if err != nil {
		f.t.Fatal(err)
	}
	for _, d := range page.Deliveries {
		if d.Message.ID == m.ID {
			return d
		}
	}
	f.t.Fatalf("no delivery of %s to %s", m.ID, e.ID)
	return webhook.Delivery{}
}

// waitState waits until the delivery of m to e is in state after attempts attempts,
// and returns it.
func (f *fixture) waitState(e webhook.Endpoint, m webhook.Message, state webhook.State, attempts int) webhook.Delivery {
	f.t.Helper()
	var d webhook.Delivery
	deadline := time.Now().Add(patience)
	for d = f.delivery(e, m); d.State != state || d.Attempts != attempts; d = f.delivery(e, m) {
		if time.Now().After(deadline) {
			f.t.Fatalf("gave up waiting for delivery of %s %s after %d attempts: it is %s after %d, due %s (the clock at %s), last %+v",
				m.ID, state, attempts, d.State, d.Attempts, d.Due, f.clock.Now(), d.Last)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return d
}

// options returns the options of a test's deliverer: loopback allowed, the fake
// clock, no jitter, a quick poll, and a schedule of seconds.
func (f *fixture) options() *webhook.DelivererOptions {
	return &webhook.DelivererOptions{
		AllowPrivate: true,
		Now:          f.clock.Now,
		Jitter:       -1,
		Poll:         2 * time.Millisecond,
		Schedule:     webhook.Schedule{time.Second, 2 * time.Second, 3 * time.Second},
		Logger:       slog.New(slog.DiscardHandler),
	}
}

// run runs a deliverer of the fixture's store with opts until the test ends, or
// until the returned stop is called; stop waits for Run to return.
func (f *fixture) run(opts *webhook.DelivererOptions) (*webhook.Deliverer, func()) {
	d, err := webhook.NewDeliverer(f.counted, opts)
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				f.t.Errorf("Run: %v", err)
			}
		})
	}
	f.t.Cleanup(stop)
	return d, stop
}

// A request is what a receiver was sent.
type request struct {
	id, timestamp, signature, contentType, userAgent string
	header                                           http.Header
	body                                             []byte
}

// A receiver is an HTTP server on loopback that answers each request with
// answer(n, r), n counting its requests from 1, and keeps what it was sent.
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	requests []request
	inFlight map[string]int // by webhook-id
	overlap  atomic.Int32   // requests that came while one of the same id was in flight
}

func newReceiver(t *testing.T, answer func(n int, w http.ResponseWriter, r *http.Request)) *receiver {
	rc := &receiver{inFlight: make(map[string]int)}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id := r.Header.Get("webhook-id")
		rc.mu.Lock()
		rc.requests = append(rc.requests, request{id: id, timestamp: r.Header.Get("webhook-timestamp"),
			signature: r.Header.Get("webhook-signature"), contentType: r.Header.Get("content-type"),
			userAgent: r.UserAgent(), header: r.Header.Clone(), body: body})
		n := len(rc.requests)
		rc.inFlight[id]++
		if rc.inFlight[id] > 1 {
			rc.overlap.Add(1)
		}
		rc.mu.Unlock()
		defer func() {
			rc.mu.Lock()
			rc.inFlight[id]--
			rc.mu.Unlock()
		}()
		answer(n, w, r)
	}))
	t.Cleanup(rc.Close)
	return rc
}

// got returns the requests received so far.
func (rc *receiver) got() []request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.requests)
}

func ok(int, http.ResponseWriter, *http.Request) {}

// newPickyReceiver returns a receiver that answers 500 but to the messages whose IDs
// are in good.
func newPickyReceiver(t *testing.T) (good *sync.Map, rc *receiver) {
	good = new(sync.Map)
	return good, newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if _, ok := good.Load(r.Header.Get("webhook-id")); !ok {
			w.WriteHeader(500)
		}
	})
}

func TestDeliveredFirstTime(t *testing.T) {
	f := newFixture(t)
	rc := newReceiver(t, ok)
	plain := f.endpoint(rc.URL + "/plain")
	rotated := f.endpoint(rc.URL + "/rotated")
	rotated.PreviousSecret, rotated.PreviousUntil = rotated.Secret, epoch.Add(time.Hour)
	rotated.Secret = secret(99)
	rotated, err := f.store.UpdateEndpoint(context.Background(), rotated)
	if err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(90 * time.Second) // the attempt's time is not the message's
	m := f.enqueue(plain, rotated)
	d, _ := f.run(f.options())

	for _, e := range []webhook.Endpoint{plain, rotated} {
		got := f.waitState(e, m, webhook.Delivered, 1)
		if got.Last.At != f.clock.Now() || got.Last.Status != 200 || got.Last.Error != "" {
			t.Errorf("%s: last attempt %+v", e.URL, got.Last)
		}
	}
	reqs := rc.got()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	ts := strconv.FormatInt(f.clock.Now().Unix(), 10)
	for _, r := range reqs {
		if r.id != m.ID || r.timestamp != ts || r.contentType != "application/json" ||
			r.userAgent != "tollgate-webhooks/1" || string(r.body) != string(m.Body) {
			t.Errorf("request %+v", r)
		}
		want := []string{sign(t, plain.Secret, m.ID, ts, m.Body)}
		if r.signature != want[0] {
			want = []string{sign(t, rotated.Secret, m.ID, ts, m.Body), sign(t, rotated.PreviousSecret, m.ID, ts, m.Body)}
		}
		if r.signature != strings.Join(want, " ") {
			t.Errorf("signature %q, want %q", r.signature, want)
		}
		// And the package's verifier takes it, with each secret of the endpoint.
		secrets := []string{plain.Secret}
		if len(want) == 2 {
			secrets = []string{rotated.Secret, rotated.PreviousSecret}
		}
		for _, s := range secrets {
			if err := signature.Verify(s, r.header, r.body, f.clock.Now(), 0); err != nil {
				t.Errorf("Verify: %v", err)
			}
		}
	}
	if s := d.Stats(); s.Attempted != 2 || s.Delivered != 2 || s.Retried+s.Failed+s.ClaimLost+s.StoreErrors != 0 {
		t.Errorf("stats %+v", s)
	}
}

// TestRetriedUntilDelivered has a receiver fail the first n attempts: it gets the
// message n+1 times, with the same webhook-id and each attempt's timestamp, each
// attempt due the schedule's wait after the one before.
func TestRetriedUntilDelivered(t *testing.T) {
	failures := []struct {
		name   string
		answer func(w http.ResponseWriter)
		status int
		text   string // in the attempt's error
	}{
		{"500", func(w http.ResponseWriter) { http.Error(w, "database down", 500) }, 500, "the endpoint answered 500 Internal Server Error: database down"},
		{"404", func(w http.ResponseWriter) { w.WriteHeader(404) }, 404, "the endpoint answered 404 Not Found"},
		{"unknown status", func(w http.ResponseWriter) { w.WriteHeader(599) }, 599, "the endpoint answered 599"},
		{"no answer", func(w http.ResponseWriter) { panic(http.ErrAbortHandler) }, 0, "the connection to the endpoint failed"},
	}
	for _, fail := range failures {
		for _, n := range []int{0, 1, 3} {
			t.Run(fmt.Sprintf("%s %d", fail.name, n), func(t *testing.T) {
				f := newFixture(t)
				rc := newReceiver(t, func(i int, w http.ResponseWriter, r *http.Request) {
					if i <= n {
						fail.answer(w)
					}
				})
				e := f.endpoint(rc.URL)
				m := f.enqueue(e)
				opts := f.options()
				// Waits past the cooldown of a host that did not answer.
				opts.Schedule = webhook.Schedule{30 * time.Second, time.Minute, 90 * time.Second}
				d, _ := f.run(opts)
				for i := 1; i <= n; i++ {
					got := f.waitState(e, m, webhook.Pending, i)
					wait, _ := opts.Schedule.Wait(i)
					if got.Due != f.clock.Now().Add(wait) || got.Last.Status != fail.status || !strings.HasPrefix(got.Last.Error, fail.text) {
						t.Fatalf("after attempt %d: due %s (want %s), last %+v", i, got.Due, f.clock.Now().Add(wait), got.Last)
					}
					f.clock.Advance(wait)
				}
				f.waitState(e, m, webhook.Delivered, n+1)
				reqs := rc.got()
				if len(reqs) != n+1 {
					t.Fatalf("%d requests, want %d", len(reqs), n+1)
				}
				var at time.Time
				for i, r := range reqs {
					if i > 0 {
						wait, _ := opts.Schedule.Wait(i)
						at = at.Add(wait)
					} else {
						at = epoch
					}
					if r.id != m.ID || r.timestamp != strconv.FormatInt(at.Unix(), 10) {
						t.Errorf("request %d: id %s, timestamp %s; want %s, %d", i+1, r.id, r.timestamp, m.ID, at.Unix())
					}
				}
				if s := d.Stats(); s.Attempted != int64(n+1) || s.Retried != int64(n) || s.Delivered != 1 {
					t.Errorf("stats %+v", s)
				}
			})
		}
	}
}

func TestRetryAfter(t *testing.T) {
	const maxRA = 3 * time.Hour
	tests := []struct {
		name   string
		status int
		header func(at time.Time) string
		want   time.Duration // the wait before the second attempt
	}{
		{"503 seconds", 503, func(time.Time) string { return "120" }, 2 * time.Minute},
		{"429 seconds", 429, func(time.Time) string { return "600" }, 10 * time.Minute},
		{"429 date", 429, func(at time.Time) string { return at.Add(time.Hour).Format(http.TimeFormat) }, time.Hour},
		{"sooner than the schedule", 503, func(time.Time) string { return "0" }, time.Second},
		{"past the cap", 503, func(time.Time) string { return "86400" }, maxRA},
		{"on a 500", 500, func(time.Time) string { return "120" }, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
				if n == 1 {
					w.Header().Set("Retry-After", tt.header(f.clock.Now()))
					w.WriteHeader(tt.status)
				}
			})
			e := f.endpoint(rc.URL)
			m := f.enqueue(e)
			opts := f.options()
			opts.MaxRetryAfter = maxRA
			f.run(opts)
			got := f.waitState(e, m, webhook.Pending, 1)
			if got.Due != epoch.Add(tt.want) {
				t.Fatalf("due %s after the first attempt, want %s", got.Due.Sub(epoch), tt.want)
			}
			f.clock.Advance(tt.want - time.Millisecond)
			f.polls(3) // not due yet: the claims take nothing
			if n := len(rc.got()); n != 1 {
				t.Fatalf("%d requests before the retry was due", n)
			}
			f.clock.Advance(time.Millisecond)
			f.waitState(e, m, webhook.Delivered, 2)
		})
	}
}

// TestGoneDisables: a 410 fails the delivery and disables the endpoint at once; a
// delivery to it claimed after is failed without an attempt, which is not counted.
func TestGoneDisables(t *testing.T) {
	f := newFixture(t)
	rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusGone) })
	e := f.endpoint(rc.URL)
	other := f.endpoint(rc.URL + "/other")
	var told []webhook.DisabledEndpoint
	var mu sync.Mutex
	opts := f.options()
	opts.OnDisabled = func(ctx context.Context, d webhook.DisabledEndpoint) {
		mu.Lock()
		defer mu.Unlock()
		told = append(told, d)
	}
	m := f.enqueue(e)
	d, _ := f.run(opts)
	got := f.waitState(e, m, webhook.Failed, 1)
	if got.Last.Status != 410 {
		t.Errorf("last attempt %+v", got.Last)
	}
	eventually(t, "OnDisabled", func() bool { mu.Lock(); defer mu.Unlock(); return len(told) == 1 })
	stored, err := f.store.Endpoint(context.Background(), e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Disabled != epoch || !strings.Contains(stored.DisabledReason, "410 Gone") {
		t.Errorf("endpoint disabled %s for %q", stored.Disabled, stored.DisabledReason)
	}
	want := webhook.DisabledEndpoint{Endpoint: e.ID, Account: e.Account, URL: e.URL, At: epoch, Reason: stored.DisabledReason,
		Cause: webhook.DisabledGone, Message: m.ID, Last: got.Last}
	if told[0] != want {
		t.Errorf("told %+v\nwant %+v", told[0], want)
	}

	m2 := f.enqueue(e, other)
	got = f.waitState(e, m2, webhook.Failed, 0)
	if got.Last != (webhook.Attempt{}) {
		t.Errorf("delivery to the disabled endpoint: last attempt %+v, want none", got.Last)
	}
	f.waitState(other, m2, webhook.Failed, 1) // the other one answers 410 too: disabled
	if n := len(rc.got()); n != 2 {
		t.Errorf("%d requests, want 2 (none to the disabled endpoint)", n)
	}
	if s := d.Stats(); s.Skipped != 1 || s.Disabled != 2 || s.Failed != 3 || s.Attempted != 2 {
		t.Errorf("stats %+v", s)
	}
}

// TestExhaustedDisables: a delivery that fails its whole schedule is Failed, and its
// endpoint is disabled unless a delivery to it succeeded since its message.
func TestExhaustedDisables(t *testing.T) {
	for _, succeeded := range []bool{false, true} {
		t.Run(fmt.Sprintf("another delivered %v", succeeded), func(t *testing.T) {
			f := newFixture(t)
			good, rc := newPickyReceiver(t)
			e := f.endpoint(rc.URL)
			var told atomic.Int32
			opts := f.options()
			opts.OnDisabled = func(context.Context, webhook.DisabledEndpoint) { told.Add(1) }
			taken := func() webhook.Message {
				m := f.message()
				good.Store(m.ID, true)
				return f.put(m, e)
			}
			// A success before the failing message was made does not count.
			old := taken()
			d, stop := f.run(opts)
			f.waitState(e, old, webhook.Delivered, 1)
			f.clock.Advance(time.Minute)

			m := f.enqueue(e)
			if succeeded {
				f.clock.Advance(time.Second)
				f.waitState(e, taken(), webhook.Delivered, 1)
			}
			for i := 1; i < opts.Schedule.Attempts(); i++ {
				f.waitState(e, m, webhook.Pending, i)
				wait, _ := opts.Schedule.Wait(i)
				f.clock.Advance(wait)
			}
			got := f.waitState(e, m, webhook.Failed, opts.Schedule.Attempts())
			if got.Last.Status != 500 {
				t.Errorf("last attempt %+v", got.Last)
			}
			if succeeded {
				stop() // the attempt's work is done, disabling included
				stored, err := f.store.Endpoint(context.Background(), e.ID)
				if err != nil || !stored.Disabled.IsZero() || told.Load() != 0 || d.Stats().Disabled != 0 {
					t.Errorf("disabled %s for %q (%v)", stored.Disabled, stored.DisabledReason, err)
				}
				return
			}
			eventually(t, "the endpoint disabled", func() bool { return told.Load() == 1 })
			stored, err := f.store.Endpoint(context.Background(), e.ID)
			if err != nil || stored.Disabled.IsZero() || !strings.Contains(stored.DisabledReason, m.ID) {
				t.Errorf("disabled %s for %q (%v)", stored.Disabled, stored.DisabledReason, err)
			}
		})
	}
}

// TestResentAfterSchedule: a delivery resent after its schedule ran out gets one more
// attempt.
func TestResentAfterSchedule(t *testing.T) {
	for _, taken := range []bool{false, true} {
		t.Run(fmt.Sprintf("taken %v", taken), func(t *testing.T) {
			f := newFixture(t)
			good, rc := newPickyReceiver(t)
			e := f.endpoint(rc.URL)
			opts := f.options()
			opts.Schedule = webhook.Schedule{time.Second}
			m := f.enqueue(e)
			other := f.message() // delivered since m was made: the endpoint stays enabled
			good.Store(other.ID, true)
			f.put(other, e)
			_, stop := f.run(opts)
			f.waitState(e, m, webhook.Pending, 1)
			// other's delivery is recorded before m's schedule runs out, or the endpoint,
			// with nothing delivered since m was made, is disabled.
			f.waitState(e, other, webhook.Delivered, 1)
			f.clock.Advance(time.Second)
			f.waitState(e, m, webhook.Failed, 2)

			if taken {
				good.Store(m.ID, true)
			}
			if _, err := f.store.Resend(context.Background(), e.ID, m.ID, f.clock.Now()); err != nil {
				t.Fatal(err)
			}
			want := webhook.Failed
			if taken {
				want = webhook.Delivered
			}
			f.waitState(e, m, want, 3)
			stop() // the attempt's work is done, disabling included
			if n := len(rc.got()); n != 4 {
				t.Errorf("%d requests, want 4", n)
			}
			if ep, _ := f.store.Endpoint(context.Background(), e.ID); !ep.Disabled.IsZero() {
				t.Errorf("the endpoint was disabled: %q", ep.DisabledReason)
			}
		})
	}
}

// TestUnansweringHostHoldsOneAttempt: after a host did not answer, the deliveries to
// it are given back without an attempt, pending until the cooldown's end, without a
// request; then one attempt at a time is made.
func TestUnansweringHostHoldsOneAttempt(t *testing.T) {
	f := newFixture(t)
	rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			<-r.Context().Done()
		}
	})
	e := f.endpoint(rc.URL)
	m1 := f.enqueue(e)
	opts := f.options()
	opts.Timeout = 50 * time.Millisecond
	opts.Schedule = webhook.Schedule{time.Minute, time.Minute}
	d, _ := f.run(opts)
	if got := f.waitState(e, m1, webhook.Pending, 1); !strings.Contains(got.Last.Error, "did not answer") {
		t.Fatalf("last attempt %+v", got.Last)
	}
	m2 := f.enqueue(e)
	eventually(t, "the delivery held back", func() bool { return f.delivery(e, m2).Due.Equal(epoch.Add(30 * time.Second)) })
	if got := f.delivery(e, m2); got.State != webhook.Pending || got.Attempts != 0 || got.Last != (webhook.Attempt{}) {
		t.Fatalf("the delivery held back: %s after %d attempts, last %+v", got.State, got.Attempts, got.Last)
	}
	if n := len(rc.got()); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
	// Both are due a minute on: if they are claimed together, one probes the host and
	// the other is held back once more, for a cooldown, then delivered.
	f.clock.Advance(time.Minute)
	eventually(t, "the probe", func() bool {
		return f.delivery(e, m1).State == webhook.Delivered || f.delivery(e, m2).State == webhook.Delivered
	})
	eventually(t, "the other delivered or held back", func() bool {
		x, y := f.delivery(e, m1), f.delivery(e, m2)
		return x.State == webhook.Delivered && (y.State == webhook.Delivered || y.Due.Equal(f.clock.Now().Add(30*time.Second))) ||
			y.State == webhook.Delivered && x.Due.Equal(f.clock.Now().Add(30*time.Second))
	})
	f.clock.Advance(30 * time.Second)
	f.waitState(e, m1, webhook.Delivered, 2)
	f.waitState(e, m2, webhook.Delivered, 1)
	if n := len(rc.got()); n != 3 {
		t.Errorf("%d requests, want 3", n)
	}
	if s := d.Stats(); s.Attempted != 3 || s.Postponed < 1 || s.Failed != 0 {
		t.Errorf("stats %+v", s)
	}
}

// TestRedirectNotFollowed: a 3xx is a failure, and its target is never requested.
func TestRedirectNotFollowed(t *testing.T) {
	for _, status := range []int{301, 302, 303, 307, 308} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			f := newFixture(t)
			target := newReceiver(t, ok)
			rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, target.URL+"/elsewhere", status)
			})
			e := f.endpoint(rc.URL)
			m := f.enqueue(e)
			f.run(f.options())
			got := f.waitState(e, m, webhook.Pending, 1)
			if got.Last.Status != status || !strings.Contains(got.Last.Error, "redirect") || !strings.Contains(got.Last.Error, "/elsewhere") {
				t.Errorf("last attempt %+v", got.Last)
			}
			if n := len(target.got()); n != 0 {
				t.Errorf("the redirect's target got %d requests", n)
			}
		})
	}
}

// TestSlowReceiverTimesOut: an attempt that is not answered within the timeout fails,
// and is retried on schedule.
func TestSlowReceiverTimesOut(t *testing.T) {
	for _, what := range []string{"headers", "body"} {
		t.Run(what, func(t *testing.T) {
			f := newFixture(t)
			release := make(chan struct{})
			t.Cleanup(func() { close(release) })
			rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
				if n > 1 {
					return
				}
				if what == "body" {
					w.WriteHeader(500)
					w.Write([]byte("partly"))
					w.(http.Flusher).Flush()
				}
				select {
				case <-r.Context().Done():
				case <-release:
				}
			})
			e := f.endpoint(rc.URL)
			m := f.enqueue(e)
			opts := f.options()
			opts.Timeout = 100 * time.Millisecond
			opts.Schedule = webhook.Schedule{time.Minute} // past the cooldown of a host that did not answer
			f.run(opts)
			got := f.waitState(e, m, webhook.Pending, 1)
			want := webhook.Attempt{At: epoch, Error: "the endpoint did not answer within 100ms"}
			if what == "body" {
				want = webhook.Attempt{At: epoch, Status: 500, Error: "the endpoint answered 500 Internal Server Error: partly"}
			}
			if got.Last != want {
				t.Errorf("last attempt %+v, want %+v", got.Last, want)
			}
			f.clock.Advance(time.Minute)
			f.waitState(e, m, webhook.Delivered, 2)
		})
	}
}

// TestHugeAnswer: of an endless answer, the deliverer reads its bound and stops: the
// attempt ends without waiting for the timeout, and keeps the answer's start.
func TestHugeAnswer(t *testing.T) {
	for _, status := range []int{200, 500} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			f := newFixture(t)
			var written atomic.Int64
			rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(status)
				chunk := []byte(strings.Repeat("x", 1024))
				for {
					k, err := w.Write(chunk)
					written.Add(int64(k))
					if err != nil {
						return
					}
				}
			})
			e := f.endpoint(rc.URL)
			m := f.enqueue(e)
			opts := f.options()
			opts.Timeout = time.Hour // the attempt must not end by it
			f.run(opts)
			var got webhook.Delivery
			if status == 200 {
				got = f.waitState(e, m, webhook.Delivered, 1)
			} else {
				got = f.waitState(e, m, webhook.Pending, 1)
				prefix := "the endpoint answered 500 Internal Server Error: xxxx"
				if !strings.HasPrefix(got.Last.Error, prefix) || len(got.Last.Error) > webhook.MaxError {
					t.Errorf("error of %d bytes: %.80q...", len(got.Last.Error), got.Last.Error)
				}
			}
			if got.Last.Status != status {
				t.Errorf("last attempt %+v", got.Last)
			}
			t.Logf("the receiver wrote %d bytes before the connection closed", written.Load())
		})
	}
}

// TestPrivateRefusedWithoutConnecting: without AllowPrivate, a loopback destination,
// by address or by a name that resolves to one, is refused before any connection is
// made, with the one message of every refused destination.
func TestPrivateRefusedWithoutConnecting(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)

	f := newFixture(t)
	urls := []string{
		"http://127.0.0.1:" + port + "/hook",
		"http://[::1]:" + port + "/hook",
		"http://localhost:" + port + "/hook",
		"http://internal.test:" + port + "/hook",
		"http://missing.test:" + port + "/hook",
		"https://127.0.0.1:" + port + "/hook",
	}
	var eps []webhook.Endpoint
	for _, u := range urls {
		eps = append(eps, f.endpoint(u))
	}
	bad := f.endpoint("ftp://example.com/hook")
	m := f.enqueue(append(eps, bad)...)
	opts := f.options()
	opts.AllowPrivate = false
	// The fixture's endpoints are one account's, and its clock does not move: give
	// the account a share for all of them at once, or those over it would wait.
	opts.AccountConcurrency = len(eps) + 1
	opts.Resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "localhost":
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		case "internal.test":
			return []netip.Addr{netip.MustParseAddr("10.0.0.7")}, nil
		}
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	f.run(opts)
	for i, e := range eps {
		got := f.waitState(e, m, webhook.Pending, 1)
		if got.Last.Error != webhook.RefusedDestination || got.Last.Status != 0 {
			t.Errorf("%s: last attempt %+v", urls[i], got.Last)
		}
	}
	got := f.waitState(bad, m, webhook.Pending, 1)
	if !strings.Contains(got.Last.Error, `the scheme "ftp" is not supported`) {
		t.Errorf("ftp: last attempt %+v", got.Last)
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("%d connections were made", n)
	}
}

// countingStore counts the claims made of a store.
type countingStore struct {
	webhook.Store
	claims atomic.Int32
}

func (s *countingStore) Claim(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]webhook.Delivery, error) {
	s.claims.Add(1)
	return s.Store.Claim(ctx, now, lease, limit)
}

// TestTwoDeliverersNeverOverlap runs two deliverers on one store against a receiver
// that fails every message's first attempt: no message is ever attempted twice at
// once, and every message is delivered.
func TestTwoDeliverersNeverOverlap(t *testing.T) {
	f := newFixture(t)
	var firsts sync.Map
	rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		time.Sleep(time.Millisecond) // widen the window of an overlap
		if _, seen := firsts.LoadOrStore(r.Header.Get("webhook-id"), true); !seen {
			w.WriteHeader(503)
		}
	})
	e := f.endpoint(rc.URL)
	const messages = 60
	var ms []webhook.Message
	for range messages {
		ms = append(ms, f.enqueue(e))
	}
	var stats []func() webhook.DelivererStats
	for range 2 {
		opts := f.options()
		opts.Concurrency = 4
		opts.Lease = 24 * time.Hour // the clock moves on while attempts run: never past a lease
		opts.Schedule = webhook.Schedule{time.Second}
		d, _ := f.run(opts)
		stats = append(stats, d.Stats)
	}
	eventually(t, "every message delivered", func() bool {
		f.clock.Advance(time.Second)
		n, err := f.store.Pending(context.Background())
		return err == nil && n == 0
	})
	for _, m := range ms {
		if d := f.delivery(e, m); d.State != webhook.Delivered || d.Attempts != 2 {
			t.Errorf("%s: %s after %d attempts", m.ID, d.State, d.Attempts)
		}
	}
	if n := rc.overlap.Load(); n != 0 {
		t.Errorf("%d attempts overlapped another of the same message", n)
	}
	if n := len(rc.got()); n != 2*messages {
		t.Errorf("%d requests, want %d", n, 2*messages)
	}
	s1, s2 := stats[0](), stats[1]()
	t.Logf("deliverer 1: %+v; deliverer 2: %+v", s1, s2)
	if s1.Attempted+s2.Attempted != 2*messages || s1.Delivered+s2.Delivered != messages {
		t.Errorf("stats %+v, %+v", s1, s2)
	}
}

// TestStoppedMidAttempt: a deliverer stopped during an attempt records nothing; another
// one makes the attempt again once the lease ends, not before.
func TestStoppedMidAttempt(t *testing.T) {
	f := newFixture(t)
	arrived := make(chan struct{})
	rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			close(arrived)
			<-r.Context().Done() // the deliverer hangs up
		}
	})
	e := f.endpoint(rc.URL)
	m := f.enqueue(e)
	opts := f.options()
	opts.Lease = time.Minute
	_, stop := f.run(opts)
	<-arrived
	stop() // returns once the attempt is abandoned
	if d := f.delivery(e, m); d.State != webhook.Pending || d.Attempts != 0 {
		t.Fatalf("after the stop: %s after %d attempts", d.State, d.Attempts)
	}

	f.run(opts) // another deliverer
	f.polls(5)
	if n := len(rc.got()); n != 1 {
		t.Fatalf("%d requests before the lease ended", n)
	}
	f.clock.Advance(opts.Lease)
	got := f.waitState(e, m, webhook.Delivered, 1)
	if got.Last.At != epoch.Add(opts.Lease) {
		t.Errorf("attempt at %s", got.Last.At)
	}
	reqs := rc.got()
	if len(reqs) != 2 || reqs[0].id != m.ID || reqs[1].id != m.ID {
		t.Errorf("requests %+v", reqs)
	}
}

// TestWake: a deliverer that polls rarely claims at once when woken.
func TestWake(t *testing.T) {
	f := newFixture(t)
	rc := newReceiver(t, ok)
	e := f.endpoint(rc.URL)
	opts := f.options()
	opts.Poll = time.Hour
	d, _ := f.run(opts)
	eventually(t, "the first claim, when it starts", func() bool { return f.counted.claims.Load() >= 1 })
	m := f.enqueue(e)
	d.Wake()
	f.waitState(e, m, webhook.Delivered, 1)
	if err := d.Run(context.Background()); err != webhook.ErrRunning {
		t.Errorf("a second Run: %v", err)
	}
}

func TestPrune(t *testing.T) {
	f := newFixture(t)
	rc := newReceiver(t, ok)
	e := f.endpoint(rc.URL)
	opts := f.options()
	opts.Retention = 24 * time.Hour
	opts.PruneInterval = -1
	d, _ := f.run(opts)
	old := f.enqueue(e)
	f.waitState(e, old, webhook.Delivered, 1)
	f.clock.Advance(23 * time.Hour)
	recent := f.enqueue(e)
	f.waitState(e, recent, webhook.Delivered, 1)
	f.clock.Advance(2 * time.Hour)
	n, err := d.Prune(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("Prune: %d, %v", n, err)
	}
	page, _ := f.store.Deliveries(context.Background(), e.ID, webhook.Query{})
	if len(page.Deliveries) != 1 || page.Deliveries[0].Message.ID != recent.ID {
		t.Errorf("left %+v", page.Deliveries)
	}
	opts.Retention = -1
	d, err = webhook.NewDeliverer(f.store, opts)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := d.Prune(context.Background()); n != 0 || err != nil {
		t.Errorf("Prune without a retention: %d, %v", n, err)
	}
}
