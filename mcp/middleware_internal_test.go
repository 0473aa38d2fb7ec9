package mcp

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMiddlewareGivesCodes checks that an error without a JSON-RPC code, which the SDK
// would send with code 0, leaves the middleware as an internal error (-32603), or as
// an invalid request (-32600) for the SDK's lifecycle checks, and that coded errors
// pass unchanged.
func TestMiddlewareGivesCodes(t *testing.T) {
	h := &Handler{log: slog.New(slog.DiscardHandler)}
	coded := &jsonrpc.Error{Code: codeInvalidParams, Message: "bad"}
	tests := []struct {
		name   string
		method string
		err    error
		want   int64
	}{
		{"plain error", "ping", errors.New("something broke"), codeInternal},
		{"a lifecycle message out of order", "initialize", errors.New(`duplicate "initialize" received`), codeInvalidRequest},
		{"code 0", "ping", &jsonrpc.Error{Message: "no code"}, codeInternal},
		{"coded", "ping", coded, codeInvalidParams},
		{"wrapped coded", "ping", errors.Join(errors.New("context"), coded), codeInvalidParams},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next := func(context.Context, string, sdk.Request) (sdk.Result, error) { return nil, tt.err }
			_, err := h.middleware(next)(context.Background(), tt.method, nil)
			var wire *jsonrpc.Error
			if !errors.As(err, &wire) || wire.Code != tt.want {
				t.Fatalf("error %v; want code %d", err, tt.want)
			}
		})
	}
}
