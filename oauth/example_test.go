package oauth_test

import (
	"context"
	"fmt"
	"log"
	"net/http"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/oauth"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// Example mounts the authorization server next to the MCP endpoint it protects.
func Example() {
	hello := catalog.API{ID: "hello", Title: "Hello", Description: "Says hello.", Method: http.MethodGet, Cost: 1,
		Handler: catalog.HandlerFunc(func(context.Context, *catalog.Request) (any, error) { return map[string]any{"hello": "world"}, nil })}
	registry, _ := catalog.NewRegistry(hello)
	plans, _ := billing.NewPlans(billing.Plan{Name: "pro", Credits: 1000})
	svc, err := tollgate.New(registry, tollgate.Stores{
		Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
		Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter(),
	}, plans, nil)
	if err != nil {
		log.Fatal(err)
	}

	// The authorization server checks keys through the service, and keeps its grants
	// in a store (store/postgres for several instances).
	const resource = "https://api.example.com/v1/mcp"
	as, err := oauth.New(memory.NewOAuthStore(), oauth.ServiceKeys(svc), &oauth.Options{
		Issuer:    "https://api.example.com",
		Resources: []string{resource},
	})
	if err != nil {
		log.Fatal(err)
	}

	mux := http.NewServeMux()
	mux.Handle("/", as.Handler()) // /.well-known/oauth-authorization-server and /oauth/...
	mux.Handle(oauth.ResourceMetadataPath(resource), as.ProtectedResourceMetadata(resource))
	// The MCP handler at /v1/mcp answers a request without credentials with 401 and
	// WWW-Authenticate: as.Challenge(resource), verifies bearer tokens with
	// as.VerifyAccessToken(ctx, token, resource), and authenticates the grant's key
	// with a tollgate.Caller whose KeyID is the grant's, on every call.

	fmt.Println(oauth.ResourceMetadataPath(resource))
	fmt.Println(as.Challenge(resource))
	// Output:
	// /.well-known/oauth-protected-resource/v1/mcp
	// Bearer resource_metadata="https://api.example.com/.well-known/oauth-protected-resource/v1/mcp", scope="mcp"
}
