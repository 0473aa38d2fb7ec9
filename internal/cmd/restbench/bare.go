package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	graphql "github.com/graph-gophers/graphql-go"
	"github.com/graph-gophers/graphql-go/relay"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The bare servers are what a hand-written service with the same API would run, with no
// gateway in front: the baselines of the GraphQL and MCP comparisons.

// bareSchema is the hash API as a hand-written graphql-go schema would have it.
const bareSchema = `
type Query {
	hash(text: String!, algorithm: String): HashResult
}
type HashResult {
	algorithm: String!
	hash: String!
}`

type bareQuery struct{}

type hashResult struct{ Algorithm, Hash string }

func (*bareQuery) Hash(args struct {
	Text      string
	Algorithm *string
}) (*hashResult, error) {
	if args.Algorithm != nil && *args.Algorithm != "sha256" {
		return nil, errors.New("only sha256 here")
	}
	sum := sha256.Sum256([]byte(args.Text))
	return &hashResult{Algorithm: "sha256", Hash: hex.EncodeToString(sum[:])}, nil
}

// bareGraphQL returns graphql-go's own HTTP handler (relay.Handler) over a schema with
// the hash field.
func bareGraphQL() (http.Handler, error) {
	s, err := graphql.ParseSchema(bareSchema, &bareQuery{}, graphql.UseFieldResolvers())
	if err != nil {
		return nil, err
	}
	return &relay.Handler{Schema: s}, nil
}

// bareMCP returns the go-sdk's Streamable HTTP handler (JSON responses, sessions, as the
// gateway's) over a server with one tool, hash, registered with Server.AddTool: the
// handler gets the raw arguments, and the SDK checks them against no schema per call.
func bareMCP() (http.Handler, error) {
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
	}), nil
}
