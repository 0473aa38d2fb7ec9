package doors_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/doors"
	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/examples/apis"
	"github.com/tollgate-dev/tollgate/mcp"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/wire"
)

const (
	key       = "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b"
	officeKey = "6fa459ea-ee8a-4ca4-894e-db77e160355e"
	token     = "an-admin-token-of-32-characters!"
)

// newService returns a service with the sample APIs on memory stores, with session
// tokens or without.
func newService(t *testing.T, sessions bool) *tollgate.Service {
	t.Helper()
	reg := &catalog.Registry{}
	if err := apis.Register(reg); err != nil {
		t.Fatal(err)
	}
	plans, err := billing.NewPlans(billing.Plan{Name: "pro", Credits: 1000, RatePerMinute: 600, Concurrency: 10, GraphQLMaxAPIs: 10, BatchMaxItems: 10})
	if err != nil {
		t.Fatal(err)
	}
	opts := &tollgate.Options{Logger: slog.New(slog.DiscardHandler)}
	if sessions {
		if opts.Sessions, err = auth.NewSessions([]byte(strings.Repeat("s", auth.MinSessionSecret))); err != nil {
			t.Fatal(err)
		}
		opts.SessionStore = memory.NewSessionStore()
	}
	svc, err := tollgate.New(reg, tollgate.Stores{Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
		Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter()}, plans, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	return svc
}

func get(t *testing.T, srv *httptest.Server, path string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	c := srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestMountRoutes: every door Mount mounts answers on its route, and a door it left
// out is not there.
func TestMountRoutes(t *testing.T) {
	for _, tt := range []struct {
		name     string
		sessions bool
		opts     doors.Options
		want     doors.Door
	}{
		{"default, no sessions", false, doors.Options{}, doors.REST | doors.GraphQL | doors.MCP | doors.Account},
		{"default with sessions and a token", true, doors.Options{AdminToken: token}, doors.All},
		{"REST alone", true, doors.Options{Doors: doors.REST}, doors.REST},
	} {
		t.Run(tt.name, func(t *testing.T) {
			svc := newService(t, tt.sessions)
			mux := http.NewServeMux()
			m, err := doors.Mount(mux, svc, &tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(m.Close)
			if m.Doors != tt.want {
				t.Fatalf("mounted %#x, want %#x", m.Doors, tt.want)
			}
			if _, _, _, err := m.Accounts.CreateAccount(t.Context(), accounts.Spec{ID: "acme", Plan: "pro", KeyValue: key}); err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(mux)
			t.Cleanup(srv.Close)
			for _, r := range []struct {
				door   doors.Door
				path   string
				hdr    []string
				status int
			}{
				{doors.REST, "/v1/hash?text=a", []string{wire.HeaderAPIKey, key}, 200},
				{doors.GraphQL, "/v1/graphql", []string{wire.HeaderAPIKey, key}, 405},
				{doors.MCP, "/v1/mcp", []string{wire.HeaderAPIKey, key, "Accept", "text/event-stream"}, 400},
				{doors.Account, "/v1/account", []string{wire.HeaderAPIKey, key}, 200},
				{doors.Sessions, "/v1/account/session", nil, 401},
				{doors.Dashboard, "/dashboard/sign-in", nil, 200},
				{doors.Admin, "/admin/v1/accounts/acme", []string{"Authorization", "Bearer " + token}, 200},
			} {
				resp, body := get(t, srv, r.path, r.hdr...)
				if mounted := tt.want&r.door != 0; mounted && resp.StatusCode != r.status {
					t.Errorf("GET %s: %s %.200s, want %d", r.path, resp.Status, body, r.status)
				} else if !mounted && resp.StatusCode == r.status && r.status != 404 {
					t.Errorf("GET %s answered %s though its door is not mounted", r.path, resp.Status)
				}
			}
			if tt.want&doors.Account != 0 {
				_, doc := get(t, srv, "/v1/openapi.json")
				if !strings.Contains(doc, `"/v1/account/keys"`) {
					t.Error("the OpenAPI document lacks the account holders' routes")
				}
			}
		})
	}
}

// TestOneEdge: one trusted-proxy setting serves every door: a key that may be used only
// from the office is served through the proxy on each, and refused from elsewhere.
func TestOneEdge(t *testing.T) {
	svc := newService(t, true)
	mux := http.NewServeMux()
	m, err := doors.Mount(mux, svc, &doors.Options{
		Edge: edge.Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	if _, _, _, err := m.Accounts.CreateAccount(t.Context(), accounts.Spec{ID: "acme", Plan: "pro", KeyValue: key}); err != nil {
		t.Fatal(err)
	}
	rs, err := auth.NewRestrictions(auth.RestrictionSpec{AllowedIPs: []string{"198.51.100.0/24"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.Accounts.CreateKey(t.Context(), "acme", accounts.NewKey{Name: "office", Restrictions: rs, Value: officeKey}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	for _, path := range []string{"/v1/hash?text=a", "/v1/account", "/v1/analytics"} {
		for _, from := range []struct {
			addr string
			ok   bool
		}{{"198.51.100.7", true}, {"203.0.113.9", false}} {
			resp, body := get(t, srv, path, wire.HeaderAPIKey, officeKey, "X-Forwarded-For", from.addr)
			if ok := resp.StatusCode == 200; ok != from.ok {
				t.Errorf("GET %s from %s: %s %.200s, want served %v", path, from.addr, resp.Status, body, from.ok)
			}
		}
	}
	// The session door reads the same address: a session started from the office.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/v1/account/session", strings.NewReader(`{"kind":"token"}`))
	req.Header.Set(wire.HeaderAPIKey, officeKey)
	req.Header.Set("X-Forwarded-For", "198.51.100.7")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var env wire.Envelope
	json.NewDecoder(resp.Body).Decode(&env)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("a session from the office: %s %+v", resp.Status, env)
	}
}

func TestMountRefuses(t *testing.T) {
	plain, withSessions := newService(t, false), newService(t, true)
	other := newService(t, false)
	otherMgr, err := accounts.New(other, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(otherMgr.Close)
	for _, tt := range []struct {
		name string
		svc  *tollgate.Service
		opts doors.Options
		want string
	}{
		{"dashboard without sessions", plain, doors.Options{Doors: doors.REST | doors.Dashboard}, "session tokens"},
		{"dashboard without the sessions door", withSessions, doors.Options{Doors: doors.Dashboard}, "needs the Sessions door"},
		{"admin without a token", plain, doors.Options{Doors: doors.Admin}, "AdminToken"},
		{"short token", plain, doors.Options{AdminToken: "short"}, "admin token"},
		{"OAuth without MCP", plain, doors.Options{Doors: doors.REST, OAuth: &doors.OAuth{Store: memory.NewOAuthStore()}}, "mount the MCP door"},
		{"OAuth without an issuer", plain, doors.Options{OAuth: &doors.OAuth{Store: memory.NewOAuthStore()}}, "PublicURL"},
		{"another service's manager", plain, doors.Options{Accounts: otherMgr}, "another service"},
		{"a bad origin", plain, doors.Options{Edge: edge.Options{AllowedOrigins: []string{"app.example"}}}, "not an origin"},
		{"an unknown door", plain, doors.Options{Doors: 1 << 12}, "unknown door"},
		{"OAuth and the host's own tokens", plain, doors.Options{PublicURL: "https://api.example", OAuth: &doors.OAuth{Store: memory.NewOAuthStore()},
			MCP: mcp.Options{Challenge: `Bearer resource_metadata="https://elsewhere.example"`}}, "leave Options.MCP.VerifyToken and Challenge unset"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mux := http.NewServeMux()
			m, err := doors.Mount(mux, tt.svc, &tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				if m != nil {
					m.Close()
				}
				t.Fatalf("Mount: %v, want an error about %q", err, tt.want)
			}
			// A failed Mount leaves the mux as it was.
			if _, pattern := mux.Handler(httptest.NewRequest(http.MethodGet, "/v1/catalog", nil)); pattern != "" {
				t.Errorf("a failed Mount registered %q", pattern)
			}
		})
	}
}

// TestMountOAuth: with OAuth, MCP sends a client without a key to the authorization
// server, whose metadata is mounted.
func TestMountOAuth(t *testing.T) {
	svc := newService(t, false)
	mux := http.NewServeMux()
	srv := httptest.NewUnstartedServer(mux)
	srv.Start()
	t.Cleanup(srv.Close)
	m, err := doors.Mount(mux, svc, &doors.Options{PublicURL: srv.URL, OAuth: &doors.OAuth{Store: memory.NewOAuthStore()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/v1/mcp", strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	challenge := resp.Header.Get("WWW-Authenticate")
	if resp.StatusCode != 401 || !strings.Contains(challenge, "/.well-known/oauth-protected-resource/v1/mcp") {
		t.Fatalf("MCP without a key: %s, challenge %q", resp.Status, challenge)
	}
	if resp, body := get(t, srv, "/.well-known/oauth-protected-resource/v1/mcp"); resp.StatusCode != 200 || !strings.Contains(body, srv.URL) {
		t.Errorf("resource metadata: %s %s", resp.Status, body)
	}
	if resp, body := get(t, srv, "/.well-known/oauth-authorization-server"); resp.StatusCode != 200 || !strings.Contains(body, `"token_endpoint"`) {
		t.Errorf("server metadata: %s %s", resp.Status, body)
	}
}

// TestMountRouteTaken: a route the host's mux already has fails Mount, and leaves the
// mux as it was: none of the other routes is registered.
func TestMountRouteTaken(t *testing.T) {
	svc := newService(t, false)
	mux := http.NewServeMux()
	mine := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	mux.Handle("/admin/", mine)
	before := runtime.NumGoroutine()
	m, err := doors.Mount(mux, svc, &doors.Options{AdminToken: token})
	if err == nil || !strings.Contains(err.Error(), "already has a handler for /admin/") {
		if m != nil {
			m.Close()
		}
		t.Fatalf("Mount: %v, want the taken route named", err)
	}
	for _, path := range []string{"/v1/catalog", "/v1/graphql", "/v1/account", "/v1/mcp"} {
		if _, pattern := mux.Handler(httptest.NewRequest(http.MethodGet, path, nil)); pattern != "" {
			t.Errorf("%s is routed to %q after a failed Mount", path, pattern)
		}
	}
	// The manager Mount made is closed: its goroutines end.
	deadline := time.Now().Add(time.Minute)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after a failed Mount, %d before", n, before)
	}
}
