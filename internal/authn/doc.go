// Package authn verifies the credentials of calls: API keys by their value, keys by
// their stable id (the OAuth access tokens of the MCP connection), and session tokens.
// It is internal to the call core: package tollgate makes the one [Authority] of a
// Service from its key store, its Options.Sessions and Options.SessionStore, and a
// [KeyCache] configured by its Options.KeyCache ([auth.KeyCacheOptions]). What it
// verifies, and the verdicts it gives, are package [auth]'s: accounts, keys,
// restrictions, credentials, session tokens, [auth.Principal] and the errors.
//
// # Checking keys
//
// An [Authority] holds the policy of verification (hashing the value, refusing a
// revoked or expired key or account, checking a session's binding to its key) over an
// [auth.KeyStore] that only keeps records. Without a cache, it reads the key from the
// store on every call, so a rotation or a revocation refuses the very next call, on
// every instance that shares the store. With a [KeyCache], key records are kept in
// memory between calls; a principal authenticated from the cache is marked
// [auth.Principal.Cached], and the caller must check that its key is still live before
// it serves the call or answers it ([Authority.Refresh] reads the store again). The
// Service of package tollgate checks it in the admission step of every paid call, in
// the same round trip to the store, and checks it before any other answer is sent, so
// a rotated or revoked key is refused on its very next call with a cache too. A key
// changed on this instance leaves its cache at once: the Service calls
// [Authority.Forget] on the key events of its bus.
//
// # Session tokens
//
// A session token is checked by [auth.Sessions] (signature, lifetime), then against the
// stores: a session that was ended ([auth.SessionStore]) is refused, and so is one whose
// account no longer exists, or whose key was revoked, or rotated since a bound session
// started. Every such verdict is an [auth.ErrInvalidSession].
package authn
