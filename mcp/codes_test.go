package mcp

import (
	"testing"

	"github.com/tollgate-dev/tollgate"
)

func TestAnswersMapEveryCode(t *testing.T) {
	tests := []struct {
		code   tollgate.Code
		status int
		rpc    int64
	}{
		{tollgate.CodeUnauthorized, 401, CodeUnauthorized},
		{tollgate.CodeForbidden, 403, CodeForbidden},
		{tollgate.CodeAccountSuspended, 403, CodeForbidden},
		{tollgate.CodeNotFound, 404, codeInvalidParams},
		{tollgate.CodeRateLimited, 429, 0},
		{tollgate.CodeCreditsExhausted, 429, 0},
		{tollgate.CodeUnavailable, 503, 0},
		{tollgate.Code(200), 500, 0},
	}
	for _, tt := range tests {
		if a := answerOf(tt.code); a.status != tt.status || a.rpc != tt.rpc {
			t.Errorf("code %s maps to %+v, want %d %d", tt.code, a, tt.status, tt.rpc)
		}
	}
	for _, c := range tollgate.Codes() {
		if _, ok := answers[c]; !ok {
			t.Errorf("code %s has no MCP answer", c)
		}
	}
}
