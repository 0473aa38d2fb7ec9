package mcp

import (
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/tollgate-dev/tollgate"
)

// An answer is how the MCP endpoint reports a kind of failure: the HTTP status when it
// refuses a request as a whole (its credential, say), and the JSON-RPC error code when a
// tool call fails with it, or 0 when the failure is a tool result with isError, which
// the model reads (a refused argument, the plan's limits, the API's own failure).
type answer struct {
	status int
	rpc    int64
}

// answers maps every kind of failure of the service to the endpoint's answer. A test
// checks that it has every code.
var answers = map[tollgate.Code]answer{
	tollgate.CodeInternal:             {http.StatusInternalServerError, 0},
	tollgate.CodeNoCredential:         {http.StatusUnauthorized, CodeUnauthorized},
	tollgate.CodeMalformedCredential:  {http.StatusForbidden, CodeUnauthorized}, // the edge's bare page
	tollgate.CodeUnauthorized:         {http.StatusUnauthorized, CodeUnauthorized},
	tollgate.CodeForbidden:            {http.StatusForbidden, CodeForbidden},
	tollgate.CodeInvalidInput:         {http.StatusBadRequest, 0},
	tollgate.CodeRejected:             {http.StatusBadRequest, 0},
	tollgate.CodeNotFound:             {http.StatusNotFound, codeInvalidParams}, // an unknown tool
	tollgate.CodeMethodNotAllowed:     {http.StatusMethodNotAllowed, 0},
	tollgate.CodeConflict:             {http.StatusConflict, 0},
	tollgate.CodeBodyTooLarge:         {http.StatusRequestEntityTooLarge, 0},
	tollgate.CodeUnsupportedMediaType: {http.StatusUnsupportedMediaType, 0},
	tollgate.CodeRateLimited:          {http.StatusTooManyRequests, 0},
	tollgate.CodeConcurrencyLimited:   {http.StatusTooManyRequests, 0},
	tollgate.CodeCreditsExhausted:     {http.StatusTooManyRequests, 0},
	tollgate.CodePlanLimitExceeded:    {http.StatusForbidden, 0},
	tollgate.CodeAPIFailed:            {http.StatusInternalServerError, 0},
	tollgate.CodeTimeout:              {http.StatusGatewayTimeout, 0},
	tollgate.CodeUnavailable:          {http.StatusServiceUnavailable, 0},
	// MCP sends no idempotency keys; the code is REST's batches'.
	tollgate.CodeIdempotencyKeyReused: {http.StatusUnprocessableEntity, 0},
	// A suspended account is a verdict on the caller, as a revoked key is: no other
	// argument or a wait fixes it, so a tool call of one is a JSON-RPC error rather
	// than a tool result.
	tollgate.CodeAccountSuspended: {http.StatusForbidden, CodeForbidden},
}

// answerOf returns the endpoint's answer to a failure of code.
func answerOf(c tollgate.Code) answer {
	if a, ok := answers[c]; ok {
		return a
	}
	return answers[tollgate.CodeInternal]
}

// rpcErrorFor returns the JSON-RPC error of a failure that is not a tool result.
func rpcErrorFor(e *tollgate.Error) *jsonrpc.Error {
	code := answerOf(e.Code).rpc
	if code == 0 {
		code = codeInternal
	}
	return newRPCError(code, e.Code.String(), e.Message)
}
