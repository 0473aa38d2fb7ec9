package mcp_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/doortest"
	"github.com/tollgate-dev/tollgate/mcp"
	"github.com/tollgate-dev/tollgate/wire"
)

// TestDoorConformance runs the doors' conformance suite on the MCP door.
func TestDoorConformance(t *testing.T) {
	rpc := func(body string, hdr ...string) doortest.Request {
		r := doortest.Request{Method: http.MethodPost, Path: "/v1/mcp", Body: body, ContentType: "application/json",
			Header: http.Header{"Accept": {"application/json, text/event-stream"}}}
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Set(hdr[i], hdr[i+1])
		}
		return r
	}
	doortest.Run(t, doortest.Door{
		Name: "mcp",
		New: func(t *testing.T, env *doortest.Env) http.Handler {
			h, err := mcp.NewHandler(env.Service, &mcp.Options{Edge: env.Edge})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { h.Close() })
			return h
		},
		Open: func(t *testing.T, send func(doortest.Request) (*http.Response, []byte)) http.Header {
			resp, body := send(rpc(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"conformance","version":"1"}}}`))
			sid := resp.Header.Get("Mcp-Session-Id")
			if resp.StatusCode != http.StatusOK || sid == "" {
				t.Fatalf("initialize: %s %s", resp.Status, body)
			}
			if resp, body := send(rpc(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, "Mcp-Session-Id", sid)); resp.StatusCode != http.StatusAccepted {
				t.Fatalf("initialized: %s %s", resp.Status, body)
			}
			return http.Header{"Mcp-Session-Id": {sid}, "Mcp-Protocol-Version": {"2025-06-18"}}
		},
		Call:          rpc(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hash","arguments":{"text":"a"}}}`),
		Refused:       rpc(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hash","arguments":{"text":"a"}}}`, "Mcp-Session-Id", "no-such-session"),
		RefusedCode:   "session_not_found",
		ForbiddenCode: "forbidden",
		Code:          rpcErrorCode,
		Receipts:      true,
		CORS:          true,
		NoCredential:  http.StatusUnauthorized,
		// A tool call's JSON-RPC error is in the answer to its request, a 200.
		SuspendedCode: "account_suspended", SuspendedStatus: http.StatusOK,
	})
}

// rpcErrorCode reads the code of a refusal in the MCP door's shape: a JSON-RPC error
// response whose data.code names the cause, which X-Error-Code repeats.
func rpcErrorCode(status int, hdr http.Header, body []byte) (string, error) {
	var resp struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
			Data    struct {
				Code string `json:"code"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return "", fmt.Errorf("not a JSON-RPC response: %v", err)
	}
	switch {
	case resp.JSONRPC != "2.0" || resp.Error == nil:
		return "", errors.New("not a JSON-RPC error response")
	case resp.Error.Code == 0 || resp.Error.Message == "" || resp.Error.Data.Code == "":
		return "", errors.New("the error lacks its code, message or data.code")
	case hdr.Get(wire.HeaderErrorCode) != resp.Error.Data.Code:
		return "", fmt.Errorf("X-Error-Code %q is not data.code %q", hdr.Get(wire.HeaderErrorCode), resp.Error.Data.Code)
	}
	return resp.Error.Data.Code, nil
}
