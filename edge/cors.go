package edge

import (
	"net/http"
	"strings"
)

// A CORS is a door's CORS policy: the allowed origins (all, or a list), the methods
// and headers of a preflight, and the headers a script may read. Its zero value allows
// no cross-origin call.
type CORS struct {
	on      bool
	any     bool
	origins map[string]bool
	methods string
	allow   string
	expose  []string // the Access-Control-Expose-Headers value
}

// newCORS returns the policy that allows origins (every origin if the list is nil) to
// call methods, sending allow headers and reading expose headers.
func newCORS(origins []string, methods string, allow, expose []string) CORS {
	c := CORS{on: true, any: origins == nil, methods: methods,
		allow: strings.Join(allow, ", "), expose: []string{strings.Join(expose, ", ")}}
	c.origins = make(map[string]bool, len(origins))
	for _, o := range origins {
		c.origins[o] = true
	}
	return c
}

var (
	anyOrigin  = []string{"*"}
	varyOrigin = []string{"Origin"}
)

// Apply writes the CORS headers of the response to a cross-origin request, and reports
// whether the request's origin is allowed. A request without an Origin header is not
// cross-origin (browsers send one with every cross-origin request): it gets no CORS
// headers, which would serve it nothing, and Apply reports true. A response that may
// be cached (the caller set Cache-Control before Apply) then carries Vary: Origin, so
// that a shared cache does not answer a cross-origin request with it. Under the zero
// policy no origin is allowed, and no header is written.
func (c CORS) Apply(hdr http.Header, r *http.Request) bool {
	origin, cross := r.Header["Origin"]
	if !c.on {
		return !cross
	}
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

// Preflight answers a CORS preflight with 204: for an allowed origin, the methods and
// headers it may use and how long it may keep the answer.
func (c CORS) Preflight(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	if c.on && c.Apply(hdr, r) {
		hdr.Set("Access-Control-Allow-Methods", c.methods)
		hdr.Set("Access-Control-Allow-Headers", c.allow)
		hdr.Set("Access-Control-Max-Age", "600")
	}
	w.WriteHeader(http.StatusNoContent)
}
