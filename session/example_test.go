package session_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/session"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// Example mounts the session routes, and wraps a handler of the host's with Cookies so
// that it accepts a browser's session cookie; a browser then signs in with a key,
// calls that handler with its cookie and CSRF token, and signs out.
func Example() {
	secret := []byte("use 32 or more random bytes here, from a secret store")
	sessions, err := auth.NewSessions(secret)
	if err != nil {
		panic(err)
	}
	plans, _ := billing.NewPlans(billing.Plan{Name: "free", Credits: 100})
	stores := tollgate.Stores{
		Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
		Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter(),
	}
	svc, err := tollgate.New(&catalog.Registry{}, stores, plans, &tollgate.Options{Sessions: sessions, SessionStore: memory.NewSessionStore()})
	if err != nil {
		panic(err)
	}
	defer svc.Close()
	// The manager starts and ends sessions with the service's session tokens.
	mgr, err := accounts.New(svc, nil)
	if err != nil {
		panic(err)
	}
	defer mgr.Close()
	_, _, key, _ := mgr.CreateAccount(context.Background(), accounts.Spec{ID: "acme", Plan: "free"})

	h, err := session.NewHandler(mgr, nil)
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/account/session", h)
	// The host's own page: it sees the session as the x-jwt credential.
	mux.Handle("/v1/account/whoami", h.Cookies(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cred, _ := edge.CredentialFrom(r.Header)
		p, err := svc.Authenticate(r.Context(), tollgate.Caller{Credential: cred, Verify: true})
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		fmt.Fprintf(w, "%s acts for %s", r.Method, p.Account.ID)
	})))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	send := func(method, path, body string, hdr ...string) *http.Response {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		return res
	}
	read := func(res *http.Response) string {
		defer res.Body.Close()
		var b strings.Builder
		_, _ = fmt.Fprint(&b, res.Status)
		buf := make([]byte, 512)
		n, _ := res.Body.Read(buf)
		return b.String() + " " + strings.TrimSpace(string(buf[:n]))
	}

	// Sign in: the answer sets the cookie and carries the CSRF token.
	res := send("POST", "/v1/account/session", `{"api_key":"`+key+`"}`)
	cookie := res.Cookies()[0]
	csrf := strings.Split(strings.Split(read(res), `"csrf_token":"`)[1], `"`)[0]
	fmt.Println("cookie:", cookie.Name, "HttpOnly:", cookie.HttpOnly)

	c := cookie.Name + "=" + cookie.Value
	fmt.Println(read(send("POST", "/v1/account/whoami", "", "Cookie", c)))
	fmt.Println(read(send("POST", "/v1/account/whoami", "", "Cookie", c, "X-CSRF-Token", csrf)))
	fmt.Println(read(send("DELETE", "/v1/account/session", "", "Cookie", c, "X-CSRF-Token", csrf)))
	fmt.Println(read(send("GET", "/v1/account/whoami", "", "Cookie", c)))
	// Output:
	// cookie: tollgate-session HttpOnly: true
	// 403 Forbidden {"status":"error","error":"this request is authenticated by the session cookie, so it needs the X-CSRF-Token header: send the csrf_token of the session (POST or GET /v1/account/session answer it)","data":null,"code":"forbidden"}
	// 200 OK POST acts for acme
	// 200 OK {"status":"ok","error":null,"data":{"ended":true}}
	// 401 Unauthorized the session token is not valid: it was signed out; start a new session
}
