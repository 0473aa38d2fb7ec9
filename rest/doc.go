// Package rest is the REST front door of a Tollgate service: GET or POST
// /v1/{api_id} for every API of the catalog, POST /v1/{api_id}/batch for many inputs at
// once, plus /v1/analytics, /v1/catalog and /v1/openapi.json.
//
// It is a thin adapter over [tollgate.Service]: it reads the credential, the parameters
// and the file from HTTP, asks the service to authenticate, validate and run the call,
// and writes the answer in the envelope of every JSON answer
//
//	{"status": "ok", "error": null, "data": {...}}
//	{"status": "error", "error": "what went wrong", "data": null}
//
// with the status of the error's code and the headers below. It never re-implements a
// step of the pipeline.
//
// # Mounting
//
// The handler's routes start with /v1/. The host owns the mux and the server:
//
//	mux := http.NewServeMux()
//	mux.Handle("/v1/", restHandler)
//	mux.Handle("/api/v1/", http.StripPrefix("/api", restHandler)) // under a prefix
//
// GraphQL (/v1/graphql) and MCP (/v1/mcp) handlers mount beside it on the same mux; the
// more specific patterns win.
//
// # Answers
//
// A request without a key, or with a value that is not UUID-shaped, gets the edge's bare
// HTML 403: no JSON body and no CORS headers. Every other answer is JSON in the envelope,
// with CORS headers when the request is cross-origin (it has an Origin header, as every
// browser's cross-origin request has; other clients get none, which would serve them
// nothing) and, for errors, X-Error-Code naming the cause (see
// [tollgate.Code]): 401 unauthorized; 403 forbidden (scope, channel, IP, expiry,
// revocation, or the account's closure) or account_suspended (the operator suspended
// the account: never charged, until it is reactivated); 400 invalid_input (not charged) or rejected (charged); 404 unknown API;
// 405 wrong method, with Allow; 413 body or file too large; 415 wrong content type; 429
// rate_limited, concurrency_limited or credits_exhausted, with Retry-After for the first
// two; 500 and 504 when the API failed on the service's side (refunded); 503 when a store
// is unreachable (nothing charged).
//
// Authenticated responses carry the credit headers (X-Credits-Cost, -Remaining, -Used,
// -Limit, -Renewal, X-Plan) and, for plans with a rate limit, X-RateLimit-Limit and
// X-RateLimit-Remaining; [Options.IETFRateHeaders] adds the IETF draft's
// RateLimit-Policy and RateLimit headers.
//
// # Input
//
// A GET takes its parameters from the query string. A POST takes a JSON object body
// (an empty body is {}), or a URL-encoded form. A file API also takes a
// multipart/form-data upload with the file in its file field and the other parameters
// as text fields, or, in the URL form, a "url" parameter that the service fetches
// (public addresses only, unless the service allows private ones).
//
// # Batches
//
// POST /v1/{api_id}/batch runs many inputs through one API (tollgate.Service.CallBatch):
// the body is {"items": [...]}, application/json, each item the object of parameters a
// JSON body of a call to the API takes (a GET API's too; a file API's url, since a batch
// takes no upload: a multipart body is a 415 that says to use the URL form). It may hold
// MaxBodyBytes plus BatchItemBytes per item the caller's plan allows in a batch. The
// answer is 200 with
//
//	{"status": "ok", "error": null, "data": {
//	  "items": [{"status": "ok", "error": null, "data": {...}, "credits": 1},
//	            {"status": "error", "error": "...", "data": null, "code": "invalid_input", "credits": 0}],
//	  "summary": {"ok": 1, "failed": 1, "credits": 1}}}
//
// one envelope per item in the items' order, with the credit and rate headers of the
// batch, or a refusal of the batch as a whole in the usual envelope: 400 for a body that
// is not {"items": [...]}, for no items or for more than the plan allows; 403 for a key
// without the batch channel; 413; 429 when the valid items' cost passes the balance, or
// their rate-limit events (one each) the rate limit. With an Idempotency-Key (1 to 255
// printable ASCII characters), a retry of a batch that ran gets the first answer,
// byte for byte, with Idempotent-Replayed: true and nothing charged; the key sent with
// another body is a 422 (idempotency_key_reused), a retry while the first runs a 409,
// and so is a retry of a batch that ran but whose answer was not kept (too large, or
// lost with the instance that ran it), which does not run again under that key, and a
// batch that ran past its lease while a retry of the key took it over (not charged:
// the retry's answer is the key's).
package rest
