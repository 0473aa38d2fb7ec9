package rest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/wire"
)

// TestCharges proves how each outcome of an admitted call is billed: a success costs
// the API's cost; a handler's plain error (500 api_failed), a panic (500) and a result
// that cannot be encoded or is not an object (500) are refunded; a well-formed but wrong
// value judged by the API (400 rejected) is charged, since the API ran and gave its
// verdict. Each response carries the credit headers with the balance left, and the
// messages never leak the handler's internals.
func TestCharges(t *testing.T) {
	h := newHarness(t, config{})
	const allowance = 100000
	cases := []struct {
		name      string
		method    string
		path      string
		body      func() (string, string) // body, content type
		status    int
		code      string
		fragments []string
		cost      int64
	}{
		{name: "hash", method: "GET", path: "/v1/hash?text=hello&algorithm=md5", status: 200, cost: 1},
		{name: "hmac", method: "POST", path: "/v1/hmac", body: jsonBody(`{"message":"m","secret":"s","encoding":"base64"}`), status: 200, cost: 1},
		{name: "uuid-generator", method: "GET", path: "/v1/uuid-generator?count=3", status: 200, cost: 1},
		{name: "date-info", method: "GET", path: "/v1/date-info?date=2024-02-29", status: 200, cost: 1},
		{name: "echo", method: "POST", path: "/v1/echo", body: jsonBody(`{"message":"hi"}`), status: 200, cost: 1},
		{name: "image-info", method: "POST", path: "/v1/image-info", body: func() (string, string) {
			b, ct := multipartBody(t, formPart{"image", "x.png", pngImage(t, 3, 4)})
			return b.String(), ct
		}, status: 200, cost: 2},
		{name: "rejected date", method: "GET", path: "/v1/date-info?date=2026-02-30", status: 400, code: "rejected",
			fragments: []string{`"2026-02-30"`, "does not exist"}, cost: 1},
		{name: "plain error", method: "GET", path: "/v1/fail", status: 500, code: "api_failed",
			fragments: []string{"the API failed", "not charged"}, cost: 0},
		{name: "panic", method: "GET", path: "/v1/panic", status: 500, code: "api_failed",
			fragments: []string{"the API failed", "not charged"}, cost: 0},
		{name: "unencodable result", method: "GET", path: "/v1/nan", status: 500, code: "api_failed",
			fragments: []string{"the API failed", "not charged"}, cost: 0},
		{name: "result not an object", method: "GET", path: "/v1/list", status: 500, code: "api_failed",
			fragments: []string{"the API failed", "not charged"}, cost: 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			acct := h.newAccount(t, "pro") // each case on an account of its own
			hdrs := []header{key(acct.Key)}
			var r *response
			if c.body != nil {
				b, ct := c.body()
				r = h.do(t, c.method, c.path, strings.NewReader(b), append(hdrs, contentType(ct))...)
			} else {
				r = h.do(t, c.method, c.path, nil, hdrs...)
			}
			if c.status == http.StatusOK {
				wantOK(t, r)
			} else {
				wantError(t, r, c.status, c.code, c.fragments...)
				if strings.Contains(r.Error, "secret internal detail") {
					t.Errorf("the message leaks the handler's error: %q", r.Error)
				}
			}
			wantCreditHeaders(t, r, "pro", c.cost, allowance-c.cost, c.cost, allowance, feb15)
			if r.Int(wire.HeaderRateLimit) != 600 || r.Int(wire.HeaderRateLimitRemaining) < 0 {
				t.Errorf("rate headers %q / %q, want 600 and a count", r.Header.Get(wire.HeaderRateLimit), r.Header.Get(wire.HeaderRateLimitRemaining))
			}
			if b := h.balance(t, acct.ID); b.Remaining != allowance-c.cost || b.Used != c.cost {
				t.Errorf("balance %d used %d, want %d used %d", b.Remaining, b.Used, allowance-c.cost, c.cost)
			}
			// A refunded call does not count in the period's usage; a charged one does,
			// the call the API rejected included.
			api, _, _ := strings.Cut(strings.TrimPrefix(c.path, "/v1/"), "?")
			want := int64(0)
			if c.cost > 0 {
				want = 1
			}
			if a := h.analytics(t, key(acct.Key)); a.Calls[api] != want {
				t.Errorf("%s counted %d times in the period's usage, want %d (calls %v)", api, a.Calls[api], want, a.Calls)
			}
		})
	}
}

func jsonBody(s string) func() (string, string) {
	return func() (string, string) { return s, "application/json" }
}

// TestResults checks the data of each sample API over REST: the contract's field names
// and values.
func TestResults(t *testing.T) {
	h := newHarness(t, config{sampleOnly: true})
	acct := h.newAccount(t, "pro")
	d := wantOK(t, h.hash(t, acct.Key))
	if d["algorithm"] != "sha256" || d["hash"] != "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824" {
		t.Errorf("hash: %v", d)
	}
	d = wantOK(t, h.do(t, "POST", "/v1/hmac", strings.NewReader(`{"message":"The quick brown fox jumps over the lazy dog","secret":"key"}`), key(acct.Key), jsonType))
	if d["hmac"] != "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8" || d["encoding"] != "hex" {
		t.Errorf("hmac: %v", d)
	}
	d = wantOK(t, h.do(t, "GET", "/v1/date-info?date=2024-02-29", nil, key(acct.Key)))
	want := map[string]string{"date": "2024-02-29", "day-of-week": "Thursday", "iso:week": "9",
		"unix.seconds": "1709164800", "quarter/year": "Q1/2024", "1st-of-month": "2024-02-01", "is leap year": "true"}
	for k, v := range want {
		if got := fmt.Sprint(d[k]); got != v {
			t.Errorf("date-info %q = %s, want %s", k, got, v)
		}
	}
	d = wantOK(t, h.do(t, "GET", "/v1/uuid-generator?count=5", nil, key(acct.Key)))
	if u, _ := d["uuids"].([]any); len(u) != 5 || fmt.Sprint(d["count"]) != "5" {
		t.Errorf("uuid-generator: %v", d)
	}
	// A JSON body with a charset parameter, and non-ASCII text, round-trip.
	d = wantOK(t, h.do(t, "POST", "/v1/echo", strings.NewReader(`{"message":"héllo ✓","delay_ms":0}`), key(acct.Key), contentType("application/json; charset=utf-8")))
	if d["message"] != "héllo ✓" {
		t.Errorf("echo: %v", d)
	}
	// A URL-encoded form is accepted for a POST API too.
	d = wantOK(t, h.do(t, "POST", "/v1/hmac", strings.NewReader("message=a&secret=b&algorithm=sha1"), key(acct.Key), contentType("application/x-www-form-urlencoded")))
	if d["algorithm"] != "sha1" {
		t.Errorf("hmac form: %v", d)
	}
}

// TestCallTimeout proves that a call that outlives tollgate.Options.CallTimeout is
// answered 504 timeout and refunded, and that its concurrency slot is freed.
func TestCallTimeout(t *testing.T) {
	h := newHarness(t, config{svc: tollgate.Options{CallTimeout: 50 * time.Millisecond}})
	acct := h.newAccount(t, "tiny")
	start := time.Now()
	r := h.do(t, http.MethodGet, "/v1/block", nil, key(acct.Key))
	wantError(t, r, http.StatusGatewayTimeout, "timeout", "did not answer", "not charged")
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the timed-out call took %s", d) // the one generous wall-clock bound
	}
	wantCreditHeaders(t, r, "tiny", 0, 5, 0, 5, feb15)
	if b := h.balance(t, acct.ID); b.Remaining != 5 || b.Used != 0 {
		t.Errorf("balance %+v, want the charge refunded", b)
	}
	// The slot is free again: the next call (concurrency 1) goes through.
	r = h.hash(t, acct.Key)
	wantOK(t, r)
	wantCreditHeaders(t, r, "tiny", 1, 4, 1, 5, feb15)
}

// TestLazyRenewal proves the monthly renewal: after the account's period ends (a month
// after its creation, its billing anchor), the first call sees the plan's full
// allowance minus its own cost, Used equal to its cost, and the renewal date moved to
// a month after.
func TestLazyRenewal(t *testing.T) {
	h := newHarness(t, config{})
	acct := h.newAccount(t, "tiny")
	wantOK(t, h.hash(t, acct.Key))
	r := h.hash(t, acct.Key)
	wantCreditHeaders(t, r, "tiny", 1, 3, 2, 5, feb15)

	// Still the first period at the last second: no renewal.
	h.clock.Set(feb15.Add(-time.Second))
	r = h.hash(t, acct.Key)
	wantCreditHeaders(t, r, "tiny", 1, 2, 3, 5, feb15)

	h.clock.Set(feb15.Add(10 * 24 * time.Hour))
	mar15 := time.Date(2030, 3, 15, 12, 0, 0, 0, time.UTC)
	// Analytics sees the renewed position without being charged.
	a := h.analytics(t, key(acct.Key))
	if a.Credits.Remaining != 5 || a.Credits.Used != 0 || !a.Credits.Renewal.Equal(mar15) || len(a.Calls) != 0 {
		t.Errorf("analytics after the period ended: %+v, calls %v", a.Credits, a.Calls)
	}
	r = h.hash(t, acct.Key)
	wantOK(t, r)
	wantCreditHeaders(t, r, "tiny", 1, 4, 1, 5, mar15)

	// An account that spent everything gets its allowance back, not its old balance,
	// a month after its creation (February 25).
	broke := h.newAccount(t, "tiny", accountOpts{credits: credits(0)})
	wantError(t, h.hash(t, broke.Key), http.StatusTooManyRequests, "credits_exhausted")
	h.clock.Set(time.Date(2030, 3, 25, 12, 0, 0, 0, time.UTC))
	r = h.hash(t, broke.Key)
	wantOK(t, r)
	wantCreditHeaders(t, r, "tiny", 1, 4, 1, 5, time.Date(2030, 4, 25, 12, 0, 0, 0, time.UTC))
}

// TestClientGoneRefunds proves that a call whose client goes away while the API runs is
// refunded and frees its concurrency slot.
func TestClientGoneRefunds(t *testing.T) {
	h := newHarness(t, config{})
	acct := h.newAccount(t, "tiny")
	ctx, cancel := context.WithCancel(t.Context())
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/v1/block", nil)
	req.Header.Set("X-Api-Key", acct.Key)
	done := make(chan *httptest.ResponseRecorder)
	go func() {
		rec := httptest.NewRecorder()
		h.handler.ServeHTTP(rec, req)
		done <- rec
	}()
	h.block.WaitEntered(t)
	if b := h.balance(t, acct.ID); b.Remaining != 4 {
		t.Errorf("while the call runs the balance is %d, want 4 (reserved)", b.Remaining)
	}
	cancel()
	rec := <-done
	if rec.Code < 500 || rec.Header().Get(wire.HeaderCreditsCost) != "0" {
		t.Errorf("got %d with cost %q, want a 5xx with cost 0", rec.Code, rec.Header().Get(wire.HeaderCreditsCost))
	}
	if b := h.balance(t, acct.ID); b.Remaining != 5 || b.Used != 0 {
		t.Errorf("balance %+v after the client left, want the charge refunded", b)
	}
	// The slot is free: with concurrency 1, the next call goes through.
	wantOK(t, h.hash(t, acct.Key))
}

// TestFreeAPI: a call of an API that costs 0 is authenticated, rate-limited and
// counted as any other, and never charged: it is served when the balance is spent, and
// answers X-Credits-Cost: 0 with the balance as it was.
func TestFreeAPI(t *testing.T) {
	h := newHarness(t, config{usage: memory.NewUsageStore()})
	acct := h.newAccount(t, "tiny", accountOpts{credits: credits(0)})
	r := h.do(t, http.MethodGet, "/v1/free", nil, key(acct.Key))
	if r.Status != http.StatusOK || r.Int(wire.HeaderCreditsCost) != 0 || r.Int(wire.HeaderCreditsRemaining) != 0 {
		t.Fatalf("a free call at a zero balance: %d cost %q remaining %q %s", r.Status,
			r.Header.Get(wire.HeaderCreditsCost), r.Header.Get(wire.HeaderCreditsRemaining), r.Body)
	}
	// A paid call is refused at that balance; the free one is not.
	wantError(t, h.hash(t, acct.Key), http.StatusTooManyRequests, "credits_exhausted")
	// The plan's rate limit (2 a minute) holds for free calls too.
	wantError(t, h.do(t, http.MethodGet, "/v1/free", nil, key(acct.Key)), http.StatusTooManyRequests, "rate_limited")
	wantError(t, h.do(t, http.MethodGet, "/v1/free", nil, bearer("00000000-0000-4000-8000-000000000000")), http.StatusUnauthorized, "unauthorized")
	if b := h.balance(t, acct.ID); b.Remaining != 0 || b.Used != 0 {
		t.Errorf("balance %+v, want nothing charged", b)
	}
}

// TestChargeLess: over REST, a call whose handler charged less than its API's cost
// answers what it charged in X-Credits-Cost and takes only that from the balance; each
// item of a batch is charged its own, and the batch's answer sent again for its
// Idempotency-Key is the first, charged once.
func TestChargeLess(t *testing.T) {
	h := newHarness(t, config{})
	acct := h.newAccount(t, "pro")
	r := h.do(t, http.MethodGet, "/v1/metered?n=3", nil, key(acct.Key))
	if r.Status != http.StatusOK || r.Int(wire.HeaderCreditsCost) != 3 || r.Int(wire.HeaderCreditsRemaining) != 99997 {
		t.Fatalf("a call charged 3 of 10: %d cost %q remaining %q %s", r.Status, r.Header.Get(wire.HeaderCreditsCost),
			r.Header.Get(wire.HeaderCreditsRemaining), r.Body)
	}
	body := `{"items": [{"n": 2}, {"n": 5}, {"n": 0}]}`
	first := h.postBatch(t, "metered", body, key(acct.Key), header{"Idempotency-Key", "metered-1"})
	again := h.postBatch(t, "metered", body, key(acct.Key), header{"Idempotency-Key", "metered-1"})
	var data struct {
		Items []struct {
			Credits int64 `json:"credits"`
		} `json:"items"`
		Summary struct {
			Credits int64 `json:"credits"`
		} `json:"summary"`
	}
	if err := json.Unmarshal(first.Data, &data); err != nil {
		t.Fatal(err)
	}
	if len(data.Items) != 3 || data.Items[0].Credits != 2 || data.Items[1].Credits != 5 || data.Items[2].Credits != 0 ||
		data.Summary.Credits != 7 || first.Int(wire.HeaderCreditsCost) != 7 {
		t.Errorf("the batch: %s cost %q, want items charged 2, 5 and 0, 7 in all", first.Data, first.Header.Get(wire.HeaderCreditsCost))
	}
	if !bytes.Equal(again.Body, first.Body) || again.Header.Get(wire.HeaderIdempotentReplayed) != "true" {
		t.Errorf("the batch sent again: %s, want the first answer replayed", again.Body)
	}
	if b := h.balance(t, acct.ID); b.Used != 10 {
		t.Errorf("used %d, want 10: 3, then 7 for the batch, once", b.Used)
	}
}
