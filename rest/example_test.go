package rest_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/examples/apis"
	"github.com/tollgate-dev/tollgate/rest"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// This example serves the sample catalog over REST and makes two calls with an account's
// key: a POST with a JSON body, which is charged, and a GET with a parameter out of
// range, which is refused before anything runs and costs nothing.
func ExampleNewHandler() {
	ctx := context.Background()
	reg := &catalog.Registry{}
	if err := apis.Register(reg); err != nil {
		log.Fatal(err)
	}
	plans, err := billing.NewPlans(billing.Plan{Name: "free", Credits: 50, RatePerMinute: 5, Concurrency: 1})
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
	_, _, key, err := mgr.CreateAccount(ctx, accounts.Spec{Plan: "free"})
	if err != nil {
		log.Fatal(err)
	}

	restHandler, err := rest.NewHandler(svc, nil)
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", restHandler)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	call := func(method, path, body string) {
		req, err := http.NewRequestWithContext(ctx, method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			log.Fatal(err)
		}
		req.Header.Set("x-api-key", key)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
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
		for _, h := range []string{"X-Error-Code", "X-Credits-Cost", "X-Credits-Remaining"} {
			if v := resp.Header.Get(h); v != "" {
				fmt.Printf("  %s: %s\n", h, v)
			}
		}
	}
	call(http.MethodPost, "/v1/hmac", `{"message":"hello","secret":"key"}`)
	call(http.MethodGet, "/v1/uuid-generator?count=500", "")
	// Output:
	// 200 OK {"status":"ok","error":null,"data":{"algorithm":"sha256","encoding":"hex","hmac":"9307b3b915efb5171ff14d8cb55fbcc798c6c0ef1456d66ded1a6aa723a58b7b"}}
	//   X-Credits-Cost: 1
	//   X-Credits-Remaining: 49
	// 400 Bad Request {"status":"error","error":"parameter \"count\": must be at most 100, got 500","data":null,"code":"invalid_input"}
	//   X-Error-Code: invalid_input
	//   X-Credits-Cost: 0
	//   X-Credits-Remaining: 49
}
