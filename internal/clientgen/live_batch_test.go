package clientgen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/testserver"
)

// A batchCase is a batch that every language's packages send against the live
// server, in the order of [batchCases].
type batchCase struct {
	name           string
	api            string
	items          []map[string]any
	key            string // the account's key; the primary key if empty
	idempotencyKey string

	// Expectations: each item's outcome, what the batch cost and whether its answer
	// was replayed; or an error.
	want       []batchWant
	cost       int64
	replayed   bool // the answer is the previous case's, replayed
	errClass   string
	index      int // of a ValidationError naming an item; -1 when it names none
	param      string
	httpStatus int
	code       string
}

// batchWant is the expected outcome of one item of a batch.
type batchWant struct {
	code    string         // the item's error code; "" for an item that succeeded
	data    map[string]any // fields of its data
	credits int64
}

// sent reports whether the case reaches the network.
func (c batchCase) sent() bool { return c.errClass == "" || c.errClass == "APIError" }

// batchCases are the batches every language's packages send: items that succeed,
// one the API rejects (charged), the URL form of a file API, a batch sent twice with an
// idempotency key (run and charged once), items that fail validation before anything
// is sent, and batches the service refuses whole.
func batchCases(srv *testserver.Server) []batchCase {
	return []batchCase{
		{name: "batch", api: "hash", items: []map[string]any{{"text": "hello"}, {"text": "hello", "algorithm": "md5"}},
			want: []batchWant{
				{data: map[string]any{"algorithm": "sha256", "hash": "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"}, credits: 1},
				{data: map[string]any{"algorithm": "md5", "hash": "5d41402abc4b2a76b9719d911017c592"}, credits: 1},
			}, cost: 2},
		{name: "batch with a rejected item", api: "date-info", items: []map[string]any{{"date": "2024-02-29"}, {"date": "2026-02-30"}},
			want: []batchWant{{data: map[string]any{"day-of-week": "Thursday"}, credits: 1}, {code: "rejected", credits: 1}}, cost: 2},
		{name: "batch of a GET API with defaults", api: "echo", items: []map[string]any{{"message": "héllo"}, {"message": "b", "delay_ms": 0}},
			want: []batchWant{{data: map[string]any{"message": "héllo", "delay_ms": 0}, credits: 1}, {data: map[string]any{"message": "b"}, credits: 1}}, cost: 2},
		{name: "batch of a file API's URL form", api: "image-info", items: []map[string]any{{"url": srv.FileURL}},
			want: []batchWant{{data: map[string]any{"format": "png", "width": testserver.PNGWidth}, credits: 2}}, cost: 2},
		{name: "batch with an idempotency key", api: "uuid-generator", items: []map[string]any{{"count": 2}}, idempotencyKey: "job-7/chunk-1",
			want: []batchWant{{data: map[string]any{"count": 2}, credits: 1}}, cost: 1},
		{name: "batch sent again with the key", api: "uuid-generator", items: []map[string]any{{"count": 2}}, idempotencyKey: "job-7/chunk-1",
			want: []batchWant{{data: map[string]any{"count": 2}, credits: 1}}, cost: 1, replayed: true},

		{name: "batch with an invalid item", api: "hash", items: []map[string]any{{"text": "a"}, {"algorithm": "md5"}},
			errClass: "ValidationError", index: 1, param: "text"},
		{name: "batch of a file API without a url", api: "image-info", items: []map[string]any{{"url": srv.FileURL}, {}},
			errClass: "ValidationError", index: 1, param: "image"},
		{name: "empty batch", api: "hash", items: []map[string]any{}, errClass: "ValidationError", index: -1},
		{name: "batch with a bad idempotency key", api: "hash", items: []map[string]any{{"text": "a"}}, idempotencyKey: " padded ",
			errClass: "ValidationError", index: -1},

		{name: "batch without credits", api: "hash", items: []map[string]any{{"text": "a"}}, key: testserver.NoCreditsKey,
			errClass: "APIError", httpStatus: 429, code: "credits_exhausted"},
		{name: "batch with a refused key", api: "hash", items: []map[string]any{{"text": "a"}}, key: testserver.RestrictedKey,
			errClass: "APIError", httpStatus: 403, code: "forbidden"},
	}
}

// batchKey returns the account key of a case.
func (c batchCase) accountKey() string {
	if c.key == "" {
		return testserver.PrimaryKey
	}
	return c.key
}

// checkBatchReport checks a driver's results of [batchCases], with the language's
// names of the validation and API errors, and what reached the service: only the
// batches that should, each charged once.
func checkBatchReport(t *testing.T, srv *testserver.Server, cases []batchCase, report driverOutput, validationClass, apiClass string, balance int64) {
	t.Helper()
	if len(report.Results) != len(cases) || report.Unhandled != 0 {
		t.Fatalf("%d results and %d unhandled rejections, want %d and none", len(report.Results), report.Unhandled, len(cases))
	}
	var cost int64
	for i, c := range cases {
		r := report.Results[i]
		t.Run(c.name, func(t *testing.T) {
			switch c.errClass {
			case "":
				checkBatchResponse(t, c, r)
				if c.replayed {
					if got, want := jsonNorm(t, r.Response.Data), jsonNorm(t, report.Results[i-1].Response.Data); got != want {
						t.Errorf("the replayed answer's data %s is not the first answer's %s", got, want)
					}
				}
			case "ValidationError":
				e := r.Error
				if r.OK || e.Class != validationClass || !e.IsError || e.Status != "error" || e.Error == "" || e.Data != nil || e.Message == "" || e.Param != c.param {
					t.Fatalf("result %+v, want a %s of parameter %q with status \"error\", the message in error and message, data null", r, validationClass, c.param)
				}
				if c.param != "" && !strings.Contains(e.Message, fmt.Sprintf("parameter %q", c.param)) {
					t.Errorf("message %q does not name the parameter", e.Message)
				}
				if (c.index < 0) != (r.Error.Index == nil) || (c.index >= 0 && *r.Error.Index != c.index) {
					t.Errorf("index %v, want %d (-1: none)", r.Error.Index, c.index)
				}
				if c.index >= 0 && !strings.Contains(r.Error.Message, fmt.Sprintf("item %d: ", c.index)) {
					t.Errorf("message %q does not name item %d", r.Error.Message, c.index)
				}
			default:
				c.errClass = apiClass
				checkResult(t, liveCase{name: c.name, errClass: c.errClass, httpStatus: c.httpStatus, code: c.code}, r)
			}
		})
		if c.errClass == "" && !c.replayed && c.key == "" {
			cost += c.cost
		}
	}
	if got := srv.Balance(t, "acme"); got != balance-cost {
		t.Errorf("balance %d, want %d: %d charged", got, balance-cost, cost)
	}
}

// checkBatchResponse compares the answer to a batch with the case's expectations.
func checkBatchResponse(t *testing.T, c batchCase, r liveResult) {
	t.Helper()
	if !r.OK {
		t.Fatalf("failed: %+v", r.Error)
	}
	resp := r.Response
	if resp.Status != "ok" || resp.Error != nil || resp.HTTPStatus != 200 || resp.Replayed == nil || *resp.Replayed != c.replayed {
		t.Errorf("response status %q error %v HTTP %d replayed %v, want the ok envelope, replayed %v", resp.Status, resp.Error, resp.HTTPStatus, resp.Replayed, c.replayed)
	}
	checkCredits(t, c.name, resp.Credits, c.cost, grantedOf(c.key))
	var items []struct {
		Status  string                     `json:"status"`
		Error   *string                    `json:"error"`
		Data    map[string]json.RawMessage `json:"data"`
		Code    string                     `json:"code"`
		Credits int64                      `json:"credits"`
	}
	var summary struct{ OK, Failed, Credits int64 }
	if err := json.Unmarshal(resp.Data["items"], &items); err != nil || len(items) != len(c.want) {
		t.Fatalf("items %s (%v), want %d", resp.Data["items"], err, len(c.want))
	}
	if err := json.Unmarshal(resp.Data["summary"], &summary); err != nil {
		t.Fatalf("summary %s: %v", resp.Data["summary"], err)
	}
	var ok, failed int64
	for i, w := range c.want {
		it := items[i]
		if w.code != "" {
			failed++
			if it.Status != "error" || it.Code != w.code || it.Error == nil || *it.Error == "" || it.Data != nil || it.Credits != w.credits {
				t.Errorf("item %d: %+v, want error %s charged %d", i, it, w.code, w.credits)
			}
			continue
		}
		ok++
		if it.Status != "ok" || it.Error != nil || it.Credits != w.credits {
			t.Errorf("item %d: %+v, want ok, charged %d", i, it, w.credits)
		}
		for k, want := range w.data {
			got, wantText := jsonNorm(t, it.Data[k]), jsonNorm(t, want)
			if got != wantText {
				t.Errorf("item %d: data[%q] = %s, want %s", i, k, got, wantText)
			}
		}
	}
	if summary.OK != ok || summary.Failed != failed || summary.Credits != c.cost {
		t.Errorf("summary %+v, want %d ok, %d failed, %d credits", summary, ok, failed, c.cost)
	}
}

// jsonNorm returns v (a value, or JSON text as json.RawMessage or map of them) as
// normalized JSON text, so that texts compare.
func jsonNorm(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var x any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&x); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(x)
	return string(out)
}

// batchArgs returns the arguments of a batch call in the languages whose drivers pass
// them as they are: the items, then the idempotency key (or nil).
func batchArgs(c batchCase) []any {
	var key any
	if c.idempotencyKey != "" {
		key = c.idempotencyKey
	}
	return []any{c.items, key}
}

// typedBatchCases returns the batch cases for a typed language's driver.
func typedBatchCases(srv *testserver.Server, cases []batchCase, class func(string) string, method string) []typedCase {
	out := make([]typedCase, len(cases))
	for i, c := range cases {
		out[i] = typedCase{c.name, class(c.api), c.accountKey(), srv.URL, method, batchArgs(c)}
	}
	return out
}
