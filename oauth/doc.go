// Package oauth is the embedded OAuth 2.1 authorization server of the MCP connection.
// An MCP client that connects without a key is answered 401 with a challenge
// ([Server.Challenge]) that points at the resource's metadata
// ([Server.ProtectedResourceMetadata], RFC 9728); it then discovers this server
// (RFC 8414), registers or presents a client metadata document, sends the person to the
// consent page, and exchanges the code for tokens. The resource server checks every
// request's token with [Server.VerifyAccessToken].
//
// # Endpoints
//
// [Server.Handler] serves, on relative routes that the host mounts at the root of the
// issuer's origin:
//
//	GET  /.well-known/oauth-authorization-server   metadata (RFC 8414)
//	POST /oauth/register                           dynamic client registration (RFC 7591)
//	GET  /oauth/authorize                          the consent page
//	POST /oauth/authorize                          the person's decision
//	POST /oauth/token                              authorization_code and refresh_token grants
//	POST /oauth/revoke                             token revocation (RFC 7009)
//
// # Clients
//
// Every client is public: it has no secret, and proves that it is the one that asked
// for a code with PKCE, which is required, with the S256 method only. A client either
// registers (RFC 7591) or uses the https URL of a client metadata document as its
// client_id (draft-ietf-oauth-client-id-metadata-document). The URL is on another
// origin than the server's own, which the consent page would show as the service
// vouching for the client; the document is fetched with the SSRF-safe fetcher (no
// private addresses, no redirects, at most 5 KiB, within 5 seconds), must name itself
// as client_id and list its redirect URIs, and is cached for 5 minutes. Registrations
// are rate-limited server-wide, every field is bounded, and a client that no approval
// refers to is deleted after [UnusedClientTTL].
//
// # Redirect URIs
//
// A redirect URI is https, or http on a loopback host for native clients:
// 127.0.0.1, [::1] or localhost, written so. It is printable ASCII with a lowercase
// scheme, and has no userinfo, no fragment, no percent-encoding in its host and no
// port out of range: registration, metadata documents, the authorization request and
// the token request all refuse one that does. The redirect_uri of an authorization
// request must equal a registered URI byte for byte, except that a loopback URI may
// name any port, since a native client listens on whatever port is free (RFC 8252
// section 7.3); its scheme, host, path and query must still be the registered ones.
// So http://127.0.0.1:9999/cb matches http://127.0.0.1:51234/cb and
// http://127.0.0.1/cb, but neither http://localhost:9999/cb nor
// http://127.0.0.1:9999/cb/. The token request must repeat the redirect_uri of the
// authorization request exactly. localhost is accepted beside the IP literals that
// RFC 8252 section 8.3 recommends, because MCP clients use it widely, browsers
// resolve it to the loopback interface only, and PKCE protects a code that another
// program on the machine might receive; the consent page warns when the client
// returns to the person's own computer. The code and the other response parameters
// are appended to the redirect URI, whose own query is kept as it is.
//
// # Consent
//
// The consent page names the client and shows prominently the host it returns to, then
// its full redirect URI and the resource. Nothing a client chooses can change how the
// page reads: its name is printable text without control characters or invisible
// formatting characters (bidirectional controls, which would reorder the page's own
// text, and zero-width characters) or stacks of more than four combining marks on a
// letter, which a browser draws over the lines around; and redirect URIs and client_id
// URLs are printable ASCII, so that a host is shown in punycode rather than in
// look-alike letters. It says that the client is unverified: every client either
// registered itself and chose its own name, or is described by a metadata document,
// which proves only where the document is published (the page names that host, and says
// when the client returns to another one). When the client returns to a loopback
// address, the page warns that any program on the computer could claim to be it. The
// person approves by typing an API key, or, with [Options.Login], as the person logged
// in to the host. The form is bound to the browser and to the request by a one-time
// nonce kept in a cookie (__Host- prefixed when the issuer is https), which keys an
// HMAC over the request's parameters; it can be submitted once and for ten minutes
// ([ConsentTTL]). A submission that the browser says comes from another site
// (Sec-Fetch-Site same-site or cross-site) is refused even when it passes that check: a
// page of a sibling site, which can set a cookie for the parent domain unless the
// cookie is __Host-, may not decide for the person. From a browser that does not send
// Sec-Fetch-Site, a submission whose Origin is not the server's own (the issuer's
// scheme and host, or the request's host), "null" included, is refused likewise. The page may not be framed
// (X-Frame-Options and Content-Security-Policy frame-ancestors), is never cached, and
// runs no script.
//
// # Redirects
//
// The authorization endpoint sends the browser to a client's redirect URI only after
// the person has acted on the consent page of a valid request, in a browser that
// passes the form's check: with the code after an approval, with
// error=access_denied after a denial, both with state and iss (RFC 9207). Every other
// answer is an error page on the server's origin (HTML, with its status and the
// consent page's headers): for an unknown client or a redirect URI that is not
// registered, and also for a request whose client and redirect URI are valid but which
// is wrong otherwise (no PKCE challenge, a response_type other than code, an unknown
// resource, a bad scope or state, a repeated parameter); its page names the OAuth
// error code for the developer. RFC 6749 section 4.1.2.1 would send those last errors
// to the redirect URI. The server does not, as RFC 9700 section 4.11.2 asks: anyone
// may register a client with any redirect URI, or publish a metadata document, so no
// redirect URI is trusted before the person has seen it, and redirecting a request
// that fails validation would make the server an open redirector.
//
// # Resources
//
// Every code and token is bound to one resource (RFC 8707), its audience, which must
// be one of [Options.Resources]. The MCP specification requires clients to send the
// resource parameter; a request without one is given the first configured resource,
// so that older clients still connect, and a token request that names a resource must
// name the one of its grant.
//
// # What is stored
//
// A [Store] keeps clients, approvals (the person's consent: client, key, resource),
// authorization codes and tokens. Codes and tokens are opaque random strings (256
// bits, with a prefix that says what they are) stored only as their SHA-256
// ([oauthstore.HashSecret]); their values are never stored or logged. A code lives 60
// seconds ([CodeTTL]) and is redeemed once (see Code redemption). Access tokens live
// an hour and refresh tokens 30 days by default ([Options.AccessTokenTTL],
// [Options.RefreshTokenTTL]). Each refresh rotates
// the refresh token; presenting a rotated one again means it was copied, and revokes
// the approval. Revoking either token (RFC 7009) revokes the approval. Expired
// records are deleted as the server goes. The store never reads the clock: the server
// passes the time, from [Options.Now].
//
// # Code redemption
//
// The token endpoint checks an authorization_code exchange completely before it
// redeems the code: the code is live, the client_id is the one the code was issued
// to, redirect_uri is exactly the one of the authorization request, the PKCE
// code_verifier matches the code_challenge, a resource named is the grant's, and the
// approving key may still be used. An exchange of a code not yet redeemed that names
// another client or redirect_uri, or sends a verifier that does not match, comes from
// someone who holds the code without being the client it was issued to: it is refused
// and burns the code (its approval, which has no tokens yet, is revoked), as RFC 9700
// favours, so that the code is not left to anyone who can guess or steal its
// verifier; the real client's exchange then fails too, and it authorizes again. The
// same mistakes with a code already redeemed revoke nothing. Any other refusal (a
// malformed request, a resource that is not the grant's, a key that may no longer be
// used) changes nothing. Only once every check passed is the code redeemed, atomically
// in the store. A second exchange that passes every check means that someone else holds the
// code and its verifier: the store revokes the approval in the same step as it finds
// the code redeemed, which ends every token the code gave (RFC 6749 section 4.1.2). Of
// concurrent exchanges of one code, one redeems it and the others are replays, so no
// token of that code survives.
//
// # Why tokens bind to key ids
//
// An approval records the stable id of the API key that approved, not its value. An
// OAuth connection survives a rotation of the key (the person approved the key, not one
// of its values), and a revocation ends it at once: the resource server therefore
// authenticates the key by its id on every call (a tollgate.Caller with its KeyID),
// which applies the key's current state and restrictions, and the token endpoint
// refuses to refresh tokens of a key that may no longer be used ([Keys.CheckKeyID]). A
// token never grants more than its key.
//
// # Scopes
//
// The server grants one scope, [Scope] ("mcp"), whatever a client asks for: what a
// connection may do is decided by the key's restrictions, not by scopes.
package oauth
