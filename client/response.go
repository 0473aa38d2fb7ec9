package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate-dev/tollgate/wire"
)

// A Response is the answer to a successful call.
type Response struct {
	// StatusCode is the HTTP status, 200.
	StatusCode int
	// Header holds the response headers.
	Header http.Header
	// Body is the response envelope exactly as the service sent it:
	// {"status": "ok", "error": null, "data": {...}}.
	Body []byte
	// Data is the envelope's data member: the API's result, as JSON.
	Data json.RawMessage
	// Credits reports the credit headers.
	Credits Credits
	// Rate reports the rate headers.
	Rate RateLimit
}

// Decode decodes the API's result (the data member) into v, as json.Unmarshal does.
func (r *Response) Decode(v any) error {
	if err := json.Unmarshal(r.Data, v); err != nil {
		return fmt.Errorf("client: decoding the result: %w", err)
	}
	return nil
}

// An Envelope is the body of every JSON answer of the service: Status "ok" with the
// API's result in Data, or "error" with the message in Error and the machine-readable
// cause in Code (see package wire).
type Envelope = wire.Envelope

// Credits reports the credit headers of an answer (X-Credits-*, X-Plan). Reported is
// false, and the other fields zero, when the answer carried none: the edge's 403 and
// answers to unauthenticated requests do not.
type Credits struct {
	// Reported says whether the answer carried the credit headers.
	Reported bool
	// Cost is what this call spent: 0 for a refused or refunded call.
	Cost int64
	// Remaining is the balance after the call: what is left of the period's allowance
	// plus Granted.
	Remaining int64
	// Granted is the part of Remaining that grants hold: credits granted or bought,
	// which carry over when the allowance renews, until they lapse.
	Granted int64
	// Used is what the account spent in this period.
	Used int64
	// Limit is the plan's allowance for a period.
	Limit int64
	// Renewal is when the allowance renews; zero if the answer did not say.
	Renewal time.Time
	// Plan is the account's plan.
	Plan string
}

// RateLimit reports the rate headers of an answer. Limit is zero when the plan has no
// rate limit (the headers are absent).
type RateLimit struct {
	// Limit is the plan's calls per minute.
	Limit int64
	// Remaining is how many calls could be made now.
	Remaining int64
	// RetryAfter is the wait the service asked for in Retry-After, on a 429 or 503;
	// zero when it asked none.
	RetryAfter time.Duration
}

func creditsFrom(h http.Header) Credits {
	remaining, ok := headerInt(h, wire.HeaderCreditsRemaining)
	if !ok {
		return Credits{}
	}
	c := Credits{Reported: true, Remaining: remaining, Plan: h.Get(wire.HeaderPlan)}
	c.Cost, _ = headerInt(h, wire.HeaderCreditsCost)
	c.Granted, _ = headerInt(h, wire.HeaderCreditsGranted)
	c.Used, _ = headerInt(h, wire.HeaderCreditsUsed)
	c.Limit, _ = headerInt(h, wire.HeaderCreditsLimit)
	c.Renewal, _ = time.Parse(time.RFC3339, h.Get(wire.HeaderCreditsRenewal))
	return c
}

func rateFrom(h http.Header) RateLimit {
	var r RateLimit
	r.Limit, _ = headerInt(h, wire.HeaderRateLimit)
	r.Remaining, _ = headerInt(h, wire.HeaderRateLimitRemaining)
	r.RetryAfter = retryAfter(h.Get(wire.HeaderRetryAfter))
	return r
}

func headerInt(h http.Header, name string) (int64, bool) {
	n, err := strconv.ParseInt(h.Get(name), 10, 64)
	return n, err == nil
}

// retryAfter reads a Retry-After value in seconds; an HTTP date or anything else
// counts as no wait asked.
func retryAfter(v string) time.Duration {
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}

// answer turns an HTTP answer into a Response or an *APIError.
func answer(apiID string, hr *http.Response, body []byte) (*Response, error) {
	var env Envelope
	isJSON := false
	if mt, _, err := mime.ParseMediaType(hr.Header.Get("Content-Type")); err == nil && mt == "application/json" {
		isJSON = json.Unmarshal(body, &env) == nil && env.Status != ""
	}
	if hr.StatusCode == http.StatusOK && isJSON && env.Status == "ok" {
		return &Response{
			StatusCode: hr.StatusCode, Header: hr.Header, Body: body, Data: env.Data,
			Credits: creditsFrom(hr.Header), Rate: rateFrom(hr.Header),
		}, nil
	}
	e := &APIError{
		APIID: apiID, StatusCode: hr.StatusCode, Code: hr.Header.Get(HeaderErrorCode),
		Header: hr.Header, Body: body, Credits: creditsFrom(hr.Header), Rate: rateFrom(hr.Header),
	}
	switch {
	case isJSON && env.Error != "":
		e.Envelope, e.Message = env, env.Error
		if e.Code == "" {
			e.Code = env.Code
		}
	case hr.StatusCode == http.StatusForbidden:
		e.Message = "the request was refused before it reached the API (a bare 403 from the edge): the key is missing or not UUID-shaped"
	case hr.StatusCode >= 300 && hr.StatusCode < 400:
		e.Message = fmt.Sprintf("the service redirected the call to %q; the client does not follow redirects, so that the key stays with this host: set the base URL to the service's final address", hr.Header.Get("Location"))
	case hr.StatusCode == http.StatusOK:
		e.Message = "the service answered 200 without an envelope of status ok; is the base URL the root of the service?"
	default:
		e.Message = fmt.Sprintf("the service answered %s without a JSON envelope", hr.Status)
		if bytes.HasPrefix(bytes.TrimSpace(body), []byte("<")) {
			e.Message += " (an HTML page: a proxy or the wrong host may have answered)"
		}
	}
	return nil, e
}

// HeaderErrorCode is the header that carries the machine-readable code of an error
// answer; [APIError.Code] holds its value.
const HeaderErrorCode = wire.HeaderErrorCode

// An APIError is an answer of the service that is not a success: an error envelope
// (401, 403, 404, 429, 5xx, ...) or, rarely, an answer without one (the edge's bare
// HTML 403). Use [errors.As] to get it from a call's error.
type APIError struct {
	// APIID is the API that was called.
	APIID string
	// StatusCode is the HTTP status.
	StatusCode int
	// Code is the machine-readable cause from the X-Error-Code header (or the
	// envelope's code), such as unauthorized, forbidden, invalid_input, rate_limited,
	// concurrency_limited or credits_exhausted: the wire.Code constants. Empty when
	// the answer had none.
	Code string
	// Message is the envelope's error message, or a description of an answer that had
	// no envelope.
	Message string
	// Envelope is the decoded error envelope; its zero value when the answer had none.
	Envelope Envelope
	// Body is the answer's body as sent.
	Body []byte
	// Header holds the answer's headers.
	Header http.Header
	// Credits and Rate report the credit and rate headers, when the answer had them.
	Credits Credits
	Rate    RateLimit
}

// Error returns the status, the code and the message, such as
// "client: the hash API answered 429 (rate_limited): rate limit of 5 calls a minute reached".
func (e *APIError) Error() string {
	code := ""
	if e.Code != "" {
		code = " (" + e.Code + ")"
	}
	return fmt.Sprintf("client: the %s API answered %d%s: %s", e.APIID, e.StatusCode, code, e.Message)
}

// A ValidationError reports parameters that break the API's rules, found before
// anything was sent.
type ValidationError struct {
	// APIID is the API that was called.
	APIID string
	// Param names the parameter, or for members of arrays and objects its path
	// ("items[2].name"); for a file, the API's file field. It is empty when the
	// problem is not one parameter's.
	Param string
	// Reason says what is wrong and what is expected.
	Reason string
}

// Error returns the parameter and the reason, such as
// `client: hash: parameter "text": is required`.
func (e *ValidationError) Error() string {
	if e.Param == "" {
		return fmt.Sprintf("client: %s: %s", e.APIID, e.Reason)
	}
	return fmt.Sprintf("client: %s: parameter %q: %s", e.APIID, e.Param, e.Reason)
}

// IsRetryable reports whether err is an answer that waiting may fix: a 429 other than
// credits_exhausted, or a 5xx. The retry policy retries exactly these.
func IsRetryable(err error) bool {
	var e *APIError
	if !errors.As(err, &e) {
		return false
	}
	switch {
	case e.StatusCode == http.StatusTooManyRequests:
		return e.Code != "credits_exhausted"
	case e.StatusCode >= 500 && e.StatusCode <= 599:
		return true
	}
	return false
}
