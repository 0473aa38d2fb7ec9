package metrics_test

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/examples/apis"
	"github.com/tollgate-dev/tollgate/internal/doclines"
	"github.com/tollgate-dev/tollgate/metrics"
	"github.com/tollgate-dev/tollgate/rest"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/usage"
)

// This example serves a service's metrics on an operator's listener of their own,
// beside the Go runtime's: the stores decorated before the service is made, the
// metrics attached to it once it is, the usage recorder watched, and /metrics mounted.
func Example() {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m, err := metrics.New(reg, nil)
	if err != nil {
		log.Fatal(err)
	}

	cat := &catalog.Registry{}
	if err := apis.Register(cat); err != nil {
		log.Fatal(err)
	}
	plans, err := billing.NewPlans(billing.Plan{Name: "pro", Credits: 1000, RatePerMinute: 600})
	if err != nil {
		log.Fatal(err)
	}
	stores := m.Stores(tollgate.Stores{
		Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
		Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter(),
	})
	svc, err := tollgate.New(cat, stores, plans, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer svc.Close()
	defer m.Attach(svc)() // calls, refusals, sweeps, pending settlements

	usageStore := memory.NewUsageStore()
	recorder, err := usage.NewRecorder(usageStore, nil)
	if err != nil {
		log.Fatal(err)
	}
	svc.Events().Subscribe(recorder, recorder.Kinds()...)
	defer recorder.Close(context.Background())
	m.Watch(metrics.Sources{Usage: recorder})

	mgr, err := accounts.New(svc, &accounts.Options{Usage: usageStore})
	if err != nil {
		log.Fatal(err)
	}
	defer mgr.Close()
	_, _, key, err := mgr.CreateAccount(context.Background(), accounts.Spec{ID: "acme", Plan: "pro"})
	if err != nil {
		log.Fatal(err)
	}
	api, err := rest.NewHandler(svc, &rest.Options{Accounts: mgr})
	if err != nil {
		log.Fatal(err)
	}
	public := httptest.NewServer(api)
	defer public.Close()

	// The operator's listener: never the public one.
	ops := http.NewServeMux()
	ops.Handle("GET /metrics", metrics.Handler(reg))
	opsServer := httptest.NewServer(ops)
	defer opsServer.Close()

	for _, text := range []string{"a", "b"} {
		req, _ := http.NewRequest(http.MethodGet, public.URL+"/v1/hash?text="+text, nil)
		req.Header.Set("X-Api-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
	}

	resp, err := http.Get(opsServer.URL + "/metrics")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		l := lines.Text()
		if strings.HasPrefix(l, "tollgate_calls_total") || strings.HasPrefix(l, "tollgate_credits_charged_total") ||
			strings.HasPrefix(l, "tollgate_usage_") || strings.HasPrefix(l, "tollgate_pending_settlements") {
			fmt.Println(l)
		}
	}
	// Output:
	// tollgate_calls_total{api="hash",channel="rest",outcome="ok"} 2
	// tollgate_credits_charged_total{api="hash"} 2
	// tollgate_pending_settlements 0
	// tollgate_usage_dropped_total 0
	// tollgate_usage_pending_rows 0
}

// TestDocWiring checks that the Go block of docs/metrics.md's "Wiring it" is lines of
// Example, in its order ("..." stands for the lines left out).
func TestDocWiring(t *testing.T) {
	doclines.InOrder(t, "../docs/metrics.md", "## Wiring it", "example_test.go")
}
