package gql_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/examples/apis"
	"github.com/tollgate-dev/tollgate/gql"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// This example serves the sample catalog through the GraphQL gateway and sends one query
// that names two APIs, with a sub-key limited to GraphQL. The APIs run in parallel, and
// the query costs the sum of their REST costs.
func ExampleNewHandler() {
	ctx := context.Background()
	reg := &catalog.Registry{}
	if err := apis.Register(reg); err != nil {
		log.Fatal(err)
	}
	plans, err := billing.NewPlans(billing.Plan{Name: "pro", Credits: 100000, RatePerMinute: 600, Concurrency: 10, GraphQLMaxAPIs: 10})
	if err != nil {
		log.Fatal(err)
	}
	stores := tollgate.Stores{
		Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
		Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter(),
	}
	svc, err := tollgate.New(reg, stores, plans, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer svc.Close()
	mgr, err := accounts.New(svc, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer mgr.Close()
	acct, _, _, err := mgr.CreateAccount(ctx, accounts.Spec{Plan: "pro"})
	if err != nil {
		log.Fatal(err)
	}
	graphqlOnly, err := auth.NewRestrictions(auth.RestrictionSpec{Channels: []string{"graphql"}})
	if err != nil {
		log.Fatal(err)
	}
	_, key, err := mgr.CreateKey(ctx, acct.ID, accounts.NewKey{Name: "dashboard", Restrictions: graphqlOnly})
	if err != nil {
		log.Fatal(err)
	}

	gqlHandler, err := gql.NewHandler(svc, nil)
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/graphql", gqlHandler)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	query, err := json.Marshal(map[string]string{
		"query": `{ hash(text: "hello") { hash } dateinfo(date: "2024-02-29") { day_of_week iso_week } }`,
	})
	if err != nil {
		log.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/graphql", bytes.NewReader(query))
	if err != nil {
		log.Fatal(err)
	}
	req.Header.Set("x-api-key", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.Status, string(answer))
	for _, h := range []string{"X-Credits-Cost", "X-Credits-Remaining"} {
		fmt.Printf("%s: %s\n", h, resp.Header.Get(h))
	}
	// Output:
	// 200 OK {"data":{"hash":{"hash":"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"},"dateinfo":{"day_of_week":"Thursday","iso_week":9}}}
	// X-Credits-Cost: 2
	// X-Credits-Remaining: 99998
}
