package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/client"
	"github.com/tollgate-dev/tollgate/examples/apis"
	"github.com/tollgate-dev/tollgate/internal/testserver"
)

// TestBatchValidation proves that a batch with an item that breaks a rule is refused
// before anything is sent, with an error naming the item and the parameter.
func TestBatchValidation(t *testing.T) {
	srv := testserver.Start(t)
	c := newClient(t, srv, testserver.PrimaryKey, &client.Options{Catalog: apis.All()})
	tests := []struct {
		name   string
		api    string
		items  []map[string]any
		opts   *client.BatchOptions
		index  int // -1: not an item's error
		param  string
		reason string // a fragment
	}{
		{"no items", "hash", nil, nil, -1, "", "at least one item"},
		{"required", "hash", []map[string]any{{"text": "a"}, {"text": "b"}, {"algorithm": "md5"}}, nil, 2, "text", "is required"},
		{"range", "uuid-generator", []map[string]any{{"count": 101}}, nil, 0, "count", "at most 100"},
		{"unknown", "echo", []map[string]any{{"message": "m"}, {"message": "m", "delay": 1}}, nil, 1, "delay", "unknown parameter"},
		{"file API without a url", "image-info", []map[string]any{{"url": "https://example.com/a.png"}, {}}, nil, 1, "image", "URL form"},
		{"file API with a bad url", "image-info", []map[string]any{{"url": "ftp://example.com/a.png"}}, nil, 0, "url", "http or https"},
		{"idempotency key too long", "hash", []map[string]any{{"text": "a"}}, &client.BatchOptions{IdempotencyKey: strings.Repeat("k", 256)}, -1, "", "longer than 255"},
		{"idempotency key not ASCII", "hash", []map[string]any{{"text": "a"}}, &client.BatchOptions{IdempotencyKey: "clé"}, -1, "", "printable ASCII"},
		{"idempotency key with a newline", "hash", []map[string]any{{"text": "a"}}, &client.BatchOptions{IdempotencyKey: "a\nb"}, -1, "", "printable ASCII"},
		{"idempotency key with a space around", "hash", []map[string]any{{"text": "a"}}, &client.BatchOptions{IdempotencyKey: " a"}, -1, "", "start or end with a space"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.ExecuteBatch(t.Context(), tt.api, tt.items, tt.opts)
			var ve *client.ValidationError
			if !errors.As(err, &ve) || ve.Param != tt.param || !strings.Contains(ve.Reason, tt.reason) || ve.APIID != tt.api {
				t.Fatalf("error %v, want a ValidationError for %q with %q", err, tt.param, tt.reason)
			}
			var ie *client.ItemValidationError
			switch {
			case tt.index < 0 && errors.As(err, &ie):
				t.Errorf("error %v names item %d", err, ie.Index)
			case tt.index >= 0 && (!errors.As(err, &ie) || ie.Index != tt.index):
				t.Errorf("error %v, want one naming item %d", err, tt.index)
			case tt.index >= 0 && !strings.Contains(err.Error(), "item "+itoa(tt.index)+`: parameter "`+tt.param+`"`):
				t.Errorf("message %q does not name the item and the parameter", err)
			}
		})
	}
	if n := srv.APICalls(); n != 0 {
		t.Errorf("%d requests reached the service, want none", n)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// batchRequest is what the contract server saw of one request.
type batchRequest struct {
	method, path, contentType, key, authMode, idempotencyKey string
	items                                                    []map[string]any
}

// contractServer answers batches as the service's wire contract says, with the
// answer that answer returns for the items it received; it records each request.
func contractServer(t *testing.T, answer func(w http.ResponseWriter, r batchRequest)) (*httptest.Server, func() []batchRequest) {
	t.Helper()
	var mu sync.Mutex
	var seen []batchRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		br := batchRequest{method: r.Method, path: r.URL.Path, contentType: r.Header.Get("Content-Type"), key: r.Header.Get("X-Api-Key"),
			authMode: r.Header.Get("X-Auth-Mode"), idempotencyKey: r.Header.Get("Idempotency-Key")}
		var body struct {
			Items []map[string]any `json:"items"`
		}
		d := json.NewDecoder(r.Body)
		d.UseNumber()
		if err := d.Decode(&body); err != nil && err != io.EOF {
			t.Errorf("the body is not JSON: %v", err)
		}
		br.items = body.Items
		mu.Lock()
		seen = append(seen, br)
		mu.Unlock()
		answer(w, br)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []batchRequest {
		mu.Lock()
		defer mu.Unlock()
		return append([]batchRequest(nil), seen...)
	}
}

// writeJSON writes an answer with the credit headers of a batch that cost cost.
func writeJSON(w http.ResponseWriter, status int, cost int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Credits-Cost", itoa(cost))
	w.Header().Set("X-Credits-Remaining", "900")
	w.Header().Set("X-RateLimit-Limit", "600")
	w.Header().Set("X-RateLimit-Remaining", "597")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// TestBatchAnswer checks the request a batch makes and how its answer is read: each
// item's result or error in order, the summary, the headers and the replay flag.
func TestBatchAnswer(t *testing.T) {
	srv, seen := contractServer(t, func(w http.ResponseWriter, r batchRequest) {
		if r.idempotencyKey == "replayed" {
			w.Header().Set("Idempotent-Replayed", "true")
		}
		writeJSON(w, 200, 2, `{"status":"ok","error":null,"data":{"items":[
			{"status":"ok","error":null,"data":{"algorithm":"sha256","hash":"ca978112"},"credits":1},
			{"status":"error","error":"parameter \"text\": is required","data":null,"code":"invalid_input","credits":0},
			{"status":"ok","error":null,"data":{"algorithm":"md5","hash":"0cc175b9"},"credits":1}],
			"summary":{"ok":2,"failed":1,"credits":2}}}`)
	})
	c, err := client.New(testserver.PrimaryKey, &client.Options{BaseURL: srv.URL, Catalog: apis.All()})
	if err != nil {
		t.Fatal(err)
	}
	items := []map[string]any{{"text": "a"}, {"text": "b", "algorithm": nil}, {"text": "a", "algorithm": "md5"}}
	resp, err := c.ExecuteBatch(t.Context(), "hash", items, nil)
	if err != nil {
		t.Fatal(err)
	}
	replayed, err := c.ExecuteBatch(t.Context(), "hash", items, &client.BatchOptions{IdempotencyKey: "replayed"})
	if err != nil || !replayed.Replayed {
		t.Fatalf("ExecuteBatch: %v; want a replayed answer", err)
	}
	if _, err := c.ExecuteBatch(t.Context(), "hash", items, nil); err != nil {
		t.Fatal(err)
	}

	reqs := seen()
	r := reqs[0]
	if r.method != "POST" || r.path != "/v1/hash/batch" || r.contentType != "application/json" || r.key != testserver.PrimaryKey || r.authMode != "go-package" {
		t.Errorf("request %+v, want POST /v1/hash/batch with JSON, the key and the auth mode", r)
	}
	// A GET API's parameters go as JSON objects, without the absent ones and defaults.
	if got := jsonText(t, r.items); got != `[{"text":"a"},{"text":"b"},{"algorithm":"md5","text":"a"}]` {
		t.Errorf("items sent %s", got)
	}
	if r.idempotencyKey != "" || reqs[2].idempotencyKey != "" || reqs[1].idempotencyKey != "replayed" {
		t.Errorf("idempotency keys %q, %q, %q: want none by default, and the one given", r.idempotencyKey, reqs[1].idempotencyKey, reqs[2].idempotencyKey)
	}

	if len(resp.Items) != 3 || resp.StatusCode != 200 || resp.Replayed {
		t.Fatalf("response %+v", resp)
	}
	var h struct{ Hash string }
	if err := resp.Items[0].Decode(&h); err != nil || h.Hash != "ca978112" || resp.Items[0].Err != nil || resp.Items[0].Credits != 1 {
		t.Errorf("item 0: %+v %v, want its hash", resp.Items[0], err)
	}
	var ie *client.ItemError
	it := resp.Items[1]
	if !errors.As(it.Err, &ie) || ie.Index != 1 || ie.Code != "invalid_input" || ie.Message != `parameter "text": is required` || ie.APIID != "hash" || it.Credits != 0 || string(it.Data) != "null" {
		t.Errorf("item 1: %+v, want its invalid_input error", it)
	}
	if err := it.Decode(&h); err != it.Err {
		t.Errorf("Decode of a failed item: %v, want its error", err)
	}
	if got := it.Err.Error(); got != `client: the hash API failed item 1 (invalid_input): parameter "text": is required` {
		t.Errorf("Error() = %s", got)
	}
	if !strings.Contains(string(resp.Items[2].Envelope), `"md5"`) {
		t.Errorf("item 2's envelope %s", resp.Items[2].Envelope)
	}
	if resp.Err() != it.Err {
		t.Errorf("Err() = %v, want item 1's", resp.Err())
	}
	if resp.Summary != (client.BatchSummary{OK: 2, Failed: 1, Credits: 2}) || resp.Credits.Cost != 2 || resp.Credits.Remaining != 900 || resp.Rate.Remaining != 597 {
		t.Errorf("summary %+v credits %+v rate %+v", resp.Summary, resp.Credits, resp.Rate)
	}
	if !strings.HasPrefix(string(resp.Body), `{"status":"ok"`) {
		t.Errorf("body %s", resp.Body)
	}
}

// TestBatchRefusedAndMalformed checks that a batch refused whole is an *APIError, and
// that an answer that does not fit the items sent is an error, not a result.
func TestBatchRefusedAndMalformed(t *testing.T) {
	tests := []struct {
		name   string
		status int
		code   string
		body   string
		want   string
	}{
		{"too many items", 400, "invalid_input", `{"status":"error","error":"the batch holds 2 items; the plan allows at most 1","data":null}`, "plan allows at most 1"},
		{"no credits", 429, "credits_exhausted", `{"status":"error","error":"not enough credits","data":null}`, "429 (credits_exhausted)"},
		{"key used for other items", 422, "", `{"status":"error","error":"the idempotency key was used for another request","data":null}`, "used for another request"},
		{"fewer items", 200, "", `{"status":"ok","error":null,"data":{"items":[{"status":"ok","error":null,"data":{},"credits":1}],"summary":{"ok":1,"failed":0,"credits":1}}}`, "1 items and a summary for the 2 sent"},
		{"no summary", 200, "", `{"status":"ok","error":null,"data":{"items":[{"status":"ok","data":{}},{"status":"ok","data":{}}]}}`, "for the 2 sent"},
		{"odd status", 200, "", `{"status":"ok","error":null,"data":{"items":[{"status":"ok","data":{}},{"status":"maybe"}],"summary":{}}}`, `item 1 has status "maybe"`},
		{"items not a list", 200, "", `{"status":"ok","error":null,"data":{"items":{}}}`, "malformed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := contractServer(t, func(w http.ResponseWriter, _ batchRequest) {
				if tt.code != "" {
					w.Header().Set("X-Error-Code", tt.code)
				}
				writeJSON(w, tt.status, 0, tt.body)
			})
			c, err := client.New(testserver.PrimaryKey, &client.Options{BaseURL: srv.URL, Catalog: apis.All()})
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.ExecuteBatch(t.Context(), "hash", []map[string]any{{"text": "a"}, {"text": "b"}}, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) || resp != nil {
				t.Fatalf("ExecuteBatch: %v, %v; want an error with %q", resp, err, tt.want)
			}
			var e *client.APIError
			if isAPI := tt.status != 200; isAPI != errors.As(err, &e) || (isAPI && (e.StatusCode != tt.status || e.Code != tt.code || e.APIID != "hash")) {
				t.Errorf("error %#v, want an APIError: %v", err, isAPI)
			}
		})
	}
}

// TestBatchRetry checks that a batch with an idempotency key is retried with the key
// after a lost answer and while the first attempt still runs, when a retry policy is
// set; and that without a key or a policy, or for a single call, it is not.
func TestBatchRetry(t *testing.T) {
	var mu sync.Mutex
	attempts := 0
	srv, seen := contractServer(t, func(w http.ResponseWriter, r batchRequest) {
		mu.Lock()
		attempts++
		n := attempts
		mu.Unlock()
		switch {
		case r.path == "/v1/hash" || n%3 == 1: // the answer is lost
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			conn.Close()
		case n%3 == 2:
			writeJSON(w, 409, 0, `{"status":"error","error":"a request with this idempotency key is still running","data":null}`)
		default:
			writeJSON(w, 200, 1, `{"status":"ok","error":null,"data":{"items":[{"status":"ok","error":null,"data":{"hash":"x"},"credits":1}],"summary":{"ok":1,"failed":0,"credits":1}}}`)
		}
	})
	var waits []time.Duration
	policy := &client.RetryPolicy{MaxAttempts: 3, Rand: func() float64 { return 0.5 },
		Sleep: func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }}
	// Without keep-alives, so that net/http's own retry of a request with an
	// Idempotency-Key on a reused connection does not add attempts.
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	retrying, err := client.New(testserver.PrimaryKey, &client.Options{BaseURL: srv.URL, Catalog: apis.All(), Retry: policy, HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	items := []map[string]any{{"text": "a"}}
	key := &client.BatchOptions{IdempotencyKey: "job-1"}
	resp, err := retrying.ExecuteBatch(t.Context(), "hash", items, key)
	if err != nil || resp.Summary.OK != 1 {
		t.Fatalf("ExecuteBatch: %v, %v", resp, err)
	}
	reqs := seen()
	if len(reqs) != 3 || reqs[0].idempotencyKey != "job-1" || reqs[1].idempotencyKey != "job-1" || reqs[2].idempotencyKey != "job-1" {
		t.Errorf("%d attempts with keys %+v, want 3 with the key", len(reqs), reqs)
	}
	if len(waits) != 2 || waits[0] != client.DefaultBaseDelay/2 || waits[1] != client.DefaultBaseDelay {
		t.Errorf("waits %v", waits)
	}

	// A single call is not retried after a transport failure, nor is a batch without
	// a key, nor one without a retry policy.
	plain, err := client.New(testserver.PrimaryKey, &client.Options{BaseURL: srv.URL, Catalog: apis.All(), HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		call func() error
	}{
		{"Execute", func() error { _, err := retrying.Execute(t.Context(), "hash", items[0]); return err }},
		{"ExecuteBatch without a key", func() error { _, err := retrying.ExecuteBatch(t.Context(), "hash", items, nil); return err }},
		{"ExecuteBatch without a policy", func() error { _, err := plain.ExecuteBatch(t.Context(), "hash", items, key); return err }},
	} {
		mu.Lock()
		attempts = 0
		mu.Unlock()
		before := len(seen())
		if err := tt.call(); err == nil || len(seen()) != before+1 {
			t.Errorf("%s: %v after %d requests, want a transport error after 1", tt.name, err, len(seen())-before)
		}
	}
	// A batch is not retried once the caller's context is done.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := retrying.ExecuteBatch(ctx, "hash", items, key); !errors.Is(err, context.Canceled) {
		t.Errorf("ExecuteBatch with a canceled context: %v", err)
	}
}

// TestBatchMaxItems reads the plan's batch size from the analytics, and the default
// when the service does not say.
func TestBatchMaxItems(t *testing.T) {
	tests := []struct {
		data string
		want int
	}{
		{`{"plan":"pro","batch_max_items":250}`, 250},
		{`{"plan":"pro"}`, client.DefaultBatchMaxItems},
	}
	for _, tt := range tests {
		srv, seen := contractServer(t, func(w http.ResponseWriter, _ batchRequest) {
			writeJSON(w, 200, 0, `{"status":"ok","error":null,"data":`+tt.data+`}`)
		})
		c, err := client.New(testserver.PrimaryKey, &client.Options{BaseURL: srv.URL, Catalog: apis.All()})
		if err != nil {
			t.Fatal(err)
		}
		n, err := c.BatchMaxItems(t.Context())
		if err != nil || n != tt.want {
			t.Errorf("BatchMaxItems with %s: %d, %v; want %d", tt.data, n, err, tt.want)
		}
		if r := seen(); len(r) != 1 || r[0].method != "GET" || r[0].path != "/v1/analytics" || r[0].key != testserver.PrimaryKey {
			t.Errorf("requests %+v, want GET /v1/analytics with the key", r)
		}
	}
}
