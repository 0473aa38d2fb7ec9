// Package dashboard is the account holders' web portal: server-rendered pages where a
// person signs in with an API key (or through the host's own sign-in), reads their
// plan, credits and last 30 days of usage, creates, rotates and revokes their keys, and
// browses and tries the catalog's APIs. It is one [http.Handler] with relative
// routes, its templates, styles and script embedded: no page loads anything from
// another host, so it works offline and behind strict firewalls. Mount it with its
// prefix stripped:
//
//	mux.Handle("/dashboard/", http.StripPrefix("/dashboard", dash))
//
// Routes, relative to the mount point:
//
//	GET  /          the overview: plan, credits, renewal, limits, a chart of 30 days
//	GET  /sign-in   the sign-in form;  POST /sign-in starts a session with an API key
//	POST /login     starts a session through the host's Login (the host's form)
//	POST /sign-out  ends the session
//	GET  /keys      the keys table and the form that creates a sub-key; POST /keys creates it
//	GET  /rotate    confirm the rotation of ?key=ID;  POST /rotate rotates it
//	GET  /revoke    confirm the revocation of ?key=ID;  POST /revoke revokes it
//	GET  /apis      the catalog: each API's cost, whether it takes a file, and whether
//	                the session's key may call it (over which channels, or why not)
//	GET  /api       the API ?id= names: method and path, parameters and rules, what is
//	                charged, GraphQL field, MCP tool, code to copy, the try-it form
//	POST /api       calls the API ?id= names with the try-it form, shows REST's answer
//	GET  /usage     usage over a range (?from=&to= dates, interval=hour|day, by=api|key,
//	                api=): charts of calls, credits and errors, a table with latencies
//	GET  /usage.csv the same figures as CSV (key ids and names, never key values)
//	GET  /audit     the account's audit log, newest first (?cursor= for older entries)
//	GET  /mcp       the MCP endpoint's URL and configurations of common MCP clients
//	GET  /assets/   the embedded style sheet and script
//
// Every figure is read through the same [tollgate.Service] methods as the
// self-service API (OwnAccount, OwnKeys, OwnUsage, OwnAuditLog, CreateOwnKey,
// RotateOwnKey, RevokeOwnKey), with the session as the credential: the pages show what GET
// /v1/account and GET /v1/analytics answer, and the service's rules decide who may do
// what.
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
//     dashboard's own script and styles (no inline script), forbids framing and form
//     posts to other origins; X-Content-Type-Options: nosniff and Referrer-Policy:
//     no-referrer. Pages are Cache-Control: no-store.
//   - A key's value is shown once, on the page that answers its creation or rotation,
//     never put in a URL, a log, or any later page. The sign-in form posts the key in
//     its body; the key is never echoed back, not even after a failed sign-in.
//
// The pages are plain HTML forms and work without JavaScript; the script only adds
// copy buttons (to a new key's value and to the snippets).
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
//     the TOLLGATE_API_KEY environment variable in every snippet, never written in;
//     the command-line client also takes the service from TOLLGATE_BASE_URL. curl
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
//     X-Credits-Remaining), X-Error-Code, and the envelope, indented. An upload's size
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
package dashboard
