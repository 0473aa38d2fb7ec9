package wire

// The error codes, in the X-Error-Code header and the "code" field of an error
// envelope. They are stable: a client may switch on them.
const (
	CodeInternal             = "internal"               // an unexpected failure inside the service
	CodeNoCredential         = "no_credential"          // no credential (answered by the edge's bare 403)
	CodeMalformedCredential  = "malformed_credential"   // a credential not shaped as one (the edge's bare 403)
	CodeUnauthorized         = "unauthorized"           // the credential matches no key, or the session is invalid
	CodeForbidden            = "forbidden"              // the key may not do this: scope, channel, address, expiry, revocation
	CodeInvalidInput         = "invalid_input"          // a parameter or the body is wrong; never charged
	CodeRejected             = "rejected"               // the API judged a well-formed input wrong; charged
	CodeNotFound             = "not_found"              // no API or record has that id
	CodeMethodNotAllowed     = "method_not_allowed"     // the wrong HTTP method
	CodeConflict             = "conflict"               // a change conflicts with existing records, or a batch is still running
	CodeBodyTooLarge         = "body_too_large"         // the body or file exceeds its limit
	CodeUnsupportedMediaType = "unsupported_media_type" // a content type the endpoint does not take
	CodeRateLimited          = "rate_limited"           // the plan's rate limit is reached; see Retry-After
	CodeConcurrencyLimited   = "concurrency_limited"    // the plan's concurrency ceiling is reached
	CodeCreditsExhausted     = "credits_exhausted"      // the balance does not cover the call
	CodePlanLimitExceeded    = "plan_limit_exceeded"    // one call names more APIs than the plan allows
	CodeAPIFailed            = "api_failed"             // the API failed on the service's side; refunded
	CodeTimeout              = "timeout"                // the API did not answer in time; refunded
	CodeUnavailable          = "unavailable"            // a store cannot be reached; nothing charged
	CodeIdempotencyKeyReused = "idempotency_key_reused" // an idempotency key sent again with another request
	CodeAccountSuspended     = "account_suspended"      // the account is suspended: its calls are refused until the operator reactivates it
)
