package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"

	graphql "github.com/graph-gophers/graphql-go"
	"github.com/graph-gophers/graphql-go/relay"
)

// The bare servers are what a hand-written service with the same API would run, with no
// gateway in front: the baselines of the GraphQL and MCP comparisons (the MCP one is
// package baremcp's, which the mcp package's benchmarks share).

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
