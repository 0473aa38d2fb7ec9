package gql

import (
	"net/http"

	"github.com/tollgate-dev/tollgate"
)

// A mapping is how the gateway reports a kind of failure: the extensions.code of the
// GraphQL error, and the HTTP status of a response that the failure stops as a whole.
type mapping struct {
	code   string
	status int
}

// codes maps every kind of failure of the service to the gateway's answer. A test
// checks that it has every code. Exhausted credits answer 402 Payment Required, where
// REST answers 429.
var codes = map[tollgate.Code]mapping{
	tollgate.CodeInternal:             {"INTERNAL_SERVER_ERROR", http.StatusInternalServerError},
	tollgate.CodeNoCredential:         {"INVALID_API_KEY", http.StatusForbidden},
	tollgate.CodeMalformedCredential:  {"INVALID_API_KEY", http.StatusForbidden},
	tollgate.CodeUnauthorized:         {"INVALID_API_KEY", http.StatusUnauthorized},
	tollgate.CodeForbidden:            {"FORBIDDEN", http.StatusForbidden},
	tollgate.CodeInvalidInput:         {"BAD_USER_INPUT", http.StatusBadRequest},
	tollgate.CodeRejected:             {"BAD_USER_INPUT", http.StatusBadRequest},
	tollgate.CodeNotFound:             {"NOT_FOUND", http.StatusNotFound},
	tollgate.CodeMethodNotAllowed:     {"METHOD_NOT_ALLOWED", http.StatusMethodNotAllowed},
	tollgate.CodeConflict:             {"CONFLICT", http.StatusConflict},
	tollgate.CodeBodyTooLarge:         {codeTooComplex, http.StatusRequestEntityTooLarge},
	tollgate.CodeUnsupportedMediaType: {"BAD_REQUEST", http.StatusUnsupportedMediaType},
	tollgate.CodeRateLimited:          {"RATE_LIMITED", http.StatusTooManyRequests},
	tollgate.CodeConcurrencyLimited:   {"CONCURRENCY_LIMITED", http.StatusTooManyRequests},
	tollgate.CodeCreditsExhausted:     {"INSUFFICIENT_CREDITS", http.StatusPaymentRequired},
	tollgate.CodePlanLimitExceeded:    {"PLAN_LIMIT_EXCEEDED", http.StatusForbidden},
	tollgate.CodeAPIFailed:            {"API_ERROR", http.StatusInternalServerError},
	tollgate.CodeTimeout:              {"API_ERROR", http.StatusGatewayTimeout},
	tollgate.CodeUnavailable:          {"SERVICE_UNAVAILABLE", http.StatusServiceUnavailable},
	// The gateway sends no idempotency keys; the code is REST's batches'.
	tollgate.CodeIdempotencyKeyReused: {"BAD_USER_INPUT", http.StatusUnprocessableEntity},
	tollgate.CodeAccountSuspended:     {"ACCOUNT_SUSPENDED", http.StatusForbidden},
}

// The gateway's own codes, for refusals of its own making.
const (
	codeTooComplex = "QUERY_TOO_COMPLEX"         // the query is too long, deep or broad
	codeFileUpload = "FILE_UPLOAD_NOT_SUPPORTED" // the query names a file API, or sends a file
)

// codeOf returns the gateway's answer to a failure of code.
func codeOf(c tollgate.Code) mapping {
	if m, ok := codes[c]; ok {
		return m
	}
	return codes[tollgate.CodeInternal]
}

// A refusal is the gateway's own answer to a request it refuses: the status, the
// GraphQL code and the message. It travels through the service's call as an error of
// the gateway's, so that the service checks the caller's key and reads its balance
// before it is answered.
type refusal struct {
	status  int
	code    string
	message string
}

func (r *refusal) Error() string { return r.message }
