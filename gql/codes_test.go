package gql

import (
	"testing"

	"github.com/tollgate-dev/tollgate"
)

func TestCodesMapEveryCode(t *testing.T) {
	tests := []struct {
		code    tollgate.Code
		graphql string
		status  int
	}{
		{tollgate.CodeUnauthorized, "INVALID_API_KEY", 401},
		{tollgate.CodeForbidden, "FORBIDDEN", 403},
		{tollgate.CodeRateLimited, "RATE_LIMITED", 429},
		{tollgate.CodeConcurrencyLimited, "CONCURRENCY_LIMITED", 429},
		{tollgate.CodeCreditsExhausted, "INSUFFICIENT_CREDITS", 402},
		{tollgate.CodePlanLimitExceeded, "PLAN_LIMIT_EXCEEDED", 403},
		{tollgate.CodeAccountSuspended, "ACCOUNT_SUSPENDED", 403},
		{tollgate.CodeUnavailable, "SERVICE_UNAVAILABLE", 503},
		{tollgate.Code(200), "INTERNAL_SERVER_ERROR", 500},
	}
	for _, tt := range tests {
		if m := codeOf(tt.code); m.code != tt.graphql || m.status != tt.status {
			t.Errorf("code %s maps to %+v, want %s %d", tt.code, m, tt.graphql, tt.status)
		}
	}
	for _, c := range tollgate.Codes() {
		if _, ok := codes[c]; !ok {
			t.Errorf("code %s has no GraphQL mapping", c)
		}
	}
}
