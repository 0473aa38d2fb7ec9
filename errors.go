package tollgate

import (
	"errors"
	"time"

	"github.com/tollgate-dev/tollgate/wire"
)

// A Code is a kind of failure of a call: what went wrong, in the domain's terms. Codes
// know nothing of protocols: each front door owns the table that maps every code to its
// protocol (rest to HTTP statuses, gql to GraphQL error codes, mcp to JSON-RPC errors
// and tool results), and tests check that each table maps every code.
type Code uint8

// The codes. Their names (see [Code.String]) are stable: front doors send them to
// callers (REST's X-Error-Code header, the text of an MCP tool error).
const (
	// CodeInternal is an unexpected failure inside the service.
	CodeInternal Code = iota
	// CodeNoCredential: the request carries no credential.
	CodeNoCredential
	// CodeMalformedCredential: the credential is not UUID-shaped.
	CodeMalformedCredential
	// CodeUnauthorized: the credential matches no key, or a session token is invalid.
	// It is the only verdict on the credential itself.
	CodeUnauthorized
	// CodeForbidden: a valid key is blocked by its scope, channel, IP allow-list,
	// expiry or revocation.
	CodeForbidden
	// CodeInvalidInput: a parameter is missing, unknown, mistyped or out of range, or
	// the request cannot be read. Never charged.
	CodeInvalidInput
	// CodeRejected: the API judged a well-formed input wrong. Charged: the API did the
	// work of judging it.
	CodeRejected
	// CodeNotFound: no API (or admin record) has that id.
	CodeNotFound
	// CodeMethodNotAllowed: the API is called with the wrong method.
	CodeMethodNotAllowed
	// CodeConflict: an admin change conflicts with existing records, or a batch sent
	// with an idempotency key is still running (or ran, and its answer was too large to
	// keep, or was lost with the instance that ran it, or ran past its lease while
	// another run of its key took over, and was not charged).
	CodeConflict
	// CodeBodyTooLarge: the request body or file exceeds its limit.
	CodeBodyTooLarge
	// CodeUnsupportedMediaType: the body has a content type the endpoint does not take.
	CodeUnsupportedMediaType
	// CodeRateLimited: the plan's rate limit is reached; the error's RetryAfter says
	// when to try again.
	CodeRateLimited
	// CodeConcurrencyLimited: the plan's concurrency ceiling is reached.
	CodeConcurrencyLimited
	// CodeCreditsExhausted: the balance does not cover the call.
	CodeCreditsExhausted
	// CodePlanLimitExceeded: one call names more APIs than the plan allows
	// ([billing.Plan.GraphQLMaxAPIs]).
	CodePlanLimitExceeded
	// CodeAPIFailed: the API failed on the service's side. Refunded.
	CodeAPIFailed
	// CodeTimeout: the API did not answer in time. Refunded.
	CodeTimeout
	// CodeUnavailable: a store cannot be reached. Nothing is admitted or charged.
	CodeUnavailable
	// CodeIdempotencyKeyReused: an idempotency key was sent again with another request
	// (another API, other items) while the first one's answer is kept.
	CodeIdempotencyKeyReused
	// CodeAccountSuspended: the caller's account is suspended: an operator refuses
	// every call of its keys until they reactivate it. Never charged, no rate-limit
	// event. Its holder may still sign in and read the account, its keys and usage.
	CodeAccountSuspended

	numCodes
)

// names are the codes' names on the wire, snake case.
var names = [numCodes]string{
	CodeInternal:             wire.CodeInternal,
	CodeNoCredential:         wire.CodeNoCredential,
	CodeMalformedCredential:  wire.CodeMalformedCredential,
	CodeUnauthorized:         wire.CodeUnauthorized,
	CodeForbidden:            wire.CodeForbidden,
	CodeInvalidInput:         wire.CodeInvalidInput,
	CodeRejected:             wire.CodeRejected,
	CodeNotFound:             wire.CodeNotFound,
	CodeMethodNotAllowed:     wire.CodeMethodNotAllowed,
	CodeConflict:             wire.CodeConflict,
	CodeBodyTooLarge:         wire.CodeBodyTooLarge,
	CodeUnsupportedMediaType: wire.CodeUnsupportedMediaType,
	CodeRateLimited:          wire.CodeRateLimited,
	CodeConcurrencyLimited:   wire.CodeConcurrencyLimited,
	CodeCreditsExhausted:     wire.CodeCreditsExhausted,
	CodePlanLimitExceeded:    wire.CodePlanLimitExceeded,
	CodeAPIFailed:            wire.CodeAPIFailed,
	CodeTimeout:              wire.CodeTimeout,
	CodeUnavailable:          wire.CodeUnavailable,
	CodeIdempotencyKeyReused: wire.CodeIdempotencyKeyReused,
	CodeAccountSuspended:     wire.CodeAccountSuspended,
}

// Codes returns every code, for the tests of front doors' mapping tables.
func Codes() []Code {
	all := make([]Code, numCodes)
	for i := range all {
		all[i] = Code(i)
	}
	return all
}

// codeNamed returns the code with the given name, and false for an unknown name.
func codeNamed(name string) (Code, bool) {
	for c, n := range names {
		if n == name {
			return Code(c), true
		}
	}
	return CodeInternal, false
}

// String returns the code's snake-case name; an unknown code is "internal".
func (c Code) String() string {
	if c >= numCodes {
		return names[CodeInternal]
	}
	return names[c]
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
