package multiinstance_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/auth"
)

// batchAnswer is a batch's answer, read.
type batchAnswer struct {
	status int
	code   string // X-Error-Code
	header http.Header
	raw    []byte
	items  []batchItem
	sum    struct{ OK, Failed, Credits int64 }
}

type batchItem struct {
	Status  string          `json:"status"`
	Error   *string         `json:"error"`
	Data    json.RawMessage `json:"data"`
	Code    string          `json:"code"`
	Credits int64           `json:"credits"`
}

// batch posts a batch body to instance i, with a key and optional headers (name,
// value, ...).
func (c *cluster) batch(t *testing.T, i int, api, key, body string, headers ...string) batchAnswer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, c.instances[i%len(c.instances)].srv.URL+"/v1/"+api+"/batch", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Api-Key", key)
	req.Header.Set("Content-Type", "application/json")
	for j := 0; j+1 < len(headers); j += 2 {
		req.Header.Set(headers[j], headers[j+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	a := batchAnswer{status: resp.StatusCode, code: resp.Header.Get("X-Error-Code"), header: resp.Header}
	if a.raw, err = io.ReadAll(resp.Body); err != nil {
		t.Fatal(err)
	}
	if a.status != http.StatusOK {
		return a
	}
	var env struct {
		Data struct {
			Items   []batchItem `json:"items"`
			Summary struct {
				OK      int64 `json:"ok"`
				Failed  int64 `json:"failed"`
				Credits int64 `json:"credits"`
			} `json:"summary"`
		} `json:"data"`
	}
	if err := json.Unmarshal(a.raw, &env); err != nil {
		t.Fatalf("batch answer %s: %v", a.raw, err)
	}
	a.items = env.Data.Items
	a.sum.OK, a.sum.Failed, a.sum.Credits = env.Data.Summary.OK, env.Data.Summary.Failed, env.Data.Summary.Credits
	return a
}

// want checks the answer's status and error code.
func (a batchAnswer) want(t *testing.T, what string, status int, code string) batchAnswer {
	t.Helper()
	if a.status != status || a.code != code {
		t.Fatalf("%s: %d %q, want %d %q: %s", what, a.status, a.code, status, code, a.raw)
	}
	return a
}

// wantItems checks each item's code ("" for success) and credits, and the summary.
func (a batchAnswer) wantItems(t *testing.T, what string, codes []string, credits []int64) {
	t.Helper()
	if len(a.items) != len(codes) {
		t.Fatalf("%s: %d items, want %d: %s", what, len(a.items), len(codes), a.raw)
	}
	var ok, charged int64
	for i, it := range a.items {
		switch {
		case codes[i] == "" && (it.Status != "ok" || it.Error != nil || len(it.Data) == 0 || it.Data[0] != '{'):
			t.Errorf("%s: item %d %+v, want a success", what, i, it)
		case codes[i] != "" && (it.Status != "error" || it.Code != codes[i] || it.Error == nil || *it.Error == "" || string(it.Data) != "null"):
			t.Errorf("%s: item %d %+v, want the error %s", what, i, it, codes[i])
		}
		if it.Credits != credits[i] {
			t.Errorf("%s: item %d charged %d, want %d", what, i, it.Credits, credits[i])
		}
		if it.Status == "ok" {
			ok++
		}
		charged += it.Credits
	}
	if a.sum.OK != ok || a.sum.Failed != int64(len(codes))-ok || a.sum.Credits != charged {
		t.Errorf("%s: summary %+v, want %d ok, %d failed, %d credits", what, a.sum, ok, int64(len(codes))-ok, charged)
	}
	if got := a.header.Get("X-Credits-Cost"); got != strconv.FormatInt(charged, 10) {
		t.Errorf("%s: X-Credits-Cost %q, want %d", what, got, charged)
	}
}

// TestBatchOnEveryStore runs batches on two instances of every deployment: valid and
// invalid items (the invalid ones answered, named and never charged), an item that
// fails on the service's side (refunded exactly, the ledger checked), a cost over the
// balance (nothing charged), a rate limit reached on one instance refusing a batch
// whole on the other, the batch channel of key restrictions, and an idempotent retry
// on the other instance (one charge, the same answer; another body refused).
func TestBatchOnEveryStore(t *testing.T) {
	for _, d := range deployments() {
		t.Run(d.name, func(t *testing.T) {
			c := start(t, d, 2)
			acct, _, key := c.account(t, "busy", 100)

			// Valid and invalid items.
			c.batch(t, 0, "hash", key, `{"items": [{"text": "a"}, {"algorithm": "md5"}, {"text": "b", "algorithm": "md5"}, {"text": 7}, "x"]}`).
				want(t, "valid and invalid items", 200, "").
				wantItems(t, "valid and invalid items", []string{"", "invalid_input", "", "invalid_input", "invalid_input"}, []int64{1, 0, 1, 0, 0})
			if b := c.balance(t, 1, acct); b.Remaining != 98 || b.Used != 2 {
				t.Errorf("balance %+v after two valid items, want 98 remaining, 2 used", b)
			}

			// Items that fail on the service's side are refunded, one by one.
			a := c.batch(t, 1, "flaky", key, `{"items": [{"n": 0}, {"n": 1}, {"n": 2}, {"n": 3}, {"n": 4}]}`).want(t, "flaky items", 200, "")
			a.wantItems(t, "flaky items", []string{"", "api_failed", "", "api_failed", ""}, []int64{1, 0, 1, 0, 1})
			if b := c.balance(t, 0, acct); b.Remaining != 95 || b.Used != 5 {
				t.Errorf("balance %+v after three kept items, want 95 remaining, 5 used", b)
			}
			data, _ := c.call(t, 0, "/v1/analytics", key).body["data"].(map[string]any)
			if calls, _ := data["calls"].(map[string]any); calls["flaky"] != 3.0 || calls["hash"] != 2.0 {
				t.Errorf("the ledger's call counts %v, want 3 flaky and 2 hash: each charged item once, failed ones uncounted", calls)
			}

			// A cost over the balance: refused whole, nothing charged.
			poor, _, poorKey := c.account(t, "busy", 3)
			c.batch(t, 0, "hash", poorKey, `{"items": [{"text": "a"}, {"text": "b"}, {"text": "c"}, {"text": "d"}]}`).
				want(t, "a batch over the balance", 429, "credits_exhausted")
			if b := c.balance(t, 1, poor); b.Remaining != 3 || b.Used != 0 {
				t.Errorf("balance %+v after the refused batch, want 3 remaining, nothing used", b)
			}

			// The rate limit, each item an event: spent on one instance, refused whole on
			// the other, with Retry-After.
			_, _, slowKey := c.account(t, "batchy", 100)
			c.batch(t, 0, "hash", slowKey, `{"items": [{"text": "a"}, {"text": "b"}, {"text": "c"}]}`).want(t, "three of five events", 200, "")
			r := c.batch(t, 1, "hash", slowKey, `{"items": [{"text": "a"}, {"text": "b"}, {"text": "c"}]}`).want(t, "three more events", 429, "rate_limited")
			if r.header.Get("Retry-After") == "" || r.header.Get("X-Credits-Remaining") != "97" {
				t.Errorf("rate-limited batch: Retry-After %q, X-Credits-Remaining %q; want a wait and 97",
					r.header.Get("Retry-After"), r.header.Get("X-Credits-Remaining"))
			}
			c.batch(t, 1, "hash", slowKey, `{"items": [{"text": "a"}, {"text": "b"}, {"text": "c"}, {"text": "d"}, {"text": "e"}, {"text": "f"}]}`).
				want(t, "more items than the burst", 400, "invalid_input")

			// The batch channel.
			_, restOnly, err := c.instances[0].mgr.CreateKey(t.Context(), acct, accounts.NewKey{Name: "rest", Restrictions: mustRestrictions(t, auth.RestrictionSpec{Channels: []string{"rest"}})})
			if err != nil {
				t.Fatal(err)
			}
			c.batch(t, 1, "hash", restOnly, `{"items": [{"text": "a"}]}`).want(t, "a key limited to rest", 403, "forbidden")
			_, batchToo, err := c.instances[0].mgr.CreateKey(t.Context(), acct, accounts.NewKey{Name: "batch", Restrictions: mustRestrictions(t, auth.RestrictionSpec{Channels: []string{"rest", "batch"}})})
			if err != nil {
				t.Fatal(err)
			}
			c.batch(t, 1, "hash", batchToo, `{"items": [{"text": "a"}]}`).want(t, "a key given batch", 200, "")

			// An idempotent retry on the other instance: the first answer, charged once.
			before := c.balance(t, 0, acct).Remaining
			body := `{"items": [{"n": 0}, {"n": 1}, {"n": 2}]}`
			first := c.batch(t, 0, "flaky", key, body, "Idempotency-Key", "order-17").want(t, "first", 200, "")
			again := c.batch(t, 1, "flaky", key, body, "Idempotency-Key", "order-17").want(t, "retry", 200, "")
			if !bytes.Equal(first.raw, again.raw) || again.header.Get("Idempotent-Replayed") != "true" || first.header.Get("Idempotent-Replayed") != "" {
				t.Errorf("retry: %s (replayed %q), want the first answer %s replayed", again.raw, again.header.Get("Idempotent-Replayed"), first.raw)
			}
			if b := c.balance(t, 1, acct).Remaining; b != before-2 {
				t.Errorf("balance %d after a batch and its retry, want %d: charged once", b, before-2)
			}
			c.batch(t, 1, "flaky", key, `{"items": [{"n": 0}]}`, "Idempotency-Key", "order-17").
				want(t, "the key with another body", 422, "idempotency_key_reused")
		})
	}
}

func mustRestrictions(t *testing.T, spec auth.RestrictionSpec) auth.Restrictions {
	t.Helper()
	r, err := auth.NewRestrictions(spec)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
