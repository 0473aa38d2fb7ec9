// Package tollgate runs a key-authenticated, metered catalog of single-purpose APIs
// inside a Go service.
//
// A host registers its APIs (typed parameters, a credit cost, a handler) in a
// [catalog.Registry], picks stores for keys, credits and limits, and mounts the
// http.Handlers of the front doors it wants: REST (package rest, /v1/{api_id}), a
// read-only GraphQL gateway (/v1/graphql) and an MCP tool connection (/v1/mcp).
// Accounts have plans ([billing.Plan]) that set their credits for each period (a month
// or a year, counted from the account's billing anchor), rate limit and concurrency
// ceiling; keys are UUIDs, stored only as hashes, with sub-keys that narrow their
// account by API, channel, IP allow-list and expiry, and with rotation and revocation
// that take effect on the very next call.
//
// # One call, one method
//
// Every front door is a thin protocol adapter over one [Service]. Its HTTP edge
// (package edge) reads the request into a [Caller] and it hands the call to
// [Service.Call] (one API) or
// [Service.CallAll] (several, as a GraphQL query names them), which run the whole
// pipeline:
//
//  1. authenticate the credential ([Caller]) against the key store (with
//     [Options.KeyCache], against a cached record whose key the admission checks again;
//     the service's authority, package internal/authn);
//  2. authorize: the restrictions of the account and the key (channel, address, API),
//     and the account's state: a suspended account's calls are refused
//     (CodeAccountSuspended, never charged), a closed account's keys are revoked;
//  3. look up the API, let the front door read the input the way the API takes it, and
//     validate it; a failure here is never charged;
//  4. admit: rate limit, concurrency slot and credit reservation, one step (the
//     service's meter, package internal/meter);
//  5. run the handler(s), in parallel when a call names several APIs;
//  6. settle: keep the charge, or refund it when the call failed on the service's side
//     (an error, a panic, a timeout), and release the slot.
//
// [Service.CallBatch] runs many inputs through one API (REST's batches) on the same
// steps: each item validated on its own, the valid ones admitted together (one
// rate-limit event each, one concurrency slot, one reservation of their total cost),
// run with bounded parallelism, and settled in one step that refunds each item that
// failed on the service's side; with an idempotency key, a retried batch runs and
// charges once ([IdempotencyOptions]).
//
// The front door answers from the [Reply]: the results, or the refusal, and the
// [Receipt] of the credit and rate headers. The duties no front door may forget live in
// the Service: a refusal of a caller whose key came from the cache is answered only
// after the key is checked, so a rotated or revoked key is refused on its very next
// call, and every refusal after authentication carries the balance. Failures are
// [*Error] values with a [Code], a kind of failure that knows no protocol; each front
// door owns the table that maps every code to its protocol.
//
// # What is not here
//
// The Service is the metered call and nothing else. Accounts, keys, credits and
// sessions are managed by package accounts, which publishes each change on the
// service's events ([Service.Events]); the audit log (package audit), the usage
// statistics (package usage) and any other cross-cutting feature are observers
// subscribed to those events.
//
// # Assembly
//
// The package Example is the whole assembly: a registry with an API, plans, stores on
// memory, the Service, the REST front door on a mux, an account and a key (package
// accounts), and a call.
// examples/server is the full assembly on in-memory stores (go run ./examples/server),
// and examples/distributed the same on PostgreSQL and Redis.
package tollgate
