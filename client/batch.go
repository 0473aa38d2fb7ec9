package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/wire"
)

// The headers of a batch's idempotency.
const (
	// HeaderIdempotencyKey carries the idempotency key of a batch
	// ([BatchOptions.IdempotencyKey]).
	HeaderIdempotencyKey = wire.HeaderIdempotencyKey
	// HeaderIdempotentReplayed is "true" on the stored answer of a batch that the
	// service had already run with the same idempotency key ([BatchResponse.Replayed]).
	HeaderIdempotentReplayed = wire.HeaderIdempotentReplayed
)

// MaxIdempotencyKeyLen is the length limit of an idempotency key.
const MaxIdempotencyKeyLen = wire.MaxIdempotencyKeyLen

// BatchOptions are the optional settings of one [Client.ExecuteBatch] call.
type BatchOptions struct {
	// IdempotencyKey, if set, is sent in the Idempotency-Key header: 1 to
	// [MaxIdempotencyKeyLen] printable ASCII characters, neither starting nor ending
	// with a space. The service answers a batch sent again with the same key (same
	// account, API and items) with its first answer, without running or charging it
	// again ([BatchResponse.Replayed]); the same key with other items is a 422, and a
	// batch sent again while the first still runs a 409.
	//
	// With a key, [Options.Retry] also retries the batch after a transport failure (the
	// request or its answer lost on the way) and on a 409, since the service runs it
	// once however often it is sent. Derive the key from what the batch is (a job id
	// and a chunk number, or a random value kept with the job), so that your own retry
	// of the call, even after your program restarted, is safe too.
	//
	// A service keeps answers for keys only when its host sets it up to
	// (tollgate.Options.Idempotency; the example server does); one that does not
	// refuses a batch with a key (400). So no key is sent by default.
	IdempotencyKey string
}

// A BatchResponse is the answer to a batch that the service ran: the result of each
// item, in the order of the items, and the credit and rate headers of the whole batch.
// Some or all items may have failed.
type BatchResponse struct {
	// StatusCode is the HTTP status, 200.
	StatusCode int
	// Header holds the response headers.
	Header http.Header
	// Body is the response envelope exactly as the service sent it:
	// {"status": "ok", "error": null, "data": {"items": [...], "summary": {...}}}.
	Body []byte
	// Items holds the outcome of each item: Items[i] is that of the i-th item sent.
	Items []BatchItem
	// Summary counts the items that succeeded and failed, and the credits charged.
	Summary BatchSummary
	// Credits reports the credit headers: Credits.Cost is what the whole batch was
	// charged, Credits.Remaining the balance after it.
	Credits Credits
	// Rate reports the rate headers; each item counted as one call.
	Rate RateLimit
	// Replayed says that the answer is the stored answer of a batch sent before with
	// the same idempotency key: nothing ran or was charged this time.
	Replayed bool
}

// Err returns the error of the first item that failed, or nil when every item
// succeeded.
func (r *BatchResponse) Err() error {
	for i := range r.Items {
		if err := r.Items[i].Err; err != nil {
			return err
		}
	}
	return nil
}

// A BatchSummary counts the outcomes of a batch's items: OK succeeded, Failed failed,
// and Credits is what the batch was charged, the sum of the items' credits.
type BatchSummary = wire.BatchSummary

// A BatchItem is the outcome of one item of a batch: its result, or its error.
type BatchItem struct {
	// Envelope is the item's envelope as the service sent it: {"status": "ok",
	// "error": null, "data": {...}, "credits": N} on success, {"status": "error",
	// "error": "...", "data": null, "code": "...", "credits": N} on failure.
	Envelope json.RawMessage
	// Data is the API's result for this item (the envelope's data member); null when
	// the item failed.
	Data json.RawMessage
	// Credits is what the item was charged: 0 for an invalid or a refunded item.
	Credits int64
	// Err is nil when the item succeeded; otherwise an [*ItemError] with the item's
	// error code and message.
	Err error
}

// Decode decodes the item's result (the data member) into v, as json.Unmarshal does.
// It returns the item's error when the item failed.
func (it *BatchItem) Decode(v any) error {
	if it.Err != nil {
		return it.Err
	}
	if err := json.Unmarshal(it.Data, v); err != nil {
		return fmt.Errorf("client: decoding the result: %w", err)
	}
	return nil
}

// An ItemError is the failure of one item of a batch that the service ran. Like an
// [APIError] it has the machine-readable code and the message, but no HTTP status of
// its own: the batch's answer was a 200. Check it with [errors.As].
type ItemError struct {
	// APIID is the API that was called.
	APIID string
	// Index is the item's position in the batch, from 0.
	Index int
	// Code is the machine-readable cause, the one a call of the item alone would have
	// had in X-Error-Code: invalid_input (refused before it ran, not charged),
	// rejected (the API judged the input wrong, charged), api_error, timeout or
	// unavailable (failed on the service's side, refunded), and so on.
	Code string
	// Message is the item's error message; for invalid_input it names the parameter.
	Message string
}

// Error returns the item, the code and the message, such as
// `client: the hash API failed item 2 (invalid_input): parameter "text": is required`.
func (e *ItemError) Error() string {
	code := ""
	if e.Code != "" {
		code = " (" + e.Code + ")"
	}
	return fmt.Sprintf("client: the %s API failed item %d%s: %s", e.APIID, e.Index, code, e.Message)
}

// An ItemValidationError reports an item of a batch that breaks the API's rules,
// found before anything was sent. It embeds the item's [*ValidationError], which
// [errors.As] also finds.
type ItemValidationError struct {
	// Index is the item's position in the batch, from 0.
	Index int
	*ValidationError
}

// Error returns the item, the parameter and the reason, such as
// `client: hash: item 3: parameter "text": is required`.
func (e *ItemValidationError) Error() string {
	v := e.ValidationError
	if v.Param == "" {
		return fmt.Sprintf("client: %s: item %d: %s", v.APIID, e.Index, v.Reason)
	}
	return fmt.Sprintf("client: %s: item %d: parameter %q: %s", v.APIID, e.Index, v.Param, v.Reason)
}

// Unwrap returns the item's *ValidationError.
func (e *ItemValidationError) Unwrap() error { return e.ValidationError }

// ExecuteBatch calls the API apiID once for each item of items, in one request
// (POST /v1/<api_id>/batch), and returns the outcome of each. Items are parameters as
// [Client.Execute] takes them, whatever the API's method; a file API takes its URL
// form only, so each item needs its "url". opts may be nil.
//
// Every item is validated before anything is sent. The first item that breaks a rule
// fails the whole call with an [*ItemValidationError] naming the item's index and the
// parameter, and nothing is sent; an empty batch is a [*ValidationError]. (The
// service would answer such an item alone, uncharged, and run the others; the client
// refuses it, as Execute does, where the mistake is made.) The service bounds a batch
// by the plan's batch_max_items (GET /v1/analytics reports it): more items are refused
// whole with a 400.
//
// When the service ran the batch, even if every item failed, the result is a
// [*BatchResponse] whose items each hold their result or an [*ItemError]. A batch
// the service refused whole (401, 403, 429 rate_limited or credits_exhausted: nothing
// ran and nothing was charged) is an [*APIError]. With an idempotency key
// ([BatchOptions.IdempotencyKey]), [Options.Retry] may retry the batch even after a
// transport failure without its running twice.
func (c *Client) ExecuteBatch(ctx context.Context, apiID string, items []map[string]any, opts *BatchOptions) (*BatchResponse, error) {
	api, err := c.API(ctx, apiID)
	if err != nil {
		return nil, err
	}
	key := ""
	if opts != nil && opts.IdempotencyKey != "" {
		key = opts.IdempotencyKey
		if reason := checkIdempotencyKey(key); reason != "" {
			return nil, &ValidationError{APIID: api.ID, Reason: "the idempotency key " + reason}
		}
	}
	if len(items) == 0 {
		return nil, &ValidationError{APIID: api.ID, Reason: "a batch needs at least one item"}
	}
	sent := make([]map[string]any, len(items))
	for i, params := range items {
		s, err := validateItem(api, params)
		if err != nil {
			return nil, &ItemValidationError{Index: i, ValidationError: err}
		}
		sent[i] = s
	}
	body, err := json.Marshal(struct {
		Items []map[string]any `json:"items"`
	}{sent})
	if err != nil {
		return nil, fmt.Errorf("client: encoding the items of %s: %w", api.ID, err)
	}
	resp, err := c.send(ctx, request{apiID: api.ID, method: http.MethodPost, url: c.base + "/v1/" + api.ID + "/batch",
		body: body, contentType: "application/json", idempotencyKey: key})
	if err != nil {
		return nil, err
	}
	return readBatch(api.ID, resp, len(items))
}

// ValidateBatchItem checks params as one item of a batch of [Client.ExecuteBatch],
// without calling the API: as [Client.Validate] does, and that an item of a file API
// gives the file's "url". It returns nil, a [*ValidationError], or the error of
// reading the catalog.
func (c *Client) ValidateBatchItem(ctx context.Context, apiID string, params map[string]any) error {
	api, err := c.API(ctx, apiID)
	if err != nil {
		return err
	}
	if _, err := validateItem(api, params); err != nil {
		return err
	}
	return nil
}

// validateItem checks one item of a batch as [validate] does, and that a file API's
// item gives the file's url.
func validateItem(api *catalog.API, params map[string]any) (map[string]any, *ValidationError) {
	sent, err := validate(api, params)
	if err != nil {
		return nil, err.(*ValidationError) // validate returns no other error
	}
	if api.File != nil && sent[catalog.URLParam] == nil {
		return nil, &ValidationError{APIID: api.ID, Param: api.File.Name,
			Reason: `is required: a batch takes the URL form of the ` + api.ID + ` API only; give each item its "url"`}
	}
	return sent, nil
}

// checkIdempotencyKey returns what is wrong with an idempotency key, or "".
func checkIdempotencyKey(key string) string {
	if len(key) > MaxIdempotencyKeyLen {
		return fmt.Sprintf("is longer than %d characters", MaxIdempotencyKeyLen)
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return "must hold printable ASCII characters only"
		}
	}
	if strings.TrimSpace(key) != key {
		return "must not start or end with a space"
	}
	return ""
}

// readBatch reads the answer of a batch that ran: n items and the summary.
func readBatch(apiID string, resp *Response, n int) (*BatchResponse, error) {
	malformed := func(format string, args ...any) error {
		return fmt.Errorf("client: the answer of the %s API to a batch is malformed: %s", apiID, fmt.Sprintf(format, args...))
	}
	var data struct {
		Items   []json.RawMessage `json:"items"`
		Summary *BatchSummary     `json:"summary"`
	}
	if err := json.Unmarshal(resp.Data, &data); err != nil {
		return nil, malformed("%v", err)
	}
	if len(data.Items) != n || data.Summary == nil {
		return nil, malformed("%d items and a summary for the %d sent", len(data.Items), n)
	}
	out := &BatchResponse{
		StatusCode: resp.StatusCode, Header: resp.Header, Body: resp.Body,
		Items: make([]BatchItem, n), Summary: *data.Summary,
		Credits: resp.Credits, Rate: resp.Rate,
		Replayed: resp.Header.Get(HeaderIdempotentReplayed) == "true",
	}
	for i, raw := range data.Items {
		var env wire.BatchItem
		if err := json.Unmarshal(raw, &env); err != nil {
			return nil, malformed("item %d: %v", i, err)
		}
		it := BatchItem{Envelope: raw, Credits: env.Credits}
		switch env.Status {
		case "ok":
			it.Data = env.Data
		case "error":
			it.Data = json.RawMessage("null")
			it.Err = &ItemError{APIID: apiID, Index: i, Code: env.Code, Message: env.Error}
		default:
			return nil, malformed("item %d has status %q", i, env.Status)
		}
		out.Items[i] = it
	}
	return out, nil
}

// Analytics returns the account's overview (GET /v1/analytics, never billed): its
// plan, credits, rate limit, concurrency and the plan's bounds, such as
// batch_max_items, the most items a batch may hold. Decode the data member with
// [Response.Decode]. Its errors name the API "analytics".
func (c *Client) Analytics(ctx context.Context) (*Response, error) {
	return c.send(ctx, request{apiID: "analytics", method: http.MethodGet, url: c.base + "/v1/analytics"})
}

// BatchMaxItems returns the most items one batch may hold on the key's plan, as
// GET /v1/analytics reports it; [DefaultBatchMaxItems] when the service does not say.
func (c *Client) BatchMaxItems(ctx context.Context) (int, error) {
	resp, err := c.Analytics(ctx)
	if err != nil {
		return 0, err
	}
	var data struct {
		BatchMaxItems int `json:"batch_max_items"`
	}
	if err := json.NewDecoder(bytes.NewReader(resp.Data)).Decode(&data); err != nil {
		return 0, fmt.Errorf("client: reading batch_max_items from the analytics: %w", err)
	}
	if data.BatchMaxItems <= 0 {
		return DefaultBatchMaxItems, nil
	}
	return data.BatchMaxItems, nil
}

// DefaultBatchMaxItems is the batch size of a plan that sets none, which
// [Client.BatchMaxItems] reports when the service does not say.
const DefaultBatchMaxItems = 100
