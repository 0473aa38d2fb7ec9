package webhook_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/webhook"
)

// The tests of this file check the fair shares of a deliverer's attempts: one
// endpoint, or one account, with a backlog or a receiver that hangs never holds back
// another account's deliveries.

// writeCounter is a Store that counts the claims and the writes that follow them: each
// claim's deliveries and records, and each delivery's give-backs (records without an
// attempt).
type writeCounter struct {
	webhook.Store
	mu       sync.Mutex
	claims   int
	claimed  map[string]int      // by claim token: deliveries claimed
	recorded map[string]int      // by claim token: records
	gaveBack map[string]int      // by endpoint and message: records without an attempt
	history  map[string][]string // by endpoint and message: when each give-back was, and until
}

func newWriteCounter(s webhook.Store) *writeCounter {
	return &writeCounter{Store: s, claimed: map[string]int{}, recorded: map[string]int{}, gaveBack: map[string]int{}, history: map[string][]string{}}
}

func (w *writeCounter) Claim(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]webhook.Delivery, error) {
	ds, err := w.Store.Claim(ctx, now, lease, limit)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.claims++
	if len(ds) > 0 {
		w.claimed[ds[0].Claim] += len(ds)
	}
	return ds, err
}

func (w *writeCounter) Record(ctx context.Context, o webhook.Outcome) error {
	err := w.Store.Record(ctx, o)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.recorded[o.Claim]++
	if !o.Attempted() {
		k := o.Endpoint + " " + o.Message
		w.gaveBack[k]++
		w.history[k] = append(w.history[k], fmt.Sprintf("at %s due %s", time.Now().Format("15:04:05.000"), o.Due.Format("15:04:05.000")))
	}
	return err
}

// check fails t if a claim was followed by more records than it claimed deliveries:
// each delivery a claim returns is written at most once, its outcome or its
// give-back.
func (w *writeCounter) check(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for claim, n := range w.recorded {
		if n > w.claimed[claim] {
			t.Errorf("a claim of %d deliveries was followed by %d records", w.claimed[claim], n)
		}
	}
}

// inFlight is a RoundTripper, for a synctest bubble, that answers the paths that
// begin with one of ok's prefixes with 204 and hangs on the others until the request's
// context ends; it counts the requests in flight by the path's first segment (an
// account, in these tests) and by path, and keeps the most of each.
type inFlight struct {
	ok       []string
	mu       sync.Mutex
	now, top map[string]int
	got      map[string]int
}

func newInFlight(ok ...string) *inFlight {
	return &inFlight{ok: ok, now: map[string]int{}, top: map[string]int{}, got: map[string]int{}}
}

func (f *inFlight) RoundTrip(req *http.Request) (*http.Response, error) {
	path := req.URL.Path
	account, _, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	f.mu.Lock()
	f.got[account]++
	for _, k := range []string{account, path} {
		f.now[k]++
		f.top[k] = max(f.top[k], f.now[k])
	}
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.now[account]--
		f.now[path]--
		f.mu.Unlock()
	}()
	for _, p := range f.ok {
		if strings.HasPrefix(path, p) {
			return answer(204), nil
		}
	}
	<-req.Context().Done()
	return nil, req.Context().Err()
}

// most returns the most requests that were in flight at once for k, and the requests
// made for it (k an account).
func (f *inFlight) most(k string) (top, got int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.top[k], f.got[k]
}

// backlog stores endpoints endpoints of account, posting to
// https://hooks.example.com/<account>/<n>, and enqueues per messages for all of them
// now, and returns their IDs.
func backlog(t *testing.T, s *memory.WebhookStore, account string, endpoints, per int) []string {
	t.Helper()
	var ids []string
	for i := range endpoints {
		id := fmt.Sprintf("ep_%s%020d", account, i)
		reviewEndpoint(t, s, id, account, fmt.Sprintf("https://hooks.example.com/%s/%d", account, i))
		ids = append(ids, id)
	}
	for i := range per {
		reviewEnqueue(t, s, fmt.Sprintf("msg_%s%020d", account, i), ids...)
	}
	return ids
}

// TestBacklogDoesNotHoldBackOthers: endpoints of account "noisy" have a backlog to a
// receiver that hangs until the attempt's timeout; an endpoint of account "quiet"
// gets one delivery, due after the whole backlog. It is delivered at once, while the
// backlog waits its turn at a bounded number of attempts in flight: at most 2 at an
// endpoint and 4 at an account, of the deliverer's 8. Each claim is written at most
// once per delivery, and a delivery given back is given back again only once it comes
// due, about once per MaxPark at most.
func TestBacklogDoesNotHoldBackOthers(t *testing.T) {
	tests := []struct {
		name      string
		endpoints int // of the noisy account
		backlog   int // each
	}{
		{"one endpoint, 500 deliveries", 1, 500},
		{"the most endpoints of an account, 40 deliveries each", webhook.MaxEndpoints, 40},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				mem := memory.NewWebhookStore()
				s := newWriteCounter(mem)
				reviewEndpoint(t, mem, "ep_quiet", "quiet", "https://hooks.example.com/quiet/in")
				start := time.Now()
				noisy := backlog(t, mem, "noisy", tt.endpoints, tt.backlog)
				time.Sleep(time.Second) // the quiet delivery is due after the whole backlog
				reviewEnqueue(t, mem, "msg_quiet", "ep_quiet")
				rt := newInFlight("/quiet/")
				d, err := webhook.NewDeliverer(s, &webhook.DelivererOptions{Jitter: -1, Schedule: webhook.Schedule{time.Hour},
					Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					t.Fatal(err)
				}
				webhook.SetTransport(d, rt)
				stop := reviewRun(t, d)
				synctest.Wait()
				quiet := reviewDelivery(t, mem, "ep_quiet", "msg_quiet")
				_, before := rt.most("noisy")
				run := 10 * time.Minute
				time.Sleep(run)
				synctest.Wait()
				stop()

				if quiet.State != webhook.Delivered || !quiet.Last.At.Equal(start.Add(time.Second)) {
					t.Errorf("the quiet account's delivery is %s after %d attempts (last at +%s), behind a backlog of %d",
						quiet.State, quiet.Attempts, quiet.Last.At.Sub(start), tt.endpoints*tt.backlog)
				}
				if before > 4 {
					t.Errorf("%d attempts at the noisy account before the quiet delivery, want at most its share of 4", before)
				}
				top, got := rt.most("noisy")
				if top > 4 {
					t.Errorf("%d attempts at once at the noisy account, want at most 4", top)
				}
				for i := range tt.endpoints {
					if top, _ := rt.most(fmt.Sprintf("/noisy/%d", i)); top > 2 {
						t.Errorf("%d attempts at once at noisy endpoint %d, want at most 2", top, i)
					}
				}
				// The backlog is worked at its share all along: 4 attempts at a time at
				// the account, each for the 15 s timeout, and one at a time at each
				// endpoint, once a cooldown (30 s), since it does not answer.
				n := tt.endpoints * tt.backlog
				want := min(4*int(run/(15*time.Second)), tt.endpoints*int(run/(30*time.Second)), n)
				if got < want/2 || got > want+4 {
					t.Errorf("%d attempts at the noisy account in %s, want about %d: its share, all the time", got, run, want)
				}
				s.check(t)
				s.mu.Lock()
				most, all, worst := 0, 0, ""
				for key, k := range s.gaveBack {
					if k > most {
						worst = key
					}
					most, all = max(most, k), all+k
				}
				claims := s.claims
				s.mu.Unlock()
				// A delivery given back is due again once its endpoint (or account) may
				// have a place, behind those given back before it, at most MaxPark on:
				// a few times while the lane's pace is learnt, then about once per
				// MaxPark (5 minutes), however long the backlog.
				perPark := int(run / webhook.MaxPark)
				if bound := 4 + perPark; most > bound {
					t.Errorf("a delivery was given back %d times in %s, want at most %d: %s %q", most, run, bound, worst, s.history[worst])
				}
				if bound := (3 + perPark) * n; all > bound {
					t.Errorf("%d give-backs of %d deliveries in %s, want at most %d", all, n, run, bound)
				}
				t.Logf("%d claims, %d attempts, %d give-backs (at most %d of one delivery); stats %+v", claims, got, all, most, d.Stats())
				for _, id := range noisy {
					if ep, err := mem.Endpoint(ctx, id); err != nil || !ep.Disabled.IsZero() {
						t.Errorf("endpoint %s: disabled %v (%s), %v", id, ep.Disabled, ep.DisabledReason, err)
					}
				}
			})
		})
	}
}

// endpointOf stores an endpoint of account posting to url, with the ID id.
func (f *fixture) endpointOf(id, account, url string) webhook.Endpoint {
	f.t.Helper()
	e, err := f.store.CreateEndpoint(context.Background(), webhook.Endpoint{ID: id, Account: account, URL: url, Secret: secret(1), Created: f.clock.Now()})
	if err != nil {
		f.t.Fatal(err)
	}
	return e
}

// TestBacklogHTTP: the same over HTTP: an endpoint with a backlog of 100 deliveries
// to a receiver that hangs until the timeout, and another account's endpoint on
// another receiver. The other's delivery is made before the backlog is worked off,
// and the hanging receiver never has more than 2 requests at once.
func TestBacklogHTTP(t *testing.T) {
	f := newFixture(t)
	var now, top atomic.Int32
	slow := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		k := now.Add(1)
		defer now.Add(-1)
		for {
			m := top.Load()
			if k <= m || top.CompareAndSwap(m, k) {
				break
			}
		}
		<-r.Context().Done()
	})
	quick := newReceiver(t, ok)
	a := f.endpointOf("ep_a", "acct_a", slow.URL+"/in")
	b := f.endpointOf("ep_b", "acct_b", quick.URL+"/in")
	const backlog = 100
	for range backlog {
		f.enqueue(a)
	}
	f.clock.Advance(time.Second)
	m := f.enqueue(b)
	opts := f.options()
	opts.Timeout = 200 * time.Millisecond
	opts.Schedule = webhook.Schedule{time.Hour}
	f.run(opts)
	f.waitState(b, m, webhook.Delivered, 1)
	if n := len(slow.got()); n >= backlog {
		t.Errorf("the other account's delivery was made after the %d requests of the backlog", n)
	}
	if n := top.Load(); n > 2 {
		t.Errorf("%d requests at once at the endpoint with a backlog, want at most 2", n)
	}
}

// TestSharedHostNotHeldBack: two accounts' endpoints on one host (a receiving platform,
// each its own path); one does not answer within the timeout. The other's deliveries
// are made all the same, none held back: an endpoint's breaker holds back that
// endpoint alone.
func TestSharedHostNotHeldBack(t *testing.T) {
	f := newFixture(t)
	rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hooks/broken" {
			<-r.Context().Done()
		}
	})
	broken := f.endpointOf("ep_broken", "acct_broken", rc.URL+"/hooks/broken")
	healthy := f.endpointOf("ep_healthy", "acct_healthy", rc.URL+"/hooks/healthy")
	m1 := f.enqueue(broken)
	opts := f.options()
	opts.Timeout = 100 * time.Millisecond
	opts.Schedule = webhook.Schedule{time.Minute}
	d, _ := f.run(opts)
	if got := f.waitState(broken, m1, webhook.Pending, 1); !strings.Contains(got.Last.Error, "did not answer") {
		t.Fatalf("the broken endpoint's attempt: %+v", got.Last)
	}
	// The broken endpoint is held back now; the healthy one, on the same host, is not.
	var ms []webhook.Message
	for range 2 { // within its share: none is deferred, which this clock would never bring back
		ms = append(ms, f.enqueue(healthy))
	}
	d.Wake()
	for _, m := range ms {
		eventually(t, "the healthy endpoint's delivery delivered or held back", func() bool {
			return f.delivery(healthy, m).State == webhook.Delivered || d.Stats().Postponed > 0
		})
		if got := f.delivery(healthy, m); got.State != webhook.Delivered || got.Attempts != 1 {
			t.Errorf("the healthy endpoint's delivery of %s is %s after %d attempts, due %s: held back by another account's endpoint",
				m.ID, got.State, got.Attempts, got.Due.Sub(epoch))
		}
	}
	if s := d.Stats(); s.Postponed != 0 {
		t.Errorf("stats %+v: deliveries postponed", s)
	}
	// The broken endpoint itself is held back: its next delivery waits for the cooldown.
	m2 := f.enqueue(broken)
	d.Wake()
	eventually(t, "the broken endpoint's delivery held back", func() bool {
		return f.delivery(broken, m2).Due.Equal(epoch.Add(30 * time.Second))
	})
}

// answersIn is a RoundTripper, for a synctest bubble, that answers 204 after its
// duration.
type answersIn time.Duration

func (a answersIn) RoundTrip(*http.Request) (*http.Response, error) {
	time.Sleep(time.Duration(a))
	return answer(204), nil
}

// TestBurstAtItsShare: a burst of deliveries to healthy receivers is worked off at the
// pace its share allows (2 attempts at a time at an endpoint, 4 at an account), within
// twice the time that pace takes, and its deliveries are given back about twice each
// (at most 3 times on average): the deliverer paces its give-backs by the receivers'
// answers.
func TestBurstAtItsShare(t *testing.T) {
	const took = 50 * time.Millisecond
	tests := []struct {
		name           string
		endpoints, per int
		ideal          time.Duration // the burst at its share
	}{
		{"one endpoint", 1, 100, 100 * took / 2},
		{"an account's endpoints", webhook.MaxEndpoints, 40, webhook.MaxEndpoints * 40 * took / 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := memory.NewWebhookStore()
				s := newWriteCounter(mem)
				start := time.Now()
				backlog(t, mem, "acct", tt.endpoints, tt.per)
				d, err := webhook.NewDeliverer(s, &webhook.DelivererOptions{Jitter: -1, Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					t.Fatal(err)
				}
				webhook.SetTransport(d, answersIn(took))
				stop := reviewRun(t, d)
				n := int64(tt.endpoints * tt.per)
				for d.Stats().Delivered < n && time.Since(start) < time.Hour {
					time.Sleep(10 * time.Millisecond)
				}
				elapsed := time.Since(start)
				stop()
				s.check(t)
				if got := d.Stats().Delivered; got != n || elapsed > 2*tt.ideal {
					t.Errorf("%d of %d delivered in %s; want all within %s, twice what the share takes", got, n, elapsed, 2*tt.ideal)
				}
				s.mu.Lock()
				all := 0
				for _, k := range s.gaveBack {
					all += k
				}
				claims := s.claims
				s.mu.Unlock()
				if all > 3*int(n) {
					t.Errorf("%d give-backs of %d deliveries, want at most 3 each", all, n)
				}
				t.Logf("%d delivered in %s (the share's pace: %s), %d claims, %d give-backs", n, elapsed, tt.ideal, claims, all)
			})
		})
	}
}
