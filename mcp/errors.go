package mcp

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/internal/cleantext"
	"github.com/tollgate-dev/tollgate/wire"
)

// writeRPCError answers an HTTP request with a JSON-RPC error response: the status,
// X-Error-Code naming the cause, and a body that JSON-RPC clients surface as the
// error of the request whose id it carries (null when there was none). The message is
// made clean text (see package cleantext).
func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, code int64, name, message string) {
	if id == nil {
		id = json.RawMessage("null")
	}
	body, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   rpcError        `json:"error"`
	}{"2.0", id, rpcError{Code: code, Message: cleantext.Message(message), Data: errorData{Code: name}}})
	hdr := w.Header()
	hdr[wire.HeaderErrorCode] = []string{name}
	hdr["Content-Type"] = []string{"application/json"}
	hdr["Cache-Control"] = []string{"no-store"}
	w.WriteHeader(status)
	w.Write(body)
}

type rpcError struct {
	Code    int64     `json:"code"`
	Message string    `json:"message"`
	Data    errorData `json:"data"`
}

// errorData is the data of the handler's JSON-RPC errors: the name of the cause, as
// in X-Error-Code and REST.
type errorData struct {
	Code string `json:"code"`
}

func newRPCError(code int64, name, message string) *jsonrpc.Error {
	data, _ := json.Marshal(errorData{Code: name})
	return &jsonrpc.Error{Code: code, Message: message, Data: data}
}

// rpcCodeName names a standard JSON-RPC error code, for X-Error-Code and the error's
// data.
func rpcCodeName(code int64) string {
	switch code {
	case codeParseError:
		return "parse_error"
	case codeMethodNotFound:
		return "method_not_found"
	case codeInvalidParams:
		return "invalid_params"
	}
	return "invalid_request"
}

// errClosed ends the streams of a closed handler.
var errClosed = &tollgate.Error{Code: tollgate.CodeUnavailable, Message: "the MCP endpoint is shutting down; reconnect shortly"}

func quote(s string) string {
	if len(s) > 100 {
		s = s[:100] + "..."
	}
	return strconv.Quote(s)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
