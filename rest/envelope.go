package rest

import (
	"errors"
	"net/http"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/internal/envelope"
	"github.com/tollgate-dev/tollgate/internal/httpx"
)

// HeaderErrorCode carries the machine-readable code of an error response (see
// [tollgate.Code]); it tells apart the causes that share a status, such as the three
// causes of a 429: rate_limited, concurrency_limited and credits_exhausted.
const HeaderErrorCode = httpx.HeaderErrorCode

// writeData writes a success envelope around data, with CORS headers.
func (h *Handler) writeData(w http.ResponseWriter, r *http.Request, status int, data any) {
	b, err := envelope.Encode(data)
	if err != nil {
		h.log.ErrorContext(r.Context(), "rest: cannot encode a result", "path", r.URL.Path, "error", err)
		h.writeError(w, r, &tollgate.Error{Code: tollgate.CodeInternal, Message: "internal error: the result cannot be encoded", Err: err}, nil)
		return
	}
	h.writeEncoded(w, r, status, b)
}

// writeEncoded writes a success envelope around data already encoded as JSON, with
// CORS headers.
func (h *Handler) writeEncoded(w http.ResponseWriter, r *http.Request, status int, encoded []byte) {
	h.cors.Apply(w.Header(), r)
	envelope.WriteData(w, status, encoded)
}

// setReceiptHeaders writes the credit and rate headers of a call's receipt, with the
// IETF rate headers when the host asked for them.
func (h *Handler) setReceiptHeaders(hdr http.Header, rc *tollgate.Receipt) {
	httpx.SetReceiptHeaders(hdr, rc)
	if h.ietf && rc.Rate != (billing.RateDecision{}) {
		httpx.SetIETFRateHeaders(hdr, rc.Plan, rc.Rate)
	}
}

// writeError writes an error envelope with the status of the error's code (see
// [Status]), and the credit and rate headers of its receipt (nil for a request that
// carries no call's figures).
func (h *Handler) writeError(w http.ResponseWriter, r *http.Request, err error, rc *tollgate.Receipt) {
	var e *tollgate.Error
	if !errors.As(err, &e) {
		h.log.ErrorContext(r.Context(), "rest: unexpected error", "path", r.URL.Path, "error", err)
		e = &tollgate.Error{Code: tollgate.CodeInternal, Message: "internal error"}
	}
	if e.Code == tollgate.CodeNoCredential || e.Code == tollgate.CodeMalformedCredential {
		httpx.WriteEdge403(w)
		return
	}
	hdr := w.Header()
	if rc != nil {
		h.setReceiptHeaders(hdr, rc)
	}
	if e.RetryAfter > 0 {
		httpx.SetRetryAfter(hdr, e.RetryAfter)
	}
	hdr[HeaderErrorCode] = []string{e.Code.String()}
	h.cors.Apply(hdr, r)
	envelope.WriteError(w, Status(e.Code), e.Message)
}
