package rest_test

import (
	"testing"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/rest"
)

func TestStatusOfEveryCode(t *testing.T) {
	tests := []struct {
		code   tollgate.Code
		status int
		name   string
	}{
		{tollgate.CodeUnauthorized, 401, "unauthorized"},
		{tollgate.CodeForbidden, 403, "forbidden"},
		{tollgate.CodeRateLimited, 429, "rate_limited"},
		{tollgate.CodeConcurrencyLimited, 429, "concurrency_limited"},
		{tollgate.CodeCreditsExhausted, 429, "credits_exhausted"},
		{tollgate.CodePlanLimitExceeded, 403, "plan_limit_exceeded"},
		{tollgate.CodeUnavailable, 503, "unavailable"},
		{tollgate.CodeTimeout, 504, "timeout"},
		{tollgate.Code(200), 500, "internal"},
	}
	for _, tt := range tests {
		if got := rest.Status(tt.code); got != tt.status || tt.code.String() != tt.name {
			t.Errorf("code %d maps to %d %s, want %d %s", tt.code, got, tt.code, tt.status, tt.name)
		}
	}
	// Every code has a status of its own choosing: only the codes that are internal
	// failures answer 500.
	for _, c := range tollgate.Codes() {
		internal := c == tollgate.CodeInternal || c == tollgate.CodeAPIFailed
		if s := rest.Status(c); (s == 500) != internal || s < 400 || s > 599 {
			t.Errorf("code %s has REST status %d", c, s)
		}
	}
}
