package admin_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/admin"
	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// This example mounts the admin API behind a reverse proxy on loopback: the audit log
// records the operator's address that the proxy forwards, not the proxy's.
func ExampleNewHandler() {
	plans, err := billing.NewPlans(billing.Plan{Name: "pro", Credits: 1000, RatePerMinute: 60, Concurrency: 2})
	if err != nil {
		log.Fatal(err)
	}
	stores := tollgate.Stores{
		Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
		Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter(),
	}
	svc, err := tollgate.New(&catalog.Registry{}, stores, plans, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer svc.Close()
	// The audit log records every change the service publishes; the manager reads it.
	auditStore := memory.NewAuditStore()
	auditLog := audit.NewLog(auditStore, nil)
	svc.Events().Subscribe(auditLog, auditLog.Kinds()...)
	defer auditLog.Close()
	mgr, err := accounts.New(svc, &accounts.Options{Audit: auditStore})
	if err != nil {
		log.Fatal(err)
	}
	defer mgr.Close()
	// The proxies in front of the service, whose X-Forwarded-For names the client: one
	// edge serves every door.
	httpEdge, err := edge.New(&edge.Options{
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128")},
	})
	if err != nil {
		log.Fatal(err)
	}
	h, err := admin.NewHandler(mgr, "an-admin-token-of-32-characters!", &admin.Options{Edge: httpEdge})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/admin/", h)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	// The proxy (here the example itself, on loopback) forwards an operator's request.
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/admin/v1/accounts", strings.NewReader(`{"id":"acme","plan":"pro"}`))
	if err != nil {
		log.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer an-admin-token-of-32-characters!")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Forwarded-For", "198.51.100.7")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()

	page, err := mgr.AuditLog(context.Background(), audit.Query{Account: "acme"})
	if err != nil {
		log.Fatal(err)
	}
	e := page.Entries[0]
	fmt.Println(resp.Status, e.Action, e.Actor, e.Addr)
	// Output:
	// 201 Created account.create operator 198.51.100.7
}
