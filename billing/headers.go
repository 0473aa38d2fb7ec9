package billing

import (
	"net/http"
	"strconv"
	"time"
)

// The credit headers on every response to an authenticated call.
const (
	HeaderCreditsCost      = "X-Credits-Cost"      // credits this call spent (0 if refunded or refused)
	HeaderCreditsRemaining = "X-Credits-Remaining" // balance after the call
	HeaderCreditsUsed      = "X-Credits-Used"      // credits spent this period
	HeaderCreditsLimit     = "X-Credits-Limit"     // the plan's monthly allowance
	HeaderCreditsRenewal   = "X-Credits-Renewal"   // when the balance renews, RFC 3339
	HeaderPlan             = "X-Plan"              // the account's plan
)

// The rate headers, on responses to calls of accounts whose plan has a rate limit.
const (
	HeaderRateLimit          = "X-RateLimit-Limit"     // calls per minute
	HeaderRateLimitRemaining = "X-RateLimit-Remaining" // calls that could be made now
	HeaderRetryAfter         = "Retry-After"           // seconds, on 429
	HeaderRateLimitPolicy    = "RateLimit-Policy"      // IETF draft: "default";q=<burst>;w=60
	HeaderRateLimitIETF      = "RateLimit"             // IETF draft: "default";r=<remaining>;t=<seconds to full>
)

// CreditHeaderNames lists the credit and rate headers, for CORS Expose-Headers.
var CreditHeaderNames = []string{
	HeaderCreditsCost, HeaderCreditsRemaining, HeaderCreditsUsed, HeaderCreditsLimit,
	HeaderCreditsRenewal, HeaderPlan, HeaderRateLimit, HeaderRateLimitRemaining,
	HeaderRetryAfter, HeaderRateLimitPolicy, HeaderRateLimitIETF,
}

// SetCreditHeaders writes the credit headers for a call that spent cost credits and left
// balance b.
func SetCreditHeaders(h http.Header, plan string, cost int64, b Balance) {
	h[HeaderCreditsCost] = []string{strconv.FormatInt(cost, 10)}
	h[HeaderCreditsRemaining] = []string{strconv.FormatInt(b.Remaining, 10)}
	h[HeaderCreditsUsed] = []string{strconv.FormatInt(b.Used, 10)}
	h[HeaderCreditsLimit] = []string{strconv.FormatInt(b.Allowance, 10)}
	if !b.Period.End.IsZero() {
		h[HeaderCreditsRenewal] = []string{b.Period.End.UTC().Format(time.RFC3339)}
	}
	h[HeaderPlan] = []string{plan}
}

// SetRateHeaders writes the rate headers of plan p after decision d. It writes nothing
// for a plan without a rate limit. Retry-After is written by [SetRetryAfter].
func SetRateHeaders(h http.Header, p Plan, d RateDecision) {
	l, ok := p.RateLimit()
	if !ok {
		return
	}
	h[HeaderRateLimit] = []string{strconv.Itoa(p.RatePerMinute)}
	h[HeaderRateLimitRemaining] = []string{strconv.Itoa(d.Remaining)}
	h[HeaderRateLimitPolicy] = []string{`"default";q=` + strconv.Itoa(l.Burst) + ";w=" + strconv.Itoa(int(l.Per/time.Second))}
	h[HeaderRateLimitIETF] = []string{`"default";r=` + strconv.Itoa(d.Remaining) + ";t=" + strconv.Itoa(ceilSeconds(d.ResetAfter))}
}

// SetRetryAfter writes Retry-After in whole seconds, rounded up, at least 1.
func SetRetryAfter(h http.Header, d time.Duration) {
	h[HeaderRetryAfter] = []string{strconv.Itoa(max(1, ceilSeconds(d)))}
}

func ceilSeconds(d time.Duration) int {
	return int((d + time.Second - 1) / time.Second)
}
