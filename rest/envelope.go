package rest

import (
	"errors"
	"net/http"
	"strings"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/internal/envelope"
)

// HeaderErrorCode carries the machine-readable code of an error response (see
// [tollgate.Code]); it tells apart the causes that share a status, such as the three
// causes of a 429: rate_limited, concurrency_limited and credits_exhausted.
const HeaderErrorCode = "X-Error-Code"

// writeData writes a success envelope around data, with CORS headers.
func (h *Handler) writeData(w http.ResponseWriter, r *http.Request, status int, data any) {
	b, err := envelope.Encode(data)
	if err != nil {
		h.log.ErrorContext(r.Context(), "rest: cannot encode a result", "path", r.URL.Path, "error", err)
		h.writeError(w, r, &tollgate.Error{Code: tollgate.CodeInternal, Message: "internal error: the result cannot be encoded", Err: err}, nil, nil)
		return
	}
	h.writeEncoded(w, r, status, b)
}

// writeEncoded writes a success envelope around data already encoded as JSON, with
// CORS headers.
func (h *Handler) writeEncoded(w http.ResponseWriter, r *http.Request, status int, encoded []byte) {
	h.cors.apply(w.Header(), r)
	envelope.WriteData(w, status, encoded)
}

// writeError writes an error envelope with the status of the error's code. For an
// authenticated caller it adds the credit headers: from the receipt when the call
// reached admission, else from a read of the balance.
func (h *Handler) writeError(w http.ResponseWriter, r *http.Request, err error, p *tollgate.Principal, rc *tollgate.Receipt) {
	var e *tollgate.Error
	if p != nil && p.Cached {
		// The key came from the cache and the call did not reach admission, which
		// would have checked it: check it now, so that a rotated or revoked key gets
		// its own answer rather than this one.
		if verr := h.svc.Verify(r.Context(), p); verr != nil {
			err, p, rc = verr, nil, nil
		}
	}
	if !errors.As(err, &e) {
		h.log.ErrorContext(r.Context(), "rest: unexpected error", "path", r.URL.Path, "error", err)
		e = &tollgate.Error{Code: tollgate.CodeInternal, Message: "internal error"}
	}
	if e.Code == tollgate.CodeNoCredential || e.Code == tollgate.CodeMalformedCredential {
		writeEdge403(w)
		return
	}
	hdr := w.Header()
	switch {
	case rc != nil:
		setReceiptHeaders(hdr, rc)
		if !rc.HasBalance && p != nil {
			h.setBalanceHeaders(r, hdr, p)
		}
	case p != nil:
		h.setBalanceHeaders(r, hdr, p)
	}
	if e.RetryAfter > 0 {
		billing.SetRetryAfter(hdr, e.RetryAfter)
	}
	hdr[HeaderErrorCode] = []string{e.Code.String()}
	h.cors.apply(hdr, r)
	envelope.WriteError(w, e.Code.HTTPStatus(), e.Message)
}

func (h *Handler) setBalanceHeaders(r *http.Request, hdr http.Header, p *tollgate.Principal) {
	if b, err := h.svc.Balance(r.Context(), p); err == nil {
		billing.SetCreditHeaders(hdr, p.Plan.Name, 0, b)
	}
}

// setReceiptHeaders writes the credit and rate headers of a call.
func setReceiptHeaders(hdr http.Header, rc *tollgate.Receipt) {
	if rc.HasBalance {
		billing.SetCreditHeaders(hdr, rc.Plan.Name, rc.Charged, rc.Balance)
	}
	if rc.HasRate {
		billing.SetRateHeaders(hdr, rc.Plan, rc.Rate)
	}
}

// edge403 is the edge's answer to a request without a well-formed key: a bare HTML page,
// no JSON and no CORS headers, as the specification requires. In a browser it surfaces
// as a network failure.
const edge403 = "<html>\r\n<head><title>403 Forbidden</title></head>\r\n<body>\r\n<center><h1>403 Forbidden</h1></center>\r\n</body>\r\n</html>\r\n"

func writeEdge403(w http.ResponseWriter) {
	hdr := w.Header()
	hdr["Content-Type"] = []string{"text/html"}
	hdr["Cache-Control"] = []string{"no-store"}
	w.WriteHeader(http.StatusForbidden)
	w.Write([]byte(edge403))
}

// cors applies the CORS policy.
type cors struct {
	any     bool
	origins map[string]bool
}

func newCORS(origins []string) cors {
	c := cors{any: len(origins) == 0}
	c.origins = make(map[string]bool, len(origins))
	for _, o := range origins {
		if o == "*" {
			c.any = true
		}
		c.origins[strings.TrimSuffix(o, "/")] = true
	}
	return c
}

var (
	anyOrigin     = []string{"*"}
	exposeHeaders = []string{strings.Join(append([]string{HeaderErrorCode}, billing.CreditHeaderNames...), ", ")}
	varyOrigin    = []string{"Origin"}
)

// apply writes the CORS headers of a JSON response.
func (c cors) apply(hdr http.Header, r *http.Request) bool {
	if c.any {
		hdr["Access-Control-Allow-Origin"] = anyOrigin
	} else {
		hdr["Vary"] = varyOrigin
		origin := r.Header.Get("Origin")
		if !c.origins[origin] {
			return false
		}
		hdr["Access-Control-Allow-Origin"] = []string{origin}
	}
	hdr["Access-Control-Expose-Headers"] = exposeHeaders
	return true
}

// preflight answers CORS preflight requests. They carry no key and need none.
func (h *Handler) preflight(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	if h.cors.apply(hdr, r) {
		hdr.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
		hdr.Set("Access-Control-Allow-Headers", "X-Api-Key, Authorization, X-Jwt, Content-Type, X-Auth-Mode, Idempotency-Key")
		hdr.Set("Access-Control-Max-Age", "600")
	}
	w.WriteHeader(http.StatusNoContent)
}
