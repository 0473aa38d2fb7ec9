package mcp_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/examples/apis"
	"github.com/tollgate-dev/tollgate/mcp"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// apiKey adds the key to every request of an MCP client.
type apiKey string

func (k apiKey) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Api-Key", string(k))
	return http.DefaultTransport.RoundTrip(r)
}

// This example serves the sample catalog as MCP tools at /v1/mcp and calls the hash
// tool with the official Go SDK's client, authenticated with an API key.
func ExampleNewHandler() {
	ctx := context.Background()
	reg := &catalog.Registry{}
	if err := apis.Register(reg); err != nil {
		log.Fatal(err)
	}
	plans, _ := billing.NewPlans(billing.Plan{Name: "pro", Credits: 100000, RatePerMinute: 600, Concurrency: 10})
	stores := tollgate.Stores{
		Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
		Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter(),
	}
	svc, err := tollgate.New(reg, stores, plans, nil)
	if err != nil {
		log.Fatal(err)
	}
	mgr, err := accounts.New(svc, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer mgr.Close()
	_, _, key, err := mgr.CreateAccount(ctx, accounts.Spec{Plan: "pro"})
	if err != nil {
		log.Fatal(err)
	}

	mcpHandler, err := mcp.NewHandler(svc, nil)
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/mcp", mcpHandler)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer mcpHandler.Close()

	client := sdk.NewClient(&sdk.Implementation{Name: "example", Version: "1"}, nil)
	session, err := client.Connect(ctx, &sdk.StreamableClientTransport{
		Endpoint:   srv.URL + "/v1/mcp",
		HTTPClient: &http.Client{Transport: apiKey(key)},
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer session.Close()
	tools, err := session.ListTools(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(tools.Tools), "tools; the first:", tools.Tools[0].Name)
	res, err := session.CallTool(ctx, &sdk.CallToolParams{Name: "hash", Arguments: map[string]any{"text": "hello"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Content[0].(*sdk.TextContent).Text)
	fmt.Println(res.Meta[mcp.MetaCredits].(map[string]any)["remaining"])
	// Output:
	// 6 tools; the first: date-info
	// {"algorithm":"sha256","hash":"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"}
	// 99999
}
