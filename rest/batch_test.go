package rest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/rest"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/usage"
	"github.com/tollgate-dev/tollgate/wire"
)

// batchData is the data of a batch's answer.
type batchData struct {
	Items []struct {
		Status  string          `json:"status"`
		Error   *string         `json:"error"`
		Data    json.RawMessage `json:"data"`
		Code    *string         `json:"code"`
		Credits *int64          `json:"credits"`
	} `json:"items"`
	Summary *struct {
		OK      *int64 `json:"ok"`
		Failed  *int64 `json:"failed"`
		Credits *int64 `json:"credits"`
	} `json:"summary"`
}

// postBatch posts a batch body to api's batch endpoint with a key, as JSON unless the
// headers say otherwise.
func (h *harness) postBatch(t *testing.T, api, body string, hdrs ...header) *response {
	t.Helper()
	return h.do(t, http.MethodPost, "/v1/"+api+"/batch", strings.NewReader(body), append([]header{jsonType}, hdrs...)...)
}

// wantBatch checks a batch's answer: 200, each item's envelope (code "" for a success)
// and credits, the summary, and X-Credits-Cost.
func wantBatch(t *testing.T, r *response, codes []string, credits []int64) batchData {
	t.Helper()
	wantOK(t, r)
	var d batchData
	if err := json.Unmarshal(r.Data, &d); err != nil {
		t.Fatalf("batch data %s: %v", r.Data, err)
	}
	if len(d.Items) != len(codes) || d.Summary == nil {
		t.Fatalf("batch data %s: want %d items and a summary", r.Data, len(codes))
	}
	var ok, charged int64
	for i, it := range d.Items {
		if it.Credits == nil || *it.Credits != credits[i] {
			t.Errorf("item %d credits %v, want %d", i, it.Credits, credits[i])
		}
		if codes[i] == "" {
			if it.Status != "ok" || it.Error != nil || it.Code != nil || !bytes.HasPrefix(it.Data, []byte("{")) {
				t.Errorf("item %d: %s, want a success envelope", i, r.Data)
			}
			ok++
		} else if it.Status != "error" || it.Error == nil || *it.Error == "" || it.Code == nil || *it.Code != codes[i] || string(it.Data) != "null" {
			t.Errorf("item %d: %s, want an error envelope with code %s", i, r.Data, codes[i])
		}
		charged += credits[i]
	}
	s := d.Summary
	if s.OK == nil || *s.OK != ok || s.Failed == nil || *s.Failed != int64(len(codes))-ok || s.Credits == nil || *s.Credits != charged {
		t.Errorf("summary %s, want ok %d, failed %d, credits %d", r.Data, ok, int64(len(codes))-ok, charged)
	}
	if got := r.Int(wire.HeaderCreditsCost); got != charged {
		t.Errorf("X-Credits-Cost %d, want %d", got, charged)
	}
	return d
}

// TestBatch proves POST /v1/{api_id}/batch: each item answered in its place with its
// own envelope (the invalid ones naming the parameter, never charged), the summary, the
// credit and rate headers of the batch, a GET API's parameters given as JSON, and the
// balance charged for the valid items only.
func TestBatch(t *testing.T) {
	h := newHarness(t, config{})
	acct := h.newAccount(t, "pro")
	r := h.postBatch(t, "hash", `{"items": [{"text": "hello"}, {"text": "hello", "algorithm": "md5"}, {"algorithm": "sha1"},
		{"text": "x", "algorithm": "crc32"}, {"text": "x", "salt": 1}, 5]}`, key(acct.Key))
	d := wantBatch(t, r, []string{"", "", "invalid_input", "invalid_input", "invalid_input", "invalid_input"}, []int64{1, 1, 0, 0, 0, 0})
	if string(d.Items[0].Data) != `{"algorithm":"sha256","hash":"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"}` {
		t.Errorf("the first item's data %s", d.Items[0].Data)
	}
	for i, param := range map[int]string{2: `"text"`, 3: `"algorithm"`, 4: `"salt"`} {
		if !strings.Contains(*d.Items[i].Error, param) {
			t.Errorf("item %d's error %q does not name %s", i, *d.Items[i].Error, param)
		}
	}
	if !strings.Contains(*d.Items[5].Error, "JSON object") {
		t.Errorf("the number item's error %q", *d.Items[5].Error)
	}
	wantCreditHeaders(t, r, "pro", 2, 99998, 2, 100000, feb15)
	if got := r.Int(wire.HeaderRateLimitRemaining); got != 598 {
		t.Errorf("X-RateLimit-Remaining %d, want 598: two items, two events", got)
	}
	if b := h.balance(t, acct.ID); b.Remaining != 99998 {
		t.Errorf("balance %d, want 99998", b.Remaining)
	}
	if a := h.analytics(t, key(acct.Key)); a.Calls["hash"] != 2 {
		t.Errorf("hash counted %d times, want 2", a.Calls["hash"])
	}
	// A POST API, and an API whose items all fail on the service's side: refunded.
	wantBatch(t, h.postBatch(t, "hmac", `{"items": [{"message": "m", "secret": "k"}, {"message": "m"}]}`, key(acct.Key)),
		[]string{"", "invalid_input"}, []int64{1, 0})
	r = h.postBatch(t, "panic", `{"items": [{}, {}]}`, key(acct.Key))
	d = wantBatch(t, r, []string{"api_failed", "api_failed"}, []int64{0, 0})
	if strings.Contains(string(r.Body), "secret") || !strings.Contains(*d.Items[0].Error, "not charged") {
		t.Errorf("a failed item's error %q: want no internal detail, and to say it was not charged", *d.Items[0].Error)
	}
	if b := h.balance(t, acct.ID); b.Remaining != 99997 {
		t.Errorf("balance %d after the hmac and panic batches, want 99997", b.Remaining)
	}
}

// TestBatchRefused proves the refusals of a batch as a whole: the usual error envelope,
// status and X-Error-Code, the credit headers, and nothing charged.
func TestBatchRefused(t *testing.T) {
	h := newHarness(t, config{})
	acct := h.newAccount(t, "pro")
	free := h.newAccount(t, "free")
	restOnly := h.newSubKey(t, acct, "rest", auth.RestrictionSpec{Channels: []string{"rest"}})
	tests := []struct {
		name, method, path, ct, body string
		k                            string
		status                       int
		code                         string
		fragments                    []string
	}{
		{"GET", "GET", "/v1/hash/batch", "", "", acct.Key, 405, "method_not_allowed", []string{"POST"}},
		{"no content type", "POST", "/v1/hash/batch", "", `{"items": [{}]}`, acct.Key, 415, "unsupported_media_type", []string{"application/json"}},
		{"a form", "POST", "/v1/hash/batch", "application/x-www-form-urlencoded", "items=1", acct.Key, 415, "unsupported_media_type", []string{"application/json"}},
		{"multipart to a file API", "POST", "/v1/image-info/batch", "multipart/form-data; boundary=x", "--x--", acct.Key, 415, "unsupported_media_type", []string{"URL form", "url", "image"}},
		{"not JSON", "POST", "/v1/hash/batch", "application/json", `{"items": [`, acct.Key, 400, "invalid_input", []string{"not valid JSON"}},
		{"an array", "POST", "/v1/hash/batch", "application/json", `[{"text": "a"}]`, acct.Key, 400, "invalid_input", []string{`{"items"`}},
		{"no items", "POST", "/v1/hash/batch", "application/json", `{}`, acct.Key, 400, "invalid_input", []string{"no items"}},
		{"empty items", "POST", "/v1/hash/batch", "application/json", `{"items": []}`, acct.Key, 400, "invalid_input", []string{"no items", "1 to 100"}},
		{"items not an array", "POST", "/v1/hash/batch", "application/json", `{"items": {"text": "a"}}`, acct.Key, 400, "invalid_input", []string{"array"}},
		{"another field", "POST", "/v1/hash/batch", "application/json", `{"items": [], "mode": 1}`, acct.Key, 400, "invalid_input", []string{"only field is items"}},
		{"items twice", "POST", "/v1/hash/batch", "application/json", `{"items": [{"text": "a"}], "items": []}`, acct.Key, 400, "invalid_input", []string{"once"}},
		{"trailing data", "POST", "/v1/hash/batch", "application/json", `{"items": [{"text": "a"}]} {}`, acct.Key, 400, "invalid_input", []string{"nothing after it"}},
		{"a query string", "POST", "/v1/hash/batch?text=a", "application/json", `{"items": [{"text": "a"}]}`, acct.Key, 400, "invalid_input", []string{"query string"}},
		{"more items than the plan", "POST", "/v1/hash/batch", "application/json", `{"items": [` + strings.Repeat(`{"text": "a"},`, 6) + `{"text": "a"}]}`,
			free.Key, 400, "invalid_input", []string{"more than 5 items", "at most 5 per batch", "burst is 5"}},
		{"unknown API", "POST", "/v1/nope/batch", "application/json", `{"items": [{}]}`, acct.Key, 404, "not_found", []string{"nope"}},
		{"a key without the batch channel", "POST", "/v1/hash/batch", "application/json", `{"items": [{"text": "a"}]}`, restOnly.Key, 403, "forbidden", []string{"batch"}},
		{"unknown key", "POST", "/v1/hash/batch", "application/json", `{"items": [{"text": "a"}]}`, "00000000-0000-4000-8000-000000000000", 401, "unauthorized", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hdrs := []header{key(tt.k)}
			if tt.ct != "" {
				hdrs = append(hdrs, contentType(tt.ct))
			}
			r := h.do(t, tt.method, tt.path, strings.NewReader(tt.body), hdrs...)
			wantError(t, r, tt.status, tt.code, tt.fragments...)
			if tt.status == 405 && r.Header.Get("Allow") != "POST, OPTIONS" {
				t.Errorf("Allow %q, want POST, OPTIONS", r.Header.Get("Allow"))
			}
			// The key itself refused (401, or 403 for its channel) carries no figures.
			if tt.status != 401 && tt.code != "forbidden" && r.Header.Get(wire.HeaderCreditsRemaining) == "" {
				t.Error("a refusal of a known caller without the credit headers")
			}
		})
	}
	if b := h.balance(t, acct.ID); b.Used != 0 {
		t.Errorf("the refused batches charged %d credits", b.Used)
	}
	if r := h.do(t, "POST", "/v1/hash/batch", strings.NewReader(`{"items": [{"text": "a"}]}`), jsonType); !r.Edge {
		t.Errorf("a batch without a key: %d, want the edge's 403", r.Status)
	}
	if r := h.do(t, "OPTIONS", "/v1/hash/batch", nil, header{"Origin", "https://app.example"}, header{"Access-Control-Request-Headers", "idempotency-key"}); !strings.Contains(r.Header.Get("Access-Control-Allow-Headers"), "Idempotency-Key") {
		t.Errorf("the preflight of a batch allows the headers %q, want Idempotency-Key among them", r.Header.Get("Access-Control-Allow-Headers"))
	}
}

// TestBatchLimits proves the limits of a batch on REST: the body may grow with the
// plan's batch size (413 past it), the plan's size is what GET /v1/analytics reports,
// and a batch whose cost exceeds the balance (429 credits_exhausted) or whose events
// the rate limit cannot take (429 rate_limited, Retry-After) is refused whole.
func TestBatchLimits(t *testing.T) {
	h := newHarness(t, config{rest: rest.Options{MaxBodyBytes: 1000, BatchItemBytes: 100}})
	free, pro := h.newAccount(t, "free"), h.newAccount(t, "pro")
	// free: 5 items, 1000+5*100 bytes; pro: 100 items, 1000+100*100 bytes.
	if a := h.analytics(t, key(free.Key)); a.BatchMaxItems != 5 {
		t.Errorf("free plan's batch_max_items %d, want 5: batch_max_items 10, held to the burst of 5", a.BatchMaxItems)
	}
	if a := h.analytics(t, key(pro.Key)); a.BatchMaxItems != 100 {
		t.Errorf("pro plan's batch_max_items %d, want 100", a.BatchMaxItems)
	}
	big := `{"items": [{"text": "` + strings.Repeat("a", 2000) + `"}]}`
	wantError(t, h.postBatch(t, "hash", big, key(free.Key)), 413, "body_too_large", "1500 bytes")
	wantBatch(t, h.postBatch(t, "hash", big, key(pro.Key)), []string{""}, []int64{1})

	short := h.newAccount(t, "free", accountOpts{credits: credits(3)})
	wantError(t, h.postBatch(t, "hash", `{"items": [{"text": "a"}, {"text": "b"}, {"text": "c"}, {"text": "d"}, {"text": 5}]}`, key(short.Key)),
		429, "credits_exhausted", "costs 4", "3 remain")
	if b := h.balance(t, short.ID); b.Remaining != 3 || b.Used != 0 {
		t.Errorf("balance %+v after a batch over it, want 3 remaining and nothing used", b)
	}
	poor := h.newAccount(t, "tiny") // 5 credits, 2 calls a minute
	r := h.postBatch(t, "hash", `{"items": [{"text": "a"}, {"text": "b"}]}`, key(poor.Key))
	wantBatch(t, r, []string{"", ""}, []int64{1, 1})
	r = h.postBatch(t, "hash", `{"items": [{"text": "a"}]}`, key(poor.Key))
	wantError(t, r, 429, "rate_limited", "rate limit", "retry in 30s")
	if r.Header.Get("Retry-After") != "30" {
		t.Errorf("Retry-After %q, want 30", r.Header.Get("Retry-After"))
	}
	if b := h.balance(t, poor.ID); b.Remaining != 3 {
		t.Errorf("balance %d, want 3: only the admitted batch was charged", b.Remaining)
	}
}

// TestBatchFileURLForm proves a file API's batch in the URL form: each item's file is
// fetched and checked, a fetch that fails is answered for its item and refunded.
func TestBatchFileURLForm(t *testing.T) {
	h := newHarness(t, config{svc: tollgate.Options{Fetch: tollgate.FetchOptions{AllowPrivate: true}}})
	acct := h.newAccount(t, "pro")
	img, _ := imageServer(t, pngImage(t, 9, 10), jpegImage(t, 11, 12))
	body, _ := json.Marshal(map[string]any{"items": []any{
		map[string]any{"url": img.URL + "/ok.png"},
		map[string]any{"url": img.URL + "/missing.png"},
		map[string]any{},
		map[string]any{"url": img.URL + "/moved"},
	}})
	d := wantBatch(t, h.postBatch(t, "image-info", string(body), key(acct.Key)),
		[]string{"", "invalid_input", "invalid_input", ""}, []int64{2, 0, 0, 2})
	if !strings.Contains(string(d.Items[0].Data), `"width":9`) || !strings.Contains(string(d.Items[3].Data), `"format":"jpeg"`) {
		t.Errorf("items %s and %s", d.Items[0].Data, d.Items[3].Data)
	}
	if msg := *d.Items[2].Error; !strings.Contains(msg, `"url"`) || !strings.Contains(msg, "by its address") {
		t.Errorf("the item without a url: %q, want it to name url and say a batch takes the file by its address", msg)
	}
	if b := h.balance(t, acct.ID); b.Remaining != 100000-4 {
		t.Errorf("balance %d, want %d: the failed fetch refunded", b.Remaining, 100000-4)
	}
}

// TestBatchIdempotencyKey proves the Idempotency-Key of a batch over REST: the retry
// gets the first answer byte for byte, marked Idempotent-Replayed, and is not charged;
// the same key with another body is a 422; a key that is not printable ASCII is a 400.
func TestBatchIdempotencyKey(t *testing.T) {
	h := newHarness(t, config{svc: tollgate.Options{Idempotency: &tollgate.IdempotencyOptions{Store: memory.NewIdempotencyStore(nil)}}})
	acct := h.newAccount(t, "pro")
	body := `{"items": [{"text": "a"}, {"algorithm": "md5"}]}`
	first := h.postBatch(t, "hash", body, key(acct.Key), header{"Idempotency-Key", "7c1d0b6e-retry"})
	wantBatch(t, first, []string{"", "invalid_input"}, []int64{1, 0})
	// Whitespace and the order of an item's fields do not make another request.
	again := h.postBatch(t, "hash", `{"items":[{"text":"a"},{"algorithm":"md5"}]}`, key(acct.Key), header{"Idempotency-Key", "7c1d0b6e-retry"})
	if !bytes.Equal(again.Body, first.Body) || again.Header.Get(wire.HeaderIdempotentReplayed) != "true" || first.Header.Get(wire.HeaderIdempotentReplayed) != "" {
		t.Errorf("the retry %s (replayed %q), want the first answer %s replayed", again.Body, again.Header.Get(wire.HeaderIdempotentReplayed), first.Body)
	}
	if again.Int(wire.HeaderCreditsCost) != 1 || again.Int(wire.HeaderCreditsRemaining) != 99999 {
		t.Errorf("the retry's headers: cost %d, remaining %d; want the first charge, 1, and the balance, 99999",
			again.Int(wire.HeaderCreditsCost), again.Int(wire.HeaderCreditsRemaining))
	}
	wantError(t, h.postBatch(t, "hash", `{"items": [{"text": "b"}]}`, key(acct.Key), header{"Idempotency-Key", "7c1d0b6e-retry"}),
		422, "idempotency_key_reused", "another request")
	wantError(t, h.postBatch(t, "hash", body, key(acct.Key), header{"Idempotency-Key", "caf\u00e9"}), 400, "invalid_input", "printable ASCII")
	if b := h.balance(t, acct.ID); b.Used != 1 {
		t.Errorf("used %d, want 1: the batch charged once", b.Used)
	}
	// A service given no idempotency store keeps the answers in its memory.
	plain := newHarness(t, config{})
	plainKey := plain.newAccount(t, "pro").Key
	first = plain.postBatch(t, "hash", body, key(plainKey), header{"Idempotency-Key", "k"})
	again = plain.postBatch(t, "hash", body, key(plainKey), header{"Idempotency-Key", "k"})
	if first.Status != 200 || again.Header.Get(wire.HeaderIdempotentReplayed) != "true" || !bytes.Equal(again.Body, first.Body) {
		t.Errorf("a key on a service given no store: %d then %d replayed %q, want the first answer again",
			first.Status, again.Status, again.Header.Get(wire.HeaderIdempotentReplayed))
	}
}

// TestBatchUsage proves the usage records of a batch: one per item, channel batch, the
// invalid ones as refused.
func TestBatchUsage(t *testing.T) {
	h := newHarness(t, config{usage: memory.NewUsageStore()})
	acct := h.newAccount(t, "pro")
	wantBatch(t, h.postBatch(t, "hash", `{"items": [{"text": "a"}, {"text": "b"}, {"text": 1}]}`, key(acct.Key)), []string{"", "", "invalid_input"}, []int64{1, 1, 0})
	wantOK(t, h.hash(t, acct.Key))
	if err := h.rec.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	res, err := h.mgr.Usage(t.Context(), usage.Query{Account: acct.ID, From: t0.Add(-time.Hour), To: t0.Add(time.Hour),
		Interval: usage.Hour, By: usage.ByChannel})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][2]int64{}
	for _, s := range res.Series {
		for _, p := range s.Points {
			c := got[s.Group]
			got[s.Group] = [2]int64{c[0] + p.Calls, c[1] + p.Errors["invalid_input"]}
		}
	}
	if want := map[string][2]int64{"batch": {3, 1}, "rest": {1, 0}}; got["batch"] != want["batch"] || got["rest"] != want["rest"] || len(got) != 2 {
		t.Errorf("usage by channel (calls, invalid) %v, want %v", got, want)
	}
}

// TestBatchOfAnAPINamedBatch proves that "batch" need not be a reserved id: an API
// named batch is called at /v1/batch, and its batch is at /v1/batch/batch.
func TestBatchOfAnAPINamedBatch(t *testing.T) {
	h := newHarness(t, config{})
	reg := h.svc.Catalog().(*catalog.Registry)
	err := reg.Register(catalog.API{ID: "batch", Title: "Batch", Description: "Answers its n.", Method: http.MethodGet, Cost: 1,
		Params: []catalog.Param{{Name: "n", Type: catalog.Integer, Required: true}},
		Handler: catalog.HandlerFunc(func(_ context.Context, req *catalog.Request) (any, error) {
			return map[string]any{"n": req.Params.Int("n")}, nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	acct := h.newAccount(t, "pro")
	if d := wantOK(t, h.do(t, http.MethodGet, "/v1/batch?n=4", nil, key(acct.Key))); d["n"] != json.Number("4") {
		t.Errorf("GET /v1/batch: %v", d)
	}
	d := wantBatch(t, h.postBatch(t, "batch", `{"items": [{"n": 1}, {"n": 2}]}`, key(acct.Key)), []string{"", ""}, []int64{1, 1})
	if string(d.Items[1].Data) != `{"n":2}` {
		t.Errorf("POST /v1/batch/batch: %s", d.Items[1].Data)
	}
}
