package webhook_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/webhook"
)

// The tests in a synctest bubble run the deliverer on the bubble's clock, with a
// transport that answers in memory (no real connection may be made in a bubble): they
// check when the attempts are made, to the nanosecond.

// fakeReceiver is a RoundTripper that answers with answer(n, req), n counting from
// 1, and keeps when each request came.
type fakeReceiver struct {
	answer func(n int, req *http.Request) *http.Response
	mu     sync.Mutex
	times  []time.Time
}

func (fr *fakeReceiver) RoundTrip(req *http.Request) (*http.Response, error) {
	fr.mu.Lock()
	fr.times = append(fr.times, time.Now())
	n := len(fr.times)
	fr.mu.Unlock()
	if resp := fr.answer(n, req); resp != nil {
		return resp, nil
	}
	<-req.Context().Done()
	return nil, req.Context().Err()
}

func (fr *fakeReceiver) got() []time.Time {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	return append([]time.Time(nil), fr.times...)
}

// answer returns a response of status with headers h (name, value, ...).
func answer(status int, h ...string) *http.Response {
	resp := &http.Response{StatusCode: status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("answer"))}
	for i := 0; i+1 < len(h); i += 2 {
		resp.Header.Set(h[i], h[i+1])
	}
	return resp
}

// bubble is what a bubble's test builds on: a memory store with an endpoint and a
// deliverer of it, sending through fr, with opts adjusted by adjust.
type bubble struct {
	store *memory.WebhookStore
	ep    webhook.Endpoint
	d     *webhook.Deliverer
}

func newBubble(t *testing.T, fr *fakeReceiver, adjust func(*webhook.DelivererOptions)) *bubble {
	s := memory.NewWebhookStore()
	ep, err := s.CreateEndpoint(context.Background(), webhook.Endpoint{ID: "ep_00000000000000000000000001",
		URL: "https://hooks.example.com/in", Secret: secret(1), Created: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	opts := &webhook.DelivererOptions{Jitter: -1, Schedule: webhook.Schedule{5 * time.Second, 5 * time.Minute},
		Logger: slog.New(slog.DiscardHandler)}
	if adjust != nil {
		adjust(opts)
	}
	d, err := webhook.NewDeliverer(s, opts)
	if err != nil {
		t.Fatal(err)
	}
	webhook.SetTransport(d, fr)
	return &bubble{store: s, ep: ep, d: d}
}

// enqueue enqueues a message now.
func (b *bubble) enqueue(t *testing.T, id string) {
	now := time.Now()
	m := webhook.Message{ID: id, Type: "key.created", At: now, Keep: now, Body: []byte(`{}`)}
	if _, _, err := b.store.Enqueue(context.Background(), m, []string{b.ep.ID}, now); err != nil {
		t.Fatal(err)
	}
}

// run runs the deliverer until the returned function is called, which stops it and
// waits for Run to return.
func (b *bubble) run(t *testing.T) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := b.d.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	return func() { cancel(); <-done }
}

func (b *bubble) delivery(t *testing.T) webhook.Delivery {
	page, err := b.store.Deliveries(context.Background(), b.ep.ID, webhook.Query{})
	if err != nil || len(page.Deliveries) != 1 {
		t.Fatalf("deliveries %+v, %v", page.Deliveries, err)
	}
	return page.Deliveries[0]
}

// TestAttemptsOnSchedule: a receiver that keeps failing gets the attempts when the
// schedule says, to the poll; then the delivery is Failed and the endpoint disabled.
func TestAttemptsOnSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fr := &fakeReceiver{answer: func(int, *http.Request) *http.Response { return answer(503) }}
		var disabled []webhook.DisabledEndpoint
		b := newBubble(t, fr, func(o *webhook.DelivererOptions) {
			o.OnDisabled = func(_ context.Context, e webhook.DisabledEndpoint) { disabled = append(disabled, e) }
		})
		start := time.Now()
		b.enqueue(t, "msg_00000000000000000000000001")
		stop := b.run(t)
		time.Sleep(time.Hour)
		synctest.Wait()
		stop()

		want := []time.Time{start, start.Add(5 * time.Second), start.Add(5*time.Second + 5*time.Minute)}
		got := fr.got()
		if len(got) != len(want) {
			t.Fatalf("attempts at %v, want %v", got, want)
		}
		for i := range want {
			if !got[i].Equal(want[i]) {
				t.Errorf("attempt %d at +%s, want +%s", i+1, got[i].Sub(start), want[i].Sub(start))
			}
		}
		if d := b.delivery(t); d.State != webhook.Failed || d.Attempts != 3 || d.Last.Status != 503 {
			t.Errorf("delivery %s after %d attempts, last %+v", d.State, d.Attempts, d.Last)
		}
		if len(disabled) != 1 || disabled[0].Cause != webhook.DisabledFailing || !disabled[0].At.Equal(want[2]) {
			t.Errorf("disabled %+v", disabled)
		}
	})
}

// TestRetryAfterOnSchedule: a Retry-After longer than the schedule's wait puts the
// retry off to it.
func TestRetryAfterOnSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fr := &fakeReceiver{answer: func(n int, _ *http.Request) *http.Response {
			if n == 1 {
				return answer(429, "Retry-After", "120")
			}
			return answer(204)
		}}
		b := newBubble(t, fr, nil)
		start := time.Now()
		b.enqueue(t, "msg_00000000000000000000000001")
		stop := b.run(t)
		time.Sleep(time.Hour)
		synctest.Wait()
		stop()
		got := fr.got()
		if len(got) != 2 || !got[1].Equal(start.Add(2*time.Minute)) {
			t.Fatalf("attempts at %v, want the second at +2m", got)
		}
		if d := b.delivery(t); d.State != webhook.Delivered || d.Attempts != 2 {
			t.Errorf("delivery %s after %d attempts", d.State, d.Attempts)
		}
	})
}

// TestRunStopsPromptly: Run returns as soon as its context ends, abandoning the
// attempt in flight, which is not recorded.
func TestRunStopsPromptly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fr := &fakeReceiver{answer: func(int, *http.Request) *http.Response { return nil }} // never answers
		b := newBubble(t, fr, nil)
		b.enqueue(t, "msg_00000000000000000000000001")
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			b.d.Run(ctx)
		}()
		synctest.Wait() // the attempt is in flight
		if len(fr.got()) != 1 {
			t.Fatalf("%d attempts", len(fr.got()))
		}
		start := time.Now()
		cancel()
		<-done
		if time.Since(start) != 0 {
			t.Errorf("Run took %s to return", time.Since(start))
		}
		if d := b.delivery(t); d.State != webhook.Pending || d.Attempts != 0 {
			t.Errorf("delivery %s after %d attempts", d.State, d.Attempts)
		}
	})
}

// TestHostDownForAWhile: while a receiver's host does not answer, the deliverer tries
// it once a cooldown, one attempt at a time, and gives the other deliveries back
// without an attempt: every delivery's attempts are the requests made for it, none
// fails for attempts it did not make, and all are delivered once the host answers.
func TestHostDownForAWhile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		up := start.Add(5 * time.Minute)
		var (
			mu        sync.Mutex
			requests  = map[string]int{} // by webhook-id
			whileDown []time.Time
		)
		fr := &fakeReceiver{answer: func(_ int, req *http.Request) *http.Response {
			mu.Lock()
			defer mu.Unlock()
			requests[req.Header.Get("webhook-id")]++
			if time.Now().Before(up) {
				whileDown = append(whileDown, time.Now())
				return nil // no answer: the attempt times out
			}
			return answer(204)
		}}
		// Three attempts over an hour and a minute: the host comes back long before a
		// delivery that is tried on its schedule runs out of them.
		b := newBubble(t, fr, func(o *webhook.DelivererOptions) { o.Schedule = webhook.Schedule{time.Minute, time.Hour} })
		ids := []string{"msg_00000000000000000000000001"}
		b.enqueue(t, ids[0])
		stop := b.run(t)
		time.Sleep(20 * time.Second) // the first attempt timed out: the host is held back
		synctest.Wait()
		for i := 2; i <= 6; i++ {
			id := fmt.Sprintf("msg_%026d", i)
			ids = append(ids, id)
			b.enqueue(t, id)
		}
		b.d.Wake()
		time.Sleep(2 * time.Hour)
		synctest.Wait()
		stop()

		page, err := b.store.Deliveries(context.Background(), b.ep.ID, webhook.Query{})
		if err != nil || len(page.Deliveries) != len(ids) {
			t.Fatalf("deliveries %d, %v", len(page.Deliveries), err)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, d := range page.Deliveries {
			if d.State != webhook.Delivered || d.Attempts != requests[d.Message.ID] {
				t.Errorf("delivery of %s: %s after %d attempts, %d requests; want delivered after as many attempts as requests",
					d.Message.ID, d.State, d.Attempts, requests[d.Message.ID])
			}
		}
		for i := 1; i < len(whileDown); i++ {
			if gap := whileDown[i].Sub(whileDown[i-1]); gap < 30*time.Second {
				t.Errorf("requests to the host that did not answer at +%s and +%s: one at a time, a cooldown apart, wanted",
					whileDown[i-1].Sub(start), whileDown[i].Sub(start))
			}
		}
		if len(whileDown) < 5 {
			t.Errorf("%d requests while the host was down for 5 minutes, want one a cooldown or so", len(whileDown))
		}
		if ep, err := b.store.Endpoint(context.Background(), b.ep.ID); err != nil || !ep.Disabled.IsZero() {
			t.Errorf("the endpoint: disabled %v (%q), %v", ep.Disabled, ep.DisabledReason, err)
		}
		s := b.d.Stats()
		if s.Postponed == 0 || s.Failed != 0 || s.Skipped != 0 || s.Delivered != int64(len(ids)) {
			t.Errorf("stats %+v", s)
		}
	})
}
