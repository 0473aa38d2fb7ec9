package session_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/session"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// newManager returns the manager of a service on memory stores with an account "acct",
// and the account's key.
func newManager(t *testing.T, opts *tollgate.Options) (*accounts.Manager, string) {
	t.Helper()
	plans, _ := billing.NewPlans(billing.Plan{Name: "p", Credits: 10})
	stores := tollgate.Stores{Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
		Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter()}
	svc, err := tollgate.New(&catalog.Registry{}, stores, plans, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	mgr, err := accounts.New(svc, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mgr.Close)
	_, _, key, err := mgr.CreateAccount(t.Context(), accounts.Spec{ID: "acct", Plan: "p"})
	if err != nil {
		t.Fatal(err)
	}
	return mgr, key
}

func sessionOptions(t *testing.T) *tollgate.Options {
	s, err := auth.NewSessions(secret)
	if err != nil {
		t.Fatal(err)
	}
	return &tollgate.Options{Sessions: s, SessionStore: memory.NewSessionStore(), SweepInterval: -1}
}

func TestNewHandlerNeeds(t *testing.T) {
	s, _ := auth.NewSessions(secret)
	noSessions, _ := newManager(t, nil)
	noStore, _ := newManager(t, &tollgate.Options{Sessions: s})
	for name, mgr := range map[string]*accounts.Manager{"nil": nil, "no sessions": noSessions, "no store": noStore} {
		if _, err := session.NewHandler(mgr, nil); err == nil {
			t.Errorf("%s: NewHandler succeeded", name)
		}
	}
	if _, err := tollgate.New(&catalog.Registry{}, tollgate.Stores{}, &billing.Plans{}, &tollgate.Options{SessionStore: memory.NewSessionStore()}); err == nil {
		t.Error("a SessionStore without Sessions was accepted")
	}
	mgr, _ := newManager(t, sessionOptions(t))
	if _, err := session.NewHandler(mgr, &session.Options{TrustedOrigins: []string{"not an origin"}}); err == nil {
		t.Error("a malformed trusted origin was accepted")
	}
}

// TestSecureCookie checks the cookie of a service over TLS, and of one behind a proxy
// that terminates TLS (SecureCookies): Secure, with the __Host- prefix, and the plain
// name is no credential there.
func TestSecureCookie(t *testing.T) {
	for _, tt := range []struct {
		name string
		tls  bool
		opts *session.Options
	}{
		{"TLS", true, nil},
		{"SecureCookies", false, &session.Options{SecureCookies: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mgr, key := newManager(t, sessionOptions(t))
			h, err := session.NewHandler(mgr, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			mux := http.NewServeMux()
			mux.Handle("/v1/account/session", h)
			var srv *httptest.Server
			if tt.tls {
				srv = httptest.NewTLSServer(mux)
			} else {
				srv = httptest.NewServer(mux)
			}
			defer srv.Close()
			req, _ := http.NewRequest("POST", srv.URL+"/v1/account/session", strings.NewReader(`{"api_key":"`+key+`"}`))
			res, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			cs := res.Cookies()
			if len(cs) != 1 || cs[0].Name != session.CookieName || !cs[0].Secure || cs[0].Path != "/" || cs[0].Domain != "" ||
				!cs[0].HttpOnly || cs[0].SameSite != http.SameSiteStrictMode {
				t.Fatalf("Set-Cookie %q; want __Host-tollgate-session, Secure, HttpOnly, SameSite=Strict, Path=/, no Domain", res.Header.Get("Set-Cookie"))
			}
			get := func(cookie string) int {
				req, _ := http.NewRequest("GET", srv.URL+"/v1/account/session", nil)
				req.Header.Set("Cookie", cookie)
				res, err := srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				res.Body.Close()
				return res.StatusCode
			}
			if got := get(cs[0].Name + "=" + cs[0].Value); got != 200 {
				t.Errorf("the __Host- cookie: %d, want 200", got)
			}
			if got := get(session.InsecureCookieName + "=" + cs[0].Value); got != 401 {
				t.Errorf("the plain cookie on a secure service: %d, want 401", got)
			}
		})
	}
}

func TestStartRefusals(t *testing.T) {
	mgr, key := newManager(t, sessionOptions(t))
	h, err := session.NewHandler(mgr, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, method, body string
		hdr                []string
		status             int
		says               string
	}{
		{"no key", "POST", "", nil, 401, "send an API key"},
		{"malformed header", "POST", "", []string{"X-Api-Key", "undefined"}, 401, "not an API key"},
		{"malformed body key", "POST", `{"api_key":"nope"}`, nil, 401, "api_key is not an API key"},
		{"unknown key", "POST", `{"api_key":"` + auth.NewKeyValue() + `"}`, nil, 401, "unauthorized"},
		{"not JSON", "POST", `api_key=` + key, nil, 400, "JSON object"},
		{"bad kind", "POST", `{"kind":"jwt"}`, []string{"X-Api-Key", key}, 400, `kind must be`},
		{"too large", "POST", `{"api_key":"` + strings.Repeat("x", 17<<10) + `"}`, nil, 413, "16 KiB"},
		{"wrong method", "PUT", "", []string{"X-Api-Key", key}, 405, "takes POST"},
		{"GET without a session", "GET", "", []string{"X-Api-Key", key}, 401, "carries no session"},
	}
	for _, tt := range tests {
		req := httptest.NewRequest(tt.method, "/v1/account/session", strings.NewReader(tt.body))
		for i := 0; i+1 < len(tt.hdr); i += 2 {
			req.Header.Set(tt.hdr[i], tt.hdr[i+1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != tt.status || !strings.Contains(w.Body.String(), tt.says) {
			t.Errorf("%s: got %d %q; want %d saying %q", tt.name, w.Code, w.Body, tt.status, tt.says)
		}
		if w.Header().Get("Set-Cookie") != "" {
			t.Errorf("%s: a refusal set a cookie", tt.name)
		}
	}
}

// TestVisit checks what a host's page reads of a request through the session handler:
// the live session its cookie carries, with the Caller that acts as it and its CSRF
// token; nothing for a request without a cookie, or with a token that is not a
// session's.
func TestVisit(t *testing.T) {
	mgr, key := newManager(t, sessionOptions(t))
	h, err := session.NewHandler(mgr, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/account/session", strings.NewReader(`{"api_key":"`+key+`"}`)))
	if rec.Code != http.StatusCreated && rec.Code != http.StatusOK {
		t.Fatalf("start: %d %s", rec.Code, rec.Body)
	}
	cookies := rec.Result().Cookies()
	if len(cookies) != 1 {
		t.Fatalf("start set %d cookies", len(cookies))
	}
	page := func(cookie *http.Cookie) *http.Request {
		r := httptest.NewRequest("GET", "/account", nil)
		r.RemoteAddr = "192.0.2.7:1234"
		if cookie != nil {
			r.AddCookie(cookie)
		}
		return r
	}
	v, ok := h.Visit(page(cookies[0]))
	if !ok {
		t.Fatal("the session's cookie makes no visit")
	}
	if v.Claims.Account != "acct" || v.Claims.ID == "" || v.CSRFToken == "" ||
		v.Caller.Credential.Kind != auth.SessionHeader || v.Caller.Credential.Value != cookies[0].Value || v.Caller.Addr.String() != "192.0.2.7" {
		t.Fatalf("visit %+v", v)
	}
	if p, err := mgr.Service().Authenticate(t.Context(), v.Caller); err != nil || p.Account.ID != "acct" {
		t.Fatalf("the visit's caller: %v", err)
	}
	if !h.CheckCSRF(v, v.CSRFToken) || h.CheckCSRF(v, "") || h.CheckCSRF(v, v.CSRFToken+"x") {
		t.Error("CheckCSRF does not accept exactly the session's token")
	}
	if _, ok := h.Visit(page(nil)); ok {
		t.Error("a request without a cookie makes a visit")
	}
	forged := *cookies[0]
	forged.Value = "not-a-session-token"
	if _, ok := h.Visit(page(&forged)); ok {
		t.Error("a cookie that is not a session's makes a visit")
	}
}
