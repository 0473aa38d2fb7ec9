// Package dashboard is the account holders' web portal: server-rendered pages where a
// person signs in with an API key (or through the host's own sign-in), reads their
// plan, credits and last 30 days of usage, creates, rotates and revokes their keys,
// manages the account's webhook endpoints, browses and tries the catalog's APIs, explores the GraphQL gateway, seeing what a
// query costs before it runs, and reads the API reference. It is one [http.Handler]
// with relative routes, its templates, styles and scripts embedded: no page loads
// anything from another host, so it works offline and behind strict firewalls. Mount
// it with its prefix stripped:
//
//	mux.Handle("/dashboard/", http.StripPrefix("/dashboard", dash))
//
// Routes, relative to the mount point:
//
//	GET  /          the overview: plan, credits, renewal, limits, a chart of 30 days
//	GET  /sign-in   the sign-in form;  POST /sign-in starts a session with an API key
//	POST /login     starts a session through the host's Login (the host's form)
//	POST /sign-out  ends the session
//	GET  /keys      the keys table, 50 keys a page (?cursor= for the next), and the form that creates a sub-key; POST /keys creates it
//	GET  /rotate    confirm the rotation of ?key=ID;  POST /rotate rotates it
//	GET  /revoke    confirm the revocation of ?key=ID;  POST /revoke revokes it
//	GET  /apis      the catalog: each API's cost, whether it takes a file, and whether
//	                the session's key may call it (over which channels, or why not)
//	GET  /api       the API ?id= names: method and path, parameters and rules, what is
//	                charged, GraphQL field, MCP tool, code to copy, the try-it form
//	POST /api       calls the API ?id= names with the try-it form, shows REST's answer
//	GET  /usage     usage over a range (?from=&to= dates, interval=hour|day, by=api|key,
//	                api=): charts of calls, credits and errors, a table with latencies
//	                (500 rows a page, ?page=N)
//	GET  /usage.csv the same figures as CSV (key ids and names, never key values)
//	GET  /audit     the account's audit log, newest first (?cursor= for older entries)
//	GET  /mcp       the MCP endpoint's URL and configurations of common MCP clients
//	GET  /webhooks  the account's webhook endpoints and the form that adds one;
//	                POST /webhooks adds it (with Options.Webhooks, as the routes below)
//	GET  /webhook   the endpoint ?id= names, its actions and its deliveries (?cursor=)
//	POST /webhook-test, /webhook-resend, /webhook-disable, /webhook-enable
//	                send it a test event, deliver a message again, disable or enable it
//	POST /webhook-rotate  gives it a new secret, shown once
//	GET  /webhook-delete  confirm the deletion of ?id=;  POST /webhook-delete deletes it
//	GET  /graphql   the GraphQL explorer (when Options.GraphQL is set)
//	POST /graphql/cost  a query's cost and the gateway's verdict, before it runs (JSON)
//	GET  /reference the API reference: the OpenAPI document drawn by Swagger UI
//	GET  /assets/   the embedded style sheets and scripts, and the vendored bundles
//
// Every figure is read through the same [tollgate.Service] methods as the
// self-service API (OwnAccount, OwnKeys, OwnUsage, OwnAuditLog, CreateOwnKey,
// RotateOwnKey, RevokeOwnKey), with the session as the credential: the pages show what GET
// /v1/account and GET /v1/analytics answer, and the service's rules decide who may do
// what.
//
// The holder of an account the operator suspended signs in and reads every page, each
// with a banner that says the account is suspended, that its calls are refused and to
// contact the operator; creating or rotating a key is refused meanwhile, revoking one
// is not. A closed account cannot sign in, and its sessions end, as a revoked key's do.
//
// # Security
//
//   - Sessions are those of package session: the cookie is HttpOnly and SameSite=Strict;
//     the dashboard signs in and out through its [session.Handler], so the same cookie
//     authenticates the self-service API wrapped in [session.Handler.Cookies].
//   - Every form that changes something is a POST that carries the session's CSRF
//     token in a hidden field, checked on the server; it must also come from the
//     service's own origin (the browser's Sec-Fetch-Site or Origin). Otherwise it is
//     refused with 403. The sign-in form, which has no session yet, is checked for
//     its origin.
//   - Every response carries a Content-Security-Policy that allows only the
//     dashboard's own script and styles (no inline script; the explorer also allows
//     its editor's nonce-carrying style element, see below), forbids framing and form
//     posts to other origins; X-Content-Type-Options: nosniff and Referrer-Policy:
//     no-referrer. Pages are Cache-Control: no-store.
//   - A key's value is shown once, on the page that answers its creation or rotation,
//     never put in a URL, a log, or any later page. The sign-in form posts the key in
//     its body; the key is never echoed back, not even after a failed sign-in.
//
// The pages are plain HTML forms and work without JavaScript, but for the explorer
// and the reference, which are drawn by their scripts; the dashboard's own script only
// adds copy buttons (to a new key's value and to the snippets).
//
// # Webhooks
//
// With [Options.Webhooks] (doors.Mount sets it from doors.Options.Webhooks), the
// navigation has a Webhooks page, where the account's holder manages the endpoints
// that receive the account's events: each endpoint's URL, the event types it receives
// (all of them when none is ticked), whether it is enabled (or why it is disabled),
// when it was created, and its secret masked; a form adds one, and its secret is shown
// once, on the page that answers, as a new key's value is. An endpoint the operator
// disabled is shown as disabled by the operator, with the operator's reason, and
// without Enable: only the operator enables it again (an enabling posted anyway is
// refused with 409). Each endpoint's page sends
// it a test event, disables or enables it, rotates its secret (the new one shown once),
// deletes it after a confirmation, and lists its deliveries, newest first, 20 a page
// (the event type and message id, pending, delivered or failed, the attempts, the last
// answer's status and error, the next attempt), each with a Resend button.
//
// The pages act through [webhook.Endpoints] with the rules of the account holders' API
// (/v1/account/webhooks), shared with it: the session is the holder, so only the
// primary key's session (or one of the whole account) manages endpoints, and a
// sub-key's sees a message saying so; the changes are made by the session's key (the
// audit log's actor); a URL or an event type is checked before anything else; adding,
// changing, enabling, rotating, testing and resending spend the self-service budget,
// deleting and disabling never do. The service's refusals are shown as on the other
// pages, with their messages and statuses. An endpoint's URL, which its owner typed,
// is shown as text, never as a link.
//
// # The APIs pages
//
// An API's page links from the catalog with a query (api?id=hash), not a path, so that
// every page stays at the dashboard's first level and its relative links work at any
// mount point. Its decisions:
//
//   - The code to copy calls the service's root URL: Options.PublicURL, or the scheme
//     and host of the request, with a placeholder for a Host header that is not a plain
//     host name (so no request puts its own text in a command). The key is read from
//     the brand's environment variable (Options.Brand: TOLLGATE_API_KEY by default) in
//     every snippet, never written in; the command-line client, named by the brand's
//     command, also takes the service from its TOLLGATE_BASE_URL. curl
//     sends a GET's parameters in the query string, a POST's as a JSON body, and a file
//     API's as a multipart upload (another snippet gives the file by its address).
//   - The example values are those of the generated packages' READMEs: each required
//     parameter and each one with an example, valued by its example, its default, its
//     first allowed value, or a value built from its type, format and bounds. Each
//     package's code is its README's example byte for byte, rendered by the
//     generator's own templates (internal/clientgen) with the names of
//     Options.Packages.
//   - Whether the key may call an API is judged with the principal the session
//     authenticates as, and the reasons are the service's own messages. GraphQL is not
//     listed for a file API, which it does not serve.
//   - The try-it form has one labelled control per parameter: a select for an enum
//     (with "not sent" for an optional one), a checkbox for a boolean (sent as true or
//     false, as it is ticked; it starts as the default), a number input with the
//     bounds, a date, email or url input for those formats, a text area for a long
//     string and for arrays (one element a line, or a JSON array) and objects (JSON
//     text). An empty control is not sent, so the default applies; the form starts
//     with the example values.
//   - Its post is checked as every form (origin, session, CSRF token), bounded to
//     64 KiB, or for a file API to the API's file limit plus 64 KiB as a multipart
//     form, and runs through [tollgate.Service.Call] with the session as the
//     credential on the rest channel, from the request's address: the key's APIs,
//     channels and address list, the rate limit, the concurrency ceiling and the
//     credits apply as to a REST call, which it is in the usage records. The page
//     shows what REST answers: the status of the error's code, the credit and rate
//     headers (the credits it cost and those left are X-Credits-Cost and
//     X-Credits-Remaining, and the part of those left that grants hold is
//     X-Credits-Granted), X-Error-Code, and the envelope, indented. An upload's size
//     and type are judged by the service, as for REST.
//
// # Signing in through the host
//
// A host whose people have accounts of its own gives the session handler a Login
// (session.Options.Login) and the dashboard the fields of its form
// ([Options.LoginFields]: name, label, type text, email or password). The sign-in page
// then offers that form beside the key's; it posts to /login, checked for its origin,
// and the Login reads the fields from the request. A refusal (an error wrapping
// session.ErrLoginRefused) shows the Login's message; any other error shows a message
// that says nothing of it, and the session handler logs it at ERROR. A password is
// never put back into the form. Setting LoginFields without a Login is an error of
// [NewHandler].
//
// # GraphQL explorer
//
// The explorer is an editor (CodeMirror 6 with cm6-graphql) that completes fields,
// arguments and types, marks errors and describes a name under the pointer, from the
// schema it introspects from /v1/graphql; a browser of the schema's types and fields
// with their descriptions; and a Run button (or Ctrl+Enter). Queries go to
// /v1/graphql from the page, same-origin, with the session cookie and the session's
// CSRF token in X-CSRF-Token: the host mounts the gateway behind
// [session.Handler.Cookies], which makes the cookie a credential there (a key in a
// header still wins over it, so key-authenticated callers see no change). The page
// never holds a key.
//
// As the person types, the page shows the query's cost before it runs: the credits
// (the sum of the REST costs of the distinct APIs it names), the number of APIs
// against the plan's per-query ceiling, the balance, and the refusal the gateway would
// give (more APIs than the plan allows, a balance short of the cost, a file API, a
// syntax error, an API the session's key may not call). The figures come from POST
// /graphql/cost, which asks the gateway's own judgement (gql.Handler.Estimate, through
// [Options.GraphQL] and doors.QueryCosts): the same parsing, plan and limits, and the
// service's own rules and cost sum ([tollgate.Service.QuoteAll]), so they cannot
// drift from what the gateway then charges; computing them in the browser would
// duplicate those rules.
// The endpoint runs nothing and charges nothing, and is held to the rules of a form:
// the dashboard's origin, the session, its CSRF token (in the X-CSRF-Token header), a
// JSON body. The rate limit and the concurrency ceiling are judged when a query is
// sent, not before. Once a query ran, the page shows its result, the credits it cost
// (its X-Credits-Cost header), the balance left (X-Credits-Remaining) and the part of
// it that grants hold (X-Credits-Granted).
//
// # API reference
//
// The reference draws the OpenAPI document of /v1/openapi.json with Swagger UI's dist
// bundle. The page fetches the document itself (from its own origin, without
// credentials) and hands it to Swagger UI, so Swagger UI makes no request: its
// validator badge, which would send the document's address to validator.swagger.io,
// is off (validatorUrl null); its configuration cannot come from the page's URL
// (queryConfigEnabled false); "Try it out" and Authorize are off and hidden, since a
// call needs a key the page does not hold. Its colours below WCAG AA contrast are
// raised by the dashboard's reference.css.
//
// # Vendored UI pieces
//
// The third-party pieces (CodeMirror and its GraphQL mode with graphql-js, Swagger UI)
// are npm packages pinned in tools/dashboard-assets/package-lock.json, bundled with the
// glue code of tools/dashboard-assets/src by its build.mjs (esbuild, fixed options:
// the same bytes on every run) into assets/vendor, with LICENSES.txt, the licence of
// every package in the bundles. The output is committed, so that building and running
// the dashboard needs no Node; a test rebuilds it and compares it byte for byte.
// Nothing is fetched from another host: no CDN, no web font.
//
// Assets are served with a strong ETag and Cache-Control: no-cache (a browser keeps
// them and revalidates with If-None-Match), gzip-compressed to browsers that accept
// it, compressed once per process.
//
// # Content-Security-Policy of the explorer and the reference
//
// Both pages keep the dashboard's policy: scripts only from the dashboard's own files
// (never inline, never eval), no framing, no connection to another origin. The
// reference's styles are files too. The explorer's editor writes its styles into a
// style element at run time (CodeMirror's style-mod, which uses constructable style
// sheets only inside a shadow root); its page therefore allows, besides the
// dashboard's style sheets, the style elements that carry a nonce, new on every
// response and given to its script (the script element's nonce), which hands it to
// the editor (EditorView.cspNonce). No style-src 'unsafe-inline' on any page.
package dashboard
