package tollgate

import (
	"errors"
	"net/http"
	"time"
)

// A Code classifies an [Error]. Every front door maps codes to its protocol through the
// one table below, so REST, GraphQL and MCP always agree on what went wrong.
type Code uint8

// The codes. Their names (see [Code.String]) are sent in the X-Error-Code header of REST
// errors.
const (
	// CodeInternal is an unexpected failure inside the service (500).
	CodeInternal Code = iota
	// CodeNoCredential: the request carries no credential. REST answers with the edge's
	// bare HTML 403.
	CodeNoCredential
	// CodeMalformedCredential: the credential is not UUID-shaped (edge HTML 403).
	CodeMalformedCredential
	// CodeUnauthorized: the credential matches no key, or a session token is invalid
	// (401). It is the only verdict on the credential itself.
	CodeUnauthorized
	// CodeForbidden: a valid key is blocked by its scope, channel, IP allow-list,
	// expiry or revocation (403).
	CodeForbidden
	// CodeInvalidInput: a parameter is missing, unknown, mistyped or out of range, or
	// the body cannot be read (400). Never charged.
	CodeInvalidInput
	// CodeRejected: the API judged a well-formed input wrong (400). Charged: the API ran,
	// and its judgement is its answer to the call.
	CodeRejected
	// CodeNotFound: no API (or admin record) has that id (404).
	CodeNotFound
	// CodeMethodNotAllowed: the API is called with the wrong HTTP method (405).
	CodeMethodNotAllowed
	// CodeConflict: an admin change conflicts with existing records (409).
	CodeConflict
	// CodeBodyTooLarge: the request body or file exceeds its limit (413).
	CodeBodyTooLarge
	// CodeUnsupportedMediaType: the body has a content type the endpoint does not take
	// (415).
	CodeUnsupportedMediaType
	// CodeRateLimited: the plan's rate limit is reached (429, Retry-After).
	CodeRateLimited
	// CodeConcurrencyLimited: the plan's concurrency ceiling is reached (429).
	CodeConcurrencyLimited
	// CodeCreditsExhausted: the balance does not cover the call (429 over REST, 402
	// over GraphQL).
	CodeCreditsExhausted
	// CodePlanLimitExceeded: a GraphQL query names more APIs than the plan allows (403).
	CodePlanLimitExceeded
	// CodeFileUploadNotSupported: a GraphQL query names a file API (400).
	CodeFileUploadNotSupported
	// CodeQueryTooComplex: a GraphQL query is too deep, too broad or too long (400).
	CodeQueryTooComplex
	// CodeGraphQLNotSupported: GraphQL is turned off on this host (403).
	CodeGraphQLNotSupported
	// CodeAPIFailed: the API failed on the service's side (500). Refunded.
	CodeAPIFailed
	// CodeTimeout: the API did not answer in time (504). Refunded.
	CodeTimeout
	// CodeUnavailable: a store cannot be reached (503). Nothing is admitted or charged.
	CodeUnavailable

	numCodes
)

// codeInfo is the one table that maps codes to protocols.
var codeInfo = [numCodes]struct {
	name          string // REST X-Error-Code, snake case
	status        int    // REST (and default) HTTP status
	graphql       string // GraphQL extensions.code
	graphqlStatus int    // GraphQL HTTP status when the error stops the whole query
}{
	CodeInternal:               {"internal", 500, "INTERNAL_SERVER_ERROR", 500},
	CodeNoCredential:           {"no_credential", 403, "INVALID_API_KEY", 403},
	CodeMalformedCredential:    {"malformed_credential", 403, "INVALID_API_KEY", 403},
	CodeUnauthorized:           {"unauthorized", 401, "INVALID_API_KEY", 401},
	CodeForbidden:              {"forbidden", 403, "FORBIDDEN", 403},
	CodeInvalidInput:           {"invalid_input", 400, "BAD_USER_INPUT", 400},
	CodeRejected:               {"rejected", 400, "BAD_USER_INPUT", 400},
	CodeNotFound:               {"not_found", 404, "NOT_FOUND", 404},
	CodeMethodNotAllowed:       {"method_not_allowed", 405, "METHOD_NOT_ALLOWED", 405},
	CodeConflict:               {"conflict", 409, "CONFLICT", 409},
	CodeBodyTooLarge:           {"body_too_large", 413, "QUERY_TOO_COMPLEX", 413},
	CodeUnsupportedMediaType:   {"unsupported_media_type", 415, "BAD_REQUEST", 415},
	CodeRateLimited:            {"rate_limited", 429, "RATE_LIMITED", 429},
	CodeConcurrencyLimited:     {"concurrency_limited", 429, "CONCURRENCY_LIMITED", 429},
	CodeCreditsExhausted:       {"credits_exhausted", 429, "INSUFFICIENT_CREDITS", 402},
	CodePlanLimitExceeded:      {"plan_limit_exceeded", 403, "PLAN_LIMIT_EXCEEDED", 403},
	CodeFileUploadNotSupported: {"file_upload_not_supported", 400, "FILE_UPLOAD_NOT_SUPPORTED", 400},
	CodeQueryTooComplex:        {"query_too_complex", 400, "QUERY_TOO_COMPLEX", 400},
	CodeGraphQLNotSupported:    {"graphql_not_supported", 403, "GRAPHQL_NOT_SUPPORTED", 403},
	CodeAPIFailed:              {"api_failed", 500, "API_ERROR", 500},
	CodeTimeout:                {"timeout", 504, "API_ERROR", 504},
	CodeUnavailable:            {"unavailable", 503, "SERVICE_UNAVAILABLE", 503},
}

// String returns the code's snake-case name, as sent in X-Error-Code.
func (c Code) String() string {
	if c >= numCodes {
		return codeInfo[CodeInternal].name
	}
	return codeInfo[c].name
}

// HTTPStatus returns the REST status of the code.
func (c Code) HTTPStatus() int {
	if c >= numCodes {
		return http.StatusInternalServerError
	}
	return codeInfo[c].status
}

// GraphQLCode returns the GraphQL extensions.code of the code.
func (c Code) GraphQLCode() string {
	if c >= numCodes {
		return codeInfo[CodeInternal].graphql
	}
	return codeInfo[c].graphql
}

// GraphQLStatus returns the HTTP status of a GraphQL response that the code stops as a
// whole. It differs from [Code.HTTPStatus] for exhausted credits: GraphQL answers 402
// Payment Required where REST answers 429.
func (c Code) GraphQLStatus() int {
	if c >= numCodes {
		return http.StatusInternalServerError
	}
	return codeInfo[c].graphqlStatus
}

// Charged reports whether a call that ends with this code keeps its charge.
func (c Code) Charged() bool { return c == CodeRejected }

// An Error is the one error type of the call pipeline. Its Message is written for the
// caller: it says what went wrong and, where possible, what to do.
type Error struct {
	Code    Code
	Message string
	// RetryAfter, when positive, is how long the caller should wait before retrying.
	RetryAfter time.Duration
	// Err is the underlying cause, for logs and errors.Is; it is never shown to callers.
	Err error
}

func (e *Error) Error() string { return e.Message }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// CodeOf returns the code of err: the Code of an [*Error] in its chain, else
// CodeInternal.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

func newError(code Code, msg string, cause error) *Error {
	return &Error{Code: code, Message: msg, Err: cause}
}
