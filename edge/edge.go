// Package edge is the HTTP edge that every front door shares: reading a request into a
// caller (its credential, the client's address through the trusted proxies, its
// channel), the bare 403 for a request without a well-formed credential, CORS, the
// receipt headers of a call, and the JSON envelope with the one table of HTTP statuses.
// A door translates its protocol and leaves these duties to its [Door], so that no door
// can do them differently.
//
// A host makes one [Edge] and gives it to every door, so that one list of trusted
// proxies, one CORS policy and one choice of rate headers serve them all.
//
// The trace context of a request (W3C traceparent) is not read here: the doors call
// the service with the request's own context, so the middleware of package tracing,
// which the host wraps around the mux of every door, continues it for all of them.
package edge

import (
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/wire"
)

// Options configures the edge. The zero value is the default; every field is optional.
type Options struct {
	// TrustedProxies lists the addresses of reverse proxies whose X-Forwarded-For
	// header is believed, for IP allow-lists, the audit log's addresses and the
	// throttling of sign-ins. By default none is: the client address is the TCP peer.
	TrustedProxies []netip.Prefix
	// AllowedOrigins lists the origins whose scripts may call the doors that answer
	// cross-origin calls (REST, GraphQL, MCP). The default, nil, allows every origin
	// ("*"), which suits key-authenticated APIs: a browser never sends cookies to
	// them. List origins to narrow it.
	AllowedOrigins []string
	// IETFRateHeaders adds the IETF draft's forms of the rate headers to the answers of
	// calls whose plan has a rate limit: RateLimit-Policy ("default";q=<burst>;w=60)
	// and RateLimit ("default";r=<remaining>;t=<seconds until the bucket is full>).
	// They are off by default: X-RateLimit-Limit, X-RateLimit-Remaining and, on a 429,
	// Retry-After say the same, and each header line costs every answer.
	IETFRateHeaders bool
	// AccessLog receives one line for each request of the doors that [Edge.Handler]
	// wraps (doors.Mount wraps every route it mounts): its request id, door, account,
	// key id, APIs, status, error code, credits and duration, never a key's value. Nil,
	// the default, writes no access log.
	AccessLog *slog.Logger
}

// An Edge holds the HTTP settings that every door shares. Create it with [New]; it is
// safe for concurrent use.
type Edge struct {
	trusted []netip.Prefix
	origins []string // nil: every origin
	ietf    bool
	access  *slog.Logger // nil: no access log
}

// New returns the edge with the given settings. opts may be nil. An allowed origin is
// a scheme (http or https) and a host, with a port if it is not the scheme's default,
// such as https://app.example; it is compared as a browser writes it (the scheme and
// host in lower case, no default port). "*" anywhere in the list allows every origin.
func New(opts *Options) (*Edge, error) {
	if opts == nil {
		opts = &Options{}
	}
	e := &Edge{trusted: slices.Clone(opts.TrustedProxies), ietf: opts.IETFRateHeaders, access: opts.AccessLog}
	for _, p := range e.trusted {
		if !p.IsValid() {
			return nil, errors.New("edge: Options.TrustedProxies holds an invalid prefix")
		}
	}
	anyOrigin := false
	for _, o := range opts.AllowedOrigins {
		if o == "*" {
			anyOrigin = true
			continue
		}
		origin, ok := canonicalOrigin(o)
		if !ok {
			return nil, errors.New("edge: Options.AllowedOrigins: " + quote(o) + " is not an origin; write it as scheme://host[:port], such as https://app.example")
		}
		e.origins = append(e.origins, origin)
	}
	if anyOrigin {
		e.origins = nil
	}
	return e, nil
}

// canonicalOrigin returns o as a browser sends it in Origin: the scheme and host in
// lower case, without the scheme's default port, or false if o is not an http or
// https origin (it has a path beyond "/", a query, a fragment or user information).
func canonicalOrigin(o string) (string, bool) {
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" ||
		u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" ||
		strings.HasSuffix(o, "?") || strings.HasSuffix(o, "#") {
		return "", false
	}
	scheme, host, port := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return scheme + "://" + host, true
}

func quote(s string) string { return `"` + strings.ToValidUTF8(s, "\uFFFD") + `"` }

// Default returns the edge of the default settings: no trusted proxy, every origin,
// no IETF rate headers. Doors use it when their host gives none.
func Default() *Edge { return &Edge{} }

// Addr returns the address r comes from: the TCP peer, unless the peer is a trusted
// proxy, then the first address of X-Forwarded-For, read from the right, that is not
// one (see [auth.ClientAddr]).
func (e *Edge) Addr(r *http.Request) netip.Addr { return auth.ClientAddr(r, e.trusted) }

// FromTrustedProxy reports whether the TCP peer of r is one of the trusted proxies.
func (e *Edge) FromTrustedProxy(r *http.Request) bool {
	if len(e.trusted) == 0 {
		return false
	}
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	addr := ap.Addr().Unmap()
	for _, p := range e.trusted {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// CredentialFrom extracts the credential of a request: the first of the x-api-key
// header, Authorization: Bearer and the x-jwt header that is present (see
// [auth.CredentialFrom]). A request without one fails with an [*tollgate.Error] of
// [tollgate.CodeNoCredential], one whose credential is not shaped as one (a key that is
// not a UUID, a session token that is not three base64url segments) with
// [tollgate.CodeMalformedCredential]: the edge answers both with its bare 403.
func CredentialFrom(h http.Header) (auth.Credential, error) {
	c, err := auth.CredentialFrom(h)
	switch {
	case err == nil:
		return c, nil
	case errors.Is(err, auth.ErrNoCredential):
		return c, &tollgate.Error{Code: tollgate.CodeNoCredential, Message: err.Error(), Err: err}
	default:
		return c, &tollgate.Error{Code: tollgate.CodeMalformedCredential, Message: err.Error(), Err: err}
	}
}

// A DoorSpec describes what a door asks of the edge.
type DoorSpec struct {
	// Methods lists the methods a cross-origin script may call the door with, for the
	// CORS preflight ("GET, POST, OPTIONS"). Empty: the door answers no cross-origin
	// call (the management APIs, which a browser reaches only from their own origin):
	// its answers carry no CORS headers and its preflights allow nothing.
	Methods string
	// AllowHeaders adds to the headers a cross-origin call may send (the credential
	// forms, Content-Type, Accept, X-Auth-Mode and Idempotency-Key).
	AllowHeaders []string
	// ExposeHeaders adds to the headers a cross-origin script may read on an answer (the
	// error code, the mark of a replayed answer, the credit and rate headers).
	ExposeHeaders []string
	// Logger receives the failures the door's answers report as internal errors. The
	// default is slog.Default().
	Logger *slog.Logger
}

// A Door is one front door's view of the edge: the shared settings and the door's own
// CORS methods. Create it with [Edge.Door].
type Door struct {
	edge *Edge
	cors CORS
	log  *slog.Logger
}

// Door returns the view of the edge for a door described by spec.
func (e *Edge) Door(spec DoorSpec) *Door {
	d := &Door{edge: e, log: spec.Logger}
	if d.log == nil {
		d.log = slog.Default()
	}
	if spec.Methods != "" {
		d.cors = newCORS(e.origins, spec.Methods,
			append(wire.RequestHeaders(), spec.AllowHeaders...),
			append(wire.ExposedHeaders(), spec.ExposeHeaders...))
	}
	return d
}

// Edge returns the edge the door belongs to.
func (d *Door) Edge() *Edge { return d.edge }

// Caller performs the edge check and returns how r arrived, on channel ch (zero for an
// endpoint that is not a call of an API). A request without a well-formed credential is
// answered with the bare 403 ([Deny]), and Caller returns false.
func (d *Door) Caller(w http.ResponseWriter, r *http.Request, ch auth.Channel) (tollgate.Caller, bool) {
	cred, err := CredentialFrom(r.Header)
	if err != nil {
		Deny(w)
		return tollgate.Caller{}, false
	}
	return tollgate.Caller{Credential: cred, Channel: ch, Addr: d.edge.Addr(r)}, true
}

// Addr returns the address r comes from (see [Edge.Addr]).
func (d *Door) Addr(r *http.Request) netip.Addr { return d.edge.Addr(r) }

// CORS writes the CORS headers of the answer to r (none for a door that answers no
// cross-origin call), and reports whether r's origin may read it.
func (d *Door) CORS(hdr http.Header, r *http.Request) bool { return d.cors.Apply(hdr, r) }

// Preflight answers a CORS preflight: 204, with the methods and headers a script of an
// allowed origin may use.
func (d *Door) Preflight(w http.ResponseWriter, r *http.Request) { d.cors.Preflight(w, r) }

// Receipt writes the credit and rate headers of a call's receipt, with the IETF forms
// of the rate headers when the host asked for them.
func (d *Door) Receipt(hdr http.Header, rc *tollgate.Receipt) {
	SetReceiptHeaders(hdr, rc)
	if d.edge.ietf && rc.Rate != (billing.RateDecision{}) {
		SetIETFRateHeaders(hdr, rc.Plan, rc.Rate)
	}
}
