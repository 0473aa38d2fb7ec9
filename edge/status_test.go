package edge_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/wire"
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
		{tollgate.CodeAccountSuspended, 403, "account_suspended"},
		{tollgate.CodeUnavailable, 503, "unavailable"},
		{tollgate.CodeTimeout, 504, "timeout"},
		{tollgate.Code(200), 500, "internal"},
	}
	for _, tt := range tests {
		if got := edge.Status(tt.code); got != tt.status || tt.code.String() != tt.name {
			t.Errorf("code %d maps to %d %s, want %d %s", tt.code, got, tt.code, tt.status, tt.name)
		}
	}
	// Every code has a status of its own choosing: only the codes that are internal
	// failures answer 500.
	for _, c := range tollgate.Codes() {
		internal := c == tollgate.CodeInternal || c == tollgate.CodeAPIFailed
		if s := edge.Status(c); (s == 500) != internal || s < 400 || s > 599 {
			t.Errorf("code %s has REST status %d", c, s)
		}
	}
}

// TestAnswer: Answer gives a reply's status, headers and envelope as the REST front door
// writes them: data on success; on a refusal or a failure, the status of its code, its
// X-Error-Code and Retry-After, and an internal error for an error of no known code.
func TestAnswer(t *testing.T) {
	for _, tt := range []struct {
		name       string
		reply      tollgate.Reply
		status     int
		body, code string
		retry      string
	}{
		{"ok", tollgate.Reply{Results: []tollgate.Result{{JSON: []byte(`{"a":1}`)}}},
			http.StatusOK, `{"status":"ok","error":null,"data":{"a":1}}`, "", ""},
		{"refused", tollgate.Reply{Err: &tollgate.Error{Code: tollgate.CodeRateLimited, Message: "slow down", RetryAfter: 3 * time.Second}},
			http.StatusTooManyRequests, `{"status":"error","error":"slow down","data":null,"code":"rate_limited"}`, "rate_limited", "3"},
		{"API failed", tollgate.Reply{Results: []tollgate.Result{{Err: &tollgate.Error{Code: tollgate.CodeInvalidInput, Message: "parameter \"text\": is required"}}}},
			http.StatusBadRequest, `{"status":"error","error":"parameter \"text\": is required","data":null,"code":"invalid_input"}`, "invalid_input", ""},
		{"unknown error", tollgate.Reply{Err: errors.New("disk on fire")},
			http.StatusInternalServerError, `{"status":"error","error":"internal error","data":null,"code":"internal"}`, "internal", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hdr := http.Header{}
			status, body := edge.Answer(hdr, tt.reply)
			if status != tt.status || strings.TrimSpace(string(body)) != tt.body {
				t.Errorf("Answer: %d %s, want %d %s", status, body, tt.status, tt.body)
			}
			if got := hdr.Get(wire.HeaderErrorCode); got != tt.code {
				t.Errorf("X-Error-Code %q, want %q", got, tt.code)
			}
			if got := hdr.Get("Retry-After"); got != tt.retry {
				t.Errorf("Retry-After %q, want %q", got, tt.retry)
			}
		})
	}
}
