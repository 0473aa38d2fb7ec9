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
		h.writeError(w, r, &tollgate.Error{Code: tollgate.CodeInternal, Message: "internal error: the result cannot be encoded", Err: err}, nil, nil)
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
		httpx.WriteEdge403(w)
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
	h.cors.Apply(hdr, r)
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
