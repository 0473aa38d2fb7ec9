package gql_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/tollgate-dev/tollgate/gql"
	"github.com/tollgate-dev/tollgate/internal/doortest"
	"github.com/tollgate-dev/tollgate/wire"
)

// TestConformance runs the doors' conformance suite on the gateway.
func TestConformance(t *testing.T) {
	query := func(q string) doortest.Request {
		body, _ := json.Marshal(map[string]string{"query": q})
		return doortest.Request{Method: http.MethodPost, Path: "/v1/graphql", Body: string(body),
			ContentType: "application/json", Header: http.Header{"Accept": {"application/graphql-response+json"}}}
	}
	doortest.Run(t, doortest.Door{
		Name: "graphql",
		New: func(t *testing.T, env *doortest.Env) http.Handler {
			h, err := gql.NewHandler(env.Service, &gql.Options{Edge: env.Edge})
			if err != nil {
				t.Fatal(err)
			}
			return h
		},
		Call:          query(`{ hash(text: "a") { hash } }`),
		Refused:       query(`{ hash(text: "a") { nope } }`),
		RefusedCode:   "GRAPHQL_VALIDATION_FAILED",
		ForbiddenCode: "FORBIDDEN",
		Code:          graphQLCode,
		Receipts:      true,
		CORS:          true,
	})
}

// graphQLCode reads the code of a refusal in the gateway's shape: a GraphQL response of
// errors alone, each with its extensions.code, the first's in X-Error-Code.
func graphQLCode(status int, hdr http.Header, body []byte) (string, error) {
	var resp struct {
		Data   json.RawMessage `json:"data"`
		Errors []struct {
			Message    string `json:"message"`
			Extensions struct {
				Code string `json:"code"`
			} `json:"extensions"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return "", fmt.Errorf("not a GraphQL response: %v", err)
	}
	switch {
	case len(resp.Errors) == 0:
		return "", errors.New("no errors")
	case resp.Data != nil && string(resp.Data) != "null":
		return "", errors.New("a refused request has data")
	case resp.Errors[0].Message == "" || resp.Errors[0].Extensions.Code == "":
		return "", errors.New("an error lacks its message or its code")
	case hdr.Get(wire.HeaderErrorCode) != resp.Errors[0].Extensions.Code:
		return "", fmt.Errorf("X-Error-Code %q is not the error's code %q", hdr.Get(wire.HeaderErrorCode), resp.Errors[0].Extensions.Code)
	}
	return resp.Errors[0].Extensions.Code, nil
}
