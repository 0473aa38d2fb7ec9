package selfservice_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/examples/apis"
	"github.com/tollgate-dev/tollgate/rest"
	"github.com/tollgate-dev/tollgate/selfservice"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// This example mounts the self-service API next to REST. The account holder creates a
// sub-key limited to one API with the primary key, calls that API with it, and is
// refused another; a sub-key cannot create keys of its own.
func ExampleNewHandler() {
	ctx := context.Background()
	reg := &catalog.Registry{}
	if err := apis.Register(reg); err != nil {
		log.Fatal(err)
	}
	plans, err := billing.NewPlans(billing.Plan{Name: "free", Credits: 50})
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
	// The audit log records the changes; the manager reads it for the account holder.
	auditStore := memory.NewAuditStore()
	auditLog := audit.NewLog(auditStore, nil)
	svc.Events().Subscribe(auditLog, auditLog.Kinds()...)
	defer auditLog.Close()
	mgr, err := accounts.New(svc, &accounts.Options{Audit: auditStore})
	if err != nil {
		log.Fatal(err)
	}
	defer mgr.Close()
	_, _, primary, err := mgr.CreateAccount(ctx, accounts.Spec{ID: "acme", Plan: "free"})
	if err != nil {
		log.Fatal(err)
	}

	restHandler, err := rest.NewHandler(svc, &rest.Options{Accounts: mgr})
	if err != nil {
		log.Fatal(err)
	}
	accountHandler, err := selfservice.NewHandler(mgr, nil)
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", restHandler)
	mux.Handle("/v1/account", accountHandler)
	mux.Handle("/v1/account/", accountHandler)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	do := func(method, path, key, body string) (int, map[string]any) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("X-Api-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		defer resp.Body.Close()
		var env map[string]any
		json.NewDecoder(resp.Body).Decode(&env)
		return resp.StatusCode, env
	}

	status, env := do("POST", "/v1/account/keys", primary, `{"name": "ci", "apis": ["uuid-generator"]}`)
	sub := env["data"].(map[string]any)["value"].(string) // shown this once
	fmt.Println("create a sub-key:", status)
	status, _ = do("GET", "/v1/uuid-generator", sub, "")
	fmt.Println("its API:", status)
	status, _ = do("GET", "/v1/date-info?date=2030-01-15", sub, "")
	fmt.Println("another API:", status)
	status, env = do("POST", "/v1/account/keys", sub, `{"name": "mine"}`)
	fmt.Println("the sub-key creates a key:", status, env["error"])
	// Output:
	// create a sub-key: 201
	// its API: 200
	// another API: 403
	// the sub-key creates a key: 403 a sub-key cannot manage keys on this service: use the account's primary key, or a session started with it
}
