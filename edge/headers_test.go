package edge_test

import (
	"maps"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/edge"
)

func TestSetCreditHeaders(t *testing.T) {
	plus2 := time.FixedZone("UTC+2", 2*60*60)
	tests := []struct {
		name string
		plan string
		cost int64
		b    billing.Balance
		want http.Header
	}{
		{
			name: "charged call", plan: "pro", cost: 5,
			b: billing.Balance{Remaining: 995, Granted: 300, Used: 5, Allowance: 1000, Period: billing.MonthOf(t0)},
			want: http.Header{
				"X-Credits-Cost":      {"5"},
				"X-Credits-Remaining": {"995"},
				"X-Credits-Granted":   {"300"},
				"X-Credits-Used":      {"5"},
				"X-Credits-Limit":     {"1000"},
				"X-Credits-Renewal":   {"2025-04-01T00:00:00Z"},
				"X-Plan":              {"pro"},
			},
		},
		{
			name: "refused call, balance exhausted, renewal in December", plan: "free", cost: 0,
			b: billing.Balance{Remaining: 0, Used: 100, Allowance: 100, Period: billing.MonthOf(time.Date(2025, time.December, 31, 23, 0, 0, 0, time.UTC))},
			want: http.Header{
				"X-Credits-Cost":      {"0"},
				"X-Credits-Remaining": {"0"},
				"X-Credits-Granted":   {"0"},
				"X-Credits-Used":      {"100"},
				"X-Credits-Limit":     {"100"},
				"X-Credits-Renewal":   {"2026-01-01T00:00:00Z"},
				"X-Plan":              {"free"},
			},
		},
		{
			name: "renewal given in another zone is written in UTC", plan: "pro", cost: 1,
			b: billing.Balance{Remaining: 1, Used: 1, Allowance: 2, Period: billing.Period{
				Start: time.Date(2025, time.March, 1, 2, 0, 0, 0, plus2),
				End:   time.Date(2025, time.April, 1, 2, 0, 0, 0, plus2),
			}},
			want: http.Header{
				"X-Credits-Cost":      {"1"},
				"X-Credits-Remaining": {"1"},
				"X-Credits-Granted":   {"0"},
				"X-Credits-Used":      {"1"},
				"X-Credits-Limit":     {"2"},
				"X-Credits-Renewal":   {"2025-04-01T00:00:00Z"},
				"X-Plan":              {"pro"},
			},
		},
		{
			name: "unknown period: no renewal header", plan: "pro", cost: 0,
			b: billing.Balance{},
			want: http.Header{
				"X-Credits-Cost":      {"0"},
				"X-Credits-Remaining": {"0"},
				"X-Credits-Granted":   {"0"},
				"X-Credits-Used":      {"0"},
				"X-Credits-Limit":     {"0"},
				"X-Plan":              {"pro"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{"X-Credits-Cost": {"stale"}}
			edge.SetCreditHeaders(h, tt.plan, tt.cost, tt.b)
			if !maps.EqualFunc(h, tt.want, slices.Equal) {
				t.Errorf("headers = %v, want %v", h, tt.want)
			}
		})
	}
}

func TestSetRateHeaders(t *testing.T) {
	tests := []struct {
		name       string
		plan       billing.Plan
		d          billing.RateDecision
		want, ietf http.Header
	}{
		{
			name: "burst defaults to the rate",
			plan: billing.Plan{Name: "pro", RatePerMinute: 600},
			d:    billing.RateDecision{Allowed: true, Remaining: 599, ResetAfter: 100 * time.Millisecond},
			want: http.Header{"X-RateLimit-Limit": {"600"}, "X-RateLimit-Remaining": {"599"}},
			ietf: http.Header{"RateLimit-Policy": {`"default";q=600;w=60`}, "RateLimit": {`"default";r=599;t=1`}},
		},
		{
			name: "explicit burst, reset rounded up",
			plan: billing.Plan{Name: "pro", RatePerMinute: 60, Burst: 10},
			d:    billing.RateDecision{Allowed: true, Remaining: 3, ResetAfter: 6500 * time.Millisecond},
			want: http.Header{"X-RateLimit-Limit": {"60"}, "X-RateLimit-Remaining": {"3"}},
			ietf: http.Header{"RateLimit-Policy": {`"default";q=10;w=60`}, "RateLimit": {`"default";r=3;t=7`}},
		},
		{
			name: "whole seconds stay whole",
			plan: billing.Plan{Name: "free", RatePerMinute: 5},
			d:    billing.RateDecision{Remaining: 0, RetryAfter: 12 * time.Second, ResetAfter: 60 * time.Second},
			want: http.Header{"X-RateLimit-Limit": {"5"}, "X-RateLimit-Remaining": {"0"}},
			ietf: http.Header{"RateLimit-Policy": {`"default";q=5;w=60`}, "RateLimit": {`"default";r=0;t=60`}},
		},
		{
			name: "one nanosecond to go is one second",
			plan: billing.Plan{Name: "free", RatePerMinute: 5},
			d:    billing.RateDecision{Remaining: 4, ResetAfter: time.Nanosecond},
			want: http.Header{"X-RateLimit-Limit": {"5"}, "X-RateLimit-Remaining": {"4"}},
			ietf: http.Header{"RateLimit-Policy": {`"default";q=5;w=60`}, "RateLimit": {`"default";r=4;t=1`}},
		},
		{
			name: "full bucket",
			plan: billing.Plan{Name: "free", RatePerMinute: 5},
			d:    billing.RateDecision{Remaining: 5},
			want: http.Header{"X-RateLimit-Limit": {"5"}, "X-RateLimit-Remaining": {"5"}},
			ietf: http.Header{"RateLimit-Policy": {`"default";q=5;w=60`}, "RateLimit": {`"default";r=5;t=0`}},
		},
		{
			name: "no rate limit",
			plan: billing.Plan{Name: "unlimited", Burst: 10},
			d:    billing.RateDecision{Allowed: true, Remaining: 3, ResetAfter: time.Second},
			want: http.Header{},
			ietf: http.Header{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, c := range []struct {
				set  func(http.Header, billing.Plan, billing.RateDecision)
				want http.Header
			}{{edge.SetRateHeaders, tt.want}, {edge.SetIETFRateHeaders, tt.ietf}} {
				h := http.Header{}
				c.set(h, tt.plan, tt.d)
				// Keys are stored canonically, so that Header.Get finds the names as the
				// design spells them.
				want := http.Header{}
				for k, v := range c.want {
					want[http.CanonicalHeaderKey(k)] = v
					if got := h.Get(k); got != v[0] {
						t.Errorf("h.Get(%q) = %q, want %q", k, got, v[0])
					}
				}
				if !maps.EqualFunc(h, want, slices.Equal) {
					t.Errorf("headers = %v, want %v", h, want)
				}
			}
		})
	}
}

// TestSetReceiptHeaders checks that a receipt's headers are those of its parts: the
// credit headers when it has the balance, the rate headers when it has a decision of a
// plan with a rate limit, nothing for a caller that was not authenticated.
func TestSetReceiptHeaders(t *testing.T) {
	pro := billing.Plan{Name: "pro", RatePerMinute: 600}
	balance := billing.Balance{Remaining: 995, Granted: 45, Used: 5, Allowance: 1000, Period: billing.MonthOf(t0)}
	credits := http.Header{
		"X-Credits-Cost": {"5"}, "X-Credits-Remaining": {"995"}, "X-Credits-Granted": {"45"}, "X-Credits-Used": {"5"},
		"X-Credits-Limit": {"1000"}, "X-Credits-Renewal": {"2025-04-01T00:00:00Z"}, "X-Plan": {"pro"},
	}
	rate := http.Header{"X-Ratelimit-Limit": {"600"}, "X-Ratelimit-Remaining": {"599"}}
	decision := billing.RateDecision{Allowed: true, Remaining: 599}
	tests := []struct {
		name string
		rc   tollgate.Receipt
		want http.Header
	}{
		{"credits and rate", tollgate.Receipt{Plan: pro, Charged: 5, Balance: balance, Rate: decision}, merge(credits, rate)},
		{"credits only", tollgate.Receipt{Plan: pro, Charged: 5, Balance: balance}, credits},
		{"rate only", tollgate.Receipt{Plan: pro, Rate: decision}, rate},
		{"plan without a rate limit", tollgate.Receipt{Plan: billing.Plan{Name: "pro"}, Charged: 5, Balance: balance, Rate: decision}, credits},
		{"not authenticated", tollgate.Receipt{}, http.Header{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			edge.SetReceiptHeaders(h, &tt.rc)
			if !maps.EqualFunc(h, tt.want, slices.Equal) {
				t.Errorf("headers = %v, want %v", h, tt.want)
			}
		})
	}
}

func merge(a, b http.Header) http.Header {
	out := a.Clone()
	maps.Copy(out, b)
	return out
}

func TestSetRetryAfter(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "1"},
		{-time.Second, "1"},
		{time.Nanosecond, "1"},
		{500 * time.Millisecond, "1"},
		{time.Second, "1"},
		{time.Second + time.Nanosecond, "2"},
		{29 * time.Second, "29"},
		{59*time.Second + 500*time.Millisecond, "60"},
		{time.Hour, "3600"},
	}
	for _, tt := range tests {
		h := http.Header{}
		edge.SetRetryAfter(h, tt.d)
		if want := (http.Header{"Retry-After": {tt.want}}); !maps.EqualFunc(h, want, slices.Equal) {
			t.Errorf("SetRetryAfter(%s) = %v, want %v", tt.d, h, want)
		}
	}
}

var t0 = time.Date(2025, time.March, 14, 15, 9, 26, 0, time.UTC)
