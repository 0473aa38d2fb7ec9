// Package dashboard is the account holders' web portal: server-rendered pages where a
// person signs in with an API key, reads their plan, credits and last 30 days of usage,
// and creates, rotates and revokes their keys. It is one [http.Handler] with relative
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
//	POST /sign-out  ends the session
//	GET  /keys      the keys table and the form that creates a sub-key; POST /keys creates it
//	GET  /rotate    confirm the rotation of ?key=ID;  POST /rotate rotates it
//	GET  /revoke    confirm the revocation of ?key=ID;  POST /revoke revokes it
//	GET  /usage     usage over a range (?from=&to= dates, interval=hour|day, by=api|key,
//	                api=): charts of calls, credits and errors, a table with latencies
//	                (500 rows a page, ?page=N)
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
// The pages are plain HTML forms and work without JavaScript; the script only adds a
// copy button to a new key's value.
package dashboard
