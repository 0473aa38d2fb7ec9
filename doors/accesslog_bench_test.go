package doors_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/doors"
	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/examples/apis"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/wire"
)

// BenchmarkAccessLog measures a paid REST call served in process, without the access
// log and with it (a JSON line to io.Discard): what the log costs a call.
func BenchmarkAccessLog(b *testing.B) {
	for _, tc := range []struct {
		name string
		log  *slog.Logger
	}{{"off", nil}, {"on", slog.New(slog.NewJSONHandler(io.Discard, nil))}} {
		b.Run(tc.name, func(b *testing.B) {
			reg := &catalog.Registry{}
			if err := apis.Register(reg); err != nil {
				b.Fatal(err)
			}
			plans, err := billing.NewPlans(billing.Plan{Name: "pro", Credits: 1 << 50})
			if err != nil {
				b.Fatal(err)
			}
			svc, err := tollgate.New(reg, tollgate.Stores{Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
				Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter()}, plans, &tollgate.Options{Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(svc.Close)
			mux := http.NewServeMux()
			m, err := doors.Mount(mux, svc, &doors.Options{Edge: edge.Options{AccessLog: tc.log}, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(m.Close)
			if _, _, _, err := m.Accounts.CreateAccount(b.Context(), accounts.Spec{ID: "acme", Plan: "pro", KeyValue: key}); err != nil {
				b.Fatal(err)
			}
			req := httptest.NewRequest(http.MethodGet, "/v1/hash?text=a", nil)
			req.Header.Set(wire.HeaderAPIKey, key)
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				mux.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("%d %s", rec.Code, rec.Body)
				}
			}
		})
	}
}
