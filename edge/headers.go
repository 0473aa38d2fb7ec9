package edge

import (
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/wire"
)

// The keys under which the headers are stored in an http.Header: the canonical forms
// of the names in package wire, so that Header.Get finds them.
var (
	keyRateLimit          = http.CanonicalHeaderKey(wire.HeaderRateLimit)
	keyRateLimitRemaining = http.CanonicalHeaderKey(wire.HeaderRateLimitRemaining)
	keyRateLimitPolicy    = http.CanonicalHeaderKey(wire.HeaderRateLimitPolicy)
	keyRateLimitIETF      = http.CanonicalHeaderKey(wire.HeaderRateLimitIETF)
)

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
		keys [9]string // the canonical header key of each value
		ends [9]int    // where each value ends in out
		n    int
	)
	out := buf[:0]
	end := func(key string) {
		keys[n], ends[n] = key, len(out)
		n++
	}
	if b != nil {
		out = strconv.AppendInt(out, cost, 10)
		end(wire.HeaderCreditsCost)
		out = strconv.AppendInt(out, b.Remaining, 10)
		end(wire.HeaderCreditsRemaining)
		out = strconv.AppendInt(out, b.Granted, 10)
		end(wire.HeaderCreditsGranted)
		out = strconv.AppendInt(out, b.Used, 10)
		end(wire.HeaderCreditsUsed)
		out = strconv.AppendInt(out, b.Allowance, 10)
		end(wire.HeaderCreditsLimit)
		if !b.Period.End.IsZero() {
			out = b.Period.End.UTC().AppendFormat(out, time.RFC3339)
			end(wire.HeaderCreditsRenewal)
		}
		out = append(out, plan...)
		end(wire.HeaderPlan)
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
	h[wire.HeaderRetryAfter] = []string{strconv.Itoa(max(1, ceilSeconds(d)))}
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
