// Package wire is the contract between a Tollgate service and its clients over HTTP:
// the names of the headers it reads and writes, the JSON envelope of its answers, and
// the machine-readable error codes. The server's front doors and the Go client both
// import it; it imports no other package of the module, so a client that imports it
// takes in nothing of the server.
//
// Every JSON answer of the REST front door, the batch endpoint and the management APIs
// is an envelope:
//
//	{"status": "ok", "error": null, "data": ...}
//	{"status": "error", "error": "what went wrong and what to do", "data": null, "code": "rate_limited"}
//
// The code of an error answer is also in the X-Error-Code header.
package wire

// The headers a client sends.
const (
	// HeaderAPIKey carries an API key: "X-Api-Key: <key>". It is the first credential
	// form a service looks for.
	HeaderAPIKey = "X-Api-Key"
	// HeaderAuthorization carries an API key as "Authorization: Bearer <key>", the
	// second form, or an OAuth access token on the MCP door.
	HeaderAuthorization = "Authorization"
	// HeaderSession carries a session token: "X-Jwt: <token>", the third form.
	HeaderSession = "X-Jwt"
	// HeaderAuthMode names the client's ecosystem ("go-package", "cli", ...), for the
	// service's usage figures. It changes nothing in how a request is served.
	HeaderAuthMode = "X-Auth-Mode"
	// HeaderIdempotencyKey carries the client's idempotency key of a batch: 1 to
	// [MaxIdempotencyKeyLen] printable ASCII characters.
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderCSRFToken carries a browser session's CSRF token, which a request that
	// the session cookie authenticates needs to change anything.
	HeaderCSRFToken = "X-CSRF-Token"
	// HeaderRequestID names a request in the server's access log. A client may send one
	// (up to MaxRequestIDLen letters, digits, '-', '_', '.' and ':', not shaped as a key
	// or a hash); the answer carries the one the server logged: the client's, or one
	// the server made.
	HeaderRequestID = "X-Request-Id"
)

// MaxRequestIDLen is the length limit of a request id a client sends.
const MaxRequestIDLen = 128

// MaxIdempotencyKeyLen is the length limit of an idempotency key.
const MaxIdempotencyKeyLen = 255

// The headers of an answer.
const (
	// HeaderErrorCode carries the code of an error answer (see the Code constants): it
	// tells apart the causes that share a status, such as the three causes of a 429.
	HeaderErrorCode = "X-Error-Code"
	// HeaderIdempotentReplayed is "true" on the answer of a batch sent again with the
	// Idempotency-Key of one that ran: the first answer, sent again.
	HeaderIdempotentReplayed = "Idempotent-Replayed"

	HeaderCreditsCost      = "X-Credits-Cost"      // credits this call spent (0 if refunded or refused)
	HeaderCreditsRemaining = "X-Credits-Remaining" // balance after the call
	HeaderCreditsGranted   = "X-Credits-Granted"   // the part of the balance from grants, which carries over
	HeaderCreditsUsed      = "X-Credits-Used"      // credits spent this period
	HeaderCreditsLimit     = "X-Credits-Limit"     // the plan's allowance for a period
	HeaderCreditsRenewal   = "X-Credits-Renewal"   // when the balance renews, RFC 3339
	HeaderPlan             = "X-Plan"              // the account's plan

	// The rate headers, on answers to calls of accounts whose plan has a rate limit.
	HeaderRateLimit          = "X-RateLimit-Limit"     // calls per minute
	HeaderRateLimitRemaining = "X-RateLimit-Remaining" // calls that could be made now
	HeaderRetryAfter         = "Retry-After"           // seconds to wait, on a 429 or 503

	// The IETF draft's forms of the rate headers, which a service writes only when its
	// host turns them on.
	HeaderRateLimitPolicy = "RateLimit-Policy" // "default";q=<burst>;w=<window in seconds>
	HeaderRateLimitIETF   = "RateLimit"        // "default";r=<remaining>;t=<seconds until full>
)

// CreditHeaders lists the credit and rate headers that answers carry by default.
func CreditHeaders() []string {
	return []string{
		HeaderCreditsCost, HeaderCreditsRemaining, HeaderCreditsGranted, HeaderCreditsUsed,
		HeaderCreditsLimit, HeaderCreditsRenewal, HeaderPlan, HeaderRateLimit,
		HeaderRateLimitRemaining, HeaderRetryAfter,
	}
}

// ExposedHeaders lists the headers a browser's script may read on an answer to a
// cross-origin call (CORS Access-Control-Expose-Headers): the error code, the mark of
// a replayed answer, the credit and rate headers, the IETF forms of the rate
// headers, and the request id.
func ExposedHeaders() []string {
	return append([]string{HeaderErrorCode, HeaderIdempotentReplayed}, append(CreditHeaders(),
		HeaderRateLimitPolicy, HeaderRateLimitIETF, HeaderRequestID)...)
}

// RequestHeaders lists the headers a cross-origin call may send (CORS
// Access-Control-Allow-Headers): the credential forms, the content headers, the
// client's mark, the idempotency key and the request id.
func RequestHeaders() []string {
	return []string{HeaderAPIKey, HeaderAuthorization, HeaderSession, "Content-Type", "Accept",
		HeaderAuthMode, HeaderIdempotencyKey, HeaderRequestID}
}
