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
	e, ok := asError(err)
	if !ok {
		h.log.ErrorContext(r.Context(), "rest: unexpected error", "path", r.URL.Path, "error", err)
	}
	if e.Code == tollgate.CodeNoCredential || e.Code == tollgate.CodeMalformedCredential {
		httpx.WriteEdge403(w)
		return
	}
	hdr := w.Header()
	if rc != nil {
		h.setReceiptHeaders(hdr, rc)
	}
	status := setErrorHeaders(hdr, e)
	h.cors.Apply(hdr, r)
	envelope.WriteError(w, status, e.Message)
}

// asError returns err's *tollgate.Error, or an internal error and false when err has
// none (a failure the pipeline did not expect, which the caller logs).
func asError(err error) (*tollgate.Error, bool) {
	var e *tollgate.Error
	if errors.As(err, &e) {
		return e, true
	}
	return &tollgate.Error{Code: tollgate.CodeInternal, Message: "internal error"}, false
}

// setErrorHeaders sets the headers of a refusal, Retry-After when it has one and
// X-Error-Code, and returns its status.
func setErrorHeaders(hdr http.Header, e *tollgate.Error) int {
	if e.RetryAfter > 0 {
		httpx.SetRetryAfter(hdr, e.RetryAfter)
	}
	hdr[HeaderErrorCode] = []string{e.Code.String()}
	return Status(e.Code)
}

// Answer sets in hdr the headers that the REST front door answers the reply of a call
// of one API ([tollgate.Service.Call]) with, the credit and rate headers of its receipt
// and, for a refusal or a failure, Retry-After and X-Error-Code, and returns the status
// and the envelope. It leaves out what depends on the request rather than the reply:
// CORS, the IETF rate headers a host may turn on, and the edge's HTML 403 for a
// request without a well-formed key. A page that shows what REST answers a call (the
// dashboard's try-it form) builds it with Answer, so that it cannot drift from REST.
func Answer(hdr http.Header, reply tollgate.Reply) (int, []byte) {
	httpx.SetReceiptHeaders(hdr, &reply.Receipt)
	err := reply.Err
	if err == nil {
		res := reply.Results[0]
		if res.Err == nil {
			return http.StatusOK, envelope.Data(res.JSON)
		}
		err = res.Err
	}
	e, _ := asError(err)
	return setErrorHeaders(hdr, e), envelope.Error(e.Message)
}
