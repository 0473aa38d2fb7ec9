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
// to a cross-origin request, for CORS Expose-Headers: the error code, the mark of a
// replayed answer, the credit and rate headers, and the IETF forms of the rate
// headers, for the hosts that turn them on.
var ExposedHeaderNames = append([]string{HeaderErrorCode, HeaderIdempotentReplayed}, append(slices.Clip(CreditHeaderNames),
	HeaderRateLimitPolicy, HeaderRateLimitIETF)...)

// SetCreditHeaders writes the credit headers for a call that spent cost credits and left
// balance b.
func SetCreditHeaders(h http.Header, plan string, cost int64, b billing.Balance) {
	setHeaders(h, plan, cost, &b, billing.Plan{}, nil)
}

// SetRateHeaders writes the rate headers of plan p after decision d: X-RateLimit-Limit
// and X-RateLimit-Remaining. It writes nothing for a plan without a rate limit.
// Retry-After is written by [SetRetryAfter], and the IETF forms by
// [SetIETFRateHeaders].
func SetRateHeaders(h http.Header, p billing.Plan, d billing.RateDecision) {
	setHeaders(h, "", 0, nil, p, &d)
}

// setHeaders writes the credit headers of a call that spent cost credits and left
// balance b (none if b is nil), and the rate headers of plan p after decision d (none
// if d is nil or p has no rate limit). The values are formatted into one buffer and
// converted to one string, and the header slices share one backing array: header
// writes are on every call's path.
func setHeaders(h http.Header, plan string, cost int64, b *billing.Balance, p billing.Plan, d *billing.RateDecision) {
	var (
		buf  [160]byte
		keys [8]string // the canonical header key of each value
		ends [8]int    // where each value ends in out
		n    int
	)
	out := buf[:0]
	end := func(key string) {
		keys[n], ends[n] = key, len(out)
		n++
	}
	if b != nil {
		out = strconv.AppendInt(out, cost, 10)
		end(HeaderCreditsCost)
		out = strconv.AppendInt(out, b.Remaining, 10)
		end(HeaderCreditsRemaining)
		out = strconv.AppendInt(out, b.Used, 10)
		end(HeaderCreditsUsed)
		out = strconv.AppendInt(out, b.Allowance, 10)
		end(HeaderCreditsLimit)
		if !b.Period.End.IsZero() {
			out = b.Period.End.UTC().AppendFormat(out, time.RFC3339)
			end(HeaderCreditsRenewal)
		}
		out = append(out, plan...)
		end(HeaderPlan)
	}
	if _, limited := p.RateLimit(); d != nil && limited {
		out = strconv.AppendInt(out, int64(p.RatePerMinute), 10)
		end(keyRateLimit)
		out = strconv.AppendInt(out, int64(d.Remaining), 10)
		end(keyRateLimitRemaining)
	}
	if n == 0 {
		return
	}
	all := string(out)
	vals := make([]string, n)
	start := 0
	for i, key := range keys[:n] {
		vals[i] = all[start:ends[i]]
		h[key] = vals[i : i+1 : i+1]
		start = ends[i]
	}
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
	var (
		b *billing.Balance
		d *billing.RateDecision
	)
	if rc.Balance != (billing.Balance{}) {
		b = &rc.Balance
	}
	if rc.Rate != (billing.RateDecision{}) {
		d = &rc.Rate
	}
	setHeaders(h, rc.Plan.Name, rc.Charged, b, rc.Plan, d)
}
