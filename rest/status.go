package rest

import (
	"net/http"

	"github.com/tollgate-dev/tollgate"
)

// statuses maps every kind of failure to the HTTP status REST answers it with. A test
// checks that it has every code.
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
}

// Status returns the HTTP status of a failure of code over REST, and over the other
// HTTP APIs that answer with REST's JSON envelope (package admin). The code's name goes
// in [HeaderErrorCode], which tells apart the causes that share a status.
func Status(code tollgate.Code) int {
	if s, ok := statuses[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}
