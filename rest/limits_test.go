package rest_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/wire"
)

// wantCreditHeaders checks the credit headers of a response: the cost, the balance
// after the call, the plan's allowance, the renewal date in RFC 3339 and the plan.
func wantCreditHeaders(t testing.TB, r *response, plan string, cost, remaining, used, limit int64, renewal time.Time) {
	t.Helper()
	for _, c := range []struct {
		name      string
		got, want int64
	}{
		{wire.HeaderCreditsCost, r.Int(wire.HeaderCreditsCost), cost},
		{wire.HeaderCreditsRemaining, r.Int(wire.HeaderCreditsRemaining), remaining},
		{wire.HeaderCreditsUsed, r.Int(wire.HeaderCreditsUsed), used},
		{wire.HeaderCreditsLimit, r.Int(wire.HeaderCreditsLimit), limit},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	got, err := time.Parse(time.RFC3339, r.Header.Get(wire.HeaderCreditsRenewal))
	if err != nil || !got.Equal(renewal) {
		t.Errorf("%s = %q, want %s in RFC 3339", wire.HeaderCreditsRenewal, r.Header.Get(wire.HeaderCreditsRenewal), renewal.Format(time.RFC3339))
	}
	if p := r.Header.Get(wire.HeaderPlan); p != plan {
		t.Errorf("%s = %q, want %q", wire.HeaderPlan, p, plan)
	}
}

// feb15 is the renewal date of an account created when the test clock starts (at t0,
// its billing anchor): a month later.
var feb15 = time.Date(2030, 2, 15, 12, 0, 0, 0, time.UTC)

// TestRateLimited proves the rate_limited 429: on the tiny plan (2 calls a minute) the
// third call within the minute is refused with Retry-After and the rate and credit
// headers, and costs nothing; once the clock moves on, calls go through again.
func TestRateLimited(t *testing.T) {
	h := newHarness(t, config{})
	acct := h.newAccount(t, "tiny")
	for i := range 2 {
		r := h.hash(t, acct.Key)
		wantOK(t, r)
		if got := r.Int(wire.HeaderRateLimitRemaining); got != int64(1-i) {
			t.Errorf("call %d: X-RateLimit-Remaining = %d, want %d", i+1, got, 1-i)
		}
	}
	r := h.hash(t, acct.Key)
	wantError(t, r, http.StatusTooManyRequests, "rate_limited", "rate limit", "2 calls per minute", "retry")
	if ra := r.Int("Retry-After"); ra < 1 || ra > 60 {
		t.Errorf("Retry-After = %q, want 1..60 seconds", r.Header.Get("Retry-After"))
	}
	if got := r.Int(wire.HeaderRateLimit); got != 2 {
		t.Errorf("X-RateLimit-Limit = %d, want 2", got)
	}
	if got := r.Int(wire.HeaderRateLimitRemaining); got != 0 {
		t.Errorf("X-RateLimit-Remaining = %d, want 0", got)
	}
	if r.Header.Get(wire.HeaderRateLimitPolicy) != "" || r.Header.Get(wire.HeaderRateLimitIETF) != "" {
		t.Errorf("the IETF RateLimit-Policy and RateLimit headers are sent without edge.Options.IETFRateHeaders: %v", r.Header)
	}
	wantCreditHeaders(t, r, "tiny", 0, 3, 2, 5, feb15)
	if b := h.balance(t, acct.ID); b.Remaining != 3 {
		t.Errorf("balance %d after the 429, want 3", b.Remaining)
	}
	// The limit is per account: another account is not affected.
	wantOK(t, h.hash(t, h.newAccount(t, "tiny").Key))
	// After Retry-After the account may call again.
	h.clock.Advance(time.Duration(r.Int("Retry-After")) * time.Second)
	wantOK(t, h.hash(t, acct.Key))
}

// TestConcurrencyLimited proves the concurrency_limited 429: on the tiny plan
// (concurrency 1) a call held open in the block API makes a second call fail; once it is
// released the next call succeeds. The refused call costs nothing.
func TestConcurrencyLimited(t *testing.T) {
	h := newHarness(t, config{})
	acct := h.newAccount(t, "tiny")
	first := make(chan *response, 1)
	go func() {
		r, err := h.send(t.Context(), http.MethodGet, "/v1/block", nil, key(acct.Key))
		if err != nil {
			t.Error(err)
		}
		first <- r
	}()
	h.block.WaitEntered(t)

	if a := h.analytics(t, key(acct.Key)); a.Concurrency.InUse != 1 || a.Concurrency.Limit != 1 {
		t.Errorf("analytics concurrency = %+v, want 1 of 1 in use", a.Concurrency)
	}
	r := h.hash(t, acct.Key)
	wantError(t, r, http.StatusTooManyRequests, "concurrency_limited", "concurrent", "1")
	if r.Int("Retry-After") < 1 {
		t.Errorf("Retry-After = %q, want at least 1", r.Header.Get("Retry-After"))
	}
	// The held call has reserved its credit; the refused one took nothing.
	wantCreditHeaders(t, r, "tiny", 0, 4, 1, 5, feb15)
	if b := h.balance(t, acct.ID); b.Remaining != 4 || b.Used != 1 {
		t.Errorf("balance %+v after the 429, want 4 remaining (only the held call reserved)", b)
	}

	h.block.Release()
	if r := <-first; r == nil || r.Status != http.StatusOK {
		t.Fatalf("the held call: %+v", r)
	}
	// The refused call used the minute's second rate event; move to the next minute.
	h.clock.Advance(time.Minute)
	r = h.hash(t, acct.Key)
	wantOK(t, r)
	wantCreditHeaders(t, r, "tiny", 1, 3, 2, 5, feb15)
	if a := h.analytics(t, key(acct.Key)); a.Concurrency.InUse != 0 {
		t.Errorf("after the calls, %d slots are in use", a.Concurrency.InUse)
	}
}

// TestCreditsExhausted proves the credits_exhausted 429: once the balance is spent the
// next call is refused, carries the credit headers, and the balance stays 0.
func TestCreditsExhausted(t *testing.T) {
	h := newHarness(t, config{})
	acct := h.newAccount(t, "pro", accountOpts{credits: credits(3)})
	wantOK(t, h.hash(t, acct.Key))
	// image-info costs 2 and 2 remain: it goes through and leaves 0.
	body, ct := multipartBody(t, formPart{"image", "a.png", pngImage(t, 2, 2)})
	r := h.do(t, http.MethodPost, "/v1/image-info", body, key(acct.Key), contentType(ct))
	wantOK(t, r)
	wantCreditHeaders(t, r, "pro", 2, 0, 3, 100000, feb15)

	for _, path := range []string{"/v1/hash?text=a", "/v1/uuid-generator"} {
		r := h.do(t, http.MethodGet, path, nil, key(acct.Key))
		wantError(t, r, http.StatusTooManyRequests, "credits_exhausted", "credits exhausted", "costs 1", "0 remain", feb15.Format(time.RFC3339))
		wantCreditHeaders(t, r, "pro", 0, 0, 3, 100000, feb15)
	}
	if b := h.balance(t, acct.ID); b.Remaining != 0 || b.Used != 3 {
		t.Errorf("balance %+v, want 0 remaining, 3 used", b)
	}
	// A call that costs more than what remains is refused too, leaving the rest.
	acct2 := h.newAccount(t, "pro", accountOpts{credits: credits(1)})
	body, ct = multipartBody(t, formPart{"image", "a.png", pngImage(t, 2, 2)})
	r = h.do(t, http.MethodPost, "/v1/image-info", body, key(acct2.Key), contentType(ct))
	wantError(t, r, http.StatusTooManyRequests, "credits_exhausted", "costs 2", "1 remain")
	if b := h.balance(t, acct2.ID); b.Remaining != 1 {
		t.Errorf("balance %d, want 1", b.Remaining)
	}
}

// TestConcurrentSpending proves that the balance is exact under load: 400 concurrent
// calls against a balance of 200 give exactly 200 successes and 200 credits_exhausted,
// and leave the balance at 0 with 200 used: no overdraft, no lost or double charge.
func TestConcurrentSpending(t *testing.T) {
	h := newHarness(t, config{})
	h.client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	t.Cleanup(h.client.CloseIdleConnections)
	acct := h.newAccount(t, "open", accountOpts{credits: credits(200)})

	const calls, workers = 400, 40
	var (
		mu       sync.Mutex
		statuses = map[int]int{}
		codes    = map[string]int{}
		torn     int
	)
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range jobs {
				r, err := h.send(t.Context(), http.MethodGet, "/v1/hash?text=hello", nil, key(acct.Key))
				if err != nil {
					t.Error(err)
					continue
				}
				if err := h.checkResponse(http.MethodGet, "/v1/hash", false, r); err != nil {
					t.Error(err)
				}
				mu.Lock()
				statuses[r.Status]++
				codes[r.Code()]++
				// Every response reports one consistent snapshot of the ledger.
				if rem, used := r.Int(wire.HeaderCreditsRemaining), r.Int(wire.HeaderCreditsUsed); rem < 0 || rem+used != 200 {
					torn++
				}
				mu.Unlock()
			}
		})
	}
	for i := range calls {
		jobs <- i
	}
	close(jobs)
	wg.Wait()

	if statuses[http.StatusOK] != 200 || statuses[http.StatusTooManyRequests] != 200 || len(statuses) != 2 {
		t.Errorf("statuses %v, want 200 × 200 and 200 × 429", statuses)
	}
	if codes["credits_exhausted"] != 200 {
		t.Errorf("error codes %v, want 200 × credits_exhausted", codes)
	}
	if torn > 0 {
		t.Errorf("%d responses report Remaining + Used != 200", torn)
	}
	b := h.balance(t, acct.ID)
	if b.Remaining != 0 || b.Used != 200 {
		t.Errorf("final balance %+v, want 0 remaining and 200 used", b)
	}
	if a := h.analytics(t, key(acct.Key)); a.Calls["hash"] != 200 {
		t.Errorf("analytics counts %d hash calls, want 200", a.Calls["hash"])
	}
}

// TestIETFRateHeaders proves edge.Options.IETFRateHeaders: with it, answers of a plan with a
// rate limit carry the IETF draft's RateLimit-Policy and RateLimit headers besides
// X-RateLimit-*, on a paid call, its 429 and a batch alike; a plan without a rate limit gets
// neither form.
func TestIETFRateHeaders(t *testing.T) {
	h := newHarness(t, config{edge: edge.Options{IETFRateHeaders: true}})
	acct := h.newAccount(t, "tiny")
	for i, want := range []struct {
		status    int
		remaining string
	}{{http.StatusOK, "1"}, {http.StatusOK, "0"}, {http.StatusTooManyRequests, "0"}} {
		r := h.hash(t, acct.Key)
		if r.Status != want.status {
			t.Fatalf("call %d: status %d, want %d: %s", i+1, r.Status, want.status, r.Body)
		}
		if got := r.Header.Get(wire.HeaderRateLimitPolicy); got != `"default";q=2;w=60` {
			t.Errorf("call %d: RateLimit-Policy = %q", i+1, got)
		}
		if got := r.Header.Get(wire.HeaderRateLimitIETF); !strings.HasPrefix(got, `"default";r=`+want.remaining+";t=") {
			t.Errorf("call %d: RateLimit = %q, want r=%s", i+1, got, want.remaining)
		}
		if got := r.Header.Get(wire.HeaderRateLimitRemaining); got != want.remaining {
			t.Errorf("call %d: X-RateLimit-Remaining = %q, want %s", i+1, got, want.remaining)
		}
	}
	// A batch's answer carries them as a single call's does: its two items are two
	// events of the limit.
	r := h.postBatch(t, "hash", `{"items": [{"text": "a"}, {"text": "b"}]}`, key(h.newAccount(t, "tiny").Key))
	wantBatch(t, r, []string{"", ""}, []int64{1, 1})
	if got := r.Header.Get(wire.HeaderRateLimitPolicy); got != `"default";q=2;w=60` {
		t.Errorf("batch: RateLimit-Policy = %q", got)
	}
	if got := r.Header.Get(wire.HeaderRateLimitIETF); !strings.HasPrefix(got, `"default";r=0;t=`) {
		t.Errorf("batch: RateLimit = %q, want r=0", got)
	}
	r = h.hash(t, h.newAccount(t, "open").Key)
	wantOK(t, r)
	for _, name := range []string{wire.HeaderRateLimitPolicy, wire.HeaderRateLimitIETF, wire.HeaderRateLimit} {
		if got := r.Header.Get(name); got != "" {
			t.Errorf("plan without a rate limit: %s = %q", name, got)
		}
	}
}
