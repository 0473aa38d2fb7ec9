// Package baremcp is the baseline of the MCP benchmarks: the MCP server a hand-written
// service with the gateway's hash tool would run, with no gateway in front.
package baremcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Handler returns the go-sdk's Streamable HTTP handler (JSON responses, sessions, as the
// gateway's) over a server with one tool, hash, registered with Server.AddTool: the
// tool's handler gets the raw arguments, the SDK checks them against no schema per
// call, and the result is the digest as text only.
func Handler() http.Handler {
	quiet := slog.New(slog.DiscardHandler)
	server := sdk.NewServer(&sdk.Implementation{Name: "bare", Version: "1"}, &sdk.ServerOptions{Logger: quiet})
	server.AddTool(&sdk.Tool{
		Name:        "hash",
		Description: "Computes the SHA-256 hash of a text and returns it in hexadecimal.",
		InputSchema: map[string]any{
			"type":       "object",
			"properties": map[string]any{"text": map[string]any{"type": "string"}},
			"required":   []string{"text"},
		},
	}, func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		var args struct {
			Text *string `json:"text"`
		}
		if err := json.Unmarshal(req.Params.Arguments, &args); err != nil || args.Text == nil {
			return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "text is required"}}}, nil
		}
		sum := sha256.Sum256([]byte(*args.Text))
		out := `{"algorithm":"sha256","hash":"` + hex.EncodeToString(sum[:]) + `"}`
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: out}}}, nil
	})
	return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, &sdk.StreamableHTTPOptions{
		JSONResponse: true, Logger: quiet, DisableLocalhostProtection: true,
	})
}
