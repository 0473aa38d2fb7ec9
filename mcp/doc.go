// Package mcp is the MCP tool connection of a Tollgate service: an http.Handler that
// serves every API of the catalog as a tool of the Model Context Protocol, over the
// Streamable HTTP transport, conventionally at /v1/mcp. It is built on the official Go
// SDK (github.com/modelcontextprotocol/go-sdk), which only this package imports.
//
// # Tools
//
// Each API is one tool, named by its id. Its description is the API's, followed by its
// cost ("Costs 2 credits per call."), which _meta also carries under [MetaCost]. Its
// input schema is the catalog's JSON Schema (draft 2020-12) and, for an API that
// declares result fields, its output schema is the catalog's result schema. The tools
// follow the catalog: when the registry reports a change, tools are added, replaced
// and removed, and every connected session gets notifications/tools/list_changed on
// its event stream. A key restricted to some APIs lists only those, and calling
// another is answered as a call to an unknown tool would be (-32602, with a message
// that names the APIs the key may call).
//
// File APIs take their file by address only: MCP has no upload, so the tool's input
// schema makes the url parameter required, and the service fetches the file (from
// public addresses only, unless the Service allows private ones), as in REST's URL
// form. Passing the file field itself is refused with a message that says so.
//
// # Calls
//
// A tool call goes through the one pipeline of [tollgate.Service]: lookup, validation,
// admission (rate limit, concurrency slot, credits reserved at the same cost as over
// REST), the call, settlement (refunded when the API failed on the service's side).
// A success carries the API's data twice, as structuredContent and as JSON text
// content. Refused arguments, an API's failure and the plan's limits are tool results
// with isError: true, whose text starts with the error's code (invalid_input, rejected,
// api_failed, timeout, rate_limited with the seconds to wait, concurrency_limited,
// credits_exhausted, unavailable), so that the model can read and act on them. Results
// that reached admission report the cost and the balance left in _meta under
// [MetaCredits]; the HTTP answer carries the credit and rate headers of REST
// (X-Credits-Cost, X-Credits-Remaining, ...), and Retry-After when rate limited. When
// one HTTP request carries several tool calls (a batch, in protocol 2025-03-26),
// X-Credits-Cost is the sum of what they were charged, and the balance headers the
// lowest balance they left.
//
// # Errors
//
// Every answer of the endpoint that is not a success is a JSON-RPC error object, with
// the id of the request when it had one (null otherwise), a code (never 0), a message
// that says what to fix (clean text: no control characters, invalid UTF-8 or marks of
// a value that could not be formatted), data {"code": name} naming the cause as
// X-Error-Code does, and its HTTP status. The one exception is the edge's bare HTML
// 403 for a key of the wrong shape (see Credentials). The answers:
//
//   - a body that is not JSON, or is empty: 400, -32700;
//   - a message that is not a JSON-RPC 2.0 request, a request without its id, a
//     notification with an id, a batch holding such a message, an empty batch,
//     initialize in a batch: 400, -32600;
//   - an id that is neither a string nor an integer of at most 2^53-1 in magnitude
//     (written without a fraction or exponent), which the SDK could not answer as it
//     was sent: 400, -32600, with a null id;
//   - a request without the Mcp-Session-Id of a session (other than initialize), or
//     initialize within a session: 400, -32600;
//   - an unknown method: -32601, in a 200 answer for a request (it has an id to answer)
//     and a 400 for a notification or a batch;
//   - params that are not a JSON object, or missing where the method needs them: -32602,
//     in a 200 answer for a request and a 400 for a notification or a batch;
//   - an unknown tool, or arguments that are not an object: 200, -32602;
//   - a tool call of an account that the operator suspended: 200, [CodeForbidden],
//     account_suspended, with a message that says to contact the operator (the
//     session, tools/list and the other methods still work);
//   - an unknown session (ended, timed out, or begun on another instance): 404, -32600,
//     session_not_found, on which clients start a new session;
//   - a session begun with another credential: 403, [CodeForbidden];
//   - a POST that does not accept both application/json and text/event-stream, or a GET
//     that does not accept text/event-stream: 406, -32600, not_acceptable;
//   - a GET or DELETE without Mcp-Session-Id: 400, -32600;
//   - Content-Type other than application/json: 415, -32600;
//   - a method other than GET, POST, DELETE and OPTIONS: 405 with Allow, -32600;
//   - an Mcp-Protocol-Version the server does not speak: 400, -32022 (MCP's
//     unsupported protocol version), naming the versions it speaks;
//   - a batch in protocol 2025-06-18 or later, which has none, whether the request says
//     its version in Mcp-Protocol-Version or it comes on a session that agreed on such a
//     version: 400, -32600;
//   - a batch of more than [Options.MaxBatchMessages] messages: 400, -32600,
//     batch_too_large (see Limits);
//   - a key's requests that are not billed beyond their rate: 429 with Retry-After,
//     [CodeLimited], rate_limited; an initialize beyond the session caps: 429 (the
//     key's) or 503 (the process's), [CodeLimited], too_many_sessions; a message whose
//     result does not fit the answer: [CodeLimited], answer_too_large (see Limits);
//   - Last-Event-ID (this server does not resume streams), or a second GET event
//     stream on one session (409): -32600;
//   - a body over [Options.MaxBodyBytes]: 413, -32600;
//   - a Host that fails the DNS-rebinding check: 403, [CodeForbidden];
//   - the credential answers of the Credentials section (401 [CodeUnauthorized], 403
//     [CodeForbidden]), and 503 -32603 while the handler is closing.
//
// The handler checks the JSON-RPC envelope itself (the body, the version, the ids,
// params that are not an object, and a session's lifecycle), which the SDK would
// answer wrongly or only after serving the request (envelope.go says why). Which
// methods exist, which are notifications and which need params is the SDK's to say:
// it refuses such a message, like the transport's misuses, with a plain-text
// http.Error, for which it offers no hook. The handler hands the SDK a response writer
// that passes everything through except such a refusal, which it holds back and
// answers with the JSON-RPC error above, matched by the SDK's text (sdkwriter.go and
// envelope.go list them). A plain refusal it does not know keeps the SDK's status and
// quotes its text; a failure of the SDK itself (5xx) is logged at Error and answered
// -32603. A plain Go error of a method (which the SDK would send with code 0) becomes
// -32603, or -32600 for a lifecycle message out of order.
//
// A client's mistake is logged at Info at most: Error is for the service's own
// failures. The SDK logs some mistakes (a call before initialization, initialize or
// notifications/initialized twice, a request of the sessionless protocol) at Error or
// Warn; the handler's slog handler in front of [Options.Logger] passes those at Info,
// and drops the SDK's Info records of every session's start and end.
//
// # Credentials
//
// Every HTTP request is authenticated, not only the first of a session: a key in
// x-api-key or as Authorization: Bearer, a dashboard session token in x-jwt, or, when
// [Options.VerifyToken] is set, an OAuth access token as Authorization: Bearer (any
// bearer value that is not UUID-shaped). The key needs the mcp channel. The answers
// are REST's, in JSON-RPC form where the body is JSON:
//
//   - no credential: 401 with the WWW-Authenticate challenge of [Options.Challenge],
//     and the JSON-RPC error [CodeUnauthorized]. With OAuth on, the challenge points
//     OAuth clients at the RFC 9728 metadata, which the host serves and names
//     explicitly; with OAuth off it is a bare Bearer realm, so that no client is sent
//     to a metadata URL that does not answer;
//   - a key that is not UUID-shaped (or, with OAuth off, any bearer value that is not):
//     the edge's bare HTML 403, without CORS headers;
//   - an unknown key (a rotated one's old value, say) or a refused token: 401, the
//     challenge with error="invalid_token", [CodeUnauthorized];
//   - a key that may not use MCP, from this address, or any more (revoked, expired):
//     403 and [CodeForbidden].
//
// The error's data names the cause ({"code": "forbidden"}), as X-Error-Code does. An
// OAuth caller is authenticated by the id of the key its token was granted for
// ([tollgate.Caller.KeyID]): its connection survives a rotation of the
// key, while a client configured with the key's value fails on its next request after
// a rotation. The SDK also binds each session to the key (or account) that opened it,
// so another key cannot use it.
//
// # Sessions and streams
//
// The handler is stateful: a session starts with initialize, lives in this process,
// and ends with DELETE or after [Options.SessionTimeout] without requests. Stateful
// serving is what lets the handler push notifications/tools/list_changed to connected
// clients (on their GET event stream), which the catalog's changes require, and gives
// each connection a stream the handler can close; it is also cheaper per call than
// stateless serving, for which the SDK builds a session for every request. The price is that several instances need session affinity (route by the
// Mcp-Session-Id header); an instance that does not know a session answers 404, on
// which clients start a new one. Clients of the 2026-07-28 protocol, which is
// sessionless, are told (by the SDK) that this server speaks the earlier versions, and
// fall back to them.
//
// A revoked key stops every connection at once, OAuth ones included. Every request is
// checked, so the next one is refused; and the open streams of the key, GET event
// streams and POSTs whose answer is pending, are ended: each open request is
// registered with its credential, and when the handler's Service rotates or revokes a
// key, or ends a session (the handler subscribes to those events of
// [tollgate.Service.Events]), the key's open requests are
// authenticated again at once, and those refused are ended (a pending POST is answered
// with the refusal). So a revocation ends the key's streams, a rotation ends those
// opened with the old value but not the OAuth ones, and a sign-out ends the streams of
// the session that signed out, not those of the key's other sessions. Revocations made through another instance, and
// tokens that expire, are caught by a periodic check: each open stream authenticates
// its credential again every [Options.RecheckInterval] (default 5 s), and ends when it
// is refused or cannot be checked. Streams are ended rather than sessions, because
// ending a request is immediate while closing a session waits for its calls in flight;
// the session itself is refused on its next request and closed by its timeout.
//
// A GET event stream lasts as long as its session, so the handler lifts the server's
// write deadline for it, and [Handler.Close] ends every stream and session: call it
// when shutting down (http.Server.RegisterOnShutdown), since http.Server.Shutdown waits
// for open streams.
//
// # Limits
//
// What one key can make a process build or hold through the endpoint is bounded, and
// each bound refuses with a JSON-RPC error that names it (the defaults are the Default
// constants; [Options] sets them):
//
//   - A batch (protocol 2025-03-26 and earlier) holds at most
//     [Options.MaxBatchMessages] messages, 50 by default and never more than
//     [MaxBatchMessagesLimit] (100); a larger one is refused as a whole, before any of
//     its messages is read, with 400 and batch_too_large. A session that agreed on
//     2025-06-18 or later, which have no batches, refuses them whatever the request's
//     Mcp-Protocol-Version says: the handler looks the session up.
//   - The answer to one HTTP request holds at most [Options.MaxAnswerBytes] (4 MiB by
//     default) of results, which the handler counts as each leaves its method, before
//     the SDK encodes it (a tool list by the encoded size of each tool, a tool result
//     by its contents). A result that does not fit is replaced by an error, and every
//     message of the request served after it is refused without running
//     (answer_too_large, [CodeLimited]): a batch gets the results that fit and errors
//     for the rest, and says to send those again in another request. A tool call
//     whose result does not fit ran and was charged: its answer is a tool result with
//     isError whose text starts with answer_too_large and that carries the call's
//     credits. Set the bound above the largest result an API returns, twice over (a
//     tool result carries the API's data as text and as structured content); larger
//     results are for REST.
//   - The requests that are not billed, every method but tools/call (initialize, ping,
//     tools/list, resources/list, prompts/list, logging/setLevel, ...), are limited per
//     key by a token bucket of their own: [Options.UnbilledBurst] at once (100), then
//     [Options.UnbilledPerMinute] a minute (300). The decision: a separate rate rather
//     than the plan's rate limit, which counts billed calls, so that listing tools never
//     spends the calls a plan sells and a plan without a rate limit still bounds them.
//     A request, or a batch as a whole, that needs more tokens than the bucket holds
//     is refused with 429, Retry-After, [CodeLimited] and rate_limited. Notifications
//     and responses are not counted. The bucket runs on the Service's clock, per
//     process.
//   - Live sessions are capped per key (a session token that names no key counts for
//     its account) at [Options.MaxSessionsPerKey] (100) and per handler at
//     [Options.MaxSessions] (10,000). An initialize beyond is refused before the SDK
//     builds a session: 429 for the key's cap, 503 for the process's, [CodeLimited],
//     too_many_sessions, with a message that says which cap and how to free a slot. A
//     session's slot is freed when it ends: DELETE, [Options.SessionTimeout] without
//     requests, [Handler.Close], or when this handler's Service revokes its key, or
//     rotates it (the sessions opened with the old value, which can no longer be used,
//     are closed; an OAuth session survives a rotation and keeps its slot), or ends the
//     session token that opened it. A key revoked through another instance frees its
//     slots as its sessions time out.
//
// # Proxies and browsers
//
// The SDK's protection against DNS rebinding refuses a request that arrives on a
// loopback socket with a Host that is not loopback, which also refuses every request
// that a reverse proxy on the same host forwards with the public Host. The handler
// makes that check itself instead, and lets through requests from the trusted proxies
// of the edge ([Options.Edge], edge.Options.TrustedProxies), which are also the only
// ones whose X-Forwarded-For (IP allow-lists) is believed. CORS is the edge's, as for
// REST: every origin by default, preflights without a key, and the transport's headers
// (Mcp-Session-Id, WWW-Authenticate) exposed besides the credit headers. Bodies are bounded by [Options.MaxBodyBytes].
//
// # Mounting
//
// With the embedded authorization server of package oauth (authServer), which
// this package does not import; examples/server is the whole assembly:
//
//	resource := "https://api.example.com/v1/mcp"
//	mcpHandler, _ := mcp.NewHandler(svc, &mcp.Options{
//		VerifyToken: func(ctx context.Context, token string) (string, error) {
//			grant, err := authServer.VerifyAccessToken(ctx, token, resource)
//			return grant.KeyID, err
//		},
//		Challenge: authServer.Challenge(resource),
//	})
//	mux.Handle("/v1/mcp", mcpHandler)
//	srv.RegisterOnShutdown(mcpHandler.Close)
package mcp
