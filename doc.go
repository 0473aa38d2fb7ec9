// Package tollgate runs a key-authenticated, metered catalog of single-purpose APIs
// inside a Go service.
//
// A host registers its APIs (typed parameters, a credit cost, a handler) in a
// [catalog.Registry], picks stores for keys, credits and limits, and mounts the
// http.Handlers of the front doors it wants: REST (package rest, /v1/{api_id}), a
// read-only GraphQL gateway (/v1/graphql) and an MCP tool connection (/v1/mcp).
// Accounts have plans ([billing.Plan]) that set their monthly credits, rate limit and
// concurrency ceiling; keys are UUIDs, stored only as hashes, with sub-keys that narrow
// their account by API, channel, IP allow-list and expiry, and with rotation and
// revocation that take effect on the very next call.
//
// # The one pipeline
//
// Every front door is a thin protocol adapter over one [Service], which runs each call
// through the same steps:
//
//  1. authenticate the credential against the key store, on every call
//     ([Service.Authenticate]; with [Options.KeyCache], against a cached record whose
//     key the admission step checks again);
//  2. authorize: the restrictions of the account and the key (channel, address, API);
//  3. look up the API and validate the input ([Service.Lookup], [Service.Prepare]);
//     a failure here is never charged;
//  4. admit: rate limit, concurrency slot and credit reservation, one step
//     ([billing.Meter]);
//  5. run the handler(s), in parallel when a GraphQL query names several APIs;
//  6. settle: keep the charge, or refund it when the call failed on the service's side
//     (an error, a panic, a timeout), and release the slot.
//
// Failures are [*Error] values whose [Code] each front door maps to its protocol through
// one table ([Code.HTTPStatus], [Code.GraphQLCode]).
//
// # Assembly
//
//	reg := &catalog.Registry{}
//	apis.Register(reg) // or reg.Register(catalog.API{...}) for each API
//	plans, _ := billing.NewPlans(billing.Plan{Name: "pro", Credits: 100000, RatePerMinute: 600, Concurrency: 10})
//	svc, _ := tollgate.New(reg, tollgate.Stores{
//		Keys:   memory.NewKeyStore(),
//		Ledger: memory.NewLedger(nil),
//		Rates:  memory.NewRateLimiter(),
//		Slots:  memory.NewConcurrencyLimiter(),
//	}, plans, nil)
//	defer svc.Close() // stops the background sweep of expired reservations
//	restHandler, _ := rest.NewHandler(svc, nil)
//	mux := http.NewServeMux()
//	mux.Handle("/v1/", restHandler)
//
// examples/server is the full assembly on in-memory stores; run it with
// go run ./examples/server.
package tollgate
