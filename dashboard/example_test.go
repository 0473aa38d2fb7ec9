package dashboard_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/dashboard"
	"github.com/tollgate-dev/tollgate/session"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// A host mounts the dashboard next to the session handler it signs in through.
func ExampleNewHandler() {
	plans, _ := billing.NewPlans(billing.Plan{Name: "free", Credits: 100})
	sessions, _ := auth.NewSessions([]byte("a secret of at least thirty-two bytes!"))
	svc, err := tollgate.New(&catalog.Registry{}, tollgate.Stores{Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
		Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter()}, plans,
		&tollgate.Options{Sessions: sessions, SessionStore: memory.NewSessionStore()})
	if err != nil {
		panic(err)
	}
	defer svc.Close()
	sessionHandler, err := session.NewHandler(svc, nil)
	if err != nil {
		panic(err)
	}
	dash, err := dashboard.NewHandler(svc, sessionHandler, nil)
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/account/session", sessionHandler)
	mux.Handle("/dashboard/", http.StripPrefix("/dashboard", dash))

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/dashboard/", nil))
	fmt.Println(rec.Code, rec.Header().Get("Location")) // not signed in: to the sign-in page
	rec = httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/dashboard/sign-in", nil))
	fmt.Println(rec.Code, rec.Header().Get("Content-Security-Policy"))
	// Output:
	// 303 sign-in
	// 200 default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'
}
