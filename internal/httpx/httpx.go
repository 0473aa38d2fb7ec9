// Package httpx holds the HTTP behaviour that every front door (REST, GraphQL, MCP)
// shares: the edge's bare 403, the CORS policy, and the credit and rate headers.
package httpx

import (
	"net/http"
	"strings"
)

// HeaderErrorCode carries the machine-readable code of an error response.
const HeaderErrorCode = "X-Error-Code"

// HeaderIdempotentReplayed marks an answer sent again for a request retried with the
// same Idempotency-Key: "true".
const HeaderIdempotentReplayed = "Idempotent-Replayed"

// edge403 is the edge's answer to a request without a well-formed key: a bare HTML
// page, no JSON and no CORS headers, so that a request without a key learns nothing
// about the service. In a browser it surfaces as a network failure.
const edge403 = "<html>\r\n<head><title>403 Forbidden</title></head>\r\n<body>\r\n<center><h1>403 Forbidden</h1></center>\r\n</body>\r\n</html>\r\n"

// WriteEdge403 writes the edge's answer to a request without a well-formed key.
func WriteEdge403(w http.ResponseWriter) {
	hdr := w.Header()
	hdr["Content-Type"] = []string{"text/html"}
	hdr["Cache-Control"] = []string{"no-store"}
	w.WriteHeader(http.StatusForbidden)
	w.Write([]byte(edge403))
}

// CORS is a CORS policy: every origin, or a list.
type CORS struct {
	any     bool
	origins map[string]bool
	methods string
	expose  []string // the Access-Control-Expose-Headers value
}

// NewCORS returns the policy that allows origins (every origin if the list is empty or
// holds "*") to call the given methods.
func NewCORS(origins []string, methods string) CORS {
	c := CORS{any: len(origins) == 0, methods: methods, expose: exposeHeaders}
	c.origins = make(map[string]bool, len(origins))
	for _, o := range origins {
		if o == "*" {
			c.any = true
		}
		c.origins[strings.TrimSuffix(o, "/")] = true
	}
	return c
}

// Expose returns the policy exposing names to cross-origin scripts in place of
// [ExposedHeaderNames], for a front door whose answers carry headers of their own.
func (c CORS) Expose(names ...string) CORS {
	c.expose = []string{strings.Join(names, ", ")}
	return c
}

var (
	anyOrigin     = []string{"*"}
	exposeHeaders = []string{strings.Join(ExposedHeaderNames, ", ")}
	varyOrigin    = []string{"Origin"}
)

// Apply writes the CORS headers of the response to a cross-origin request, and reports
// whether the request's origin is allowed. A request without an Origin header is not
// cross-origin (browsers send one with every cross-origin request): it gets no CORS
// headers, which would serve it nothing, and Apply reports true. A response that may
// be cached (the caller set Cache-Control before Apply) then carries Vary: Origin, so
// that a shared cache does not answer a cross-origin request with it.
func (c CORS) Apply(hdr http.Header, r *http.Request) bool {
	origin, cross := r.Header["Origin"]
	if !cross {
		if _, cacheable := hdr["Cache-Control"]; cacheable || !c.any {
			hdr["Vary"] = varyOrigin
		}
		return true
	}
	if c.any {
		hdr["Access-Control-Allow-Origin"] = anyOrigin
	} else {
		hdr["Vary"] = varyOrigin
		if len(origin) == 0 || !c.origins[origin[0]] {
			return false
		}
		hdr["Access-Control-Allow-Origin"] = origin[:1:1]
	}
	hdr["Access-Control-Expose-Headers"] = c.expose
	return true
}

func (c CORS) Preflight(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	if c.Apply(hdr, r) {
		hdr.Set("Access-Control-Allow-Methods", c.methods)
		hdr.Set("Access-Control-Allow-Headers", "X-Api-Key, Authorization, X-Jwt, Content-Type, Accept, X-Auth-Mode, Idempotency-Key")
		hdr.Set("Access-Control-Max-Age", "600")
	}
	w.WriteHeader(http.StatusNoContent)
}
