// Package safefetch downloads files from user-supplied URLs without letting
// the caller reach the gateway's own network (server-side request forgery).
//
// A [Fetcher] accepts only absolute http and https URLs without credentials,
// and only talks to public internet addresses: loopback, private, link-local,
// multicast, reserved, documentation, benchmarking and shared (carrier-grade
// NAT) ranges are refused, as are well-known cloud metadata endpoints. IPv4
// addresses hidden inside IPv6 (IPv4-mapped, NAT64 and 6to4) are judged by
// the IPv4 address they carry. [Blocked] is the classifier.
//
// # Checking at dial time
//
// Checking a host name before the request and then handing the name to an
// HTTP client is not enough: the client resolves the name again, and a
// hostile DNS server can answer with a public address the first time and
// with 127.0.0.1 the second (DNS rebinding). The Fetcher therefore installs
// its own dial function. For every connection it opens, including those made
// for redirects, it resolves the host itself, refuses the connection if any
// resolved address is blocked, and dials the exact address it checked, as an
// IP literal, so the dialer never resolves anything again.
//
// A [net.Dialer] Control hook checks the address of the socket that is
// actually being connected as a second guard. It costs nothing, and it keeps
// the policy in force even if a future change to the dial path lets a host
// name, or an address that was not checked, reach the dialer.
//
// Environment proxies (HTTP_PROXY and friends) are disabled: through a proxy
// the Fetcher would dial the proxy, not the target, and the proxy would reach
// whatever the URL names, internal hosts included.
//
// # Other limits
//
// Redirects are followed up to a limit (3 by default) and every target is
// validated again. Downloads are capped in size, both by Content-Length and
// while reading, and the whole fetch, redirects and body included, runs
// under one timeout. A final status outside 2xx is an error.
//
// [Fetcher.Check] validates a URL and resolves and checks its host without
// connecting; it is a cheap pre-check before admitting work. It does not
// replace the dial-time check, which [Fetcher.Fetch] always makes.
// [Fetcher.CheckAll] checks many URLs as Check checks one, but bounded as
// one: each distinct host is resolved once, [LookupParallelism] at a time,
// and all within one timeout, so that a list of URLs on hosts whose name
// servers never answer holds the caller no longer than a single URL does.
//
// # AllowPrivate
//
// [Options.AllowPrivate] turns the address policy off entirely, so loopback
// and private hosts can be fetched. It exists for local development (the
// example server's -allow-private-fetch flag) and tests, and must not be set
// where callers are untrusted. URL validation, redirect, size and time limits
// still apply.
//
// All failures are reported as [*Error], whose [Reason] says what went wrong
// and whose message tells the user what to change.
//
// # One answer for every refused host name
//
// A host name that does not exist, cannot be resolved, has no addresses or
// resolves to a blocked address gets one message ("the host "x" cannot be
// fetched from: files are fetched only from hosts with public internet
// addresses; check the url"). Telling these apart would let an outsider map the
// names of the internal network: an internal name resolves, to a private
// address, where a made-up one does not exist. The detail (which it was, and
// the blocked address) goes to [Options.Logger], at Info for a name that does
// not exist or has no addresses and at Warn for a blocked address or a failing
// resolver: a refusal is the caller's doing, never an Error of the service. An
// IP literal is told why it is refused ("10.0.0.1 is a private address"),
// which says nothing the address does not.
package safefetch
