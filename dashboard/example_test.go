package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/dashboard"
	"github.com/tollgate-dev/tollgate/session"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// exampleManager returns the manager of a service on in-memory stores with sessions,
// as a host assembles it, and a function that closes both.
func exampleManager() (*accounts.Manager, func()) {
	plans, _ := billing.NewPlans(billing.Plan{Name: "free", Credits: 100})
	sessions, _ := auth.NewSessions([]byte("a secret of at least thirty-two bytes!"))
	stores := tollgate.Stores{Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
		Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter()}
	svc, err := tollgate.New(&catalog.Registry{}, stores, plans,
		&tollgate.Options{Sessions: sessions, SessionStore: memory.NewSessionStore()})
	if err != nil {
		panic(err)
	}
	mgr, err := accounts.New(svc, nil)
	if err != nil {
		panic(err)
	}
	return mgr, func() { mgr.Close(); svc.Close() }
}

// A host mounts the dashboard next to the session handler it signs in through.
func ExampleNewHandler() {
	mgr, closeAll := exampleManager()
	defer closeAll()
	sessionHandler, err := session.NewHandler(mgr, nil)
	if err != nil {
		panic(err)
	}
	dash, err := dashboard.NewHandler(mgr, sessionHandler, nil)
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

// A host with its own users signs them in through the session handler's Login, and the
// dashboard shows its sign-in form, with the fields the Login reads, beside the form
// that takes an API key.
func ExampleOptions_loginFields() {
	mgr, closeAll := exampleManager()
	defer closeAll()
	if _, _, _, err := mgr.CreateAccount(context.Background(), accounts.Spec{ID: "acme", Plan: "free"}); err != nil {
		panic(err)
	}
	// The host's Login reads the fields the dashboard posts and says which account
	// the person may act for; a wrong password is a refusal, whose message is shown.
	login := session.LoginFunc(func(ctx context.Context, r *http.Request) (string, error) {
		if r.PostFormValue("email") == "ann@acme.example" && r.PostFormValue("password") == "correct horse" {
			return "acme", nil // a real host checks a password hash in its user store
		}
		return "", fmt.Errorf("%w: the email or the password is wrong", session.ErrLoginRefused)
	})
	sessionHandler, err := session.NewHandler(mgr, &session.Options{Login: login})
	if err != nil {
		panic(err)
	}
	dash, err := dashboard.NewHandler(mgr, sessionHandler, &dashboard.Options{
		LoginTitle: "Sign in with your Acme account",
		LoginFields: []dashboard.LoginField{
			{Name: "email", Label: "Email", Type: "email"},
			{Name: "password", Label: "Password", Type: "password"},
		},
	})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/account/session", sessionHandler)
	mux.Handle("/dashboard/", http.StripPrefix("/dashboard", dash))

	post := func(form url.Values) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/dashboard/login", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		return rec
	}
	rec := post(url.Values{"email": {"ann@acme.example"}, "password": {"wrong"}})
	fmt.Println(rec.Code, strings.Contains(rec.Body.String(), "the email or the password is wrong"))
	rec = post(url.Values{"email": {"ann@acme.example"}, "password": {"correct horse"}})
	fmt.Println(rec.Code, rec.Header().Get("Location"), len(rec.Result().Cookies()))
	// Output:
	// 401 true
	// 303 ./ 1
}
