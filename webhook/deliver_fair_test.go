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
// account, in these tests), by path and by host, and keeps the most of each.
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
	f.got[req.URL.Host]++
	keys := []string{account, path, req.URL.Host}
	for _, k := range keys {
		f.now[k]++
		f.top[k] = max(f.top[k], f.now[k])
	}
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		for _, k := range keys {
			f.now[k]--
		}
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
// made for it (k an account or a host).
func (f *inFlight) most(k string) (top, got int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.top[k], f.got[k]
}

// runHourly runs a deliverer of s, in a synctest bubble, sending through rt, without
// jitter, a failed attempt retried an hour later; it returns it, and the function that
// stops it.
func runHourly(t *testing.T, s webhook.Store, rt http.RoundTripper) (*webhook.Deliverer, func()) {
	t.Helper()
	d, err := webhook.NewDeliverer(s, &webhook.DelivererOptions{Jitter: -1, Schedule: webhook.Schedule{time.Hour},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	webhook.SetTransport(d, rt)
	return d, reviewRun(t, d)
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
// receiver that hangs until the attempt's timeout; an endpoint of account "quiet", on
// the same host (a receiving platform, each account its own path), gets one delivery,
// due after the whole backlog. It is delivered at once, while the backlog waits its
// turn at a bounded number of attempts in flight: at most 2 at an endpoint and 4 at an
// account, of the deliverer's 8, and 3 of the 4 places of a host that other accounts
// share. Each claim is written at most once per delivery, and a delivery given back is
// given back again only once it comes due, about once per MaxPark at most.
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
				d, stop := runHourly(t, s, rt)
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
				if top > 3 {
					t.Errorf("%d attempts at once at the noisy account, want at most 3 (all but one of its host's 4)", top)
				}
				for i := range tt.endpoints {
					if top, _ := rt.most(fmt.Sprintf("/noisy/%d", i)); top > 2 {
						t.Errorf("%d attempts at once at noisy endpoint %d, want at most 2", top, i)
					}
				}
				// The backlog is worked at its share all along: 3 attempts at a time at
				// the account on its host, each for the 15 s timeout, and one at a time
				// at each endpoint, once a cooldown (30 s), since it does not answer.
				n := tt.endpoints * tt.backlog
				want := min(3*int(run/(15*time.Second)), tt.endpoints*int(run/(30*time.Second)), n)
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
// pace its share allows (2 attempts at a time at an endpoint; 3 at an account's
// endpoints on one host, all but one of the host's 4 places), within
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
		{"an account's endpoints", webhook.MaxEndpoints, 40, webhook.MaxEndpoints * 40 * took / 3},
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

// TestDeadSharedHostHoldsItsShare: a receiving host that many accounts' endpoints
// share (hooks.example.com, each account its own path) goes down and hangs every
// request until the timeout. Another account's endpoint on another host is delivered
// at once all the same, again and again while the dead host's backlog is worked, and
// the dead host never has more attempts at once than its host's share (4 of the
// deliverer's 8): each of its endpoints failing on its own, they would otherwise
// hold every attempt for the whole timeout.
func TestDeadSharedHostHoldsItsShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		mem := memory.NewWebhookStore()
		s := newWriteCounter(mem)
		const accounts, per, messages = 60, 2, 5
		start := time.Now()
		var dead []string
		for a := range accounts {
			for e := range per {
				id := fmt.Sprintf("ep_dead%03d_%d", a, e)
				reviewEndpoint(t, mem, id, fmt.Sprintf("acct_dead%03d", a), fmt.Sprintf("https://hooks.example.com/%03d/%d", a, e))
				dead = append(dead, id)
			}
		}
		for i := range messages {
			reviewEnqueue(t, mem, fmt.Sprintf("msg_dead%020d", i), dead...)
		}
		reviewEndpoint(t, mem, "ep_healthy", "acct_healthy", "https://ok.example.net/healthy/in")
		time.Sleep(time.Second) // the healthy delivery is due after the whole backlog
		reviewEnqueue(t, mem, "msg_healthy0", "ep_healthy")
		rt := newInFlight("/healthy/")
		d, stop := runHourly(t, s, rt)
		synctest.Wait()
		first := reviewDelivery(t, mem, "ep_healthy", "msg_healthy0")
		// More of the healthy endpoint's deliveries while the dead host's backlog
		// comes due again and again: each is delivered within a poll (a second).
		const run, every = 10 * time.Minute, 37 * time.Second
		var late []string
		for i := 1; time.Since(start) < run; i++ {
			time.Sleep(every)
			id := fmt.Sprintf("msg_healthy%d", i)
			reviewEnqueue(t, mem, id, "ep_healthy")
			enqueued := time.Now()
			time.Sleep(time.Second)
			synctest.Wait()
			if got := reviewDelivery(t, mem, "ep_healthy", id); got.State != webhook.Delivered || got.Last.At.Sub(enqueued) > time.Second {
				late = append(late, fmt.Sprintf("%s: %s after %d attempts", id, got.State, got.Attempts))
			}
		}
		stop()

		if first.State != webhook.Delivered || !first.Last.At.Equal(start.Add(time.Second)) {
			t.Errorf("the healthy endpoint's delivery, due at +1s, is %s after %d attempts (the last at %v), behind a dead host's %d deliveries",
				first.State, first.Attempts, first.Last.At, len(dead)*messages)
		}
		if len(late) > 0 {
			t.Errorf("healthy deliveries late while the dead host's backlog churns: %q", late)
		}
		top, got := rt.most("hooks.example.com")
		if top > webhook.DefaultHostConcurrency {
			t.Errorf("%d attempts at once at the dead host, want at most its share of %d", top, webhook.DefaultHostConcurrency)
		}
		// The dead host is worked at its share all along: 4 attempts at a time, each for
		// the 15 s timeout.
		if want := 4 * int(run/(15*time.Second)); got < want/2 || got > want+4 {
			t.Errorf("%d attempts at the dead host in %s, want about %d: its share, all the time", got, run, want)
		}
		s.check(t)
		st := d.Stats()
		// A delivery given back keeps its attempts: each dead delivery was attempted
		// at most as often as the dead host was.
		total := 0
		for _, id := range dead {
			for i := range messages {
				dl := reviewDelivery(t, mem, id, fmt.Sprintf("msg_dead%020d", i))
				total += dl.Attempts
			}
			if ep, err := mem.Endpoint(ctx, id); err != nil || !ep.Disabled.IsZero() {
				t.Errorf("endpoint %s: disabled %v (%s), %v", id, ep.Disabled, ep.DisabledReason, err)
			}
		}
		// (The attempts in flight when the deliverer stopped are not recorded.)
		if total > got || total < got-webhook.DefaultHostConcurrency {
			t.Errorf("the dead deliveries count %d attempts, the dead host got %d requests", total, got)
		}
		t.Logf("%d attempts at the dead host (at most %d at once); stats %+v", got, top, st)
	})
}

// slowStore is a Store, for a synctest bubble, whose claims and records take lat each,
// as a store's round trips do: a backlog given back takes time to write.
type slowStore struct {
	webhook.Store
	lat time.Duration
}

func (s slowStore) Claim(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]webhook.Delivery, error) {
	time.Sleep(s.lat)
	return s.Store.Claim(ctx, now, lease, limit)
}

func (s slowStore) Record(ctx context.Context, o webhook.Outcome) error {
	time.Sleep(s.lat)
	return s.Store.Record(ctx, o)
}

// TestBacklogSpreadOverMaxPark: an endpoint with a backlog of thousands of deliveries,
// to a receiver that hangs until the timeout, has it given back in one pass, past
// MaxPark of its pace. Its due times are spread over the whole MaxPark, and stay so
// as they come due and are given back again: no 10 s slice of the five minutes holds
// more than a tenth of them (evenly, a thirtieth), where they would all come due
// together at its end, in the order they were given back, and be given back together
// again. Each is given back about once per MaxPark; and another account's deliveries,
// fresh, are made within a few store round trips of their enqueueing all along.
func TestBacklogSpreadOverMaxPark(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, lat, slice = 3000, time.Millisecond, 10 * time.Second
		mem := memory.NewWebhookStore()
		counter := newWriteCounter(mem)
		reviewEndpoint(t, mem, "ep_backlog", "acct_busy", "https://busy.example.com/in")
		reviewEndpoint(t, mem, "ep_fresh", "acct_fresh", "https://ok.example.net/fresh/in")
		start := time.Now()
		for i := range n {
			reviewEnqueue(t, mem, fmt.Sprintf("msg_backlog%020d", i), "ep_backlog")
		}
		d, stop := runHourly(t, slowStore{counter, lat}, newInFlight("/fresh/"))
		// spread reads the backlog's pending due times, and fails t if a 10 s slice
		// holds more than a tenth of them.
		spread := func(when string) {
			t.Helper()
			bySlice := map[time.Duration]int{}
			pending, most := 0, 0
			q := webhook.Query{Limit: webhook.MaxLimit}
			for {
				page, err := mem.Deliveries(context.Background(), "ep_backlog", q)
				if err != nil {
					t.Fatal(err)
				}
				for _, dl := range page.Deliveries {
					if dl.State == webhook.Pending && time.Until(dl.Due) <= webhook.MaxPark { // given back, not retried in an hour
						pending++
						k := dl.Due.Sub(start) / slice
						bySlice[k]++
						most = max(most, bySlice[k])
					}
				}
				if page.Next == "" {
					break
				}
				q.Cursor = page.Next
			}
			if pending < n*9/10 || most > pending/10 {
				t.Errorf("%s: %d of the %d deliveries given back due in one 10 s slice, want at most a tenth", when, most, pending)
			}
			t.Logf("%s: %d given back, at most %d in a 10 s slice (%d slices)", when, pending, most, len(bySlice))
		}
		// The first pass gives the whole backlog back, due before any fresh delivery.
		time.Sleep(10 * time.Second)
		var late []string
		fresh := 0
		checks := []time.Duration{time.Minute, 6 * time.Minute, 11 * time.Minute, 16 * time.Minute}
		for len(checks) > 0 {
			time.Sleep(3 * time.Second)
			fresh++
			id := fmt.Sprintf("msg_fresh%d", fresh)
			reviewEnqueue(t, mem, id, "ep_fresh")
			enqueued := time.Now()
			d.Wake()
			time.Sleep(time.Second)
			if got := reviewDelivery(t, mem, "ep_fresh", id); got.State != webhook.Delivered || got.Last.At.Sub(enqueued) > 20*lat {
				late = append(late, fmt.Sprintf("%s at +%s: %s, %s after", id, enqueued.Sub(start).Round(time.Second), got.State, got.Last.At.Sub(enqueued)))
			}
			if len(checks) > 0 && time.Since(start) >= checks[0] {
				spread(fmt.Sprintf("at +%s", time.Since(start).Round(time.Second)))
				checks = checks[1:]
			}
		}
		stop()
		if len(late) > 0 {
			t.Errorf("%d of %d fresh deliveries late behind the backlog: %q", len(late), fresh, late)
		}
		counter.check(t)
		counter.mu.Lock()
		defer counter.mu.Unlock()
		all := 0
		for _, k := range counter.gaveBack {
			all += k
		}
		// Given back in the first pass, then about once per MaxPark: 16 minutes are
		// about 4 passes, and a few more while the endpoint's pace is learnt.
		if bound := 6 * n; all > bound {
			t.Errorf("%d give-backs of %d deliveries in 16 minutes, want at most %d", all, n, bound)
		}
		t.Logf("%d give-backs of %d deliveries, %d claims; stats %+v", all, n, counter.claims, d.Stats())
	})
}
