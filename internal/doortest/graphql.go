package doortest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/tollgate-dev/tollgate/wire"
)

// GraphQLQuery is a request of the GraphQL gateway: query q, POSTed as JSON to
// /v1/graphql, accepting application/graphql-response+json.
func GraphQLQuery(q string) Request {
	body, _ := json.Marshal(map[string]string{"query": q}) // strings always encode
	return Request{Method: http.MethodPost, Path: "/v1/graphql", Body: string(body),
		ContentType: "application/json", Header: http.Header{"Accept": {"application/graphql-response+json"}}}
}

// GraphQLCode reads the code of a refusal in the GraphQL gateway's shape: a GraphQL
// response of errors alone, each with its extensions.code, the first's in
// X-Error-Code. It is the [Door.Code] of the gateway.
func GraphQLCode(status int, hdr http.Header, body []byte) (string, error) {
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
