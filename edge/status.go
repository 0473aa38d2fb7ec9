package edge

import (
	"errors"
	"net/http"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/wire"
)

// statuses maps every kind of failure to the HTTP status of the JSON envelope's
// answers. A test checks that it has every code.
var statuses = map[tollgate.Code]int{
	tollgate.CodeInternal:             http.StatusInternalServerError,
	tollgate.CodeNoCredential:         http.StatusForbidden, // the edge's bare page
	tollgate.CodeMalformedCredential:  http.StatusForbidden, // the edge's bare page
	tollgate.CodeUnauthorized:         http.StatusUnauthorized,
	tollgate.CodeForbidden:            http.StatusForbidden,
	tollgate.CodeInvalidInput:         http.StatusBadRequest,
	tollgate.CodeRejected:             http.StatusBadRequest,
	tollgate.CodeNotFound:             http.StatusNotFound,
	tollgate.CodeMethodNotAllowed:     http.StatusMethodNotAllowed,
	tollgate.CodeConflict:             http.StatusConflict,
	tollgate.CodeBodyTooLarge:         http.StatusRequestEntityTooLarge,
	tollgate.CodeUnsupportedMediaType: http.StatusUnsupportedMediaType,
	tollgate.CodeRateLimited:          http.StatusTooManyRequests,
	tollgate.CodeConcurrencyLimited:   http.StatusTooManyRequests,
	tollgate.CodeCreditsExhausted:     http.StatusTooManyRequests,
	tollgate.CodePlanLimitExceeded:    http.StatusForbidden,
	tollgate.CodeAPIFailed:            http.StatusInternalServerError,
	tollgate.CodeTimeout:              http.StatusGatewayTimeout,
	tollgate.CodeUnavailable:          http.StatusServiceUnavailable,
	tollgate.CodeIdempotencyKeyReused: http.StatusUnprocessableEntity,
	tollgate.CodeAccountSuspended:     http.StatusForbidden,
}

// Status returns the HTTP status of a failure of code in the JSON envelope's answers
// (the REST door, batches, the management APIs). The code's name goes in
// X-Error-Code and the envelope's code, which tell apart the causes that share a
// status.
func Status(code tollgate.Code) int {
	if s, ok := statuses[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// edge403 is the edge's answer to a request without a well-formed credential: a bare
// HTML page, no JSON and no CORS headers, so that a request without a key learns
// nothing about the service. In a browser it surfaces as a network failure.
const edge403 = "<html>\r\n<head><title>403 Forbidden</title></head>\r\n<body>\r\n<center><h1>403 Forbidden</h1></center>\r\n</body>\r\n</html>\r\n"

// Deny writes the edge's answer to a request without a well-formed credential: the bare
// 403, an HTML page with no JSON and no CORS headers (any the door set are removed).
func Deny(w http.ResponseWriter) {
	hdr := w.Header()
	for _, name := range []string{"Access-Control-Allow-Origin", "Access-Control-Expose-Headers", "Vary"} {
		delete(hdr, name)
	}
	hdr["Content-Type"] = []string{"text/html"}
	hdr["Cache-Control"] = noStore
	w.WriteHeader(http.StatusForbidden)
	w.Write([]byte(edge403))
}

// Denied reports whether err is a failure the edge answers with its bare 403: no
// credential, or a malformed one.
func Denied(err error) bool {
	c := tollgate.CodeOf(err)
	return err != nil && (c == tollgate.CodeNoCredential || c == tollgate.CodeMalformedCredential)
}

// asError returns err's *tollgate.Error, or an internal error and false when err has
// none (a failure the call did not expect, which the caller logs). A malformed value
// of the management APIs (auth.ErrInvalid) is invalid input.
func asError(err error) (*tollgate.Error, bool) {
	var e *tollgate.Error
	if errors.As(err, &e) {
		return e, true
	}
	if errors.Is(err, auth.ErrInvalid) {
		return &tollgate.Error{Code: tollgate.CodeInvalidInput, Message: err.Error(), Err: err}, true
	}
	return &tollgate.Error{Code: tollgate.CodeInternal, Message: "internal error", Err: err}, false
}

// SetErrorHeaders sets the headers of a refusal or failure, Retry-After when it has one
// and X-Error-Code, and returns its status.
func SetErrorHeaders(hdr http.Header, e *tollgate.Error) int {
	if e.RetryAfter > 0 {
		SetRetryAfter(hdr, e.RetryAfter)
	}
	hdr[wire.HeaderErrorCode] = []string{e.Code.String()}
	return Status(e.Code)
}

// Answer sets in hdr the headers that the JSON envelope's answer to the reply of a call
// of one API ([tollgate.Service.Call]) carries, the credit and rate headers of its
// receipt and, for a refusal or a failure, Retry-After and X-Error-Code, and returns
// the status and the envelope. It leaves out what depends on the request rather than the
// reply: CORS, the IETF rate headers a host may turn on, and the edge's 403 for a
// request without a well-formed credential. A page that shows what REST answers a call
// (the dashboard's try-it form) builds it with Answer, so that it cannot drift from
// REST.
func Answer(hdr http.Header, reply tollgate.Reply) (int, []byte) {
	SetReceiptHeaders(hdr, &reply.Receipt)
	err := reply.Err
	if err == nil {
		res := reply.Results[0]
		if res.Err == nil {
			return http.StatusOK, DataBytes(res.JSON)
		}
		err = res.Err
	}
	e, _ := asError(err)
	return SetErrorHeaders(hdr, e), ErrorBytes(e.Code.String(), e.Message)
}

// WriteData writes a success envelope around data already encoded as JSON, with the
// door's CORS headers.
func (d *Door) WriteData(w http.ResponseWriter, r *http.Request, status int, encoded []byte) {
	d.cors.Apply(w.Header(), r)
	WriteData(w, status, encoded)
}

// WriteJSON encodes data and writes it in a success envelope, with the door's CORS
// headers. A value JSON cannot encode is answered as an internal error, and logged.
func (d *Door) WriteJSON(w http.ResponseWriter, r *http.Request, status int, data any) {
	b, err := EncodeData(data)
	if err != nil {
		d.log.ErrorContext(r.Context(), "cannot encode a result", "path", r.URL.Path, "error", err)
		d.WriteError(w, r, &tollgate.Error{Code: tollgate.CodeInternal, Message: "internal error: the result cannot be encoded", Err: err}, nil)
		return
	}
	d.WriteData(w, r, status, b)
}

// WriteError answers a refusal or a failure: the edge's bare 403 for a request without
// a well-formed credential; otherwise an error envelope with the status of the error's
// code, its X-Error-Code and Retry-After, the receipt's credit and rate headers (rc nil
// for a request that carries no call's figures) and the door's CORS headers. An error
// of no known code is answered as an internal error, and logged.
func (d *Door) WriteError(w http.ResponseWriter, r *http.Request, err error, rc *tollgate.Receipt) {
	e, ok := asError(err)
	if !ok {
		d.log.ErrorContext(r.Context(), "unexpected error", "path", r.URL.Path, "error", err)
	}
	if e.Code == tollgate.CodeNoCredential || e.Code == tollgate.CodeMalformedCredential {
		Deny(w)
		return
	}
	hdr := w.Header()
	if rc != nil {
		d.Receipt(hdr, rc)
	}
	status := SetErrorHeaders(hdr, e)
	d.cors.Apply(hdr, r)
	WriteEnvelopeError(w, status, e.Code.String(), e.Message)
}
