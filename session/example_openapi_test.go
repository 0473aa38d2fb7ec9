package session_test

import (
	"fmt"
	"maps"
	"slices"

	"github.com/tollgate-dev/tollgate/rest"
	"github.com/tollgate-dev/tollgate/selfservice"
	"github.com/tollgate-dev/tollgate/session"
)

// ExampleOpenAPIPaths adds the session routes and the self-service routes to the REST
// front door's OpenAPI document, served at /v1/openapi.json.
func ExampleOpenAPIPaths() {
	paths := selfservice.OpenAPIPaths()
	maps.Copy(paths, session.OpenAPIPaths())
	info := rest.OpenAPIInfo{Title: "Example", Paths: paths} // pass it as rest.Options.OpenAPI
	doc := rest.OpenAPI(info, nil)
	for _, p := range slices.Sorted(maps.Keys(doc["paths"].(map[string]any))) {
		fmt.Println(p)
	}
	// Output:
	// /v1/account
	// /v1/account/audit
	// /v1/account/keys
	// /v1/account/keys/{key_id}
	// /v1/account/keys/{key_id}/revoke
	// /v1/account/keys/{key_id}/rotate
	// /v1/account/session
	// /v1/account/usage
	// /v1/account/webhooks
	// /v1/account/webhooks/{endpoint_id}
	// /v1/account/webhooks/{endpoint_id}/deliveries
	// /v1/account/webhooks/{endpoint_id}/deliveries/{message_id}/resend
	// /v1/account/webhooks/{endpoint_id}/rotate
	// /v1/account/webhooks/{endpoint_id}/test
	// /v1/analytics
	// /v1/catalog
}
