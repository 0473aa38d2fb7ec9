package tollgate_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
	"github.com/tollgate-dev/tollgate/doors"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// This example assembles a service with one API on in-memory stores, creates an account
// and a sub-key with the service's account manager, serves the REST front door and calls the API with the sub-key. The
// README's "Using the library" shows the same code; a test keeps the two equal.
func Example() {
	ctx := context.Background()

	// The catalog: one API, hash, at 1 credit a call.
	reg := &catalog.Registry{}
	err := reg.Register(catalog.API{
		ID: "hash", Title: "Hash", Method: http.MethodGet, Cost: 1,
		Params: []catalog.Param{{Name: "text", Type: catalog.String, Required: true}},
		Handler: catalog.HandlerFunc(func(_ context.Context, req *catalog.Request) (any, error) {
			sum := sha256.Sum256([]byte(req.Params.String("text")))
			return map[string]any{"hash": hex.EncodeToString(sum[:])}, nil
		}),
	})
	if err != nil {
		log.Fatal(err)
	}

	// The plans, and the service on in-memory stores (one process; store/postgres and
	// store/redis serve several instances).
	plans, err := billing.NewPlans(billing.Plan{Name: "pro", Credits: 100000, RatePerMinute: 600, Concurrency: 10})
	if err != nil {
		log.Fatal(err)
	}
	stores := tollgate.Stores{
		Keys:   memory.NewKeyStore(),
		Ledger: memory.NewLedger(nil),
		Rates:  memory.NewRateLimiter(),
		Slots:  memory.NewConcurrencyLimiter(),
	}
	svc, err := tollgate.New(reg, stores, plans, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer svc.Close() // stops the background sweep of expired reservations

	// The manager of the service's accounts, on the service's stores.
	mgr, err := accounts.New(svc, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer mgr.Close() // stops the background prune of revoked keys

	// An account on the pro plan, with its primary key, and a sub-key that may call only
	// hash, only over REST. A key's value is returned once; only its hash is stored.
	acct, _, _, err := mgr.CreateAccount(ctx, accounts.Spec{ID: "acme", Plan: "pro"})
	if err != nil {
		log.Fatal(err)
	}
	scope, err := auth.NewRestrictions(auth.RestrictionSpec{APIs: []string{"hash"}, Channels: []string{"rest"}})
	if err != nil {
		log.Fatal(err)
	}
	_, key, err := mgr.CreateKey(ctx, acct.ID, accounts.NewKey{Name: "ci", Restrictions: scope})
	if err != nil {
		log.Fatal(err)
	}

	// Every front door on the host's mux (REST and batches, GraphQL, MCP, the account
	// holders' API), sharing one HTTP edge: Options.Edge lists the proxies in front of
	// the service and the origins whose scripts may call it (none and all, here). Served
	// here by httptest; a host serves the mux with its own http.Server.
	mux := http.NewServeMux()
	mounted, err := doors.Mount(mux, svc, &doors.Options{Accounts: mgr})
	if err != nil {
		log.Fatal(err)
	}
	defer mounted.Close() // ends MCP's event streams
	srv := httptest.NewServer(mux)
	defer srv.Close()

	// A call with the sub-key.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/v1/hash?text=hello", nil)
	if err != nil {
		log.Fatal(err)
	}
	req.Header.Set("x-api-key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.Status)
	fmt.Println(string(body))
	for _, h := range []string{"X-Credits-Cost", "X-Credits-Remaining", "X-RateLimit-Remaining"} {
		fmt.Printf("%s: %s\n", h, resp.Header.Get(h))
	}
	// Output:
	// 200 OK
	// {"status":"ok","error":null,"data":{"hash":"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"}}
	// X-Credits-Cost: 1
	// X-Credits-Remaining: 99999
	// X-RateLimit-Remaining: 599
}
