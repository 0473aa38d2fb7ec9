package httpx

import (
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/billing"
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
)

// The IETF draft's forms of the rate headers, which a front door writes only when its
// host asks for them (see [SetIETFRateHeaders]): each costs every answer a header line
// that most clients never read.
const (
	HeaderRateLimitPolicy = "RateLimit-Policy" // "default";q=<burst>;w=60
	HeaderRateLimitIETF   = "RateLimit"        // "default";r=<remaining>;t=<seconds to full>
)

// The keys under which the headers are stored in an http.Header: the canonical forms
// of the names above, so that Header.Get finds them.
var (
	keyRateLimit          = http.CanonicalHeaderKey(HeaderRateLimit)
	keyRateLimitRemaining = http.CanonicalHeaderKey(HeaderRateLimitRemaining)
	keyRateLimitPolicy    = http.CanonicalHeaderKey(HeaderRateLimitPolicy)
	keyRateLimitIETF      = http.CanonicalHeaderKey(HeaderRateLimitIETF)
)

// CreditHeaderNames lists the credit and rate headers that answers carry by default.
var CreditHeaderNames = []string{
	HeaderCreditsCost, HeaderCreditsRemaining, HeaderCreditsUsed, HeaderCreditsLimit,
	HeaderCreditsRenewal, HeaderPlan, HeaderRateLimit, HeaderRateLimitRemaining,
	HeaderRetryAfter,
}

// ExposedHeaderNames lists the headers that a browser's script may read on an answer
// to a cross-origin request, for CORS Expose-Headers: the error code, the credit and
// rate headers, and the IETF forms of the rate headers, for the hosts that turn them
// on.
var ExposedHeaderNames = append([]string{HeaderErrorCode}, append(slices.Clip(CreditHeaderNames),
	HeaderRateLimitPolicy, HeaderRateLimitIETF)...)

// SetCreditHeaders writes the credit headers for a call that spent cost credits and left
// balance b.
func SetCreditHeaders(h http.Header, plan string, cost int64, b billing.Balance) {
	// The values are formatted into one buffer and converted to one string, and the
	// header slices share one backing array: header writes are on every call's path.
	var buf [96]byte
	var end [5]int
	out := strconv.AppendInt(buf[:0], cost, 10)
	end[0] = len(out)
	out = strconv.AppendInt(out, b.Remaining, 10)
	end[1] = len(out)
	out = strconv.AppendInt(out, b.Used, 10)
	end[2] = len(out)
	out = strconv.AppendInt(out, b.Allowance, 10)
	end[3] = len(out)
	if !b.Period.End.IsZero() {
		out = b.Period.End.UTC().AppendFormat(out, time.RFC3339)
	}
	end[4] = len(out)
	all := string(out)
	v := make([]string, 6)
	v[0], v[1], v[2], v[3], v[4], v[5] = all[:end[0]], all[end[0]:end[1]], all[end[1]:end[2]], all[end[2]:end[3]], all[end[3]:end[4]], plan
	h[HeaderCreditsCost], h[HeaderCreditsRemaining], h[HeaderCreditsUsed] = v[0:1:1], v[1:2:2], v[2:3:3]
	h[HeaderCreditsLimit], h[HeaderPlan] = v[3:4:4], v[5:6:6]
	if end[4] > end[3] {
		h[HeaderCreditsRenewal] = v[4:5:5]
	}
}

// SetRateHeaders writes the rate headers of plan p after decision d: X-RateLimit-Limit
// and X-RateLimit-Remaining. It writes nothing for a plan without a rate limit.
// Retry-After is written by [SetRetryAfter], and the IETF forms by
// [SetIETFRateHeaders].
func SetRateHeaders(h http.Header, p billing.Plan, d billing.RateDecision) {
	if _, ok := p.RateLimit(); !ok {
		return
	}
	var buf [48]byte
	out := strconv.AppendInt(buf[:0], int64(p.RatePerMinute), 10)
	end := len(out)
	out = strconv.AppendInt(out, int64(d.Remaining), 10)
	all := string(out)
	v := make([]string, 2)
	v[0], v[1] = all[:end], all[end:]
	h[keyRateLimit], h[keyRateLimitRemaining] = v[0:1:1], v[1:2:2]
}

// SetIETFRateHeaders writes the IETF draft's rate headers of plan p after decision d:
// RateLimit-Policy ("default";q=<burst>;w=<window in seconds>) and RateLimit
// ("default";r=<remaining>;t=<seconds until the bucket is full>). It writes nothing for
// a plan without a rate limit.
func SetIETFRateHeaders(h http.Header, p billing.Plan, d billing.RateDecision) {
	l, ok := p.RateLimit()
	if !ok {
		return
	}
	var buf [96]byte
	out := append(buf[:0], `"default";q=`...)
	out = strconv.AppendInt(out, int64(l.Burst), 10)
	out = append(out, ";w="...)
	out = strconv.AppendInt(out, int64(l.Per/time.Second), 10)
	end := len(out)
	out = append(out, `"default";r=`...)
	out = strconv.AppendInt(out, int64(d.Remaining), 10)
	out = append(out, ";t="...)
	out = strconv.AppendInt(out, int64(ceilSeconds(d.ResetAfter)), 10)
	all := string(out)
	v := make([]string, 2)
	v[0], v[1] = all[:end], all[end:]
	h[keyRateLimitPolicy], h[keyRateLimitIETF] = v[0:1:1], v[1:2:2]
}

// SetRetryAfter writes Retry-After in whole seconds, rounded up, at least 1.
func SetRetryAfter(h http.Header, d time.Duration) {
	h[HeaderRetryAfter] = []string{strconv.Itoa(max(1, ceilSeconds(d)))}
}

func ceilSeconds(d time.Duration) int {
	return int((d + time.Second - 1) / time.Second)
}

// SetReceiptHeaders writes the credit and rate headers of a call from its receipt: the
// credit headers when the receipt has the balance, the rate headers when it has a
// rate-limit decision, and nothing for a caller that was not authenticated.
func SetReceiptHeaders(h http.Header, rc *tollgate.Receipt) {
	if rc.Balance != (billing.Balance{}) {
		SetCreditHeaders(h, rc.Plan.Name, rc.Charged, rc.Balance)
	}
	if rc.Rate != (billing.RateDecision{}) {
		SetRateHeaders(h, rc.Plan, rc.Rate)
	}
}
