// Package tracing makes OpenTelemetry traces of a Tollgate service: a span per call,
// with a child span for its authentication, its admission, each API's run and its
// settlement, and one for each round trip to a store, in the trace of the request that
// made the call. A handler runs under its run's span, so the spans it makes are that
// span's children.
//
// The call core does not import OpenTelemetry. It tells the tracers set on its seam,
// the event bus, of each phase of a call as it begins and ends (event.Tracer,
// Service.Events().Trace); a [Tracer] is one, and makes the spans. The stores that make
// round trips tell a tracer of them through hooks of their own, which import nothing of
// OpenTelemetry either: store/postgres's QueryTracer, set on the pool's connections,
// and store/redis's Hook, added to the client.
//
//	tr := tracing.New(&tracing.Options{TracerProvider: tp})
//	cfg.ConnConfig.Tracer = postgres.QueryTracer(tr) // before pgxpool.NewWithConfig
//	client.AddHook(redis.Hook(tr))
//	svc, err := tollgate.New(cat, stores, plans, nil)
//	defer tr.Attach(svc)()
//	srv := &http.Server{Handler: tr.Handler(mux)} // mux: every door, doors.Mount
//
// # The incoming trace
//
// The trace context of an incoming request (W3C traceparent) is continued by
// [Tracer.Handler], a middleware the host wraps around the mux that serves the doors,
// rather than by the HTTP edge (package edge): a door reads its caller from the edge,
// but calls the service with the request's own context, so the edge could continue a
// trace only if every door passed on a context it returned. The middleware serves every
// door the same way, REST, batches, GraphQL, MCP, the account API, the dashboard and
// the admin API, with no door knowing it; its server span follows OpenTelemetry's HTTP
// conventions. A host that makes its server spans already (otelhttp) wraps with its
// own instead, and the call's span is a child of the host's.
//
// # The spans
//
//	GET /v1/{api_id}              server  http.request.method, url.path, http.route, http.response.status_code, ...
//	└─ tollgate.call              internal (server when no span of this process is its parent)
//	   │                          tollgate.channel, tollgate.key.id, tollgate.plan,
//	   │                          tollgate.credits.charged, tollgate.settlement; error.type when refused
//	   ├─ tollgate.authenticate
//	   │  └─ SELECT               client  db.system.name, db.operation.name, db.query.text
//	   ├─ tollgate.admit
//	   │  └─ EVALSHA admit        client  db.system.name, db.operation.name, db.stored_procedure.name
//	   ├─ hash                    internal rpc.method, rpc.response.status_code; one per API, in parallel for a GraphQL query, one per item of a batch
//	   │  └─ (the handler's own spans)
//	   └─ tollgate.settle
//
// A phase that fails sets error.type: a Tollgate code ("rate_limited", "api_failed"),
// a store's (an SQLSTATE, a Redis error prefix), "timeout". The span's status is Error
// when the service or a store failed (internal, api_failed, timeout, unavailable, a
// store's error, a 5xx answer) and is left unset when the caller did (a refusal, a
// rejection, a 4xx answer), as the HTTP conventions leave a server's 4xx. No error's
// message is recorded.
//
// # What spans never hold
//
// No span holds a key's value: the credential is a header, and headers are not
// recorded; keys are named by their ids (tollgate.key.id). An account's id is
// recorded only with [Options.AccountIDs]: tollgate.account.id on the call's span, and
// the account ids of the management paths in url.path (which otherwise have
// "{account_id}" in their place). Query strings (url.query) are not recorded: they may
// hold an OAuth code. A statement's text is recorded with its placeholders, never its
// arguments; a Redis command by its name and script, never its keys or values.
//
// # Cost
//
// A phase within a span that does not record (its trace was not sampled, or the
// provider is OpenTelemetry's no-op, the global default) makes no span, so an
// unsampled request costs its server span's start and little more; attributes are set
// only on spans that record. Round trips made outside any span (a store's background
// work: sweeps, flushes, retries) make none. BenchmarkREST and BenchmarkRESTInterleaved
// measure a REST call with tracing off, on a no-op provider, unsampled, sampled and
// recorded without an exporter, and sampled and exported; docs/tracing.md gives the
// figures.
package tracing
