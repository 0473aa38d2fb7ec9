// Package session starts and ends sessions over HTTP, and turns a browser's session
// cookie into the x-jwt credential for the handlers it wraps.
//
// A session is started with an API key, or through a [Login] the host implements (its
// own users say which account a person may act for); see [accounts.Manager.StartSession]
// for what a session may do and when it ends. The [Handler] serves, relative to where
// the host mounts it:
//
//	POST   /v1/account/session  start a session: a cookie (the default) or a token
//	GET    /v1/account/session  the current session, with its CSRF token
//	DELETE /v1/account/session  sign out: end the session on every instance, clear the cookie
//
// # Starting a session
//
// The key comes in x-api-key or Authorization: Bearer, or in the JSON body's api_key
// field (for a sign-in form); without a key, the host's Login decides. The body's kind
// field says what the client wants: "cookie" (the default) sets the session cookie and
// answers the CSRF token; "token" sets no cookie and answers the session token, for a
// client that sends it as x-jwt. The key's value is never kept, logged, or put in the
// cookie, the token or a URL. Each start spends one event of the account's self-service
// budget ([accounts.Options.SelfServiceLimit]): beyond it, 429 with Retry-After and a
// message that says when to try again. Signing out is never refused for it.
//
// # Cookies
//
// The cookie is HttpOnly, SameSite=Strict, lasts as long as the session (Max-Age and
// Expires), and is Secure when the request came over TLS or [Options.SecureCookies] is
// set. A Secure cookie is named __Host-tollgate-session, a prefix that browsers honour
// only for a cookie with Path=/ and no Domain, set over HTTPS: no other host, not even a
// subdomain, can plant or overwrite it. Its Path is therefore /; over plain HTTP (local
// development) it is named tollgate-session, with the same Path. The cookie is a
// credential only where the host wraps a handler with [Handler.Cookies].
//
// # CSRF
//
// A request that [Handler.Cookies] authenticates by the cookie, with a method other than
// GET, HEAD or OPTIONS, must carry the session's CSRF token in the X-CSRF-Token header
// (an HMAC of the session id under the session secret, answered when the session starts
// and by GET /v1/account/session); without it, or with another, it is refused with a
// 403 envelope that says so. As defence in depth it must also not come from another
// origin: a browser's Sec-Fetch-Site, or else its Origin, must name this host
// ([http.CrossOriginProtection]). A request with a credential in a header (x-api-key,
// Authorization: Bearer, x-jwt) is not authenticated by the cookie: the header wins,
// the cookie is ignored, and no CSRF token is needed, since a browser never adds those
// headers on its own. Starting a session is checked for the origin too, so that another
// site cannot sign a visitor into its own account.
package session
