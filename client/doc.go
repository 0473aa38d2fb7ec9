// Package client is the Go client of a Tollgate service: construct it with a key, then
// call any API of the catalog by its id.
//
//	c, err := client.New(os.Getenv("TOLLGATE_API_KEY"), &client.Options{BaseURL: "https://api.example.com"})
//	if err != nil { ... }
//	resp, err := c.Execute(ctx, "hash", map[string]any{"text": "hello"})
//	if err != nil { ... }
//	var out struct{ Hash string `json:"hash"` }
//	err = resp.Decode(&out)
//
// File APIs are called with [Client.ExecuteWithFile] (a local file, uploaded as
// multipart/form-data) or [Client.ExecuteWithURL] (the service fetches the file). The
// generated per-API packages (cmd/tollgate-gen) and the command-line client
// (cmd/tollgate) are built on this package.
//
// # Batches
//
// [Client.ExecuteBatch] calls one API with many inputs in one request
// (POST /v1/<api_id>/batch): every item is validated first, and the answer holds each
// item's result or [*ItemError], in order, with a summary and the credit headers of the
// whole batch. A plan bounds the items of one batch ([Client.BatchMaxItems]). A batch
// sent with an idempotency key ([BatchOptions]) runs and is charged once however often
// it is sent again, by [Options.Retry] or by you.
//
// # Validation before sending
//
// Every call is validated on the client, with the catalog's own rules (package
// catalog: required parameters, types, ranges, lengths, enums and formats; for files,
// the size and the media type), before anything is sent. A call that fails returns a
// [*ValidationError] naming the parameter, and costs nothing: the request is never
// made. The rules come from the service's GET /v1/catalog, fetched once per Client on
// the first call and kept, or from [Options.Catalog], in which case the client never
// fetches it. A Client does not see APIs published after it read the catalog; create a
// new one for that.
//
// # Answers
//
// A successful call returns a [*Response]: the raw envelope, the data member, and the
// credit and rate headers ([Credits], [RateLimit]). A call the service refused returns
// an [*APIError] carrying the HTTP status, the envelope's message, the machine-readable
// code of the X-Error-Code header (rate_limited, credits_exhausted, ...) and the
// envelope itself; check it with [errors.As]. Transport failures are returned as they
// come, wrapped.
//
// # Retries
//
// The client does not retry by default: whether a call may be repeated is the caller's
// to decide. Set [Options.Retry] to retry 429 answers (except credits_exhausted, which
// waiting does not fix) and 5xx answers, with exponential backoff, full jitter and the
// service's Retry-After. The service refunds calls that fail on its side, so a retried
// 5xx is not charged twice.
//
// # Webhooks
//
// A receiver of the webhooks a service sends checks each request with
// [VerifyWebhook]: the Standard Webhooks signature (any of the tokens of the
// webhook-signature header, compared in constant time), the timestamp within a
// tolerance (5 minutes either way by default), then the body, returned as a
// [WebhookEvent] whose data [WebhookEvent.Decode] reads. A request that fails is an
// error wrapping [ErrWebhookHeaders], [ErrWebhookSignature], [ErrWebhookTooOld] or
// [ErrWebhookTooNew]. docs/webhooks.md lists the event types and their data.
//
// # The key
//
// The key is sent in the x-api-key header of API calls, and nowhere else: not to
// GET /v1/catalog, not in URLs, not in errors, not in logs. Redirects are not followed,
// so that the key never reaches another host. Printing a Client with fmt shows no key.
package client
