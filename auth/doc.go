// Package auth is what a request's identity is made of: accounts and their API keys,
// the restrictions that narrow them, the credential forms a request may present, session
// tokens, and the stores through which they are kept ([KeyStore], [SessionStore]). The
// call core (package tollgate's Service) verifies a request's credential against them
// and gives a [Principal], the account and key the request acts for; this package says
// what a principal may do ([Principal.CheckAccess], [Principal.CheckAPI]) and what the
// verdicts are.
//
// # Accounts and keys
//
// An [Account] is the party on whose behalf calls are made; its plan fixes the credits,
// rate limit and concurrency that all its keys share. An account is created with one
// primary key and may have any number of sub-keys. A key's value is a UUID, written as
// 8-4-4-4-12 hexadecimal digits, whose upper- and lowercase spellings are the same key.
// Only the SHA-256 hash of the lowercase value is stored ([Hash]): the value is shown
// once, when the key is created or rotated, and can never be read again.
//
// [Restrictions] narrow an account or a key by the APIs it may call, the channels it may
// use (REST, GraphQL, MCP), the addresses it may come from and the moment it expires.
// Both the account's restrictions and the key's apply to every call. A sub-key can only
// narrow its account, never widen it: a key whose restrictions allow anything its account
// does not is refused when it is created, with an error that wraps [ErrWidens] and says
// what is too wide ([Restrictions.Within]).
//
// Rotation gives a key a new value and refuses the old one at once, with no grace period;
// the key keeps its id, name and restrictions. Revocation refuses the key from its very
// next call on. Credentials bound to a key's stable id rather than its value, such as the
// OAuth access tokens of the MCP connection (tollgate.Caller.KeyID), survive a rotation
// and end with a revocation ([Principal.ByID]).
//
// # Credentials and the edge check
//
// A request presents its credential in one of three headers, whose names are
// case-insensitive: x-api-key: <key>, Authorization: Bearer <key>, or x-jwt: <session
// token>. They are tried in that order; the first one present is used and the others are
// ignored, so sending several is not an error ([CredentialFrom]).
//
// The edge check refuses, before any account is looked up, a request that presents no
// credential ([ErrNoCredential]) or one of the wrong shape: a key that is not a UUID (a
// truncated key, a placeholder, the text "undefined") or a session token that is not
// three base64url segments ([ErrMalformedCredential]). The front doors answer both with a
// bare HTML 403, with no JSON body and no CORS headers.
//
// # Verdicts
//
// A well-formed key that matches no key of any account, the old value of a rotated key
// included, gives [ErrUnknownKey] (401, "unauthorized"): it is the only verdict on the
// credential itself, and it says nothing about which keys exist. A session token that is
// forged, malformed or expired, or names an account that does not exist, gives
// [ErrInvalidSession], and one sent to a service that accepts none [ErrSessionsDisabled]
// (both 401). A valid credential that may not make the call
// gives a [*DeniedError] (403) whose Reason says why: the key is revoked or expired, or
// its restrictions or its account's forbid the address, the channel or the API. Every
// *DeniedError matches [ErrForbidden] and its Reason with [errors.Is].
//
// # Checking keys
//
// The Service of package tollgate verifies credentials over a [KeyStore] that only
// keeps records. Without a key cache, it reads the key from the store on every call, so
// a rotation or a revocation refuses the very next call, on every instance that shares
// the store. With one (tollgate.Options.KeyCache, configured by [KeyCacheOptions]), key
// records are kept in memory between calls; a principal authenticated from the cache is
// marked [Principal.Cached], and its key must be checked as still live before the call
// is served or answered. The Service checks it in the admission step of every paid
// call, in the same round trip to the store, and checks it before any other answer is
// sent, so a rotated or revoked key is refused on its very next call with a cache too.
//
// A client's address, for IP allow-lists, is the TCP peer; X-Forwarded-For is believed
// only as far as it was written by proxies the host trusts ([ClientAddr]).
//
// # Session tokens
//
// [Sessions] issues and verifies the x-jwt credential: a JWT signed with HS256, with a
// secret of at least [MinSessionSecret] bytes, whose claims are sub (the account id), iat
// and exp. No other algorithm is accepted, whatever the token's header claims. A session
// acts for the whole account, within the account's restrictions, and its account is
// looked up like a key's.
//
// # Time and stores
//
// Nothing in this package reads the clock: every method that depends on the time takes it
// as an argument. A [KeyStore] implementation wraps the sentinels of package store for
// the conditions it reports (a missing record, a taken id or hash), reports anything
// else as the store being unavailable, makes every change visible to the very next read
// on any instance, and passes the suite storetest.TestKeyStore.
package auth
