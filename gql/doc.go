// Package gql is the read-only GraphQL gateway of a Tollgate service: one endpoint,
// POST /v1/graphql, whose schema has one root field per API of the catalog.
//
// # Schema
//
// The schema is generated from the catalog at run time and rebuilt whenever the catalog
// changes (the registry's version); graphql-go serves it, with resolvers made by
// reflection, since graphql-go binds fields to Go types only. Root fields are named by
// catalog.RootFieldName ("date-info" is dateinfo), arguments and result fields by
// catalog.GraphQLName ("day-of-week" is day_of_week); the catalog refuses at
// registration any API whose names would collide. Arguments are
// typed from the parameter schema: strings, Int, Float, Boolean, lists, input objects,
// enums for string enums whose values are GraphQL names (other enums are Strings checked
// by the catalog), with defaults and descriptions. Results are object types built from
// the declared result fields, or the JSON scalar for an API that declares none. Int
// results carry the catalog's 64-bit integers. Every root field is nullable: a failed
// API is null beside an error. A file API is a root field too, so that a query naming it
// is refused with FILE_UPLOAD_NOT_SUPPORTED; files go through REST.
//
// # A query's life
//
//  1. Transport: POST only (405 with Allow: POST otherwise); Content-Type
//     application/json; the answer in application/graphql-response+json or
//     application/json as Accept asks (406 otherwise).
//  2. The key, as for REST: no key or a value of the wrong shape gets the edge's HTML
//     403; an unknown key 401 INVALID_API_KEY; a key without the graphql channel, or
//     blocked otherwise, 403 FORBIDDEN. A query that names an API, of an account the
//     operator suspended: 403 ACCOUNT_SUSPENDED, before its arguments are checked,
//     charged nothing (a query that names no API is still answered).
//  3. The plan: graphql-go parses and validates the query, expands fragments, applies
//     @skip/@include and variables, and executes it once with every root field
//     resolved to a probe of its API's result instead of calling the API: the root
//     resolvers record the APIs and arguments the query names, and what graphql-go
//     writes for the probes is the shape of the answer (see 6). A query that names no
//     API (introspection, __typename) is answered from the plan, free.
//  4. Checks, before anything runs: too many API fields, too deep or too many fields
//     (QUERY_TOO_COMPLEX, 400); a file API (FILE_UPLOAD_NOT_SUPPORTED, 400); an API the
//     key may not call (FORBIDDEN, 403); more distinct APIs than the plan allows per
//     query (PLAN_LIMIT_EXCEEDED, 403); arguments the catalog refuses (BAD_USER_INPUT,
//     400); an API named several times with different arguments (BAD_USER_INPUT, 400,
//     see Aliases).
//  5. Admission of the whole query as one call ([tollgate.Service.CallAll]): one rate-limit
//     event, one concurrency slot, and the sum of the REST costs of its APIs; short
//     credits are 402 INSUFFICIENT_CREDITS and nothing runs. The APIs run in parallel,
//     each once.
//  6. The results are written into the answer's shape: graphql-go decided every key,
//     its order, __typename and introspection when it planned the query, and the
//     gateway writes each value it marked with the API's result, as graphql-go writes
//     it. An API that failed is null with an error carrying path and extensions.code
//     (API_ERROR when it failed on the service's side, refunded; BAD_USER_INPUT when
//     it judged its input wrong, charged), and the answer is 200 with data and errors.
//     A query whose plan does not show every place (an object with every field left
//     out by @skip or @include, or an API's __typename alone beside introspection) is
//     answered by graphql-go executing it again with the results, which writes the
//     same.
//
// # Aliases
//
// A query may name an API several times, under aliases or through fragments. If every
// time names it with the same arguments, it runs once, counts once (for the cost and
// for the plan's APIs per query) and every alias gets its result, shaped by its own
// selection. With different arguments the query is refused before anything runs or is
// charged: 400 BAD_USER_INPUT, with a message that names the API and says to name each
// API once per query. A GraphQL call costs what the same call costs over REST, so it
// cannot run one API several times for the price of one; running many inputs through
// one API is the job of a batch request, not of aliases.
//
// "The same arguments" is judged on what the catalog makes of them, after graphql-go
// has applied variables, defaults and @skip/@include and expanded fragments: the order
// of the arguments, a default given or left out, a literal or a variable of the same
// value, and a string or block string are all the same; a field that @skip or @include
// leaves out is not named at all.
//
// Two caches keep repeated requests cheap, since clients send the same few queries over
// and over: a query's plan (its calls and the shape of its answer, or the whole answer
// of a query that names no API) is kept per schema version, operation, query text and
// variables, so the next identical request is neither parsed nor executed by
// graphql-go, which has no prepared queries of its own; and request bodies seen before
// (up to 4 KB, without variables) skip JSON decoding. Both are LRUs of 1,024 entries.
//
// Parse and validation errors are 400 for application/graphql-response+json and 200 for
// application/json, as the GraphQL-over-HTTP specification says; the gateway's own
// refusals (401, 402, 403, 429, 503) use their status with either media type. Every
// refusal carries the extensions.code of its first error in X-Error-Code too, and every
// answer to an authenticated request carries the credit headers. The HTTP edge
// (trusted proxies, CORS, the bare 403 for a request without a well-formed key, the
// IETF rate headers) is the one every door shares: [Options.Edge].
//
// Every error message is clean text, whatever graphql-go wrote: its marks for a value
// it could not format (a fragment on an unknown type is "... can never be of type
// %!q(<nil>)" in graphql-go, "... can never be of an unknown type" here), line breaks,
// control characters and invalid UTF-8 are rewritten, a very long message is cut, and
// an error graphql-go reports twice is reported once (see internal/cleantext).
//
// # Estimates
//
// [Handler.Estimate] judges a query as the gateway would, without running it,
// charging it or counting it against the rate limit: its APIs, its cost (the sum of
// the REST costs of its distinct APIs), the caller's plan and balance, and the refusal
// the gateway would give. It goes through steps 1 to 4 above on the same code (the
// same plan, from the same cache) and asks the service's [tollgate.Service.QuoteAll],
// which holds the query to the rules and the cost sum of CallAll and says whether the
// balance covers it: so what a page shows before a query runs is what the gateway then
// does, short of the rate limit and the concurrency ceiling, which are judged when the
// query is sent. The dashboard's GraphQL explorer shows it as the person types.
//
// # Mounting
//
//	mux.Handle("/v1/graphql", gqlHandler)
//
// A host whose web pages send queries with a browser's session cookie (the dashboard's
// explorer) wraps it in session.Handler.Cookies, which serves a request that carries
// only the cookie as that session, with the session's CSRF token; a key or token in a
// header still wins over the cookie:
//
//	mux.Handle("/v1/graphql", sessions.Cookies(gqlHandler))
package gql
